"""The numpy evaluators of the default :class:`~bedl_torch.costs.EuclideanCost` on the CPU
(see :func:`numpy_path_applies`): pseudo mode in closed form, exact and soft mode with numpy
around the edit distances. The problems are small and torch's per-operation dispatch would
dominate.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np
import torch

from ..costs import EuclideanCost, SymbolCost
from ..ops import PairBatch, SymbolTableKernels, default_rel_tol
from .losses import (
    frobenius_regularizer_and_grad_numpy,
    glvq_loss_and_grad_numpy,
    logdet_regularizer_and_grad_numpy,
)
from .objective_base import LossTerms, MetricObjective, PrototypePairs, regularized_matrix

__all__ = ["numpy_path_applies", "NumpyEuclideanBase", "NumpyEuclideanObjective", "TableCost",
           "NumpyEuclideanExactObjective"]


def numpy_path_applies(cost: SymbolCost, params: Sequence[torch.Tensor]) -> bool:
    """Whether :class:`NumpyEuclideanObjective` computes this module's costs: an
    :class:`EuclideanCost` exactly (subclasses may change the costs), float32 or float64 on the
    CPU, whose only learned parameter is the embedding."""
    emb = getattr(cost, "embedding", None)
    return (
        type(cost) is EuclideanCost
        and emb.device.type == "cpu"
        and emb.dtype in (torch.float64, torch.float32)
        and len(params) == 1
        and params[0] is emb
        and regularized_matrix(cost) is emb
    )


class NumpyEuclideanBase(MetricObjective):
    """What the numpy evaluators for the default :class:`EuclideanCost` on the CPU share (see
    :func:`numpy_path_applies`): the cost table ``||v_a - v_b||`` from the embedding, the chain
    rule from a gradient on that table to the embedding (with the zero subgradient where two
    vectors coincide), the regularisers in numpy closed form, and the flat interface of the
    solver without torch. Subclasses give the GLVQ loss and its gradient on the table
    (:meth:`glvq_and_table_grad`)."""

    def __init__(self, cost: EuclideanCost, loss: LossTerms):
        super().__init__([cost.embedding])
        self.n_sym = cost.gap_index + 1
        self.emb = cost.embedding
        self.A = self.emb.detach().numpy()  # a view: the solver's points are written into it
        self.loss = loss
        reg = loss.active_regularizer
        self.logdet = reg in ("logdet", "both") and min(self.A.shape) > 0
        self.frobenius = reg in ("frobenius", "both")
        # the embedding with the gap (origin) as its last row
        self.V = np.zeros((self.n_sym, self.A.shape[1]), dtype=self.A.dtype)

    def glvq_and_table_grad(self, C: np.ndarray, backward: bool
                             ) -> Tuple[float, Optional[np.ndarray]]:
        """The GLVQ loss under the cost table ``C`` and, with ``backward``, its gradient with
        respect to the entries of ``C`` (``(U+1, U+1)``, a new array)."""
        raise NotImplementedError

    def evaluate(self, backward: bool) -> torch.Tensor:
        loss, grad = self._loss_and_grad(backward)
        if backward:
            self.emb.grad = torch.from_numpy(grad)
        return torch.tensor(loss, dtype=self.emb.dtype)

    def flat_value_and_grad(self, x: np.ndarray) -> Tuple[float, np.ndarray]:
        """:meth:`MetricObjective.flat_value_and_grad` in numpy: ``x`` is written into the
        embedding's memory, the gradient comes back as a numpy array."""
        self.A[...] = x.reshape(self.A.shape)
        loss, grad = self._loss_and_grad(True)
        self.n_evals += 1
        return loss, grad.reshape(-1)

    def _loss_and_grad(self, backward: bool) -> Tuple[float, Optional[np.ndarray]]:
        """The loss (a float, rounded to the embedding's dtype as a tensor of it would be)
        and, with ``backward``, its gradient (a new C-contiguous array of the embedding's
        shape and dtype)."""
        A, V = self.A, self.V
        beta = float(self.loss.beta)
        V[:-1] = A
        diff = V[:, None, :] - V[None, :, :]
        C = np.sqrt(np.einsum("abk,abk->ab", diff, diff))
        loss, G = self.glvq_and_table_grad(C, backward)
        grad = None
        if backward:
            G += G.T  # the table is symmetric: C[a, b] and C[b, a] are one function of V
            W = np.divide(G, C, out=np.zeros_like(G), where=C > 0)  # dE/dC / C
            grad = (W.sum(1)[:, None] * V - W @ V)[:-1]
        if self.logdet:
            value, g = logdet_regularizer_and_grad_numpy(A, beta, backward)
            loss += value
            if backward:
                grad += g
        if self.frobenius:
            value, g = frobenius_regularizer_and_grad_numpy(A, beta, backward)
            loss += value
            if backward:
                grad += g
        if backward:
            grad = np.ascontiguousarray(grad, dtype=A.dtype)
        return float(A.dtype.type(loss)), grad


