"""The label-multiset lower bound (:class:`LabelBound`): per-symbol potentials under the cost
table, and the weighted multiset intersections of every pair from one matrix product (or, for
few rows, from each object's label counts).
"""
from __future__ import annotations

import warnings
from typing import List, Optional

import torch

from ..ops.encoding import LabelCounts, label_counts, node_objects, object_nodes, owners
from .symbol_costs import SymbolCosts

__all__ = ["LabelBound"]

# Entries of one dense block of label features (float64: 32 MB).
_FEATURE_CELLS = 1 << 22
# Above this many (symbol, level) features the query side of the product is sparse.
_DENSE_FEATURES = 2048
# The label bound's intersections come from the label counts where rows x the columns' (object,
# symbol) entries are at most this many times the columns' dense features (few queries; measured
# on syntax trees)...
_COUNT_FORM_RATIO = 0.25
# ...and, where Y's side of the product is sparse (more than _DENSE_FEATURES features: word
# vocabularies), for at most this many rows: the sparse product reads each column's entries once
# for all its rows, the counts once per row.
_COUNT_FORM_SPARSE_ROWS = 2


class LabelBound:
    """The label-multiset lower bound of every pair of two collections, prepared once.

    **The bound.** Take per-symbol numbers ``p`` (for symbols of ``x``) and ``q`` (for
    symbols of ``y``) with

        p[a] <= C[a, gap],   q[b] <= C[gap, b],   p[a] + q[b] <= C[a, b]  for a != b

    (``a`` over the symbols occurring in X, ``b`` over those in Y). Charge each node of
    ``x`` its ``p`` and each node of ``y`` its ``q``. In any mapping a deleted node of ``x``
    costs ``C[a, gap] >= p[a]``, an inserted node of ``y`` costs ``C[gap, b] >= q[b]``, a
    pair with different symbols costs ``C[a, b] >= p[a] + q[b]``, and a pair of equal symbols
    ``a`` costs ``C[a, a] = p[a] + q[a] + w[a]`` with ``w[a] = C[a, a] - p[a] - q[a]``. So
    every mapping costs at least ``P(x) + Q(y) + sum over its equal-symbol pairs of w``, and
    since a mapping has at most ``min(h_x(a), h_y(a))`` pairs of symbol ``a`` (``h`` the label
    counts),

        d(x, y) >= P(x) + Q(y) + sum_a min(0, w[a]) min(h_x(a), h_y(a)),

    with ``P(x) = sum_i p[x_i]``, ``Q(y) = sum_j q[y_j]``. No sign, symmetry or triangle
    inequality of ``C`` is used: it holds for any finite costs, trees and sequences alike
    (the structure of a mapping is not used either). Three choices of ``(p, q)`` are taken
    and the largest bound kept:

    * A: ``p = C[., gap]``, ``q[b] = min(C[gap, b], min_{a != b} C[a, b] - p[a])``;
    * B: ``q = C[gap, .]``, ``p[a] = min(C[a, gap], min_{b != a} C[a, b] - q[b])``;
    * half: ``q[b] = min(C[gap, b], min_{a != b} C[a, b] / 2)``, then ``p`` as in B for it;
      only where the module has a whole table: it takes a second pass over the costs, which
      modules without one compute block by block (cosine costs over 7,487 SST words: 0.4 s,
      for 0.1% more entries decided).

    (Each ``p`` or ``q`` is the largest the constraints allow given the other.) Under unit
    costs A gives ``|x| - |x & y|`` and B ``|y| - |x & y|``: their maximum is the classic
    histogram-intersection bound. The suggested bound with ``b`` running over all symbols,
    ``a = b`` included, is choice B with ``w >= 0``, which B never falls below.

    **Computation.** ``min(h_x(a), h_y(a)) = sum_t [h_x(a) >= t][h_y(a) >= t]``, so with one
    feature per (symbol, level ``t``) and object vectors ``u`` of 0/1 features, the weighted
    sum is ``u_x diag(min(0, w)) u_y^T``: one matrix product per block of pairs (each object
    has as many nonzero features as nodes). ``P`` and ``Q`` are per-object sums.

    Args:
        costs: :class:`SymbolCosts` over the symbols of both collections.
        x_codes, y_codes: local symbol indices of every node, concatenated; x_ptr, y_ptr: int64
            ``(n + 1,)`` object boundaries.
        x_rows_only: read only the cost rows of X's symbols for the potentials (a few objects
            of X against all of Y: the same bounds in this orientation, without a pass over the
            whole vocabulary; ``swap=True`` is then not available).
        x_counts, y_counts: each collection's :class:`~bedl_torch.ops.encoding.LabelCounts`
            where the caller has them (a prepared collection's, cached per cost module).
    """

    def __init__(self, costs: SymbolCosts, x_codes: torch.Tensor, x_ptr: torch.Tensor,
                 y_codes: torch.Tensor, y_ptr: torch.Tensor, x_rows_only: bool = False, *,
                 x_counts: Optional[LabelCounts] = None, y_counts: Optional[LabelCounts] = None):
        self.costs = costs
        k = costs.k
        in_x = torch.zeros(k, dtype=torch.bool)
        in_x[x_codes] = True
        in_y = torch.zeros(k, dtype=torch.bool)
        in_y[y_codes] = True
        self.variants = _potentials(costs, in_x, in_y, x_rows_only)
        # distinct weight vectors: one matrix product each
        self.weights: List[torch.Tensor] = []
        self.which: List[int] = []
        for _, _, w in self.variants:
            for i, other in enumerate(self.weights):
                if torch.equal(other, w):
                    self.which.append(i)
                    break
            else:
                self.which.append(len(self.weights))
                self.weights.append(w)
        self.x = _Features(x_codes, x_ptr, k, x_counts)
        self.y = _Features(y_codes, y_ptr, k, y_counts)
        self._swap_invariant = None
        levels = torch.maximum(self.x.max_count, self.y.max_count)
        self.offset = torch.cumsum(levels, 0) - levels
        self.n_features = int(levels.sum())
        self.P = [self.x.sums(p) for p, _, _ in self.variants]
        self.Q = [self.y.sums(q) for _, q, _ in self.variants]
        # float32 products are exact where weights are small integers (unit costs)
        self.exact32 = []
        longest = max(self.x.max_len, self.y.max_len, 1)
        for w in self.weights:
            top = float(w.abs().max()) if len(w) else 0.0
            small = bool((w == torch.round(w)).all()) and top * longest < 2 ** 23
            self.exact32.append(small)

    def block(self, rows: torch.Tensor, cols: Optional[torch.Tensor] = None, swap: bool = False) -> torch.Tensor:
        """Bounds ``(len(rows), len(cols))`` of the pairs ``(x[rows[i]], y[cols[j]])`` (all of
        Y for ``cols=None``); ``swap=True`` bounds ``d(y[cols[j]], x[rows[i]])`` instead (the
        collections must then be the same, as the potentials were taken over both)."""
        return self._blocks(rows, cols, (swap,))[0]

    def both_orientations(self, rows: torch.Tensor, cols: Optional[torch.Tensor] = None):
        """``(block(rows, cols), block(rows, cols, swap=True))`` from one set of products (the
        weighted intersections do not depend on the orientation)."""
        return self._blocks(rows, cols, (False, True))

    @property
    def swap_invariant(self) -> bool:
        """Whether ``block(rows, cols, swap=True)`` equals ``block(rows, cols)`` (the same
        collection on both sides): every choice ``(p, q)`` comes with ``(q, p)`` and the same
        weights, as under unit costs or any costs whose potentials came out symmetric."""
        if self._swap_invariant is None:
            same = self.x is self.y or (torch.equal(self.x.ptr, self.y.ptr) and torch.equal(self.x.codes, self.y.codes))
            self._swap_invariant = same and all(
                any(torch.equal(p, q2) and torch.equal(q, p2) and self.which[v] == self.which[u]
                    for u, (p2, q2, _) in enumerate(self.variants))
                for v, (p, q, _) in enumerate(self.variants))
        return self._swap_invariant

    def _blocks(self, rows, cols, orientations) -> List[torch.Tensor]:
        if cols is None:
            cols = torch.arange(len(self.y.ptr) - 1)
        W = [self._weighted_intersections(rows, cols, w, e) for w, e in zip(self.weights, self.exact32)]
        outs = []
        for swap in orientations:
            out = None
            for which, Wi in enumerate(W):
                # max over the variants of one weight vector, then its products added once
                # (rounding is monotone: the same numbers as adding them to every variant)
                lb = None
                for v, (P, Q) in enumerate(zip(self.P, self.Q)):
                    if self.which[v] != which:
                        continue
                    sums = Q[rows][:, None] + P[cols][None, :] if swap else P[rows][:, None] + Q[cols][None, :]
                    lb = sums if lb is None else torch.maximum(lb, sums, out=lb)
                lb += Wi
                out = lb if out is None else torch.maximum(out, lb, out=out)
            outs.append(out)
        return outs

    def _weighted_intersections(self, rows, cols, w, exact32: bool) -> torch.Tensor:
        """``sum_a min(0, w[a]) min(h_x(a), h_y(a))`` for rows x cols."""
        dtype = torch.float32 if exact32 else torch.float64
        out = torch.zeros(len(rows), len(cols), dtype=torch.float64)
        if self.n_features == 0 or len(rows) == 0 or len(cols) == 0:
            return out
        entries = self.y.counts.ptr[cols + 1] - self.y.counts.ptr[cols]
        if self.n_features > _DENSE_FEATURES:
            counts_pay = len(rows) <= _COUNT_FORM_SPARSE_ROWS
        else:
            counts_pay = len(rows) * int(entries.sum()) <= _COUNT_FORM_RATIO * len(cols) * self.n_features
        if counts_pay:
            return self._count_intersections(rows, cols, w)
        step = max(1, _FEATURE_CELLS // max(1, self.n_features))
        if self.n_features > _DENSE_FEATURES:
            # many features (words): Y's side sparse, X's side dense in chunks of rows, laid out
            # features x rows (each chunk's zeros are what the product reads; no transposed copy)
            uy = self.y.sparse(cols, self.offset, self.n_features, None, torch.float64)
            for s in range(0, len(rows), step):
                ux_t = self.x.dense_t(rows[s:s + step], self.offset, self.n_features, w, torch.float64)
                out[s:s + step] = torch.sparse.mm(uy, ux_t).T
            return out
        # few features (node types): a dense product
        ux = self.x.dense(rows, self.offset, self.n_features, w, dtype)
        for s in range(0, len(cols), step):
            uy = self.y.dense(cols[s:s + step], self.offset, self.n_features, None, dtype)
            out[:, s:s + step] = (ux @ uy.T).to(torch.float64)
        return out

    def _count_intersections(self, rows, cols, w) -> torch.Tensor:
        """:meth:`_weighted_intersections` from the label counts, for few rows: each symbol
        ``a`` of a column's object adds ``w[a] min(h_x(a), h_y(a))`` (``R x`` the columns'
        entries, instead of every column's dense features)."""
        y_entries, y_lengths = object_nodes(self.y.counts.ptr, cols)
        x_entries, x_lengths = object_nodes(self.x.counts.ptr, rows)
        h_x = torch.zeros(len(rows), len(w), dtype=torch.long)
        row_of = owners(x_lengths, len(x_entries))
        h_x[row_of, self.x.entry_symbol[x_entries]] = self.x.counts.count[x_entries]
        symbol = self.y.entry_symbol[y_entries]
        shared = torch.minimum(h_x[:, symbol], self.y.counts.count[y_entries][None, :])
        col_of = owners(y_lengths, len(y_entries))
        out = torch.zeros(len(rows), len(y_lengths), dtype=torch.float64)
        return out.index_add_(1, col_of, shared * w[symbol])


class _Features:
    """One collection's nodes as (object, symbol, level) features: the ``t``-th node of symbol
    ``a`` in an object has level ``t`` (1-based; ``level`` holds ``t - 1``). ``counts``: the
    collection's :class:`~bedl_torch.ops.encoding.LabelCounts` where the caller has them (a
    prepared table caches them per cost module)."""

    def __init__(self, codes: torch.Tensor, ptr: torch.Tensor, k: int, counts: Optional[LabelCounts] = None):
        n = len(ptr) - 1
        lengths = ptr[1:] - ptr[:-1]
        self.ptr, self.codes = ptr, codes
        self.max_len = int(lengths.max()) if n else 0
        self.counts = label_counts(codes, ptr) if counts is None else counts
        self.level = self.counts.level
        # per entry (an object and one of its symbols): the object and the symbol
        self.entry_object = node_objects(self.counts.ptr)
        self.entry_symbol = codes[self.counts.first]
        self.max_count = torch.zeros(k, dtype=torch.long)
        if len(codes):
            self.max_count.scatter_reduce_(0, self.entry_symbol, self.counts.count, reduce="amax")

    def sums(self, values: torch.Tensor) -> torch.Tensor:
        """Per object, the sum of ``values[symbol]`` over its nodes (float64)."""
        out = torch.zeros(len(self.ptr) - 1, dtype=torch.float64)
        if len(self.codes):
            out.index_add_(0, self.entry_object, values[self.entry_symbol] * self.counts.count)
        return out

    def _entries(self, objects: torch.Tensor, offset, weights, dtype):
        """(row, feature, value) of the nonzero features of ``objects``, one per node."""
        node, lengths = object_nodes(self.ptr, objects)
        total = len(node)
        row = owners(lengths, total)
        sym = self.codes[node]
        feat = offset[sym] + self.level[node]
        vals = torch.ones(total, dtype=dtype) if weights is None else weights[sym].to(dtype)
        return row, feat, vals, lengths

    def dense(self, objects: torch.Tensor, offset, n_features: int, weights, dtype) -> torch.Tensor:
        """0/1 (or ``weights[symbol]``) feature rows of ``objects``."""
        row, feat, vals, _ = self._entries(objects, offset, weights, dtype)
        out = torch.zeros(len(objects), n_features, dtype=dtype)
        out[row, feat] = vals
        return out

    def dense_t(self, objects: torch.Tensor, offset, n_features: int, weights, dtype) -> torch.Tensor:
        """:meth:`dense` transposed: ``(n_features, len(objects))``, contiguous."""
        row, feat, vals, _ = self._entries(objects, offset, weights, dtype)
        out = torch.zeros(n_features, len(objects), dtype=dtype)
        out[feat, row] = vals
        return out

    def sparse(self, objects: torch.Tensor, offset, n_features: int, weights, dtype) -> torch.Tensor:
        """The same rows as a sparse CSR tensor."""
        row, feat, vals, lengths = self._entries(objects, offset, weights, dtype)
        order = torch.argsort(row * n_features + feat)
        crow = torch.zeros(len(objects) + 1, dtype=torch.long)
        torch.cumsum(lengths, 0, out=crow[1:])
        with warnings.catch_warnings():  # "sparse CSR support is in beta"
            warnings.simplefilter("ignore", UserWarning)
            return torch.sparse_csr_tensor(crow, feat[order], vals[order], (len(objects), n_features))


def _min_over_others(values: torch.Tensor, member: torch.Tensor) -> torch.Tensor:
    """``out[b] = min(values[a] for member a != b)`` (inf where there is none), in O(k): the
    smallest member value everywhere but at its own index, which gets the second smallest."""
    vals = torch.where(member, values, float("inf"))
    out = torch.full_like(vals, float("inf"))
    if len(vals) < 2:
        return out
    two = torch.topk(vals, 2, largest=False)
    out.fill_(float(two.values[0]))
    out[two.indices[0]] = two.values[1]
    return out


def _unit_potentials(costs: SymbolCosts, in_x: torch.Tensor, in_y: torch.Tensor):
    """:func:`_potentials` where ``C = 1 - I`` (:class:`UnitCost`): every off-diagonal entry is
    1, so each minimum over a row or column is one over the other symbols of a side, formed
    by the same float64 operations on the same numbers (the same bits)."""
    delete, insert, diag = costs.delete, costs.insert, costs.diag
    q_a = torch.minimum(insert, _min_over_others(1.0 - delete, in_x))
    p_b = torch.minimum(delete, _min_over_others(1.0 - insert, in_y))
    col_min = _min_over_others(torch.ones_like(delete), in_x)
    q_h = torch.minimum(insert, col_min / 2)
    p_h = torch.minimum(delete, _min_over_others(1.0 - q_h, in_y))
    return [(p, q, torch.clamp(diag - p - q, max=0.0)) for p, q in ((delete, q_a), (p_b, insert), (p_h, q_h))]


def _potentials(costs: SymbolCosts, in_x: torch.Tensor, in_y: torch.Tensor, x_rows_only: bool = False):
    """The choices ``(p, q, min(0, w))`` of :class:`LabelBound` (float64 ``(k,)`` each).
    ``x_rows_only``: read only the cost rows of X's symbols (``p`` is then valid on those alone,
    and the pass notes the largest cost only where those are the rows the problem reads,
    :attr:`SymbolCosts.rows`): enough for bounds of X's objects against Y's."""
    if costs.unit:
        return _unit_potentials(costs, in_x, in_y)
    rows = torch.nonzero(in_x).reshape(-1) if x_rows_only else None
    k = costs.k
    inf = float("inf")
    delete, insert, diag = costs.delete, costs.insert, costs.diag
    q_a = insert.clone()      # choice A: min over a in X, a != b, of C[a, b] - delete[a]
    p_b = delete.clone()      # choice B: min over b in Y, b != a, of C[a, b] - insert[b]
    col_min = torch.full((k,), inf, dtype=torch.float64)  # min over a in X, a != b, of C[a, b]
    cols_y = torch.where(in_y, 0.0, inf)
    # (each block's masked costs in one copy, the shifts added in place: C - d computed as
    # C + (0 - d), the same bits)
    shift_y = cols_y - insert  # +inf off Y
    maxabs = 0.0
    for idx, block in costs.row_blocks(rows=rows):
        if costs.table is None:
            maxabs = max(maxabs, float(block.abs().max()))
        r = block.shape[0]
        masked = block.clone()
        masked[torch.arange(r), idx] = inf  # a != b
        p_b[idx] = torch.minimum(p_b[idx], (masked + shift_y[None, :]).amin(1))
        masked += torch.where(in_x[idx], 0.0, inf)[:, None]  # +inf off X
        if costs.table is not None:
            col_min = torch.minimum(col_min, masked.amin(0))
        masked -= delete[idx][:, None]
        q_a = torch.minimum(q_a, masked.amin(0))
    if costs.table is None:  # (no whole table: choice H's second pass over the cost blocks)
        costs.note_block_maxabs(maxabs, rows)
        return [(p, q, torch.clamp(diag - p - q, max=0.0)) for p, q in ((delete, q_a), (p_b, insert))]
    q_h = torch.minimum(insert, col_min / 2)
    p_h = delete.clone()
    shift_h = cols_y - q_h
    for idx, block in costs.row_blocks(rows=rows):
        r = block.shape[0]
        masked = block + shift_h[None, :]
        masked[torch.arange(r), idx] = inf
        p_h[idx] = torch.minimum(p_h[idx], masked.amin(1))
    out = []
    for p, q in ((delete, q_a), (p_b, insert), (p_h, q_h)):
        w = torch.clamp(diag - p - q, max=0.0)
        out.append((p, q, w))
    return out

