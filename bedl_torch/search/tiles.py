"""Searches that compute every entry: the matrix's own tiles one by one (its bits and its
work), each row keeping its ``k`` best (:func:`knn_all_pairs`) or the entries within a radius
(:func:`radius_all_pairs`), in memory of one tile. For problems where no bound pays, and shared
among ranks by tile.
"""
from __future__ import annotations

import math
from typing import Collection, Optional

import torch

from .._memory import release_freed_memory
from .arguments import BLOCK_CELLS
from .merge import NO_INDEX, concat_entries, merge_block, merge_matrix, with_partners
from .problem import SearchProblem, new_stats

__all__ = ["BLOCKS_PER_PART", "matrix_block_pairs", "exact_is_cheapest", "knn_all_pairs",
           "radius_all_pairs"]

#: Where parts (ranks) share the tiles of :func:`knn_all_pairs`, they are cut so that each part
#: gets about this many: enough to balance tiles of unequal cost.
BLOCKS_PER_PART = 4


def matrix_block_pairs(problem: SearchProblem, parts: int = 1) -> int:
    """Kernel pairs per block of :func:`knn_all_pairs` where its blocks are shared among
    ``parts`` parts (ranks): about 4M, cut so that each part gets about :data:`BLOCKS_PER_PART`
    blocks to balance."""
    if parts <= 1:
        return BLOCK_CELLS
    nx, ny = problem.nx, problem.ny
    total = nx * (nx + 1) // 2 if problem.symmetric else nx * ny
    return max(1, min(BLOCK_CELLS, -(-total // (BLOCKS_PER_PART * parts))))


def exact_is_cheapest(problem: SearchProblem) -> bool:
    """Whether no bound can pay for itself: the problem has no lower bound, or an exact
    distance costs about what a bound does (:attr:`SearchProblem.cheap_exact`). Then a search
    computes the matrix's tiles (:func:`knn_all_pairs`, :func:`radius_all_pairs`)."""
    return (not problem.has_label and problem.traversal is None) or problem.cheap_exact


def knn_all_pairs(problem: SearchProblem, k: int, blocks: Optional[Collection[int]] = None,
                  max_pairs: int = BLOCK_CELLS, on_pairs=None):
    """Every entry exactly, block by block of the matrix's own tiles (its bits, and its work:
    half the matrix where symmetric), each value merged into the running ``k`` best of its row
    and of its partner row, in ``O(len(X) k)`` memory beside one block. The blocks are
    :meth:`SearchProblem.matrix_blocks` ``(max_pairs)``; ``blocks`` (optional) the numbers of
    those to compute (one rank's part: the entries and stats of all parts together are the
    whole's, see :func:`~bedl_torch.search.merge.merge_nearest`); ``on_pairs(m)`` (optional) is
    told the kernel pairs of each block done. Returns ``(distances, indices, stats)``: rows that got fewer than ``k``
    entries in this part are padded with ``inf`` and index ``2**63 - 1``."""
    nx = problem.nx
    best_d = torch.full((nx, k), math.inf, dtype=torch.float64)
    best_i = torch.full((nx, k), NO_INDEX, dtype=torch.int64)
    stats = new_stats()
    for tile in exact_tiles(problem, blocks, max_pairs, on_pairs, stats):
        # (the diagonal keeps each tile's objects in the call; not an entry: dropped in the merge)
        if tile[0] == "matrix":
            merge_matrix(best_d, best_i, *tile[1:], problem.symmetric, problem.same)
        else:
            merge_block(best_d, best_i, *tile[1:], problem.symmetric, problem.same)
    return best_d, best_i, stats


def exact_tiles(problem: SearchProblem, blocks: Optional[Collection[int]], max_pairs: int, on_pairs,
                stats: dict):
    """The matrix's tiles (:meth:`SearchProblem.matrix_blocks` ``(max_pairs)``, those numbered in
    ``blocks`` where given) one by one: yields each tile as ``("pairs", a, b, values)`` or, where
    :meth:`SearchProblem.block_matrix` computes it dense, ``("matrix", M, r0, c0)``, counting its
    pairs in ``stats`` (the diagonal of a tile of ``Y=None`` is computed, not an entry) and
    telling ``on_pairs`` (optional) the kernel pairs of each."""
    for number, block in enumerate(problem.matrix_blocks(max_pairs)):
        if blocks is not None and number not in blocks:
            continue
        M = problem.block_matrix(block)
        if M is not None:
            r0 = block.rows[0]
            c0 = r0 if block.triangle else 0
            h, w = M.shape
            pairs = h * w - (h * (h - 1) // 2 if block.triangle else 0)  # (row i: the columns from i)
            diagonal = h if problem.same else 0  # (every row's own column is in the block)
            tile = ("matrix", M, r0, c0)
        else:
            a, b = block.pairs()
            v = problem.block_values(a, b)
            pairs, diagonal = len(a), (int((a == b).sum()) if problem.same else 0)
            tile = ("pairs", a, b, v)
        if on_pairs is not None:
            on_pairs(pairs)
        computed = pairs - diagonal
        stats["exact_computed"] += computed
        entries = 2 * computed if problem.symmetric else computed
        stats["pairs"] += entries
        stats["exact"] += entries
        yield tile
        release_freed_memory()


def radius_all_pairs(problem: SearchProblem, radius: float, blocks: Optional[Collection[int]] = None,
                     max_pairs: int = BLOCK_CELLS, on_pairs=None):
    """Every entry within ``radius`` from the matrix's own tiles (its bits and its work, as
    :func:`knn_all_pairs`; ``blocks``, ``max_pairs`` and ``on_pairs`` likewise), for problems
    where no bound pays (:func:`exact_is_cheapest`). Returns ``(rows, cols, distances, stats)``,
    unsorted; a symmetric problem's entries listed both ways, no diagonal where ``Y=None``."""
    stats = new_stats()
    found = []
    for tile in exact_tiles(problem, blocks, max_pairs, on_pairs, stats):
        if tile[0] == "matrix":
            M, r0, c0 = tile[1:]
            within = M <= radius
            if radius == math.inf:  # (+inf: not an entry; distances are finite)
                within &= torch.isfinite(M)
            ri, ci = torch.nonzero(within, as_tuple=True)
            r, c, v = ri + r0, ci + c0, M[ri, ci]
        else:
            a, b, v = tile[1:]
            within = torch.nonzero(v <= radius).squeeze(1)  # (few: the diagonal tested on those alone)
            r, c, v = a[within], b[within], v[within]
        if problem.same:
            off = r != c
            r, c, v = r[off], c[off], v[off]
        found.append(with_partners(problem.symmetric, r, c, v))  # (tiles of a symmetric problem hold r <= c)
    return (*concat_entries(found), stats)

