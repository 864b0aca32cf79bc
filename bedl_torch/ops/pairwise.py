"""Distances of many pairs drawn from two collections, and distance matrices.

:class:`PairwisePlan` is the one plan of a matrix (or a block of one): the checks of its
arguments, the flattened collections, which pairs are computed (all, or ``i <= j`` of a
symmetric matrix), how their values are computed (one symbol table, tiles of tables, chunks of
similar sizes) and how they are assembled into a matrix (mirrored where symmetric). Its users:
:func:`pairwise_distances`, :mod:`bedl_torch.distributed` (per tile, with the whole matrix's
symbol tables) and BEDL's training distances (:mod:`bedl_torch.learning.training`).

Layer: ops (imports :mod:`.batch`, :mod:`.encoding`, the cost modules and
:mod:`bedl_torch.labels`).
"""
from __future__ import annotations

import copy
import math
import numbers
import threading
from collections import OrderedDict
from typing import Optional, Sequence, Tuple

import numpy as np
import torch

from .. import _ext
from .._cache import lru_cache_outside_compile
from ..costs import SymbolCost, UnitCost
from ..labels import alphabet_of, check_collection
from ..costs.base import check_cost_module
from . import limits
from .batch import PairBatch, check_temperature, soft_distances
from .encoding import FlatTable, SymbolView, check_rel_tol, check_same_kind, flat_table, matrix_view

__all__ = ["MODES", "PairwisePlan", "pair_indices", "assemble", "pair_chunks", "size_order_chunks",
           "table_pair_distances", "pairwise_distances", "matrix_tiles"]

MODES = ("exact", "pseudo", "soft")


def pair_chunks(x_table: FlatTable, y_table: FlatTable, ii: torch.Tensor, jj: torch.Tensor,
                 chunk_size: Optional[int] = None):
    """The pairs ``(ii[k], jj[k])`` reordered by size, and chunk boundaries (see
    :func:`size_order_chunks`)."""
    order, bounds = size_order_chunks(x_table, y_table, ii, jj, chunk_size)
    if order is None:
        return ii, jj, bounds
    return ii[order], jj[order], bounds


