"""Properties of the library's distances, co-optimal matrices P and gradients.

Structural identities (row/column sums, d = sum(P * C), grad = P, symmetry under transposing
costs), batched == single (bit-identical), determinism across runs and thread counts, float64
gradcheck away from ties, float32, huge tie counts (600+ node trees, 1000+ sequences) against
closed forms and the exact-integer sequence DP, pseudo mode, pairwise_distances and the
Euclidean cost module.
"""

import os
import pathlib
import platform

import numpy as np
import pytest
import torch

import bedl_torch
from bedl_torch.tree import Tree
from oracles import (
    COST_KINDS,
    binomial_path_P,
    comb_tree,
    enumerate_mappings,
    mapping_cost,
    path_tree,
    random_costs,
    random_sequence,
    random_tree,
    sequence_reference,
    star_tree,
    zero_cost_sequence_P,
)


def lib(x):
    if isinstance(x, tuple):
        return Tree(x[0], x[1])
    return x


def size(x):
    return len(x[0]) if isinstance(x, tuple) else len(x)


def T(C, dtype=torch.float64):
    return torch.as_tensor(np.asarray(C), dtype=dtype)


def random_pairs(count, seed, *, trees=True, lo=1, hi=12, kinds=COST_KINDS, alphabet="abc"):
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        if trees:
            x = random_tree(int(rng.integers(lo, hi + 1)), alphabet, rng)
            y = random_tree(int(rng.integers(lo, hi + 1)), alphabet, rng)
        else:
            x = random_sequence(int(rng.integers(lo, hi + 1)), alphabet, rng)
            y = random_sequence(int(rng.integers(lo, hi + 1)), alphabet, rng)
        out.append((x, y, random_costs(x, y, kinds[k % len(kinds)], rng)))
    return out


def check_invariants(x, y, C, d, P, atol=1e-9):
    m, n = size(x), size(y)
    C = T(C, P.dtype)
    assert P.shape == (m + 1, n + 1)
    assert torch.isfinite(P).all() and torch.isfinite(d).all()
    assert P[m, n] == 0
    assert (P >= -atol).all() and (P <= 1 + atol).all()
    if m:
        torch.testing.assert_close(P[:m].sum(1), torch.ones(m, dtype=P.dtype), rtol=0, atol=atol)
    if n:
        torch.testing.assert_close(P[:, :n].sum(0), torch.ones(n, dtype=P.dtype), rtol=0,
                                   atol=atol)
    scale = max(1.0, float((C.abs()).sum()))
    assert abs(float((P * C).sum()) - float(d)) <= atol * scale


# ------------------------------------------------------------------------ structural identities
@pytest.mark.parametrize("trees", [True, False], ids=["trees", "sequences"])
def test_rows_cols_sum_to_one_and_d_is_sum_PC(trees):
    lo = 1 if trees else 0
    for x, y, C in random_pairs(300, 1, trees=trees, lo=lo, hi=30):
        d, P = bedl_torch.coopt_matrix(lib(x), lib(y), T(C))
        check_invariants(x, y, C, d, P)


@pytest.mark.parametrize("trees", [True, False], ids=["trees", "sequences"])
def test_autograd_gradient_is_P(trees):
    for x, y, C in random_pairs(150, 2, trees=trees, lo=0 if not trees else 1, hi=15):
        Ct = T(C).requires_grad_(True)
        d = bedl_torch.edit_distance(lib(x), lib(y), Ct)
        assert d.dim() == 0 and d.requires_grad
        (g,) = torch.autograd.grad(d, Ct)
        d2, P = bedl_torch.coopt_matrix(lib(x), lib(y), T(C))
        assert float(d.detach()) == float(d2)
        torch.testing.assert_close(g, P, rtol=0, atol=1e-12)
        assert g[size(x), size(y)] == 0


def test_gradient_flows_through_cost_history():
    """Costs produced by other ops get gradient P chained through them."""
    x, y = lib(random_tree(7, "ab", 3)), lib(random_tree(6, "ab", 4))
    base = torch.rand(8, 7, dtype=torch.float64, requires_grad=True)
    C = base * 2.0 + 0.5
    d = bedl_torch.edit_distance(x, y, C)
    d.backward()
    _, P = bedl_torch.coopt_matrix(x, y, C.detach())
    torch.testing.assert_close(base.grad, 2.0 * P, rtol=0, atol=1e-12)


@pytest.mark.parametrize("trees", [True, False], ids=["trees", "sequences"])
def test_transposed_costs_swap_roles(trees):
    """d(y, x; C^T) == d(x, y; C) and P(y, x; C^T) == P(x, y; C)^T for any costs."""
    for x, y, C in random_pairs(200, 3, trees=trees, lo=0 if not trees else 1, hi=14):
        d1, P1 = bedl_torch.coopt_matrix(lib(x), lib(y), T(C))
        Ct = np.ascontiguousarray(C.T)
        d2, P2 = bedl_torch.coopt_matrix(lib(y), lib(x), T(Ct))
        assert abs(float(d1) - float(d2)) <= 1e-12 * max(1.0, abs(float(d1)))
        torch.testing.assert_close(P2, P1.T, rtol=0, atol=1e-12)


def test_symmetric_module_costs_give_symmetric_distances():
    cost = euclidean(list("abcd"), 3, 1)
    rng = np.random.default_rng(4)
    X = [lib(random_tree(int(rng.integers(1, 12)), "abcd", rng)) for _ in range(8)]
    D = bedl_torch.pairwise_distances(X, None, cost).detach()
    torch.testing.assert_close(D, D.T, rtol=0, atol=1e-12)
    assert (D.diagonal().abs() <= 1e-12).all()


# ------------------------------------------------------------------------ batches, determinism
def _batches(trees, seed, count=40):
    pairs = random_pairs(count, seed, trees=trees, lo=0 if not trees else 1, hi=14)
    xs = [lib(x) for x, _, _ in pairs]
    ys = [lib(y) for _, y, _ in pairs]
    Cs = [T(C) for _, _, C in pairs]
    return xs, ys, Cs


