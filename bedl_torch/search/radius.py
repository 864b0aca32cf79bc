"""Exact range search: every pair within a radius, pruned by bounds.

A block of query rows takes the label bound of its entries (symmetric problems: only those
after the block's first row, ``c > r``), then the traversal bounds of the entries at or below
``radius`` (trees), then the exact distances of the survivors, whose kernels stop a pair once
it cannot end at or below ``radius``. The open entries of consecutive blocks are verified in
one exact call (:func:`radius_blocks`). Where no bound pays
(:func:`~bedl_torch.search.tiles.exact_is_cheapest`, or ``radius`` is ``inf``) the matrix's
tiles are thresholded instead (:func:`~bedl_torch.search.tiles.radius_all_pairs`). An entry is left out only where a
bound, less the rounding margin, exceeds ``radius``: an entry at exactly ``radius`` is kept.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import torch

from .._memory import release_freed_memory
from ..costs import SymbolCost
from .arguments import block_rows, check_mode, check_radius
from . import probe
from .merge import concat_entries, sorted_entries, with_partners
from .probe import keep_after_traversals, label_bounds, probe_candidates, probe_rows, work_of
from .problem import BOUNDS, SearchProblem, merge_stats, new_stats
from .tiles import exact_is_cheapest, radius_all_pairs

__all__ = ["radius_neighbors", "problem_radius_neighbors", "radius_blocks", "radius_block",
           "radius_candidates", "radius_verify", "radius_takes_every_pair", "open_work_share",
           "RADIUS_OPEN_WORK_SHARE", "RADIUS_POOL_ENTRIES"]

#: Trees: where a probe of rows spread over X finds the entries that the label and traversal bounds
#: leave at or below the radius holding more than this share of its rows' DP work (``|x| |y|``),
#: range search thresholds the matrix's tiles instead (near where the bounds stop paying:
#: docs/search.md).
RADIUS_OPEN_WORK_SHARE = 0.85

#: Range search pools the entries its bounds leave open over blocks of rows up to this many, so
#: that one exact call verifies them: where costs come in tiles (no whole symbol table), every
#: exact call builds the tiles of all the objects it covers (see :meth:`SearchProblem.exact`)
RADIUS_POOL_ENTRIES = 1 << 22


def radius_takes_every_pair(problem: SearchProblem, radius: float) -> bool:
    """Whether a range search thresholds the matrix's tiles: no bound pays
    (:func:`~bedl_torch.search.tiles.exact_is_cheapest`), ``radius`` is ``inf``, which no
    bound can exceed, or (trees) a probe expects the bounds to leave more than
    :data:`RADIUS_OPEN_WORK_SHARE` of the DP work at or below ``radius``."""
    if exact_is_cheapest(problem) or radius == math.inf:
        return True
    share = open_work_share(problem, radius)
    return share is not None and share > RADIUS_OPEN_WORK_SHARE


def open_work_share(problem: SearchProblem, radius: float) -> Optional[float]:
    """Trees of at least ``probe.TREE_PROBE_MIN_ROWS`` rows of X: the share of the DP work of
    probe rows spread over X held by the entries whose label and traversal bounds are at most
    ``radius`` (those the search would verify; the traversals only where the label bound leaves
    more than :data:`RADIUS_OPEN_WORK_SHARE` open). None where not probed."""
    if problem.traversal is None or problem.nx < probe.TREE_PROBE_MIN_ROWS:
        return None
    rows = probe_rows(problem.nx)
    cand = probe_candidates(problem, rows)
    work = work_of(problem, rows)
    total = float(work[cand].sum())
    if total == 0:
        return None
    rl, c = torch.nonzero(label_bounds(problem, rows, cand) <= radius, as_tuple=True)
    share = float(work[rl, c].sum()) / total
    if share <= RADIUS_OPEN_WORK_SHARE:  # (the traversal bounds only lower it)
        return share
    rl, c = keep_after_traversals(problem, rows, rl, c, torch.full((len(rl),), float(radius), dtype=torch.float64))
    return float(work[rl, c].sum()) / total


def radius_candidates(problem: SearchProblem, r0: int, r1: int, radius: float):
    """The entries ``(r, c)`` of rows ``r0 .. r1 - 1`` that no bound places above ``radius``
    (symmetric problems: only ``c > r``), and the block's stats so far (``exact`` and
    ``exact_computed`` are :func:`radius_verify`'s)."""
    rows = torch.arange(r0, r1)
    B, ny = len(rows), problem.ny
    stats = new_stats()
    if B == 0 or ny == 0:
        return torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), stats
    # symmetric: only the columns after the block's first row (the entries c > r)
    first = r0 + 1 if problem.symmetric else 0
    cols = torch.arange(first, ny)
    if problem.symmetric:
        cand = cols[None, :] > rows[:, None]
        weight = 2  # each computed pair stands for two entries
    elif problem.same:
        cand = cols[None, :] != rows[:, None]
        weight = 1
    else:
        cand = torch.ones(B, ny, dtype=torch.bool)
        weight = 1
    n_cand = int(cand.sum())
    stats["pairs"] = weight * n_cand
    L = problem.lower_block(rows, first)
    rl, c = torch.nonzero(cand & (L <= radius), as_tuple=True)
    c += first
    del L, cand
    stats["decided_by_label"] = weight * (n_cand - len(rl))
    thr = torch.full((len(rl),), float(radius), dtype=torch.float64)
    sub = new_stats()
    rl, c, _, _ = problem.prune_by_traversal(rows, rl, c, thr, sub)
    stats["decided_by_traversal"] = weight * sub["decided_by_traversal"]
    stats["traversal_computed"] = sub["traversal_computed"]
    return rows[rl], c, stats