class NumpyEuclideanObjective(NumpyEuclideanBase):
    """:class:`LinearPseudoObjective` with dense frequencies for the default
    :class:`EuclideanCost` on the CPU, entirely in numpy (see :func:`numpy_path_applies`).

    Same values and gradients: the pseudo distances ``F @ C``, the GLVQ loss with its guard
    and the regularisers (numpy closed forms of :mod:`.losses`). The embedding's gradient is
    set directly. Autograd is used only for the derivative of a callable ``phi``.

    Args:
        cost: the :class:`EuclideanCost`; its embedding is read in place (L-BFGS updates it).
        F: ``(m, P, (U+1)^2)`` symbol frequencies (:func:`symbol_frequencies`).
        pairs: the data-to-prototype pairs.
        loss: the loss terms.
    """

    def __init__(self, cost: EuclideanCost, F: torch.Tensor, pairs: PrototypePairs,
                 loss: LossTerms):
        super().__init__(cost, loss)
        self.uses_autograd = not isinstance(loss.phi, str)
        m, P, S = F.shape
        self.m, self.P = m, P
        self.F = F.cpu().numpy().astype(self.A.dtype, copy=False)
        self.F_flat = self.F.reshape(m * P, S)
        self.same = pairs.same.cpu().numpy()
        self.rows = np.concatenate([np.arange(m), np.arange(m)])
        self.F_fixed = None
        if pairs.fixed is not None:
            cols = np.concatenate([pairs.fixed[0].cpu().numpy(), pairs.fixed[1].cpu().numpy()])
            self.F_fixed = self.F[self.rows, cols]

    def glvq_and_table_grad(self, C, backward):
        m = self.m
        t = C.reshape(-1)
        if self.F_fixed is not None:
            Fs = self.F_fixed
        else:  # the gradient-free selection of the closest prototypes
            d_all = (self.F_flat @ t).reshape(m, self.P)
            kp = np.where(self.same, d_all, np.inf).argmin(1)
            km = np.where(self.same, np.inf, d_all).argmin(1)
            Fs = self.F[self.rows, np.concatenate([kp, km])]
        d = Fs @ t
        loss, g_plus, g_minus = glvq_loss_and_grad_numpy(d[:m], d[m:], self.loss.phi, backward)
        if not backward:
            return loss, None
        return loss, (np.concatenate((g_plus, g_minus)) @ Fs).reshape(self.n_sym, self.n_sym)



class TableCost(SymbolCost):
    """A cost module whose symbol table is a given ``(U+1, U+1)`` tensor (held as a buffer),
    so that the ops differentiate distances with respect to the table's entries."""

    def __init__(self, alphabet, table: torch.Tensor):
        super().__init__(alphabet)
        self.register_buffer("table", table)

    def symbol_table(self) -> torch.Tensor:
        return self.table

    def forward(self, x_idx: torch.Tensor, y_idx: torch.Tensor) -> torch.Tensor:
        dev = self.table.device
        return self.table[x_idx.to(dev)[:, :, None], y_idx.to(dev)[:, None, :]]


