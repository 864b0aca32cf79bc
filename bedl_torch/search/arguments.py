"""The search functions' argument checks and their default block size."""
from __future__ import annotations

import math
import numbers
from typing import Optional

import numpy as np
import torch

from .problem import SearchProblem

__all__ = ["BLOCK_CELLS", "block_rows", "check_k", "check_mode", "check_radius"]

#: Pairs per block of query rows by default (a block's bound matrices are float64 and int64 of
#: this many entries), and per tile of the matrix (:func:`~bedl_torch.search.tiles.knn_all_pairs`).
BLOCK_CELLS = 1 << 22


def block_rows(problem: SearchProblem, block_size: Optional[int]) -> int:
    """Query rows per block: ``block_size``, or about 4M pairs a block."""
    if block_size is None:
        return max(1, BLOCK_CELLS // max(1, problem.ny))
    if isinstance(block_size, bool) or not isinstance(block_size, numbers.Integral) or block_size < 1:
        raise ValueError(f"block_size must be an int >= 1, got {block_size!r}")
    return int(block_size)


def check_k(k, candidates: int, same: bool) -> int:
    """``k`` as an int, between 1 and the ``candidates`` of a row (``same``: X without the
    row's own object)."""
    if isinstance(k, bool) or not isinstance(k, (numbers.Integral, np.integer)):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    k = int(k)
    if candidates < 1:
        raise ValueError("k-NN needs at least one candidate: " + (
            f"X has {candidates + 1} object(s), so none is left besides itself" if same
            else "Y is empty"))
    if not 1 <= k <= candidates:
        raise ValueError(f"k must be between 1 and {candidates} (the "
                         f"{'other objects of X' if same else 'objects of Y'}), got {k}")
    return k


def check_mode(mode):
    """Only exact distances are searched."""
    if mode != "exact":
        raise ValueError(f"mode must be 'exact' (bounds hold for exact distances; pseudo and soft "
                         f"modes are not searched), got {mode!r}")


def check_radius(radius) -> float:
    """``radius`` as a float (a real number or a one-element tensor, not NaN)."""
    if isinstance(radius, bool) or not isinstance(radius, (numbers.Real, np.floating, np.integer)):
        if isinstance(radius, torch.Tensor) and radius.numel() == 1 and not radius.is_complex():
            radius = radius.item()
        else:
            raise TypeError(f"radius must be a real number, got {type(radius).__name__}")
    radius = float(radius)
    if math.isnan(radius):
        raise ValueError("radius must not be NaN")
    return radius