@pytest.mark.parametrize("trees", [True, False], ids=["trees", "sequences"])
def test_batched_equals_single_bit_identical(trees):
    xs, ys, Cs = _batches(trees, 5)
    single_d = torch.stack([bedl_torch.edit_distance(x, y, C) for x, y, C in zip(xs, ys, Cs)])
    single = [bedl_torch.coopt_matrix(x, y, C) for x, y, C in zip(xs, ys, Cs)]
    bd = bedl_torch.edit_distance_batch(xs, ys, Cs)
    assert bd.shape == (len(xs),)
    assert torch.equal(bd, single_d)
    cd, cP = bedl_torch.coopt_matrix_batch(xs, ys, Cs)
    assert torch.equal(cd, single_d)
    assert len(cP) == len(xs)
    for (d, P), P2 in zip(single, cP):
        assert torch.equal(P, P2)

    # PairBatch with padded costs
    batch = bedl_torch.PairBatch(xs, ys)
    M = max(len(x) for x in xs)
    N = max(len(y) for y in ys)
    padded = torch.zeros(len(xs), M + 1, N + 1, dtype=torch.float64)
    for k, C in enumerate(Cs):
        padded[k, : C.shape[0], : C.shape[1]] = C
    assert torch.equal(batch.distances(padded), single_d)
    pd, pP = batch.coopt(padded)
    assert torch.equal(pd, single_d)
    assert pP.shape == (len(xs), M + 1, N + 1)
    for k, (d, P) in enumerate(single):
        m, n = P.shape
        assert torch.equal(pP[k, :m, :n], P)
        rest = pP[k].clone()
        rest[:m, :n] = 0
        assert (rest == 0).all(), "padding of P must be zero (pseudo_distances sums P0 * costs)"


def test_batch_gradients_equal_single():
    xs, ys, Cs = _batches(True, 6, count=12)
    Cs_b = [C.clone().requires_grad_(True) for C in Cs]
    bedl_torch.edit_distance_batch(xs, ys, Cs_b).sum().backward()
    for x, y, C, Cb in zip(xs, ys, Cs, Cs_b):
        C1 = C.clone().requires_grad_(True)
        bedl_torch.edit_distance(x, y, C1).backward()
        assert torch.equal(C1.grad, Cb.grad)


class _LearnableTableCost(bedl_torch.SymbolCost):
    """A learnable symbol table read by plain indexing: the per-pair cost matrices a test can
    also build by hand."""

    def __init__(self, alphabet, table):
        super().__init__(alphabet)
        self.table = torch.nn.Parameter(table.clone())

    def forward(self, x_idx, y_idx):
        return self.table[x_idx[..., :, None], y_idx[..., None, :]]


@pytest.mark.parametrize("trees", [True, False], ids=["trees", "sequences"])
def test_batch_functions_take_a_cost_module(trees):
    """edit_distance_batch, coopt_matrix_batch and soft_edit_distance_batch with a cost module
    equal the single-pair functions on the pairs' cost matrices built by indexing its table,
    and the gradient reaches the module's parameter (a module was "not iterable" before)."""
    rng = np.random.default_rng(3904)
    alphabet = list("abc")
    code = {a: k for k, a in enumerate(alphabet)}
    xs, ys = [], []
    for _ in range(7):
        m, n = int(rng.integers(1, 7)), int(rng.integers(1, 7))
        if trees:
            xs.append(Tree(*random_tree(m, alphabet, rng)))
            ys.append(Tree(*random_tree(n, alphabet, rng)))
        else:
            xs.append(random_sequence(m, alphabet, rng))
            ys.append(random_sequence(n, alphabet, rng))
    table = torch.tensor(rng.random((4, 4)), dtype=torch.float64)
    cost = _LearnableTableCost(alphabet, table)
    gap = len(alphabet)

    def labels(obj):
        return list(obj.labels) if isinstance(obj, Tree) else list(obj)

    Cs = []
    for x, y in zip(xs, ys):
        rows = [code[a] for a in labels(x)] + [gap]
        cols = [code[b] for b in labels(y)] + [gap]
        C = table[rows][:, cols].clone()
        C[-1, -1] = 0.0
        Cs.append(C)
    want = torch.stack([bedl_torch.edit_distance(x, y, C) for x, y, C in zip(xs, ys, Cs)])
    got = bedl_torch.edit_distance_batch(xs, ys, cost)
    assert torch.equal(got.detach(), want)
    got.sum().backward()
    want_grad = torch.zeros_like(table)
    for x, y, C in zip(xs, ys, Cs):
        rows = [code[a] for a in labels(x)] + [gap]
        cols = [code[b] for b in labels(y)] + [gap]
        P = bedl_torch.coopt_matrix(x, y, C)[1]
        for i, r in enumerate(rows):
            for j, c in enumerate(cols):
                want_grad[r, c] += P[i, j]
    torch.testing.assert_close(cost.table.grad, want_grad, rtol=0, atol=1e-12)
    d, P = bedl_torch.coopt_matrix_batch(xs, ys, cost)
    assert torch.equal(d.detach(), want)
    for k, (x, y, C) in enumerate(zip(xs, ys, Cs)):
        assert torch.equal(P[k, : C.shape[0], : C.shape[1]], bedl_torch.coopt_matrix(x, y, C)[1])
    soft = bedl_torch.soft_edit_distance_batch(xs, ys, cost, 0.5)
    assert torch.equal(soft.detach(), torch.stack([bedl_torch.soft_edit_distance(x, y, C, 0.5)
                                                   for x, y, C in zip(xs, ys, Cs)]))
    with pytest.raises(TypeError, match="costs must be a list of cost matrices, one padded tensor or a cost module"):
        bedl_torch.edit_distance_batch(xs, ys, 5)


