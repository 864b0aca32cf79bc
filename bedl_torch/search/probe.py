"""Probes that decide how to search before searching: a few rows spread over X, their bounds,
and how much of their DP work (``|x| |y|`` summed over entries) the bounds leave open. Where most
stays open, the bounds and the search's many calls cost more than the matrix's tiles
(``docs/search.md``), which k-NN and range search then compute instead.
"""
from __future__ import annotations

import math

import torch

from .problem import SearchProblem

__all__ = ["PROBE_ROWS", "TREE_PROBE_MIN_ROWS", "probe_rows", "probe_candidates", "label_bounds",
           "keep_after_traversals", "work_of"]

#: Rows a probe looks at.
PROBE_ROWS = 16
#: Trees are probed with at least this many rows of X (the probe's rows then cost at most a 32nd
#: of the bounds).
TREE_PROBE_MIN_ROWS = 32 * PROBE_ROWS


def probe_rows(n: int) -> torch.Tensor:
    """Up to :data:`PROBE_ROWS` rows evenly spaced over ``0 .. n - 1``."""
    return torch.unique(torch.linspace(0, max(n - 1, 0), steps=min(n, PROBE_ROWS)).round().long())


def probe_candidates(problem: SearchProblem, rows: torch.Tensor) -> torch.Tensor:
    """The entries of ``rows`` (``(len(rows), ny)`` bool): all but each row's own column where X
    is Y."""
    cand = torch.ones(len(rows), problem.ny, dtype=torch.bool)
    if problem.same:
        cand[torch.arange(len(rows)), rows] = False
    return cand


def label_bounds(problem: SearchProblem, rows: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
    """The problem's label bound of the entries of ``rows`` (``-inf`` without one), ``+inf``
    outside ``cand``."""
    if problem.has_label:  # (the problem's label bound, which the search then uses)
        bound = problem.label.block(rows)
    else:
        bound = torch.full(cand.shape, -math.inf, dtype=torch.float64)
    return bound.masked_fill(~cand, math.inf)


def keep_after_traversals(problem: SearchProblem, rows: torch.Tensor, rl: torch.Tensor, c: torch.Tensor,
                          threshold: torch.Tensor, bound: torch.Tensor = None):
    """The entries ``(rows[rl], c)`` whose preorder and postorder bounds (trees) are at most
    their ``threshold`` (aligned with ``rl``), as ``(rl, c)``; ``bound`` (optional, indexed by
    ``(rl, c)``) raised to those bounds in place."""
    for order in ("pre", "post"):  # (inf above the threshold)
        a, b = problem.kernel_pairs(rows[rl], c)
        value = problem.traversal_values(a, b, order, threshold=threshold)
        if bound is not None:
            bound[rl, c] = torch.maximum(bound[rl, c], value)
        keep = value <= threshold
        rl, c, threshold = rl[keep], c[keep], threshold[keep]
    return rl, c


def work_of(problem: SearchProblem, rows: torch.Tensor) -> torch.Tensor:
    """The DP work ``|x| |y|`` of each entry of ``rows``."""
    return problem.mx[rows][:, None] * problem.my[None, :]
