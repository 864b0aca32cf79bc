"""Unit edit costs: the default when no cost module is given."""
from __future__ import annotations

from typing import Optional

import torch

from ..validation import check_cost_dtype, check_device
from .base import SymbolCost

__all__ = ["UnitCost"]


class UnitCost(SymbolCost):
    """Replacing a symbol by a different one, deleting and inserting all cost 1; no parameters.

    Args:
        alphabet: the symbols.
        dtype: of the costs (default float64, where ties are exact).
        device: of the costs (default CPU).
    """

    symmetric = True
    #: largest alphabet (plus gap) for which symbol_table() returns the whole table; larger
    #: alphabets get tables over the symbols in use (never a U x U matrix)
    table_limit = 2048

    def __init__(self, alphabet, dtype=torch.float64, device=None):
        super().__init__(alphabet)
        check_cost_dtype(dtype, "dtype")
        device = check_device(device)
        # an empty buffer carries the dtype and device (and moves with .to())
        self.register_buffer("_anchor", torch.zeros(0, dtype=dtype, device=device), persistent=False)

    @property
    def dtype(self) -> torch.dtype:
        """Dtype of the costs."""
        return self._anchor.dtype

    @property
    def device(self) -> torch.device:
        """Device of the costs."""
        return self._anchor.device

    def symbol_table(self) -> Optional[torch.Tensor]:
        """``1 - I`` of size ``(U + 1, U + 1)`` up to :attr:`table_limit` symbols, else ``None``.
        Built once per size, dtype and device and shared by later calls: read it, do not
        write into it."""
        size = len(self.alphabet) + 1
        if size > self.table_limit:
            return None
        key = (size, self._anchor.dtype, self._anchor.device)
        cached = self.__dict__.get("_table_cache")
        if cached is None or cached[0] != key:
            eye = torch.eye(size, dtype=self._anchor.dtype, device=self._anchor.device)
            cached = (key, 1.0 - eye)
            self.__dict__["_table_cache"] = cached
        return cached[1]

    def forward(self, x_idx: torch.Tensor, y_idx: torch.Tensor) -> torch.Tensor:
        """Costs ``(B, M, N)``: 0 for equal indices, else 1."""
        dev = self._anchor.device
        x_idx = x_idx.to(dev)
        y_idx = y_idx.to(dev)
        return (x_idx[:, :, None] != y_idx[:, None, :]).to(self._anchor.dtype)
