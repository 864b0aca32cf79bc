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

import warnings
from typing import List, Optional, Sequence

import torch

from ..costs import SymbolCost, UnitCost, block_of, pair_costs_of, subtable_of, table_of
from ..labels import alphabet_of, check_collection
from ..ops import FlatTable, pairwise_distances
from ..ops.encoding import LabelCounts, check_symbol_table, label_counts, node_objects, object_nodes, owners
from ..validation import check_cost_module

__all__ = ["label_lower_bound", "traversal_lower_bound", "mapping_upper_bound",
           "SymbolCosts", "LabelBound", "postorder_labels"]

# Largest number of symbols in use (gap included) whose cost table among them is built
# whole (4M float64 entries, 32 MB); beyond it the costs are read in blocks of rows.
_TABLE_SYMBOLS = 2000
_ROW_BLOCK = 512
# Entries of one dense block of label features (float64: 32 MB).
_FEATURE_CELLS = 1 << 22
# Above this many (symbol, level) features the query side of the product is sparse.
_DENSE_FEATURES = 2048
# The label bound's intersections come from the label counts where rows x the columns' (object,
# symbol) entries are at most this many times the columns' dense features (few queries).
_COUNT_FORM_RATIO = 0.25


# ---------------------------------------------------------------------------
# The costs among the symbols in use
# ---------------------------------------------------------------------------


