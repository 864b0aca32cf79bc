"""BEDL across the ranks of a ``torch.distributed`` process group.

Every rank calls ``fit`` with the same data. The work is split by training points into
contiguous blocks balanced by node counts (a point's pairs cost about its size times the
prototypes'): each rank computes the distances, co-optimal matrices and loss terms of its
block, and the results are combined so that every rank holds the same bits:

* values that a single process would compute pair by pair (distance matrices, co-optimal
  matrices) are gathered, so they equal the single-process ones bit for bit;
* sums (the loss and its gradient in exact and soft mode) are gathered per rank and added in
  rank order on every rank, so all ranks take the same optimiser steps; they differ from one
  process's sums only in rounding.

Without an initialised group (or with one process) nothing here communicates.
Layer: learning (uses ``torch.distributed``; no kernel knows of ranks).
"""
from __future__ import annotations

import hashlib
import pickle
from typing import List, Optional, Sequence

import numpy as np
import torch
import torch.distributed as dist

from .numpy_objectives import NumpyEuclideanBase
from .objective_base import MetricObjective

__all__ = ["Ranks", "RankSumObjective", "RankSumEuclideanObjective", "resolve_ranks"]


class Ranks:
    """Rank, size and the collectives BEDL uses, over ``group`` (``None``: one process)."""

    def __init__(self, group=None, active: bool = False):
        self.active = bool(active)
        self.group = group
        if self.active:
            self.rank = dist.get_rank(group)
            self.size = dist.get_world_size(group)
            self.device = (torch.device("cuda", torch.cuda.current_device())
                           if dist.get_backend(group) == "nccl" else torch.device("cpu"))
        else:
            self.rank, self.size, self.device = 0, 1, torch.device("cpu")

    def blocks(self, weights: Sequence[float]) -> List[int]:
        """Bounds ``b[0] = 0 <= ... <= b[size] = len(weights)`` of contiguous blocks whose
        weight sums are as equal as cutting between items allows (the same on every rank)."""
        n = len(weights)
        if self.size == 1:
            return [0, n]
        cum = np.concatenate([[0.0], np.cumsum(np.asarray(weights, dtype=np.float64))])
        targets = cum[-1] * np.arange(1, self.size) / self.size
        cuts = np.searchsorted(cum, targets, side="left").tolist()
        return [0] + [int(min(max(c, 0), n)) for c in cuts] + [n]

    def gather_rows(self, local: torch.Tensor, counts: Sequence[int]) -> torch.Tensor:
        """Every rank's ``local`` rows (``counts[r]`` of them on rank ``r``, equal trailing
        shapes) concatenated in rank order, on every rank."""
        if self.size == 1:
            return local
        width = max(counts)
        padded = torch.zeros((width,) + tuple(local.shape[1:]), dtype=local.dtype,
                             device=self.device)
        padded[: local.shape[0]] = local.to(self.device)
        parts = [torch.empty_like(padded) for _ in range(self.size)]
        dist.all_gather(parts, padded, group=self.group)
        out = torch.cat([p[:c] for p, c in zip(parts, counts)])
        return out.to(local.device)

    def sum_in_rank_order(self, vector: torch.Tensor) -> torch.Tensor:
        """``sum_r vector_r`` added in rank order, so that every rank gets the same bits."""
        if self.size == 1:
            return vector
        parts = [torch.empty_like(vector, device=self.device) for _ in range(self.size)]
        dist.all_gather(parts, vector.to(self.device), group=self.group)
        total = parts[0].clone()
        for p in parts[1:]:
            total += p
        return total.to(vector.device)

    def gather(self, vector: np.ndarray) -> np.ndarray:
        """Every rank's float64 ``vector`` (equal lengths) as the rows of a ``(size, n)`` array,
        on every rank."""
        mine = torch.as_tensor(np.asarray(vector, dtype=np.float64))
        if self.size == 1:
            return mine.numpy()[None]
        parts = [torch.empty_like(mine, device=self.device) for _ in range(self.size)]
        dist.all_gather(parts, mine.to(self.device), group=self.group)
        return torch.stack(parts).cpu().numpy()

    def check_same(self, obj, what: str) -> None:
        """ValueError on every rank unless ``obj`` pickles to the same bytes on all ranks."""
        if self.size == 1:
            return
        digest = hashlib.sha256(pickle.dumps(obj, protocol=4)).digest()
        mine = torch.tensor(list(digest), dtype=torch.uint8, device=self.device)
        parts = [torch.empty_like(mine) for _ in range(self.size)]
        dist.all_gather(parts, mine, group=self.group)
        differ = [r for r, p in enumerate(parts) if not torch.equal(p, parts[0])]
        if differ:
            raise ValueError(f"{what} differs between ranks (rank(s) {differ} differ from rank 0): "
                             "every rank must call fit with the same data, or pass "
                             "process_group=None to fit on each rank alone")


