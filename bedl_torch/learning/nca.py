"""BEDL's neighbour objective, ``BEDL(loss="nca")``: the soft nearest-neighbour likelihood of
neighbourhood components analysis (Goldberger et al., NeurIPS 2004) over learned edit
distances, plus BEDL's regularisers.

Training point ``i`` picks a reference ``j`` (every other training object, or the prototype
candidates) with probability ``p_ij = exp(-D_ij / s) / sum_k exp(-D_ik / s)`` (never itself);
the loss is ``-sum_i log sum_{j in class(i)} p_ij`` (:func:`~.losses.nca_loss`). ``s`` is
fixed for a fit (:func:`nca_scale`), so the objective is a function of the costs alone.

The cells of the loss (:class:`NCAReferences`) need the distances of a fixed list of pairs, so
an evaluation is: the pairs' distances, the loss and its gradient on them, and that gradient
through the edit distances. Two evaluators, both with :class:`MetricObjective`'s interface:

* :class:`NumpyEuclideanNCAObjective`: the default :class:`EuclideanCost` on the CPU, numpy
  around the symbol-table kernels. Exact mode: each evaluation runs the kernels on all pairs
  with each pair's ``P`` summed by label pair (:class:`PairKernels`), and the table's gradient
  is those lists weighted by ``dL/dD``. Pseudo mode: the lists are computed once, under the
  round's alignment costs, and frozen (:class:`FrozenPairLists`): every distance is then
  linear in the cost table and an evaluation runs no dynamic program.
* :class:`SparsePseudoNCAObjective`: pseudo mode for any other cost module (large alphabets:
  a cosine cost over thousands of words): every pair's ``P0`` frozen once as sparse weights
  on symbol pairs, so an evaluation runs no dynamic program either.
* :class:`NCAObjective`: any cost module in exact and soft mode, autograd through
  :func:`~bedl_torch.ops.pairwise.table_pair_distances`.

:class:`~.training.ObjectiveFactory` chooses and builds them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch

from ..costs import EuclideanCost, SymbolCost
from ..ops import PairBatch, SymbolTableKernels, default_rel_tol, limits
from ..ops.pairwise import table_pair_distances
from .losses import (
    frobenius_regularizer,
    logdet_regularizer,
    nca_loss,
    nca_loss_and_grad_numpy,
)
from .numpy_objectives import NumpyEuclideanBase
from .objective_base import MetricObjective, backward_with, regularized_matrix

__all__ = ["NCAReferences", "NCALossTerms", "nca_scale", "knn_vote", "PairKernels",
           "FrozenPairLists", "NumpyEuclideanNCAObjective", "NCAObjective", "SparsePseudoNCAObjective"]


class NCAReferences:
    """The cells of the NCA loss: training point ``i`` (row) against reference ``j`` (column,
    the training object ``refs[j]``), the point itself excluded, and the distinct pairs of
    training objects those cells read (one per unordered pair for a symmetric cost).

    Args:
        y_idx: class index of every training object ``(m,)``.
        refs: sorted training indices of the references ``(n,)``.
        symmetric: whether ``d(a, b) == d(b, a)`` (the cost module's ``symmetric``).

    Attributes:
        valid: bool ``(m, n)``: the cell is a candidate neighbour (``refs[j] != i``).
        same: bool ``(m, n)``: valid and of the point's class.
        pair_x, pair_y: int64 ``(B,)`` the distinct pairs, sorted (``pair_x`` first).
        rows, cols, cell_pair: the valid cells and the pair each reads.
    """

    def __init__(self, y_idx: np.ndarray, refs: np.ndarray, symmetric: bool):
        y_idx = np.asarray(y_idx)
        refs = np.asarray(refs, dtype=np.int64)
        m, n = len(y_idx), len(refs)
        self.shape = (m, n)
        self.refs = refs
        self.valid = refs[None, :] != np.arange(m)[:, None]
        self.same = (y_idx[:, None] == y_idx[refs][None, :]) & self.valid
        self.rows, self.cols = np.nonzero(self.valid)
        a, b = self.rows, refs[self.cols]
        if symmetric:
            a, b = np.minimum(a, b), np.maximum(a, b)
        codes, self.cell_pair = np.unique(a * m + b, return_inverse=True)
        self.cell_pair = self.cell_pair.reshape(-1)
        self.pair_x, self.pair_y = codes // m, codes % m
        self._m = m

    def __len__(self) -> int:
        """The number of distinct pairs."""
        return len(self.pair_x)

    def pair_index(self, ii: np.ndarray, jj: np.ndarray) -> np.ndarray:
        """The positions in ``(pair_x, pair_y)`` of the pairs ``(ii, jj)`` (each one of them)."""
        return np.searchsorted(self.pair_x * self._m + self.pair_y, ii * self._m + jj)

    def matrix(self, d: np.ndarray) -> np.ndarray:
        """``(m, n)`` distances from the pairs' ``d`` ``(B,)`` (0 on invalid cells)."""
        D = np.zeros(self.shape, dtype=d.dtype)
        D[self.rows, self.cols] = d[self.cell_pair]
        return D

    def matrix_torch(self, d: torch.Tensor) -> torch.Tensor:
        """:meth:`matrix` in torch (differentiable in ``d``)."""
        D = d.new_zeros(self.shape)
        index = torch.as_tensor(self.cell_pair, device=d.device)
        return D.index_put((torch.as_tensor(self.rows, device=d.device),
                            torch.as_tensor(self.cols, device=d.device)), d[index])

    def pair_weights(self, G: np.ndarray) -> np.ndarray:
        """The gradient on the pairs' distances from the gradient ``G`` on the cells."""
        return np.bincount(self.cell_pair, weights=G[self.rows, self.cols], minlength=len(self))


def nca_scale(D: np.ndarray, refs: NCAReferences, factor: float) -> float:
    """The fixed scale ``s`` of a fit: ``factor`` times the median over the training points of
    the distance to their nearest reference (a typical neighbour distance of the initial
    costs); the median of the positive distances where that is 0, 1 where all are 0."""
    masked = np.where(refs.valid, D, np.inf)
    nearest = masked.min(1)
    nearest = nearest[np.isfinite(nearest)]
    base = float(np.median(nearest)) if len(nearest) else 0.0
    if not base > 0:
        positive = D[refs.valid & (D > 0)]
        base = float(np.median(positive)) if len(positive) else 1.0
    return float(factor) * base


def knn_vote(D: np.ndarray, labels: np.ndarray, k: int, n_classes: int) -> np.ndarray:
    """Class indices by a majority vote of the ``k`` nearest columns of ``D`` (``labels``: the
    columns' class indices); equal votes go to the class with the nearest neighbour."""
    k = min(int(k), D.shape[1])
    order = np.argsort(D, axis=1, kind="stable")[:, :k]
    neigh = labels[order]
    rows = np.arange(D.shape[0])
    votes = np.zeros((D.shape[0], n_classes))
    np.add.at(votes, (rows[:, None], neigh), 1.0)
    first = np.full((D.shape[0], n_classes), k, dtype=np.int64)
    for r in range(k - 1, -1, -1):
        first[rows, neigh[:, r]] = r
    return (votes - first / (k + 1.0)).argmax(1)


@dataclass(frozen=True)
class NCALossTerms:
    """The NCA loss at the fixed ``scale`` plus ``beta`` times the regulariser(s) (as
    :class:`~.objective_base.LossTerms` for GLVQ)."""

    regularizer: Optional[str] = "both"
    beta: float = 0.05
    scale: float = 1.0

    @property
    def active_regularizer(self) -> Optional[str]:
        """``regularizer``, or ``None`` when ``beta == 0``."""
        return self.regularizer if self.beta > 0 else None

    def regularization(self, cost: SymbolCost) -> Optional[torch.Tensor]:
        """The regularisers on the cost module's regularised matrix (autograd), or ``None``."""
        if self.active_regularizer is None:
            return None
        A = regularized_matrix(cost)
        if A is None:
            return None
        value = A.new_zeros(())
        if self.regularizer in ("logdet", "both"):
            value = value + logdet_regularizer(A, self.beta)
        if self.regularizer in ("frobenius", "both"):
            value = value + frobenius_regularizer(A, self.beta)
        return value

    def __call__(self, D: torch.Tensor, refs: NCAReferences, cost: SymbolCost) -> torch.Tensor:
        """The objective (autograd) for the ``(m, n)`` distances of the cells of ``refs``."""
        dev = D.device
        loss = nca_loss(D, torch.as_tensor(refs.same, device=dev),
                        torch.as_tensor(refs.valid, device=dev), self.scale)
        reg = self.regularization(cost)
        return loss if reg is None else loss + reg

    def on_matrix(self, D: np.ndarray, refs: NCAReferences, cost: SymbolCost) -> float:
        """The objective, without gradient, from the actual distances ``D`` ``(m, n)`` of the
        training points to the references."""
        loss = nca_loss_and_grad_numpy(np.asarray(D, dtype=np.float64), refs.same, refs.valid,
                                       self.scale, backward=False)[0]
        with torch.no_grad():
            reg = self.regularization(cost)
        return loss if reg is None else loss + float(reg)


def _pair_chunks(bounds: np.ndarray, limit: int) -> List[Tuple[int, int]]:
    """Consecutive ``(lo, hi)`` ranges of pairs whose list bounds sum to at most ``limit``
    (a single pair over it gets a range of its own)."""
    out, lo, total = [], 0, 0
    for k, b in enumerate(bounds.tolist()):
        if k > lo and total + b > limit:
            out.append((lo, k))
            lo, total = k, 0
        total += b
    if lo < len(bounds):
        out.append((lo, len(bounds)))
    return out


class PairKernels:
    """The symbol-table kernels on fixed pairs, in chunks whose per-pair lists (``P`` summed by
    label pair, ``SymbolTableKernels.distances_with_sums``) fit ``limits.PAIR_SUM_ENTRIES``.

    Args:
        batch: the pairs. cost: the module whose alphabet encodes the labels (its table is
            passed to each call). unknown: the ops' argument.
        distinct: int64 ``(objects,)`` the number of distinct labels of every object that
            ``batch`` indexes (both sides index the same objects).
    """

    def __init__(self, batch: PairBatch, cost: SymbolCost, unknown: str, distinct: np.ndarray,
                 dtype: torch.dtype):
        px, py = batch.pair_x.numpy(), batch.pair_y.numpy()
        bounds = (distinct[px] + 1) * (distinct[py] + 1) - 1
        self.ranges = _pair_chunks(bounds, limits.PAIR_SUM_ENTRIES)
        self.kernels = [
            SymbolTableKernels(PairBatch.from_tables(batch.x_table, batch.y_table,
                                                     batch.pair_x[lo:hi], batch.pair_y[lo:hi]),
                               cost, unknown)
            for lo, hi in self.ranges]
        self.rel_tol = default_rel_tol(dtype)
        self.batch, self.cost, self.unknown = batch, cost, unknown
        self.n_pairs = len(batch)
        self._sums: list = []

    def distances(self, table: torch.Tensor, lists: bool) -> np.ndarray:
        """All pairs' exact distances under ``table`` (CPU); with ``lists`` also each pair's
        lists, kept for :meth:`table_grad`."""
        out = []
        self._sums = []
        for k in self.kernels:
            if lists:
                d, sums = k.distances_with_sums(table, self.rel_tol)
                self._sums.append(sums)
            else:
                d = k.distances(table, self.rel_tol)
            out.append(d.numpy())
        return np.concatenate(out) if out else np.zeros(0)

    def table_grad(self, table: torch.Tensor, weights: np.ndarray) -> np.ndarray:
        """The gradient of ``sum_k weights[k] d_k`` on the table's entries, from the lists of
        the last :meth:`distances` with ``lists`` (the gradient kernel where they were too
        many)."""
        G = np.zeros(tuple(table.shape))
        for k, sums, (lo, hi) in zip(self.kernels, self._sums, self.ranges):
            w = torch.from_numpy(np.ascontiguousarray(weights[lo:hi], dtype=np.float64)).to(table.dtype)
            if sums is not None:
                G += k.grad_from_sums(sums, w, table.shape).numpy()
            else:
                G += k.weighted_grad(table, w, self.rel_tol).numpy()
        return G

    def lists(self, table: torch.Tensor):
        """``(pair, entry, value)`` numpy arrays: every pair's ``P`` summed by label pair under
        ``table`` (entry ``a * (U+1) + b``), pairs in order."""
        pairs, entries, values = [], [], []
        for k, (lo, hi) in zip(self.kernels, self.ranges):
            for part in self._chunk_lists(k, lo, hi, table):
                pairs.append(part[0])
                entries.append(part[1])
                values.append(part[2])
        if not pairs:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        return np.concatenate(pairs), np.concatenate(entries), np.concatenate(values)

    def _chunk_lists(self, kernels: SymbolTableKernels, lo: int, hi: int, table: torch.Tensor):
        """The lists of the pairs ``lo .. hi`` (run by ``kernels``), halving the range where the
        kernels decline to list them all (more entries than their bound)."""
        _, sums = kernels.distances_with_sums(table, self.rel_tol)
        if sums is None:
            if hi - lo == 1:
                raise RuntimeError("a single pair's lists exceed limits.PAIR_SUM_ENTRIES")
            mid = (lo + hi) // 2
            out = []
            for a, b in ((lo, mid), (mid, hi)):
                sub = PairBatch.from_tables(self.batch.x_table, self.batch.y_table,
                                            self.batch.pair_x[a:b], self.batch.pair_y[a:b])
                out += self._chunk_lists(SymbolTableKernels(sub, self.cost, self.unknown),
                                         a, b, table)
            return out
        ptr, entry, value = (t.numpy() for t in sums)
        return [(np.repeat(np.arange(lo, hi, dtype=np.int64), np.diff(ptr)), entry, value)]


class FrozenPairLists:
    """Pseudo distances of fixed pairs: each pair's co-optimal ``P0`` summed by label pair,
    frozen, so that ``d~_k = sum_e value_e C[entry_e]`` is linear in the cost table ``C``.

    Args: the ``(pair, entry, value)`` arrays of :meth:`PairKernels.lists`, the number of
    pairs and of symbols (gap included).
    """

    def __init__(self, pair: np.ndarray, entry: np.ndarray, value: np.ndarray, n_pairs: int,
                 n_sym: int):
        small = np.int32 if max(n_pairs, n_sym * n_sym) < 2 ** 31 else np.int64
        self.pair, self.entry = pair.astype(small), entry.astype(small)
        self.value = value
        self.n_pairs, self.n_sym = n_pairs, n_sym

    def distances(self, C: np.ndarray) -> np.ndarray:
        """The pseudo distances ``(B,)`` under the cost table ``C`` ``(U+1, U+1)``."""
        return np.bincount(self.pair, weights=self.value * C.reshape(-1)[self.entry],
                           minlength=self.n_pairs)

    def table_grad(self, weights: np.ndarray) -> np.ndarray:
        """The gradient of ``sum_k weights[k] d~_k`` on the table's entries."""
        G = np.bincount(self.entry, weights=self.value * weights[self.pair],
                        minlength=self.n_sym * self.n_sym)
        return G.reshape(self.n_sym, self.n_sym)


class NumpyEuclideanNCAObjective(NumpyEuclideanBase):
    """The NCA objective for the default :class:`EuclideanCost` on the CPU: the cost table,
    the loss, the regularisers and the chain rule in numpy; the distances from the kernels
    (exact mode, :class:`PairKernels`) or from frozen lists (pseudo mode,
    :class:`FrozenPairLists`).

    Args:
        cost: the :class:`EuclideanCost` (its embedding is read in place).
        refs: the cells of the loss. loss: :class:`NCALossTerms`.
        kernels: the kernels on the pairs of ``refs`` (exact mode) or ``None``.
        frozen: the frozen lists (pseudo mode) or ``None``.
    """

    uses_autograd = False

    def __init__(self, cost: EuclideanCost, refs: NCAReferences, loss: NCALossTerms,
                 kernels: Optional[PairKernels] = None, frozen: Optional[FrozenPairLists] = None):
        super().__init__(cost, loss)
        if (kernels is None) == (frozen is None):
            raise ValueError("give either the kernels (exact mode) or the frozen lists (pseudo)")
        self.refs, self.kernels, self.frozen = refs, kernels, frozen

    def glvq_and_table_grad(self, C, backward):
        """(The base's hook, named for GLVQ:) the NCA loss under the cost table ``C`` and its
        gradient on ``C``'s entries."""
        if self.kernels is not None:
            table = torch.from_numpy(C)
            d = self.kernels.distances(table, backward)
        else:
            d = self.frozen.distances(C)
        refs = self.refs
        loss, G = nca_loss_and_grad_numpy(refs.matrix(d), refs.same, refs.valid,
                                          self.loss.scale, backward)
        if not backward:
            return loss, None
        w = refs.pair_weights(G)
        if self.kernels is not None:
            grad = self.kernels.table_grad(table, w)
        else:
            grad = self.frozen.table_grad(w)
        return loss, grad.astype(C.dtype, copy=False)


class NCAObjective(MetricObjective):
    """The NCA objective for any cost module in exact or soft mode, by autograd through the
    pairs' distances (:func:`~bedl_torch.ops.pairwise.table_pair_distances`, in
    memory-bounded chunks). (Pseudo mode: :class:`SparsePseudoNCAObjective`.)

    Args:
        cost, params: the cost module and its learned parameters.
        batch: the pairs of ``refs`` (``batch.pair_x``, ``batch.pair_y``).
        refs: the cells of the loss. loss: :class:`NCALossTerms`. unknown: the ops' argument.
        mode: ``"exact"`` or ``"soft"`` (with ``temperature``).
    """

    def __init__(self, cost: SymbolCost, params: Sequence[torch.Tensor], batch: PairBatch,
                 refs: NCAReferences, loss: NCALossTerms, unknown: str, mode: str,
                 temperature: Optional[float] = None):
        super().__init__(params)
        if mode not in ("exact", "soft"):
            raise ValueError(f"NCAObjective computes exact or soft distances, got mode={mode!r}")
        self.cost, self.batch, self.refs, self.loss, self.unknown = cost, batch, refs, loss, unknown
        self.kw = {"mode": mode}
        if mode == "soft":
            self.kw["temperature"] = float(temperature)

    def evaluate(self, backward: bool) -> torch.Tensor:
        with torch.set_grad_enabled(backward):
            ii, jj, values = table_pair_distances(self.batch.x_table, self.batch.y_table,
                                                  self.batch.pair_x, self.batch.pair_y,
                                                  self.cost, unknown=self.unknown, **self.kw)
            order = torch.as_tensor(np.argsort(self.refs.pair_index(ii.numpy(), jj.numpy())),
                                    device=values.device)
            D = self.refs.matrix_torch(values[order])
            loss = self.loss(D, self.refs, self.cost)
        if backward:
            loss.backward()
        return loss


class SparsePseudoNCAObjective(MetricObjective):
    """The NCA objective in pseudo mode for any cost module (large alphabets included): every
    pair's ``P0`` frozen once, as sparse weights on symbol pairs
    (:class:`~.objectives.SparsePairTerms`, built in chunks), so each evaluation computes only
    the costs of the symbol pairs in use and no dynamic program; the loss and regularisers by
    autograd on the pairs' distances, the chain rule through the symbol-pair costs.

    Args:
        cost, params: the cost module and its learned parameters.
        terms: the pairs' frozen terms (pair ``k`` is ``(refs.pair_x[k], refs.pair_y[k])``).
        refs: the cells of the loss. loss: :class:`NCALossTerms`.
    """

    def __init__(self, cost: SymbolCost, params: Sequence[torch.Tensor], terms, refs: NCAReferences,
                 loss: NCALossTerms):
        super().__init__(params)
        self.cost, self.terms, self.refs, self.loss = cost, terms, refs, loss
        self.all_pairs = torch.arange(len(refs), device=terms.device)

    def evaluate(self, backward: bool) -> torch.Tensor:
        c = self.terms.costs(backward)
        d = self.terms.distances(c).detach().requires_grad_(backward)
        with torch.set_grad_enabled(backward):
            loss = self.loss(self.refs.matrix_torch(d), self.refs, self.cost)
        if backward:
            loss.backward()  # the regularisers' gradient into the parameters, dL/dd into d
            if d.grad is not None:
                t, g = self.terms.backprop(self.all_pairs, d.grad, c)
                if t.requires_grad:
                    backward_with([t], [g])
        return loss.detach()
