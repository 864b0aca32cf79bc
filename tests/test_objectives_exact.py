"""Exact mode's numpy evaluator for the default Euclidean cost, which calls the symbol-table
kernels directly (ops.SymbolTableKernels), against the autograd evaluator (ExactObjective:
autograd through PairBatch.distances and the cost module) and the kernels against the padded
cost path, for sequences and trees, with unknown labels mapped to the gap.

The problems are built by hand: two classes of five objects over a, b, c (one object holds
the unknown label z), prototypes [1, 7] (one per class: the selection is fixed) or [0, 2, 7]
(two of class 0: each evaluation picks the closer one), at two generic embeddings under which
the selection differs and no two prototypes tie.
"""
import copy

import numpy as np
import pytest
import torch

from bedl_torch.costs import EuclideanCost
from bedl_torch.learning.objectives import (
    ExactObjective,
    LossTerms,
    NumpyEuclideanExactObjective,
    PrototypePairs,
    padded_symbol_indices,
)
from bedl_torch.ops import PairBatch, SymbolTableKernels, pairwise_distances
from bedl_torch.tree import Tree

F64 = torch.float64
REL = 1e-12

STRINGS = ["ab", "abca", "ca", "bcc", "az", "cab", "bb", "acbb", "cc", "ba"]
TREES = [Tree.from_bracket(s) for s in
         ["{a{b}{c}}", "{a{b{c}}{a}}", "{c{a}}", "{b{c}{c}}", "{a{z}}",
          "{c{a}{b}}", "{b{b}}", "{a{c}{b{b}}}", "{c{c}}", "{b{a}}"]]
LABELS = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1, 1])
OBJECTS = {"sequence": STRINGS, "tree": TREES}
# generic embeddings of a, b, c in two dimensions (the gap is the origin)
EMBEDDINGS = [[[0.9, -0.2], [0.1, 0.7], [-0.4, 0.35]],
              [[0.3, 0.5], [-0.6, 0.2], [0.8, -0.5]]]
LOSSES = [LossTerms("log4", "both", 0.3), LossTerms("sigmoid", "frobenius", 0.2)]


def _cost(embedding):
    return EuclideanCost(list("abc"), embedding=torch.tensor(embedding, dtype=F64))


def _problem(kind, prototypes):
    X = OBJECTS[kind]
    m, P = len(X), len(prototypes)
    protos = torch.as_tensor(prototypes, dtype=torch.long)
    base = PairBatch(X, X)
    full = PairBatch.from_tables(base.x_table, base.y_table,
                                 torch.arange(m).repeat_interleave(P), protos.repeat(m))
    same = torch.as_tensor(LABELS[:, None] == LABELS[prototypes][None, :])
    return X, protos, full, PrototypePairs(same)


def _selection(X, prototypes, pairs, embedding):
    """The closest correct and wrong prototype of every point, from the distance matrix, after
    checking that no point's two candidates tie."""
    with torch.no_grad():
        d = pairwise_distances(X, [X[k] for k in prototypes], _cost(embedding), unknown="gap")
    picks = []
    for mask in (pairs.same, ~pairs.same):
        masked = torch.where(mask, d, torch.tensor(float("inf"), dtype=F64))
        two = masked.topk(2, dim=1, largest=False).values
        finite = torch.isfinite(two[:, 1])
        assert torch.all(two[finite, 1] - two[finite, 0] > 1e-2)
        picks.append(masked.argmin(1))
    return torch.cat(picks)


@pytest.mark.parametrize("loss", LOSSES, ids=["log4-both", "sigmoid-frobenius"])
@pytest.mark.parametrize("prototypes", [[1, 7], [0, 2, 7]], ids=["fixed", "selected"])
@pytest.mark.parametrize("kind", ["sequence", "tree"])
def test_direct_kernels_equal_the_autograd_objective(kind, prototypes, loss):
    X, protos, full, pairs = _problem(kind, prototypes)
    assert (pairs.fixed is not None) == (len(prototypes) == 2)
    if pairs.fixed is None:  # the evaluations below change the selection
        picks = [_selection(X, prototypes, pairs, e) for e in EMBEDDINGS]
        assert not torch.equal(picks[0], picks[1])
    cost = _cost(EMBEDDINGS[0])
    ref_cost = copy.deepcopy(cost)
    fast = NumpyEuclideanExactObjective(cost, full, protos, pairs, loss, "gap")
    ref = ExactObjective(ref_cost, [ref_cost.embedding], full, protos, pairs, loss, "gap")
    assert fast.direct
    # back and forth between the embeddings: the cached kernels follow the selection
    for embedding in EMBEDDINGS + EMBEDDINGS[:1]:
        x = np.asarray(embedding, dtype=np.float64).reshape(-1)
        value, grad = fast.flat_value_and_grad(x.copy())
        want_value, want_grad = ref.flat_value_and_grad(x.copy())
        assert np.abs(want_grad).max() > 1e-3  # a gradient worth comparing
        assert value == pytest.approx(want_value, rel=REL)
        assert np.abs(grad - want_grad).max() <= REL * np.abs(want_grad).max()
        assert float(fast.value()) == pytest.approx(float(ref.value()), rel=REL)
    assert fast.n_evals == ref.n_evals == 3


