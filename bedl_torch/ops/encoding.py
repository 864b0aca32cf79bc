"""Inputs of the kernels: collections of trees or sequences flattened once (:class:`FlatTable`),
their symbol indices under a cost module, and the symbol cost tables the kernels gather from
(:class:`SymbolView`); the tie tolerance.

Layer: ops (imports the cost modules, :mod:`bedl_torch.labels` and the validation checks).
"""
from __future__ import annotations

import copy
import itertools
import math
import threading
import weakref
from collections import OrderedDict
from typing import NamedTuple, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from ..costs import SymbolCost, block_of, subtable_of, table_of
from ..labels import kind_of, labels_of, long_tensor
from ..validation import check_cost_tensor
from . import limits

__all__ = ["default_rel_tol", "check_rel_tol", "check_costs", "FlatTable", "flat_table",
           "check_same_kind", "SymbolView", "matrix_view", "whole_table"]


def default_rel_tol(dtype: torch.dtype) -> float:
    """Relative tolerance under which two alternatives count as tied.

    1e-9 for float64 and 1e-5 for float32 (rounding in float32 costs, e.g. from an
    embedding, is around 1e-7 relative), times the magnitude involved: the larger
    of the two path costs and of the pair's largest absolute cost. P counts each
    co-optimal mapping in one order of its edits, so a tolerance below the costs'
    rounding (0 for costs such as 0.1 and 0.2) can leave a pair none; the kernels
    then raise ValueError naming the pair.
    """
    return 1e-9 if dtype == torch.float64 else 1e-5


def owners(lengths: torch.Tensor, total: Optional[int] = None) -> torch.Tensor:
    """For consecutive groups of ``lengths`` elements (``total`` in all, where known), each
    element's group, int64."""
    total = int(lengths.sum()) if total is None else total
    return torch.repeat_interleave(torch.arange(len(lengths)), lengths, output_size=total)


def node_objects(ptr: torch.Tensor) -> torch.Tensor:
    """The object of every node (element) of a table with offsets ``ptr``, int64."""
    return owners(ptr[1:] - ptr[:-1], int(ptr[-1]))


class LabelCounts(NamedTuple):
    """How often each object of a table holds each of its symbols (:func:`label_counts`)."""

    level: torch.Tensor  # per node: the nodes of its object before it with its symbol
    first: torch.Tensor  # per entry (an object and one of its symbols): the symbol's first node
    count: torch.Tensor  # per entry: the object's nodes with that symbol
    ptr: torch.Tensor    # (n + 1,): object t's entries are ptr[t] .. ptr[t + 1] - 1


def label_counts(codes: torch.Tensor, ptr: torch.Tensor) -> LabelCounts:
    """The label counts of the objects of a table with symbol codes ``codes`` and offsets
    ``ptr`` (one sort of the nodes by object and symbol). They depend only on which labels of
    an object are equal, so any numbering of the symbols gives the same."""
    n = len(ptr) - 1
    if len(codes) == 0:
        empty = torch.zeros(0, dtype=torch.long)
        return LabelCounts(empty, empty, empty, torch.zeros(n + 1, dtype=torch.long))
    objects = node_objects(ptr)
    key = objects * (int(codes.max()) + 1) + codes
    order = torch.argsort(key, stable=True)
    skey = key[order]
    starts = torch.ones(len(skey), dtype=torch.bool)
    starts[1:] = skey[1:] != skey[:-1]
    position = torch.arange(len(skey))
    group_start = torch.cummax(torch.where(starts, position, 0), 0).values
    level = torch.empty_like(codes)
    level[order] = position - group_start
    begins = torch.nonzero(starts).reshape(-1)
    count = torch.diff(begins, append=torch.tensor([len(skey)]))
    first = order[begins]  # (entries ordered by object, then symbol)
    entries_ptr = torch.zeros(n + 1, dtype=torch.long)
    torch.cumsum(torch.bincount(objects[first], minlength=n), 0, out=entries_ptr[1:])
    return LabelCounts(level, first, count, entries_ptr)


