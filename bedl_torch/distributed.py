"""Pairwise edit-distance matrices across processes and machines (``torch.distributed``).

A thin layer over :func:`bedl_torch.pairwise_distances`: the matrix is cut into square tiles of
``tile_size`` objects a side (only the tiles on and above the diagonal where the matrix is
symmetric), the tiles are shared among the ranks of a process group, balanced by their dynamic
programming cells, and every tile is computed with the same code and the same symbol table as
the whole matrix would be. Every rank calls the functions here with the same arguments; without
an initialised process group they run in one process.

``pairwise_distances(..., out="D.npy")`` writes the matrix into one ``.npy`` file on a
filesystem the ranks share, tile by tile, so that a rank never holds more than one tile, and
records every finished tile in ``D.npy.tiles/``: ``resume=True`` finishes a killed run.
:func:`kneighbors` keeps only the running ``k`` nearest neighbours of every object.
"""
from __future__ import annotations

import hashlib
import heapq
import json
import math
import os
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.distributed as dist

from .costs import SymbolCost, UnitCost
from .labels import alphabet_of
from .ops import FlatTable, PairBatch, check_rel_tol, matrix_view, pair_chunks
from .tree import Tree

__all__ = ["pairwise_distances", "kneighbors", "Tile", "plan_tiles", "assign_tiles"]

# Default tile sides. Above 1024 a tile's pair indices, values and kernel bookkeeping (50 to
# 110 MB at 1024) grow with its square; below about 100 objects the kernels' work per tree (indexing it, laying out its
# tables for the SIMD lanes), done once per tile, is shared by too few pairs.
_MAX_DEFAULT_TILE = 1024
_MIN_DEFAULT_TILE = 100
_META_FORMAT = 1


# ---------------------------------------------------------------------------
# Tiles and their assignment to ranks
# ---------------------------------------------------------------------------


class Tile:
    """Rows ``[r0, r1)`` and columns ``[c0, c1)`` of the matrix.

    ``triangle``: a diagonal tile of a symmetric matrix, of which only the pairs ``i <= j`` are
    computed (and mirrored). ``mirrored``: an off-diagonal tile of a symmetric matrix whose
    transpose also fills rows ``[c0, c1)``, columns ``[r0, r1)``. ``cells``: its dynamic
    programming cells, the sum over its computed pairs of ``(|x| + 1) (|y| + 1)``.
    """

    __slots__ = ("row", "col", "r0", "r1", "c0", "c1", "triangle", "mirrored", "cells")

    def __init__(self, row, col, r0, r1, c0, c1, triangle, mirrored, cells):
        self.row, self.col = row, col
        self.r0, self.r1, self.c0, self.c1 = r0, r1, c0, c1
        self.triangle, self.mirrored, self.cells = triangle, mirrored, cells

    @property
    def name(self) -> str:
        """``"ROW_COL"`` (block indices), the tile's marker name in ``out``'s tile folder."""
        return f"{self.row}_{self.col}"

    @property
    def shape(self) -> Tuple[int, int]:
        return (self.r1 - self.r0, self.c1 - self.c0)

    def __repr__(self) -> str:
        return (f"Tile({self.name}: rows {self.r0}:{self.r1}, cols {self.c0}:{self.c1}, "
                f"cells {self.cells}{', triangle' if self.triangle else ''}"
                f"{', mirrored' if self.mirrored else ''})")


def plan_tiles(x_sizes: Sequence[int], y_sizes: Sequence[int], tile_size: int,
               symmetric: bool) -> List[Tile]:
    """The tiles of a ``len(x_sizes) x len(y_sizes)`` matrix in row-major block order.

    ``x_sizes``/``y_sizes``: the objects' sizes (nodes or elements). With ``symmetric`` only
    the blocks on and above the diagonal (the matrix must be square).
    """
    tile_size = _check_tile_size(tile_size)
    nx, ny = len(x_sizes), len(y_sizes)
    if symmetric and nx != ny:
        raise ValueError("a symmetric matrix must be square")
    wx = [int(s) + 1 for s in x_sizes]
    wy = [int(s) + 1 for s in y_sizes]
    row_blocks = [(s, min(nx, s + tile_size)) for s in range(0, nx, tile_size)]
    col_blocks = [(s, min(ny, s + tile_size)) for s in range(0, ny, tile_size)]
    row_sum = [sum(wx[a:b]) for a, b in row_blocks]
    col_sum = [sum(wy[a:b]) for a, b in col_blocks]
    tiles = []
    for r, (r0, r1) in enumerate(row_blocks):
        for c, (c0, c1) in enumerate(col_blocks):
            if symmetric and c < r:
                continue
            if symmetric and c == r:
                # pairs i <= j: half of the off-diagonal products plus the diagonal
                cells = (row_sum[r] * col_sum[c] + sum(a * b for a, b in zip(wx[r0:r1], wy[c0:c1]))) // 2
                tiles.append(Tile(r, c, r0, r1, c0, c1, True, False, cells))
            else:
                tiles.append(Tile(r, c, r0, r1, c0, c1, False, symmetric, row_sum[r] * col_sum[c]))
    return tiles


