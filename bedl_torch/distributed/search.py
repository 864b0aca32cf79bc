"""Nearest neighbours and range search across the ranks of a process group: the engine of
:mod:`bedl_torch.search` on each rank's share of the blocks of query rows (or of the matrix's
tiles, where bounds cannot pay), a few blocks per rank balanced by their size, the rows
gathered on every rank. Every rank calls with the same arguments and gets the whole answer, the same as in
one process.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from ..costs import SymbolCost
from ..search.engine import (SearchProblem, block_rows, bounds_cannot_pay, check_k, check_radius,
                             knn_all_pairs, knn_blocks, matrix_block_pairs, merge_nearest, merge_stats,
                             radius_blocks)
from .group import ProcessGroup, Progress, raise_if_failed
from .tiles import balanced_shares

__all__ = ["search_kneighbors", "search_radius_neighbors"]


def _row_shares(problem: SearchProblem, block_size: Optional[int], grp: ProcessGroup):
    """This rank's blocks of query rows (their first rows, ascending) and the rows per block:
    ``block_size``, or the engine's default cut to a few blocks per rank; the blocks go to the
    ranks balanced by their rows' sizes (a row's search scans every column)."""
    step = block_rows(problem, block_size, grp.size)
    starts = list(range(0, problem.nx, step))
    sizes = problem.x_table.lengths.to(torch.long)
    weights = [int(sizes[r0:r0 + step].sum()) + 1 for r0 in starts]
    return sorted(starts[b] for b in balanced_shares(weights, grp.size)[grp.rank]), step


def _tile_shares(problem: SearchProblem, grp: ProcessGroup):
    """This rank's blocks of :func:`knn_all_pairs` (their numbers; None: all), the pairs per block
    and this rank's kernel pairs: blocks balanced among the ranks by their DP cells (``|x| |y|`` summed
    over their pairs)."""
    max_pairs = matrix_block_pairs(problem, grp.size)
    if grp.size == 1:
        nx, ny = problem.nx, problem.ny
        return None, max_pairs, nx * (nx + 1) // 2 if problem.symmetric else nx * ny
    lx = problem.x_table.lengths.to(torch.long)
    ly = problem.y_table.lengths.to(torch.long)
    weights, pairs = [], []
    for a, b in problem.matrix_blocks(max_pairs):
        weights.append(int((lx[a] * ly[b]).sum()) + len(a))
        pairs.append(len(a))
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
    candidates = problem.ny - 1 if problem.same else problem.ny
    k = check_k(k, candidates, problem.same)
    if bounds_cannot_pay(problem, k):
        # the matrix's tiles shared among the ranks, each rank's k best merged
        blocks, max_pairs, total = _tile_shares(problem, grp)
        gathered = _run(grp, progress, total, "kneighbors",
                        lambda bar: knn_all_pairs(problem, k, blocks, max_pairs, bar.update), unit="pair")
        distances, indices = merge_nearest([g[:2] for g in gathered], k)
        if return_stats:
            return distances, indices, merge_stats(*[g[2] for g in gathered])
        return distances, indices
    mine, step = _row_shares(problem, block_size, grp)

    def work(bar):  # (exact values are handed on among this rank's blocks)
        return [knn_blocks(problem, mine, k, step, on_rows=bar.update)]

    total = sum(min(problem.nx, r0 + step) - r0 for r0 in mine)
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
    mine, step = _row_shares(problem, block_size, grp)

    def work(bar):
        return [radius_blocks(problem, mine, radius, step, on_rows=bar.update)]

    total = sum(min(problem.nx, r0 + step) - r0 for r0 in mine)
    gathered = [p for rank_parts in _run(grp, progress, total, "radius_neighbors", work)
                for p in rank_parts]
    if gathered:
        r, c, v = (torch.cat([g[i] for g in gathered]) for i in range(3))
    else:
        r = c = torch.zeros(0, dtype=torch.long)
        v = torch.zeros(0, dtype=torch.float64)
    order = torch.argsort(r * max(problem.ny, 1) + c)
    out = (r[order], c[order], v[order])
    if return_stats:
        return (*out, merge_stats(*[g[3] for g in gathered]))
    return out

