"""Differentiable edit distances between trees or sequences.

The kernels take padded cost tensors ``(B, M+1, N+1)``: pair ``b`` with
``|x| = m``, ``|y| = n`` uses ``costs[b, :m+1, :n+1]``, where ``[i, j]`` replaces
``x_i`` by ``y_j``, ``[i, n]`` deletes ``x_i`` and ``[m, j]`` inserts ``y_j``
(``[m, n]`` is unused). Nodes of trees are numbered in preorder.

Three differentiable quantities:

* **exact** (default): ``d(C)`` from the dynamic program; its gradient with
  respect to ``C`` is the co-optimal alignment matrix ``P(C)`` (the average over
  all cheapest mappings; a supergradient where the optimum is not unique).
* **pseudo** (the paper's ``d~``): ``sum(P0 * C)`` with ``P0 = P(C0)`` frozen at
  reference costs ``C0``.
* **soft**: ``-T log sum_M exp(-cost(M) / T)`` over all mappings at a temperature
  ``T``; smooth, its gradient is the expected alignment under ``p(M) ~ exp(-cost(M) / T)``.

Costs may live on any device and carry autograd history; the dynamic program
runs on the CPU (one transfer per batch) and results come back on the costs'
device.

Modules, by role: :mod:`.encoding` (collections flattened once, symbol indices and tables),
:mod:`.batch` (:class:`PairBatch` and the autograd functions over the kernels),
:mod:`.functional` (single pairs and lists of pairs), :mod:`.pairwise` (many pairs and
matrices: :class:`~.pairwise.PairwisePlan`) and :mod:`.limits` (memory bounds). Layer: ops
(imports the kernels, the cost modules and :mod:`bedl_torch.labels`).
"""
from . import limits
from .batch import PairBatch, SymbolTableKernels
from .encoding import FlatTable, check_rel_tol, default_rel_tol, matrix_view
from .functional import (
    coopt_matrix,
    coopt_matrix_batch,
    edit_distance,
    edit_distance_batch,
    pair_costs,
    pseudo_edit_distance,
    soft_edit_distance,
    soft_edit_distance_batch,
)
from .pairwise import (PairwisePlan, pair_chunks, pairwise_distances, size_order_chunks,
                       table_pair_distances)

__all__ = [
    "edit_distance",
    "coopt_matrix",
    "pseudo_edit_distance",
    "edit_distance_batch",
    "coopt_matrix_batch",
    "soft_edit_distance",
    "soft_edit_distance_batch",
    "pair_costs",
    "PairBatch",
    "FlatTable",
    "pairwise_distances",
    "table_pair_distances",
    "default_rel_tol",
]
