"""Differentiable edit distances between trees or sequences.

The kernels take padded cost tensors ``(B, M+1, N+1)``: pair ``b`` with
``|x| = m``, ``|y| = n`` uses ``costs[b, :m+1, :n+1]``, where ``[i, j]`` replaces
``x_i`` by ``y_j``, ``[i, n]`` deletes ``x_i`` and ``[m, j]`` inserts ``y_j``
(``[m, n]`` is unused). Nodes of trees are numbered in preorder.

Three differentiable quantities:

* **exact** (default): ``d(C)`` from the dynamic program; its gradient with
  respect to ``C`` is the co-optimal alignment matrix ``P(C)`` (the average over
  all cheapest mappings; a supergradient where the optimum is not unique).
* **pseudo** (the paper's ``d~``): ``sum(P0 * C)`` with ``P0 = P(C0)`` frozen at
  reference costs ``C0``.
* **soft**: ``-T log sum_M exp(-cost(M) / T)`` over all mappings at a temperature
  ``T``; smooth, its gradient is the expected alignment under ``p(M) ~ exp(-cost(M) / T)``.

Costs may live on any device and carry autograd history; the dynamic program
runs on the CPU (one transfer per batch) and results come back on the costs'
device.

One module of over 600 lines on purpose: :class:`FlatTable`, the symbol views,
:class:`PairBatch` and its two autograd functions call into each other (the functions run
the batch's kernels and scatter into the views' tables), and splitting them would turn their
private helpers into a public surface. Layer: ops (imports the kernels, the cost modules and
:mod:`bedl_torch.labels`).
"""
from __future__ import annotations

import copy
import itertools
import math
import numbers
import weakref
from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from . import _ext
from .costs import SymbolCost, UnitCost, block_of, subtable_of, table_of
from .labels import alphabet_of, kind_of, labels_of, long_tensor
from .validation import check_cost_module, check_cost_tensor, check_sums_finite

__all__ = [
    "edit_distance",
    "coopt_matrix",
    "pseudo_edit_distance",
    "edit_distance_batch",
    "coopt_matrix_batch",
    "soft_edit_distance",
    "soft_edit_distance_batch",
    "PairBatch",
    "FlatTable",
    "pairwise_distances",
    "table_pair_distances",
    "default_rel_tol",
]

# Cells of one chunk's padded cost tensor in pairwise_distances (about 32 MB in float64).
_CHUNK_CELLS = 1 << 22
# Largest local symbol table (S x S entries over the symbols in use) built for a cost module
# without a whole table: 4M entries, 30.5 MiB in float64. The kernels' time per cell hardly
# depends on the table's size (they gather each pair's costs once); the bound is on memory,
# and it keeps a table below glibc's 32 MiB ceiling for mmap, so the tables of successive
# tiles reuse freed heap memory instead of faulting in fresh pages (about as slow as the
# table's matrix product).
_LOCAL_TABLE_CELLS = 2000 * 2000
# Most entries (16 bytes each: 128 MiB) of the per-pair lists of P by label pair that the
# forward of a symbol table requiring grad keeps for its backward; the bound counts each
# pair's (distinct x labels + 1)(distinct y labels + 1) - 1. Beyond it, backward recomputes P.
_PAIR_SUM_ENTRIES = 1 << 23
# Whether forward keeps those lists: where most pairs got a nonzero gradient in the last
# backward through the same cost module (at least this fraction of them: below it, computing
# P for every pair in forward costs more than a distance pass plus P of the few pairs that
# backward needs, as with a GLVQ loss that reads two distances per row). True or False
# decides for every call instead.
_LISTS_MIN_NONZERO = 0.75
_BACKWARD_LISTS: Optional[bool] = None
_dense_backward = weakref.WeakKeyDictionary()  # cost module -> its last backward's weights were dense


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


# ---------------------------------------------------------------------------
# Inputs: trees or sequences, flattened into the arrays the kernels take
# ---------------------------------------------------------------------------


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

    def __len__(self) -> int:
        return len(self.objects)

    def _codes(self, cost: SymbolCost, unknown: str) -> dict:
        """This table's symbol indices under ``cost`` (cached per cost module, dropped when
        its alphabet grows): ``"flat"`` always, ``"padded"`` once asked for."""
        per_cost = self._encoded.setdefault(cost, {})
        key = (len(cost.alphabet), unknown)
        if key not in per_cost:
            # One encode call for the whole table (it names unknown labels).
            flat = cost.encode(list(itertools.chain.from_iterable(map(labels_of, self.objects))),
                               unknown=unknown)
            per_cost.clear()
            per_cost[key] = {"flat": flat}
        return per_cost[key]

    def flat_labels(self, cost: SymbolCost, unknown: str) -> torch.Tensor:
        """Symbol index of every node (element), concatenated in table order (like ``sizes``)."""
        return self._codes(cost, unknown)["flat"]

    def encoded(self, cost: SymbolCost, unknown: str) -> torch.Tensor:
        """Symbol indices ``(len, max_len + 1)``, padded with the gap."""
        codes = self._codes(cost, unknown)
        if "padded" not in codes:
            width = int(self.lengths.max()) + 1 if len(self) else 1
            out = torch.full((len(self), width), cost.gap_index, dtype=torch.long)
            out[torch.arange(width)[None, :] < self.lengths[:, None]] = codes["flat"]
            codes["padded"] = out
        return codes["padded"]


def check_rel_tol(rel_tol, dtype) -> float:
    """The tie tolerance to use: ``default_rel_tol(dtype)`` for None; ValueError unless finite and >= 0."""
    if rel_tol is None:
        return default_rel_tol(dtype)
    rel_tol = float(rel_tol)
    if not (math.isfinite(rel_tol) and rel_tol >= 0):
        raise ValueError(f"rel_tol must be finite and >= 0, got {rel_tol}")
    return rel_tol


def _check_costs(costs, name: str = "costs", finite: bool = True) -> None:
    """:func:`bedl_torch.validation.check_cost_tensor` (type, layout, device, dtype; with
    ``finite`` also NaN/inf)."""
    check_cost_tensor(costs, name, finite=finite)


