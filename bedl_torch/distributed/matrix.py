"""Distance matrices and nearest neighbours across the ranks of a process group (in memory; the
``.npy`` file is :mod:`.npy_file`'s)."""
from __future__ import annotations

import math
import os
from typing import List, Optional, Sequence, Tuple

import torch

from ..costs import SymbolCost
from ..search.arguments import check_k, check_mode
from ..search.merge import NO_INDEX
from ..search.problem import BOUNDS
from .group import ProcessGroup, raise_if_failed
from .npy_file import pairwise_to_file
from .problem import MatrixProblem, compute_share
from .search import search_kneighbors, search_radius_neighbors
from .tiles import Tile, assign_tiles, check_tile_size, default_tile_size

__all__ = ["pairwise_distances", "kneighbors", "radius_neighbors"]


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
    problem = MatrixProblem(X, Y, cost, mode, reference_cost, chunk_size, rel_tol, unknown, symmetric)
    grp = ProcessGroup(group)
    if tile_size is not None:
        tile_size = check_tile_size(tile_size)
    if out is not None:
        return pairwise_to_file(problem, tile_size, grp, os.fspath(out), resume, progress)
    nx, ny = problem.shape
    tiles = problem.tiles(tile_size or default_tile_size(nx, ny, grp.size))
    return _pairwise_in_memory(problem, tiles, grp, progress)



def _pairwise_in_memory(problem: MatrixProblem, tiles: List[Tile], grp: ProcessGroup,
                        progress: bool):
    """Each rank computes its share of the tiles into the whole matrix, then the ranks broadcast
    their shares in turn (each a temporary of its tiles' values, never all of them at once)."""
    nx, ny = problem.shape
    shares = assign_tiles(tiles, grp.size)
    matrix = torch.zeros(nx, ny, dtype=problem.dtype)
    error = compute_share(problem, shares[grp.rank], grp, progress, "pairwise",
                          lambda tile, values: _place(matrix, tile, values.reshape(tile.shape)))
    raise_if_failed(grp, error)
    if grp.size == 1:
        return matrix.to(problem.device)
    for r, share in enumerate(shares):
        if not share:
            continue
        if r == grp.rank:
            flat = torch.cat([matrix[t.r0: t.r1, t.c0: t.c1].reshape(-1) for t in share]).to(grp.device)
        else:
            flat = torch.empty(sum(t.shape[0] * t.shape[1] for t in share), dtype=problem.dtype,
                               device=grp.device)
        flat = grp.broadcast(flat, src=r)
        if r == grp.rank:
            continue
        flat, offset = flat.cpu(), 0
        for tile in share:
            rows, cols = tile.shape
            _place(matrix, tile, flat[offset: offset + rows * cols].view(rows, cols))
            offset += rows * cols
    return matrix.to(problem.device)


def _place(matrix: torch.Tensor, tile: Tile, values: torch.Tensor) -> None:
    """A tile's values into the matrix, and mirrored where the tile stands for both halves."""
    matrix[tile.r0: tile.r1, tile.c0: tile.c1] = values
    if tile.mirrored:
        matrix[tile.c0: tile.c1, tile.r0: tile.r1] = values.T



