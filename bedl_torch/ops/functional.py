"""The functional API on single pairs and lists of pairs: exact, co-optimal, pseudo and soft
edit distances under given cost matrices.

Layer: ops (imports :mod:`.batch` and :mod:`.encoding`).
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from ..costs.base import SymbolCost
from ..validation import check_sums_finite
from .batch import EditDistanceFn, PairBatch, SoftEditDistanceFn, check_temperature, soft_distances
from .encoding import check_costs, check_rel_tol

__all__ = ["edit_distance", "coopt_matrix", "pseudo_edit_distance", "edit_distance_batch",
           "coopt_matrix_batch", "soft_edit_distance", "soft_edit_distance_batch", "pair_costs"]


def pair_costs(x, y, costs):
    """``costs`` where it is a tensor; for a cost module, the ``(|x|+1, |y|+1)`` cost matrix of
    the pair under it (differentiable in its parameters; labels missing from its alphabet are
    a ValueError naming them)."""
    if not isinstance(costs, SymbolCost):
        return costs
    return PairBatch([x], [y]).costs(costs)[0, : len(x) + 1, : len(y) + 1]


def _single_pair(x, y, costs) -> PairBatch:
    """The batch of the one pair ``(x, y)``, after checking that ``costs`` is its
    ``(|x|+1, |y|+1)`` cost matrix."""
    batch = PairBatch([x], [y])
    check_costs(costs, finite=False)
    expected = (len(x) + 1, len(y) + 1)
    if tuple(costs.shape) != expected:
        raise ValueError(
            f"costs must have shape (|x|+1, |y|+1) = {expected} (last row insertions, last column "
            f"deletions), got {tuple(costs.shape)}"
        )
    return batch


def soft_edit_distance(x, y, costs: torch.Tensor, temperature: float) -> torch.Tensor:
    """Soft edit distance ``-T log sum_M exp(-cost(M) / T)`` over all valid mappings ``M``.

    Every tree mapping (one-to-one, ancestor- and order-preserving) or sequence alignment
    counts once. A smooth lower bound of :func:`edit_distance`, which it approaches as
    ``T -> 0`` (within ``T`` times the log of the number of cheapest mappings).

    Args:
        x, y: both trees or both sequences, as for :func:`edit_distance`.
        costs: float32/float64 tensor ``(|x|+1, |y|+1)`` on any device (layout of
            :func:`edit_distance`), or a cost module.
        temperature: ``T``, finite and > 0.

    Returns:
        0-dim tensor on the costs' device. Its gradient with respect to ``costs`` is the
        expected alignment under ``p(M) ~ exp(-cost(M) / T)``: ``[i, j]`` the probability
        that ``x_i`` is replaced by ``y_j``, ``[i, n]`` that ``x_i`` is deleted, ``[m, j]``
        that ``y_j`` is inserted; it tends to :func:`coopt_matrix`'s P as ``T -> 0``.

    Raises:
        TypeError: inputs of the wrong kind, non-float costs, a temperature that is not a
            number. ValueError: wrong cost shape, NaN or inf costs, a temperature that is not
            finite and > 0, costs too large for the temperature.
    """
    costs = pair_costs(x, y, costs)
    batch = _single_pair(x, y, costs)
    return SoftEditDistanceFn.apply(costs[None], batch, check_temperature(temperature))[0]


def soft_edit_distance_batch(xs: Sequence, ys: Sequence, costs, temperature: float) -> torch.Tensor:
    """Soft edit distances ``(B,)`` of the pairs ``(xs[k], ys[k])`` in one call.

    ``costs`` as for :func:`edit_distance_batch` (a list of per-pair matrices, one padded
    tensor or a cost module); differentiable (the gradient of pair ``k`` is its expected alignment). Raises as
    :func:`edit_distance_batch` and :func:`soft_edit_distance`.
    """
    batch = PairBatch(xs, ys)
    padded, _ = _pad_costs(batch, costs)
    return soft_distances(batch, padded, temperature)


def _single(x, y, costs, rel_tol, want_coopt):
    costs = pair_costs(x, y, costs)
    batch = _single_pair(x, y, costs)
    tol = check_rel_tol(rel_tol, costs.dtype)
    d, p = EditDistanceFn.apply(costs[None], batch, tol, want_coopt)
    return d[0], (p[0] if want_coopt else None)


def edit_distance(x, y, costs: torch.Tensor, *, rel_tol: Optional[float] = None) -> torch.Tensor:
    """Edit distance between two trees or two sequences under a cost matrix.

    Args:
        x, y: both :class:`bedl_torch.Tree` (tree edit distance) or both sequences
            (``str``/``list``/``tuple``; sequence edit distance).
        costs: float32/float64 tensor ``(|x|+1, |y|+1)`` on any device; ``[i, j]``
            replaces ``x_i`` by ``y_j``, the last column deletes, the last row inserts. Or a
            cost module (:class:`~bedl_torch.costs.SymbolCost`): the pair's costs under it
            (:func:`pair_costs`), the gradient reaching its parameters.
        rel_tol: tie tolerance (see :func:`default_rel_tol`).

    Returns:
        0-dim tensor on the costs' device. Its gradient with respect to ``costs``
        is the co-optimal matrix (see :func:`coopt_matrix`).

    Raises:
        TypeError: inputs of the wrong kind, mixed tree and sequence, non-float costs.
        ValueError: wrong cost shape, NaN or inf costs.
    """
    return _single(x, y, costs, rel_tol, False)[0]


def coopt_matrix(x, y, costs: torch.Tensor, *, rel_tol: Optional[float] = None):
    """The edit distance and the co-optimal alignment matrix ``P``.

    ``P[i, j]`` is the fraction of cheapest mappings that map ``x_i`` to ``y_j``,
    ``P[i, n]`` the fraction that delete ``x_i``, ``P[m, j]`` the fraction that
    insert ``y_j``; ``P[m, n] = 0``. Rows ``i < m`` and columns ``j < n`` sum to 1
    and ``distance == (P * costs).sum()``.

    Returns:
        ``(distance, P)``: ``distance`` as from :func:`edit_distance` (differentiable),
        ``P`` with the costs' shape, dtype and device (no gradient).

    Raises:
        As :func:`edit_distance`.
    """
    return _single(x, y, costs, rel_tol, True)


def pseudo_edit_distance(x, y, costs: torch.Tensor, reference_costs: torch.Tensor, *,
                         rel_tol: Optional[float] = None) -> torch.Tensor:
    """The paper's pseudo edit distance ``sum(P(reference_costs) * costs)``.

    P is frozen at ``reference_costs`` (detached), so the gradient with respect
    to ``costs`` is exactly that P. Either may be a cost module (:func:`pair_costs`).

    Raises:
        ValueError: ``reference_costs`` of another shape or device, NaN or inf costs.
        TypeError: non-float costs.
    """
    costs, reference_costs = pair_costs(x, y, costs), pair_costs(x, y, reference_costs)
    check_costs(costs)
    check_costs(reference_costs, "reference_costs")
    if tuple(reference_costs.shape) != tuple(costs.shape):
        raise ValueError(
            f"reference_costs must have the shape of costs {tuple(costs.shape)}, got {tuple(reference_costs.shape)}"
        )
    if reference_costs.device != costs.device:
        raise ValueError(
            f"reference_costs must be on the costs' device ({costs.device}), got {reference_costs.device}"
        )
    _, p0 = coopt_matrix(x, y, reference_costs.detach(), rel_tol=rel_tol)
    out = (p0.to(device=costs.device, dtype=costs.dtype) * costs).sum()
    check_sums_finite(out, "the pseudo distance")
    return out


def _pad_costs(batch: PairBatch, costs) -> Tuple[torch.Tensor, bool]:
    """One padded cost tensor from a list of per-pair matrices (True: return P as a list), a
    padded tensor, or a cost module (its costs of the pairs' labels, differentiable)."""
    if isinstance(costs, torch.Tensor):
        return costs, False
    if isinstance(costs, SymbolCost):
        return batch.as_costs(costs, finite=False), False
    if not hasattr(costs, "__iter__"):
        raise TypeError(f"costs must be a list of cost matrices, one padded tensor or a cost module, "
                        f"got {type(costs).__name__}")
    costs = list(costs)
    if len(costs) != len(batch):
        raise ValueError(f"got {len(costs)} cost matrices for {len(batch)} pairs")
    padded = []
    for k, c in enumerate(costs):
        check_costs(c, f"costs[{k}]", finite=False)
        expected = (int(batch.m[k]) + 1, int(batch.n[k]) + 1)
        if tuple(c.shape) != expected:
            raise ValueError(f"costs[{k}] must have shape (|x|+1, |y|+1) = {expected}, got {tuple(c.shape)}")
        padded.append(F.pad(c, (0, batch.cols - c.shape[1], 0, batch.rows - c.shape[0])))
    if not padded:
        return torch.zeros(0, 1, 1, dtype=torch.float64), True
    dtypes = {c.dtype for c in padded}
    devices = {c.device for c in padded}
    if len(dtypes) > 1:
        raise TypeError(f"all cost matrices of a batch must share one dtype, got {sorted(map(str, dtypes))}")
    if len(devices) > 1:
        raise ValueError(f"all cost matrices of a batch must be on one device, got {sorted(map(str, devices))}")
    return torch.stack(padded), True


def edit_distance_batch(xs: Sequence, ys: Sequence, costs, *, rel_tol: Optional[float] = None) -> torch.Tensor:
    """Edit distances ``(B,)`` of the pairs ``(xs[k], ys[k])`` in one call.

    Args:
        costs: a list of ``(|x_k|+1, |y_k|+1)`` tensors (one dtype, one device), one
            padded tensor ``(B, M+1, N+1)`` in which pair ``k`` uses ``[:|x_k|+1, :|y_k|+1]``,
            or a cost module (:class:`~bedl_torch.costs.SymbolCost`; the gradient flows to its
            parameters; labels missing from its alphabet are a ValueError).

    Returns:
        ``(B,)`` on the costs' device, differentiable (the gradient of pair ``k`` is its P).

    Raises:
        ValueError: a cost matrix of the wrong shape or count, NaN or inf costs, costs on
            several devices. TypeError: non-float costs, mixed dtypes, objects of the wrong
            kind.
    """
    batch = PairBatch(xs, ys)
    if isinstance(costs, SymbolCost):
        return batch.distances(costs, rel_tol=rel_tol)  # (through its symbol table where it has one)
    padded, _ = _pad_costs(batch, costs)
    return batch.distances(padded, rel_tol=rel_tol)


def coopt_matrix_batch(xs: Sequence, ys: Sequence, costs, *, rel_tol: Optional[float] = None):
    """Distances ``(B,)`` (differentiable) and co-optimal matrices of many pairs.

    Returns P as a list of per-pair matrices if ``costs`` is a list, else (a padded tensor or
    a cost module) as one padded ``(B, M+1, N+1)`` tensor (zero outside each pair's block). Raises as
    :func:`edit_distance_batch`.
    """
    batch = PairBatch(xs, ys)
    padded, as_list = _pad_costs(batch, costs)
    padded = batch.as_costs(padded, finite=False)
    tol = check_rel_tol(rel_tol, padded.dtype)
    d, p = EditDistanceFn.apply(padded, batch, tol, True)
    if as_list:
        return d, [p[k, : int(batch.m[k]) + 1, : int(batch.n[k]) + 1] for k in range(len(batch))]
    return d, p

