"""The training data of a BEDL fit and what each round computes on it: the actual distances
(planned by the ops' :class:`~bedl_torch.ops.pairwise.PairwisePlan`, split across ranks) and
the metric step's objective, chosen and built here (:class:`ObjectiveFactory`) from the
evaluators of :mod:`.objectives`, :mod:`.numpy_objectives`, :mod:`.ranks` (GLVQ) and
:mod:`.nca` (``loss="nca"``).

Layer: learning (imports the ops, the cost modules and this package).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np
import torch

from ..costs import SymbolCost
from ..ops import FlatTable, PairBatch
from ..ops.pairwise import PairwisePlan
from .nca import (
    FrozenPairLists,
    NCALossTerms,
    NCAObjective,
    NCAReferences,
    NumpyEuclideanNCAObjective,
    PairKernels,
    SparsePseudoNCAObjective,
)
from .numpy_objectives import NumpyEuclideanExactObjective, NumpyEuclideanObjective, numpy_path_applies
from .objective_base import LossTerms, MetricObjective, PrototypePairs
from .objectives import (
    DenseFrequencyTerms,
    ExactObjective,
    LinearPseudoObjective,
    SparsePairTerms,
    flat_symbol_table,
    padded_symbol_indices,
    symbol_frequencies,
)
from .ranks import Ranks, RankSumEuclideanObjective, RankSumObjective

__all__ = ["FitData", "make_fit_data", "train_distances", "distance_block", "ObjectiveFactory"]


@dataclass
class FitData:
    """What the rounds of one fit share besides the cost module: the training objects
    (flattened and encoded once), their classes and the loss."""

    X: list
    y_idx: np.ndarray  # class index of every training object
    classes: np.ndarray
    x_table: FlatTable
    y_table: FlatTable
    plan: PairwisePlan  # the training distances: X against X under the learned cost module
    X_idx: torch.Tensor  # padded symbol indices of the training objects
    unknown: str  # the ops' argument: "error" or "gap"
    align_cost: Optional[SymbolCost]  # pseudo mode's alignment costs (None: the current ones)
    loss: Union[LossTerms, NCALossTerms]
    # across ranks: this rank's block of points ((lo, hi), its FlatTable), made on first use
    block_tables: Optional[tuple] = None
    # prototype candidates (sorted training indices; None: every point) and their columns
    # under the initial costs, computed while choosing them (the first round's distances)
    candidates: Optional[np.ndarray] = None
    first_D: Optional[np.ndarray] = None
    # loss="nca": the cells of the loss (training points against the references)
    nca_refs: Optional[NCAReferences] = None


def make_fit_data(X: list, y_idx: np.ndarray, classes: np.ndarray, cost: SymbolCost,
                  unknown: str, align_cost: Optional[SymbolCost],
                  loss: Union[LossTerms, NCALossTerms]) -> FitData:
    """The training objects flattened once (one table per side of the data-to-prototype
    pairs) and the plan of their distances (``i <= j`` for a symmetric cost, mirrored)."""
    x_table, y_table = FlatTable(X, "xs"), FlatTable(X, "ys")
    plan = PairwisePlan(X, X, cost, unknown=unknown, tables=(x_table, y_table),
                        symmetric=bool(getattr(cost, "symmetric", False)))
    return FitData(X=X, y_idx=y_idx, classes=classes, x_table=x_table, y_table=y_table,
                   plan=plan, X_idx=padded_symbol_indices(X, cost, unknown), unknown=unknown,
                   align_cost=align_cost, loss=loss)


def train_distances(data: FitData, ranks: Ranks) -> np.ndarray:
    """The actual distances of the training objects to the prototype candidates: ``(m, m)``
    or ``(m, C)`` with candidates (the first round's come from choosing them)."""
    if data.candidates is not None:
        D, data.first_D = data.first_D, None
        if D is None:
            D = distance_block(data, torch.as_tensor(data.candidates), ranks)
        return D
    ii, jj = data.plan.pairs()
    return data.plan.assemble(*_pair_values(data, ii, jj, ranks))


def distance_block(data: FitData, cols: torch.Tensor, ranks: Ranks) -> np.ndarray:
    """``(m, len(cols))`` distances of every training object to the objects ``cols``."""
    ii, jj = data.plan.pairs(cols)
    return data.plan.assemble(*_pair_values(data, ii, jj, ranks), cols=cols)


def _pair_values(data: FitData, ii: torch.Tensor, jj: torch.Tensor, ranks: Ranks):
    """``(ii, jj, values)`` as numpy arrays, in some order, of the training pairs given,
    without gradient; across ranks each computes a block (balanced by DP cells)."""
    if ranks.size > 1:  # contiguous blocks of pairs, balanced by DP cells
        lengths = data.x_table.lengths
        b = ranks.blocks((lengths[ii] * lengths[jj]).tolist())
        ii, jj = ii[b[ranks.rank]: b[ranks.rank + 1]], jj[b[ranks.rank]: b[ranks.rank + 1]]
    with torch.no_grad():
        ii, jj, vals = data.plan.values(ii, jj)
    if ranks.size > 1:
        counts = [b[r + 1] - b[r] for r in range(ranks.size)]
        ii, jj = ranks.gather_rows(ii, counts), ranks.gather_rows(jj, counts)
        vals = ranks.gather_rows(vals, counts)
    # assembled in numpy: a few small torch operations here can each wait for the
    # intra-op thread pool on a busy machine
    return ii.numpy(), jj.numpy(), vals.cpu().numpy()


def distinct_labels(data: FitData) -> np.ndarray:
    """The number of distinct symbols of every training object (the bound of its pairs'
    lists, see :class:`~.nca.PairKernels`)."""
    lengths = data.x_table.lengths.numpy()
    idx = data.X_idx.numpy()
    return np.array([len(np.unique(idx[k, :n])) for k, n in enumerate(lengths)], dtype=np.int64)


class ObjectiveFactory:
    """Chooses and builds the evaluator of a metric step (see :mod:`.objectives`).

    Exact and soft mode: the distances with autograd (numpy around them for the default
    Euclidean cost). Pseudo mode: the frozen co-optimal matrices ``P0`` of the
    data-to-prototype pairs (under ``data.align_cost`` or the current costs), then numpy for
    the default Euclidean cost, the dense symbol-frequency form for small alphabets, else the
    sparse symbol pairs. Across ranks each rank evaluates its block of points and the sums are
    combined (:mod:`.ranks`). The pieces are methods, so that a subclass (or a test) can
    replace one; BEDL's ``objective_factory`` names the class it uses.

    ``loss="nca"`` (``data.loss`` an :class:`~.nca.NCALossTerms`): :meth:`build_nca`.
    """

    #: largest (U+1)^2 symbol table for the dense pseudo-distance path
    TABLE_LIMIT = 1 << 16

    def __init__(self, mode: str, temperature: Optional[float], ranks: Ranks):
        self.mode, self.temperature, self.ranks = mode, temperature, ranks

    def build(self, cost, params, data: FitData, prototypes) -> MetricObjective:
        """The evaluator of the loss of the data-to-prototype pairs under ``cost`` (with
        ``loss="nca"``: of the training points against the references, :meth:`build_nca`)."""
        if isinstance(data.loss, NCALossTerms):
            return self.build_nca(cost, params, data)
        m, P = len(data.y_idx), len(prototypes)
        device = cost.device
        protos_t = torch.as_tensor(prototypes, dtype=torch.long)
        full = PairBatch.from_tables(data.x_table, data.y_table,
                                     torch.arange(m).repeat_interleave(P), protos_t.repeat(m))
        y_dev = torch.as_tensor(data.y_idx, device=device)
        pairs = PrototypePairs(
            y_dev[:, None] == torch.as_tensor(data.y_idx[prototypes], device=device)[None, :])
        if self.mode in ("exact", "soft"):
            kw = {} if self.mode == "exact" else {
                "distance_kw": {"mode": "soft", "temperature": float(self.temperature)}}
            # (the numpy evaluator builds the dense symbol cost table)
            numpy_ok = ((cost.gap_index + 1) ** 2 <= self.TABLE_LIMIT
                        and self.numpy_path_ok(cost, params))
            if self.ranks.size > 1:
                return self._rank_block_objective(cost, params, data, protos_t, pairs, kw,
                                                  numpy_ok)
            if numpy_ok:
                return NumpyEuclideanExactObjective(cost, full, protos_t, pairs, data.loss,
                                                    data.unknown, **kw)
            return ExactObjective(cost, params, full, protos_t, pairs, data.loss, data.unknown, **kw)
        align = cost if data.align_cost is None else data.align_cost
        P0 = self._coopt_by_rank(full, align, data, P).to(device)
        F = self.symbol_frequencies(cost, full, P0, data.X_idx)
        if F is not None and self.numpy_path_ok(cost, params):
            return self.numpy_evaluator(cost, F.view(m, P, -1), pairs, data.loss)
        if F is not None:
            terms = DenseFrequencyTerms(flat_symbol_table(cost), F.view(m * P, -1))
        else:
            terms = self.pair_cost_terms(cost, full, P0, data.X_idx)
        return self.closed_form_evaluator(cost, params, terms, pairs, data.loss)

    def build_nca(self, cost, params, data: FitData) -> MetricObjective:
        """The NCA evaluator over the pairs of ``data.nca_refs`` (see :mod:`.nca`): numpy around
        the kernels (exact mode) or frozen pair lists (pseudo mode, under ``data.align_cost``
        or the current costs) for the default Euclidean cost with a small alphabet, else
        autograd. Every rank of a process group evaluates the whole objective."""
        refs = data.nca_refs
        batch = PairBatch.from_tables(data.x_table, data.y_table, torch.as_tensor(refs.pair_x),
                                      torch.as_tensor(refs.pair_y))
        numpy_ok = (self.mode in ("exact", "pseudo")
                    and (cost.gap_index + 1) ** 2 <= self.TABLE_LIMIT
                    and self.numpy_path_ok(cost, params))
        align = cost if data.align_cost is None else data.align_cost
        if not numpy_ok and self.mode == "pseudo":
            with torch.no_grad():
                terms = SparsePairTerms.frozen_in_chunks(cost, batch, align, data.unknown, data.X_idx)
            return SparsePseudoNCAObjective(cost, params, terms, refs, data.loss)
        if not numpy_ok:
            return NCAObjective(cost, params, batch, refs, data.loss, data.unknown, self.mode,
                                self.temperature)
        kernels = PairKernels(batch, cost, data.unknown, distinct_labels(data), cost.dtype)
        if self.mode == "exact":
            return NumpyEuclideanNCAObjective(cost, refs, data.loss, kernels=kernels)
        with torch.no_grad():
            table = align.symbol_table().detach().to("cpu", cost.dtype)
        lists = FrozenPairLists(*kernels.lists(table), len(refs), table.shape[0])
        return NumpyEuclideanNCAObjective(cost, refs, data.loss, frozen=lists)

    # -- the replaceable pieces -----------------------------------------------

    def symbol_frequencies(self, cost, batch, P0, X_idx):
        """:func:`~.objectives.symbol_frequencies` up to :attr:`TABLE_LIMIT` table cells."""
        return symbol_frequencies(cost, batch, P0, X_idx, self.TABLE_LIMIT)

    @staticmethod
    def numpy_path_ok(cost, params) -> bool:
        return numpy_path_applies(cost, params)

    def numpy_evaluator(self, cost, F, pairs, loss) -> MetricObjective:
        return NumpyEuclideanObjective(cost, F, pairs, loss)

    def pair_cost_terms(self, cost, batch, P0, X_idx) -> SparsePairTerms:
        return SparsePairTerms(cost, batch, P0, X_idx)

    def closed_form_evaluator(self, cost, params, terms, pairs, loss) -> MetricObjective:
        return LinearPseudoObjective(cost, params, terms, pairs, loss)

    # -- across the ranks of a process group ----------------------------------

    def _row_blocks(self, data: FitData):
        """Each rank's contiguous block of training points, balanced by their node counts."""
        return self.ranks.blocks(data.x_table.lengths.tolist())

    def _coopt_by_rank(self, full: PairBatch, align, data: FitData, P: int) -> torch.Tensor:
        """``full.coopt(align)[1]``, each rank computing its block of points' pairs; the
        blocks are gathered, so every rank holds the single-process bits."""
        ranks = self.ranks
        if ranks.size == 1:
            return full.coopt(align, unknown=data.unknown)[1]
        b = self._row_blocks(data)
        lo, hi = b[ranks.rank] * P, b[ranks.rank + 1] * P
        block = torch.zeros((hi - lo, full.rows, full.cols), dtype=align.dtype)
        if hi > lo:
            sub = PairBatch.from_tables(full.x_table, full.y_table, full.pair_x[lo:hi],
                                        full.pair_y[lo:hi])
            p = sub.coopt(align, unknown=data.unknown)[1].cpu()
            block = block.to(p.dtype)
            block[:, : p.shape[1], : p.shape[2]] = p
        counts = [(b[r + 1] - b[r]) * P for r in range(ranks.size)]
        return ranks.gather_rows(block, counts)

    def _rank_block_objective(self, cost, params, data: FitData, protos_t, pairs, kw,
                              numpy_ok: bool):
        """Exact (or soft) mode across ranks: this rank's block of points. The default
        Euclidean cost sums the GLVQ loss and its gradient on the cost table over the ranks
        (regularisers and chain rule on every rank); other costs sum the loss and the
        parameters' gradient (the regularisers on rank 0). Sums in rank order."""
        ranks = self.ranks
        b = self._row_blocks(data)
        lo, hi = b[ranks.rank], b[ranks.rank + 1]
        inner = None
        if hi > lo:
            if data.block_tables is None or data.block_tables[0] != (lo, hi):
                data.block_tables = ((lo, hi), FlatTable(data.X[lo:hi], "X"))
            x_block = data.block_tables[1]
            P = len(protos_t)
            block = PairBatch.from_tables(x_block, data.y_table,
                                          torch.arange(hi - lo).repeat_interleave(P),
                                          protos_t.repeat(hi - lo))
            block_pairs = PrototypePairs(pairs.same[lo:hi])
            if numpy_ok:
                inner = NumpyEuclideanExactObjective(cost, block, protos_t, block_pairs,
                                                     data.loss, data.unknown, **kw)
            else:
                loss = data.loss if ranks.rank == 0 else dataclasses.replace(data.loss, beta=0.0)
                inner = ExactObjective(cost, params, block, protos_t, block_pairs, loss,
                                       data.unknown, **kw)
        if numpy_ok:
            return RankSumEuclideanObjective(cost, data.loss, inner, ranks)
        return RankSumObjective(inner, params, ranks, cost.dtype, cost.device)