def test_single_pair_functions_take_a_cost_module():
    """edit_distance, coopt_matrix, soft and pseudo distances and the alignment functions
    with a cost module equal them on the pair's cost matrix built by indexing its table."""
    from bedl_torch.alignments import edit_script, optimal_mapping

    rng = np.random.default_rng(3905)
    alphabet = list("abc")
    table = torch.tensor(rng.random((4, 4)), dtype=torch.float64)
    cost = _LearnableTableCost(alphabet, table)
    x, y = Tree(*random_tree(6, alphabet, rng)), Tree(*random_tree(5, alphabet, rng))
    rows = [alphabet.index(a) for a in x.labels] + [3]
    cols = [alphabet.index(b) for b in y.labels] + [3]
    C = table[rows][:, cols].clone()
    C[-1, -1] = 0.0
    assert torch.equal(bedl_torch.ops.pair_costs(x, y, cost).detach()[:-1, :-1], C[:-1, :-1])
    d = bedl_torch.edit_distance(x, y, cost)
    assert torch.equal(d.detach(), bedl_torch.edit_distance(x, y, C))
    d.backward()
    P = bedl_torch.coopt_matrix(x, y, C)[1]
    want_grad = torch.zeros_like(table)
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            want_grad[r, c] += P[i, j]
    torch.testing.assert_close(cost.table.grad, want_grad, rtol=0, atol=1e-12)
    assert torch.equal(bedl_torch.coopt_matrix(x, y, cost)[1], P)
    assert torch.equal(bedl_torch.soft_edit_distance(x, y, cost, 0.5).detach(),
                       bedl_torch.soft_edit_distance(x, y, C, 0.5))
    assert torch.equal(bedl_torch.pseudo_edit_distance(x, y, cost, cost).detach(),
                       bedl_torch.pseudo_edit_distance(x, y, C, C))
    assert optimal_mapping(x, y, cost) == optimal_mapping(x, y, C)
    assert edit_script(x, y, cost) == edit_script(x, y, C)
    with pytest.raises(ValueError, match="labels missing from the cost's alphabet"):
        bedl_torch.edit_distance(x, y, _LearnableTableCost(["a"], table[:2, :2]))


def test_deterministic_across_runs_and_threads():
    xs, ys, Cs = _batches(True, 7, count=64)
    sx, sy, sC = _batches(False, 8, count=64)
    old = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 2, 1, 2):
            torch.set_num_threads(threads)
            d, P = bedl_torch.coopt_matrix_batch(xs, ys, Cs)
            sd, sP = bedl_torch.coopt_matrix_batch(sx, sy, sC)
            D = bedl_torch.pairwise_distances(xs[:16], xs[16:32])
            results.append((d, P, sd, sP, D))
    finally:
        torch.set_num_threads(old)
    ref = results[0]
    for r in results[1:]:
        assert torch.equal(r[0], ref[0]) and torch.equal(r[2], ref[2]) and torch.equal(r[4], ref[4])
        assert all(torch.equal(a, b) for a, b in zip(r[1], ref[1]))
        assert all(torch.equal(a, b) for a, b in zip(r[3], ref[3]))


def test_parallel_schedule_equals_serial():
    """Enough work for the kernels to use several threads, which take pieces of the
    (size-sorted) pairs from a shared counter: every thread count gives the same bits."""
    rng = np.random.default_rng(23)
    X = [lib(random_tree(int(rng.integers(10, 41)), "abcd", rng)) for _ in range(40)]
    S = [random_sequence(int(rng.integers(5, 201)), "abcd", rng) for _ in range(40)]
    xs = [X[k % 40] for k in range(300)]
    ys = [X[(7 * k + 3) % 40] for k in range(300)]
    Cs = [T(random_costs(x, y, "arbitrary", rng)) for x, y in zip(xs, ys)]
    old = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            with torch.no_grad():
                d, P = bedl_torch.coopt_matrix_batch(xs, ys, Cs)
                results.append((bedl_torch.pairwise_distances(X), bedl_torch.pairwise_distances(S),
                                bedl_torch.edit_distance_batch(xs, ys, Cs), d, P))
    finally:
        torch.set_num_threads(old)
    for r in results[1:]:
        for a, b in zip(r[:4], results[0][:4]):
            assert torch.equal(a, b)
        assert all(torch.equal(a, b) for a, b in zip(r[4], results[0][4]))


# ------------------------------------------------------------------------ gradcheck, float32
def _gap_separated(x, y, C, gap=1e-3):
    """True iff the best mapping is unique by a margin of ``gap``."""
    m, n = size(x), size(y)
    costs = sorted(mapping_cost(M, C, m, n) for M in enumerate_mappings(x, y))
    return len(costs) < 2 or costs[1] - costs[0] > gap


@pytest.mark.parametrize("trees", [True, False], ids=["trees", "sequences"])
def test_gradcheck_float64_away_from_ties(trees):
    rng = np.random.default_rng(9)
    done = 0
    while done < 12:
        if trees:
            x = random_tree(int(rng.integers(1, 6)), "abc", rng)
            y = random_tree(int(rng.integers(1, 6)), "abc", rng)
        else:
            x = random_sequence(int(rng.integers(0, 6)), "abc", rng)
            y = random_sequence(int(rng.integers(0, 6)), "abc", rng)
        C = random_costs(x, y, "arbitrary", rng)
        if not _gap_separated(x, y, C):
            continue
        Ct = T(C).requires_grad_(True)
        X, Y = lib(x), lib(y)
        assert torch.autograd.gradcheck(lambda c: bedl_torch.edit_distance(X, Y, c), (Ct,))
        C0 = T(random_costs(x, y, "integer", rng))
        assert torch.autograd.gradcheck(
            lambda c: bedl_torch.pseudo_edit_distance(X, Y, c, C0), (Ct,))
        done += 1


@pytest.mark.parametrize("kind", ["unit", "integer", "arbitrary"])
def test_float32(kind):
    for x, y, C in random_pairs(60, 11, kinds=(kind,), hi=10):
        C32 = T(C, torch.float32)
        d32, P32 = bedl_torch.coopt_matrix(lib(x), lib(y), C32)
        assert d32.dtype == torch.float32 and P32.dtype == torch.float32
        C64 = C32.double()  # the same numbers in float64
        d64, P64 = bedl_torch.coopt_matrix(lib(x), lib(y), C64)
        assert abs(float(d32) - float(d64)) <= 1e-5 * max(1.0, abs(float(d64)))
        check_invariants(x, y, C64.numpy(), d32.double(), P32.double(), atol=1e-5)
        if kind != "arbitrary" or _gap_separated(x, y, C64.numpy()):
            torch.testing.assert_close(P32.double(), P64, rtol=0, atol=1e-5)
        Cg = C32.clone().requires_grad_(True)
        bedl_torch.edit_distance(lib(x), lib(y), Cg).backward()
        assert Cg.grad.dtype == torch.float32
        torch.testing.assert_close(Cg.grad, P32, rtol=0, atol=1e-6)


