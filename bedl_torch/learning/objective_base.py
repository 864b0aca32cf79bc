"""What every evaluator of BEDL's metric step shares: the loss (:class:`LossTerms`), the
data-to-prototype pairs (:class:`PrototypePairs`) and the evaluator interface
(:class:`MetricObjective`). The evaluators are in :mod:`.objectives` and
:mod:`.numpy_objectives`; :mod:`.training` chooses and builds them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np
import torch

from ..costs import SymbolCost
from .losses import (
    PhiLike,
    frobenius_regularizer,
    glvq_loss,
    glvq_loss_and_grad_numpy,
    logdet_regularizer,
)

__all__ = ["LossTerms", "PrototypePairs", "MetricObjective", "regularized_matrix", "backward_with"]


def backward_with(tensors: Sequence[torch.Tensor], grads: Sequence[torch.Tensor]) -> None:
    """``torch.autograd.backward(tensors, grads)`` through the scalar ``sum_k (t_k g_k).sum()``:
    its gradient in ``t_k`` is ``1.0 * g_k``, the same bits. (Explicit gradients make torch
    import sympy on their first use, 0.3-0.5 s a process: a third of a small fit.)"""
    total = None
    for t, g in zip(tensors, grads):
        term = (t * g.detach()).sum()
        total = term if total is None else total + term
    if total is not None:
        total.backward()


def regularized_matrix(cost: SymbolCost) -> Optional[torch.Tensor]:
    """The matrix the regularisers act on: ``cost.regularization_matrix()`` if the module
    defines it, else its 2-D ``embedding`` parameter, else ``None`` (no regularisation)."""
    fn = getattr(cost, "regularization_matrix", None)
    if callable(fn):
        return fn()
    emb = getattr(cost, "embedding", None)
    if isinstance(emb, torch.Tensor) and emb.dim() == 2:
        return emb
    return None


@dataclass(frozen=True)
class LossTerms:
    """BEDL's loss: ``sum_i phi(mu_i)`` plus ``beta`` times the regulariser(s).

    ``regularizer``: ``"logdet"``, ``"frobenius"``, ``"both"`` or ``None``; with ``beta == 0``
    no regulariser is evaluated at all.
    """

    phi: PhiLike = "log4"
    regularizer: Optional[str] = "both"
    beta: float = 0.05

    @property
    def active_regularizer(self) -> Optional[str]:
        """``regularizer``, or ``None`` when ``beta == 0``."""
        return self.regularizer if self.beta > 0 else None

    def __call__(self, d_plus: torch.Tensor, d_minus: torch.Tensor,
                 cost: SymbolCost) -> torch.Tensor:
        """The loss (0-dim tensor, differentiable by autograd) for the distances ``(m,)`` to the
        closest correct and wrong prototypes and the cost module's regularised matrix."""
        loss = glvq_loss(d_plus, d_minus, self.phi)
        if self.active_regularizer is not None:
            A = regularized_matrix(cost)
            if A is not None:
                if self.regularizer in ("logdet", "both"):
                    loss = loss + logdet_regularizer(A, self.beta)
                if self.regularizer in ("frobenius", "both"):
                    loss = loss + frobenius_regularizer(A, self.beta)
        return loss

    def on_matrix(self, D: np.ndarray, prototypes: np.ndarray, y_idx: np.ndarray,
                  cost: SymbolCost, columns: Optional[np.ndarray] = None) -> float:
        """The loss from a matrix ``D`` ``(m, m)`` of actual distances between the training
        points (labels ``y_idx``) and the prototype indices, without gradient (numpy for the
        GLVQ part: a few tiny operations per round). ``columns``: the column of ``D`` of each
        prototype where ``D`` holds only some candidates' columns (default: the indices)."""
        Dp = np.asarray(D[:, prototypes if columns is None else columns], dtype=np.float64)
        same = y_idx[:, None] == y_idx[prototypes][None, :]
        d_plus = np.where(same, Dp, np.inf).min(axis=1)
        d_minus = np.where(same, np.inf, Dp).min(axis=1)
        loss = glvq_loss_and_grad_numpy(d_plus, d_minus, self.phi, backward=False)[0]
        if self.active_regularizer is not None:
            with torch.no_grad():
                A = regularized_matrix(cost)
                if A is not None:
                    if self.regularizer in ("logdet", "both"):
                        loss += float(logdet_regularizer(A, self.beta))
                    if self.regularizer in ("frobenius", "both"):
                        loss += float(frobenius_regularizer(A, self.beta))
        return loss