def radius_verify(problem: SearchProblem, r: torch.Tensor, c: torch.Tensor, radius: float, stats: dict):
    """The entries among ``(r, c)`` (from :func:`radius_candidates`) with distance ``<= radius``,
    by one exact call; symmetric problems also list them mirrored. Counts the call in
    ``stats``."""
    a, b = problem.kernel_pairs(r, c)
    v = problem.exact(a, b, threshold=torch.full((len(r),), float(radius), dtype=torch.float64),
                      distinct=True)
    stats["exact_computed"] += len(r)
    stats["exact"] += (2 if problem.symmetric else 1) * len(r)
    keep = v <= radius
    return with_partners(problem.symmetric, r[keep], c[keep], v[keep])


def radius_block(problem: SearchProblem, r0: int, r1: int, radius: float):
    """Every entry ``(r, c)`` with ``r0 <= r < r1`` and distance ``<= radius`` (symmetric
    problems: computed for ``c > r`` and also returned mirrored as ``(c, r)``, so the blocks of
    all rows together give every entry once).

    Returns:
        ``(rows, cols, distances, stats)``, unsorted; int64, int64, float64.
    """
    r, c, stats = radius_candidates(problem, r0, r1, radius)
    return (*radius_verify(problem, r, c, radius, stats), stats)


def radius_neighbors(X: Sequence, Y: Optional[Sequence] = None, *, radius: float,
                     cost: Optional[SymbolCost] = None, mode: str = "exact",
                     chunk_size: Optional[int] = None, rel_tol: Optional[float] = None,
                     unknown: str = "error", symmetric: Optional[bool] = None,
                     block_size: Optional[int] = None, bounds: Sequence[str] = BOUNDS,
                     return_stats: bool = False):
    """Every pair ``(i, j)`` with ``d(X[i], Y[j]) <= radius``, exactly, without the whole matrix.

    The answer is the entries of ``bedl_torch.pairwise_distances(X, Y, cost)`` at most
    ``radius`` (compared in float64), without the diagonal when ``Y`` is None (an object is
    not its own neighbour; both ``(i, j)`` and ``(j, i)`` are listed). Distances as for
    :func:`kneighbors`. Costs may be negative, and so may ``radius``.

    Args:
        radius: a real number (not NaN; ``inf`` gives every pair).
        Others: as for :func:`kneighbors`.

    Returns:
        ``(rows, cols, distances)`` (and the stats dict of :func:`kneighbors`): 1-D int64,
        int64 and float64 CPU tensors sorted by row, then column.

    Raises:
        TypeError: ``radius`` not a real number; as :func:`kneighbors`.
        ValueError: ``radius`` NaN; as :func:`kneighbors`.
    """
    check_mode(mode)
    radius = check_radius(radius)
    problem = SearchProblem(X, Y, cost, rel_tol=rel_tol, unknown=unknown, symmetric=symmetric,
                            chunk_size=chunk_size, bounds=bounds)
    return problem_radius_neighbors(problem, radius, block_size, return_stats)


def problem_radius_neighbors(problem: SearchProblem, radius: float, block_size: Optional[int] = None,
                             return_stats: bool = False):
    """:func:`radius_neighbors` of a prepared problem (``radius`` checked by the caller)."""
    step = block_rows(problem, block_size)  # (checks block_size either way)
    if radius_takes_every_pair(problem, radius):
        r, c, v, stats = radius_all_pairs(problem, radius)
        out = (*sorted_entries(r, c, v, problem.ny), stats)
    else:
        out = radius_blocks(problem, list(range(0, problem.nx, step)), radius, step)
    if return_stats:
        return out
    return out[:3]


def radius_blocks(problem: SearchProblem, starts: Sequence[int], radius: float,
                  step: Optional[int] = None, on_rows=None, stop: Optional[int] = None):
    """Every entry within ``radius`` of the blocks of rows starting at ``starts`` (each ``step``
    rows, default :func:`block_rows`' own, none past row ``stop``, default the last): each
    block's bounds, then the open entries of consecutive blocks, up to
    :data:`RADIUS_POOL_ENTRIES`, in one exact call. ``on_rows(n)`` (optional) is told each time
    ``n`` more rows are finished. Returns ``(rows, cols, distances, stats)`` sorted by row, then
    column."""
    step = block_rows(problem, None) if step is None else step
    stop = problem.nx if stop is None else min(stop, problem.nx)
    found, parts, pool, pool_rows, pool_entries = [], [], [], 0, 0

    def verify_pool():
        nonlocal pool, pool_rows, pool_entries
        if pool:
            r, c = torch.cat([p[0] for p in pool]), torch.cat([p[1] for p in pool])
            found.append(radius_verify(problem, r, c, radius, parts[-1]))
        if on_rows is not None and pool_rows:
            on_rows(pool_rows)
        pool, pool_rows, pool_entries = [], 0, 0

    for r0 in starts:
        r1 = min(stop, r0 + step)
        r, c, stats = radius_candidates(problem, r0, r1, radius)
        release_freed_memory()
        parts.append(stats)
        if len(r):
            pool.append((r, c))
            pool_entries += len(r)
        pool_rows += r1 - r0
        if pool_entries >= RADIUS_POOL_ENTRIES:
            verify_pool()
    verify_pool()
    return (*sorted_entries(*concat_entries(found), problem.ny), merge_stats(*parts))
