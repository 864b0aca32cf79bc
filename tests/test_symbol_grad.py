"""The gradient of distances computed from a symbol cost table (the symbol-table gradient
kernels, ``bedl_torch::ted_symbols_grad`` / ``sed_symbols_grad``), against the sum of the
pairs' co-optimal matrices P, computed pair by pair with ``coopt_matrix`` in float64 and
scattered by label; and the kernels' own contract (thread count, zero weights, checks)."""
import numpy as np
import pytest
import torch
from torch import nn

import bedl_torch as bt
from bedl_torch import _ext
from bedl_torch.costs import SymbolCost
from bedl_torch.ops import PairBatch, _SymbolEditDistanceFn, default_rel_tol

import oracles

ALPHABET = ["a", "b", "c", "d"]
GAP = len(ALPHABET)


class TableCost(SymbolCost):
    """A learnable (U + 1, U + 1) symbol table, handed to the kernels whole."""

    def __init__(self, alphabet, table):
        super().__init__(alphabet)
        self.table = nn.Parameter(table)

    @property
    def dtype(self):
        return self.table.dtype

    @property
    def device(self):
        return self.table.device

    def forward(self, x_idx, y_idx):
        return self.table[x_idx[:, :, None], y_idx[:, None, :]]

    def symbol_table(self):
        return self.table


def _table(kind, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    S = GAP + 1
    if kind == "unit":  # ties everywhere
        t = 1.0 - torch.eye(S, dtype=torch.float64)
    elif kind == "integer":  # many exact ties
        t = torch.randint(0, 3, (S, S), generator=g).to(torch.float64)
    else:  # random: mostly one co-optimal mapping
        t = 0.1 + torch.rand(S, S, generator=g, dtype=torch.float64)
    t[GAP, GAP] = 0.0
    return t.to(dtype)


def _objects(kind, count, seed, labels=ALPHABET, sizes=(1, 9)):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(sizes[0], sizes[1] + 1))
        if kind == "tree":
            out.append(bt.Tree(*oracles.random_tree(n, labels, rng)))
        else:
            out.append(oracles.random_sequence(n, labels, rng))
    return out


def _labels(obj):
    return list(obj.labels) if isinstance(obj, bt.Tree) else list(obj)


def _reference_grad(X, Y, table, weights):
    """sum_(i, j) weights[i, j] * P_ij scattered by label, each P from coopt_matrix on the
    pair's padded costs (float64 copies of the table's values, the table dtype's tolerance);
    labels outside the alphabet are the gap."""
    rel_tol = default_rel_tol(table.dtype)
    t = table.detach().to(torch.float64)
    index = {a: k for k, a in enumerate(ALPHABET)}
    grad = torch.zeros_like(t)
    for i, x in enumerate(X):
        lx = torch.tensor([index.get(a, GAP) for a in _labels(x)] + [GAP])
        for j, y in enumerate(Y):
            ly = torch.tensor([index.get(a, GAP) for a in _labels(y)] + [GAP])
            C = t[lx[:, None], ly[None, :]].clone()
            C[-1, -1] = 0.0
            _, P = bt.coopt_matrix(x, y, C, rel_tol=rel_tol)
            P = P.clone()
            P[-1, -1] = 0.0
            grad.index_put_((lx[:, None].expand_as(P), ly[None, :].expand_as(P)),
                            float(weights[i, j]) * P, accumulate=True)
    return grad


def _kernel_grad(X, Y, table, weights, unknown="error"):
    cost = TableCost(ALPHABET, table.clone())
    D = bt.pairwise_distances(X, Y, cost=cost, unknown=unknown)
    (D * weights.to(D.dtype)).sum().backward()
    return cost.table.grad


def _tolerances(dtype):
    return dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("table_kind", ["random", "unit", "integer"])