# ------------------------------------------------------------------------ huge tie counts
def _ones(m, n):
    return torch.ones(m + 1, n + 1, dtype=torch.float64)


def test_paths_all_ones_closed_form_beyond_float_range():
    """Path 1200 vs path 600, every cost 1: C(1200, 600) ~ 1e359 co-optimal mappings."""
    m, n = 1200, 600
    P_ref, count = binomial_path_P(m, n)
    assert count > 10**308
    d, P = bedl_torch.coopt_matrix(lib(path_tree(m)), lib(path_tree(n)), _ones(m, n))
    assert float(d) == m
    assert torch.isfinite(P).all()
    np.testing.assert_allclose(P.numpy(), P_ref, rtol=0, atol=1e-9)


def test_stars_all_ones_closed_form():
    """Star 600 vs star 450, all costs 1: roots matched, leaves as sequences."""
    m, n = 600, 450
    d, P = bedl_torch.coopt_matrix(lib(star_tree(m)), lib(star_tree(n)), _ones(m, n))
    assert float(d) == m
    want = np.zeros((m + 1, n + 1))
    want[0, 0] = 1
    leaves, _ = binomial_path_P(m - 1, n - 1)
    want[1:, 1:] = leaves
    np.testing.assert_allclose(P.numpy(), want, rtol=0, atol=1e-9)


@pytest.mark.parametrize("shape", ["comb-spine-left", "comb-spine-right", "random"])
def test_identical_shapes_all_ones_give_identity(shape):
    """A full-size mapping between equal ordered shapes is unique, though sub-problems tie.

    (A comb whose spine is the rightmost path is Zhang-Shasha's O(n^4) case for the leftmost
    decomposition: 601 nodes took 800 s, so that orientation is tested at 81 nodes.)
    """
    x = {"comb-spine-left": lambda: comb_tree(601, leaf_first=False),
         "comb-spine-right": lambda: comb_tree(81, leaf_first=True),
         "random": lambda: random_tree(600, "a", 12)}[shape]()
    n = size(x)
    d, P = bedl_torch.coopt_matrix(lib(x), lib(x), _ones(n, n))
    assert float(d) == n
    want = torch.zeros(n + 1, n + 1, dtype=torch.float64)
    want[:n, :n] = torch.eye(n, dtype=torch.float64)
    torch.testing.assert_close(P, want, rtol=0, atol=1e-9)


def test_random_600_node_trees_all_ones():
    rng = np.random.default_rng(13)
    x = random_tree(600, "a", rng)
    y = random_tree(600, "a", rng)
    C = _ones(600, 600)
    d, P = bedl_torch.coopt_matrix(lib(x), lib(y), C)
    check_invariants(x, y, C.numpy(), d, P)
    assert float(d) == round(float(d))
    try:
        import edist.ted
    except ImportError:
        return
    # all replacements cost 1 <=> Kronecker costs between disjoint label sets
    assert float(d) == edist.ted.standard_ted(["a"] * 600, x[1], ["b"] * 600, y[1])


def test_random_600_node_trees_unit_costs_equal_labels():
    """Replacement 0, indels 1: another massively tied setting."""
    rng = np.random.default_rng(14)
    x = random_tree(600, "a", rng)
    y = random_tree(500, "a", rng)
    C = T(random_costs(x, y, "unit", rng))
    d, P = bedl_torch.coopt_matrix(lib(x), lib(y), C)
    check_invariants(x, y, C.numpy(), d, P)


def test_long_sequences_unit_costs_exact_counts():
    """1000 x 1000 random binary strings, unit costs: counts far beyond int64."""
    rng = np.random.default_rng(15)
    x = random_sequence(1000, "ab", rng)
    y = random_sequence(1000, "ab", rng)
    C = random_costs(x, y, "unit", rng)
    d_ref, P_ref, count = sequence_reference(x, y, C)
    assert count > 2**63
    d, P = bedl_torch.coopt_matrix(x, y, T(C))
    assert float(d) == d_ref
    assert torch.isfinite(P).all()
    np.testing.assert_allclose(P.numpy(), P_ref, rtol=0, atol=1e-9)


def test_long_equal_symbol_sequences_closed_form():
    m, n = 1500, 700
    P_ref, count = binomial_path_P(m, n)
    assert count > 10**308
    x, y = "a" * m, "a" * n
    d, P = bedl_torch.coopt_matrix(x, y, T(random_costs(x, y, "unit", 0)))
    assert float(d) == m - n
    np.testing.assert_allclose(P.numpy(), P_ref, rtol=0, atol=1e-9)


def test_zero_cost_sequences_closed_form():
    """All costs 0: all C(3200, 1200) ~ 1e925 alignments tie."""
    m, n = 2000, 1200
    P_ref, count = zero_cost_sequence_P(m, n)
    x = random_sequence(m, "ab", 1)
    y = random_sequence(n, "ab", 2)
    d, P = bedl_torch.coopt_matrix(x, y, torch.zeros(m + 1, n + 1, dtype=torch.float64))
    assert float(d) == 0
    np.testing.assert_allclose(P.numpy(), P_ref, rtol=0, atol=1e-9)


def test_zero_cost_trees_all_mappings_tie():
    rng = np.random.default_rng(25)
    x, y = random_tree(300, "a", rng), random_tree(250, "a", rng)
    C = torch.zeros(301, 251, dtype=torch.float64)
    d, P = bedl_torch.coopt_matrix(lib(x), lib(y), C)
    assert float(d) == 0
    check_invariants(x, y, C.numpy(), d, P)


