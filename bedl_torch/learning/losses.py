"""GLVQ loss and the regularisers of BEDL: differentiable torch functions, their closed-form
gradients, and the same closed forms in numpy.

The torch functions accept tensors of any floating dtype and device and return tensors on the
same device; the ``*_numpy`` functions take float numpy arrays and return Python floats and
arrays (BEDL's metric step on small problems uses them, where torch's per-operation overhead
would dominate each L-BFGS evaluation). None of them has learnable state.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Tuple, Union

import numpy as np
import torch

__all__ = [
    "glvq_mu",
    "glvq_loss",
    "PHI_FUNCTIONS",
    "logdet_regularizer",
    "frobenius_regularizer",
    "gram_matrix",
    "glvq_loss_and_grad",
    "logdet_regularizer_and_grad",
    "frobenius_regularizer_and_grad",
    "glvq_loss_and_grad_numpy",
    "logdet_regularizer_and_grad_numpy",
    "frobenius_regularizer_and_grad_numpy",
    "nca_loss",
    "nca_loss_and_grad_numpy",
]


def glvq_mu(d_plus: torch.Tensor, d_minus: torch.Tensor) -> torch.Tensor:
    """Relative distance difference ``mu = (d+ - d-) / (d+ + d-)`` (elementwise).

    ``mu`` lies in ``[-1, 1]`` for non-negative distances and is positive iff the point is
    misclassified (closer to the wrong prototype).

    Guard: where ``d+ + d- == 0`` (both distances 0, the point coincides with a correct and a
    wrong prototype) ``mu`` is defined as ``0`` (a tie) and its gradient there is ``0``; the
    value and the gradient are NaN-free everywhere (the division only ever sees a non-zero
    denominator, ``torch.where`` masks the other branch).
    """
    d_plus = torch.as_tensor(d_plus)
    d_minus = torch.as_tensor(d_minus, device=d_plus.device)
    if not d_plus.is_floating_point():
        d_plus = d_plus.to(torch.get_default_dtype())
    d_minus = d_minus.to(d_plus.dtype)
    denom = d_plus + d_minus
    nonzero = denom != 0
    safe = torch.where(nonzero, denom, torch.ones_like(denom))
    mu = (d_plus - d_minus) / safe
    return torch.where(nonzero, mu, torch.zeros_like(mu))


def _phi_log4(mu: torch.Tensor) -> torch.Tensor:
    return torch.log(4.0 + mu)


def _phi_identity(mu: torch.Tensor) -> torch.Tensor:
    return mu


def _phi_sigmoid(mu: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(mu)


#: The squashing functions ``Phi`` known by name. ``"log4"`` is the paper's ``log(4 + mu)``.
PHI_FUNCTIONS = {"log4": _phi_log4, "identity": _phi_identity, "sigmoid": _phi_sigmoid}

PhiLike = Union[str, Callable[[torch.Tensor], torch.Tensor]]


def _resolve_phi(phi: PhiLike) -> Callable[[torch.Tensor], torch.Tensor]:
    if callable(phi):
        return phi
    try:
        return PHI_FUNCTIONS[phi]
    except (KeyError, TypeError):
        raise ValueError(
            f"phi must be one of {sorted(PHI_FUNCTIONS)} or a callable, got {phi!r}"
        ) from None


def glvq_loss(d_plus: torch.Tensor, d_minus: torch.Tensor, phi: PhiLike = "log4") -> torch.Tensor:
    """GLVQ cost ``E = sum_i Phi(mu_i)`` with ``mu_i = glvq_mu(d+_i, d-_i)``.

    ``phi``: ``"log4"`` (``log(4 + mu)``, the paper's choice, default), ``"identity"``
    (``mu``), ``"sigmoid"`` (``1 / (1 + exp(-mu))``) or any callable mapping a tensor of ``mu``
    values to a tensor of the same shape. Returns a 0-dim tensor (sum over all points).
    """
    return _resolve_phi(phi)(glvq_mu(d_plus, d_minus)).sum()


def gram_matrix(A: torch.Tensor) -> torch.Tensor:
    """The smaller of the two Gram matrices of ``A``: ``A^T A`` if ``A`` has at least as many
    rows as columns, else ``A A^T``. Both share their non-zero eigenvalues."""
    if A.dim() != 2:
        raise ValueError(f"expected a matrix, got shape {tuple(A.shape)}")
    return A.mT @ A if A.shape[0] >= A.shape[1] else A @ A.mT


def logdet_regularizer(A: torch.Tensor, beta: float) -> torch.Tensor:
    """Log-det regulariser ``-beta * log det(G)``, ``G`` = the smaller Gram matrix of ``A``.

    Subtracting the log-determinant (as Schneider et al. 2010 do; the paper's text adds it,
    which would *reward* rank collapse) penalises embeddings that lose rank: the term grows
    without bound as a singular value of ``A`` goes to 0. Its gradient is
    ``-2 beta (A^+)^T``.

    Computation: ``log det(G) = sum_i log(sigma_i^2)`` over the ``min(rows, cols)`` singular
    values of ``A`` (``torch.linalg.svdvals``), which stays accurate for ill-conditioned
    ``A`` (forming ``G`` would square the condition number) and has a stable gradient for
    repeated singular values (e.g. the simplex initialisation).

    Singular ``G``: each ``sigma_i^2`` is clamped from below at the smallest normal number of
    the dtype (``torch.finfo(dtype).tiny``: ``~2.2e-308`` in float64, ``~1.2e-38`` in
    float32). A rank-deficient ``A`` therefore gives a large but finite value (``beta * 708``
    per zero singular value in float64, ``beta * 87`` in float32) whose gradient in the
    collapsed directions is 0 - never ``inf`` or NaN. Above that floor the barrier is exact.
    """
    if beta == 0:
        return A.new_zeros(())
    if A.dim() != 2:
        raise ValueError(f"expected a matrix, got shape {tuple(A.shape)}")
    if min(A.shape) == 0:
        return A.new_zeros(())
    s = torch.linalg.svdvals(A)
    tiny = torch.finfo(A.dtype).tiny
    return -beta * torch.log(torch.clamp(s * s, min=tiny)).sum()


def frobenius_regularizer(A: torch.Tensor, beta: float) -> torch.Tensor:
    """Frobenius regulariser ``beta * ||A||_F^2``."""
    return beta * (A * A).sum()


# ---------------------------------------------------------------------------
# closed-form gradients (the L-BFGS hot path of BEDL: no autograd graph per evaluation)
# ---------------------------------------------------------------------------


def _phi_derivative(phi: PhiLike, mu: torch.Tensor):
    """``(Phi(mu), Phi'(mu))`` elementwise; closed form for the named functions, autograd on
    a detached leaf for a callable."""
    if phi == "log4":
        s = 4.0 + mu
        return torch.log(s), torch.reciprocal(s)
    if phi == "identity":
        return mu, torch.ones_like(mu)
    if phi == "sigmoid":
        s = torch.sigmoid(mu)
        return s, s * (1.0 - s)
    fn = _resolve_phi(phi)
    with torch.enable_grad():
        leaf = mu.detach().requires_grad_(True)
        value = fn(leaf)
        (grad,) = torch.autograd.grad(value.sum(), leaf)
    return value.detach(), grad


def glvq_loss_and_grad(d_plus: torch.Tensor, d_minus: torch.Tensor, phi: PhiLike = "log4"):
    """:func:`glvq_loss` and its gradient with respect to the distances, in closed form.

    Returns ``(E, dE/dd+, dE/dd-)`` (no autograd graph): with ``s = d+ + d-``,
    ``dmu/dd+ = 2 d- / s^2`` and ``dmu/dd- = -2 d+ / s^2``, times ``Phi'(mu)``; where
    ``s == 0`` the value uses ``mu = 0`` and both gradients are 0, exactly as the guard of
    :func:`glvq_mu`.
    """
    denom = d_plus + d_minus
    nonzero = denom != 0
    safe = torch.where(nonzero, denom, torch.ones_like(denom))
    mu = torch.where(nonzero, (d_plus - d_minus) / safe, torch.zeros_like(denom))
    value, dphi = _phi_derivative(phi, mu)
    scale = torch.where(nonzero, 2.0 * dphi / (safe * safe), torch.zeros_like(denom))
    return value.sum(), scale * d_minus, -scale * d_plus


def logdet_regularizer_and_grad(A: torch.Tensor, beta: float):
    """:func:`logdet_regularizer` and its gradient ``-2 beta (A^+)^T`` in closed form, from
    one SVD ``A = U S V^T``: ``-2 beta U S^-1 V^T``, with 0 for the singular values at the
    clamp (``s^2 <= tiny``), as the autograd gradient of the clamped value."""
    if beta == 0 or min(A.shape) == 0:
        return A.new_zeros(()), torch.zeros_like(A)
    U, s, Vh = torch.linalg.svd(A, full_matrices=False)
    tiny = torch.finfo(A.dtype).tiny
    s2 = s * s
    live = s2 > tiny
    value = -beta * torch.log(torch.clamp(s2, min=tiny)).sum()
    inv = torch.where(live, torch.reciprocal(torch.where(live, s, torch.ones_like(s))), torch.zeros_like(s))
    grad = (-2.0 * beta) * (U * inv) @ Vh
    return value, grad


def frobenius_regularizer_and_grad(A: torch.Tensor, beta: float):
    """:func:`frobenius_regularizer` and its gradient ``2 beta A``."""
    return beta * (A * A).sum(), (2.0 * beta) * A


# ---------------------------------------------------------------------------
# the same closed forms in numpy
# ---------------------------------------------------------------------------


def glvq_loss_and_grad_numpy(d_plus: np.ndarray, d_minus: np.ndarray, phi: PhiLike = "log4",
                             backward: bool = True
                             ) -> Tuple[float, Optional[np.ndarray], Optional[np.ndarray]]:
    """:func:`glvq_loss_and_grad` on float numpy arrays ``(m,)``: ``(E, dE/dd+, dE/dd-)``,
    the gradients ``None`` unless ``backward``. Same guard (``mu = 0`` and zero gradient where
    ``d+ + d- == 0``); ``"log4"`` in numpy, other ``phi`` through :func:`_phi_derivative`."""
    s = d_plus + d_minus
    zero = None if s.all() else s == 0
    if zero is not None:
        s = np.where(zero, 1.0, s)
    mu = (d_plus - d_minus) / s
    if zero is not None:
        mu[zero] = 0.0
    if isinstance(phi, str) and phi == "log4":
        q = mu + 4.0
        loss = float(np.log(q).sum())
        dphi = 1.0 / q if backward else None
    else:
        value, dphi = _phi_derivative(phi, torch.from_numpy(mu))
        loss, dphi = float(value.sum()), dphi.numpy()
    if not backward:
        return loss, None, None
    scale = 2.0 * dphi / (s * s)
    if zero is not None:
        scale[zero] = 0.0
    return loss, scale * d_minus, -scale * d_plus


def logdet_regularizer_and_grad_numpy(A: np.ndarray, beta: float, backward: bool = True
                                      ) -> Tuple[float, Optional[np.ndarray]]:
    """:func:`logdet_regularizer_and_grad` on a float numpy matrix ``A``: ``(value, gradient)``
    (the gradient ``None`` unless ``backward``), with the same clamp at ``finfo.tiny``."""
    if beta == 0 or min(A.shape) == 0:
        return 0.0, (np.zeros_like(A) if backward else None)
    tiny = _TINY.get(A.dtype) or _TINY.setdefault(A.dtype, np.finfo(A.dtype).tiny)
    U, sv, Vh = np.linalg.svd(A, full_matrices=False)
    s2 = sv * sv
    live = s2.min() > tiny  # the usual case: no singular value at the clamp
    value = -(beta * float(np.log(s2 if live else np.maximum(s2, tiny)).sum()))
    if not backward:
        return value, None
    inv = 1.0 / sv if live else np.divide(1.0, sv, out=np.zeros_like(sv), where=s2 > tiny)
    return value, -((2.0 * beta) * ((U * inv) @ Vh))


#: ``np.finfo(dtype).tiny`` per dtype (``np.finfo`` is slow to call per evaluation)
_TINY = {}


def frobenius_regularizer_and_grad_numpy(A: np.ndarray, beta: float, backward: bool = True
                                         ) -> Tuple[float, Optional[np.ndarray]]:
    """:func:`frobenius_regularizer_and_grad` on a float numpy matrix: ``beta ||A||_F^2`` and
    ``2 beta A`` (``None`` unless ``backward``)."""
    return beta * float(np.vdot(A, A)), ((2.0 * beta) * A if backward else None)


# ---------------------------------------------------------------------------
# NCA: the soft nearest-neighbour likelihood (Goldberger et al. 2004) on distances
# ---------------------------------------------------------------------------


def nca_loss(D: torch.Tensor, same: torch.Tensor, valid: torch.Tensor, scale: float) -> torch.Tensor:
    """Negative log-likelihood of the soft nearest neighbour, differentiable by autograd.

    Point ``i`` (a row of ``D``) picks reference ``j`` (a column) with probability
    ``p_ij = exp(-D_ij / scale) / sum_k exp(-D_ik / scale)`` over the columns with
    ``valid[i, k]``; the loss is ``-sum_i log sum_{j: same[i, j]} p_ij`` (computed as a
    difference of two log-sum-exps, stable for any distances). Rows without a ``same`` column
    contribute nothing (their probability is 0 whatever the distances). ``same`` must imply
    ``valid``. Returns a 0-dim tensor (a sum over rows, like the GLVQ loss).
    """
    ok = same.any(1)
    neg = torch.tensor(-math.inf, dtype=D.dtype, device=D.device)
    a = torch.where(valid[ok], D[ok] * (-1.0 / scale), neg)
    lse_all = torch.logsumexp(a, 1)
    lse_same = torch.logsumexp(torch.where(same[ok], a, neg), 1)
    return (lse_all - lse_same).sum()


def _row_logsumexp(a: np.ndarray) -> np.ndarray:
    """``log sum_j exp(a[i, j])`` per row; ``-inf`` for rows of ``-inf``."""
    mx = a.max(1)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(divide="ignore"):
        return mx + np.log(np.exp(a - mx[:, None]).sum(1))


def nca_loss_and_grad_numpy(D: np.ndarray, same: np.ndarray, valid: np.ndarray, scale: float,
                            backward: bool = True) -> Tuple[float, Optional[np.ndarray]]:
    """:func:`nca_loss` on a float numpy matrix ``D`` ``(m, n)`` with its gradient in closed
    form: ``(loss, dL/dD)`` (``None`` unless ``backward``), where
    ``dL/dD_ij = (q_ij - p_ij) / scale`` with ``q_ij = p_ij / sum_{k same} p_ik`` on the
    ``same`` columns (0 elsewhere); 0 on invalid cells and on rows without a ``same`` column."""
    ok = same.any(1)
    if not ok.all():
        loss, g = nca_loss_and_grad_numpy(D[ok], same[ok], valid[ok], scale, backward)
        if not backward:
            return loss, None
        G = np.zeros(D.shape, dtype=g.dtype)
        G[ok] = g
        return loss, G
    a = np.where(valid, D * (-1.0 / scale), -np.inf)
    a_same = np.where(same, a, -np.inf)
    lse_all, lse_same = _row_logsumexp(a), _row_logsumexp(a_same)
    loss = float((lse_all - lse_same).sum())
    if not backward:
        return loss, None
    p = np.exp(a - lse_all[:, None])  # 0 on invalid cells
    q = np.exp(a_same - lse_same[:, None])  # 0 off the same-class cells
    return loss, (q - p) * (1.0 / scale)