def _check_tile_size(tile_size) -> int:
    if isinstance(tile_size, bool) or not isinstance(tile_size, (int, np.integer)):
        raise TypeError(f"tile_size must be an int, got {type(tile_size).__name__}")
    if tile_size < 1:
        raise ValueError(f"tile_size must be >= 1, got {tile_size}")
    return int(tile_size)


def assign_tiles(tiles: Sequence[Tile], world_size: int) -> List[List[Tile]]:
    """Tiles per rank: the largest tile first to the least-loaded rank (ties: the earlier tile,
    the lower rank), so that every rank's share of cells is about equal. Deterministic."""
    order = sorted(range(len(tiles)), key=lambda t: (-tiles[t].cells, t))
    loads = [(0, r) for r in range(world_size)]
    shares: List[List[Tile]] = [[] for _ in range(world_size)]
    for t in order:
        load, r = heapq.heappop(loads)
        shares[r].append(tiles[t])
        heapq.heappush(loads, (load + tiles[t].cells, r))
    return shares


def _default_tile_size(nx: int, ny: int, world_size: int) -> int:
    """About four blocks per rank along each side (enough tiles to balance), within
    ``[100, 1024]``."""
    n = max(nx, ny, 1)
    return max(_MIN_DEFAULT_TILE, min(_MAX_DEFAULT_TILE, math.ceil(n / (4 * world_size))))


# ---------------------------------------------------------------------------
# The process group
# ---------------------------------------------------------------------------


class _Group:
    """Rank, size and collectives of a process group; one process where none is initialised."""

    def __init__(self, group):
        if dist.is_available() and dist.is_initialized():
            self.group = group
            self.rank = dist.get_rank(group)
            self.size = dist.get_world_size(group)
            if self.rank < 0:
                raise ValueError("this process is not a member of the given process group")
            backend = dist.get_backend(group)
            self.device = (torch.device("cuda", torch.cuda.current_device())
                           if backend == "nccl" else torch.device("cpu"))
        else:
            if group is not None:
                raise ValueError("group given, but torch.distributed is not initialised")
            self.group, self.rank, self.size, self.device = None, 0, 1, torch.device("cpu")

    def global_rank(self, r: int) -> int:
        return r if self.group is None else dist.get_global_rank(self.group, r)

    def broadcast_object(self, obj, src: int = 0):
        if self.size == 1:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=self.global_rank(src), group=self.group,
                                   device=self.device if self.device.type == "cuda" else None)
        return box[0]

    def broadcast(self, tensor: torch.Tensor, src: int) -> torch.Tensor:
        if self.size > 1:
            dist.broadcast(tensor, src=self.global_rank(src), group=self.group)
        return tensor

    def failed_ranks(self, failed: bool) -> List[int]:
        """All ranks learn which ranks failed (also a barrier: every rank has finished)."""
        flags = torch.zeros(self.size, dtype=torch.int32, device=self.device)
        flags[self.rank] = int(failed)
        if self.size > 1:
            dist.all_reduce(flags, group=self.group)
        return [r for r, f in enumerate(flags.tolist()) if f]


def _raise_if_failed(group: _Group, error: Optional[BaseException]) -> None:
    failed = group.failed_ranks(error is not None)
    if error is not None:
        raise error
    if failed:
        raise RuntimeError(f"distance tiles failed on rank(s) {failed}; see their error messages")


# ---------------------------------------------------------------------------
# The matrix's arguments, checked as bedl_torch.pairwise_distances checks them
# ---------------------------------------------------------------------------


