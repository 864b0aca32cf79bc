"""The search's problem: the flattened collections, the bounds' per-object data and the
batched steps the engine calls (:class:`SearchProblem`: bound blocks, traversal distances,
exact distances with per-pair thresholds), and the engine's statistics.
"""
from __future__ import annotations

import math
import numbers
from typing import Dict, Optional, Sequence, Tuple

import torch

from ..costs import SymbolCost, UnitCost
from ..ops import FlatTable, table_pair_distances
from ..ops.encoding import check_same_kind, flat_table, object_nodes
from ..ops.pairwise import matrix_tiles, problem_inputs, unit_sequence_path, unit_sequence_rows
from .bounds import FirstPairUpper, traversal_sequences
from .label_bound import LabelBound
from .symbol_costs import SymbolCosts

__all__ = ["SearchProblem", "PreparedCollection", "BOUNDS", "STAT_KEYS", "new_stats", "merge_stats"]

#: The bounds the engine can use (all by default).
BOUNDS = ("label", "traversal", "upper")
STAT_KEYS = ("pairs", "decided_by_label", "decided_by_traversal", "exact", "exact_computed",
             "traversal_computed")
_STAT_KEYS = STAT_KEYS


def new_stats() -> Dict[str, int]:
    return {key: 0 for key in _STAT_KEYS}


def merge_stats(*parts: Dict[str, int]) -> Dict[str, int]:
    """The sum of stats dicts (blocks, ranks)."""
    out = new_stats()
    for part in parts:
        for key in _STAT_KEYS:
            out[key] += int(part.get(key, 0))
    return out


def _empty_below_diagonal(M: torch.Tensor) -> torch.Tensor:
    """``M`` (rows against the columns from its first row on) with its square's entries below
    the diagonal ``+inf``: not entries of a triangle's block (their mirrors are)."""
    h = M.shape[0]
    M[:, :h].masked_fill_(torch.ones(h, h, dtype=torch.bool).tril_(-1), math.inf)
    return M


class PreparedCollection:
    """One side of a search, flattened once (and, through :class:`bedl_torch.search.NeighborIndex`,
    for many searches): its :class:`~bedl_torch.ops.FlatTable` (whose symbol codes are cached
    per cost module) and, for trees, the traversal sequences' tables, built on first use.

    Args:
        objects: a checked list of trees or of sequences. side: its name in error messages.
    """

    def __init__(self, objects: Sequence, side: str):
        self.objects, self.side = objects, side
        self.table = flat_table(objects, side)  # (shared with the matrix's calls on equal objects)
        self._traversal: Dict[str, FlatTable] = {}

    def carry_codes(self, old: SymbolCost, new: SymbolCost, unknown: str) -> None:
        """Its tables' codes under ``old`` kept for ``new``, an alphabet that extends ``old``'s
        (:meth:`FlatTable.carry_codes <bedl_torch.ops.FlatTable.carry_codes>`)."""
        for table in [self.table, *self._traversal.values()]:
            table.carry_codes(old, new, unknown)

    def traversal(self, order: str) -> FlatTable:
        if order not in self._traversal:
            self._traversal[order] = FlatTable(traversal_sequences(self.objects, order), self.side)
        return self._traversal[order]


# Mean bit-vector steps per pair (``ceil(|x| / 64) |y|``) up to which k-NN computes unit-cost
# sequences in one exact call (measured in docs/search.md).
CHEAP_WORD_STEPS = 100


