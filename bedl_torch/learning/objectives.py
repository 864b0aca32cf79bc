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

The GLVQ loss and the regularisers come from :mod:`.losses` (torch or numpy closed forms), the
shared interface from :mod:`.objective_base`, the numpy evaluators from :mod:`.numpy_objectives`
(all re-exported here); :mod:`.training` chooses and builds the evaluator of a step.
"""
from __future__ import annotations

import math
from typing import Callable, List, Optional, Sequence

import numpy as np
import torch

from ..costs import SymbolCost, pair_costs_of
from ..labels import labels_of
from ..ops import PairBatch, size_order_chunks
from .losses import (
    frobenius_regularizer_and_grad,
    glvq_loss_and_grad,
    logdet_regularizer_and_grad,
)
from .numpy_objectives import (
    NumpyEuclideanExactObjective,
    NumpyEuclideanObjective,
    numpy_path_applies,
)
from .objective_base import LossTerms, MetricObjective, PrototypePairs, backward_with, regularized_matrix

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


def frozen_entries(batch: PairBatch, P0: torch.Tensor, X_idx: torch.Tensor):
    """``(k, a, b, w)``: the nonzero cells of the co-optimal matrices ``P0`` ``(B, R, C)`` of
    ``batch``'s pairs as (pair, row symbol, column symbol, mass in float64), on the CPU."""
    p = P0.to("cpu")
    k, i, j = torch.nonzero(p, as_tuple=True)
    return k, X_idx[batch.pair_x[k], i], X_idx[batch.pair_y[k], j], p[k, i, j].to(torch.float64)


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
        k, a, b, w = frozen_entries(batch, P0, X_idx)
        self._set(cost, P0.shape[0], k, a, b, w)

    @classmethod
    def from_entries(cls, cost: SymbolCost, n_pairs: int, k: torch.Tensor, a: torch.Tensor,
                     b: torch.Tensor, w: torch.Tensor) -> "SparsePairTerms":
        """The terms from entries: distance ``k[e]`` carries ``w[e]`` (float64) of the cost of
        the symbol pair ``(a[e], b[e])`` (repeats summed)."""
        terms = cls.__new__(cls)
        terms._set(cost, n_pairs, k, a, b, w)
        return terms

    @classmethod
    def frozen_in_chunks(cls, cost: SymbolCost, batch: PairBatch, align: SymbolCost, unknown: str,
                         X_idx: torch.Tensor) -> "SparsePairTerms":
        """The terms of ``batch``'s pairs with ``P0`` under ``align``, computed in chunks of
        similar sizes (:func:`~bedl_torch.ops.size_order_chunks`), so that no dense ``P0`` of
        all pairs is ever held (the neighbour objective's pairs: every training point against
        every reference)."""
        order, bounds = size_order_chunks(batch.x_table, batch.y_table, batch.pair_x, batch.pair_y)
        if order is None:
            order = torch.arange(len(batch))
        parts = []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            chunk = order[lo:hi]
            sub = PairBatch.from_tables(batch.x_table, batch.y_table, batch.pair_x[chunk],
                                        batch.pair_y[chunk])
            k, a, b, w = frozen_entries(sub, sub.coopt(align, unknown=unknown)[1], X_idx)
            parts.append((chunk[k], a, b, w))
        if not parts:
            parts = [(torch.zeros(0, dtype=torch.long),) * 3 + (torch.zeros(0, dtype=torch.float64),)]
        return cls.from_entries(cost, len(batch), *(torch.cat(t) for t in zip(*parts)))

    def _set(self, cost, B, k, a, b, w):
        device = cost.device
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
                backward_with([tensors[k] for k in keep], [grads[k] for k in keep])
        return loss



# ---------------------------------------------------------------------------
# exact mode
# ---------------------------------------------------------------------------


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

    def _select(self, view):
        if self.pairs.fixed is not None:
            return self.pairs.fixed
        m, P = self.pairs.shape
        same, inf = self.pairs.same, self.inf
        with torch.no_grad():
            if view is not None:
                d_all = self.full.run_distances(self.cost, unknown=self.unknown, view=view)
            else:
                d_all = self.full.distances(self.cost, unknown=self.unknown, **self.distance_kw)
            d_all = d_all.view(m, P)
            return (torch.where(same, d_all, inf).argmin(1),
                    torch.where(same, inf, d_all).argmin(1))

    def evaluate(self, backward: bool) -> torch.Tensor:
        m = self.pairs.shape[0]
        # exact distances: one symbol table per evaluation, over the symbols of all m * P
        # pairs, for the selection and the selected pairs (a subset of them) alike
        view = None if self.distance_kw else self.full.symbol_view(self.cost, self.unknown)
        ks = torch.cat(self._select(view))
        key = ks.cpu().numpy().tobytes()
        batch = self._batches.get(key)
        if batch is None:
            batch = PairBatch.from_tables(
                self.full.x_table, self.full.y_table, torch.cat([self.arange_m, self.arange_m]),
                self.prototypes[ks.cpu()])
            self._batches.clear()
            self._batches[key] = batch
        if view is not None:
            d = batch.run_distances(self.cost, unknown=self.unknown, view=view)
        else:
            d = batch.distances(self.cost, unknown=self.unknown, **self.distance_kw)
        loss = self.loss(d[:m], d[m:], self.cost)
        if backward:
            loss.backward()
        return loss