class _Problem:
    def __init__(self, X, Y, cost, mode="exact", reference_cost=None, chunk_size=None,
                 rel_tol=None, unknown="error", symmetric=None):
        if mode not in ("exact", "pseudo"):
            raise ValueError(f"mode must be 'exact' or 'pseudo', got {mode!r}")
        self.same = Y is None
        X = list(X)
        Y = X if self.same else list(Y)
        if cost is None:
            cost = UnitCost(alphabet_of(X, Y))
        elif not isinstance(cost, SymbolCost):
            raise TypeError(f"cost must be a bedl_torch.SymbolCost module, got {type(cost).__name__}")
        if reference_cost is not None and not isinstance(reference_cost, SymbolCost):
            raise TypeError("reference_cost must be a bedl_torch.SymbolCost module")
        if symmetric is None:
            symmetric = self.same and getattr(cost, "symmetric", False)
        symmetric = bool(symmetric)
        if symmetric and not self.same and len(X) != len(Y):
            raise ValueError("symmetric=True needs a square matrix")
        if chunk_size is not None and chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        self.x_table = FlatTable(X, "X")
        self.y_table = self.x_table if self.same else FlatTable(Y, "Y")
        kx, ky = self.x_table.kind, self.y_table.kind
        if kx and ky and kx != ky:
            raise TypeError(f"X and Y must both hold trees or both sequences, got {kx}s and {ky}s")
        # Fail early (on every rank alike), naming unknown labels, before any collective.
        self.x_table.flat_labels(cost, unknown)
        self.y_table.flat_labels(cost, unknown)
        if reference_cost is not None:
            self.x_table.flat_labels(reference_cost, unknown)
            self.y_table.flat_labels(reference_cost, unknown)
        check_rel_tol(rel_tol, cost.dtype)
        self.X, self.Y, self.cost, self.symmetric = X, Y, cost, symmetric
        self.dtype, self.device = cost.dtype, cost.device
        self.kw = dict(mode=mode, reference_cost=reference_cost, rel_tol=rel_tol,
                       unknown=unknown, chunk_size=chunk_size)
        # The symbol tables of the whole matrix, built once: every tile gathers its costs from
        # the same table as bedl_torch.pairwise_distances would for the whole matrix.
        self.reference = reference_cost if reference_cost is not None else cost
        with torch.no_grad():
            self.view = matrix_view(self.x_table, self.y_table, cost, unknown)
            self.reference_view = self.view if self.reference is cost else None
            if mode == "pseudo" and self.reference_view is None:
                self.reference_view = matrix_view(self.x_table, self.y_table, self.reference,
                                                   unknown)
        self._blocks: Dict[Tuple[str, int, int], FlatTable] = {}

    def block(self, side: str, start: int, stop: int) -> FlatTable:
        """The objects ``[start, stop)`` of X (``side="x"``) or Y, flattened once: the kernels
        index every tree of the tables they get, so a tile gets tables of its own objects."""
        if self.same:
            side = "x"  # a diagonal tile of X x X passes one table twice, as the whole matrix does
        key = (side, start, stop)
        if key not in self._blocks:
            objects = (self.X if side == "x" else self.Y)[start:stop]
            self._blocks[key] = FlatTable(objects, side.upper())
        return self._blocks[key]

    def pair_values(self, x_table: FlatTable, y_table: FlatTable, ii: torch.Tensor, jj: torch.Tensor):
        """Distances of the pairs ``(x_table[ii[k]], y_table[jj[k]])`` as
        ``bedl_torch.ops.table_pair_distances`` computes them (one kernel call for exact
        distances from a symbol table, else chunks of similar sizes), but with the whole
        matrix's symbol tables, built once; returns ``(ii, jj, values)`` in the order
        computed."""
        mode, chunk_size = self.kw["mode"], self.kw["chunk_size"]
        rel_tol, unknown = self.kw["rel_tol"], self.kw["unknown"]
        if chunk_size is None and mode == "exact" and self.view is not None:
            chunk_size = max(1, len(ii))
        ii, jj, bounds = pair_chunks(x_table, y_table, ii, jj, chunk_size)
        values = []
        with torch.no_grad():
            for s, e in zip(bounds[:-1], bounds[1:]):
                batch = PairBatch.from_tables(x_table, y_table, ii[s:e], jj[s:e])
                if mode == "exact":
                    values.append(batch._distances(self.cost, rel_tol=rel_tol, unknown=unknown,
                                                   view=self.view))
                else:
                    p0 = batch._coopt(self.reference, rel_tol, unknown, view=self.reference_view)[1]
                    values.append(batch._pseudo(self.cost, p0, unknown, view=self.view))
        return ii, jj, torch.cat(values)

    @property
    def shape(self) -> Tuple[int, int]:
        return (len(self.X), len(self.Y))

    def tiles(self, tile_size: int) -> List[Tile]:
        return plan_tiles(self.x_table.lengths.tolist(), self.y_table.lengths.tolist(),
                          tile_size, self.symmetric)

    def fingerprint(self) -> str:
        """A digest of the objects, the cost modules and the options (for ``resume``)."""
        h = hashlib.sha256()

        def add(text: str) -> None:
            h.update(text.encode("utf-8", "backslashreplace"))
            h.update(b"\0")

        for side in ((self.X,) if self.same else (self.X, self.Y)):
            add(f"side {len(side)}")
            for o in side:
                add(repr((o.labels, o.children)) if isinstance(o, Tree) else repr(tuple(o)))
        for name, module in (("cost", self.cost), ("reference", self.kw["reference_cost"])):
            if module is None:
                continue
            add(f"{name} {type(module).__module__}.{type(module).__qualname__}")
            add(repr(module.alphabet))
            for key, value in module.state_dict().items():
                add(key)
                if isinstance(value, torch.Tensor):
                    add(f"{value.dtype} {tuple(value.shape)}")
                    h.update(value.detach().cpu().contiguous().numpy().tobytes())
                else:
                    add(repr(value))
        add(repr({k: v for k, v in self.kw.items() if k != "reference_cost"}))
        add(f"symmetric {self.symmetric}")
        return h.hexdigest()


