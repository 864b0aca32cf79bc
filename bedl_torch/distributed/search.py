"""Nearest neighbours and range search across the ranks of a process group: the engine of
:mod:`bedl_torch.search` on each rank's range of query rows (or share of the matrix's tiles,
where bounds cannot pay), balanced by DP cells, the rows gathered on every rank. Every rank
calls with the same arguments and gets the whole answer, the same as in one process.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch

from ..costs import SymbolCost
from ..search.arguments import block_rows, check_k, check_radius
from ..search.knn import bounds_cannot_pay, knn_blocks
from ..search.merge import merge_nearest, sorted_entries
from ..search.problem import SearchProblem, merge_stats
from ..search.radius import radius_blocks, radius_takes_every_pair
from ..search.tiles import (knn_all_pairs, matrix_block_pairs, radius_all_pairs, radius_tiles,
                            uses_length_windows)
from ..search.index import NeighborIndex as _NeighborIndex
from .group import ProcessGroup, Progress, raise_if_failed
from .tiles import balanced_shares

__all__ = ["search_kneighbors", "search_radius_neighbors", "NeighborIndex"]


def _row_range(problem: SearchProblem, grp: ProcessGroup, triangle: bool = False) -> Tuple[int, int]:
    """This rank's query rows ``[r0, r1)``: the rows cut into one contiguous range per rank at
    equal DP cells, a row's size times the sizes of the columns it scans (all of them, or with
    ``triangle`` those after it, as a symmetric range search does). One range per rank, not
    many blocks: a symmetric k-NN shares the exact distances of partner rows within a range."""
    sx = problem.x_table.lengths.to(torch.long) + 1
    sy = problem.y_table.lengths.to(torch.long) + 1
    if triangle:  # row i scans the columns after it
        row_cells = sx * (sy.sum() - torch.cumsum(sy, 0))
    else:
        row_cells = sx * sy.sum()
    ends = torch.cumsum(row_cells.to(torch.float64), 0)
    total = float(ends[-1]) if len(ends) else 0.0

    def cut(r: int) -> int:  # the first row of rank r's range
        if r == 0:
            return 0
        if r == grp.size:
            return problem.nx
        return min(problem.nx, int(torch.searchsorted(ends, total * r / grp.size)) + 1)

    return cut(grp.rank), cut(grp.rank + 1)


def _tile_shares(problem: SearchProblem, grp: ProcessGroup, radius: Optional[float] = None):
    """This rank's blocks of :func:`knn_all_pairs` or (with ``radius``) :func:`radius_all_pairs`
    (their numbers; None: all), the pairs per block and this rank's kernel pairs: blocks
    balanced among the ranks by their DP cells (``|x| |y|`` summed over their pairs)."""
    max_pairs = matrix_block_pairs(problem, grp.size)
    windows = radius is not None and uses_length_windows(problem, radius)
    if grp.size == 1 and not windows:
        nx, ny = problem.nx, problem.ny
        return None, max_pairs, nx * (nx + 1) // 2 if problem.symmetric else nx * ny
    weights, pairs = [], []
    tiles = problem.matrix_blocks(max_pairs) if radius is None else radius_tiles(problem, radius, max_pairs)
    for block in tiles:  # (counted, not built)
        n, cells = block.weight(problem.x_table.lengths, problem.y_table.lengths)
        weights.append(cells + n)
        pairs.append(n)
    if grp.size == 1:  # (length windows: their pairs, for the progress)
        return None, max_pairs, sum(pairs)
    mine = balanced_shares(weights, grp.size)[grp.rank]
    return set(mine), max_pairs, sum(pairs[b] for b in mine)


def _run(grp: ProcessGroup, progress: bool, total: int, desc: str, work, unit: str = "row"):
    """``work(bar)`` on this rank (the bar, on rank 0, counts its ``total`` query rows or
    ``unit``), failures reported to every rank; the results of all ranks (rank order) gathered
    on each."""
    bar = Progress(progress and grp.rank == 0, total, desc, unit=unit)
    error, mine = None, None
    try:
        mine = work(bar)
    except Exception as exc:  # noqa: BLE001 - every rank must learn of it
        error = exc
    finally:
        bar.close()
    raise_if_failed(grp, error)
    return [grp.broadcast_object(mine if r == grp.rank else None, src=r) for r in range(grp.size)]


def search_kneighbors(X: Sequence, Y: Optional[Sequence], k: int, cost: Optional[SymbolCost],
                      group, progress: bool, chunk_size: Optional[int], rel_tol: Optional[float],
                      unknown: str, symmetric: Optional[bool], block_size: Optional[int],
                      bounds: Sequence[str], return_stats: bool):
    """:func:`bedl_torch.search.kneighbors` across ranks (see
    :func:`bedl_torch.distributed.kneighbors`)."""
    grp = ProcessGroup(group)
    problem = SearchProblem(X, Y, cost, rel_tol=rel_tol, unknown=unknown, symmetric=symmetric,
                            chunk_size=chunk_size, bounds=bounds)
    return problem_kneighbors(problem, k, grp, progress, block_size, return_stats)


def problem_kneighbors(problem: SearchProblem, k: int, grp: ProcessGroup, progress: bool,
                       block_size: Optional[int], return_stats: bool):
    """:func:`search_kneighbors` of a prepared problem (every rank holds the same)."""
    candidates = problem.ny - 1 if problem.same else problem.ny
    k = check_k(k, candidates, problem.same)
    if bounds_cannot_pay(problem, k):
        # the matrix's tiles shared among the ranks, each rank's k best merged
        blocks, max_pairs, total = _tile_shares(problem, grp)
        gathered = _run(grp, progress, total, "kneighbors",
                        lambda bar: knn_all_pairs(problem, k, blocks, max_pairs, bar.update),
                        unit="pair")
        distances, indices = merge_nearest([g[:2] for g in gathered], k)
        if return_stats:
            return distances, indices, merge_stats(*[g[2] for g in gathered])
        return distances, indices
    r0, r1 = _row_range(problem, grp)
    step = block_rows(problem, block_size)

    def work(bar):  # (exact values are handed on among this rank's blocks)
        return [knn_blocks(problem, list(range(r0, r1, step)), k, step, on_rows=bar.update,
                           stop=r1)]

    total = r1 - r0
    gathered = [p for rank_parts in _run(grp, progress, total, "kneighbors", work) for p in rank_parts]
    distances = torch.zeros(problem.nx, k, dtype=torch.float64)
    indices = torch.zeros(problem.nx, k, dtype=torch.int64)
    for rows, d, j, _ in gathered:
        distances[rows], indices[rows] = d, j
    if return_stats:
        return distances, indices, merge_stats(*[g[3] for g in gathered])
    return distances, indices


def search_radius_neighbors(X: Sequence, Y: Optional[Sequence], radius: float,
                            cost: Optional[SymbolCost], group, progress: bool,
                            chunk_size: Optional[int], rel_tol: Optional[float], unknown: str,
                            symmetric: Optional[bool], block_size: Optional[int],
                            bounds: Sequence[str], return_stats: bool):
    """:func:`bedl_torch.search.radius_neighbors` across ranks (see
    :func:`bedl_torch.distributed.radius_neighbors`)."""
    radius = check_radius(radius)
    grp = ProcessGroup(group)
    problem = SearchProblem(X, Y, cost, rel_tol=rel_tol, unknown=unknown, symmetric=symmetric,
                            chunk_size=chunk_size, bounds=bounds)
    return problem_radius_neighbors(problem, radius, grp, progress, block_size, return_stats)


def problem_radius_neighbors(problem: SearchProblem, radius: float, grp: ProcessGroup, progress: bool,
                             block_size: Optional[int], return_stats: bool):
    """:func:`search_radius_neighbors` of a prepared problem (``radius`` checked)."""
    step = block_rows(problem, block_size)
    if radius_takes_every_pair(problem, radius):  # the matrix's tiles shared among the ranks
        blocks, max_pairs, total = _tile_shares(problem, grp, radius)
        gathered = _run(grp, progress, total, "radius_neighbors",
                        lambda bar: radius_all_pairs(problem, radius, blocks, max_pairs, bar.update),
                        unit="pair")
    else:
        r0, r1 = _row_range(problem, grp, triangle=problem.symmetric)
        gathered = _run(grp, progress, r1 - r0, "radius_neighbors",
                        lambda bar: radius_blocks(problem, list(range(r0, r1, step)), radius, step,
                                                  on_rows=bar.update, stop=r1))
    out = sorted_entries(*(torch.cat([g[i] for g in gathered]) for i in range(3)), problem.ny)
    if return_stats:
        return (*out, merge_stats(*[g[3] for g in gathered]))
    return out


class NeighborIndex(_NeighborIndex):
    """:class:`bedl_torch.NeighborIndex` whose queries run across the ranks of a process group
    (:func:`bedl_torch.distributed.kneighbors` and :func:`~bedl_torch.distributed.radius_neighbors`
    of a collection prepared once). Every rank builds it from the same collection and calls its
    methods with the same queries; each gets the whole answer, the same as in one process.

    Args:
        Y, cost, unknown, rel_tol, chunk_size, bounds: as for :class:`bedl_torch.NeighborIndex`.
        group: the process group (default: the default group, or one process without one).
            A pickled index is loaded with the default group.
        progress: show rank 0's query rows.
    """

    def __init__(self, Y: Sequence, cost: Optional[SymbolCost] = None, *, group=None,
                 progress: bool = False, **options):
        super().__init__(Y, cost, **options)
        self.group, self.progress = group, progress

    def __getstate__(self):
        return {**super().__getstate__(), "progress": self.progress}

    def __setstate__(self, state):
        super().__setstate__(state)
        self.group, self.progress = None, state["progress"]

    def kneighbors(self, X: Optional[Sequence] = None, *, k: int, block_size: Optional[int] = None,
                   return_stats: bool = False):
        """:meth:`bedl_torch.NeighborIndex.kneighbors` across the ranks."""
        return problem_kneighbors(self._problem(X), k, ProcessGroup(self.group), self.progress,
                                  block_size, return_stats)

    def radius_neighbors(self, X: Optional[Sequence] = None, *, radius: float,
                         block_size: Optional[int] = None, return_stats: bool = False):
        """:meth:`bedl_torch.NeighborIndex.radius_neighbors` across the ranks."""
        radius = check_radius(radius)
        return problem_radius_neighbors(self._problem(X), radius, ProcessGroup(self.group),
                                        self.progress, block_size, return_stats)