class SymbolCosts:
    """The costs among the symbols that occur in two collections, in float64 on the CPU.

    The symbols in use (and the gap) are renumbered ``0 .. k - 1``, the gap last. Where the
    cost module has a whole symbol table (:func:`bedl_torch.costs.table_of`) the costs are
    taken from it, the very numbers the kernels read; otherwise from
    :func:`~bedl_torch.costs.subtable_of` (up to ``_TABLE_SYMBOLS`` symbols) or in blocks of
    rows from :func:`~bedl_torch.costs.block_of`, which agree with what the kernels read up
    to the module's rounding (a module's ``symbol_block`` must agree with its ``forward``).

    Args:
        cost: the cost module. codes: symbol indices (alphabet numbering) of every node of
            every object of the collections (any number of 1-D tensors).
        row_codes: where the problem's pairs read only some symbols' rows (``X`` against
            another ``Y``: the rows of ``X``'s symbols, besides the gap's), those symbols'
            indices; :attr:`maxabs` then needs only those rows (a query against a vocabulary).

    Attributes:
        k (int): symbols in use plus the gap. used: int64 ``(k,)`` their alphabet indices.
        lookup: int64, alphabet index -> local index. delete, insert, diag: float64 ``(k,)``,
            ``C[a, gap]``, ``C[gap, a]`` and ``C[a, a]``. maxabs (float): the largest absolute
            cost among the symbols in use, the ``[gap, gap]`` entry included (in the rows of
            ``row_codes`` and the gap's, where given). rows: int64 local indices of the
            ``row_codes`` symbols (the gap among them where they hold it), sorted, or None
            (all). table: float64
            ``(k, k)`` or None (read in blocks). exact (bool): the numbers are the kernels'.
        eps (float): machine epsilon of the cost module's dtype (the kernels compute in it).
    """

    def __init__(self, cost: SymbolCost, codes: Sequence[torch.Tensor],
                 row_codes: Optional[Sequence[torch.Tensor]] = None):
        self.cost = cost
        gap = cost.gap_index
        parts = [c.reshape(-1).to(torch.long) for c in codes] + [torch.tensor([gap])]
        self.used = torch.unique(torch.cat(parts))  # sorted: the gap (largest index) last
        self.k = k = len(self.used)
        self.lookup = torch.full((gap + 1,), k - 1, dtype=torch.long)
        self.lookup[self.used] = torch.arange(k)
        self.rows = None  # (the rows the label bound's potentials read for X: the same set)
        if row_codes is not None:
            self.rows = torch.unique(self.lookup[torch.cat([c.reshape(-1).to(torch.long) for c in row_codes])])
        self.eps = float(torch.finfo(cost.dtype).eps)
        # UnitCost itself (not a subclass, which may change the costs): C = 1 - I among the
        # symbols in use and the gap, so nothing needs the table's rows read (large alphabets)
        self.unit = type(cost) is UnitCost
        with torch.no_grad():
            whole = table_of(cost)
            #: the largest absolute entry of the table the matrix's kernels read (the whole
            #: table, or the local one of the symbols in use), for their overflow rule; None
            #: where the matrix cuts its costs into tiles
            self.table_maxabs = None
            if whole is not None:
                check_symbol_table(cost, whole)  # (as the matrix: every symbol's costs finite)
                t = whole.detach().to("cpu", torch.float64)
                self.table_maxabs = float(t.abs().max())
                self.table, self.exact = t[self.used][:, self.used], True
            elif k <= _TABLE_SYMBOLS:  # (the matrix's local table: the same symbols)
                self.table = subtable_of(cost, self.used).detach().to("cpu", torch.float64)
                self.exact = False
            else:
                self.table, self.exact = None, False
            if self.table is not None:
                self.diag = self.table.diagonal().clone()
                self.delete = self.table[:, -1].clone()
                self.insert = self.table[-1, :].clone()
                self._maxabs = float(self.table.abs().max())
                if whole is None:
                    self.table_maxabs = self._maxabs
            else:
                g = torch.full((k,), gap, dtype=torch.long)
                self.diag = _cpu64(pair_costs_of(cost, self.used, self.used))
                self.delete = _cpu64(pair_costs_of(cost, self.used, g))
                self.insert = _cpu64(pair_costs_of(cost, g, self.used))
                if self.unit:  # the kernels read these very 0s and 1s
                    self.exact, self._maxabs = True, 1.0 if k > 1 else 0.0
                else:  # (a pass over every block: taken when first needed, or by the label bound's)
                    self._maxabs = None
        if not all(torch.isfinite(t).all() for t in (self.diag, self.delete, self.insert)):
            raise ValueError(f"{type(self.cost).__name__} costs must be finite (NaN or inf found)")
        if self._maxabs is not None:
            self._check_maxabs()
        self.exact_arithmetic = False
        self._table_symmetric = None

    @property
    def table_symmetric(self) -> bool:
        """Whether the costs the bounds read form a table equal to its transpose, bit for bit
        (then a bound of ``d(x, y)`` bounds ``d(y, x)`` as well, to the rounding the margin
        allows); False without a table."""
        if self._table_symmetric is None:
            self._table_symmetric = self.table is not None and torch.equal(self.table, self.table.T)
        return self._table_symmetric

    @property
    def maxabs(self) -> float:
        """The largest absolute cost among the symbols in use (the gap's included)."""
        if self._maxabs is None:
            maxabs = 0.0
            for _, block in self.row_blocks(rows=self.rows):
                maxabs = max(maxabs, float(block.abs().max()))
            self.note_block_maxabs(maxabs, self.rows)
        return self._maxabs

    def note_block_maxabs(self, maxabs: float, rows: Optional[torch.Tensor] = None) -> None:
        """Takes the largest absolute cost found by a pass over the row blocks of ``rows`` (all
        where None; the label bound's potentials make one), so that :attr:`maxabs` needs no
        pass of its own; a pass over fewer rows than :attr:`rows` is not enough."""
        covers = rows is None or (self.rows is not None and torch.equal(rows, self.rows))
        if self._maxabs is None and covers:
            if self.rows is not None:  # (the gap's row: the insertions)
                maxabs = max(maxabs, float(self.insert.abs().max()))
            self._maxabs = maxabs
            self._check_maxabs()

    def _check_maxabs(self) -> None:
        if not (self._maxabs < float("inf")):
            raise ValueError(f"{type(self.cost).__name__} costs must be finite (NaN or inf found)")

    def check_overflow(self, m: int, n: int) -> None:
        """The kernels' overflow rule for the longest pair a matrix of these collections computes
        (``m`` and ``n`` nodes): ``2 (m + n) max|cost|`` within the dtype, ``max|cost|`` over the
        table the matrix reads (:attr:`table_maxabs`), so that a search raises where
        :func:`bedl_torch.pairwise_distances` does, even if its bounds decide every pair. Costs
        in tiles are checked by the kernels, per call."""
        if self.table_maxabs is None:
            return
        largest = float(torch.finfo(self.cost.dtype).max)
        if 2.0 * (m + n) * self.table_maxabs > largest:
            raise ValueError(
                f"{type(self.cost).__name__} costs are too large: the longest pair has |x| = {m} and "
                f"|y| = {n}, a mapping sums up to {m + n} costs of magnitude up to {self.table_maxabs:g}, "
                f"and 2 (|x| + |y|) max|cost| must stay below the largest {str(self.cost.dtype)[6:]} "
                f"({largest:g}); scale the costs down")

    def check_exact_arithmetic(self, longest_pair: int) -> bool:
        """Whether every value the kernels and the bounds form is exact, for pairs of at most
        ``longest_pair`` nodes together: the costs are the kernels' numbers (a whole table),
        all integers, and ``4 (longest_pair + 1) maxabs`` stays below ``2^(p - 1)`` for the
        dtype's ``p`` mantissa bits. Then sums of costs, their halves and quarters (the label
        bound's potentials) and minima are exact, the margin is 0 and a bound equal to a
        distance can be told apart from one above it (unit and integer costs). Sets and
        returns :attr:`exact_arithmetic`."""
        bits = 53 if self.eps < 1e-10 else 24
        integers = self.unit or (self.table is not None and bool((self.table == torch.round(self.table)).all()))
        self.exact_arithmetic = bool(
            self.exact and integers and 4.0 * (longest_pair + 1) * self.maxabs < 2.0 ** (bits - 1))
        return self.exact_arithmetic

    def local(self, codes: torch.Tensor) -> torch.Tensor:
        """Alphabet indices -> local indices."""
        return self.lookup[codes]

    def row_blocks(self, block: int = _ROW_BLOCK, rows: Optional[torch.Tensor] = None):
        """``(idx, C[idx, :])`` over all local rows (or the local rows ``rows``, ascending),
        ``idx`` their local indices, float64 blocks."""
        if rows is not None and len(rows) == 0:
            return
        if self.table is not None:
            yield (torch.arange(self.k), self.table) if rows is None else (rows, self.table[rows])
            return
        with torch.no_grad():
            for s in range(0, self.k if rows is None else len(rows), block):
                idx = torch.arange(s, min(s + block, self.k)) if rows is None else rows[s:s + block]
                yield idx, _cpu64(block_of(self.cost, self.used[idx], self.used))

    def entries(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """``C[a, b]`` for local index tensors of one shape."""
        if self.table is not None:
            return self.table[a, b]
        ua, ia = torch.unique(a, return_inverse=True)
        ub, ib = torch.unique(b, return_inverse=True)
        with torch.no_grad():
            sub = _cpu64(block_of(self.cost, self.used[ua], self.used[ub]))
        return sub[ia, ib]

    def margin(self, m: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        """How far a computed bound of a pair of sizes ``m``, ``n`` may exceed the kernel's
        computed distance through rounding alone (float64, broadcast).

        A mapping has at most ``L - 1 = m + n`` operations, so the kernel's value of a pair is
        a sum of at most ``L - 1`` costs of magnitude at most ``maxabs``, formed in the
        module's dtype; recursive summation of ``L`` terms errs by at most
        ``(L - 1) u sum|terms| <= L eps L maxabs``, and the minimum over alternatives keeps
        that (rounding is monotone). A bound computed by the same kernel (the traversal
        bound) or in float64 from the same costs (the label bound, upper bounds) errs by no
        more, so two such errors are allowed: ``2 L^2 eps maxabs``. With
        :attr:`exact_arithmetic` (integer costs read from a whole table) the margin is 0. Where the bound's costs
        are not the kernels' numbers (a module without a whole symbol table, whose
        ``symbol_subtable`` / ``symbol_block`` agree with what the kernels read only to the
        module's rounding), a further ``L tau maxabs`` with ``tau = 1e-9`` (float64) or
        ``1e-4`` (float32) allows each cost of the sum to differ by that much relative to
        ``maxabs``.
        """
        if self.exact_arithmetic:
            return torch.zeros((m + n).shape, dtype=torch.float64)  # (torch.broadcast_shapes imports sympy: seconds)
        tau = 0.0 if self.exact else (1e-9 if self.eps < 1e-10 else 1e-4)
        total = None
        if m.is_floating_point() or n.is_floating_point():
            L = m.to(torch.float64) + n.to(torch.float64) + 1.0
        else:  # integer sizes: the margin of every length once, then looked up (the same
            # numbers, one gather instead of six passes over a block of pairs)
            total = m + n
            L = torch.arange(int(total.max()) + 1 if total.numel() else 1, dtype=torch.float64) + 1.0
        margins = self.maxabs * (2.0 * L * L * self.eps + L * tau) + 1e-300
        return margins if total is None else margins[total]


def _cpu64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", torch.float64)


# ---------------------------------------------------------------------------
# Label-multiset bound
# ---------------------------------------------------------------------------


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
        if len(rows) * int(entries.sum()) <= _COUNT_FORM_RATIO * len(cols) * self.n_features:
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


def _check_same_kind(x_table, y_table):
    if x_table.kind and y_table.kind and x_table.kind != y_table.kind:
        raise TypeError(f"X and Y must both hold trees or both sequences, got "
                        f"{x_table.kind}s and {y_table.kind}s")


def _prepare(X, Y, cost, unknown):
    X = check_collection(X, "X")
    same = Y is None
    Y = X if same else check_collection(Y, "Y")
    if cost is None:
        cost = UnitCost(alphabet_of(X, Y))
    else:
        check_cost_module(cost)
    x_table = FlatTable(X, "X")
    y_table = x_table if same else FlatTable(Y, "Y")
    _check_same_kind(x_table, y_table)
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