class NumpyEuclideanExactObjective(NumpyEuclideanBase):
    """:class:`ExactObjective` for the default :class:`EuclideanCost` on the CPU (see
    :func:`numpy_path_applies`): the cost table, the GLVQ loss, the regularisers and the chain
    rule to the embedding in numpy. Same values and gradients as :class:`ExactObjective` up to
    rounding.

    Exact mode calls the symbol-table kernels directly (:class:`~bedl_torch.ops.SymbolTableKernels`,
    arguments built once per selection of prototypes): the distances, then the gradient kernel
    with the GLVQ loss's derivatives as pair weights, which is what autograd through
    :meth:`PairBatch.distances` computes, without its per-call checks and graph. Soft mode runs
    autograd through the soft distances, from their cost table (a leaf) to the gradient on it.

    Args: as :class:`ExactObjective`, without ``params`` (the embedding is the parameter).
    """

    def __init__(self, cost: EuclideanCost, full: PairBatch, prototypes: torch.Tensor,
                 pairs: PrototypePairs, loss: LossTerms, unknown: str,
                 distance_kw: Optional[dict] = None):
        super().__init__(cost, loss)
        self.distance_kw = dict(distance_kw or {})
        self.m, self.P = pairs.shape
        self.full, self.prototypes, self.pairs, self.unknown = full, prototypes, pairs, unknown
        self.same = pairs.same.cpu().numpy()
        self.table = torch.zeros(self.n_sym, self.n_sym, dtype=self.emb.dtype,
                                 requires_grad=True)
        self.table_cost = TableCost(cost.alphabet, self.table)
        # the same memory without autograd: distances alone (the kernels then skip the
        # co-optimal matrices a gradient needs)
        self.value_cost = TableCost(cost.alphabet, self.table.detach())
        self.arange_m = torch.arange(self.m)
        self._batch_key = self._batch = None
        # exact mode: the kernels on prebuilt arguments (the soft mode's go through autograd)
        self.direct = not self.distance_kw
        if self.direct:
            self.rel_tol = default_rel_tol(self.emb.dtype)
            self._kernels_key = self._kernels = None
            self.rows = np.concatenate((np.arange(self.m), np.arange(self.m)))
            if pairs.fixed is None:
                self.full_kernels = SymbolTableKernels(full, self.value_cost, unknown)
            else:  # the selected pairs never change
                self.full_kernels = None
                self._selected_kernels(self._selection())

    def _distances(self, batch: PairBatch, grad: bool = False) -> torch.Tensor:
        cost = self.table_cost if grad else self.value_cost
        return batch.distances(cost, unknown=self.unknown, **self.distance_kw)

    def _selection(self) -> torch.Tensor:
        """Every point's closest correct prototype, then every point's closest wrong one
        (indices into ``prototypes``) under ``self.table``, without gradient, unless the
        selection is fixed."""
        if self.pairs.fixed is None:
            return self._closest(self._distances(self.full).numpy().reshape(self.m, self.P))
        return torch.cat(self.pairs.fixed)

    def _closest(self, d_all: np.ndarray) -> torch.Tensor:
        """:meth:`_selection` from the distances ``(m, P)`` of all pairs."""
        return torch.from_numpy(np.concatenate((np.where(self.same, d_all, np.inf).argmin(1),
                                                np.where(self.same, np.inf, d_all).argmin(1))))

    def _selected_batch(self, ks: torch.Tensor) -> PairBatch:
        """The batch of the points paired with the prototypes ``ks`` (reused while they stay)."""
        key = ks.numpy().tobytes()
        if key != self._batch_key:
            self._batch = PairBatch.from_tables(
                self.full.x_table, self.full.y_table, torch.cat([self.arange_m, self.arange_m]),
                self.prototypes[ks])
            self._batch_key = key
        return self._batch

    def _selected_kernels(self, ks: torch.Tensor) -> SymbolTableKernels:
        """The kernels on the batch of :meth:`_selected_batch` (reused while it stays)."""
        key = ks.numpy().tobytes()
        if key != self._kernels_key:
            self._kernels = SymbolTableKernels(self._selected_batch(ks), self.value_cost,
                                               self.unknown)
            self._kernels_key = key
        return self._kernels

    def glvq_and_table_grad(self, C, backward):
        if self.direct:
            return self._direct_glvq_and_table_grad(C, backward)
        m = self.m
        with torch.no_grad():
            self.table.copy_(torch.from_numpy(C))
        batch = self._selected_batch(self._selection())
        if not backward:
            d = self._distances(batch).numpy()
            return glvq_loss_and_grad_numpy(d[:m], d[m:], self.loss.phi, False)[0], None
        with torch.enable_grad():
            d = self._distances(batch, grad=True)
            dn = d.detach().numpy()
            loss, g_plus, g_minus = glvq_loss_and_grad_numpy(dn[:m], dn[m:], self.loss.phi)
            # (d * w).sum()'s gradient is that of d weighted by w, the same bits (backward_with)
            w = torch.from_numpy(np.concatenate((g_plus, g_minus)))
            (G,) = torch.autograd.grad((d * w).sum(), self.table)
        return loss, G.numpy().astype(C.dtype, copy=True)

    def _direct_glvq_and_table_grad(self, C, backward):
        """Exact mode: the distances and their weighted gradient from the kernels."""
        m, tol = self.m, self.rel_tol
        table = torch.from_numpy(C)
        sums = None
        if self.full_kernels is None:
            kernels = self._kernels
            if backward:  # the gradient's per-pair lists in the same pass (same bits as weighted_grad)
                d, sums = kernels.distances_with_sums(table, tol)
                d = d.numpy()
            else:
                d = kernels.distances(table, tol).numpy()
        else:  # the selected distances are among all pairs' (each pair's kernel run is its own)
            d_all = self.full_kernels.distances(table, tol).numpy().reshape(self.m, self.P)
            ks = self._closest(d_all)
            kernels = self._selected_kernels(ks)
            d = d_all[self.rows, ks.numpy()]
        loss, g_plus, g_minus = glvq_loss_and_grad_numpy(d[:m], d[m:], self.loss.phi, backward)
        if not backward:
            return loss, None
        weights = torch.from_numpy(np.concatenate((g_plus, g_minus)).astype(C.dtype, copy=False))
        if sums is not None:
            G = kernels.grad_from_sums(sums, weights, C.shape)
        else:
            G = kernels.weighted_grad(table, weights, tol)
        return loss, G.numpy().astype(C.dtype, copy=True)


