"""Tiles of a distance matrix and their assignment to the ranks of a process group."""
from __future__ import annotations

import heapq
import math
from typing import List, Sequence, Tuple

import numpy as np

__all__ = ["Tile", "plan_tiles", "assign_tiles", "balanced_shares", "check_tile_size", "default_tile_size"]

# Default tile sides. Above 1024 a tile's pair indices, values and kernel bookkeeping (50 to
# 110 MB at 1024) grow with its square; below about 100 objects the kernels' work per tree (indexing it, laying out its
# tables for the SIMD lanes), done once per tile, is shared by too few pairs.
MAX_DEFAULT_TILE = 1024
MIN_DEFAULT_TILE = 100


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
    tile_size = check_tile_size(tile_size)
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


def check_tile_size(tile_size) -> int:
    if isinstance(tile_size, bool) or not isinstance(tile_size, (int, np.integer)):
        raise TypeError(f"tile_size must be an int, got {type(tile_size).__name__}")
    if tile_size < 1:
        raise ValueError(f"tile_size must be >= 1, got {tile_size}")
    return int(tile_size)


def assign_tiles(tiles: Sequence[Tile], world_size: int) -> List[List[Tile]]:
    """Tiles per rank, balanced by their cells (:func:`balanced_shares`). Deterministic."""
    return [[tiles[t] for t in share] for share in balanced_shares([t.cells for t in tiles], world_size)]


def balanced_shares(weights: Sequence[int], world_size: int) -> List[List[int]]:
    """Indices of ``weights`` per rank: the heaviest first to the least-loaded rank (ties: the
    earlier index, the lower rank), so that every rank's load is about equal; each share in the
    order assigned (heaviest first). Deterministic."""
    order = sorted(range(len(weights)), key=lambda t: (-weights[t], t))
    loads = [(0, r) for r in range(world_size)]
    shares: List[List[int]] = [[] for _ in range(world_size)]
    for t in order:
        load, r = heapq.heappop(loads)
        shares[r].append(t)
        heapq.heappush(loads, (load + weights[t], r))
    return shares


def default_tile_size(nx: int, ny: int, world_size: int) -> int:
    """About four blocks per rank along each side (enough tiles to balance), within
    ``[100, 1024]``."""
    n = max(nx, ny, 1)
    return max(MIN_DEFAULT_TILE, min(MAX_DEFAULT_TILE, math.ceil(n / (4 * world_size))))

