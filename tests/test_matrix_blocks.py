"""pairwise_distances of a matrix with more kernel pairs than ``limits.MATRIX_BLOCK_PAIRS``,
in exact mode without a gradient to record, runs in blocks of consecutive rows (bounded
memory): every entry as the slow references give it and as one call gives it, bit for bit.
A gradient to record, or another mode, keeps one call."""
import numpy as np
import pytest
import torch

import bedl_torch as bt
from bedl_torch import ops
from bedl_torch.ops.pairwise import PairwisePlan
from oracles import comb_tree, forest_recursion, path_tree, random_costs, random_sequence, random_tree, \
    sequence_reference, star_tree


def _raw_trees(rng, n):
    raw = [random_tree(int(rng.integers(1, 8)), "abc", rng) for _ in range(n - 3)]
    return raw + [path_tree(5, list("abcab")), star_tree(6, "b"), comb_tree(5, "c")]


def _spy_blocks(monkeypatch):
    """The number of pairs of each block that PairwisePlan.matrix_in_blocks computes (the
    one-call path never calls chunk_values)."""
    seen = []
    real = PairwisePlan.chunk_values

    def spy(self, x_table, y_table, ii, jj, view, ref_view):
        seen.append(len(ii))
        return real(self, x_table, y_table, ii, jj, view, ref_view)

    monkeypatch.setattr(PairwisePlan, "chunk_values", spy)
    return seen