class PrototypePairs:
    """The ``m * P`` data-to-prototype pairs of a metric step.

    Args:
        same: bool ``(m, P)``: prototype ``k`` has the class of training point ``i``; on the
            cost module's device.

    Attributes:
        same: as given. fixed: ``(correct, wrong)`` int64 ``(m,)`` prototype indices when
            ``P == 2`` (one correct and one wrong prototype per point, so the selection never
            changes and the gradient-free pass over all pairs is skipped), else ``None``.
        fixed_selection: ``(correct, wrong)`` as for ``fixed``, the first correct and the
            first wrong prototype of each point (computed for any ``P``).
    """

    def __init__(self, same: torch.Tensor):
        self.same = same
        self.fixed_selection = (same.to(torch.long).argmax(1), (~same).to(torch.long).argmax(1))
        self.fixed = self.fixed_selection if same.shape[1] == 2 else None

    @property
    def shape(self) -> Tuple[int, int]:
        """``(m, P)``."""
        return tuple(self.same.shape)


class MetricObjective:
    """Interface of the evaluators: the loss of a metric step as a function of ``params``.

    :meth:`value_and_grad` evaluates the loss and stores its gradient in the ``.grad`` of
    ``params`` (replacing what was there), as a ``torch.optim`` closure must;
    :meth:`value` evaluates it without gradient; :meth:`flat_value_and_grad` is the same at a
    flat numpy vector of parameters, the interface of BEDL's solver (:class:`~.lbfgs.LBFGS`).
    ``n_evals`` counts the gradient evaluations. ``uses_autograd`` is False where no
    evaluation records an autograd graph (the caller may then run the solver in inference
    mode).
    """

    uses_autograd = True

    def __init__(self, params: Sequence[torch.Tensor]):
        self.params = list(params)
        self.n_evals = 0

    def evaluate(self, backward: bool) -> torch.Tensor:
        """The loss as a 0-dim tensor; with ``backward`` also the gradients (accumulated into
        the ``.grad`` of the parameters)."""
        raise NotImplementedError

    def value_and_grad(self) -> torch.Tensor:
        """The loss (0-dim tensor), its gradient stored in the parameters' ``.grad``."""
        for p in self.params:  # (cheaper than optimizer.zero_grad())
            p.grad = None
        loss = self.evaluate(True)
        self.n_evals += 1
        return loss

    def value(self) -> torch.Tensor:
        """The loss (0-dim tensor) without gradient."""
        with torch.no_grad():
            return self.evaluate(False)

    # -- the flat interface of the solver (:class:`~.lbfgs.LBFGS`) ------------

    def flat_dtype(self) -> np.dtype:
        """The numpy dtype of the flat parameter vector (that of the concatenated parameters)."""
        dtype = self.params[0].dtype if self.params else torch.get_default_dtype()
        for p in self.params[1:]:
            dtype = torch.promote_types(dtype, p.dtype)
        return torch.empty(0, dtype=dtype).numpy().dtype

    def get_flat(self) -> np.ndarray:
        """The parameters concatenated into a new 1-D numpy array (CPU)."""
        dtype = self.flat_dtype()
        return np.concatenate([p.detach().reshape(-1).cpu().numpy().astype(dtype, copy=False)
                               for p in self.params]) if self.params else np.zeros(0, dtype)

    def set_flat(self, x: np.ndarray) -> None:
        """Write the flat vector ``x`` into the parameters (in place)."""
        offset = 0
        with torch.no_grad():
            for p in self.params:
                n = p.numel()
                p.copy_(torch.from_numpy(x[offset:offset + n]).view_as(p))
                offset += n

    def flat_value_and_grad(self, x: np.ndarray) -> Tuple[float, np.ndarray]:
        """The loss and its gradient (a new 1-D array, zeros for parameters without one) at
        the parameters ``x``, which are left in place."""
        self.set_flat(x)
        loss = float(self.value_and_grad().detach())
        grads = [p.grad.detach().reshape(-1).cpu().numpy() if p.grad is not None
                 else np.zeros(p.numel(), x.dtype) for p in self.params]
        return loss, np.concatenate(grads).astype(x.dtype, copy=False)