class SearchProblem:
    """Two collections, a cost module and the bounds' data, prepared once for many blocks.

    Args:
        X, Y: lists of trees or of sequences (``Y=None``: search X against itself, each object
            excluded from its own results). cost: a :class:`~bedl_torch.SymbolCost` (default:
            unit costs over the labels of X and Y, as :func:`bedl_torch.pairwise_distances`).
        rel_tol, unknown, chunk_size: as for :func:`bedl_torch.pairwise_distances`.
        symmetric: compute each pair ``i, j`` of X once, as ``(min, max)``, the way
            :func:`bedl_torch.pairwise_distances` fills a symmetric matrix; default where ``Y``
            is None and the cost module declares ``symmetric = True``. Needs ``Y=None``.
        bounds: which of :data:`BOUNDS` to use.
        prepared: a :class:`PreparedCollection` of ``Y`` (of ``X`` where ``Y`` is None) whose
            tables to use instead of flattening it again (its objects are the ones passed).

    Raises:
        TypeError: a cost that is not a SymbolCost, objects that are neither trees nor
            sequences, trees mixed with sequences. ValueError: labels missing from the
            alphabet (``unknown="error"``), NaN or inf costs, ``symmetric=True`` with ``Y``,
            an unknown bound, ``chunk_size < 1``.
    """

    def __init__(self, X: Sequence, Y: Optional[Sequence], cost: Optional[SymbolCost], *,
                 rel_tol: Optional[float] = None, unknown: str = "error",
                 symmetric: Optional[bool] = None, chunk_size: Optional[int] = None,
                 bounds: Sequence[str] = BOUNDS, prepared: Optional["PreparedCollection"] = None):
        if isinstance(bounds, str):
            raise TypeError(f"bounds must be a sequence of bound names, got the str {bounds!r} "
                            f"(write ({bounds!r},))")
        bounds = tuple(bounds)
        bad = [b for b in bounds if b not in BOUNDS]
        if bad:
            raise ValueError(f"unknown bounds {bad}; choose from {BOUNDS}")
        if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, numbers.Integral)
                                       or chunk_size < 1):
            raise ValueError(f"chunk_size must be an int >= 1, got {chunk_size!r}")
        self.same = Y is None
        y_prepared = prepared is not None and not self.same  # (Y is its objects, checked)
        X, Y, cost, symmetric = problem_inputs(X, Y, cost, symmetric, y_checked=y_prepared)
        if symmetric and not self.same:
            raise ValueError("symmetric=True needs Y=None (a search of X against itself)")
        self.X, self.Y, self.cost, self.symmetric = X, Y, cost, symmetric
        # (prepared: Y's side, or X's where Y is None, flattened once for many searches)
        x_side = prepared if prepared is not None and self.same else PreparedCollection(X, "X")
        y_side = x_side if self.same else (prepared if prepared is not None else PreparedCollection(Y, "Y"))
        self.x_table, self.y_table = x_side.table, y_side.table
        self.kind = check_same_kind(self.x_table, self.y_table) or "sequence"
        self.nx, self.ny = len(X), len(Y)
        self.kw = dict(rel_tol=rel_tol, unknown=unknown, chunk_size=chunk_size)
        # Fail early, naming unknown labels.
        xc = self.x_table.flat_labels(cost, unknown)
        yc = self.y_table.flat_labels(cost, unknown)
        self.mx = self.x_table.lengths.to(torch.float64)
        self.my = self.y_table.lengths.to(torch.float64)
        self.bounds = bounds
        #: one exact distance costs about what the rounds of k-NN spend per entry on bounds and
        #: selection: sequences under UnitCost on bit vectors, about one 64-bit word per step
        #: (mean ``ceil(|x| / 64) |y|`` at most CHEAP_WORD_STEPS); k-NN computes such blocks in
        #: one exact call
        self.cheap_exact = False
        #: exact distances of the bit-vector path under unit costs (the matrix's tiles of rows
        #: as dense blocks; a pair's distance at least its lengths' difference)
        self.dense_unit = bool(self.kind == "sequence" and self.nx and self.ny and
                                unit_sequence_path(self.x_table, self.y_table, cost, "exact", unknown))
        if self.dense_unit:
            words = int(((self.x_table.lengths + 63) // 64).sum())
            self.cheap_exact = words * int(self.y_table.lengths.sum()) <= CHEAP_WORD_STEPS * self.nx * self.ny
        # (the symbols in use from each side's cached distinct codes: the same set as all codes;
        # X against another Y reads only the rows of X's symbols)
        distinct = [t.distinct_labels(cost, unknown) for t in (self.x_table, self.y_table)]
        self.costs = SymbolCosts(cost, distinct[:1] if self.same else distinct,
                                 row_codes=None if self.same else distinct[:1])
        lx, ly = self.costs.local(xc), self.costs.local(yc)
        longest_x = int(self.x_table.lengths.max()) if self.nx else 0
        longest_y = int(self.y_table.lengths.max()) if self.ny else 0
        #: bounds and distances are exact numbers: a bound equal to a row's k-th distance
        #: prunes an entry whose index comes after the k-th's (ties by index)
        self.exact_arithmetic = self.costs.check_exact_arithmetic(longest_x + longest_y)
        if self.nx and self.ny:  # (the matrix's longest pair: X's longest against Y's)
            self.costs.check_overflow(longest_x, longest_y)
        #: without a whole table and with more symbols than one local table holds, the kernels'
        #: costs may depend on which objects a call uses (unit costs are exact), so every exact
        #: call covers all objects (see _values) and builds every tile's costs: its cost does
        #: not fall with its pairs below that
        self.calls_build_every_tile = self.costs.table is None and type(cost) is not UnitCost
        # (a call's values do not depend on its other objects: the module's whole table, or unit
        # costs, exact in any local table)
        self._subset_calls = self.costs.exact or self.costs.unit
        # (the label bound is built when first asked for: a k-NN block that a probe sends to
        # one exact call needs only the probe rows' bounds, which skip the vocabulary's pass)
        self.has_label = "label" in bounds
        self._label, self._label_codes = None, (lx, ly)
        self.upper = (FirstPairUpper(self.costs, lx, self.x_table.ptr, ly, self.y_table.ptr)
                      if "upper" in bounds else None)
        self.traversal = None
        if self.kind == "tree" and "traversal" in bounds and self.nx and self.ny:
            self.traversal = {}
            for name in ("pre", "post"):
                self.traversal[name] = (x_side.traversal(name), y_side.traversal(name))
                if prepared is not None:  # (kept for many searches: encoded whole once, so that
                    # the calls' subsets slice its codes instead of encoding their objects)
                    prepared.traversal(name).flat_labels(cost, unknown)

    # -- pairs ---------------------------------------------------------------

    def kernel_pairs(self, r: torch.Tensor, c: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """The pair the kernel computes for the matrix entries ``(r, c)``: ``(min, max)`` where
        the problem is symmetric, else ``(r, c)``."""
        if self.symmetric:
            return torch.minimum(r, c), torch.maximum(r, c)
        return r, c

    def margin(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """The rounding margin of pairs (see :meth:`SymbolCosts.margin`)."""
        return self.costs.margin(self.mx[a], self.my[b])

    def _values(self, x_table, y_table, a, b, distinct: bool = False, cover: bool = False,
                threshold: Optional[torch.Tensor] = None, subset: bool = True) -> torch.Tensor:
        """Distances of the kernel pairs ``(a[q], b[q])`` in input order (float64, CPU): one
        :func:`table_pair_distances` call over the distinct pairs (``distinct=True``: the
        caller guarantees there are no repeats). ``threshold`` (per pair): the kernels may
        return inf for a pair above it (a repeated pair gets the largest of its thresholds).

        ``subset=False``: the call gets the whole tables, never a subset of the objects its
        pairs use (a tile of the matrix, whose objects are many: not worth the look).

        ``cover=True`` adds, for every object of either side that no pair uses, a pair with the
        other side's smallest object. Where a cost module has no whole symbol table and its
        symbols are too many for one local table, the ops cut the objects that the pairs use
        into runs and build one block of costs per pair of runs; with every object used, the
        runs, blocks and hence the bits are those of :func:`bedl_torch.pairwise_distances`
        (whose pairs use every object).
        """
        if len(a) == 0:
            return torch.zeros(0, dtype=torch.float64)
        ny = len(y_table)
        inverse = None
        qa, qb = a, b  # the kernel's pairs; the first `wanted` are the values returned
        if not distinct:
            key, inverse = torch.unique(a * ny + b, return_inverse=True)
            qa, qb = key // ny, key % ny
        wanted = len(qa)
        limits = None
        if threshold is not None:
            limits = threshold.to(torch.float64)
            if inverse is not None:
                limits = torch.full((wanted,), -math.inf, dtype=torch.float64).scatter_reduce(
                    0, inverse, limits, reduce="amax")
        if cover:
            extra = []
            unused_x = torch.ones(len(x_table), dtype=torch.bool)
            unused_x[a] = False
            unused_y = torch.ones(ny, dtype=torch.bool)
            unused_y[b] = False
            if unused_x.any():
                extra.append(torch.nonzero(unused_x).reshape(-1) * ny + int(torch.argmin(y_table.lengths)))
            if unused_y.any():
                extra.append(int(torch.argmin(x_table.lengths)) * ny + torch.nonzero(unused_y).reshape(-1))
            if extra:
                # (a covering pair has an object that no pair has on its side: it is none of
                # the pairs, so only the covering pairs themselves may repeat)
                extra = torch.unique(torch.cat([torch.as_tensor(e).reshape(-1) for e in extra]))
                qa, qb = torch.cat([qa, extra // ny]), torch.cat([qb, extra % ny])
                if limits is not None:  # (a covering pair's value is not used: stop it at once)
                    limits = torch.cat([limits, torch.full((len(extra),), -math.inf, dtype=torch.float64)])
        kw = dict(self.kw)
        if limits is not None:
            kw["max_distance"] = limits
        # Pairs that use few of a large table's objects get a table of those objects only (the
        # kernels read and check every object they are given): where the kernels' costs do not
        # depend on which objects a call holds, the same values.
        subset = subset and self._subset_calls and not cover
        xt, ca, xs = _call_table(x_table, qa, subset)
        yt, cb, ys = _call_table(y_table, qb, subset)
        with torch.no_grad():
            oa, ob, v = table_pair_distances(xt, yt, ca, cb, self.cost, **kw)
        if oa is ca and ob is cb:
            oa, ob = qa, qb
        else:  # (regrouped: back to the whole tables' indices)
            oa = oa if xs is None else xs[oa]
            ob = ob if ys is None else ys[ob]
        v = v.detach().to("cpu", torch.float64)
        if (oa is qa or torch.equal(oa, qa)) and (ob is qb or torch.equal(ob, qb)):
            v = v[:wanted]  # (computed in input order)
        else:  # regrouped (tiles, chunks)
            v = _in_order(len(x_table), ny, oa, ob, v, qa[:wanted] * ny + qb[:wanted])
        return v if inverse is None else v[inverse]

    def exact(self, a: torch.Tensor, b: torch.Tensor, threshold: Optional[torch.Tensor] = None,
              distinct: bool = False) -> torch.Tensor:
        """The exact distances of the kernel pairs ``(a[q], b[q])`` (see :meth:`kernel_pairs`),
        in input order, float64 on the CPU: the values of
        :func:`bedl_torch.pairwise_distances` at those entries. ``distinct=True``: the caller
        guarantees that no pair repeats (else repeats are computed once).

        ``threshold`` (float64 per pair, optional) is the value above which the caller does
        not need a pair's exact distance: the kernels stop such a pair early and may return inf
        for it (the caller treats any value above its threshold as "above").
        """
        return self._values(self.x_table, self.y_table, a, b, distinct, cover=self.calls_build_every_tile,
                            threshold=threshold)

    def matrix_blocks(self, max_pairs: int):
        """The kernel pairs of the whole matrix in blocks (each one's ``pairs()`` gives ``(a,
        b)``) that :meth:`block_values` computes with the matrix's bits
        (:func:`bedl_torch.ops.pairwise.matrix_tiles`)."""
        return matrix_tiles(self.x_table, self.y_table, self.cost, self.kw["unknown"],
                            self.symmetric, max_pairs)

    def block_values(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """The exact distances of a block of :meth:`matrix_blocks` (distinct kernel pairs, in
        input order, float64): the values of :func:`bedl_torch.pairwise_distances`, without
        :meth:`exact`'s covering pairs (the block finds the matrix's tile by itself)."""
        return self._values(self.x_table, self.y_table, a, b, distinct=True, subset=False)

    def block_matrix(self, block) -> Optional[torch.Tensor]:
        """The exact distances of a block of consecutive rows of :meth:`matrix_blocks` as a
        dense float64 matrix, where its pairs take the bit-vector path (unit-cost sequences,
        ``sed_unit_matrix``: no pair lists): ``(r1 - r0, ny - c0)`` for the columns from ``c0``
        (``r0`` in a symmetric problem, whose blocks hold the pairs ``j >= i``; the entries ``j
        < i`` of its square are ``+inf``), the values :meth:`block_values` gives its pairs. None
        elsewhere."""
        if block.rows is None or not self.dense_unit:
            return None
        M = unit_sequence_rows(self.x_table, self.y_table, self.cost, self.kw["unknown"], block.rows,
                               block.triangle).to(torch.float64)
        return _empty_below_diagonal(M) if block.triangle else M

    def window_matrix(self, window) -> torch.Tensor:
        """The exact distances of a :class:`~bedl_torch.search.tiles.LengthWindow`'s pairs as a
        dense float64 ``(len(window.x_rows), len(window.y_cols))`` matrix (unit-cost sequences
        on bit vectors, :attr:`dense_unit`; ``sed_unit_matrix`` over the window's objects), the
        values :meth:`block_values` gives them; with ``window.triangle`` the entries below its
        square's diagonal ``+inf``."""
        unknown = self.kw["unknown"]
        if window.triangle:  # (its columns start with its rows)
            table = self.x_table.subset(window.y_cols)
            M = unit_sequence_rows(table, table, self.cost, unknown, (0, len(window.x_rows)), True)
        else:
            M = unit_sequence_rows(self.x_table.subset(window.x_rows), self.y_table.subset(window.y_cols),
                                   self.cost, unknown, (0, len(window.x_rows)), False)
        M = M.to(torch.float64)
        return _empty_below_diagonal(M) if window.triangle else M

    def estimate(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """The exact distances of the kernel pairs ``(a, b)`` (repeats computed once), for
        decisions about how to search only: without :meth:`exact`'s covering pairs, so where
        costs come in tiles their last bits may differ from the matrix's."""
        return self._values(self.x_table, self.y_table, a, b)

    def traversal_values(self, a: torch.Tensor, b: torch.Tensor, order: str,
                         distinct: bool = False, threshold: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The preorder (``order="pre"``) or postorder sequence edit distance of the kernel
        pairs ``(a, b)`` (trees), in input order, float64; with ``threshold`` (per pair), inf
        for a pair whose value is above its threshold (the kernels stop it early): enough to
        prune it, not a bound to keep."""
        tx, ty = self.traversal[order]
        return self._values(tx, ty, a, b, distinct, threshold=threshold)

    @property
    def label(self) -> Optional[LabelBound]:
        """The label bound (None where ``bounds`` leaves it out), built on first use."""
        if self._label is None and self.has_label:
            lx, ly = self._label_codes
            unknown = self.kw["unknown"]
            # (X against another Y never needs the swapped orientation: the rows of X's symbols
            # give the same bounds, not a pass over every symbol's costs)
            self._label = LabelBound(self.costs, lx, self.x_table.ptr, ly, self.y_table.ptr,
                                     x_rows_only=not self.same,
                                     x_counts=self.x_table.label_counts(self.cost, unknown),
                                     y_counts=self.y_table.label_counts(self.cost, unknown))
        return self._label

    # -- bound blocks ----------------------------------------------------------

    def probe_lower(self, rows: torch.Tensor) -> torch.Tensor:
        """The label bounds ``(len(rows), ny)`` of the entries ``(rows[i], j)`` without rounding
        margins, for decisions about how to search only: from :attr:`label` where it is built,
        else from a label bound of these rows' objects against Y (its potentials constrained by
        their symbols alone and read from those symbols' cost rows only: valid for these rows,
        not the same numbers as :attr:`label`'s)."""
        if self._label is not None:
            return self._label.block(rows)
        lx, ly = self._label_codes
        nodes, lengths = object_nodes(self.x_table.ptr, rows)
        sub_ptr = torch.zeros(len(rows) + 1, dtype=torch.long)
        torch.cumsum(lengths, 0, out=sub_ptr[1:])
        unknown = self.kw["unknown"]
        probe = LabelBound(self.costs, lx[nodes], sub_ptr, ly, self.y_table.ptr, x_rows_only=True,
                           y_counts=self.y_table.label_counts(self.cost, unknown))
        return probe.block(torch.arange(len(rows)))

    def lower_block(self, rows: torch.Tensor, first_col: int = 0) -> torch.Tensor:
        """Lower bounds minus rounding margins ``(len(rows), ny - first_col)`` of the entries
        ``(rows[i], first_col + j)`` (``-inf`` without the label bound)."""
        cols = torch.arange(first_col, self.ny)
        if not self.has_label:
            return torch.full((len(rows), len(cols)), -math.inf, dtype=torch.float64)
        # An entry below the diagonal is the kernel pair (col, row). Either orientation's bound
        # serves where both are the same numbers, or where the costs read are a symmetric table
        # (d(x, y) and d(y, x) are then one minimum, their computed values within the margin),
        # or where they are not the kernels' numbers and the module declares its costs
        # symmetric: its two orientations differ by its rounding, within the margin's allowance
        # for such costs (as for the upper bound).
        one = (self.label.swap_invariant or self.costs.table_symmetric
               or (not self.costs.exact and bool(getattr(self.cost, "symmetric", False))))
        below = cols[None, :] < rows[:, None] if self.symmetric and not one else None
        if below is not None and below.any():
            lb, swapped = self.label.both_orientations(rows, cols)
            lb = torch.where(below, swapped, lb)
        else:
            lb = self.label.block(rows, cols)
        return lb - self.costs.margin(self.mx[rows][:, None], self.my[cols][None, :])

    def upper_block(self, rows: torch.Tensor) -> torch.Tensor:
        """Upper bounds plus rounding margins ``(len(rows), ny)`` (``inf`` without them)."""
        cols = torch.arange(self.ny)
        if self.upper is None:
            return torch.full((len(rows), self.ny), math.inf, dtype=torch.float64)
        ub = self.upper.block(rows, cols)
        if self.symmetric and not getattr(self.cost, "symmetric", False):
            # (a symmetric problem of an asymmetric module: an entry below the diagonal is the
            # kernel pair (col, row); a module declared symmetric bounds both alike, to
            # rounding, which the margin added below covers)
            below = cols[None, :] < rows[:, None]
            if below.any():
                ub = torch.where(below, self.upper.block(rows, cols, swap=True), ub)
        return ub + self.costs.margin(self.mx[rows][:, None], self.my[None, :])

    def prune_by_traversal(self, rows, rl, c, thr, stats):
        """Keep the entries ``(rows[rl], c)`` (distinct kernel pairs) whose traversal bounds
        (less margins) do not exceed ``thr`` (per entry); returns the kept ``rl, c`` and the
        pruned ones."""
        pruned_r, pruned_c = [], []
        if self.traversal is None:
            return rl, c, rl[:0], c[:0]
        for order in ("pre", "post"):
            if not len(rl):
                break
            a, b = self.kernel_pairs(rows[rl], c)
            margin = self.margin(a, b)
            t = self.traversal_values(a, b, order, distinct=True, threshold=thr + margin) - margin
            stats["traversal_computed"] += len(a)
            keep = t <= thr
            pruned_r.append(rl[~keep])
            pruned_c.append(c[~keep])
            rl, c, thr = rl[keep], c[keep], thr[keep]
        stats["decided_by_traversal"] += sum(len(p) for p in pruned_r)
        return rl, c, torch.cat(pruned_r) if pruned_r else rl[:0], torch.cat(pruned_c) if pruned_c else c[:0]


#: A call's pairs get a table of the objects they use where those are fewer than half of a
#: table of at least this many objects (smaller tables: the kernels' checks cost little).
SUBSET_MIN_OBJECTS = 64


def _call_table(table: FlatTable, idx: torch.Tensor, allowed: bool):
    """``(table, idx, rows)`` for a kernel call on the objects ``idx`` of ``table``: where
    ``allowed`` and they are fewer than half of a table of at least :data:`SUBSET_MIN_OBJECTS`,
    a table of those objects (``rows``, sorted) and ``idx`` in it; else ``table``, ``idx`` and
    None."""
    if not allowed or len(table) < SUBSET_MIN_OBJECTS:
        return table, idx, None
    # (a mark per object and a position per used one: a call of millions of pairs is not
    # sorted, as torch.unique and searchsorted would)
    mark = torch.zeros(len(table), dtype=torch.bool)
    mark[idx] = True
    used = torch.nonzero(mark).reshape(-1)
    if 2 * len(used) >= len(table):
        return table, idx, None
    at = torch.empty(len(table), dtype=torch.long)
    at[used] = torch.arange(len(used))
    return table.subset(used), at[idx], used


def _in_order(nx: int, ny: int, oa: torch.Tensor, ob: torch.Tensor, v: torch.Tensor,
              want: torch.Tensor) -> torch.Tensor:
    """The values ``v`` of distinct kernel pairs ``(oa, ob)`` (of an ``nx x ny`` matrix), read
    back in the order of the keys ``want`` (``row * ny + col``, each among them)."""
    okey = oa * ny + ob
    if nx * ny <= 4 * len(okey) + 1024:
        # (keys are distinct: a position per key, read back in the order wanted)
        at = torch.empty(nx * ny, dtype=torch.long)
        at[okey] = torch.arange(len(okey))
        return v[at[want]]
    order = torch.argsort(okey)
    return v[order][torch.searchsorted(okey[order], want)]