def _embedding_cost(alphabet, seed, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    return bt.EuclideanCost(list(alphabet), torch.randn(len(alphabet), 3, generator=gen, dtype=dtype))


@pytest.mark.parametrize("max_pairs", [1, 7, 40])
def test_blocked_unit_matrix_equals_one_call_and_the_forest_recursion(monkeypatch, max_pairs):
    rng = np.random.default_rng(38)
    raw = _raw_trees(rng, 13)
    X = [bt.Tree(*t) for t in raw]
    one = bt.pairwise_distances(X)  # 91 kernel pairs: one call
    monkeypatch.setattr(ops.limits, "MATRIX_BLOCK_PAIRS", max_pairs)
    seen = _spy_blocks(monkeypatch)
    D = bt.pairwise_distances(X)
    n = len(X)
    assert len(seen) > 1 and sum(seen) == n * (n + 1) // 2  # the triangle, each pair once
    assert max(seen) <= max(max_pairs, n)  # (a block holds at least one row)
    assert torch.equal(D, one)
    for i in range(n):
        for j in range(n):
            want = forest_recursion(raw[i], raw[j], random_costs(raw[i], raw[j], "unit", rng))[0]
            assert float(D[i, j]) == want, (i, j)


@pytest.mark.parametrize("kind", ["trees", "sequences"])
@pytest.mark.parametrize("same", [True, False])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_blocked_matrix_under_learned_costs_equals_one_call_bit_for_bit(monkeypatch, kind, same, dtype):
    rng = np.random.default_rng(7)
    if kind == "trees":
        X = [bt.Tree(*t) for t in _raw_trees(rng, 11)]
        Y = [bt.Tree(*random_tree(int(rng.integers(1, 9)), "abcd", rng)) for _ in range(9)]
    else:
        X = [random_sequence(int(rng.integers(0, 9)), "abc", rng) for _ in range(11)]
        Y = [random_sequence(int(rng.integers(0, 9)), "abcd", rng) for _ in range(9)]
    Y = None if same else Y
    cost = _embedding_cost("abcd", 3, dtype)
    with torch.no_grad():
        one = bt.pairwise_distances(X, Y, cost=cost)
        monkeypatch.setattr(ops.limits, "MATRIX_BLOCK_PAIRS", 10)
        seen = _spy_blocks(monkeypatch)
        D = bt.pairwise_distances(X, Y, cost=cost)
    ny = len(X) if same else len(Y)
    assert len(seen) > 1 and sum(seen) == (len(X) * (len(X) + 1) // 2 if same else len(X) * ny)
    assert D.dtype == dtype and torch.equal(D, one)
    if kind == "sequences" and dtype == torch.float64:
        # and the slow reference, entry by entry, under the same module's costs
        Ys = X if same else Y
        alphabet = list("abcd")
        with torch.no_grad():
            table = cost.embedding
            for i, x in enumerate(X):
                for j, y in enumerate(Ys):
                    ex = [table[alphabet.index(a)] for a in x] + [torch.zeros(3, dtype=dtype)]
                    ey = [table[alphabet.index(b)] for b in y] + [torch.zeros(3, dtype=dtype)]
                    C = np.array([[float(torch.linalg.vector_norm(a - b)) for b in ey] for a in ex])
                    C[len(x), len(y)] = 0.0
                    want = sequence_reference(x, y, C)[0]
                    assert abs(float(D[i, j]) - want) <= 1e-9 * max(1.0, want), (i, j)


def test_a_gradient_or_another_mode_keeps_one_call(monkeypatch):
    rng = np.random.default_rng(5)
    X = [bt.Tree(*t) for t in _raw_trees(rng, 9)]
    cost = _embedding_cost("abc", 11)
    with torch.no_grad():
        blocked_free = bt.pairwise_distances(X, cost=cost)
    monkeypatch.setattr(ops.limits, "MATRIX_BLOCK_PAIRS", 4)
    seen = _spy_blocks(monkeypatch)
    D = bt.pairwise_distances(X, cost=cost)  # a graph to record: one call
    assert not seen and D.requires_grad
    assert torch.equal(D.detach(), blocked_free)
    D.sum().backward()
    assert cost.embedding.grad is not None and bool(torch.isfinite(cost.embedding.grad).all())
    with torch.no_grad():
        bt.pairwise_distances(X, cost=cost, mode="pseudo")
        bt.pairwise_distances(X, cost=cost, mode="soft", temperature=0.5)
    assert not seen
    with torch.no_grad():
        blocked = bt.pairwise_distances(X, cost=cost)
    assert len(seen) > 1 and torch.equal(blocked, blocked_free)


@pytest.mark.parametrize("kind", ["cosine", "euclidean"])
@pytest.mark.parametrize("trees_", [True, False])
@pytest.mark.parametrize("same", [True, False])
def test_tiles_of_symbols_in_blocks_equal_one_call_bit_for_bit(monkeypatch, kind, trees_, same):
    """Without one symbol view (a module without a whole table, more symbols than a local
    table holds) the blocks are the tiles of symbols that one call cuts, with the same tables."""
    from test_large_alphabet import _make_cost, _sequences, _trees
    cost, alphabet = _make_cost(kind, 40, torch.float64)
    make = _trees if trees_ else _sequences
    X = make(17, 1, alphabet)
    Y = None if same else make(13, 2, alphabet)
    monkeypatch.setattr(ops.limits, "LOCAL_TABLE_CELLS", 12 * 12)  # runs of at most 11 symbols
    with torch.no_grad():
        one = bt.pairwise_distances(X, Y, cost=cost, unknown="gap")
        calls = []
        real = PairwisePlan.values

        def spy(self, ii, jj):
            calls.append((ii.clone(), jj.clone()))
            return real(self, ii, jj)

        monkeypatch.setattr(PairwisePlan, "values", spy)
        monkeypatch.setattr(ops.limits, "MATRIX_BLOCK_PAIRS", 5)
        D = bt.pairwise_distances(X, Y, cost=cost, unknown="gap")
    assert len(calls) > 2 and torch.equal(D, one)
    nx, ny = len(X), len(X if same else Y)
    seen = sorted(p for ii, jj in calls for p in zip(ii.tolist(), jj.tolist()))
    assert seen == [(i, j) for i in range(nx) for j in range(ny) if j >= i or not same]
    if any(p.requires_grad for p in cost.parameters()):
        calls.clear()
        G = bt.pairwise_distances(X, Y, cost=cost, unknown="gap")  # a graph to record: one call
        assert len(calls) == 1 and G.requires_grad and torch.equal(G.detach(), one)
