"""Cost modules without a whole symbol table (large alphabets, CosineCost).

* Local symbol tables: the ops gather a batch's costs from a table over only the symbols in
  use (``SymbolCost.symbol_subtable``); reference: the padded path (``forward`` per pair).
* Pairs regrouped by size into chunks (``ops.pair_chunks``).
* BEDL's pseudo-mode metric step on the sparse symbol pairs of P0 (``ObjectiveFactory.pair_cost_terms``);
  reference: autograd through the padded pseudo distances ``sum(P0 * C)``.
"""
import random

import pytest
import torch

import bedl_torch
from bedl_torch import _ext, ops
from bedl_torch.costs import subtable_of, table_of
from bedl_torch.learning import BEDL
from bedl_torch.learning.training import ObjectiveFactory
from bedl_torch.pretrained import CosineCost
from lbfgs_probe import ProbeLBFGS
from oracles import random_tree


def _trees(count, seed, alphabet, max_size=10):
    rng = random.Random(seed)
    return [bedl_torch.Tree(*random_tree(rng.randint(1, max_size), alphabet, rng.randrange(10**6)))
            for _ in range(count)]


def _sequences(count, seed, alphabet, max_len=10):
    rng = random.Random(seed)
    return [[rng.choice(alphabet) for _ in range(rng.randint(0, max_len))] for _ in range(count)]


class _BigEuclidean(bedl_torch.EuclideanCost):
    """An EuclideanCost treated as too large for a whole table (as above 2,048 symbols)."""

    table_limit = 0


def _cosine(n_words=12, dim=4, seed=0, zero_word=True):
    gen = torch.Generator().manual_seed(seed)
    vecs = torch.randn(n_words, dim, dtype=torch.float64, generator=gen)
    if zero_word:
        vecs[3] = 0.0  # a word missing from the pretrained vectors
    omega = torch.eye(dim, dtype=torch.float64) + 0.3 * torch.randn(dim, dim, dtype=torch.float64,
                                                                    generator=gen)
    words = [f"w{i}" for i in range(n_words)]
    return CosineCost(words, vecs, omega=omega), words


def _spy_symbol_kernels(monkeypatch):
    calls = []
    for name in ("ted_symbols_cpu", "sed_symbols_cpu", "ted_symbols_sums_cpu", "sed_symbols_sums_cpu"):
        orig = getattr(_ext, name)

        def wrapped(table, *args, _orig=orig):
            calls.append(tuple(table.shape))
            return _orig(table, *args)

        monkeypatch.setattr(_ext, name, wrapped)
    return calls


def test_cosine_subtable_equals_forward_with_gradients():
    cost, words = _cosine()
    symbols = torch.tensor([0, 3, 5, 7, cost.n_words, cost.gap_index])  # words, None, gap
    sub = subtable_of(cost, symbols)
    full = cost(symbols[None], symbols[None])[0]
    torch.testing.assert_close(sub, full, rtol=0, atol=1e-15)
    assert torch.all(sub.diagonal() == 0)
    weights = torch.linspace(0.1, 1.0, sub.numel(), dtype=torch.float64).view_as(sub)
    (g_sub,) = torch.autograd.grad((sub * weights).sum(), cost.Omega)
    (g_full,) = torch.autograd.grad((full * weights).sum(), cost.Omega)
    torch.testing.assert_close(g_sub, g_full, rtol=1e-12, atol=1e-14)
    # a subclass that changes forward alone gets its forward, not the inherited shortcut

    class Doubled(CosineCost):
        def forward(self, x_idx, y_idx):
            return 2.0 * super().forward(x_idx, y_idx)

    doubled = Doubled(words, cost.vectors, omega=cost.Omega.detach())
    torch.testing.assert_close(subtable_of(doubled, symbols), 2.0 * full.detach(), rtol=0, atol=1e-15)


@pytest.mark.parametrize("kind", ["tree", "sequence"])
@pytest.mark.parametrize("cost_kind", ["euclidean", "cosine"])
def test_local_table_equals_padded_path(monkeypatch, kind, cost_kind):
    if cost_kind == "euclidean":
        alphabet = [f"s{i}" for i in range(30)]
        gen = torch.Generator().manual_seed(1)
        cost = _BigEuclidean(alphabet, torch.randn(30, 3, dtype=torch.float64, generator=gen))
    else:
        cost, alphabet = _cosine(n_words=30)
    assert table_of(cost) is None
    objs = (_trees(10, 2, alphabet[:8]) if kind == "tree" else _sequences(10, 2, alphabet[:8]))
    xs = [a for a in objs for _ in objs]
    ys = [b for _ in objs for b in objs]
    batch = bedl_torch.PairBatch(xs, ys)
    weights = torch.linspace(0.5, 2.0, len(batch), dtype=torch.float64)
    calls = _spy_symbol_kernels(monkeypatch)

    def run():
        param = next(cost.parameters())
        param.grad = None
        d = batch.distances(cost)
        (d * weights).sum().backward()
        dc, P = batch.coopt(cost)
        D = bedl_torch.pairwise_distances(objs, cost=cost)
        D.sum().backward()  # accumulates onto the batch's gradient
        return d.detach(), dc, P, D.detach(), param.grad.clone()

    local = run()
    # the local tables hold the 8 symbols in use (and the gap), never the whole alphabet
    assert calls and all(shape[0] <= 9 for shape in calls)
    calls.clear()
    monkeypatch.setattr(ops.limits, "LOCAL_TABLE_CELLS", 0)
    padded = run()
    assert not calls
    for a, b in zip(local, padded):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_local_table_with_unknown_labels_as_gap():
    cost, alphabet = _cosine(n_words=10)
    objs = _sequences(6, 3, alphabet[:5] + ["not-a-word"])
    with torch.no_grad():
        D = bedl_torch.pairwise_distances(objs, cost=cost, unknown="gap")
        ops_limit = ops.limits.LOCAL_TABLE_CELLS
        try:
            ops.limits.LOCAL_TABLE_CELLS = 0
            D_ref = bedl_torch.pairwise_distances(objs, cost=cost, unknown="gap")
        finally:
            ops.limits.LOCAL_TABLE_CELLS = ops_limit
    torch.testing.assert_close(D, D_ref, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="missing from the cost's alphabet"):
        bedl_torch.pairwise_distances(objs, cost=cost)


