"""Lower and upper bounds on edit distances that hold for any finite costs.

Every bound here bounds ``d(x, y; C)`` as defined in ``docs/edit-distances.md``: the least
cost of a mapping (replacements of its node pairs, deletions of the nodes of ``x`` and
insertions of the nodes of ``y`` that it leaves out) under a symbol cost table ``C`` whose
last row and column are the gap. Costs may be negative; none of the bounds assumes
non-negative, symmetric or metric costs. The argument for each is in its docstring.

Bounds (``X`` and ``Y`` lists of trees or of sequences, ``cost`` a
:class:`~bedl_torch.SymbolCost`, all results float64 ``(len(X), len(Y))`` CPU tensors):

* :func:`label_lower_bound`: from the two objects' label multisets only (trees and
  sequences); one matrix product over all pairs. Under unit costs it is the classic
  ``max(|x|, |y|) - |labels(x) & labels(y)|`` (multiset intersection).
* :func:`traversal_lower_bound`: the sequence edit distance of the preorder and of the
  postorder label sequences (trees only), computed by the sequence kernel.
* :func:`mapping_upper_bound`: the cost of two valid mappings (the empty one, and the one
  that maps the two roots, or the first elements of two sequences), per pair from sums.

The values are computed in floating point; where the search engine prunes with them it
subtracts :meth:`SymbolCosts.margin` first (see there), so rounding never loses a pair.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from ..costs import SymbolCost
from ..ops import FlatTable, pairwise_distances
from ..ops.encoding import check_same_kind, node_objects
from ..ops.pairwise import problem_inputs
from .label_bound import LabelBound
from .symbol_costs import SymbolCosts

__all__ = ["label_lower_bound", "traversal_lower_bound", "mapping_upper_bound", "postorder_labels",
           "traversal_sequences", "FirstPairUpper"]


# ---------------------------------------------------------------------------
# Preorder and postorder label sequences
# ---------------------------------------------------------------------------


def postorder_labels(tree) -> list:
    """The labels of a tree in postorder (:meth:`~bedl_torch.Tree.postorder_labels`)."""
    return list(tree.postorder_labels())


def traversal_sequences(trees: Sequence, order: str) -> list:
    """The preorder (``order="pre"``) or postorder label sequences of trees: the tuples each
    tree holds (no copies)."""
    if order == "pre":
        return [t.labels for t in trees]
    return [t.postorder_labels() for t in trees]


def _prepare(X, Y, cost, unknown):
    """The objects and the cost module as a matrix takes them (:func:`problem_inputs`), and
    both collections flattened."""
    same = Y is None
    X, Y, cost, _ = problem_inputs(X, Y, cost, None)
    x_table = FlatTable(X, "X")
    y_table = x_table if same else FlatTable(Y, "Y")
    check_same_kind(x_table, y_table)
    return X, Y, cost, x_table, y_table


def label_lower_bound(X: Sequence, Y: Optional[Sequence] = None, cost: Optional[SymbolCost] = None, *,
                      unknown: str = "error") -> torch.Tensor:
    """The label-multiset lower bound of every pair (see :class:`LabelBound` for the
    argument): valid for any finite costs, trees and sequences.

    Args:
        X, Y: lists of trees or of sequences (``Y=None``: ``Y = X``). cost: a
            :class:`~bedl_torch.SymbolCost` (default unit costs over the labels of X and Y).
        unknown: as for :func:`bedl_torch.pairwise_distances`.

    Returns:
        float64 ``(len(X), len(Y))`` on the CPU, ``<= pairwise_distances(X, Y, cost)`` up to
        rounding (see :meth:`SymbolCosts.margin`).
    """
    X, Y, cost, x_table, y_table = _prepare(X, Y, cost, unknown)
    xc, yc = x_table.flat_labels(cost, unknown), y_table.flat_labels(cost, unknown)
    costs = SymbolCosts(cost, [xc, yc])
    bound = LabelBound(costs, costs.local(xc), x_table.ptr, costs.local(yc), y_table.ptr)
    return bound.block(torch.arange(len(X)))


def traversal_lower_bound(X: Sequence, Y: Optional[Sequence] = None, cost: Optional[SymbolCost] = None, *,
                          order: str = "both", rel_tol: Optional[float] = None,
                          unknown: str = "error") -> torch.Tensor:
    """The sequence edit distance of the trees' preorder (and/or postorder) label sequences
    under the same costs: a lower bound on the tree edit distance for any finite costs.

    **Argument.** A tree mapping ``M`` keeps ancestry and left-to-right order: for two of its
    pairs ``(i1, j1)``, ``(i2, j2)``, ``i1`` is an ancestor of ``i2`` iff ``j1`` is one of
    ``j2``, and ``i1`` is left of ``i2`` iff ``j1`` is left of ``j2``. Preorder puts a node
    after its ancestors and after the nodes left of it, so ``i1 < i2`` in preorder iff
    ``j1 < j2`` in preorder: ``M`` is an order-preserving alignment of the two preorder
    sequences, and it costs the same there (the same replacements, deletions and
    insertions, read from the same table). So ``SED(pre(x), pre(y)) <= cost(M)`` for every
    mapping, hence ``<= TED(x, y)``; likewise for postorder (a node comes after its
    descendants and after the nodes left of it). Nothing about the costs is assumed.

    Args:
        X, Y: lists of trees (``Y=None``: ``Y = X``). cost: as for
            :func:`label_lower_bound`. order: ``"pre"``, ``"post"`` or ``"both"`` (the
            larger of the two). rel_tol, unknown: as for :func:`bedl_torch.pairwise_distances`.

    Returns:
        float64 ``(len(X), len(Y))`` on the CPU.

    Raises:
        TypeError: sequences (for them the sequence edit distance is the distance itself).
        ValueError: an unknown ``order``.
    """
    if order not in ("pre", "post", "both"):
        raise ValueError(f"order must be 'pre', 'post' or 'both', got {order!r}")
    X, Y, cost, x_table, y_table = _prepare(X, Y, cost, unknown)
    kind = x_table.kind or y_table.kind
    if kind == "sequence":
        raise TypeError("traversal_lower_bound is for trees (a sequence's distance is its SED)")
    same = Y is X
    out = None
    for name in ("pre", "post"):
        if order not in (name, "both"):
            continue
        xs = traversal_sequences(X, name)
        ys = None if same else traversal_sequences(Y, name)
        with torch.no_grad():
            d = pairwise_distances(xs, ys, cost, rel_tol=rel_tol, unknown=unknown,
                                   symmetric=False).detach().to("cpu", torch.float64)
        out = d if out is None else torch.maximum(out, d)
    return out


class FirstPairUpper:
    """Two valid mappings' costs per pair, from per-object sums: the empty mapping (delete
    every node of ``x``, insert every node of ``y``) and, for two non-empty objects, the
    mapping ``{(first of x, first of y)}`` (the two roots of two trees: a single pair keeps
    ancestry and order trivially; the first elements of two sequences). Any mapping's cost is
    an upper bound on the distance (the least cost over mappings), whatever the costs:

        d(x, y) <= D(x) + I(y) + min(0, C[x_0, y_0] - C[x_0, gap] - C[gap, y_0])

    with ``D(x) = sum_i C[x_i, gap]``, ``I(y) = sum_j C[gap, y_j]``.
    """

    def __init__(self, costs: SymbolCosts, x_codes, x_ptr, y_codes, y_ptr):
        self.costs = costs
        self.x = _Ends(x_codes, x_ptr, costs.delete)
        self.y = _Ends(y_codes, y_ptr, costs.insert)

    def block(self, rows: torch.Tensor, cols: Optional[torch.Tensor] = None, swap: bool = False) -> torch.Tensor:
        """Upper bounds ``(len(rows), len(cols))`` of ``d(x[rows[i]], y[cols[j]])``; ``swap=True``
        bounds ``d(x[cols[j]], y[rows[i]])`` instead (as for :meth:`LabelBound.block`)."""
        if cols is None:
            cols = torch.arange(len(self.y.total))
        xs, ys = (rows, cols) if not swap else (cols, rows)
        # the first pair's gain over distinct first symbols (few: roots, first words), then
        # per pair by gathering
        ux, ix = torch.unique(self.x.first[xs], return_inverse=True)
        uy, iy = torch.unique(self.y.first[ys], return_inverse=True)
        rep = self.costs.entries(ux[:, None].expand(len(ux), len(uy)), uy[None, :].expand(len(ux), len(uy)))
        gain = torch.clamp(rep - self.costs.delete[ux][:, None] - self.costs.insert[uy][None, :], max=0.0)
        # (an empty object's first symbol is the gap: no pair of roots)
        gain[ux == len(self.costs.delete) - 1, :] = 0.0
        gain[:, uy == len(self.costs.insert) - 1] = 0.0
        out = (self.x.total[xs][:, None] + self.y.total[ys][None, :]) + gain[ix][:, iy]
        return out if not swap else out.T


class _Ends:
    """Per object: the sum of its nodes' gap costs, whether it has a node, its first node's
    symbol (the gap where empty)."""

    def __init__(self, codes, ptr, gap_costs):
        n = len(ptr) - 1
        lengths = ptr[1:] - ptr[:-1]
        self.total = torch.zeros(n, dtype=torch.float64)
        if len(codes):
            self.total.index_add_(0, node_objects(ptr), gap_costs[codes])
        self.nonempty = lengths > 0
        self.first = torch.full((n,), len(gap_costs) - 1, dtype=torch.long)
        self.first[self.nonempty] = codes[ptr[:-1][self.nonempty]]


def mapping_upper_bound(X: Sequence, Y: Optional[Sequence] = None, cost: Optional[SymbolCost] = None, *,
                        unknown: str = "error") -> torch.Tensor:
    """Upper bounds on every pair's distance from two valid mappings (see
    :class:`FirstPairUpper`): valid for any finite costs, trees and sequences.

    Returns:
        float64 ``(len(X), len(Y))`` on the CPU, ``>= pairwise_distances(X, Y, cost)`` up to
        rounding.
    """
    X, Y, cost, x_table, y_table = _prepare(X, Y, cost, unknown)
    xc, yc = x_table.flat_labels(cost, unknown), y_table.flat_labels(cost, unknown)
    costs = SymbolCosts(cost, [xc, yc])
    bound = FirstPairUpper(costs, costs.local(xc), x_table.ptr, costs.local(yc), y_table.ptr)
    return bound.block(torch.arange(len(X)))