def test_default_simplex_ties_like_unit_costs():
    """The default EuclideanCost (float64) gives 1 up to rounding for every non-zero cost: the
    tolerance must treat it exactly like unit costs (same d, same P)."""
    from bedl_torch.costs import EuclideanCost

    alphabet = list("abcdefgh")
    cost = EuclideanCost(alphabet, dtype=torch.float64)
    rng = np.random.default_rng(26)
    for trees in (True, False):
        for _ in range(4):
            if trees:
                x = lib(random_tree(int(rng.integers(40, 100)), alphabet, rng))
                y = lib(random_tree(int(rng.integers(40, 100)), alphabet, rng))
            else:
                x = random_sequence(int(rng.integers(50, 200)), alphabet, rng)
                y = random_sequence(int(rng.integers(50, 200)), alphabet, rng)
            C = module_costs(cost, x, y).detach()
            d, P = bedl_torch.coopt_matrix(x, y, C)
            du, Pu = bedl_torch.coopt_matrix(x, y, T(random_costs(x, y, "unit", 0)))
            assert abs(float(d) - float(du)) <= 1e-9 * float(du) + 1e-12
            torch.testing.assert_close(P, Pu, rtol=0, atol=1e-9)


# ------------------------------------------------------------------------ pseudo mode
@pytest.mark.parametrize("trees", [True, False], ids=["trees", "sequences"])
def test_pseudo_distance_and_gradient(trees):
    rng = np.random.default_rng(16)
    for x, y, C in random_pairs(60, 17, trees=trees, lo=0 if not trees else 1, hi=12):
        C0 = T(random_costs(x, y, ("unit", "integer", "euclidean")[int(rng.integers(0, 3))], rng))
        _, P0 = bedl_torch.coopt_matrix(lib(x), lib(y), C0)
        Ct = T(C).requires_grad_(True)
        pd = bedl_torch.pseudo_edit_distance(lib(x), lib(y), Ct, C0)
        assert abs(float(pd.detach()) - float((P0 * T(C)).sum())) <= 1e-12 * max(1.0, float(T(C).abs().sum()))
        (g,) = torch.autograd.grad(pd, Ct)
        torch.testing.assert_close(g, P0, rtol=0, atol=1e-12)
        # pseudo distance at the reference costs is the exact distance
        assert abs(float(bedl_torch.pseudo_edit_distance(lib(x), lib(y), C0, C0))
                   - float(bedl_torch.edit_distance(lib(x), lib(y), C0))) <= 1e-9


def test_pairbatch_pseudo_distances():
    xs, ys, Cs = _batches(True, 18, count=16)
    batch = bedl_torch.PairBatch(xs, ys)
    M = max(len(x) for x in xs)
    N = max(len(y) for y in ys)
    padded = torch.zeros(len(xs), M + 1, N + 1, dtype=torch.float64)
    for k, C in enumerate(Cs):
        padded[k, : C.shape[0], : C.shape[1]] = C
    _, P0 = batch.coopt(padded)
    other = torch.rand_like(padded)
    got = batch.pseudo_distances(other, P0)
    for k, (x, y, C) in enumerate(zip(xs, ys, Cs)):
        m, n = C.shape
        want = bedl_torch.pseudo_edit_distance(x, y, other[k, :m, :n], C)
        assert abs(float(got[k]) - float(want)) <= 1e-12


# ------------------------------------------------------------------------ pairwise, cost modules
def _labels(x):
    return list(x.labels) if isinstance(x, Tree) else list(x)


def euclidean(alphabet, dim, seed):
    """EuclideanCost with a random float64 embedding of the default embedding's row count."""
    from bedl_torch.costs import EuclideanCost

    rows = EuclideanCost(alphabet).embedding.shape[0]
    gen = torch.Generator().manual_seed(seed)
    emb = torch.randn(rows, dim, dtype=torch.float64, generator=gen)
    return EuclideanCost(alphabet, embedding=torch.nn.Parameter(emb))


def module_costs(cost, x, y):
    """Full (m+1, n+1) cost matrix of a pair from a SymbolCost module."""
    xi = torch.cat([cost.encode(_labels(x)).reshape(-1),
                    torch.tensor([cost.gap_index])]).long()
    yi = torch.cat([cost.encode(_labels(y)).reshape(-1),
                    torch.tensor([cost.gap_index])]).long()
    return cost(xi[None], yi[None])[0]


def _tree_list(count, seed, alphabet="abcd", trees=True):
    rng = np.random.default_rng(seed)
    if trees:
        return [lib(random_tree(int(rng.integers(1, 12)), alphabet, rng)) for _ in range(count)]
    return [random_sequence(int(rng.integers(0, 12)), alphabet, rng) for _ in range(count)]


@pytest.mark.parametrize("trees", [True, False], ids=["trees", "sequences"])
def test_pairwise_unit_equals_singles(trees):
    X = _tree_list(7, 19, trees=trees)
    Y = _tree_list(5, 20, trees=trees)
    D = bedl_torch.pairwise_distances(X, Y)
    assert D.shape == (7, 5)
    for i, x in enumerate(X):
        for j, y in enumerate(Y):
            C = T(random_costs(x, y, "unit", 0))  # oracles accept Tree objects
            assert float(D[i, j]) == float(bedl_torch.edit_distance(x, y, C))
    Dsq = bedl_torch.pairwise_distances(X)
    assert Dsq.shape == (7, 7)
    torch.testing.assert_close(Dsq, Dsq.T, rtol=0, atol=0)
    assert (Dsq.diagonal() == 0).all()
    torch.testing.assert_close(bedl_torch.pairwise_distances(X, Y, chunk_size=3), D, rtol=0,
                               atol=0)