def _seven_pairs(kind):
    """Seven pairs of OBJECTS[kind] (a repeated x, an unknown label) under one cost."""
    X = OBJECTS[kind]
    base = PairBatch(X, X)
    pair_x = torch.tensor([0, 4, 4, 3, 9, 7, 2])
    pair_y = torch.tensor([7, 1, 4, 8, 0, 5, 6])
    batch = PairBatch.from_tables(base.x_table, base.y_table, pair_x, pair_y)
    return X, _cost(EMBEDDINGS[1]), batch, pair_x, pair_y


@pytest.mark.parametrize("kind", ["sequence", "tree"])
def test_symbol_table_kernels_equal_the_padded_cost_path(kind):
    """Distances and the weighted gradient in the table's entries against the padded costs
    gathered from the table (the padded kernels, autograd through the gather); the unknown
    label z reads the gap's row."""
    X, cost, batch, pair_x, pair_y = _seven_pairs(kind)
    table = cost.symbol_table().detach().clone().requires_grad_(True)
    idx = padded_symbol_indices(X, cost, "gap")
    assert idx[4, 1] == cost.gap_index  # z
    costs = table[idx[pair_x, : batch.rows][:, :, None], idx[pair_y, : batch.cols][:, None, :]]
    want = batch.distances(costs)
    weights = torch.tensor([0.5, -1.25, 2.0, 0.75, -0.3, 1.5, 1.1], dtype=F64)
    (want * weights).sum().backward()
    kernels = SymbolTableKernels(batch, cost, "gap")
    d = kernels.distances(table.detach(), 1e-9)
    torch.testing.assert_close(d, want.detach(), rtol=REL, atol=0)
    assert float(d[2]) == 0.0 and float(d.min()) >= 0.0 and float(d.max()) > 0.5
    grad = kernels.weighted_grad(table.detach(), weights, 1e-9)
    assert grad.shape == table.shape
    assert float(table.grad.abs().max()) > 0.1
    torch.testing.assert_close(grad, table.grad, rtol=REL, atol=REL * float(table.grad.abs().max()))


@pytest.mark.parametrize("kind", ["sequence", "tree"])
def test_symbol_table_kernels_sums_give_the_same_bits(kind, monkeypatch):
    """Distances with each pair's sums (the exact objective's one pass per evaluation) equal the
    distances alone, and the gradient from the sums equals weighted_grad, bit for bit; where
    the sums would not fit, none come back."""
    from bedl_torch import ops

    _, cost, batch, _, _ = _seven_pairs(kind)
    table = cost.symbol_table().detach().clone()
    weights = torch.tensor([0.5, -1.25, 2.0, 0.0, -0.3, 1.5, 1.1], dtype=F64)
    kernels = SymbolTableKernels(batch, cost, "gap")
    d, sums = kernels.distances_with_sums(table, 1e-9)
    assert sums is not None and torch.equal(d, kernels.distances(table, 1e-9))
    grad = kernels.grad_from_sums(sums, weights, table.shape)
    want = kernels.weighted_grad(table, weights, 1e-9)
    assert float(want.abs().max()) > 0.1 and torch.equal(grad, want)
    monkeypatch.setattr(ops.limits, "PAIR_SUM_ENTRIES", 1)
    d_none, none = kernels.distances_with_sums(table, 1e-9)
    assert none is None and torch.equal(d_none, d)


def test_symbol_table_kernels_reject_non_finite_tables():
    cost = _cost(EMBEDDINGS[0])
    batch = PairBatch(STRINGS[:3], STRINGS[3:6])
    table = cost.symbol_table().detach().clone()
    table[0, 1] = float("nan")
    kernels = SymbolTableKernels(batch, cost, "gap")
    with pytest.raises(ValueError, match="NaN or inf"):
        kernels.distances(table, 1e-9)
    with pytest.raises(ValueError, match="NaN or inf"):
        kernels.weighted_grad(table, torch.ones(3, dtype=F64), 1e-9)