class _SymbolView:
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
                 col_side: Optional["FlatTable"] = None):
        self.table, self.cost, self.unknown, self.lookup = table, cost, unknown, lookup
        self.col_lookup, self.col_side = col_lookup, col_side
        self._flat = {}  # id(side) -> (side, its labels in this table's numbering)

    @classmethod
    def local(cls, cost: SymbolCost, unknown: str, labels: Sequence[torch.Tensor],
              limit: int) -> Optional["_SymbolView"]:
        """The local view over the symbols in ``labels`` (alphabet indices), or None when its
        table would exceed ``limit`` cells."""
        gap = cost.gap_index
        used = torch.unique(torch.cat([t.reshape(-1) for t in labels]
                                      + [torch.tensor([gap], dtype=torch.long)]))
        k = len(used)  # sorted: the gap, the largest index, comes last
        if k * k > limit:
            return None
        table = subtable_of(cost, used)
        _check_costs(table, f"{type(cost).__name__} costs")
        lookup = torch.full((gap + 1,), k - 1, dtype=torch.long)
        lookup[used] = torch.arange(k)
        return cls(table, cost, unknown, lookup)

    @classmethod
    def between(cls, cost: SymbolCost, unknown: str, x_labels: torch.Tensor,
                y_labels: torch.Tensor, col_side: "FlatTable", limit: int,
                max_block: Optional[int] = None) -> Optional["_SymbolView"]:
        """The local view whose rows are the symbols of ``x_labels`` and whose columns are
        those of ``y_labels`` (alphabet indices, any shape; the labels of ``col_side`` are read
        as columns), or None when its ``S x S`` table would exceed ``limit`` cells or its
        ``kx x ky`` block of costs ``max_block``.

        ``S = max(kx, ky) + 1``: the kernels take a square table, the gap last in both
        directions. Where the two sides' symbols are about as many, the table is one
        :func:`~bedl_torch.costs.block_of` call whose shorter side is padded with the gap
        (rows or columns that no pair reads), built in place; else the ``(kx+1, ky+1)`` block
        is computed alone and copied into a table of zeros (its backward, too, stays on the
        block). Each side's symbols are numbered by frequency, so the costs most pairs read
        share few cache lines.
        """
        gap = cost.gap_index
        rows, cols = _symbols_by_frequency(x_labels, gap), _symbols_by_frequency(y_labels, gap)
        kx, ky = len(rows), len(cols)
        size = max(kx, ky) + 1
        if size * size > limit or (max_block is not None and kx * ky > max_block):
            return None
        name = f"{type(cost).__name__} costs"
        if 2 * (kx + 1) * (ky + 1) >= size * size:
            block = block_of(cost, F.pad(rows, (0, size - kx), value=gap),
                             F.pad(cols, (0, size - ky), value=gap))
            _check_costs(block, name)
        else:
            block = block_of(cost, F.pad(rows, (0, 1), value=gap), F.pad(cols, (0, 1), value=gap))
            _check_costs(block, name)
            # rows kx .. size - 2 or columns ky .. size - 2 stand for no symbol
            table = block.new_zeros(size, size)
            if kx < ky:
                table[:kx], table[-1] = block[:kx], block[-1]
            else:
                table[:, :ky], table[:, -1] = block[:, :ky], block[:, -1]
            block = table
        lookups = []
        for symbols in (rows, cols):
            lookup = torch.full((gap + 1,), size - 1, dtype=torch.long)
            lookup[symbols] = torch.arange(len(symbols))
            lookups.append(lookup)
        return cls(block, cost, unknown, lookups[0], lookups[1], col_side)

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


def _symbols_by_frequency(labels: torch.Tensor, gap: int) -> torch.Tensor:
    """The distinct symbols of ``labels`` but the gap, the most frequent first (ties by index)."""
    counts = torch.bincount(labels.reshape(-1), minlength=gap + 1)[:gap]
    symbols = torch.nonzero(counts).reshape(-1)
    return symbols[torch.argsort(counts[symbols], descending=True, stable=True)]


def matrix_view(x_table: "FlatTable", y_table: "FlatTable", cost, unknown: str) -> Optional[_SymbolView]:
    """One symbol view for every pair of two tables (a whole matrix): the whole table, or a
    local one over all their symbols if it fits ``_LOCAL_TABLE_CELLS``, else None (then
    :func:`_symbol_tiles` splits the pairs)."""
    if not isinstance(cost, SymbolCost):
        return None
    table = _whole_table(cost, x_table, y_table, unknown)
    if table is not None:
        return _SymbolView(table, cost, unknown)
    labels = [x_table.flat_labels(cost, unknown)]
    if y_table is not x_table:
        labels.append(y_table.flat_labels(cost, unknown))
    return _SymbolView.local(cost, unknown, labels, _LOCAL_TABLE_CELLS)


def _whole_table(cost: SymbolCost, x_table: "FlatTable", y_table: "FlatTable", unknown: str) -> Optional[torch.Tensor]:
    """The cost module's whole symbol table if it has one, else None."""
    table = table_of(cost)
    if table is None:
        return None
    # Fail early, naming unknown labels, as the padded path does.
    x_table.flat_labels(cost, unknown)
    y_table.flat_labels(cost, unknown)
    size = len(cost.alphabet) + 1
    if not isinstance(table, torch.Tensor) or tuple(table.shape) != (size, size):
        raise ValueError(
            f"{type(cost).__name__}.symbol_table() must return a ({size}, {size}) tensor, got "
            f"{tuple(table.shape) if isinstance(table, torch.Tensor) else type(table).__name__}"
        )
    _check_costs(table, f"{type(cost).__name__}.symbol_table()")
    return table