def test_distance_pass_equals_counting_pass_on_larger_trees():
    """The distance pass leaves out the last row and column of every forest table but the
    final one (only their tdm cells are read later); the counting pass fills whole tables.
    Both give the same distance to the bit, on trees big enough for many such tables."""
    rng = np.random.default_rng(21)
    xs, ys, Cs = [], [], []
    for k in range(30):
        x = random_tree(int(rng.integers(12, 41)), "abcd", rng)
        y = random_tree(int(rng.integers(12, 41)), "abcd", rng)
        xs.append(lib(x))
        ys.append(lib(y))
        Cs.append(T(random_costs(x, y, COST_KINDS[k % len(COST_KINDS)], rng)))
    d = bedl_torch.edit_distance_batch(xs, ys, Cs)
    cd, _ = bedl_torch.coopt_matrix_batch(xs, ys, Cs)
    assert torch.equal(d, cd)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sequence_distance_strips_equal_counting_pass(dtype):
    """Sequence distances alone run four rows at a time on a skew (AVX2, where the processor
    has it), the counting pass row by row: the same bits for every length around the
    strips' edges (4 rows, 6 columns of lag) and long ones, ties included (small integers)."""
    rng = np.random.default_rng(24)
    sizes = [(m, n) for m in range(0, 10) for n in range(0, 12)] + [(97, 211), (256, 255), (5, 300)]
    for k, (m, n) in enumerate(sizes):
        x, y = list(rng.integers(0, 3, m)), list(rng.integers(0, 3, n))
        if k % 2:
            C = torch.as_tensor(rng.integers(0, 3, (m + 1, n + 1)), dtype=dtype)
        else:
            C = torch.as_tensor(rng.random((m + 1, n + 1)), dtype=dtype)
        d = bedl_torch.edit_distance(x, y, C)
        d_counted, _ = bedl_torch.coopt_matrix(x, y, C)
        assert torch.equal(d, d_counted), (m, n)


def test_pairwise_one_collection_equals_two_copies():
    """``pairwise_distances(X)`` hands the kernel one tree table for both sides (indexed
    once) and, without gradients, all pairs in one call; two copies of X, or small chunks,
    go the other ways and must give the same matrix."""
    rng = np.random.default_rng(22)
    X = [lib(random_tree(int(rng.integers(1, 31)), "abcd", rng)) for _ in range(24)]
    with torch.no_grad():
        D = bedl_torch.pairwise_distances(X)
        D_copies = bedl_torch.pairwise_distances(X, list(X))
        D_chunks = bedl_torch.pairwise_distances(X, chunk_size=7)
    assert torch.equal(D, D_copies)
    assert torch.equal(D, D_chunks)
    assert (D.diagonal() == 0).all() and bool((D[~torch.eye(24, dtype=torch.bool)] > 0).any())


@pytest.mark.parametrize("mode", ["exact", "pseudo"])
def test_pairwise_euclidean_equals_singles_with_gradients(mode):
    from bedl_torch.costs import UnitCost

    alphabet = list("abcd")
    cost = euclidean(alphabet, 2, 3)
    ref = UnitCost(alphabet) if mode == "pseudo" else None
    X = _tree_list(5, 21)
    Y = _tree_list(4, 22)
    kw = {"mode": mode, "reference_cost": ref} if mode == "pseudo" else {}
    D = bedl_torch.pairwise_distances(X, Y, cost, **kw)
    D.sum().backward()
    g_pair = cost.embedding.grad.clone()
    cost.embedding.grad = None
    total = 0
    for i, x in enumerate(X):
        for j, y in enumerate(Y):
            C = module_costs(cost, x, y)
            if mode == "exact":
                d = bedl_torch.edit_distance(x, y, C)
            else:
                C0 = module_costs(ref, x, y).to(C.dtype)
                d = bedl_torch.pseudo_edit_distance(x, y, C, C0)
            assert abs(float(D[i, j].detach()) - float(d.detach())) <= 1e-10
            total = total + d
    total.backward()
    torch.testing.assert_close(cost.embedding.grad, g_pair, rtol=1e-9, atol=1e-10)


def test_pairwise_pseudo_default_reference_is_current_cost():
    """mode="pseudo" without reference_cost freezes P at the current cost: same values as exact."""
    cost = euclidean(list("abcd"), 3, 5)
    X = _tree_list(5, 24)
    exact = bedl_torch.pairwise_distances(X, None, cost).detach()
    pseudo = bedl_torch.pairwise_distances(X, None, cost, mode="pseudo").detach()
    torch.testing.assert_close(pseudo, exact, rtol=1e-12, atol=1e-12)


def test_euclidean_default_embedding_unit_like():
    from bedl_torch.costs import EuclideanCost

    alphabet = list("abcde")
    cost = EuclideanCost(alphabet)
    U = len(alphabet) + 1
    idx = torch.arange(U)
    C = cost(idx[None], idx[None])[0].double()
    want = 1.0 - torch.eye(U, dtype=torch.float64)
    torch.testing.assert_close(C, want, rtol=0, atol=1e-6)
    # so the default pairwise distances are the unit-cost distances
    X = _tree_list(4, 23, alphabet="abcde")
    D = bedl_torch.pairwise_distances(X, None, cost).double()
    torch.testing.assert_close(D, bedl_torch.pairwise_distances(X).double(), rtol=0, atol=1e-5)


def test_euclidean_gradient_finite_when_embeddings_coincide_or_at_origin():
    from bedl_torch.costs import EuclideanCost

    alphabet = list("abcd")
    cost = EuclideanCost(alphabet)
    emb = cost.embedding
    with torch.no_grad():
        emb[1] = emb[0]  # b coincides with a
        emb[2].zero_()  # c sits at the origin
        if emb.shape[0] > len(alphabet):
            emb[cost.gap_index].zero_()  # gap at the origin too: c <-> gap costs 0
    idx = torch.arange(emb.shape[0] if emb.shape[0] > len(alphabet) else len(alphabet) + 1)
    C = cost(idx[None], idx[None])
    C.sum().backward()
    assert torch.isfinite(emb.grad).all()
    emb.grad = None
    X = [lib((list("ab"), [[1], []])), lib((list("cab"), [[1, 2], [], []])), "ab", "cc"]
    D = bedl_torch.pairwise_distances(X[:2], X[:2], cost)
    D.sum().backward()
    assert torch.isfinite(D).all() and torch.isfinite(emb.grad).all()
    emb.grad = None
    D = bedl_torch.pairwise_distances(X[2:], ["ba", "", "c"], cost)
    D.sum().backward()
    assert torch.isfinite(D).all() and torch.isfinite(emb.grad).all()