def size_order_chunks(x_table: FlatTable, y_table: FlatTable, ii: torch.Tensor, jj: torch.Tensor,
                      chunk_size: Optional[int] = None):
    """``(order, bounds)``: the pairs ``(ii[k], jj[k])`` ordered by size (``order`` None: as
    given, one chunk) and chunk boundaries into that order.

    Pairs of similar sizes share a chunk, so a chunk's padded ``(B, M+1, N+1)`` costs and
    co-optimal matrices waste little on padding (sentences of 5 to 50 words padded to the
    longest made each pair cost six times its cells); each chunk holds about
    ``limits.CHUNK_CELLS`` padded cells, or ``chunk_size`` pairs.
    """
    if chunk_size is not None and chunk_size >= len(ii):
        return None, [0, len(ii)]  # one chunk: nothing padded, the kernel schedules its pairs
    key = torch.maximum(x_table.lengths[ii], y_table.lengths[jj])
    order = torch.argsort(key, stable=True)
    n = len(ii)
    if chunk_size is not None:
        return order, list(range(0, n, chunk_size)) + [n]
    cells = ((key[order] + 1) ** 2).tolist()  # a chunk's padded cells per pair, at most
    bounds = [0]
    while bounds[-1] < n:
        s = bounds[-1]
        e = min(n, s + max(1, limits.CHUNK_CELLS // cells[s]))
        e = min(n, s + max(1, limits.CHUNK_CELLS // cells[e - 1]))  # sizes grow within a chunk
        bounds.append(e)
    return order, bounds


def table_pair_distances(x_table: FlatTable, y_table: FlatTable, ii: torch.Tensor,
                         jj: torch.Tensor, cost: SymbolCost, *, mode: str = "exact",
                         reference_cost: Optional[SymbolCost] = None,
                         rel_tol: Optional[float] = None, unknown: str = "error",
                         chunk_size: Optional[int] = None, temperature: Optional[float] = None,
                         max_distance: Optional[torch.Tensor] = None):
    """Distances of the pairs ``(x_table.objects[ii[k]], y_table.objects[jj[k]])`` in
    memory-bounded chunks, for callers that keep :class:`FlatTable` objects across many calls
    (BEDL's training distances, once per round) and assemble the values themselves.

    Args:
        x_table, y_table: the objects, flattened once. ii, jj: int64 ``(Q,)`` pair indices.
        cost, mode, reference_cost, rel_tol, unknown, chunk_size, temperature: as for
            :func:`pairwise_distances` (``chunk_size=None``: chosen by memory).
        max_distance: a threshold per pair (``(Q,)``, exact mode): a pair above its
            threshold may come back as ``inf`` instead of its distance (the kernels stop it
            early where its costs come from one symbol table; where they come in tiles, a
            pair whose threshold is ``-inf`` is not computed), every other pair with its
            exact distance; no gradient then. For search (:mod:`bedl_torch.search`).

    Returns:
        ``(ii, jj, values)`` in the order computed (pairs regrouped by tile and size): the
        indices on the CPU, ``values`` ``(Q,)`` on the cost's device and dtype, differentiable
        in its parameters when gradients are enabled.

    Raises:
        ValueError: labels missing from the alphabet (with ``unknown="error"``), NaN or inf
            costs.
    """
    ref = reference_cost if reference_cost is not None else cost
    if max_distance is not None:
        if mode != "exact":
            raise ValueError(f"max_distance needs mode='exact', got mode={mode!r}")
        max_distance = torch.as_tensor(max_distance, dtype=torch.float64).reshape(-1).cpu()
        if len(max_distance) != len(ii):
            raise ValueError(f"max_distance must have one threshold per pair ({len(ii)}), got {len(max_distance)}")
        if torch.isnan(max_distance).any():
            raise ValueError("max_distance contains NaN")
        with torch.no_grad():
            return _table_pair_distances(x_table, y_table, ii, jj, cost, mode, ref, rel_tol, unknown,
                                         chunk_size, temperature, max_distance)
    return _table_pair_distances(x_table, y_table, ii, jj, cost, mode, ref, rel_tol, unknown,
                                 chunk_size, temperature)


def _table_pair_distances(x_table, y_table, ii, jj, cost, mode, ref, rel_tol, unknown,
                          chunk_size, temperature, max_distance=None):
    unit = _unit_sequence_distances(x_table, y_table, ii, jj, cost, mode, unknown)
    if unit is not None:
        return unit
    # One symbol table for all pairs (a module's whole table, or one over the symbols of X
    # and Y); where that one would be too large, tiles of pairs with a table each.
    view = matrix_view(x_table, y_table, cost, unknown) if mode != "soft" else None
    tiles = None
    if view is None and mode != "soft":
        tiles = _symbol_tiles(x_table, y_table, ii, jj, cost, unknown, max_distance)
    if tiles is None:
        ref_view = view if ref is cost else None
        if mode == "pseudo" and ref_view is None:
            with torch.no_grad():
                ref_view = matrix_view(x_table, y_table, ref, unknown)
        return _chunked_distances(x_table, y_table, ii, jj, cost, view, ref, ref_view, mode,
                                  rel_tol, unknown, chunk_size, temperature, max_distance)
    # The kernels tell a table's rows from its columns by the side their labels come from.
    col_side = copy.copy(y_table) if y_table is x_table else y_table
    x_enc, y_enc = x_table.encoded(cost, unknown), y_table.encoded(cost, unknown)
    parts = []
    for ti, tj, x_objects, y_objects, limit in tiles:
        if limit is not None:
            # a pair whose threshold is -inf is above it whatever its distance: inf, not
            # computed (a tile with none other builds no table)
            dead = limit == -math.inf
            if bool(dead.any()):
                parts.append((ti[dead], tj[dead], torch.full((int(dead.sum()),), math.inf,
                                                            dtype=cost.dtype, device=cost.device)))
                ti, tj = ti[~dead], tj[~dead]
                if not len(ti):
                    continue
        x_labels, y_labels = x_enc[x_objects], y_enc[y_objects]
        view = SymbolView.between(cost, unknown, x_labels, y_labels, col_side,
                                  limits.LOCAL_TABLE_CELLS)
        ref_view = view if ref is cost else None
        if mode == "pseudo" and ref_view is None:
            with torch.no_grad():
                ref_view = SymbolView.between(ref, unknown, x_labels, y_labels, col_side,
                                              limits.LOCAL_TABLE_CELLS)
        parts.append(_chunked_distances(x_table, col_side, ti, tj, cost, view, ref, ref_view,
                                        mode, rel_tol, unknown, chunk_size, temperature))
        del view, ref_view  # one tile's tables at a time (unless autograd keeps them)
    return tuple(torch.cat(t) for t in zip(*parts))


def unit_sequence_path(x_table, y_table, cost, mode: str, unknown: str) -> bool:
    """Whether sequence pairs of these tables take the bit-vector path (``sed_unit``): see
    :func:`_unit_sequence_distances`."""
    if (mode != "exact" or type(cost) is not UnitCost or cost.device.type != "cpu"
            or x_table.kind != "sequence" or y_table.kind != "sequence" or not _ext.simd_enabled()):
        return False
    gap = cost.gap_index
    return not any(bool((t.flat_labels(cost, unknown) == gap).any()) for t in (x_table, y_table))


def _unit_sequence_distances(x_table, y_table, ii, jj, cost, mode, unknown):
    """``(ii, jj, values)`` of sequence pairs under :class:`UnitCost` itself (exact mode, CPU),
    computed on bit vectors between the labels themselves (``sed_unit``): no symbol table, so
    vocabularies beyond ``UnitCost.table_limit`` need no tiles; the same integers as the
    table kernels. None where that does not apply: other modules or modes, trees, a label
    that is the gap itself (``unknown="gap"``), or the fast paths switched off
    (``set_simd_enabled(False)``, which keeps the DP)."""
    if not len(ii) or not unit_sequence_path(x_table, y_table, cost, mode, unknown):
        return None
    x_labels, y_labels = x_table.flat_labels(cost, unknown), y_table.flat_labels(cost, unknown)
    ii, jj = ii.to(torch.long), jj.to(torch.long)
    values = _ext.sed_unit_cpu(x_labels, x_table.ptr, y_labels, y_table.ptr, ii, jj)
    return ii, jj, values.to(cost.dtype)


def unit_sequence_rows(x_table, y_table, cost, unknown: str, rows: Tuple[int, int],
                       triangle: bool) -> torch.Tensor:
    """The rows ``rows[0] .. rows[1] - 1`` of the matrix of two tables on the bit-vector path
    (callers check :func:`unit_sequence_path`), in the cost's dtype, written without pair lists
    (``sed_unit_matrix``); with ``triangle`` the columns from ``rows[0]`` on, ``i <= j``
    computed and the block's square mirrored."""
    x_labels, y_labels = x_table.flat_labels(cost, unknown), y_table.flat_labels(cost, unknown)
    return _ext.sed_unit_matrix_cpu(x_labels, x_table.ptr, y_labels, y_table.ptr, rows[0], rows[1],
                                    triangle, cost.dtype)


def _chunked_distances(x_table, y_table, ii, jj, cost, view, ref, ref_view, mode, rel_tol,
                       unknown, chunk_size, temperature, max_distance=None):
    """``(ii, jj, values)`` of pairs that share one symbol view (or none), in chunks;
    max_distance (aligned with ii) reaches the kernels where one call takes every pair."""
    if (chunk_size is None or max_distance is not None) and mode == "exact" and view is not None:
        # Distances from a symbol table keep nothing per pair (their backward recomputes P):
        # one kernel call over all pairs (its fixed cost is paid once).
        chunk_size = max(1, len(ii))
    if view is None:
        max_distance = None  # (padded costs: exact distances)
    whole = (x_table, y_table, ii, jj)
    ii, jj, bounds = pair_chunks(x_table, y_table, ii, jj, chunk_size)
    values = []
    for s, e in zip(bounds[:-1], bounds[1:]):
        if len(bounds) == 2 and ii is whole[2] and jj is whole[3]:
            batch = _whole_batch(*whole)
        else:
            batch = PairBatch.from_tables(x_table, y_table, ii[s:e], jj[s:e])
        if mode == "exact":
            values.append(batch.run_distances(cost, rel_tol=rel_tol, unknown=unknown, view=view,
                                              max_distance=max_distance))
        elif mode == "soft":
            values.append(soft_distances(batch, cost, temperature, unknown))
        else:
            p0 = batch.run_coopt(ref, rel_tol, unknown, view=ref_view)[1]
            values.append(batch.run_pseudo(cost, p0, unknown, view=view))
    return ii, jj, values[0] if len(values) == 1 else torch.cat(values)


# The batches of whole matrices of recent calls, by the identities of their tables and pair
# indices (held by the entries, so the ids stay theirs): repeated calls on the same
# collections reuse the pairs' layout (pair_indices gives the same index tensors).
_BATCH_CACHE_SIZE = 8
_batch_cache: "OrderedDict[tuple, tuple]" = OrderedDict()
_batch_cache_lock = threading.Lock()


def _whole_batch(x_table, y_table, ii, jj) -> PairBatch:
    """``PairBatch.from_tables(x_table, y_table, ii, jj)``, shared with earlier calls on the
    same four objects (batches of up to ``_CACHED_PAIRS`` pairs: larger ones are not worth
    their memory, and their indices are new tensors every call)."""
    if len(ii) > _CACHED_PAIRS:
        return PairBatch.from_tables(x_table, y_table, ii, jj)
    key = (id(x_table), id(y_table), id(ii), id(jj))
    with _batch_cache_lock:
        entry = _batch_cache.get(key)
        if entry is not None:
            _batch_cache.move_to_end(key)
            return entry[-1]
    batch = PairBatch.from_tables(x_table, y_table, ii, jj)
    with _batch_cache_lock:
        _batch_cache[key] = (x_table, y_table, ii, jj, batch)
        while len(_batch_cache) > _BATCH_CACHE_SIZE:
            _batch_cache.popitem(last=False)
    return batch


def _run_symbols() -> int:
    """Distinct symbols per run of objects, so that a tile's local table (gap included) fits
    ``limits.LOCAL_TABLE_CELLS``; below 1, no local tables are allowed."""
    return math.isqrt(limits.LOCAL_TABLE_CELLS) - 1


def _symbol_tiles(x_table: FlatTable, y_table: FlatTable, ii: torch.Tensor, jj: torch.Tensor,
                  cost: SymbolCost, unknown: str, max_distance: Optional[torch.Tensor] = None):
    """The pairs split into tiles ``(ii, jj, x_objects, y_objects, max_distance)`` (the last the
    tile's share of ``max_distance``, or None) for a cost module whose symbols in use are too
    many for one local table, or None (no local tables allowed).

    The objects of each side are cut into runs of consecutive indices with at most
    ``sqrt(limits.LOCAL_TABLE_CELLS) - 1`` distinct symbols each; a tile holds the pairs between one
    run of each side, and its table the costs between their symbols. A table's cost is
    amortised over the tile's cells: a tile has about one DP cell per pair of its words
    (``tokens_x * tokens_y``), its table one entry per pair of distinct words, and words
    repeat (300 SST sentences: about 5,800 words, 2,000 distinct).
    """
    max_symbols = _run_symbols()
    if max_symbols < 1 or not len(ii):
        return None
    x_runs = _symbol_runs(x_table, _objects_in(ii, len(x_table)), cost, unknown, max_symbols)
    y_runs = _symbol_runs(y_table, _objects_in(jj, len(y_table)), cost, unknown, max_symbols)
    if len(x_runs) == 1 and len(y_runs) == 1:
        return [(ii, jj, x_runs[0], y_runs[0], max_distance)]
    x_run, y_run = _run_index(x_runs, len(x_table)), _run_index(y_runs, len(y_table))
    tile = x_run[ii] * len(y_runs) + y_run[jj]
    order = torch.argsort(tile, stable=True)
    ii, jj, tile = ii[order], jj[order], tile[order]
    limits_ = max_distance[order] if max_distance is not None else None
    ids, counts = torch.unique_consecutive(tile, return_counts=True)
    tiles, s = [], 0
    for t, c in zip(ids.tolist(), counts.tolist()):
        tiles.append((ii[s:s + c], jj[s:s + c], x_runs[t // len(y_runs)], y_runs[t % len(y_runs)],
                      None if limits_ is None else limits_[s:s + c]))
        s += c
    return tiles


def rows_weight(x_sizes: torch.Tensor, y_sizes: torch.Tensor, triangle: bool) -> Tuple[int, int]:
    """``(pairs, cells)`` of rows of sizes ``x_sizes`` against columns of sizes ``y_sizes``
    (``triangle``: row ``i`` against the columns from ``i`` on): the pairs and the sum of
    ``x_sizes[i] y_sizes[j]`` over them."""
    xs, ys = x_sizes.to(torch.long), y_sizes.to(torch.long)
    h, w = len(xs), len(ys)
    if not triangle:
        return h * w, int(xs.sum()) * int(ys.sum())
    tail = torch.cumsum(ys.flip(0), 0).flip(0)  # tail[j]: columns j ..
    return int((w - torch.arange(h)).sum()), int((xs * tail[:h]).sum())


class MatrixBlock:
    """One block of :func:`matrix_tiles`: consecutive rows ``r0 .. r1 - 1`` (each against all
    columns, or with ``triangle`` the columns from its own index on), or every pair of two runs
    of objects ``xr`` and ``yr`` (with ``triangle`` those ``i <= j``). Its pairs are built on
    demand (:meth:`pairs`); :meth:`weight` counts them and their DP cells without building them."""

    def __init__(self, triangle: bool, ny: int, rows=None, runs=None):
        self.triangle, self.ny, self.rows, self.runs = triangle, ny, rows, runs

    def pairs(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """The block's kernel pairs ``(ii, jj)``, row-major (callers must not change them in
        place: a block from row 0 shares :func:`pair_indices`' cached tensors)."""
        if self.rows is not None:
            r0, r1 = self.rows
            ii, jj = pair_indices(r1 - r0, self.ny - r0 if self.triangle else self.ny, self.triangle)
            if r0 == 0:
                return ii, jj
            # triangle: row i against the columns i .. ny - 1
            return ii + r0, (jj + r0 if self.triangle else jj)
        xr, yr = self.runs
        ii, jj = xr.repeat_interleave(len(yr)), yr.repeat(len(xr))
        if self.triangle:
            keep = ii <= jj
            ii, jj = ii[keep], jj[keep]
        return ii, jj

    def weight(self, x_sizes: torch.Tensor, y_sizes: torch.Tensor) -> Tuple[int, int]:
        """``(pairs, cells)``: the block's kernel pairs and the sum of ``x_sizes[i] y_sizes[j]``
        over them."""
        if self.rows is not None:
            r0, r1 = self.rows
            return rows_weight(x_sizes[r0:r1], y_sizes[r0:] if self.triangle else y_sizes, self.triangle)
        xr, yr = self.runs
        xs, ys = x_sizes[xr].to(torch.long), y_sizes[yr].to(torch.long)
        if not self.triangle:
            return len(xr) * len(yr), int(xs.sum()) * int(ys.sum())
        first = torch.searchsorted(yr, xr)  # (runs ascend) the columns j >= i start here
        tail = torch.cat([torch.cumsum(ys.flip(0), 0).flip(0), ys.new_zeros(1)])
        return int((len(yr) - first).sum()), int((xs * tail[first]).sum())


def matrix_tiles(x_table: FlatTable, y_table: FlatTable, cost: SymbolCost, unknown: str,
                 triangle: bool, max_pairs: int) -> list:
    """The pairs of the whole matrix (``i <= j`` with ``triangle``) in blocks
    (:class:`MatrixBlock`, pairs built on demand), each of which :func:`table_pair_distances`
    computes with the costs, hence the bits, of the whole matrix's call: where the matrix is cut
    into tiles of symbols (:func:`_symbol_tiles`), one block per tile (a tile's pairs use every
    object of its two runs, so the call finds the same runs and builds the same table); else
    consecutive rows with about ``max_pairs`` pairs each. For callers that consume a matrix in
    pieces (exact k-NN where bounds do not pay)."""
    nx, ny = len(x_table), len(y_table)
    max_symbols = _run_symbols()
    tiled = (nx and ny and max_symbols >= 1 and not unit_sequence_path(x_table, y_table, cost, "exact", unknown)
             and matrix_view(x_table, y_table, cost, unknown) is None)
    if not tiled:
        return row_blocks(nx, ny, triangle, max_pairs)
    blocks = []
    x_runs = _symbol_runs(x_table, torch.arange(nx), cost, unknown, max_symbols)
    y_runs = _symbol_runs(y_table, torch.arange(ny), cost, unknown, max_symbols)
    for xr in x_runs:
        for yr in y_runs:
            if triangle and int(xr[0]) > int(yr[-1]):
                continue  # no pair i <= j
            blocks.append(MatrixBlock(triangle, ny, runs=(xr, yr)))
    return blocks


def row_blocks(nx: int, ny: int, triangle: bool, max_pairs: int) -> list:
    """The pairs of an ``nx x ny`` matrix (``i <= j`` with ``triangle``) as blocks of consecutive
    rows (:class:`MatrixBlock`) of about ``max_pairs`` pairs each (at least one row)."""
    # row i: the columns from i with triangle, else all
    first = torch.arange(nx) if triangle else torch.zeros(nx, dtype=torch.long)
    ends = torch.cumsum((ny - first).clamp(min=0), 0)
    blocks, r0 = [], 0
    while r0 < nx:
        done = int(ends[r0 - 1]) if r0 else 0
        r1 = max(r0 + 1, int(torch.searchsorted(ends, done + max_pairs, right=True)))
        blocks.append(MatrixBlock(triangle, ny, rows=(r0, r1)))
        r0 = r1
    return blocks


def _objects_in(indices: torch.Tensor, n: int) -> torch.Tensor:
    """The distinct values of ``indices`` (in ``[0, n)``), sorted."""
    return torch.nonzero(torch.bincount(indices, minlength=n)).reshape(-1)


def _symbol_runs(side: FlatTable, objects: torch.Tensor, cost: SymbolCost, unknown: str,
                 max_symbols: int) -> list:
    """``objects`` (sorted indices) cut into runs of at most ``max_symbols`` distinct symbols
    (not counting the gap; an object with more forms a run alone), as index tensors."""
    if not len(objects):
        return []
    if len(objects) == len(side):  # every object (a matrix, a search's covered call): cached
        return side.derived(cost, unknown, ("runs", max_symbols),
                            lambda flat: _runs_of(side, flat, objects, cost.gap_index, max_symbols))
    return _runs_of(side, side.flat_labels(cost, unknown), objects, cost.gap_index, max_symbols)


def _runs_of(side: FlatTable, flat: torch.Tensor, objects: torch.Tensor, gap: int, max_symbols: int) -> list:
    """:func:`_symbol_runs` of the codes ``flat``."""
    # (only the labels from the first object to the last go to Python lists)
    lo, hi = int(side.ptr[objects[0]]), int(side.ptr[objects[-1] + 1])
    flat = flat[lo:hi].tolist()
    ptr = (side.ptr[objects[0]:objects[-1] + 2] - lo).tolist()
    first = int(objects[0])
    runs, run, seen = [], [], set()
    for o in objects.tolist():
        symbols = set(flat[ptr[o - first]:ptr[o - first + 1]])
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


# Blocks of up to this many pairs keep their indices in pair_indices' cache (16 bytes a pair: at
# most 128 MB for its 32 entries) and their batch in _whole_batch's (32 bytes a pair, 8
# entries): what repeated small calls (predictions, prototypes) reuse. Caching whole matrices
# kept their indices and batches after the call: 5,000 small trees, 500 MB (benchmarks/HISTORY.md).
_CACHED_PAIRS = 1 << 18


def pair_indices(rows: int, cols: int, triangle: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """Row-major pair indices ``(ii, jj)`` of a ``rows x cols`` block: all pairs, or with
    ``triangle`` only ``i <= j`` (the rest mirrors them). Small blocks' are cached: the same
    tensors for the same block, which callers must not change in place."""
    if rows * cols <= _CACHED_PAIRS:
        return _cached_pair_indices(rows, cols, triangle)
    return _pair_indices(rows, cols, triangle)


@lru_cache_outside_compile(maxsize=32)
def _cached_pair_indices(rows: int, cols: int, triangle: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    return _pair_indices(rows, cols, triangle)


def _pair_indices(rows: int, cols: int, triangle: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    if triangle:
        ii, jj = torch.triu_indices(rows, cols, offset=0)
        return ii, jj
    return torch.arange(rows).repeat_interleave(cols), torch.arange(cols).repeat(rows)


def assemble(ii, jj, values, shape: Tuple[int, int], mirror: bool):
    """The ``shape`` matrix holding ``values[k]`` at ``(ii[k], jj[k])`` (and at ``(jj[k],
    ii[k])`` with ``mirror``), zeros elsewhere: a numpy array for numpy values (no torch calls:
    each can wait for the intra-op thread pool on a busy machine), else a tensor on the values'
    device, differentiable in them."""
    if isinstance(values, np.ndarray):
        out = np.zeros(shape, dtype=values.dtype)
        out[ii, jj] = values
        if mirror:
            out[jj, ii] = values
        return out
    ii, jj = ii.to(values.device), jj.to(values.device)
    out = torch.zeros(shape, dtype=values.dtype, device=values.device)
    out.index_put_((ii, jj), values)
    if mirror:  # (a diagonal entry is written twice with its one value; its gradient flows once)
        out.index_put_((jj, ii), values)
    return out


def _check_mode(mode: str, temperature, modes: Sequence[str]) -> Optional[float]:
    """The checked temperature (None outside soft mode); ValueError for another mode."""
    if mode not in modes:
        quoted = [repr(m) for m in modes]
        allowed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
        raise ValueError(f"mode must be {allowed}, got {mode!r}")
    if mode == "soft":
        if temperature is None:
            raise ValueError("mode='soft' needs a temperature")
        return check_temperature(temperature)
    if temperature is not None:
        raise ValueError(f"temperature is used only with mode='soft', got mode={mode!r}")
    return None


# Default cost modules of the latest alphabets (see default_unit_cost); each keeps its codes of
# the cached tables alive, so few.
_DEFAULT_COSTS_SIZE = 2
_default_costs: "OrderedDict[tuple, UnitCost]" = OrderedDict()
_default_costs_lock = threading.Lock()


def default_unit_cost(X: Sequence, Y: Sequence) -> UnitCost:
    """Unit costs over the labels of ``Y``, then those of ``X`` not in ``Y``: one module per
    alphabet among the latest two, so that repeated calls on the same collections (a query
    against a collection whose labels it shares) find their cached codes instead of encoding
    them again. Under unit costs the order of the alphabet changes no distance, P or bound."""
    alphabet = tuple(alphabet_of(Y, X))
    with _default_costs_lock:
        cost = _default_costs.get(alphabet)
        # (a module moved or grown in place since is not the default any more)
        if cost is not None and tuple(cost.alphabet) == alphabet and cost.dtype == torch.float64 \
                and cost.device.type == "cpu":
            _default_costs.move_to_end(alphabet)
            return cost
    cost = UnitCost(list(alphabet))
    with _default_costs_lock:
        _default_costs[alphabet] = cost
        while len(_default_costs) > _DEFAULT_COSTS_SIZE:
            _default_costs.popitem(last=False)
    return cost


def problem_inputs(X, Y, cost: Optional[SymbolCost], symmetric: Optional[bool], y_checked: bool = False):
    """The objects and costs of a matrix or a search, as both take them: ``X`` and ``Y`` as lists
    (``Y=None``: ``X`` itself), the cost module (default: unit costs over their labels; else
    checked) and whether the problem is symmetric (default: ``Y=None`` and ``cost.symmetric``).
    ``y_checked``: ``Y`` is a list that an earlier call checked (a prepared collection)."""
    same = Y is None
    X = check_collection(X, "X")
    Y = X if same else (Y if y_checked else check_collection(Y, "Y"))
    if cost is None:
        cost = default_unit_cost(X, Y)
    else:
        check_cost_module(cost)
    if symmetric is None:
        symmetric = same and bool(getattr(cost, "symmetric", False))
    return X, Y, cost, bool(symmetric)


class PairwisePlan:
    """The distance matrix of ``X`` and ``Y`` (``Y=None``: ``X``) under a cost module, checked
    and planned once: :meth:`pairs` to compute, :meth:`values` of pairs, :meth:`assemble` into
    the matrix, :meth:`matrix` all three.

    Args:
        X, Y, cost, mode, reference_cost, chunk_size, rel_tol, unknown, symmetric, temperature:
            as for :func:`pairwise_distances`.
        modes: the modes allowed (:mod:`bedl_torch.distributed` has no soft mode).
        tables: ``(x_table, y_table)``, the collections already flattened (then ``X`` and
            ``Y`` are their objects); default: flattened here.

    Attributes:
        X, Y (lists), x_table, y_table (:class:`FlatTable`), cost, reference (the cost module
        of pseudo mode's P0), symmetric (bool), same (``Y`` was None), shape, dtype and device
        (the cost's), and the options.

    Raises:
        As :func:`pairwise_distances`, before any distance is computed.
    """

    def __init__(self, X, Y=None, cost: Optional[SymbolCost] = None, *, mode: str = "exact",
                 reference_cost: Optional[SymbolCost] = None, chunk_size: Optional[int] = None,
                 rel_tol: Optional[float] = None, unknown: str = "error",
                 symmetric: Optional[bool] = None, temperature: Optional[float] = None,
                 modes: Sequence[str] = MODES, tables: Optional[Tuple[FlatTable, FlatTable]] = None):
        self.temperature = _check_mode(mode, temperature, modes)
        self.same = Y is None
        if tables is not None:
            X, Y = tables[0].objects, None if self.same else tables[1].objects
        X, Y, cost, symmetric = problem_inputs(X, Y, cost, symmetric)
        if reference_cost is not None:
            check_cost_module(reference_cost, "reference_cost")
        if symmetric and not self.same and len(X) != len(Y):
            raise ValueError("symmetric=True needs a square matrix")
        if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, numbers.Integral)
                                       or chunk_size < 1):
            raise ValueError(f"chunk_size must be an int >= 1, got {chunk_size!r}")
        if tables is None:
            x_table = flat_table(X, "X")
            tables = (x_table, x_table if self.same else flat_table(Y, "Y"))
        self.x_table, self.y_table = tables
        check_same_kind(self.x_table, self.y_table)
        # Fail early, naming unknown labels, before any work.
        for module in (cost, reference_cost):
            if module is not None:
                self.x_table.flat_labels(module, unknown)
                self.y_table.flat_labels(module, unknown)
        self.dtype, self.device = cost.dtype, cost.device
        check_rel_tol(rel_tol, self.dtype)
        self.X, self.Y, self.cost, self.symmetric = X, Y, cost, symmetric
        self.mode, self.reference_cost, self.chunk_size = mode, reference_cost, chunk_size
        self.rel_tol, self.unknown = rel_tol, unknown
        self.reference = reference_cost if reference_cost is not None else cost

    @property
    def shape(self) -> Tuple[int, int]:
        return (len(self.X), len(self.Y))

    def pairs(self, cols: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """The pairs to compute, row-major: the whole matrix (``i <= j`` where symmetric), or
        every row with the columns ``cols`` (int64 indices into ``Y``)."""
        nx, ny = self.shape
        if cols is None:
            return pair_indices(nx, ny, self.symmetric)
        ii, jj = pair_indices(nx, len(cols), False)
        return ii, cols.to(torch.long)[jj]

    def values(self, ii: torch.Tensor, jj: torch.Tensor):
        """``(ii, jj, values)`` of the pairs in the order computed (see
        :func:`table_pair_distances`), differentiable in the cost module where gradients are
        enabled."""
        return _table_pair_distances(self.x_table, self.y_table, ii, jj, self.cost, self.mode,
                                     self.reference, self.rel_tol, self.unknown,
                                     self.chunk_size, self.temperature)

    def matrix_views(self) -> Tuple[Optional[SymbolView], Optional[SymbolView]]:
        """The symbol views of the whole matrix for the cost and pseudo mode's reference (None
        where none fits), built once for :meth:`chunk_values` over blocks of it."""
        with torch.no_grad():
            view = matrix_view(self.x_table, self.y_table, self.cost, self.unknown)
            ref_view = view if self.reference is self.cost else None
            if self.mode == "pseudo" and ref_view is None:
                ref_view = matrix_view(self.x_table, self.y_table, self.reference, self.unknown)
        return view, ref_view

    def chunk_values(self, x_table: FlatTable, y_table: FlatTable, ii: torch.Tensor,
                     jj: torch.Tensor, view: Optional[SymbolView], ref_view: Optional[SymbolView]):
        """``(ii, jj, values)`` of pairs of two tables (e.g. blocks of ``X`` and ``Y``) whose
        costs come from the given views (None: each chunk's own), in chunks of similar sizes."""
        return _chunked_distances(x_table, y_table, ii, jj, self.cost, view, self.reference,
                                  ref_view, self.mode, self.rel_tol, self.unknown,
                                  self.chunk_size, self.temperature)

    def assemble(self, ii, jj, values, cols: Optional[torch.Tensor] = None):
        """The matrix (numpy or tensor, see :func:`assemble`) from :meth:`values` of
        :meth:`pairs`: ``(len(X), len(Y))`` mirrored where symmetric, or ``(len(X),
        len(cols))``."""
        nx, ny = self.shape
        if cols is None:
            return assemble(ii, jj, values, (nx, ny), self.symmetric)
        position = np.full(ny, -1, dtype=np.int64)
        position[np.asarray(cols)] = np.arange(len(cols))
        if isinstance(values, np.ndarray):
            jj = position[jj]
        else:
            jj = torch.from_numpy(position)[jj]
        return assemble(ii, jj, values, (nx, len(cols)), False)

    def matrix(self) -> torch.Tensor:
        """The whole matrix on the cost's device and dtype."""
        dense = self.unit_matrix(self.x_table, self.y_table, self.symmetric)
        if dense is not None:
            return dense
        blocks = self.block_plan()
        if blocks is not None:
            return self.matrix_in_blocks(*blocks)
        ii, jj = self.pairs()
        if len(ii) == 0:
            return torch.zeros(self.shape, dtype=self.dtype, device=self.device)
        oi, oj, values = self.values(ii, jj)
        if oi is ii and oj is jj and not self.symmetric:
            return values.reshape(self.shape)  # every entry, computed in row-major order
        return self.assemble(oi, oj, values)

    def block_plan(self) -> Optional[Tuple[list, Optional[SymbolView]]]:
        """``(blocks, view)`` where the whole matrix is computed block by block
        (:meth:`matrix_in_blocks`): exact mode, more kernel pairs than
        ``limits.MATRIX_BLOCK_PAIRS``, no gradient to record (a graph keeps its call's per-pair
        data whole anyway), and blocks whose values do not depend on the blocking: with one
        symbol view for every pair, blocks of rows of about that many pairs; without one, the
        tiles of symbols that one call would cut (:func:`matrix_tiles`, ``view`` None). None:
        one call for every pair."""
        nx, ny = self.shape
        pairs = nx * (nx + 1) // 2 if self.symmetric else nx * ny
        if self.mode != "exact" or pairs <= limits.MATRIX_BLOCK_PAIRS:
            return None
        view = matrix_view(self.x_table, self.y_table, self.cost, self.unknown)
        if view is not None:
            if view.table.requires_grad and torch.is_grad_enabled():
                return None
            return row_blocks(nx, ny, self.symmetric, limits.MATRIX_BLOCK_PAIRS), view
        if _run_symbols() < 1 or (torch.is_grad_enabled()
                                  and any(p.requires_grad for p in self.cost.parameters())):
            return None  # (without local tables each chunk pads its own costs)
        return matrix_tiles(self.x_table, self.y_table, self.cost, self.unknown, self.symmetric,
                            limits.MATRIX_BLOCK_PAIRS), None

    def matrix_in_blocks(self, blocks: list, view: Optional[SymbolView]) -> torch.Tensor:
        """The whole matrix from :meth:`block_plan`, each block written into it before the
        next one is computed: memory for one block's pair lists and the kernels' per-pair data
        instead of the whole matrix's, the same values as one call."""
        nx, ny = self.shape
        out = torch.zeros(nx, ny, dtype=self.dtype, device=self.device)
        for block in blocks:
            ii, jj = block.pairs()
            if view is not None:
                ii, jj, values = self.chunk_values(self.x_table, self.y_table, ii, jj, view, None)
            else:
                ii, jj, values = self.values(ii, jj)
            ii, jj, values = ii.to(out.device), jj.to(out.device), values.to(out.dtype)
            out.index_put_((ii, jj), values)
            if self.symmetric:
                out.index_put_((jj, ii), values)
        return out

    def unit_matrix(self, x_table: FlatTable, y_table: FlatTable, triangle: bool) -> Optional[torch.Tensor]:
        """The whole matrix of two tables (the plan's, or a tile's; ``triangle``: ``i <= j``
        computed and mirrored) where their pairs take the bit-vector path (see
        :func:`_unit_sequence_distances`), from one call that writes it without pair lists
        (``sed_unit_matrix``: 8,000 sentences' 32M pairs took as long to index and place as to
        compute); None elsewhere."""
        if not len(x_table) or not len(y_table) or \
                not unit_sequence_path(x_table, y_table, self.cost, self.mode, self.unknown):
            return None
        return unit_sequence_rows(x_table, y_table, self.cost, self.unknown, (0, len(x_table)), triangle)


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
            symbol table), else all pairs in one call; but an exact matrix of more than
            ``limits.MATRIX_BLOCK_PAIRS`` (2M) kernel pairs without a gradient to record is
            computed in blocks (of rows of about that many pairs, or the tiles below), each
            written into the result before the next (the same values; memory for one block's
            pairs besides the result). With gradients enabled each chunk
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
    return PairwisePlan(X, Y, cost, mode=mode, reference_cost=reference_cost,
                        chunk_size=chunk_size, rel_tol=rel_tol, unknown=unknown,
                        symmetric=symmetric, temperature=temperature).matrix()
