"""Searches that compute every entry: the matrix's own tiles one by one (its bits and its
work), each row keeping its ``k`` best (:func:`knn_all_pairs`) or the entries within a radius
(:func:`radius_all_pairs`), in memory of one tile. For problems where no bound pays, and shared
among ranks by tile.
"""
from __future__ import annotations

import math
from typing import Collection, Optional, Tuple

import torch

from .._memory import release_freed_memory
from ..ops.pairwise import rows_weight
from .arguments import BLOCK_CELLS
from .merge import NO_INDEX, concat_entries, merge_block, merge_matrix, with_partners
from .problem import SearchProblem, new_stats

__all__ = ["BLOCKS_PER_PART", "WINDOW_PAIRS", "matrix_block_pairs", "exact_is_cheapest", "knn_all_pairs",
           "radius_all_pairs", "radius_tiles", "uses_length_windows", "LengthWindow", "length_windows"]

#: Kernel pairs of a length window at most (:func:`length_windows`), and a window grows by a row
#: only while its rectangle holds at most _WINDOW_SLACK times the pairs its rows need, plus
#: _WINDOW_BASE: narrower windows follow the rows' lengths closer and make more calls (SST
#: sentences at radius 7, 2 threads: 8,000 in windows of up to 4M pairs 0.38-0.49 s, 1M
#: 0.31-0.33 s, 256k 0.36-0.38 s; 2,000 in windows of up to 1M 0.042 s, with the slack 0.026 s).
WINDOW_PAIRS = 1 << 20
_WINDOW_SLACK = 1.25
_WINDOW_BASE = 1 << 16

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