def resolve_ranks(process_group) -> Ranks:
    """``process_group``: ``"auto"`` (the default group where ``torch.distributed`` is
    initialised with more than one process), ``None`` (this process alone) or a group."""
    if process_group is None:
        return Ranks()
    initialised = dist.is_available() and dist.is_initialized()
    if isinstance(process_group, str):
        if process_group != "auto":
            raise ValueError(f"process_group must be 'auto', None or a process group, got "
                             f"{process_group!r}")
        if not initialised or dist.get_world_size() == 1:
            return Ranks()
        return Ranks(None, active=True)
    if not initialised:
        raise ValueError("process_group given, but torch.distributed is not initialised")
    if dist.get_rank(process_group) < 0:
        raise ValueError("this process is not a member of the given process group")
    return Ranks(process_group, active=dist.get_world_size(process_group) > 1)



class RankSumObjective(MetricObjective):
    """A loss that is a sum over training points, each rank evaluating its own block
    (``inner``, or ``None`` for an empty block) and adding the regularisers on rank 0 only:
    the loss and the gradient are summed over the ranks in rank order."""

    def __init__(self, inner: Optional[MetricObjective], params: Sequence[torch.Tensor],
                 ranks: Ranks, dtype: torch.dtype, device):
        super().__init__(params)
        self.inner, self.ranks = inner, ranks
        self.dtype, self.device = dtype, device
        self.uses_autograd = True if inner is None else inner.uses_autograd

    def evaluate(self, backward: bool) -> torch.Tensor:
        if self.inner is not None:
            loss = self.inner.evaluate(backward).detach()
        else:
            loss = torch.zeros((), dtype=self.dtype, device=self.device)
        parts = [loss.reshape(1).to(self.dtype)]
        if backward:
            for p in self.params:
                g = p.grad if p.grad is not None else torch.zeros_like(p)
                parts.append(g.reshape(-1).to(self.dtype))
        total = self.ranks.sum_in_rank_order(torch.cat(parts))
        if backward:
            offset = 1
            for p in self.params:
                n = p.numel()
                p.grad = total[offset: offset + n].view_as(p).to(p.dtype).clone()
                offset += n
        return total[0]


class RankSumEuclideanObjective(NumpyEuclideanBase):
    """The numpy evaluator of the default Euclidean cost across ranks: each rank's block
    (``block``, a :class:`~.objectives.NumpyEuclideanExactObjective` over its points, or
    ``None``) gives the GLVQ loss and its gradient on the ``(U+1, U+1)`` cost table; those are
    summed over the ranks in rank order, and the chain rule to the embedding and the
    regularisers run on every rank alike (one small vector per evaluation crosses the group)."""

    def __init__(self, cost, loss, block, ranks: Ranks):
        super().__init__(cost, loss)
        self.block, self.ranks = block, ranks
        self.uses_autograd = False if block is None else block.uses_autograd

    def glvq_and_table_grad(self, C: np.ndarray, backward: bool):
        if self.block is not None:
            loss, G = self.block.glvq_and_table_grad(C, backward)
        else:
            loss, G = 0.0, (np.zeros_like(C) if backward else None)
        parts = [np.array([loss], dtype=C.dtype)] + ([G.reshape(-1)] if backward else [])
        total = self.ranks.sum_in_rank_order(torch.from_numpy(np.concatenate(parts))).numpy()
        return float(total[0]), (total[1:].reshape(C.shape).copy() if backward else None)
