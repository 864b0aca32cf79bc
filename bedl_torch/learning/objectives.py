"""The objective of BEDL's metric step and its evaluators.

A metric step minimises, over the cost module's parameters, the GLVQ loss of the training
points, each with its closest correct and closest wrong prototype, plus the regularisers on the
module's regularised matrix (:class:`LossTerms`). The data-to-prototype pairs are fixed for the
step (:class:`PrototypePairs`); in pseudo mode so are their co-optimal matrices ``P0``, which
makes every distance linear in the symbol costs.

Five evaluators compute the objective and its gradient, each where it is cheapest; all have the
interface of :class:`MetricObjective` (``value()``, ``value_and_grad()``, and
``flat_value_and_grad(x)`` for BEDL's numpy solver):

* :class:`NumpyEuclideanObjective`: pseudo mode, the default :class:`EuclideanCost` on the CPU
  and a small alphabet: everything in numpy closed form (the problems are tiny and torch's
  per-operation dispatch would dominate).
* :class:`LinearPseudoObjective` with :class:`DenseFrequencyTerms`: pseudo mode, a small
  alphabet, any cost module: distances ``F @ table`` with the ``(U+1)^2`` symbol cost table;
  autograd runs only through the cost module.
* :class:`LinearPseudoObjective` with :class:`SparsePairTerms`: pseudo mode, a large alphabet:
  the same over the symbol pairs that carry mass in ``P0``.
* :class:`NumpyEuclideanExactObjective`: exact (or soft) mode, the default
  :class:`EuclideanCost` on the CPU: numpy around the edit distances; exact mode calls the
  distance and gradient kernels on prebuilt arguments, soft mode runs autograd from the soft
  distances to their symbol cost table.
* :class:`ExactObjective`: exact (or soft) mode, any cost module: autograd through the edit
  distances and the module.

The GLVQ loss and the regularisers come from :mod:`.losses` (torch or numpy closed forms).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ..costs import EuclideanCost, SymbolCost, pair_costs_of
from ..labels import labels_of
from ..ops import PairBatch, SymbolTableKernels, default_rel_tol
from .losses import (
    PhiLike,
    frobenius_regularizer,
    frobenius_regularizer_and_grad,
    frobenius_regularizer_and_grad_numpy,
    glvq_loss,
    glvq_loss_and_grad,
    glvq_loss_and_grad_numpy,
    logdet_regularizer,
    logdet_regularizer_and_grad,
    logdet_regularizer_and_grad_numpy,
)

__all__ = [
    "LossTerms",
    "PrototypePairs",
    "MetricObjective",
    "NumpyEuclideanObjective",
    "NumpyEuclideanExactObjective",
    "LinearPseudoObjective",
    "DenseFrequencyTerms",
    "SparsePairTerms",
    "ExactObjective",
    "regularized_matrix",
    "padded_symbol_indices",
    "symbol_frequencies",
    "flat_symbol_table",
    "numpy_path_applies",
]


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


# ---------------------------------------------------------------------------
# pseudo mode: distances linear in the symbol costs
# ---------------------------------------------------------------------------


def padded_symbol_indices(X: Sequence, cost: SymbolCost, unknown: str) -> torch.Tensor:
    """Symbol indices int64 ``(len(X), max_len + 1)`` (CPU) padded with the gap: the row and
    column symbols of the padded cost matrices of :class:`~bedl_torch.ops.PairBatch` (node
    ``i`` is the ``i``-th label, the gap at position ``len(x)`` and beyond).

    Raises:
        ValueError: labels missing from the alphabet with ``unknown="error"``.
    """
    width = max((len(x) for x in X), default=0) + 1
    out = torch.full((len(X), width), cost.gap_index, dtype=torch.long)
    for k, x in enumerate(X):
        if len(x):
            out[k, : len(x)] = cost.encode(list(labels_of(x)), unknown=unknown)
    return out


def symbol_frequencies(cost: SymbolCost, batch: PairBatch, P0: torch.Tensor,
                       X_idx: torch.Tensor, limit: int) -> Optional[torch.Tensor]:
    """Aggregated co-optimal matrices ``F`` ``(B, (U+1)^2)`` (cost dtype, ``P0``'s device) for
    the pseudo distances of ``batch``, or ``None`` where the table would be too large.

    ``d~_k = sum_ij P0[k, i, j] C(x_i, y_j) = sum_ab F[k, a, b] C(a, b)`` with ``F[k, a, b]``
    the mass of ``P0[k]`` on cells whose row symbol is ``a`` and column symbol ``b`` (gap
    included), so each evaluation is one product with the symbol cost table. ``X_idx``: padded
    symbol indices ``(n, width)`` of the objects the batch's pairs index (gap = ``U``).
    ``None`` when ``(U+1)^2`` exceeds a pair's padded cost matrix or ``limit``.
    """
    n_sym = cost.gap_index + 1
    B, R, C = P0.shape
    if n_sym * n_sym > max(R * C, 1) or n_sym * n_sym > limit:
        return None
    S = n_sym * n_sym
    if P0.device.type == "cpu":  # numpy: one bincount over (pair, symbol pair) bins
        xi = X_idx[batch.pair_x, :R].numpy()  # (B, R)
        yi = X_idx[batch.pair_y, :C].numpy()  # (B, C)
        bins = (xi[:, :, None] * n_sym + yi[:, None, :]).reshape(B, -1)
        bins += (np.arange(B) * S)[:, None]
        F = np.bincount(bins.ravel(), weights=P0.reshape(-1).numpy().astype(np.float64),
                        minlength=B * S).reshape(B, S)
        return torch.from_numpy(F).to(cost.dtype)
    xi = X_idx[batch.pair_x, :R].to(P0.device)
    yi = X_idx[batch.pair_y, :C].to(P0.device)
    flat = (xi[:, :, None] * n_sym + yi[:, None, :]).reshape(B, -1)
    F = torch.zeros(B, S, dtype=P0.dtype, device=P0.device)
    F.scatter_add_(1, flat, P0.reshape(B, -1))
    return F.to(cost.dtype)


def flat_symbol_table(cost: SymbolCost) -> Callable[[], torch.Tensor]:
    """A function returning the flattened ``(U+1)^2`` symbol cost table, differentiable in the
    parameters: the module's ``symbol_costs()`` if it has one, else one ``forward`` call."""
    fn = getattr(cost, "symbol_costs", None)
    if callable(fn):
        return lambda: fn().reshape(-1)
    idx = torch.arange(cost.gap_index + 1, device=cost.device)[None]
    return lambda: cost(idx, idx)[0].reshape(-1)


class DenseFrequencyTerms:
    """Pseudo distances ``F @ c`` with ``c`` the flattened ``(U+1)^2`` symbol cost table.

    Args:
        table: :func:`flat_symbol_table` of the cost module.
        F: ``(m * P, (U+1)^2)`` from :func:`symbol_frequencies`.
    """

    def __init__(self, table: Callable[[], torch.Tensor], F: torch.Tensor):
        self.table, self.F = table, F

    def costs(self, backward: bool) -> torch.Tensor:
        """The symbol costs (with autograd history where gradients are enabled)."""
        return self.table()

    def distances(self, c: torch.Tensor) -> torch.Tensor:
        """All ``m * P`` pseudo distances under the costs ``c`` (detached)."""
        return self.F @ c

    def backprop(self, sel: torch.Tensor, g: torch.Tensor, c: torch.Tensor):
        """``(tensor, gradient)`` for autograd: the gradient of ``sum(g * distances[sel])``
        with respect to the costs ``c`` (as returned by :meth:`costs`)."""
        return c, g @ self.F[sel]


class SparsePairTerms:
    """Pseudo distances as sparse sums over symbol pairs, for alphabets too large for a dense
    ``(m * P, (U+1)^2)`` frequency matrix (e.g. the words of a cosine cost).

    ``d~_k = sum_q w[k, q] c_q`` over the symbol pairs ``q = (a, b)`` that carry mass in some
    frozen ``P0[k]`` (co-optimal matrices are sparse); each evaluation computes only those
    ``c_q`` (:func:`~bedl_torch.costs.pair_costs_of`), and the gradient only those that the
    selected distances use.

    Args:
        cost: the cost module.
        batch: the ``m * P`` data-to-prototype pairs.
        P0: their frozen co-optimal matrices ``(m * P, R, C)``.
        X_idx: padded symbol indices of the objects the pairs index (gap = ``U``).
    """

    def __init__(self, cost: SymbolCost, batch: PairBatch, P0: torch.Tensor,
                 X_idx: torch.Tensor):
        B, R, C = P0.shape
        device = cost.device
        p = P0.to("cpu")
        k, i, j = torch.nonzero(p, as_tuple=True)
        w = p[k, i, j].to(torch.float64)
        a = X_idx[batch.pair_x[k], i]
        b = X_idx[batch.pair_y[k], j]
        n_sym = cost.gap_index + 1
        pair_code, q = torch.unique(a * n_sym + b, return_inverse=True)
        # one entry per (distance, symbol pair): repeated symbol pairs of one P0 summed
        entry, e_idx = torch.unique(k * len(pair_code) + q, return_inverse=True)
        w = torch.zeros(len(entry), dtype=torch.float64).index_add_(0, e_idx, w)
        self.cost = cost
        self.n_pairs = B
        self.device = device
        self.k_e = (entry // len(pair_code)).to(device)
        self.q_e = (entry % len(pair_code)).to(device)
        self.w = w.to(device=device, dtype=cost.dtype)
        self.sa = (pair_code // n_sym).to(device)
        self.sb = (pair_code % n_sym).to(device)
        self.n_q = len(pair_code)

    def costs(self, backward: bool) -> torch.Tensor:
        """The costs of all symbol pairs, without gradient (see :meth:`backprop`)."""
        with torch.no_grad():
            return pair_costs_of(self.cost, self.sa, self.sb)

    def distances(self, c: torch.Tensor) -> torch.Tensor:
        """All pseudo distances under the symbol-pair costs ``c``."""
        return torch.zeros(self.n_pairs, dtype=c.dtype, device=self.device).index_add_(
            0, self.k_e, self.w * c[self.q_e])

    def backprop(self, sel: torch.Tensor, g: torch.Tensor, c: torch.Tensor):
        """``(tensor, gradient)`` for autograd: the costs of the symbol pairs that the selected
        distances use, recomputed with autograd, and the gradient of ``sum(g *
        distances[sel])`` with respect to them."""
        device = self.device
        g_all = torch.zeros(self.n_pairs, dtype=g.dtype, device=device).index_put_(
            (sel,), g, accumulate=True)
        g_c = torch.zeros(self.n_q, dtype=g.dtype, device=device).index_add_(
            0, self.q_e, self.w * g_all[self.k_e])
        used = torch.nonzero(g_c, as_tuple=True)[0]
        return pair_costs_of(self.cost, self.sa[used], self.sb[used]), g_c[used]


class LinearPseudoObjective(MetricObjective):
    """The loss on frozen pseudo distances that are linear in a vector of symbol costs
    (:class:`DenseFrequencyTerms` or :class:`SparsePairTerms`).

    The GLVQ loss and the regularisers are differentiated in closed form
    (:func:`~.losses.glvq_loss_and_grad`, ...); autograd runs only through the cost module
    (the symbol costs and the regularised matrix). Without a fixed selection each evaluation
    first picks every point's closest correct and wrong prototype without gradient.
    """

    def __init__(self, cost: SymbolCost, params: Sequence[torch.Tensor], terms,
                 pairs: PrototypePairs, loss: LossTerms):
        super().__init__(params)
        m, P = pairs.shape
        device = pairs.same.device
        self.cost, self.terms, self.pairs, self.loss = cost, terms, pairs, loss
        self.base = torch.arange(m, device=device) * P
        fixed = pairs.fixed
        self.fixed_idx = (torch.cat([self.base + fixed[0], self.base + fixed[1]])
                          if fixed is not None else None)
        self.inf = torch.tensor(math.inf, dtype=cost.dtype, device=device)

    def evaluate(self, backward: bool) -> torch.Tensor:
        m, P = self.pairs.shape
        reg = self.loss.active_regularizer
        beta = float(self.loss.beta)
        with torch.set_grad_enabled(backward):
            table = self.terms.costs(backward)
            A = regularized_matrix(self.cost) if reg is not None else None
        d_all = self.terms.distances(table.detach())
        if self.fixed_idx is not None:
            sel = self.fixed_idx
        else:  # the gradient-free selection of the closest prototypes
            same, inf, base = self.pairs.same, self.inf, self.base
            d2 = d_all.view(m, P)
            sel = torch.cat([base + torch.where(same, d2, inf).argmin(1),
                             base + torch.where(same, inf, d2).argmin(1)])
        d = d_all[sel]
        loss, g_plus, g_minus = glvq_loss_and_grad(d[:m], d[m:], self.loss.phi)
        tensors: List[torch.Tensor] = []
        grads: List[torch.Tensor] = []
        if backward:
            t, g_t = self.terms.backprop(sel, torch.cat([g_plus, g_minus]), table)
            tensors.append(t)
            grads.append(g_t)
        if A is not None:
            Ad = A.detach()
            g_A = None
            if reg in ("logdet", "both"):
                v, g_A = logdet_regularizer_and_grad(Ad, beta)
                loss = loss + v
            if reg in ("frobenius", "both"):
                v, g = frobenius_regularizer_and_grad(Ad, beta)
                loss = loss + v
                g_A = g if g_A is None else g_A + g
            if backward and A.requires_grad:
                tensors.append(A)
                grads.append(g_A)
        if backward:
            keep = [k for k, t in enumerate(tensors) if t.requires_grad]
            if keep:
                torch.autograd.backward([tensors[k] for k in keep], [grads[k] for k in keep])
        return loss


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


class _NumpyEuclidean(MetricObjective):
    """What the numpy evaluators for the default :class:`EuclideanCost` on the CPU share (see
    :func:`numpy_path_applies`): the cost table ``||v_a - v_b||`` from the embedding, the chain
    rule from a gradient on that table to the embedding (with the zero subgradient where two
    vectors coincide), the regularisers in numpy closed form, and the flat interface of the
    solver without torch. Subclasses give the GLVQ loss and its gradient on the table
    (:meth:`_glvq_and_table_grad`)."""

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

    def _glvq_and_table_grad(self, C: np.ndarray, backward: bool
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
        loss, G = self._glvq_and_table_grad(C, backward)
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


class NumpyEuclideanObjective(_NumpyEuclidean):
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

    def _glvq_and_table_grad(self, C, backward):
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


# ---------------------------------------------------------------------------
# exact mode
# ---------------------------------------------------------------------------


class _TableCost(SymbolCost):
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


class NumpyEuclideanExactObjective(_NumpyEuclidean):
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
        self.table_cost = _TableCost(cost.alphabet, self.table)
        # the same memory without autograd: distances alone (the kernels then skip the
        # co-optimal matrices a gradient needs)
        self.value_cost = _TableCost(cost.alphabet, self.table.detach())
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

    def _glvq_and_table_grad(self, C, backward):
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
            (G,) = torch.autograd.grad(d, self.table,
                                       torch.from_numpy(np.concatenate((g_plus, g_minus))))
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
            G = kernels.grad_from_sums(sums, weights, C.shape[0])
        else:
            G = kernels.weighted_grad(table, weights, tol)
        return loss, G.numpy().astype(C.dtype, copy=True)


class ExactObjective(MetricObjective):
    """The loss on exact edit distances, differentiated by autograd through the kernels.

    Each evaluation selects every point's closest correct and wrong prototype without gradient
    (all ``m * P`` pairs, unless the selection is fixed), then computes the ``2 m`` selected
    distances with gradient; the batch of selected pairs is reused while the selection stays.

    Args:
        cost: the cost module. params: its learned parameters.
        full: the ``m * P`` data-to-prototype pairs, point-major (``PairBatch.from_tables``).
        prototypes: int64 ``(P,)`` indices of the prototypes in ``full.y_table``.
        pairs: which prototypes are correct. loss: the loss terms.
        unknown: the ops' ``unknown`` argument (``"error"`` or ``"gap"``).
        distance_kw: more arguments of ``PairBatch.distances`` (e.g. ``mode="soft"`` and its
            ``temperature``: the same objective on soft edit distances).
    """

    def __init__(self, cost: SymbolCost, params: Sequence[torch.Tensor], full: PairBatch,
                 prototypes: torch.Tensor, pairs: PrototypePairs, loss: LossTerms,
                 unknown: str, distance_kw: Optional[dict] = None):
        super().__init__(params)
        self.distance_kw = dict(distance_kw or {})
        m, _ = pairs.shape
        self.cost, self.full, self.prototypes = cost, full, prototypes
        self.pairs, self.loss, self.unknown = pairs, loss, unknown
        self.arange_m = torch.arange(m)
        self.inf = torch.tensor(math.inf, dtype=cost.dtype, device=pairs.same.device)
        self._batches = {}

    def _select(self):
        if self.pairs.fixed is not None:
            return self.pairs.fixed
        m, P = self.pairs.shape
        same, inf = self.pairs.same, self.inf
        with torch.no_grad():
            d_all = self.full.distances(self.cost, unknown=self.unknown, **self.distance_kw).view(m, P)
            return (torch.where(same, d_all, inf).argmin(1),
                    torch.where(same, inf, d_all).argmin(1))

    def evaluate(self, backward: bool) -> torch.Tensor:
        m = self.pairs.shape[0]
        ks = torch.cat(self._select())
        key = ks.cpu().numpy().tobytes()
        batch = self._batches.get(key)
        if batch is None:
            batch = PairBatch.from_tables(
                self.full.x_table, self.full.y_table, torch.cat([self.arange_m, self.arange_m]),
                self.prototypes[ks.cpu()])
            self._batches.clear()
            self._batches[key] = batch
        d = batch.distances(self.cost, unknown=self.unknown, **self.distance_kw)
        loss = self.loss(d[:m], d[m:], self.cost)
        if backward:
            loss.backward()
        return loss