class PairBatch:
    """A batch of pairs ``(xs[k], ys[k])``, flattened once for repeated evaluation.

    Both sides hold trees (:class:`bedl_torch.Tree`) or both hold sequences. Use
    it where the same pairs are evaluated many times (an optimiser's loop): the
    structure and the symbol indices are computed once.

    Args:
        xs, ys: equally long sequences of trees or of sequences.

    Attributes:
        x_table, y_table (FlatTable): the two sides, flattened. pair_x, pair_y: int64 ``(B,)``
            indices of each pair's objects in the tables. m, n: int64 ``(B,)`` their lengths.
        kind (str): ``"tree"`` or ``"sequence"``. All on the CPU.

    Raises:
        ValueError: sides of different lengths. TypeError: objects that are neither trees nor
            sequences, or trees mixed with sequences.

    Results (distances, co-optimal matrices) come back on the costs' device and dtype.
    """

    def __init__(self, xs: Sequence, ys: Sequence):
        xs, ys = list(xs), list(ys)
        if len(xs) != len(ys):
            raise ValueError(f"xs and ys must have the same length, got {len(xs)} and {len(ys)}")
        self._init(FlatTable(xs, "xs"), FlatTable(ys, "ys"), torch.arange(len(xs)), torch.arange(len(ys)))

    @classmethod
    def from_tables(cls, x_table: FlatTable, y_table: FlatTable, pair_x, pair_y) -> "PairBatch":
        """Pairs ``(x_table.objects[pair_x[k]], y_table.objects[pair_y[k]])`` over tables
        flattened once.

        Args:
            x_table, y_table: :class:`FlatTable` objects, e.g. the ``x_table``/``y_table``
                attributes of another ``PairBatch``; their structure and symbol indices are
                shared, so sub-batches (chunks, data-to-prototype pairs) cost no re-flattening.
            pair_x, pair_y: equally long int64 index vectors (CPU) into the two tables.

        Raises:
            TypeError: one table holds trees and the other sequences.
        """
        self = cls.__new__(cls)
        self._init(x_table, y_table, torch.as_tensor(pair_x, dtype=torch.long),
                   torch.as_tensor(pair_y, dtype=torch.long))
        return self

    def _init(self, x_table, y_table, pair_x, pair_y):
        if x_table.kind and y_table.kind and x_table.kind != y_table.kind:
            raise TypeError(
                f"both sides must be trees or both sequences, got {x_table.kind}s and {y_table.kind}s"
            )
        self.x_table, self.y_table = x_table, y_table
        self.kind = x_table.kind or y_table.kind or "sequence"
        self.pair_x, self.pair_y = pair_x, pair_y
        self.m = x_table.lengths[pair_x] if len(pair_x) else torch.zeros(0, dtype=torch.long)
        self.n = y_table.lengths[pair_y] if len(pair_y) else torch.zeros(0, dtype=torch.long)
        self.rows = int(self.m.max()) + 1 if len(self) else 1
        self.cols = int(self.n.max()) + 1 if len(self) else 1

    def __len__(self) -> int:
        return len(self.pair_x)

    @property
    def shape(self) -> Tuple[int, int, int]:
        """Shape ``(B, M+1, N+1)`` of the padded cost tensor."""
        return (len(self), self.rows, self.cols)

    # -- costs ---------------------------------------------------------------

    def costs(self, cost: SymbolCost, unknown: str = "error") -> torch.Tensor:
        """Padded costs ``(B, M+1, N+1)`` of every pair under a cost module (its device and
        dtype; the padding holds gap costs).

        Raises:
            ValueError: labels missing from ``cost.alphabet`` (named) unless
                ``unknown="gap"``, or a module that returns the wrong shape.
            TypeError: ``cost`` is not a :class:`SymbolCost`.
        """
        check_cost_module(cost)
        x_idx = self.x_table.encoded(cost, unknown)[self.pair_x, : self.rows]
        y_idx = self.y_table.encoded(cost, unknown)[self.pair_y, : self.cols]
        out = cost(x_idx, y_idx)
        check_cost_tensor(out, f"the costs of {type(cost).__name__}", finite=False)
        if out.shape != self.shape:
            raise ValueError(
                f"{type(cost).__name__} returned costs of shape {tuple(out.shape)}, expected {self.shape}"
            )
        return out

    def _as_costs(self, cost_or_costs, unknown="error", finite: bool = True) -> torch.Tensor:
        if isinstance(cost_or_costs, SymbolCost):
            costs = self.costs(cost_or_costs, unknown)
        else:
            costs = cost_or_costs
        _check_costs(costs, finite=finite)
        if costs.dim() != 3 or costs.shape[0] != len(self) or costs.shape[1] < self.rows or costs.shape[2] < self.cols:
            raise ValueError(
                f"costs must be 3-D (batch, |x|+1, |y|+1) of at least {self.shape}, got {tuple(costs.shape)}"
            )
        return costs

    # -- kernels -------------------------------------------------------------

    def _run(self, costs: torch.Tensor, need_coopt: bool, rel_tol: float):
        device = costs.device
        c = costs.detach()
        if device.type != "cpu":
            c = c.cpu()
        # The kernels check finiteness and the overflow rule on the data they read and raise
        # ValueError naming the pair (see _check_costs).
        if self.kind == "tree":
            d, p = _ext.ted_cpu(c, self.x_table.sizes, self.x_table.ptr, self.y_table.sizes,
                                self.y_table.ptr, self.pair_x, self.pair_y, need_coopt, rel_tol)
        else:
            d, p = _ext.sed_cpu(c, self.m, self.n, need_coopt, rel_tol)
        if device.type != "cpu":
            d = d.to(device)
            p = p.to(device)
        return d, p

    def _symbol_args(self, view: _SymbolView, table: torch.Tensor) -> tuple:
        """The symbol-table kernels' leading arguments: ``table`` (the view's, or a saved copy
        of it) on the CPU, the labels in the view's numbering, the layout and the pairs."""
        t = table.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        xl = view.flat_labels(self.x_table)
        yl = view.flat_labels(self.y_table)
        if self.kind == "tree":
            return (t, xl, self.x_table.sizes, self.x_table.ptr, yl, self.y_table.sizes, self.y_table.ptr,
                    self.pair_x, self.pair_y)
        return t, xl, self.x_table.ptr, yl, self.y_table.ptr, self.pair_x, self.pair_y

    def _run_symbols(self, view: _SymbolView, need_coopt: bool, rel_tol: float):
        """Kernels on a symbol view's table; P stays on the CPU (padded)."""
        op = _ext.ted_symbols_cpu if self.kind == "tree" else _ext.sed_symbols_cpu
        return op(*self._symbol_args(view, view.table), need_coopt, rel_tol)

    def _run_symbol_sums(self, view: _SymbolView, rel_tol: float):
        """Distances with each pair's P listed by label pair (for the backward), or only the
        distances (and None) where the lists could exceed ``_PAIR_SUM_ENTRIES``."""
        op = _ext.ted_symbols_sums_cpu if self.kind == "tree" else _ext.sed_symbols_sums_cpu
        return _distances_and_sums(op(*self._symbol_args(view, view.table), rel_tol, _PAIR_SUM_ENTRIES))

    def _symbol_view(self, cost, unknown: str) -> Optional[_SymbolView]:
        """How the kernels can gather this batch's costs from a symbol table: the module's
        whole table, or a local one over the batch's symbols where that is smaller than the
        padded cost tensor; None: the padded path (``cost.forward`` per pair)."""
        if not isinstance(cost, SymbolCost):
            return None
        check_cost_module(cost)
        table = _whole_table(cost, self.x_table, self.y_table, unknown)
        if table is not None:
            return _SymbolView(table, cost, unknown)
        if not len(self):
            return None
        x_enc = self.x_table.encoded(cost, unknown)  # (also names unknown labels)
        y_enc = self.y_table.encoded(cost, unknown)
        labels = [x_enc[torch.unique(self.pair_x), : self.rows],
                  y_enc[torch.unique(self.pair_y), : self.cols]]
        # worth it only where symbols repeat: the table well below the padded costs
        padded_cells = len(self) * self.rows * self.cols
        view = _SymbolView.local(cost, unknown, labels, min(padded_cells // 4, _LOCAL_TABLE_CELLS))
        if view is None and self.y_table is not self.x_table:
            # rows over the x side's symbols, columns over the y side's: no more costs than
            # the padded path computes
            view = _SymbolView.between(cost, unknown, labels[0], labels[1], self.y_table,
                                       _LOCAL_TABLE_CELLS, max_block=padded_cells)
        return view

    def distances(self, cost_or_costs, mode: str = "exact", reference=None, *,
                  rel_tol: Optional[float] = None, unknown: str = "error",
                  temperature: Optional[float] = None) -> torch.Tensor:
        """Distances ``(B,)`` of all pairs, differentiable in the costs.

        Args:
            cost_or_costs: a cost module or a padded float32/float64 cost tensor
                ``(B, >= M+1, >= N+1)`` on any device.
            mode: ``"exact"`` (gradient P(C)) or ``"pseudo"`` (``sum(P0 * C)`` with
                P0 at ``reference``: a cost module, a padded tensor or a P0 tensor
                from :meth:`coopt`; default the current costs, detached) or ``"soft"``
                (:func:`soft_edit_distance` at ``temperature``; gradient the expected
                alignment).

        Raises:
            ValueError: an unknown mode, costs of the wrong shape, NaN or inf costs, labels
                missing from the alphabet, ``mode="soft"`` without a temperature (or one that
                is not finite and > 0), a temperature with another mode. TypeError: non-float
                costs.
        """
        if mode == "soft":
            return _soft_distances(self, cost_or_costs, temperature, unknown)
        if temperature is not None:
            raise ValueError(f"temperature is used only with mode='soft', got mode={mode!r}")
        if isinstance(reference, torch.Tensor):
            check_cost_tensor(reference, "reference", finite=False)
        return self._distances(cost_or_costs, mode, reference, rel_tol, unknown)

    def _distances(self, cost_or_costs, mode="exact", reference=None, rel_tol=None,
                   unknown="error", view=None):
        if mode == "exact":
            if view is None:
                view = self._symbol_view(cost_or_costs, unknown)
            if view is not None:
                tol = check_rel_tol(rel_tol, view.table.dtype)
                d, _ = _SymbolEditDistanceFn.apply(view.table, self, view, tol, False)
                return d
            costs = self._as_costs(cost_or_costs, unknown, finite=False)
            tol = check_rel_tol(rel_tol, costs.dtype)
            d, _ = _EditDistanceFn.apply(costs, self, tol, False)
            return d
        if mode == "pseudo":
            if reference is None:
                reference = cost_or_costs
                if isinstance(reference, torch.Tensor):
                    reference = reference.detach()
            if isinstance(reference, SymbolCost):
                p0 = self._coopt(reference, rel_tol, unknown)[1]
            else:
                p0 = self._coopt(reference, rel_tol)[1]
            return self._pseudo(cost_or_costs, p0, unknown, view)
        raise ValueError(f"mode must be 'exact', 'pseudo' or 'soft', got {mode!r}")

    def coopt(self, cost_or_costs, *, rel_tol: Optional[float] = None,
              unknown: str = "error") -> Tuple[torch.Tensor, torch.Tensor]:
        """Distances ``(B,)`` and co-optimal matrices ``(B, M+1, N+1)`` (zero outside each
        pair's block), without gradient, on the costs' device. Raises as :meth:`distances`."""
        return self._coopt(cost_or_costs, rel_tol, unknown)

    def _coopt(self, cost_or_costs, rel_tol=None, unknown="error", view=None):
        with torch.no_grad():
            if view is None:
                view = self._symbol_view(cost_or_costs, unknown)
            if view is not None:
                tol = check_rel_tol(rel_tol, view.table.dtype)
                d, p = self._run_symbols(view, True, tol)
                return d.to(view.table.device), p.to(view.table.device)
            costs = self._as_costs(cost_or_costs, unknown, finite=False)
            tol = check_rel_tol(rel_tol, costs.dtype)
            return self._run(costs, True, tol)

    def pseudo_distances(self, cost_or_costs, coopt: torch.Tensor, *, unknown: str = "error") -> torch.Tensor:
        """Pseudo edit distances ``sum(P0 * C)`` ``(B,)`` for frozen co-optimal matrices ``P0``
        (from :meth:`coopt`), differentiable in the costs.

        Raises:
            TypeError: ``coopt`` not a dense float32/float64 tensor.
            ValueError: ``coopt`` not a ``(B, M+1, N+1)`` tensor, or on the meta device; as
                :meth:`costs`; sums that overflow the dtype.
        """
        check_cost_tensor(coopt, "coopt", finite=False)
        return self._pseudo(cost_or_costs, coopt, unknown)

    def _pseudo(self, cost_or_costs, coopt, unknown="error", view=None):
        if not isinstance(coopt, torch.Tensor) or coopt.shape[0] != len(self) or coopt.dim() != 3:
            raise ValueError("coopt must be a (B, M+1, N+1) tensor from PairBatch.coopt")
        if view is None and isinstance(cost_or_costs, SymbolCost):
            view = self._symbol_view(cost_or_costs, unknown)
        if view is not None:  # gather the padded costs from the table (differentiable)
            xi = view.padded_labels(self.x_table, self.pair_x, self.rows).to(view.table.device)
            yi = view.padded_labels(self.y_table, self.pair_y, self.cols).to(view.table.device)
            costs = view.table[xi[:, :, None], yi[:, None, :]]
        else:
            costs = self._as_costs(cost_or_costs, unknown)
        rows, cols = min(costs.shape[1], coopt.shape[1]), min(costs.shape[2], coopt.shape[2])
        p0 = coopt[:, :rows, :cols].to(device=costs.device, dtype=costs.dtype)
        out = (p0 * costs[:, :rows, :cols]).sum(dim=(1, 2))
        check_sums_finite(out, "pseudo distances of pairs")
        return out


def _distances_and_sums(result) -> tuple:
    """A sums op's ``(distances, ptr, entry, value)`` as ``(distances, (ptr, entry, value))``,
    or ``(distances, None)`` where it listed nothing (the lists would not fit)."""
    d, *sums = result
    return d, (tuple(sums) if sums[0].numel() else None)


class SymbolTableKernels:
    """The symbol-table kernels on one batch's pairs with their arguments built once, for
    callers that evaluate the same pairs under many tables (BEDL's exact metric step).

    Skips :meth:`PairBatch.distances`' per-call work (module checks, views, autograd): the
    table passed must be the whole ``(U+1, U+1)`` table of the module the labels were encoded
    with, a CPU tensor; the kernels still check it (NaN/inf, overflow rule).

    Args:
        batch: the pairs. cost: the module whose alphabet encodes the labels.
        unknown: ``"error"`` or ``"gap"``, as for the ops.
    """

    def __init__(self, batch: PairBatch, cost: SymbolCost, unknown: str):
        xt, yt = batch.x_table, batch.y_table
        xl, yl = xt.flat_labels(cost, unknown), yt.flat_labels(cost, unknown)
        if batch.kind == "tree":
            self._args = (xl, xt.sizes, xt.ptr, yl, yt.sizes, yt.ptr, batch.pair_x, batch.pair_y)
            self._distances, self._grad = _ext.ted_symbols_cpu, _ext.ted_symbols_grad_cpu
            self._sums = _ext.ted_symbols_sums_cpu
        else:
            self._args = (xl, xt.ptr, yl, yt.ptr, batch.pair_x, batch.pair_y)
            self._distances, self._grad = _ext.sed_symbols_cpu, _ext.sed_symbols_grad_cpu
            self._sums = _ext.sed_symbols_sums_cpu

    def distances(self, table: torch.Tensor, rel_tol: float) -> torch.Tensor:
        """The exact distances ``(B,)`` under ``table`` (no gradient)."""
        return self._distances(table, *self._args, False, rel_tol)[0]

    def weighted_grad(self, table: torch.Tensor, weights: torch.Tensor, rel_tol: float) -> torch.Tensor:
        """The ``(U+1, U+1)`` gradient of ``sum_k weights[k] * distance_k`` in the table's
        entries (``weights``: ``(B,)`` of the table's dtype), as the distances' backward."""
        return self._grad(table, *self._args, weights, rel_tol)

    def distances_with_sums(self, table: torch.Tensor, rel_tol: float):
        """The exact distances ``(B,)`` and each pair's P summed by label pair (one pass), for
        :meth:`grad_from_sums` once the weights are known; the sums are None where they could
        exceed ``_PAIR_SUM_ENTRIES`` entries (use :meth:`weighted_grad` then)."""
        return _distances_and_sums(self._sums(table, *self._args, rel_tol, _PAIR_SUM_ENTRIES))

    @staticmethod
    def grad_from_sums(sums, weights: torch.Tensor, symbols: int) -> torch.Tensor:
        """:meth:`weighted_grad` from :meth:`distances_with_sums`' sums: the same bits."""
        return _ext.weighted_pair_sums_cpu(*sums, weights, symbols)


class _EditDistanceFn(torch.autograd.Function):
    """Forward returns the distances and (when needed) P; backward only scales P."""

    @staticmethod
    def forward(ctx, costs, batch: PairBatch, rel_tol: float, want_coopt: bool):
        need = bool(ctx.needs_input_grad[0]) or want_coopt
        d, p = batch._run(costs, need, rel_tol)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(p)
        if need:
            ctx.mark_non_differentiable(p)
        return d, p

    @staticmethod
    def backward(ctx, grad_d, grad_p):
        (p,) = ctx.saved_tensors
        return grad_d.reshape(-1, 1, 1).to(p.dtype) * p, None, None, None


class _SymbolEditDistanceFn(torch.autograd.Function):
    """Distances from a symbol cost table. Where the table requires grad and the last backward
    through the same cost module weighted most pairs (``_LISTS_MIN_NONZERO``), forward computes
    each pair's co-optimal matrix P with its distance and keeps only P summed by label pair
    (a few entries per pair), so that backward merely weights and adds them (as torchaudio's
    RNN-T loss computes its gradient in forward). Otherwise (few weighted pairs, or lists that
    could grow past ``_PAIR_SUM_ENTRIES``), forward computes the distances alone and backward
    runs the gradient kernel, which computes the lists of the pairs of nonzero weight: the
    same bits either way. Where P is requested too (``want_coopt``), backward scatters that P."""

    @staticmethod
    def forward(ctx, table, batch: PairBatch, view: _SymbolView, rel_tol: float, want_coopt: bool):
        sums = None
        lists = _BACKWARD_LISTS if _BACKWARD_LISTS is not None else _dense_backward.get(view.cost, False)
        if ctx.needs_input_grad[0] and not want_coopt and lists:
            d, sums = batch._run_symbol_sums(view, rel_tol)
            p = d.new_empty((0,))
        else:
            d, p = batch._run_symbols(view, want_coopt, rel_tol)
        if ctx.needs_input_grad[0]:
            ctx.batch, ctx.view, ctx.rel_tol, ctx.want_coopt = batch, view, rel_tol, want_coopt
            ctx.table_shape, ctx.table_dtype = table.shape, table.dtype
            ctx.from_sums = sums is not None
            # P, the sums, or the table as of forward (autograd refuses backward if it
            # changed in place since)
            ctx.save_for_backward(*(sums if sums is not None else [p if want_coopt else table]))
        d = d.to(table.device)
        p = p.to(table.device)
        if want_coopt:
            ctx.mark_non_differentiable(p)
        return d, p

    @staticmethod
    def backward(ctx, grad_d, grad_p):
        saved = ctx.saved_tensors
        batch, view = ctx.batch, ctx.view
        if not ctx.want_coopt:
            nonzero = int(torch.count_nonzero(grad_d))
            _dense_backward[view.cost] = nonzero >= _LISTS_MIN_NONZERO * grad_d.numel()
        if ctx.from_sums:
            weights = grad_d.detach().to("cpu", ctx.table_dtype).reshape(-1)
            grad = _ext.weighted_pair_sums_cpu(*saved, weights, ctx.table_shape[0])
        elif ctx.want_coopt:
            grad = _SymbolEditDistanceFn._scatter_coopt(saved[0].cpu(), grad_d, batch, view, ctx.table_shape[0])
        else:
            weights = grad_d.detach().to("cpu", ctx.table_dtype).reshape(-1)
            op = _ext.ted_symbols_grad_cpu if batch.kind == "tree" else _ext.sed_symbols_grad_cpu
            grad = op(*batch._symbol_args(view, saved[0]), weights, ctx.rel_tol)
        return grad.to(grad_d.device), None, None, None, None

    @staticmethod
    def _scatter_coopt(p, grad_d, batch, view, size):
        """sum_k grad_d[k] * P_k scattered into a (size, size) table by the pairs' labels."""
        rows, cols = p.shape[1], p.shape[2]
        x_idx = view.padded_labels(batch.x_table, batch.pair_x, rows)
        y_idx = view.padded_labels(batch.y_table, batch.pair_y, cols)
        # Pad beyond each pair's block is the gap, and P is zero there.
        flat = (x_idx[:, :, None] * size + y_idx[:, None, :]).reshape(-1)
        weights = (grad_d.detach().to("cpu", p.dtype).reshape(-1, 1, 1) * p).reshape(-1)
        grad = torch.zeros(size * size, dtype=p.dtype).index_add_(0, flat, weights)
        return grad.view(size, size)


# ---------------------------------------------------------------------------
# Soft (temperature) edit distances
# ---------------------------------------------------------------------------


def _check_temperature(temperature) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"temperature must be a real number, got {type(temperature).__name__}")
    temperature = float(temperature)
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be finite and > 0, got {temperature}")
    return temperature


def _run_soft(batch: PairBatch, costs: torch.Tensor, temperature: float, need_grad: bool):
    """The soft kernels on padded costs (any device); results on the costs' device."""
    c = costs.detach()
    if c.device.type != "cpu":
        c = c.cpu()
    if batch.kind == "tree":
        d, p = _ext.ted_soft_cpu(c, batch.x_table.sizes, batch.x_table.ptr, batch.y_table.sizes,
                                 batch.y_table.ptr, batch.pair_x, batch.pair_y, temperature, need_grad)
    else:
        d, p = _ext.sed_soft_cpu(c, batch.m, batch.n, temperature, need_grad)
    return d.to(costs.device), p.to(costs.device)


class _SoftEditDistanceFn(torch.autograd.Function):
    """Soft distances; the gradient is the expected alignment, which forward computes when
    the costs need a gradient."""

    @staticmethod
    def forward(ctx, costs, batch: PairBatch, temperature: float):
        need = bool(ctx.needs_input_grad[0])
        d, p = _run_soft(batch, costs, temperature, need)
        if need:
            ctx.save_for_backward(p)
        return d

    @staticmethod
    def backward(ctx, grad_d):
        (p,) = ctx.saved_tensors
        return grad_d.reshape(-1, 1, 1).to(p.dtype) * p, None, None


def _soft_distances(batch: PairBatch, cost_or_costs, temperature, unknown="error") -> torch.Tensor:
    """Soft distances ``(B,)`` of a batch under a cost module (its padded costs) or padded costs."""
    if temperature is None:
        raise ValueError("mode='soft' needs a temperature")
    temperature = _check_temperature(temperature)
    costs = batch._as_costs(cost_or_costs, unknown, finite=False)
    return _SoftEditDistanceFn.apply(costs, batch, temperature)


def soft_edit_distance(x, y, costs: torch.Tensor, temperature: float) -> torch.Tensor:
    """Soft edit distance ``-T log sum_M exp(-cost(M) / T)`` over all valid mappings ``M``.

    Every tree mapping (one-to-one, ancestor- and order-preserving) or sequence alignment
    counts once. A smooth lower bound of :func:`edit_distance`, which it approaches as
    ``T -> 0`` (within ``T`` times the log of the number of cheapest mappings).

    Args:
        x, y: both trees or both sequences, as for :func:`edit_distance`.
        costs: float32/float64 tensor ``(|x|+1, |y|+1)`` on any device (layout of
            :func:`edit_distance`).
        temperature: ``T``, finite and > 0.

    Returns:
        0-dim tensor on the costs' device. Its gradient with respect to ``costs`` is the
        expected alignment under ``p(M) ~ exp(-cost(M) / T)``: ``[i, j]`` the probability
        that ``x_i`` is replaced by ``y_j``, ``[i, n]`` that ``x_i`` is deleted, ``[m, j]``
        that ``y_j`` is inserted; it tends to :func:`coopt_matrix`'s P as ``T -> 0``.

    Raises:
        TypeError: inputs of the wrong kind, non-float costs, a temperature that is not a
            number. ValueError: wrong cost shape, NaN or inf costs, a temperature that is not
            finite and > 0, costs too large for the temperature.
    """
    batch = PairBatch([x], [y])
    _check_costs(costs, finite=False)
    expected = (len(x) + 1, len(y) + 1)
    if tuple(costs.shape) != expected:
        raise ValueError(
            f"costs must have shape (|x|+1, |y|+1) = {expected} (last row insertions, last column "
            f"deletions), got {tuple(costs.shape)}"
        )
    return _SoftEditDistanceFn.apply(costs[None], batch, _check_temperature(temperature))[0]


def soft_edit_distance_batch(xs: Sequence, ys: Sequence, costs, temperature: float) -> torch.Tensor:
    """Soft edit distances ``(B,)`` of the pairs ``(xs[k], ys[k])`` in one call.

    ``costs`` as for :func:`edit_distance_batch` (a list of per-pair matrices or one padded
    tensor); differentiable (the gradient of pair ``k`` is its expected alignment). Raises as
    :func:`edit_distance_batch` and :func:`soft_edit_distance`.
    """
    batch = PairBatch(xs, ys)
    padded, _ = _pad_costs(batch, costs)
    return _soft_distances(batch, padded, temperature)


# ---------------------------------------------------------------------------
# Single pairs and lists of pairs
# ---------------------------------------------------------------------------


def _single(x, y, costs, rel_tol, want_coopt):
    batch = PairBatch([x], [y])
    _check_costs(costs, finite=False)
    expected = (len(x) + 1, len(y) + 1)
    if tuple(costs.shape) != expected:
        raise ValueError(
            f"costs must have shape (|x|+1, |y|+1) = {expected} (last row insertions, last column "
            f"deletions), got {tuple(costs.shape)}"
        )
    tol = check_rel_tol(rel_tol, costs.dtype)
    d, p = _EditDistanceFn.apply(costs[None], batch, tol, want_coopt)
    return d[0], (p[0] if want_coopt else None)


def edit_distance(x, y, costs: torch.Tensor, *, rel_tol: Optional[float] = None) -> torch.Tensor:
    """Edit distance between two trees or two sequences under a cost matrix.

    Args:
        x, y: both :class:`bedl_torch.Tree` (tree edit distance) or both sequences
            (``str``/``list``/``tuple``; sequence edit distance).
        costs: float32/float64 tensor ``(|x|+1, |y|+1)`` on any device; ``[i, j]``
            replaces ``x_i`` by ``y_j``, the last column deletes, the last row inserts.
        rel_tol: tie tolerance (see :func:`default_rel_tol`).

    Returns:
        0-dim tensor on the costs' device. Its gradient with respect to ``costs``
        is the co-optimal matrix (see :func:`coopt_matrix`).

    Raises:
        TypeError: inputs of the wrong kind, mixed tree and sequence, non-float costs.
        ValueError: wrong cost shape, NaN or inf costs.
    """
    return _single(x, y, costs, rel_tol, False)[0]


def coopt_matrix(x, y, costs: torch.Tensor, *, rel_tol: Optional[float] = None):
    """The edit distance and the co-optimal alignment matrix ``P``.

    ``P[i, j]`` is the fraction of cheapest mappings that map ``x_i`` to ``y_j``,
    ``P[i, n]`` the fraction that delete ``x_i``, ``P[m, j]`` the fraction that
    insert ``y_j``; ``P[m, n] = 0``. Rows ``i < m`` and columns ``j < n`` sum to 1
    and ``distance == (P * costs).sum()``.

    Returns:
        ``(distance, P)``: ``distance`` as from :func:`edit_distance` (differentiable),
        ``P`` with the costs' shape, dtype and device (no gradient).

    Raises:
        As :func:`edit_distance`.
    """
    return _single(x, y, costs, rel_tol, True)


def pseudo_edit_distance(x, y, costs: torch.Tensor, reference_costs: torch.Tensor, *,
                         rel_tol: Optional[float] = None) -> torch.Tensor:
    """The paper's pseudo edit distance ``sum(P(reference_costs) * costs)``.

    P is frozen at ``reference_costs`` (detached), so the gradient with respect
    to ``costs`` is exactly that P.

    Raises:
        ValueError: ``reference_costs`` of another shape or device, NaN or inf costs.
        TypeError: non-float costs.
    """
    _check_costs(costs)
    _check_costs(reference_costs, "reference_costs")
    if tuple(reference_costs.shape) != tuple(costs.shape):
        raise ValueError(
            f"reference_costs must have the shape of costs {tuple(costs.shape)}, got {tuple(reference_costs.shape)}"
        )
    if reference_costs.device != costs.device:
        raise ValueError(
            f"reference_costs must be on the costs' device ({costs.device}), got {reference_costs.device}"
        )
    _, p0 = coopt_matrix(x, y, reference_costs.detach(), rel_tol=rel_tol)
    out = (p0.to(device=costs.device, dtype=costs.dtype) * costs).sum()
    check_sums_finite(out, "the pseudo distance")
    return out


def _pad_costs(batch: PairBatch, costs) -> Tuple[torch.Tensor, bool]:
    if isinstance(costs, torch.Tensor):
        return costs, False
    costs = list(costs)
    if len(costs) != len(batch):
        raise ValueError(f"got {len(costs)} cost matrices for {len(batch)} pairs")
    padded = []
    for k, c in enumerate(costs):
        _check_costs(c, f"costs[{k}]", finite=False)
        expected = (int(batch.m[k]) + 1, int(batch.n[k]) + 1)
        if tuple(c.shape) != expected:
            raise ValueError(f"costs[{k}] must have shape (|x|+1, |y|+1) = {expected}, got {tuple(c.shape)}")
        padded.append(F.pad(c, (0, batch.cols - c.shape[1], 0, batch.rows - c.shape[0])))
    if not padded:
        return torch.zeros(0, 1, 1, dtype=torch.float64), True
    dtypes = {c.dtype for c in padded}
    devices = {c.device for c in padded}
    if len(dtypes) > 1:
        raise TypeError(f"all cost matrices of a batch must share one dtype, got {sorted(map(str, dtypes))}")
    if len(devices) > 1:
        raise ValueError(f"all cost matrices of a batch must be on one device, got {sorted(map(str, devices))}")
    return torch.stack(padded), True


def edit_distance_batch(xs: Sequence, ys: Sequence, costs, *, rel_tol: Optional[float] = None) -> torch.Tensor:
    """Edit distances ``(B,)`` of the pairs ``(xs[k], ys[k])`` in one call.

    Args:
        costs: a list of ``(|x_k|+1, |y_k|+1)`` tensors (one dtype, one device), or one
            padded tensor ``(B, M+1, N+1)`` in which pair ``k`` uses ``[:|x_k|+1, :|y_k|+1]``.

    Returns:
        ``(B,)`` on the costs' device, differentiable (the gradient of pair ``k`` is its P).

    Raises:
        ValueError: a cost matrix of the wrong shape or count, NaN or inf costs, costs on
            several devices. TypeError: non-float costs, mixed dtypes, objects of the wrong
            kind.
    """
    batch = PairBatch(xs, ys)
    padded, _ = _pad_costs(batch, costs)
    return batch.distances(padded, rel_tol=rel_tol)


def coopt_matrix_batch(xs: Sequence, ys: Sequence, costs, *, rel_tol: Optional[float] = None):
    """Distances ``(B,)`` (differentiable) and co-optimal matrices of many pairs.

    Returns P as a list of per-pair matrices if ``costs`` is a list, else as one
    padded ``(B, M+1, N+1)`` tensor (zero outside each pair's block). Raises as
    :func:`edit_distance_batch`.
    """
    batch = PairBatch(xs, ys)
    padded, as_list = _pad_costs(batch, costs)
    padded = batch._as_costs(padded, finite=False)
    tol = check_rel_tol(rel_tol, padded.dtype)
    d, p = _EditDistanceFn.apply(padded, batch, tol, True)
    if as_list:
        return d, [p[k, : int(batch.m[k]) + 1, : int(batch.n[k]) + 1] for k in range(len(batch))]
    return d, p


# ---------------------------------------------------------------------------
# Pairwise matrices
# ---------------------------------------------------------------------------


def pair_chunks(x_table: FlatTable, y_table: FlatTable, ii: torch.Tensor, jj: torch.Tensor,
                 chunk_size: Optional[int] = None):
    """The pairs ``(ii[k], jj[k])`` reordered by size, and chunk boundaries.

    Pairs of similar sizes share a chunk, so a chunk's padded ``(B, M+1, N+1)`` costs and
    co-optimal matrices waste little on padding (sentences of 5 to 50 words padded to the
    longest made each pair cost six times its cells); each chunk holds about
    ``_CHUNK_CELLS`` padded cells, or ``chunk_size`` pairs.
    """
    if chunk_size is not None and chunk_size >= len(ii):
        return ii, jj, [0, len(ii)]  # one chunk: nothing padded, the kernel schedules its pairs
    lx, ly = x_table.lengths[ii], y_table.lengths[jj]
    key = torch.maximum(lx, ly)
    order = torch.argsort(key, stable=True)
    ii, jj = ii[order], jj[order]
    n = len(ii)
    if chunk_size is not None:
        return ii, jj, list(range(0, n, chunk_size)) + [n]
    cells = ((key[order] + 1) ** 2).tolist()  # a chunk's padded cells per pair, at most
    bounds = [0]
    while bounds[-1] < n:
        s = bounds[-1]
        e = min(n, s + max(1, _CHUNK_CELLS // cells[s]))
        e = min(n, s + max(1, _CHUNK_CELLS // cells[e - 1]))  # sizes grow within a chunk
        bounds.append(e)
    return ii, jj, bounds


def table_pair_distances(x_table: FlatTable, y_table: FlatTable, ii: torch.Tensor,
                         jj: torch.Tensor, cost: SymbolCost, *, mode: str = "exact",
                         reference_cost: Optional[SymbolCost] = None,
                         rel_tol: Optional[float] = None, unknown: str = "error",
                         chunk_size: Optional[int] = None, temperature: Optional[float] = None):
    """Distances of the pairs ``(x_table.objects[ii[k]], y_table.objects[jj[k]])`` in
    memory-bounded chunks, for callers that keep :class:`FlatTable` objects across many calls
    (BEDL's training distances, once per round) and assemble the values themselves.

    Args:
        x_table, y_table: the objects, flattened once. ii, jj: int64 ``(Q,)`` pair indices.
        cost, mode, reference_cost, rel_tol, unknown, chunk_size, temperature: as for
            :func:`pairwise_distances` (``chunk_size=None``: chosen by memory).

    Returns:
        ``(ii, jj, values)`` in the order computed (pairs regrouped by tile and size): the
        indices on the CPU, ``values`` ``(Q,)`` on the cost's device and dtype, differentiable
        in its parameters when gradients are enabled.

    Raises:
        ValueError: labels missing from the alphabet (with ``unknown="error"``), NaN or inf
            costs.
    """
    # One symbol table for all pairs (a module's whole table, or one over the symbols of X
    # and Y); where that one would be too large, tiles of pairs with a table each.
    view = matrix_view(x_table, y_table, cost, unknown) if mode != "soft" else None
    ref = reference_cost if reference_cost is not None else cost
    tiles = None
    if view is None and mode != "soft":
        tiles = _symbol_tiles(x_table, y_table, ii, jj, cost, unknown)
    if tiles is None:
        ref_view = view if ref is cost else None
        if mode == "pseudo" and ref_view is None:
            with torch.no_grad():
                ref_view = matrix_view(x_table, y_table, ref, unknown)
        return _chunked_distances(x_table, y_table, ii, jj, cost, view, ref, ref_view, mode,
                                  rel_tol, unknown, chunk_size, temperature)
    # The kernels tell a table's rows from its columns by the side their labels come from.
    col_side = copy.copy(y_table) if y_table is x_table else y_table
    x_enc, y_enc = x_table.encoded(cost, unknown), y_table.encoded(cost, unknown)
    parts = []
    for ti, tj, x_objects, y_objects in tiles:
        x_labels, y_labels = x_enc[x_objects], y_enc[y_objects]
        view = _SymbolView.between(cost, unknown, x_labels, y_labels, col_side, _LOCAL_TABLE_CELLS)
        ref_view = view if ref is cost else None
        if mode == "pseudo" and ref_view is None:
            with torch.no_grad():
                ref_view = _SymbolView.between(ref, unknown, x_labels, y_labels, col_side,
                                               _LOCAL_TABLE_CELLS)
        parts.append(_chunked_distances(x_table, col_side, ti, tj, cost, view, ref, ref_view,
                                        mode, rel_tol, unknown, chunk_size, temperature))
        del view, ref_view  # one tile's tables at a time (unless autograd keeps them)
    return tuple(torch.cat(t) for t in zip(*parts))


def _chunked_distances(x_table, y_table, ii, jj, cost, view, ref, ref_view, mode, rel_tol,
                       unknown, chunk_size, temperature):
    """``(ii, jj, values)`` of pairs that share one symbol view (or none), in chunks."""
    if chunk_size is None and mode == "exact" and view is not None:
        # Distances from a symbol table keep nothing per pair (their backward recomputes P):
        # one kernel call over all pairs (its fixed cost is paid once).
        chunk_size = max(1, len(ii))
    ii, jj, bounds = pair_chunks(x_table, y_table, ii, jj, chunk_size)
    values = []
    for s, e in zip(bounds[:-1], bounds[1:]):
        batch = PairBatch.from_tables(x_table, y_table, ii[s:e], jj[s:e])
        if mode == "exact":
            values.append(batch._distances(cost, rel_tol=rel_tol, unknown=unknown, view=view))
        elif mode == "soft":
            values.append(_soft_distances(batch, cost, temperature, unknown))
        else:
            p0 = batch._coopt(ref, rel_tol, unknown, view=ref_view)[1]
            values.append(batch._pseudo(cost, p0, unknown, view=view))
    return ii, jj, torch.cat(values)


def _symbol_tiles(x_table: FlatTable, y_table: FlatTable, ii: torch.Tensor, jj: torch.Tensor,
                  cost: SymbolCost, unknown: str):
    """The pairs split into tiles ``(ii, jj, x_objects, y_objects)`` for a cost module whose
    symbols in use are too many for one local table, or None (no local tables allowed).

    The objects of each side are cut into runs of consecutive indices with at most
    ``sqrt(_LOCAL_TABLE_CELLS) - 1`` distinct symbols each; a tile holds the pairs between one
    run of each side, and its table the costs between their symbols. A table's cost is
    amortised over the tile's cells: a tile has about one DP cell per pair of its words
    (``tokens_x * tokens_y``), its table one entry per pair of distinct words, and words
    repeat (300 SST sentences: about 5,800 words, 2,000 distinct).
    """
    max_symbols = math.isqrt(_LOCAL_TABLE_CELLS) - 1
    if max_symbols < 1 or not len(ii):
        return None
    x_runs = _symbol_runs(x_table, _objects_in(ii, len(x_table)), cost, unknown, max_symbols)
    y_runs = _symbol_runs(y_table, _objects_in(jj, len(y_table)), cost, unknown, max_symbols)
    if len(x_runs) == 1 and len(y_runs) == 1:
        return [(ii, jj, x_runs[0], y_runs[0])]
    x_run, y_run = _run_index(x_runs, len(x_table)), _run_index(y_runs, len(y_table))
    tile = x_run[ii] * len(y_runs) + y_run[jj]
    order = torch.argsort(tile, stable=True)
    ii, jj, tile = ii[order], jj[order], tile[order]
    ids, counts = torch.unique_consecutive(tile, return_counts=True)
    tiles, s = [], 0
    for t, c in zip(ids.tolist(), counts.tolist()):
        tiles.append((ii[s:s + c], jj[s:s + c], x_runs[t // len(y_runs)], y_runs[t % len(y_runs)]))
        s += c
    return tiles


def _objects_in(indices: torch.Tensor, n: int) -> torch.Tensor:
    """The distinct values of ``indices`` (in ``[0, n)``), sorted."""
    return torch.nonzero(torch.bincount(indices, minlength=n)).reshape(-1)


def _symbol_runs(side: FlatTable, objects: torch.Tensor, cost: SymbolCost, unknown: str,
                 max_symbols: int) -> list:
    """``objects`` (sorted indices) cut into runs of at most ``max_symbols`` distinct symbols
    (not counting the gap; an object with more forms a run alone), as index tensors."""
    flat, ptr, gap = side.flat_labels(cost, unknown).tolist(), side.ptr.tolist(), cost.gap_index
    runs, run, seen = [], [], set()
    for o in objects.tolist():
        symbols = set(flat[ptr[o]:ptr[o + 1]])
        symbols.discard(gap)
        if run and len(seen) + len(symbols - seen) > max_symbols:
            runs.append(run)
            run, seen = [], set()
        run.append(o)
        seen |= symbols
    if run:
        runs.append(run)
    return [torch.tensor(r, dtype=torch.long) for r in runs]


def _run_index(runs: list, n: int) -> torch.Tensor:
    """The run of every object (``-1`` where none)."""
    index = torch.full((n,), -1, dtype=torch.long)
    for k, run in enumerate(runs):
        index[run] = k
    return index


def pairwise_distances(X: Sequence, Y: Optional[Sequence] = None, cost: Optional[SymbolCost] = None, *,
                       mode: str = "exact", reference_cost: Optional[SymbolCost] = None,
                       chunk_size: Optional[int] = None, rel_tol: Optional[float] = None,
                       unknown: str = "error", symmetric: Optional[bool] = None,
                       temperature: Optional[float] = None) -> torch.Tensor:
    """Matrix of edit distances ``(len(X), len(Y))`` under a cost module.

    Args:
        X, Y: lists of trees or of sequences; ``Y=None`` means ``Y = X``.
        cost: a :class:`SymbolCost` (e.g. :class:`EuclideanCost`); ``None`` means unit
            costs over the labels of X and Y.
        mode: ``"exact"``, ``"pseudo"`` (P frozen at ``reference_cost``, default the
            cost module's current state) or ``"soft"`` (:func:`soft_edit_distance` at
            ``temperature``, from each chunk's padded costs).
        chunk_size: pairs per kernel call; bounds memory. Default: about 4M cost cells
            per chunk where co-optimal matrices or padded costs are kept (pseudo mode, no
            symbol table), else all pairs in one call. With gradients enabled each chunk
            keeps its P or its symbol table for backward. A cost module without
            a whole table whose symbols in use are too many for one local table computes
            the matrix in tiles (blocks of X times blocks of Y, one table of at most
            ``2000 x 2000`` costs each), chunked within.
        unknown: ``"error"`` (ValueError naming labels missing from the alphabet) or
            ``"gap"`` (map them to the gap).
        symmetric: compute only ``i <= j`` and mirror; default when ``Y is None``
            and the cost module declares ``symmetric = True``.

    Returns:
        Tensor on the cost's device and dtype, differentiable in the cost module's
        parameters when gradients are enabled.

    Raises:
        TypeError: objects that are neither trees nor sequences, trees mixed with sequences,
            ``cost``/``reference_cost`` not a SymbolCost.
        ValueError: an unknown ``mode``, labels missing from the alphabet (with
            ``unknown="error"``), ``symmetric`` for a non-square matrix, ``chunk_size < 1``,
            NaN or inf costs, ``mode="soft"`` without a temperature (or one that is not
            finite and > 0), a temperature with another mode.
    """
    if mode not in ("exact", "pseudo", "soft"):
        raise ValueError(f"mode must be 'exact', 'pseudo' or 'soft', got {mode!r}")
    if mode == "soft":
        if temperature is None:
            raise ValueError("mode='soft' needs a temperature")
        temperature = _check_temperature(temperature)
    elif temperature is not None:
        raise ValueError(f"temperature is used only with mode='soft', got mode={mode!r}")
    same = Y is None
    X = list(X)
    Y = X if same else list(Y)
    if cost is None:
        cost = UnitCost(alphabet_of(X, Y))
    else:
        check_cost_module(cost)
    if reference_cost is not None:
        check_cost_module(reference_cost, "reference_cost")
    if symmetric is None:
        symmetric = same and getattr(cost, "symmetric", False)
    if symmetric and not same and len(X) != len(Y):
        raise ValueError("symmetric=True needs a square matrix")
    x_table = FlatTable(X, "X")
    y_table = x_table if same else FlatTable(Y, "Y")
    if x_table.kind and y_table.kind and x_table.kind != y_table.kind:
        raise TypeError(f"X and Y must both hold trees or both sequences, got {x_table.kind}s and {y_table.kind}s")
    # Fail early, naming unknown labels, before any work.
    x_table.flat_labels(cost, unknown)
    y_table.flat_labels(cost, unknown)
    if reference_cost is not None:
        x_table.flat_labels(reference_cost, unknown)
        y_table.flat_labels(reference_cost, unknown)

    nx, ny = len(X), len(Y)
    if symmetric:
        ii, jj = torch.triu_indices(nx, ny, offset=0)
    else:
        ii = torch.arange(nx).repeat_interleave(ny)
        jj = torch.arange(ny).repeat(nx)
    out_dtype, out_device = cost.dtype, cost.device
    if len(ii) == 0:
        return torch.zeros(nx, ny, dtype=out_dtype, device=out_device)

    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    ii, jj, vals = table_pair_distances(x_table, y_table, ii, jj, cost, mode=mode,
                                        reference_cost=reference_cost, rel_tol=rel_tol,
                                        unknown=unknown, chunk_size=chunk_size,
                                        temperature=temperature)
    ii, jj = ii.to(out_device), jj.to(out_device)
    if symmetric:
        off = ii != jj
        rows = torch.cat([ii, jj[off]])
        cols = torch.cat([jj, ii[off]])
        vals = torch.cat([vals, vals[off]])
    else:
        rows, cols = ii, jj
    out = torch.zeros(nx, ny, dtype=vals.dtype, device=vals.device)
    return out.index_put((rows, cols), vals)