class LengthWindow:
    """A tile of a range search over sequences whose exact distances run on bit vectors under
    unit costs (:attr:`SearchProblem.dense_unit`), where a pair's distance is at least the
    difference of its lengths: consecutive rows of X sorted by length (sorted positions ``r0 ..
    r1 - 1``, objects ``x_rows``) against the columns of Y sorted by length (positions ``c0 .. c1
    - 1``, objects ``y_cols``) within the radius of some row's length; with ``triangle`` (a
    symmetric problem, X sorted as Y, ``c0 = r0``) the pairs of positions ``i <= j``. The
    entries its rows own that lie outside it differ in length by more than the radius.
    ``entries``: the entries of its rows (a symmetric problem's ``i < j``, both ways)."""

    def __init__(self, x_rows, y_cols, positions, triangle: bool, entries: int):
        self.x_rows, self.y_cols, self.triangle, self.entries = x_rows, y_cols, triangle, entries
        self.r0, self.r1, self.c0, self.c1 = positions

    @property
    def pairs(self) -> int:
        """Its kernel pairs (row ``k`` of a triangle against the columns from ``k`` on)."""
        h, w = self.r1 - self.r0, self.c1 - self.c0
        return h * w - (h * (h - 1) // 2 if self.triangle else 0)

    def weight(self, x_sizes: torch.Tensor, y_sizes: torch.Tensor) -> Tuple[int, int]:
        """``(pairs, cells)``: its kernel pairs and the sum of ``x_sizes[i] y_sizes[j]`` over
        them (sizes indexed by object, as for :meth:`~bedl_torch.ops.pairwise.MatrixBlock.weight`)."""
        return rows_weight(x_sizes[self.x_rows], y_sizes[self.y_cols], self.triangle)

    def diagonal(self, same: bool) -> int:
        """How many of its pairs are an object against itself (``same``: X is Y)."""
        return max(0, min(self.r1, self.c1) - max(self.r0, self.c0)) if same else 0


def length_windows(problem: SearchProblem, radius: float, max_pairs: int = BLOCK_CELLS):
    """The :class:`LengthWindow` tiles of a range search at a finite ``radius``, each of
    ``max_pairs`` (and :data:`WINDOW_PAIRS`) kernel pairs at most, or one row, covering every
    pair whose lengths differ by at most ``radius`` (none where ``radius`` is negative, which no
    unit-cost distance is; any radius, e.g. ``1e300``)."""
    lx, ly = problem.x_table.lengths, problem.y_table.lengths
    px = torch.argsort(lx, stable=True)
    py = px if problem.symmetric else torch.argsort(ly, stable=True)
    nx, ny = problem.nx, problem.ny
    if radius < 0:  # (no distance is below 0: one window of every row and no pair)
        entries = nx * (nx - 1) if problem.symmetric else nx * (ny - 1 if problem.same else ny)
        return [LengthWindow(px, py[:0], (0, nx, 0, 0), False, entries)]
    max_pairs = min(max_pairs, WINDOW_PAIRS)
    sx, sy = lx[px], ly[py]
    # (lengths differ by an integer, by at most the longest length)
    apart = math.floor(min(radius, int(lx.max()) + int(ly.max())))
    lo = torch.searchsorted(sy, sx - apart, right=False).tolist()  # a row's first column in reach
    hi = torch.searchsorted(sy, sx + apart, right=True).tolist()  # past its last
    windows, i = [], 0
    while i < nx:
        c0 = i if problem.symmetric else lo[i]
        j, needed = i + 1, hi[i] - c0
        while j < nx:
            grown = needed + hi[j] - (j if problem.symmetric else lo[j])
            rect = (j + 1 - i) * (hi[j] - c0)
            if rect > max_pairs or rect > _WINDOW_SLACK * grown + _WINDOW_BASE:
                break
            needed, j = grown, j + 1
        c1 = max(c0, hi[j - 1])
        if problem.symmetric:  # (position p owns the entries p < q, both ways)
            entries = 2 * ((j - i) * (nx - 1) - (i + j - 1) * (j - i) // 2)
        else:
            entries = (j - i) * (ny - 1 if problem.same else ny)
        windows.append(LengthWindow(px[i:j], py[c0:c1], (i, j, c0, c1), problem.symmetric, entries))
        i = j
    return windows


def radius_tiles(problem: SearchProblem, radius: float, max_pairs: int = BLOCK_CELLS):
    """The tiles :func:`radius_all_pairs` computes, numbered as its ``blocks`` count them:
    :func:`length_windows` where the problem's exact distances are unit-cost bit vectors,
    ``radius`` is finite and the label bound in use, the matrix's blocks otherwise."""
    if uses_length_windows(problem, radius):
        return length_windows(problem, radius, max_pairs)
    return problem.matrix_blocks(max_pairs)


def uses_length_windows(problem: SearchProblem, radius: float) -> bool:
    """Whether :func:`radius_all_pairs` computes :func:`length_windows`: exact distances of
    unit-cost sequences on bit vectors, a finite radius, and the label bound in use (which
    implies the lengths' difference)."""
    return problem.dense_unit and problem.has_label and math.isfinite(radius)


def radius_all_pairs(problem: SearchProblem, radius: float, blocks: Optional[Collection[int]] = None,
                     max_pairs: int = BLOCK_CELLS, on_pairs=None):
    """Every entry within ``radius`` from the matrix's own tiles (its bits and its work, as
    :func:`knn_all_pairs`; ``blocks``, ``max_pairs`` and ``on_pairs`` likewise, ``blocks``
    numbering :func:`radius_tiles`), for problems where no bound pays
    (:func:`exact_is_cheapest`); for unit-cost sequences on bit vectors, with the label bound,
    only the pairs of lengths within ``radius`` (:func:`length_windows`). Returns ``(rows, cols, distances,
    stats)``, unsorted; a symmetric problem's entries listed both ways, no diagonal where
    ``Y=None``."""
    if uses_length_windows(problem, radius):
        return _radius_length_windows(problem, radius, blocks, max_pairs, on_pairs)
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



def _radius_length_windows(problem: SearchProblem, radius: float, blocks: Optional[Collection[int]],
                           max_pairs: int, on_pairs):
    """:func:`radius_all_pairs` over :func:`length_windows`: the entries outside the windows
    count as decided by the label bound (which implies the lengths' difference)."""
    stats = new_stats()
    found = []
    both_ways = 2 if problem.symmetric else 1
    for number, window in enumerate(length_windows(problem, radius, max_pairs)):
        if blocks is not None and number not in blocks:
            continue
        pairs = window.pairs
        if on_pairs is not None:
            on_pairs(pairs)
        computed = pairs - window.diagonal(problem.same)
        stats["pairs"] += window.entries
        stats["exact_computed"] += computed
        stats["exact"] += both_ways * computed
        stats["decided_by_label"] += window.entries - both_ways * computed
        if pairs == 0:
            continue
        M = problem.window_matrix(window)
        ri, ci = torch.nonzero(M <= radius, as_tuple=True)
        r, c, v = window.x_rows[ri], window.y_cols[ci], M[ri, ci]
        if problem.same:
            off = r != c
            r, c, v = r[off], c[off], v[off]
        found.append(with_partners(problem.symmetric, r, c, v))
        release_freed_memory()
    return (*concat_entries(found), stats)