def object_nodes(ptr: torch.Tensor, objects: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(nodes, lengths)``: the node (element) indices of ``objects`` in a table with offsets
    ``ptr``, concatenated in that order, and each object's count."""
    lengths = ptr[objects + 1] - ptr[objects]
    total = int(lengths.sum())
    first = torch.cumsum(lengths, 0) - lengths
    nodes = torch.arange(total) + torch.repeat_interleave(ptr[objects] - first, lengths, output_size=total)
    return nodes, lengths


class FlatTable:
    """A collection of trees or of sequences, flattened once for the kernels and shared by
    many pairs.

    :class:`PairBatch` builds one per side; :meth:`PairBatch.from_tables` and
    :func:`table_pair_distances` take them, so that pairs drawn again and again from the
    same objects (chunks of a matrix, BEDL's data-to-prototype pairs) are never flattened or
    encoded twice. The symbol indices under a cost module are computed on first use and cached
    per module.

    Args:
        objects: trees (:class:`~bedl_torch.tree.Tree`) or sequences (``str``, ``list``,
            ``tuple``), one kind only.
        side: the name used in error messages (e.g. ``"X"``).

    Attributes:
        objects (list): the objects. kind (str or None): ``"tree"``, ``"sequence"`` or
            ``None`` (no objects). lengths: int64 ``(len(objects),)``, nodes or elements per
            object. ptr: int64 ``(len(objects) + 1,)``: object ``t`` holds the concatenated
            elements ``ptr[t] .. ptr[t + 1] - 1``. sizes (trees only): int64, the subtree
            sizes of all nodes, concatenated. All on the CPU.

    Raises:
        TypeError: objects that are neither trees nor sequences, or both kinds mixed.
    """

    def __init__(self, objects: Sequence, side: str):
        objects = list(objects)
        kinds = {kind_of(o) for o in objects}
        if len(kinds) > 1:
            raise TypeError(f"{side}: cannot mix trees and sequences in one batch")
        self.objects = objects
        self.kind = kinds.pop() if kinds else None
        self.lengths = long_tensor(len(o) for o in objects)
        self.ptr = torch.zeros(len(objects) + 1, dtype=torch.long)
        torch.cumsum(self.lengths, 0, out=self.ptr[1:])
        if self.kind == "tree":
            data = bytearray(b"".join([o.subtree_sizes_bytes() for o in objects]))
            self.sizes = torch.frombuffer(data, dtype=torch.long) if data else torch.zeros(0, dtype=torch.long)
        self._encoded = weakref.WeakKeyDictionary()
        self._last_codes = None

    def __len__(self) -> int:
        return len(self.objects)

    def subset(self, rows: torch.Tensor) -> "FlatTable":
        """The objects ``rows`` (int64 indices) as a table of their own, in that order, with
        this table's symbol codes sliced rather than encoded again: a call on a few objects of
        a large table then reads and checks those objects only."""
        rows = torch.as_tensor(rows, dtype=torch.long).reshape(-1)
        sub = FlatTable.__new__(FlatTable)
        sub.objects = [self.objects[i] for i in rows.tolist()]
        sub.kind = self.kind
        nodes, sub.lengths = object_nodes(self.ptr, rows)
        sub.ptr = torch.zeros(len(rows) + 1, dtype=torch.long)
        torch.cumsum(sub.lengths, 0, out=sub.ptr[1:])
        if self.kind == "tree":
            sub.sizes = self.sizes[nodes]
        sub._encoded = weakref.WeakKeyDictionary()
        for cost, per_cost in self._encoded.items():
            sub._encoded[cost] = {key: {"flat": codes["flat"][nodes], "alphabet": codes["alphabet"]}
                                  for key, codes in per_cost.items()}
        sub._last_codes = None
        return sub

    def _codes(self, cost: SymbolCost, unknown: str) -> dict:
        """This table's symbol indices under ``cost`` (cached per cost module, dropped when
        its alphabet grows or is replaced): ``"flat"`` always, ``"padded"`` once asked for."""
        # (the entry keeps the alphabet list, so its id is not reused while cached)
        key = _codes_key(cost, unknown)
        last = self._last_codes  # the latest answer first: repeated calls ask for the same
        if last is not None and last[0]() is cost and last[1] == key:
            return last[2]
        per_cost = self._encoded.setdefault(cost, {})
        if key not in per_cost:
            # One encode call for the whole table (it names unknown labels).
            flat = cost.encode(list(itertools.chain.from_iterable(map(labels_of, self.objects))),
                               unknown=unknown)
            per_cost.clear()
            per_cost[key] = {"flat": flat, "alphabet": cost.alphabet}
        self._last_codes = (weakref.ref(cost), key, per_cost[key])
        return per_cost[key]

    def flat_labels(self, cost: SymbolCost, unknown: str) -> torch.Tensor:
        """Symbol index of every node (element), concatenated in table order (like ``sizes``)."""
        return self._codes(cost, unknown)["flat"]

    def distinct_labels(self, cost: SymbolCost, unknown: str) -> torch.Tensor:
        """The distinct symbol indices of :meth:`flat_labels`, sorted (cached with them)."""
        codes = self._codes(cost, unknown)
        if "distinct" not in codes:
            codes["distinct"] = torch.unique(codes["flat"])
        return codes["distinct"]

    def label_counts(self, cost: SymbolCost, unknown: str) -> LabelCounts:
        """:func:`label_counts` of :meth:`flat_labels` (cached with them)."""
        return self.derived(cost, unknown, "counts", lambda flat: label_counts(flat, self.ptr))

    def carry_codes(self, old: SymbolCost, new: SymbolCost, unknown: str) -> bool:
        """Takes this table's codes under ``old`` (and what was derived from them) as its codes
        under ``new`` where they are the same numbers: ``new``'s alphabet starts with ``old``'s
        and no label of the table fell to ``old``'s gap. Returns whether it did (else ``new``
        encodes the table when first asked)."""
        per_old = self._encoded.get(old)
        codes = None if per_old is None else per_old.get(_codes_key(old, unknown))
        n = len(old.alphabet)
        if codes is None or len(new.alphabet) < n or new.alphabet[:n] != old.alphabet \
                or bool((codes["flat"] == old.gap_index).any()):
            return False
        carried = {key: value for key, value in codes.items() if key != "padded"}  # (padded with the gap)
        carried["alphabet"] = new.alphabet
        self._encoded[new] = {_codes_key(new, unknown): carried}
        return True

    def derived(self, cost: SymbolCost, unknown: str, key, build):
        """``build(flat_labels)``, cached with this table's codes under ``cost`` as ``key``: for
        what depends only on the codes (dropped with them when the alphabet changes)."""
        codes = self._codes(cost, unknown)
        if key not in codes:
            codes[key] = build(codes["flat"])
        return codes[key]

    def encoded(self, cost: SymbolCost, unknown: str) -> torch.Tensor:
        """Symbol indices ``(len, max_len + 1)``, padded with the gap."""
        codes = self._codes(cost, unknown)
        if "padded" not in codes:
            width = int(self.lengths.max()) + 1 if len(self) else 1
            out = torch.full((len(self), width), cost.gap_index, dtype=torch.long)
            out[torch.arange(width)[None, :] < self.lengths[:, None]] = codes["flat"]
            codes["padded"] = out
        return codes["padded"]


def _codes_key(cost: SymbolCost, unknown: str) -> tuple:
    """Which encoding of a table a cost module's entry holds: its alphabet (the list and its
    length: an alphabet grown in place encodes anew) and the unknown-label rule."""
    return (id(cost.alphabet), len(cost.alphabet), unknown)


# FlatTables of recent collections of strings, tuples and trees (hashable, and unchangeable),
# keyed by the collection's contents: repeated calls on the same collection (a model's
# predictions, a loop over the same data) skip flattening and encoding it again.
_TABLE_CACHE_SIZE = 16
_table_cache: "OrderedDict[tuple, FlatTable]" = OrderedDict()
_table_cache_lock = threading.Lock()


def flat_table(objects: Sequence, side: str) -> FlatTable:
    """``FlatTable(objects, side)``, shared with earlier calls on equal objects.

    Only collections of strings, tuples and trees (hashable and unchangeable; equal ones
    flatten and encode alike) are shared, in a small cache of the latest ones; a collection
    holding a list (a sequence that can change in place) gets a new table every time. A shared
    table's encodings follow the cost modules (see :meth:`FlatTable.flat_labels`).
    """
    key = (side, tuple(objects))
    try:
        hash(key)
    except TypeError:  # a list among the objects
        return FlatTable(objects, side)
    with _table_cache_lock:
        table = _table_cache.get(key)
        if table is not None:
            _table_cache.move_to_end(key)
            return table
    table = FlatTable(objects, side)
    with _table_cache_lock:
        _table_cache[key] = table
        while len(_table_cache) > _TABLE_CACHE_SIZE:
            _table_cache.popitem(last=False)
    return table


def check_same_kind(x_table: FlatTable, y_table: FlatTable) -> Optional[str]:
    """The kind the two tables hold (``"tree"`` or ``"sequence"``; None where both are empty);
    TypeError where one holds trees and the other sequences."""
    kx, ky = x_table.kind, y_table.kind
    if kx and ky and kx != ky:
        raise TypeError(f"X and Y must both hold trees or both sequences, got {kx}s and {ky}s")
    return kx or ky


def check_rel_tol(rel_tol, dtype) -> float:
    """The tie tolerance to use: ``default_rel_tol(dtype)`` for None; ValueError unless finite and >= 0."""
    if rel_tol is None:
        return default_rel_tol(dtype)
    rel_tol = float(rel_tol)
    if not (math.isfinite(rel_tol) and rel_tol >= 0):
        raise ValueError(f"rel_tol must be finite and >= 0, got {rel_tol}")
    return rel_tol


def check_costs(costs, name: str = "costs", finite: bool = True) -> None:
    """:func:`bedl_torch.validation.check_cost_tensor` (type, layout, device, dtype; with
    ``finite`` also NaN/inf)."""
    check_cost_tensor(costs, name, finite=finite)


class SymbolView:
    """A symbol cost table and the label indices into it, for the symbol-table kernels.

    Either a cost module's whole ``(U+1, U+1)`` table (``lookup`` None: labels are alphabet
    indices), or a local table over only the symbols in use, gap last (``lookup`` maps an
    alphabet index to its row), so that alphabets of 30,000+ words never build a U x U
    matrix and a batch never materialises its padded ``(B, M+1, N+1)`` costs. A local table
    between two sets of objects (:meth:`between`) numbers its rows over the symbols of one
    side (``lookup``) and its columns over those of the other (``col_lookup``, for the labels
    of the table ``col_side``), so it holds only the costs that those pairs read.
    """

    def __init__(self, table: torch.Tensor, cost: SymbolCost, unknown: str,
                 lookup: Optional[torch.Tensor] = None, col_lookup: Optional[torch.Tensor] = None,
                 col_side: Optional["FlatTable"] = None, symbols: Optional[tuple] = None):
        self.table, self.cost, self.unknown, self.lookup = table, cost, unknown, lookup
        self.col_lookup, self.col_side = col_lookup, col_side
        self.symbols = symbols  # a local table's symbols: (used,) or (rows, cols), gap included
        self._flat = {}  # id(side) -> (side, its labels in this table's numbering)

    def plan(self) -> Optional["SymbolView"]:
        """This local view without its table and cost module, for :meth:`renewed` (None for a
        module's whole table, which costs nothing to ask for again)."""
        if self.symbols is None:
            return None
        plan = copy.copy(self)
        plan.table = plan.cost = None
        return plan

    def renewed(self, cost: SymbolCost) -> "SymbolView":
        """A view over the same symbols of ``cost`` (the module whose view :meth:`plan` was
        taken of) with its current costs: a new table, the labels' numbering (and its cache)
        shared."""
        view = copy.copy(self)
        view.cost = cost
        view.table = _local_table(cost, self.symbols)
        return view

    @classmethod
    def local(cls, cost: SymbolCost, unknown: str, labels: Sequence[torch.Tensor],
              limit: int) -> Optional["SymbolView"]:
        """The local view over the symbols in ``labels`` (alphabet indices), or None when its
        table would exceed ``limit`` cells."""
        gap = cost.gap_index
        used = torch.unique(torch.cat([t.reshape(-1) for t in labels]
                                      + [torch.tensor([gap], dtype=torch.long)]))
        k = len(used)  # sorted: the gap, the largest index, comes last
        if k * k > limit:
            return None
        table = _local_table(cost, (used,))
        lookup = torch.full((gap + 1,), k - 1, dtype=torch.long)
        lookup[used] = torch.arange(k)
        return cls(table, cost, unknown, lookup, symbols=(used,))

    @classmethod
    def between(cls, cost: SymbolCost, unknown: str, x_labels: torch.Tensor,
                y_labels: torch.Tensor, col_side: "FlatTable", limit: int,
                max_block: Optional[int] = None) -> Optional["SymbolView"]:
        """The local view whose rows are the symbols of ``x_labels`` and whose columns are
        those of ``y_labels`` (alphabet indices, any shape; the labels of ``col_side`` are read
        as columns), or None when its ``(kx+1, ky+1)`` table would exceed ``limit`` cells or its
        ``kx x ky`` block of costs ``max_block``.

        The kernels take such a rectangular table (each side's gap last), so it is one
        :func:`~bedl_torch.costs.block_of` call holding only the costs that pairs between the
        two sides can read (and its backward stays on that block). Each side's symbols are
        numbered by frequency, so the costs most pairs read share few cache lines.
        """
        gap = cost.gap_index
        rows, cols = _symbols_by_frequency(x_labels, gap), _symbols_by_frequency(y_labels, gap)
        kx, ky = len(rows), len(cols)
        if (kx + 1) * (ky + 1) > limit or (max_block is not None and kx * ky > max_block):
            return None
        symbols = (F.pad(rows, (0, 1), value=gap), F.pad(cols, (0, 1), value=gap))
        table = _local_table(cost, symbols)
        lookups = []
        for side in (rows, cols):
            lookup = torch.full((gap + 1,), len(side), dtype=torch.long)
            lookup[side] = torch.arange(len(side))
            lookups.append(lookup)
        return cls(table, cost, unknown, lookups[0], lookups[1], col_side, symbols)

    def _lookup(self, side: "FlatTable") -> Optional[torch.Tensor]:
        return self.col_lookup if side is self.col_side and self.col_side is not None else self.lookup

    def flat_labels(self, side: "FlatTable") -> torch.Tensor:
        lookup = self._lookup(side)
        if lookup is None:
            return side.flat_labels(self.cost, self.unknown)
        cached = self._flat.get(id(side))
        if cached is None or cached[0] is not side:
            cached = self._flat[id(side)] = (side, lookup[side.flat_labels(self.cost, self.unknown)])
        return cached[1]

    def padded_labels(self, side: "FlatTable", pairs: torch.Tensor, width: int) -> torch.Tensor:
        enc = side.encoded(self.cost, self.unknown)[pairs, :width]
        lookup = self._lookup(side)
        return enc if lookup is None else lookup[enc]


def _local_table(cost: SymbolCost, symbols: tuple) -> torch.Tensor:
    """A local view's checked table: among ``symbols`` (``(used,)``, square) or between them
    (``(rows, cols)``, rectangular), gap included, differentiable in the module's parameters."""
    table = subtable_of(cost, symbols[0]) if len(symbols) == 1 else block_of(cost, *symbols)
    check_costs(table, f"{type(cost).__name__} costs")
    return table


def _symbols_by_frequency(labels: torch.Tensor, gap: int) -> torch.Tensor:
    """The distinct symbols of ``labels`` but the gap, the most frequent first (ties by index)."""
    counts = torch.bincount(labels.reshape(-1), minlength=gap + 1)[:gap]
    symbols = torch.nonzero(counts).reshape(-1)
    return symbols[torch.argsort(counts[symbols], descending=True, stable=True)]


def matrix_view(x_table: "FlatTable", y_table: "FlatTable", cost, unknown: str) -> Optional[SymbolView]:
    """One symbol view for every pair of two tables (a whole matrix): the whole table, or a
    local one over all their symbols if it fits ``limits.LOCAL_TABLE_CELLS``, else None (then
    :func:`~.pairwise.table_pair_distances` splits the pairs)."""
    if not isinstance(cost, SymbolCost):
        return None
    table = whole_table(cost, x_table, y_table, unknown)
    if table is not None:
        return SymbolView(table, cost, unknown)
    # (each table's distinct symbols, cached: the same set, hence the same view, as all labels)
    labels = [x_table.distinct_labels(cost, unknown)]
    if y_table is not x_table:
        labels.append(y_table.distinct_labels(cost, unknown))
    return SymbolView.local(cost, unknown, labels, limits.LOCAL_TABLE_CELLS)


def whole_table(cost: SymbolCost, x_table: "FlatTable", y_table: "FlatTable", unknown: str) -> Optional[torch.Tensor]:
    """The cost module's whole symbol table if it has one, else None."""
    table = table_of(cost)
    if table is None:
        return None
    # Fail early, naming unknown labels, as the padded path does.
    x_table.flat_labels(cost, unknown)
    y_table.flat_labels(cost, unknown)
    check_symbol_table(cost, table)
    return table


def check_symbol_table(cost: SymbolCost, table) -> None:
    """ValueError unless ``table`` (a module's whole symbol table) is a ``(len(alphabet) + 1,) *
    2`` tensor of finite costs."""
    size = len(cost.alphabet) + 1
    if not isinstance(table, torch.Tensor) or tuple(table.shape) != (size, size):
        raise ValueError(
            f"{type(cost).__name__}.symbol_table() must return a ({size}, {size}) tensor, got "
            f"{tuple(table.shape) if isinstance(table, torch.Tensor) else type(table).__name__}"
        )
    check_costs(table, f"{type(cost).__name__}.symbol_table()")