def test_local_table_nan_costs_raise():
    cost, alphabet = _cosine(n_words=10)
    with torch.no_grad():
        cost.Omega[0, 0] = float("nan")
    with pytest.raises(ValueError, match="finite"):
        bedl_torch.pairwise_distances(_sequences(4, 4, alphabet), cost=cost)


@pytest.mark.parametrize("chunk_size", [None, 7])
def test_pair_chunks_cover_every_pair_once_grouped_by_size(monkeypatch, chunk_size):
    objs = _sequences(40, 5, list("abc"), max_len=30)
    table = ops.FlatTable(objs, "X")
    ii = torch.arange(40).repeat_interleave(40)
    jj = torch.arange(40).repeat(40)
    monkeypatch.setattr(ops.limits, "CHUNK_CELLS", 2000)
    oi, oj, bounds = ops.pair_chunks(table, table, ii, jj, chunk_size)
    assert sorted(zip(oi.tolist(), oj.tolist())) == sorted(zip(ii.tolist(), jj.tolist()))
    assert bounds[0] == 0 and bounds[-1] == len(ii) and all(a < b for a, b in zip(bounds, bounds[1:]))
    key = torch.maximum(table.lengths[oi], table.lengths[oj])
    assert torch.all(key[1:] >= key[:-1])
    for s, e in zip(bounds, bounds[1:]):
        if chunk_size is not None:
            assert e - s <= chunk_size
            continue
        rows = int(table.lengths[oi[s:e]].max()) + 1
        cols = int(table.lengths[oj[s:e]].max()) + 1
        assert e - s == 1 or (e - s) * rows * cols <= 2000
    # and the matrix is the same whatever the chunking
    with torch.no_grad():
        D = bedl_torch.pairwise_distances(objs, chunk_size=chunk_size)
        D1 = bedl_torch.pairwise_distances(objs, chunk_size=len(ii))
    assert torch.equal(D, D1)


@pytest.mark.parametrize("n_prototypes", [1, 2])
def test_sparse_pseudo_metric_step_matches_autograd(monkeypatch, n_prototypes):
    """The metric step for a cosine cost (no dense symbol-pair table) equals the GLVQ objective
    differentiated by autograd through the padded pseudo distances sum(P0 * C(Omega))."""
    cost, words = _cosine(n_words=14, seed=3)
    rng = random.Random(6)
    X = [[rng.choice(words[:7] if k % 2 else words[5:]) for _ in range(rng.randint(2, 8))]
         for k in range(24)]
    y = [k % 2 for k in range(24)]
    calls = []
    orig = ObjectiveFactory.pair_cost_terms

    def spy(self, *args):
        calls.append(1)
        return orig(self, *args)

    monkeypatch.setattr(ObjectiveFactory, "pair_cost_terms", spy)
    ProbeLBFGS.install(monkeypatch)
    start = cost.Omega.detach().clone()
    model = BEDL(n_prototypes=n_prototypes, max_rounds=1, cost=cost, beta=0.05).fit(X, y)
    assert calls == [1]
    (records,) = ProbeLBFGS.records

    # reference: the same prototypes, P0 at the starting Omega, autograd on padded costs
    protos = model.prototype_indices_
    m = len(X)
    batch = bedl_torch.PairBatch([X[i] for i in range(m) for _ in protos],
                                 [X[int(j)] for _ in range(m) for j in protos])
    ref = CosineCost(words, cost.vectors, omega=start)
    _, P0 = batch.coopt(ref)
    same = torch.tensor([[y[i] == y[int(j)] for j in protos] for i in range(m)])
    for (loss, grad), point in zip(records, ProbeLBFGS.points):
        with torch.no_grad():
            ref.Omega.copy_(point)
        ref.Omega.grad = None
        d = (P0 * batch.costs(ref)).sum(dim=(1, 2)).view(m, len(protos))
        inf = torch.tensor(float("inf"), dtype=d.dtype)
        d_plus = torch.where(same, d, inf).min(1).values
        d_minus = torch.where(same, inf, d).min(1).values
        want = model._objective(d_plus, d_minus, ref)
        want.backward()
        assert grad.abs().max() > 1e-3
        assert loss == pytest.approx(float(want.detach()), rel=1e-12)
        torch.testing.assert_close(grad, ref.Omega.grad, rtol=1e-9, atol=1e-11)