@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_gradient_is_the_weighted_sum_of_coopt_matrices(kind, table_kind, dtype):
    X = _objects(kind, 5, seed=1)
    Y = _objects(kind, 4, seed=2)
    table = _table(table_kind, dtype, seed=3)
    weights = torch.randn(len(X), len(Y), generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    got = _kernel_grad(X, Y, table, weights)
    assert got.dtype == dtype
    want = _reference_grad(X, Y, table, weights)
    assert torch.allclose(got.to(torch.float64), want, **_tolerances(dtype))
    assert want.abs().sum() > 0


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_unknown_labels_mapped_to_the_gap(kind):
    """Labels outside the alphabet read the gap's row and column: their replacements and
    deletions land there (the [gap, gap] entry included)."""
    labels = ALPHABET + ["z", "w"]
    X = _objects(kind, 4, seed=5, labels=labels)
    Y = _objects(kind, 3, seed=6, labels=labels)
    assert any(a in ("z", "w") for x in X for a in _labels(x))
    table = _table("random", torch.float64, seed=7)
    table[GAP, GAP] = 0.25  # read for unknown labels against each other
    weights = torch.rand(len(X), len(Y), generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    got = _kernel_grad(X, Y, table, weights, unknown="gap")
    want = _reference_grad(X, Y, table, weights)
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    assert want[GAP, GAP] > 0


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_ties_split_the_gradient_between_coopt_mappings(kind):
    """One node a against b, c (a root with a child, or a sequence) under unit costs: a
    replaced by b and c inserted, or a replaced by c and b inserted, both cost 2 (deleting
    a costs 3). Each co-optimal mapping carries half the weight."""
    if kind == "tree":
        x, y = bt.Tree.from_bracket("{a}"), bt.Tree.from_bracket("{b{c}}")
    else:
        x, y = ["a"], ["b", "c"]
    table = _table("unit", torch.float64, seed=0)
    got = _kernel_grad([x], [y], table, torch.full((1, 1), 3.0, dtype=torch.float64))
    want = torch.zeros_like(table)
    want[0, 1] = want[0, 2] = 1.5  # a -> b, a -> c
    want[GAP, 1] = want[GAP, 2] = 1.5  # b, c inserted
    assert torch.equal(got, want)


@pytest.mark.parametrize("kind", ["tree", "sequence"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_matches_the_scatter_of_materialised_coopt(kind, dtype):
    """The gradient kernel against the path that keeps P (want_coopt): the same sums up to
    their order."""
    X = _objects(kind, 6, seed=9)
    Y = _objects(kind, 5, seed=10)
    batch = PairBatch.from_tables(bt.ops.FlatTable(X, "X"), bt.ops.FlatTable(Y, "Y"),
                                  torch.arange(len(X)).repeat_interleave(len(Y)),
                                  torch.arange(len(Y)).repeat(len(X)))
    weights = torch.randn(len(batch), generator=torch.Generator().manual_seed(11), dtype=dtype)
    grads = []
    for want_coopt in (False, True):
        cost = TableCost(ALPHABET, _table("integer", dtype, seed=12))
        view = batch._symbol_view(cost, "error")
        d, _ = _SymbolEditDistanceFn.apply(view.table, batch, view, default_rel_tol(dtype), want_coopt)
        (d * weights).sum().backward()
        grads.append(cost.table.grad)
    assert torch.allclose(grads[0], grads[1], **_tolerances(dtype))


def _op_args(kind, count=30, seed=13, sizes=(15, 25)):
    X = _objects(kind, count, seed=seed, sizes=sizes)
    cost = TableCost(ALPHABET, _table("random", torch.float64, seed=seed))
    table = bt.ops.FlatTable(X, "X")
    labels = table.flat_labels(cost, "error")
    px = torch.arange(count).repeat_interleave(count)
    py = torch.arange(count).repeat(count)
    t = cost.table.detach()
    if kind == "tree":
        return _ext.ted_symbols_grad_cpu, (t, labels, table.sizes, table.ptr, labels, table.sizes, table.ptr, px, py)
    return _ext.sed_symbols_grad_cpu, (t, labels, table.ptr, labels, table.ptr, px, py)


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_same_bits_for_one_and_two_threads(kind):
    op, args = _op_args(kind)
    weights = torch.randn(len(args[-1]), generator=torch.Generator().manual_seed(14), dtype=torch.float64)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = op(*args, weights, 1e-9)
        torch.set_num_threads(2)
        two = [op(*args, weights, 1e-9) for _ in range(3)]
    finally:
        torch.set_num_threads(threads)
    for g in two:
        assert torch.equal(g, one)
    assert one.abs().sum() > 0


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_zero_weights_add_nothing(kind):
    """Pairs of weight 0 are skipped; the rest sum as if alone."""
    op, args = _op_args(kind, count=6, sizes=(2, 8))
    B = len(args[-1])
    weights = torch.zeros(B, dtype=torch.float64)
    weights[3], weights[17] = 2.0, -0.5
    got = op(*args, weights, 1e-9)
    want = torch.zeros_like(got)
    for b in (3, 17):
        single = list(args)
        single[-2], single[-1] = args[-2][b:b + 1], args[-1][b:b + 1]
        want += op(*single, weights[b:b + 1], 1e-9)
    assert torch.allclose(got, want, rtol=1e-15, atol=0)
    assert torch.equal(op(*args, torch.zeros(B, dtype=torch.float64), 1e-9), torch.zeros_like(got))


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_bad_weights_and_overflow(kind):
    op, args = _op_args(kind, count=3, sizes=(2, 4))
    B = len(args[-1])
    with pytest.raises(TypeError, match="pair_weights must have the dtype of symbol_costs"):
        op(*args, torch.ones(B, dtype=torch.float32), 1e-9)
    with pytest.raises(ValueError, match=rf"pair_weights must have shape \({B},\)"):
        op(*args, torch.ones(B + 1, dtype=torch.float64), 1e-9)
    huge = list(args)
    huge[0] = torch.full_like(args[0], 1e308)
    with pytest.raises(ValueError, match="too large"):
        op(*huge, torch.ones(B, dtype=torch.float64), 1e-9)