# ---------------------------------------------------------------------------
# kneighbors
# ---------------------------------------------------------------------------


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
               symmetric: Optional[bool] = None, block_size: Optional[int] = None,
               bounds: Sequence[str] = BOUNDS, return_stats: bool = False):
    """The ``k`` nearest objects of ``Y`` (of ``X`` itself when ``Y`` is None, each object
    excluded from its own list) for every object of ``X``, without the whole matrix, across
    the ranks of the process group (every rank calls it with the same arguments and gets the
    whole result).

    Exact mode (the default): :func:`bedl_torch.search.kneighbors`' engine (bounds that hold
    for any costs, then exact distances with the kernels' cutoff) on each rank's contiguous
    range of query rows, of about equal DP cells, in blocks of ``block_size`` rows (where bounds
    cannot pay, the matrix's tiles balanced among the ranks), the same answer as in one process;
    ``return_stats`` as there (summed over the ranks); ``progress`` shows rank 0's rows.
    Pseudo mode: every entry in tiles as in :func:`pairwise_distances` (``tile_size``), each
    rank keeping the running ``k`` best of every row. The distances are those of
    :func:`bedl_torch.pairwise_distances` with the same arguments (see
    :func:`pairwise_distances` for where that holds bit for bit). No gradient.

    Returns:
        ``(distances, indices)`` (and the stats): float64 ``(len(X), k)`` and int64
        ``(len(X), k)`` CPU tensors, every row sorted by distance, equal distances by index.

    Raises:
        ValueError: ``k`` not in ``1 .. len(Y)`` (``len(X) - 1`` without ``Y``),
            ``return_stats`` with pseudo mode; the errors of :func:`pairwise_distances`.
    """
    if mode == "exact" and reference_cost is None:
        return search_kneighbors(X, Y, k, cost, group, progress, chunk_size, rel_tol, unknown,
                                 symmetric, block_size, bounds, return_stats)
    if return_stats:
        raise ValueError("return_stats needs mode='exact' (the search engine)")
    problem = MatrixProblem(X, Y, cost, mode, reference_cost, chunk_size, rel_tol, unknown, symmetric)
    nx, ny = problem.shape
    k = check_k(k, ny - 1 if problem.same else ny, problem.same)
    grp = ProcessGroup(group)
    if tile_size is None:
        tile_size = default_tile_size(nx, ny, grp.size)
    tiles = problem.tiles(check_tile_size(tile_size))
    share = assign_tiles(tiles, grp.size)[grp.rank]
    best_d = torch.full((nx, k), math.inf, dtype=torch.float64)
    best_i = torch.full((nx, k), NO_INDEX, dtype=torch.int64)

    def merge(rows: slice, cols: torch.Tensor, values: torch.Tensor, r0: int) -> None:
        values = values.to(torch.float64)
        index = cols.expand(values.shape[0], -1)
        if problem.same:  # an object is no neighbour of itself
            own = torch.arange(r0, r0 + values.shape[0])[:, None] == index
            values = values.masked_fill(own, math.inf)
            index = index.masked_fill(own, NO_INDEX)
        best_d[rows], best_i[rows] = _merge_nearest(best_d[rows], best_i[rows], values, index, k)

    def on_tile(tile: Tile, values: torch.Tensor) -> None:
        merge(slice(tile.r0, tile.r1), torch.arange(tile.c0, tile.c1)[None, :], values, tile.r0)
        if tile.mirrored:
            merge(slice(tile.c0, tile.c1), torch.arange(tile.r0, tile.r1)[None, :], values.T,
                  tile.c0)

    error = compute_share(problem, share, grp, progress, "kneighbors", on_tile)
    raise_if_failed(grp, error)
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


def radius_neighbors(X: Sequence, Y: Optional[Sequence] = None, *, radius: float,
                     cost: Optional[SymbolCost] = None, group=None, progress: bool = False,
                     mode: str = "exact", chunk_size: Optional[int] = None,
                     rel_tol: Optional[float] = None, unknown: str = "error",
                     symmetric: Optional[bool] = None, block_size: Optional[int] = None,
                     bounds: Sequence[str] = BOUNDS, return_stats: bool = False):
    """:func:`bedl_torch.search.radius_neighbors` across the ranks of the process group: each
    rank searches a contiguous range of query rows of about equal DP cells (in blocks of
    ``block_size`` rows); every rank calls it with the same
    arguments and gets the whole answer ``(rows, cols, distances)`` (and the stats, summed over
    the ranks), the same as in one process. ``progress`` shows rank 0's rows.

    Raises:
        ValueError, TypeError: as :func:`bedl_torch.search.radius_neighbors`.
    """
    check_mode(mode)
    return search_radius_neighbors(X, Y, radius, cost, group, progress, chunk_size, rel_tol, unknown,
                                   symmetric, block_size, bounds, return_stats)