class _TableCost(bedl_torch.SymbolCost):
    """Costs straight from a (U + 1, U + 1) table: arbitrary, asymmetric, with ties."""

    def __init__(self, alphabet, table):
        super().__init__(alphabet)
        self.register_buffer("table", table)

    def symbol_table(self):
        return self.table

    def forward(self, x_idx, y_idx):
        return self.table[x_idx[:, :, None], y_idx[:, None, :]]


def test_simd_switch_follows_the_session_setting():
    """BEDL_TORCH_SIMD=0 turns the AVX2 paths off for the whole session; otherwise they run
    exactly where the processor reports AVX2."""
    from bedl_torch import _ext

    if os.environ.get("BEDL_TORCH_SIMD") == "0":
        assert not _ext.simd_enabled()
        return
    cpuinfo = pathlib.Path("/proc/cpuinfo")
    if platform.machine() not in ("x86_64", "AMD64") or not cpuinfo.is_file():
        pytest.skip("the processor's flags are read from /proc/cpuinfo (x86-64 Linux)")
    flags = set()
    for line in cpuinfo.read_text().splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
    assert _ext.simd_enabled() == ("avx2" in flags)


@pytest.mark.parametrize("symbols", [5, 40], ids=["small-alphabet", "large-alphabet"])
def test_simd_lanes_equal_scalar_kernel(symbols, simd_lanes):
    """Tree distances with symbol-table costs run four pairs at a time (pairs that share x,
    AVX2 lanes over the wide layout of y's tables, gathers for y's structure) where the
    processor has AVX2; the scalar kernel runs one pair at a time. Both give the same bits:
    sizes 1-40 (one- and two-node trees take the scalar kernel's special cases inside the
    same call), groups of 2-4 lanes, float32 and float64 tables, ties and asymmetric costs;
    a small alphabet (replacement costs by symbol of x) and a large one (gathered)."""
    ext = simd_lanes
    rng = np.random.default_rng(31 + symbols)
    alphabet = [f"s{k}" for k in range(symbols)]
    X = [lib(random_tree(int(s), alphabet, rng)) for s in list(range(1, 9)) + list(rng.integers(3, 41, 28))]
    # Paths, stars and combs both ways round: one table, many leaf keyroots, many tables.
    def labels(n):
        return [alphabet[int(k)] for k in rng.integers(0, symbols, n)]
    X += [lib(path_tree(12, labels(12))), lib(star_tree(12, labels(12))),
          lib(comb_tree(15, labels(15))), lib(comb_tree(15, labels(15), leaf_first=False))]
    Y = X[:7]  # 7 y trees per x: groups of 4 and 3 lanes
    U = len(alphabet) + 1
    costs = [
        None,
        bedl_torch.EuclideanCost(alphabet),  # float32
        bedl_torch.EuclideanCost(alphabet, embedding=torch.as_tensor(rng.normal(size=(symbols, 3)))),
        _TableCost(alphabet, torch.as_tensor(rng.integers(0, 3, (U, U)), dtype=torch.float64)),
        _TableCost(alphabet, torch.as_tensor(rng.random((U, U)), dtype=torch.float32)),
    ]
    for cost in costs:
        with torch.no_grad():
            for args in ((X,), (X, Y), (Y[:2], X)):
                ext.set_simd_enabled(False)
                scalar = bedl_torch.pairwise_distances(*args, cost=cost)
                ext.set_simd_enabled(True)
                lanes = bedl_torch.pairwise_distances(*args, cost=cost)
                assert torch.equal(scalar, lanes)


def test_simd_lanes_equal_scalar_kernel_on_large_trees(simd_lanes):
    """Distances of trees of 120-300 nodes, near the size where pairs leave the lanes for the
    scalar kernel (lanes_fit), inside one call: the same bits as the scalar kernel, under unit
    costs and a random table."""
    ext = simd_lanes
    rng = np.random.default_rng(1207)
    alphabet = [f"s{k}" for k in range(6)]
    X = [lib(random_tree(int(s), alphabet, rng)) for s in rng.integers(120, 301, 7)]
    X.append(lib(comb_tree(140, [alphabet[int(k)] for k in rng.integers(0, 6, 140)], leaf_first=False)))
    U = len(alphabet) + 1
    table = _TableCost(alphabet, torch.as_tensor(rng.random((U, U)), dtype=torch.float64))
    for cost in (None, table):
        with torch.no_grad():
            ext.set_simd_enabled(False)
            scalar = bedl_torch.pairwise_distances(X, cost=cost)
            ext.set_simd_enabled(True)
            lanes = bedl_torch.pairwise_distances(X, cost=cost)
        assert torch.equal(scalar, lanes)


def _scalar_and_lanes_agree(ext, fn):
    """fn() (a tuple of tensors) on the scalar kernels and on the AVX2 lanes: the same bits."""
    ext.set_simd_enabled(False)
    scalar = fn()
    ext.set_simd_enabled(True)
    lanes = fn()
    for a, b in zip(scalar, lanes):
        assert a.dtype == b.dtype and torch.equal(a, b)


