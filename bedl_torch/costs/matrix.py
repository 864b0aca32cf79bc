"""A fixed symbol cost table as a cost module (the costs GESL learns)."""
from __future__ import annotations

import numpy as np
import torch

from ..validation import check_cost_tensor, check_real_tensor
from .base import SymbolCost

__all__ = ["MatrixCost"]


class MatrixCost(SymbolCost):
    """A fixed symbol cost table: ``C[a, b]`` replaces ``a`` by ``b``, ``C[a, U]`` deletes ``a``,
    ``C[U, b]`` inserts ``b`` (``U = len(alphabet)``, the gap).

    Args:
        alphabet: the symbols.
        matrix: ``(U + 1, U + 1)`` costs (tensor or array-like), copied into a buffer (not a
            parameter: nothing is learned through it).
        dtype: of the buffer (default float64).

    ``symmetric`` is set when the matrix equals its transpose. The device is the matrix's
    (move the module with ``.to()``).

    Raises:
        ValueError: a matrix of the wrong shape.
    """

    def __init__(self, alphabet, matrix, dtype=None):
        super().__init__(alphabet)
        m = torch.as_tensor(np.asarray(matrix) if not isinstance(matrix, torch.Tensor) else matrix)
        check_real_tensor(m, "matrix")
        m = m.detach().clone().to(dtype or torch.float64)
        check_cost_tensor(m, "matrix")
        S = len(self.alphabet) + 1
        if m.shape != (S, S):
            raise ValueError(f"matrix must be ({S}, {S}) for {S - 1} symbols plus the gap, "
                             f"got {tuple(m.shape)}")
        self.register_buffer("matrix", m)
        self.symmetric = bool(torch.equal(m, m.T))

    @property
    def dtype(self):
        """Dtype of the matrix."""
        return self.matrix.dtype

    @property
    def device(self):
        """Device of the matrix."""
        return self.matrix.device

    def forward(self, x_idx, y_idx):
        """Costs ``(B, M, N)`` gathered from the matrix for int64 indices ``x_idx (B, M)`` and
        ``y_idx (B, N)``."""
        x_idx = x_idx.to(self.matrix.device)
        y_idx = y_idx.to(self.matrix.device)
        return self.matrix[x_idx[:, :, None], y_idx[:, None, :]]
