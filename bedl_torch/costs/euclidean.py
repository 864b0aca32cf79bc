"""Euclidean edit costs from a learnable symbol embedding, and its simplex initialisation."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ..validation import check_cost_dtype, check_cost_tensor, check_device, check_real_tensor
from .base import SymbolCost

__all__ = ["EuclideanCost", "simplex_embedding"]


def simplex_embedding(num_symbols: int, dtype=None, device=None) -> torch.Tensor:
    """Vertices of a regular simplex with side 1 whose last vertex is the origin.

    Returns ``(num_symbols, num_symbols)`` coordinates (``dtype``, default torch's default
    dtype, on ``device``; computed in float64): every row has norm 1 and every two rows have
    distance 1, so with the gap at the origin every replacement of distinct symbols, deletion
    and insertion costs exactly 1, the unit costs BEDL starts from.

    Raises:
        ValueError: ``num_symbols < 0``.
    """
    if num_symbols < 0:
        raise ValueError("num_symbols must be >= 0")
    dtype = dtype or torch.get_default_dtype()
    # The Gram matrix of (e_k - e_gap) / sqrt(2) is (I + 1 1^T) / 2; its Cholesky
    # factor gives coordinates in R^U.
    gram = (torch.eye(num_symbols, dtype=torch.float64) + 1.0) / 2.0
    if num_symbols == 0:
        return torch.zeros(0, 0, dtype=dtype, device=device)
    # The Cholesky factor is column-major; optimisers such as LBFGS view
    # parameters and gradients flat, so hand back a contiguous tensor.
    coords = torch.linalg.cholesky(gram)
    return coords.to(dtype=dtype, device=device).contiguous()


class EuclideanCost(SymbolCost):
    """Edit costs from a learnable symbol embedding: ``c(x, y) = ||a(x) - a(y)||``.

    The gap sits at the origin, so ``c(x, -) = c(-, x) = ||a(x)||``. Whatever the
    embedding, the costs are a pseudo-metric and so is the tree edit distance.

    Args:
        alphabet: the symbols; row ``k`` of ``embedding`` belongs to ``alphabet[k]``.
        embedding: initial ``(len(alphabet), dim)`` floating-point vectors (copied); default
            the regular simplex with side 1 (every initial cost between different symbols or
            a symbol and the gap is 1), in ``dim = len(alphabet)`` dimensions.
        dtype, device: of the default embedding, or to convert a given one to.

    Attributes:
        embedding (nn.Parameter): ``(len(alphabet), dim)``.

    Raises:
        ValueError: an embedding of the wrong shape. TypeError: a non-floating embedding.

    Gradients are NaN-free: where two vectors coincide (or a vector sits at the
    origin) the zero subgradient of the norm is used.
    """

    symmetric = True
    #: Alphabets up to this size (plus the gap) use a (U+1) x (U+1) symbol cost table and
    #: gather from it; larger ones compute per pair and never build that table.
    table_limit = 2048

    def __init__(self, alphabet, embedding: Optional[torch.Tensor] = None, dtype=None, device=None):
        super().__init__(alphabet)
        if dtype is not None:
            check_cost_dtype(dtype, "dtype")
        device = check_device(device)
        if embedding is None:
            embedding = simplex_embedding(len(self.alphabet), dtype=dtype, device=device)
        else:
            if not isinstance(embedding, torch.Tensor):
                embedding = torch.as_tensor(embedding)
            check_real_tensor(embedding, "embedding")
            if embedding.dim() != 2 or embedding.shape[0] != len(self.alphabet):
                raise ValueError(
                    f"embedding must be 2-D (len(alphabet), dim) = ({len(self.alphabet)}, dim), "
                    f"got shape {tuple(embedding.shape)}"
                )
            if not embedding.is_floating_point():
                raise TypeError(f"embedding must be floating point, got {embedding.dtype}")
            embedding = embedding.detach().clone().to(dtype=dtype or embedding.dtype, device=device)
        check_cost_tensor(embedding, "embedding")
        self.embedding = nn.Parameter(embedding)

    def vectors(self) -> torch.Tensor:
        """The embedding with the gap (origin) appended as the last row: ``(U + 1, dim)``."""
        e = self.embedding
        return torch.cat([e, e.new_zeros(1, e.shape[1])], dim=0)

    def symbol_costs(self) -> torch.Tensor:
        """The full ``(U + 1, U + 1)`` cost table (gap last), differentiable in the embedding;
        for small alphabets (it is a dense matrix)."""
        v = self.vectors()
        return _euclidean(v[None], v[None])[0]

    def symbol_table(self) -> Optional[torch.Tensor]:
        """:meth:`symbol_costs` up to :attr:`table_limit` symbols, else ``None``."""
        if len(self.alphabet) + 1 <= self.table_limit:
            return self.symbol_costs()
        return None

    def symbol_block(self, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """Costs ``(len(rows), len(cols))`` between two vectors of symbol indices (as
        :meth:`forward`, within rounding): ``sqrt(|a|^2 + |b|^2 - 2 a.b)`` from one matrix
        product, except where that formula cancels (``|a - b|^2`` below 1/16 of
        ``|a|^2 + |b|^2``, equal symbols included): there the direct distance of
        :meth:`forward`, with its zero subgradient at 0. Elsewhere the relative error is a
        few units of rounding times the dimension's accumulation."""
        dev = self.embedding.device
        v = self.vectors()
        a, b = v[rows.to(dev)], v[cols.to(dev)]
        na, nb = (a * a).sum(1), (b * b).sum(1)
        scale = na[:, None] + nb[None, :]
        sq = scale - 2.0 * (a @ b.T)
        near = sq < scale * 0.0625
        out = torch.sqrt(torch.where(near, torch.ones_like(sq), sq))
        i, j = torch.nonzero(near, as_tuple=True)
        if len(i):
            exact = _euclidean(a[i][:, None], b[j][:, None]).reshape(-1)
            out = out.index_put((i, j), exact)
        return out

    def forward(self, x_idx: torch.Tensor, y_idx: torch.Tensor) -> torch.Tensor:
        """Costs ``(B, M, N)`` on the embedding's device and dtype for int64 indices
        ``x_idx (B, M)`` and ``y_idx (B, N)`` (gap = ``len(alphabet)``, any device)."""
        dev = self.embedding.device
        x_idx = x_idx.to(dev)
        y_idx = y_idx.to(dev)
        if len(self.alphabet) + 1 <= self.table_limit:
            table = self.symbol_costs()
            return table[x_idx[:, :, None], y_idx[:, None, :]]
        v = self.vectors()
        return _euclidean(v[x_idx], v[y_idx])


def _euclidean(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # The non-matmul path computes distances of equal vectors as exactly 0 (the
    # matmul path leaves rounding noise that breaks exact ties) and its backward
    # uses the zero subgradient at 0.
    return torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")