def test_tree_coopt_lanes_equal_scalar_kernel(simd_lanes):
    """Co-optimal matrices P and the symbol-table gradient of trees run their inside pass
    (distances, co-optimal flags, counts) four pairs at a time on the AVX2 lanes where pairs
    share x, then each pair's outside pass from the lanes' tables; the scalar kernel runs one
    pair at a time. Both give the same bits: sizes 1-40 with paths, stars and combs, groups of
    2-4 lanes beside pairs left alone, zero pair weights, float32 and float64 tables, ties
    (integer tables, and a table where every mapping ties), asymmetric costs, and costs below
    0 (the lanes' general tie test) beside costs >= 0 with -0.0 (the short one)."""
    ext = simd_lanes
    rng = np.random.default_rng(17)
    alphabet = list("abc")
    X = [lib(random_tree(int(s), alphabet, rng)) for s in [1, 2, 3, 5] + list(rng.integers(3, 41, 12))]

    def labels(n):
        return [alphabet[int(k)] for k in rng.integers(0, len(alphabet), n)]

    X += [lib(path_tree(12, labels(12))), lib(star_tree(12, labels(12))),
          lib(comb_tree(15, labels(15))), lib(comb_tree(15, labels(15), leaf_first=False))]
    Y = X[:7]
    U = len(alphabet) + 1
    every_mapping_ties = torch.full((U, U), 2.0, dtype=torch.float64)
    every_mapping_ties[:, -1] = every_mapping_ties[-1, :] = 1.0  # a replacement costs a deletion and an insertion
    costs = [
        bedl_torch.EuclideanCost(alphabet),  # float32
        bedl_torch.EuclideanCost(alphabet, embedding=torch.as_tensor(rng.normal(size=(3, 3)))),
        _TableCost(alphabet, torch.as_tensor(rng.integers(0, 3, (U, U)), dtype=torch.float64)),
        _TableCost(alphabet, torch.as_tensor(rng.random((U, U)), dtype=torch.float32)),
        _TableCost(alphabet, every_mapping_ties),
        # costs below 0 take the lanes' general tie test; costs >= 0 (-0.0 included) the short one
        _TableCost(alphabet, torch.as_tensor(rng.integers(-1, 2, (U, U)), dtype=torch.float64)),
        _TableCost(alphabet, torch.as_tensor(rng.integers(0, 3, (U, U)), dtype=torch.float64).where(
            torch.as_tensor(rng.random((U, U))) < 0.5, torch.tensor(-0.0, dtype=torch.float64))),
    ]
    assert any(float(c.symbol_table().detach().min()) < 0 for c in costs)

    def both(fn):
        _scalar_and_lanes_agree(ext, fn)

    # x shared by runs of 1-6 consecutive pairs, then pairs of all different x
    xs = [X[k] for k, run in enumerate([1, 2, 3, 4, 5, 6]) for _ in range(run)] + X[6:12]
    ys = [X[(3 * k + 1) % len(X)] for k in range(len(xs))]
    batch = bedl_torch.PairBatch(xs, ys)
    weights = torch.as_tensor(rng.random((len(X), len(Y))))
    weights[:, 2] = 0.0  # pairs of weight 0 leave gaps in the lane groups
    for cost in costs:
        with torch.no_grad():
            both(lambda: batch.coopt(cost))
        table = cost.symbol_table().detach()

        def grad():
            leaf = table.clone().requires_grad_(True)
            D = bedl_torch.pairwise_distances(X, Y, cost=_TableCost(alphabet, leaf))
            (D * weights.to(D.dtype)).sum().backward()
            return (D.detach(), leaf.grad)

        both(grad)


def test_sequence_lanes_equal_scalar_kernel(simd_lanes):
    """Sequence distances, co-optimal matrices P and the symbol-table gradient run four pairs
    at a time on the AVX2 lanes (padded to the group's longest pair) where that pays, and one
    pair at a time on the scalar kernel, with the same bits: lengths 0-40 mixed within a group
    (groups on the lanes and groups too uneven for them in one call), batches that leave groups
    of 1-3 lanes, zero pair weights, integer tables with ties, float32 and float64, and a long
    pair whose counts overflow doubles (exact counts) in a batch with short ones."""
    ext = simd_lanes
    rng = np.random.default_rng(7)
    alphabet = list("abcd")
    seqs = ["".join(rng.choice(alphabet, int(k))) for k in [0, 1, 2, 5, 12, 12, 40, 3] + list(rng.integers(0, 41, 23))]
    U = len(alphabet) + 1
    costs = [
        bedl_torch.EuclideanCost(alphabet),  # float32
        bedl_torch.EuclideanCost(alphabet, embedding=torch.as_tensor(rng.normal(size=(4, 3)))),
        _TableCost(alphabet, torch.as_tensor(rng.integers(0, 3, (U, U)), dtype=torch.float64)),
        _TableCost(alphabet, torch.as_tensor(rng.integers(1, 3, (U, U)), dtype=torch.float32)),
    ]

    def both(fn):
        _scalar_and_lanes_agree(ext, fn)

    weights = torch.as_tensor(rng.random((len(seqs), 7)))
    weights[:, 2] = 0.0  # pairs of weight 0 leave gaps in the lane groups
    for cost in costs:
        with torch.no_grad():
            both(lambda: (bedl_torch.pairwise_distances(seqs, cost=cost),
                          bedl_torch.pairwise_distances(seqs[:7], seqs[3:9], cost=cost)))
            for n in (1, 3, 6, 9):
                batch = bedl_torch.PairBatch(seqs[:n], seqs[5:5 + n])
                both(lambda: batch.coopt(cost))

        if isinstance(cost, _TableCost):
            table = cost.table

            def grad():
                leaf = table.clone().requires_grad_(True)
                D = bedl_torch.pairwise_distances(seqs, seqs[:7], cost=_TableCost(alphabet, leaf))
                (D * weights.to(D.dtype)).sum().backward()
                return (D.detach(), leaf.grad)

            both(grad)
    # dense costs: a long all-equal pair (counts beyond doubles) among short random ones
    long_x, long_y = "a" * 700, "a" * 650
    xs = [seqs[4], long_x, seqs[6], seqs[7], seqs[3]]
    ys = [seqs[5], long_y, seqs[2], seqs[6], seqs[1]]
    batch = bedl_torch.PairBatch(xs, ys)
    C = torch.as_tensor(rng.integers(0, 3, (len(xs), batch.rows, batch.cols)), dtype=torch.float64)
    C[1] = 1.0
    C[1, :700, :650] = 2.0  # a replacement costs a deletion and an insertion: every path ties
    with torch.no_grad():
        both(lambda: batch.coopt(C) + (batch.distances(C),))
        d, P = batch.coopt(C)
    assert d[1].item() == 700.0 + 650.0
    assert torch.isfinite(P).all()
    # every alignment ties: each deletion of x is used by some alignment, none by all
    assert 0.0 < P[1, :700, 650].min() and P[1, :700, 650].max() < 1.0