def _tile_values(problem: _Problem, tile: Tile) -> torch.Tensor:
    """The tile's distances ``(r1 - r0, c1 - c0)`` on the CPU (a triangle tile mirrored in
    place)."""
    rows, cols = tile.shape
    if tile.triangle:
        ii, jj = torch.triu_indices(rows, cols, offset=0)
    else:
        ii = torch.arange(rows).repeat_interleave(cols)
        jj = torch.arange(cols).repeat(rows)
    x_table = problem.block("x", tile.r0, tile.r1)
    y_table = problem.block("y", tile.c0, tile.c1)
    ii, jj, vals = problem.pair_values(x_table, y_table, ii, jj)
    vals = vals.detach().to("cpu", problem.dtype)
    values = torch.zeros(rows, cols, dtype=problem.dtype)
    values.index_put_((ii, jj), vals)
    if tile.triangle:
        values.index_put_((jj, ii), vals)
    return values


class _Progress:
    """A tqdm bar over DP cells on rank 0 when asked for and tqdm is installed; else silent."""

    def __init__(self, enabled: bool, total: int, desc: str):
        self.bar = None
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                return
            self.bar = tqdm(total=total, desc=desc, unit="cell", unit_scale=True, file=sys.stderr,
                            dynamic_ncols=True)

    def update(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ---------------------------------------------------------------------------
# pairwise_distances
# ---------------------------------------------------------------------------


def pairwise_distances(X: Sequence, Y: Optional[Sequence] = None, cost: Optional[SymbolCost] = None,
                       *, out=None, resume: bool = False, tile_size: Optional[int] = None,
                       group=None, progress: bool = True, mode: str = "exact",
                       reference_cost: Optional[SymbolCost] = None,
                       chunk_size: Optional[int] = None, rel_tol: Optional[float] = None,
                       unknown: str = "error", symmetric: Optional[bool] = None):
    """Matrix of edit distances ``(len(X), len(Y))``, its tiles shared among processes.

    Every rank of the process group calls it with the same arguments (the same objects and a
    cost module with the same parameters). The matrix is cut into tiles of ``tile_size`` objects
    a side; where :func:`bedl_torch.pairwise_distances` would compute a symmetric matrix
    (``Y is None`` and a cost module with ``symmetric = True``, or ``symmetric=True``) only the
    tiles on and above the diagonal are computed and mirrored. The tiles are assigned to the
    ranks by their dynamic programming cells (largest first to the least-loaded rank), not by
    their number of pairs. Without an initialised process group everything runs here.

    Distances only: no gradient flows to the cost module (use
    :func:`bedl_torch.pairwise_distances` for that).

    The values are those of ``bedl_torch.pairwise_distances(X, Y, cost, ...)`` with the same
    keyword arguments, bit for bit wherever that function computes the whole matrix from one
    symbol table (exact mode with a cost module's whole table, e.g. :class:`UnitCost` or a
    small :class:`EuclideanCost`, or at most 1024 distinct symbols in ``X`` and ``Y``). Where it
    groups pairs into chunks with their own costs (larger alphabets without a whole table, and
    ``mode="pseudo"``, whose sums run over padded chunks) its own values depend on the chunking
    in the last bits, and so do these: they agree to rounding.

    Args:
        X, Y, cost, mode, reference_cost, chunk_size, rel_tol, unknown, symmetric: as for
            :func:`bedl_torch.pairwise_distances` (``chunk_size`` applies within a tile).
        out: ``None`` (the whole matrix comes back on every rank) or the path of a ``.npy`` file
            on a filesystem every rank shares: rank 0 creates it, every rank writes its tiles
            into it, and a read-only ``numpy.memmap`` of it comes back. Each rank then holds
            one tile at a time, never the matrix.
        resume: with ``out``, keep the tiles a previous call with the same arguments finished
            (recorded in the folder ``out + ".tiles"``) and compute only the others, on any
            number of ranks. Raises ValueError if that call had another shape, dtype, tile size
            or other inputs. Without a previous call it starts afresh.
        tile_size: objects per tile side (default: about four tiles per rank along each side,
            between 100 and 1024; when resuming, the previous call's). Memory per rank grows
            with its square.
        group: the process group (default: the whole world when initialised).
        progress: a progress bar on rank 0 (needs tqdm).

    Returns:
        A tensor on the cost module's device and dtype (``out=None``), or a read-only
        ``numpy.memmap`` of ``out``.

    Raises:
        ValueError, TypeError: as :func:`bedl_torch.pairwise_distances`; a ``resume`` onto a file
            of another call; ``resume`` without ``out``.
    """
    if resume and out is None:
        raise ValueError("resume=True needs out= (the file whose finished tiles to keep)")
    problem = _Problem(X, Y, cost, mode, reference_cost, chunk_size, rel_tol, unknown, symmetric)
    grp = _Group(group)
    if tile_size is not None:
        tile_size = _check_tile_size(tile_size)
    if out is not None:
        return _pairwise_to_file(problem, tile_size, grp, os.fspath(out), resume, progress)
    nx, ny = problem.shape
    tiles = problem.tiles(tile_size or _default_tile_size(nx, ny, grp.size))
    return _pairwise_in_memory(problem, tiles, grp, progress)


def _compute_share(problem: _Problem, share: Sequence[Tile], grp: _Group, progress: bool,
                   label: str, on_tile) -> Optional[Exception]:
    """Compute this rank's tiles, handing each to ``on_tile(tile, values)``; returns the error
    that stopped it (an Exception; KeyboardInterrupt and other BaseExceptions propagate)."""
    bar = _Progress(progress and grp.rank == 0, sum(t.cells for t in share),
                    label if grp.size == 1 else f"{label} (rank 0's share of {grp.size})")
    try:
        for tile in share:
            on_tile(tile, _tile_values(problem, tile))
            bar.update(tile.cells)
    except Exception as error:  # the other ranks must learn of it, not wait for this one
        return error
    finally:
        bar.close()
    return None


def _pairwise_in_memory(problem: _Problem, tiles: List[Tile], grp: _Group, progress: bool):
    nx, ny = problem.shape
    shares = assign_tiles(tiles, grp.size)
    mine: List[torch.Tensor] = []
    error = _compute_share(problem, shares[grp.rank], grp, progress, "pairwise",
                           lambda tile, values: mine.append(values.reshape(-1)))
    _raise_if_failed(grp, error)
    matrix = torch.zeros(nx, ny, dtype=problem.dtype)
    for r, share in enumerate(shares):
        if not share:
            continue
        if r == grp.rank:
            flat = torch.cat(mine).to(grp.device)
            mine = []
        else:
            flat = torch.empty(sum(t.shape[0] * t.shape[1] for t in share), dtype=problem.dtype,
                               device=grp.device)
        flat = grp.broadcast(flat, src=r).cpu()
        offset = 0
        for tile in share:
            rows, cols = tile.shape
            values = flat[offset: offset + rows * cols].view(rows, cols)
            offset += rows * cols
            matrix[tile.r0: tile.r1, tile.c0: tile.c1] = values
            if tile.mirrored:
                matrix[tile.c0: tile.c1, tile.r0: tile.r1] = values.T
    return matrix.to(problem.device)


# -- the .npy file ------------------------------------------------------------


def _tiles_dir(path: str) -> str:
    return path + ".tiles"


def _meta_path(path: str) -> str:
    return os.path.join(_tiles_dir(path), "meta.json")


def _marker_path(path: str, tile: Tile) -> str:
    return os.path.join(_tiles_dir(path), tile.name + ".done")


def _np_dtype(dtype: torch.dtype) -> np.dtype:
    return np.dtype(torch.empty(0, dtype=dtype).numpy().dtype).newbyteorder("<")


def _read_header(path: str) -> Tuple[Tuple[int, ...], bool, np.dtype, int]:
    """``(shape, fortran_order, dtype, data offset)`` of a ``.npy`` file."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        return tuple(shape), fortran, dtype, f.tell()


def _describe(meta: dict) -> str:
    shape = "x".join(str(s) for s in meta["shape"])
    return f"a {shape} {meta['dtype']} matrix in tiles of {meta['tile_size']}"


def _finished_tiles(path: str) -> List[str]:
    folder = _tiles_dir(path)
    if not os.path.isdir(folder):
        return []
    return sorted(f[: -len(".done")] for f in os.listdir(folder) if f.endswith(".done"))


def _start_file(path: str, meta: dict, resume: bool) -> List[str]:
    """Rank 0: the names of the tiles a previous run finished (resume), or a fresh file."""
    meta_path = _meta_path(path)
    if resume and os.path.exists(meta_path) and os.path.exists(path):
        with open(meta_path, "r", encoding="utf-8") as f:
            old = json.load(f)
        hint = "; pass resume=False (no --resume) to start over"
        for key in ("format", "shape", "dtype", "tile_size", "symmetric"):
            if old.get(key) != meta[key]:
                raise ValueError(f"cannot resume {path}: it holds {_describe(old)}, this call makes "
                                 f"{_describe(meta)} ({key} differs){hint}")
        if old.get("fingerprint") != meta["fingerprint"]:
            raise ValueError(f"cannot resume {path}: it was started with other objects, costs or "
                             f"options than this call{hint}")
        shape, fortran, dtype, _ = _read_header(path)
        if list(shape) != meta["shape"] or fortran or dtype.str != meta["dtype"]:
            raise ValueError(f"cannot resume {path}: its header says {shape} {dtype.str}, its "
                             f"record {_describe(meta)}{hint}")
        return _finished_tiles(path)
    # A fresh file: first forget the old record, so that a crash in between leaves none.
    folder = _tiles_dir(path)
    os.makedirs(folder, exist_ok=True)
    if os.path.exists(meta_path):
        os.remove(meta_path)
    for name in _finished_tiles(path):
        os.remove(os.path.join(folder, name + ".done"))
    created = np.lib.format.open_memmap(path, mode="w+", dtype=np.dtype(meta["dtype"]),
                                        shape=tuple(meta["shape"]))
    del created  # unwritten parts of the (sparse) file read as zeros
    tmp = meta_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, meta_path)
    return []


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def _write_block(fd: int, data_offset: int, ncols: int, r0: int, c0: int, block: np.ndarray) -> None:
    """Write ``block`` at rows ``r0..``, columns ``c0..`` of a C-order matrix in a file."""
    itemsize = block.dtype.itemsize
    rows, cols = block.shape
    if cols == ncols:  # whole rows: one contiguous run
        _pwrite_all(fd, block.tobytes(), data_offset + r0 * ncols * itemsize)
        return
    for i in range(rows):
        _pwrite_all(fd, block[i].tobytes(), data_offset + ((r0 + i) * ncols + c0) * itemsize)


def _recorded_tile_size(path: str) -> Optional[int]:
    """The tile size a previous run recorded for ``path``, if any (resume's default)."""
    try:
        with open(_meta_path(path), "r", encoding="utf-8") as f:
            size = json.load(f).get("tile_size")
    except (OSError, ValueError):
        return None
    return size if isinstance(size, int) and size >= 1 and os.path.exists(path) else None


def _pairwise_to_file(problem: _Problem, tile_size: Optional[int], grp: _Group, path: str,
                      resume: bool, progress: bool):
    nx, ny = problem.shape
    np_dtype = _np_dtype(problem.dtype)
    if grp.rank == 0:
        try:
            if tile_size is None:  # a resumed run keeps its tiles, whatever the world size now
                tile_size = ((_recorded_tile_size(path) if resume else None)
                             or _default_tile_size(nx, ny, grp.size))
            meta = {"format": _META_FORMAT, "shape": [nx, ny], "dtype": np_dtype.str,
                    "tile_size": tile_size, "symmetric": problem.symmetric,
                    "fingerprint": problem.fingerprint()}
            status = ("ok", _start_file(path, meta, resume), tile_size)
        except (ValueError, OSError) as error:
            status = ("error", f"{type(error).__name__}: {error}", error)
        # the others open the file only after this broadcast, i.e. after rank 0 made it
        message = grp.broadcast_object(status[:3] if status[0] == "ok" else status[:2], src=0)
        if status[0] == "error":
            raise status[2]
    else:
        message = grp.broadcast_object(None, src=0)
        if message[0] == "error":
            raise ValueError(f"rank 0 could not start {path}: {message[1]}")
    tiles = problem.tiles(message[2])
    finished = set(message[1])
    todo = [t for t in tiles if t.name not in finished]
    shares = assign_tiles(todo, grp.size)
    _, _, _, data_offset = _read_header(path)
    fd = os.open(path, os.O_RDWR)
    try:
        def write_tile(tile: Tile, values: torch.Tensor) -> None:
            block = values.numpy().astype(np_dtype, copy=False)
            _write_block(fd, data_offset, ny, tile.r0, tile.c0, block)
            if tile.mirrored:
                _write_block(fd, data_offset, ny, tile.c0, tile.r0, np.ascontiguousarray(block.T))
            os.fdatasync(fd)  # the data is on disk before its marker says so
            with open(_marker_path(path, tile), "wb"):
                pass

        error = _compute_share(problem, shares[grp.rank], grp, progress, "pairwise", write_tile)
    finally:
        os.close(fd)
    _raise_if_failed(grp, error)
    return np.load(path, mmap_mode="r")


# ---------------------------------------------------------------------------
# kneighbors
# ---------------------------------------------------------------------------

_NO_INDEX = torch.iinfo(torch.int64).max


def _merge_nearest(best_d: torch.Tensor, best_i: torch.Tensor, cand_d: torch.Tensor,
                   cand_i: torch.Tensor, k: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Row-wise the ``k`` smallest of two candidate lists by (distance, index)."""
    d = torch.cat([best_d, cand_d], 1)
    i = torch.cat([best_i, cand_i], 1)
    order = torch.argsort(i, dim=1, stable=True)
    d, i = d.gather(1, order), i.gather(1, order)
    order = torch.argsort(d, dim=1, stable=True)[:, :k]
    return d.gather(1, order), i.gather(1, order)


def kneighbors(X: Sequence, Y: Optional[Sequence] = None, *, k: int,
               cost: Optional[SymbolCost] = None, tile_size: Optional[int] = None, group=None,
               progress: bool = False, mode: str = "exact",
               reference_cost: Optional[SymbolCost] = None, chunk_size: Optional[int] = None,
               rel_tol: Optional[float] = None, unknown: str = "error",
               symmetric: Optional[bool] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` nearest objects of ``Y`` (of ``X`` itself when ``Y`` is None, each object
    excluded from its own list) for every object of ``X``, without the whole matrix.

    Tiles as in :func:`pairwise_distances` (shared among the ranks of the process group; every
    rank calls it with the same arguments and gets the whole result); each rank keeps only the
    running ``k`` best of every row. The distances are those of
    :func:`bedl_torch.pairwise_distances` with the same arguments (see
    :func:`pairwise_distances` for where that holds bit for bit). No gradient.

    Returns:
        ``(distances, indices)``: float64 ``(len(X), k)`` and int64 ``(len(X), k)`` CPU tensors,
        every row sorted by distance, equal distances by index.

    Raises:
        ValueError: ``k`` not in ``1 .. len(Y)`` (``len(X) - 1`` without ``Y``); the errors
            of :func:`pairwise_distances`.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    k = int(k)
    problem = _Problem(X, Y, cost, mode, reference_cost, chunk_size, rel_tol, unknown, symmetric)
    nx, ny = problem.shape
    candidates = ny - 1 if problem.same else ny
    if not 1 <= k <= candidates:
        raise ValueError(f"k must be between 1 and {candidates} (the "
                         f"{'other objects of X' if problem.same else 'objects of Y'}), got {k}")
    grp = _Group(group)
    if tile_size is None:
        tile_size = _default_tile_size(nx, ny, grp.size)
    tiles = problem.tiles(_check_tile_size(tile_size))
    share = assign_tiles(tiles, grp.size)[grp.rank]
    best_d = torch.full((nx, k), math.inf, dtype=torch.float64)
    best_i = torch.full((nx, k), _NO_INDEX, dtype=torch.int64)

    def merge(rows: slice, cols: torch.Tensor, values: torch.Tensor, r0: int) -> None:
        values = values.to(torch.float64)
        index = cols.expand(values.shape[0], -1)
        if problem.same:  # an object is no neighbour of itself
            own = torch.arange(r0, r0 + values.shape[0])[:, None] == index
            values = values.masked_fill(own, math.inf)
            index = index.masked_fill(own, _NO_INDEX)
        best_d[rows], best_i[rows] = _merge_nearest(best_d[rows], best_i[rows], values, index, k)

    def on_tile(tile: Tile, values: torch.Tensor) -> None:
        merge(slice(tile.r0, tile.r1), torch.arange(tile.c0, tile.c1)[None, :], values, tile.r0)
        if tile.mirrored:
            merge(slice(tile.c0, tile.c1), torch.arange(tile.r0, tile.r1)[None, :], values.T,
                  tile.c0)

    error = _compute_share(problem, share, grp, progress, "kneighbors", on_tile)
    _raise_if_failed(grp, error)
    if grp.size > 1:
        # the k best are unique under the (distance, index) order: merging is order-free
        mine_d, mine_i = best_d, best_i
        for r in range(grp.size):
            d = grp.broadcast(mine_d.clone().to(grp.device) if r == grp.rank
                              else torch.empty_like(mine_d, device=grp.device), src=r).cpu()
            i = grp.broadcast(mine_i.clone().to(grp.device) if r == grp.rank
                              else torch.empty_like(mine_i, device=grp.device), src=r).cpu()
            best_d, best_i = (d, i) if r == 0 else _merge_nearest(best_d, best_i, d, i, k)
    return best_d, best_i


# ---------------------------------------------------------------------------
# Command line: python -m bedl_torch pairwise (see bedl_torch.__main__)
# ---------------------------------------------------------------------------


def add_cli_parser(subparsers) -> None:
    """Add the ``pairwise`` subcommand to the ``python -m bedl_torch`` parser."""
    p = subparsers.add_parser(
        "pairwise", help="a pairwise distance matrix into a .npy file (torchrun for many ranks)",
        description="Write the edit-distance matrix of a data set into a .npy file, its tiles "
                    "shared among the processes that torchrun starts (gloo), or in one process "
                    "without torchrun. Ctrl-C leaves a file that --resume finishes.")
    p.add_argument("input", help="a data set name of bedl_torch.datasets.load (strings, "
                                 "minipalindrome, sorting, cystic, leukemia, sentiment) or a "
                                 "JSON-lines file with one tree (Tree.to_json()) per line")
    p.add_argument("--out", required=True, help="the .npy file (on a filesystem every rank "
                                                "shares)")
    p.add_argument("--cost", choices=("unit", "glove"), default="unit",
                   help="unit costs (default) or cosine costs on GloVe word vectors (PCA to 95%% "
                        "variance, as the experiment's initial sentiment metric); sentiment "
                        "trees then become their word sequences (equal distances)")
    p.add_argument("--resume", action="store_true",
                   help="keep the tiles a previous run of the same command finished")
    p.add_argument("--tile-size", type=int, default=None,
                   help="objects per tile side (default: about four tiles per rank a side, "
                        "100 to 1024)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _read_input(name: str) -> list:
    from . import datasets

    if name.lower() in datasets.NAMES:
        X, _ = datasets.load(name)
        return list(X)
    if not os.path.isfile(name):
        raise ValueError(f"{name!r} is neither a data set ({', '.join(datasets.NAMES)}) nor a file")
    trees = []
    with open(name, "r", encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                trees.append(Tree.from_json(line))
            except (ValueError, TypeError, KeyError) as error:
                raise ValueError(f"{name}, line {number}: not a tree in the Tree.to_json() "
                                 f"format ({error})") from None
    return trees


def _glove_cost(X: list, sentiment: bool):
    """GloVe cosine costs over the objects' words, as the experiment's sentiment metric (its
    PCA fitted on all of them); SST trees are replaced by their word sequences."""
    from .evaluation.protocol.data import SentimentCosts, leaf_sequence

    if sentiment:
        X = [leaf_sequence(t) for t in X]
    cost, _ = SentimentCosts().make(X, X)
    return X, cost


def run_cli(args) -> int:
    """``python -m bedl_torch pairwise``: under torchrun (``WORLD_SIZE`` set) a gloo process
    group from its environment, else one process. Exit code 130 after Ctrl-C."""
    own_group = False
    if "WORLD_SIZE" in os.environ and "RANK" in os.environ and not dist.is_initialized():
        dist.init_process_group(backend="gloo")
        own_group = True
    rank = dist.get_rank() if dist.is_initialized() else 0
    try:
        X = _read_input(args.input)
        cost = None
        if args.cost == "glove":
            X, cost = _glove_cost(X, args.input.lower() == "sentiment")
        start = time.perf_counter()
        D = pairwise_distances(X, cost=cost, out=args.out, resume=args.resume,
                               tile_size=args.tile_size, progress=not args.no_progress)
        if rank == 0:
            world = dist.get_world_size() if dist.is_initialized() else 1
            print(f"{args.out}: {D.shape[0]} x {D.shape[1]} {D.dtype} in "
                  f"{time.perf_counter() - start:.1f} s on {world} process(es)")
        return 0
    except (ValueError, TypeError, OSError) as error:
        print(f"python -m bedl_torch pairwise: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if rank == 0:
            done = len(_finished_tiles(args.out))
            print(f"\ninterrupted: {done} tiles of {args.out} finished; run the same command with "
                  "--resume to finish it", file=sys.stderr)
        return 130
    finally:
        if own_group and dist.is_initialized():
            dist.destroy_process_group()
