"""The soft (temperature) edit distance and its gradient, the expected alignment.

References written here: every valid mapping enumerated (tests/oracles.py) for small trees and
sequences, with soft = -T logsumexp(-cost(M) / T) and the gradient sum_M p(M) indicator(M);
for long inputs an independent log-domain dynamic program over alignments (two states, an
insertion never right after a deletion) with its outside pass, which path trees must match too
(mappings between two paths are the alignments of their node sequences).
"""
import math

import numpy as np
import pytest
import torch

import bedl_torch
from bedl_torch import PairBatch, UnitCost, EuclideanCost
from bedl_torch.tree import Tree
from oracles import (
    enumerate_mappings,
    is_valid_mapping,
    mapping_cost,
    path_tree,
    random_costs,
    random_sequence,
    random_tree,
)

TEMPERATURES = (1e-2, 0.3, 1.0, 10.0)
ALPHABETS = ("a", "ab", "abc")
EPS = np.finfo(np.float64).eps


def gradient_tol(x, y, C, T):
    """1e-10, or the rounding of the weights where c / T is extreme: each weight exp(-c / T)
    carries the relative error of c / T, eps * |c| / T, and a mapping multiplies |x| + |y|."""
    return max(1e-10, 16 * EPS * (size(x) + size(y)) * float(np.abs(C).max()) / T)


def lib(x):
    """Oracle input -> library input: (labels, children) -> Tree; sequences unchanged."""
    return Tree(x[0], x[1]) if isinstance(x, tuple) else x


def size(x):
    return len(x[0]) if isinstance(x, tuple) else len(x)


# ------------------------------------------------------------------------------ references
class Enumerated:
    """All valid mappings of a pair: their costs and indicator matrices (1 at (i, j)
    replacements, (i, n) deletions, (m, j) insertions)."""

    def __init__(self, x, y, C):
        m, n = size(x), size(y)
        mappings = list(enumerate_mappings(x, y))
        assert all(is_valid_mapping(x, y, M) for M in mappings)
        self.costs = np.array([mapping_cost(M, C, m, n) for M in mappings])
        self.indicators = np.zeros((len(mappings), m + 1, n + 1))
        for k, M in enumerate(mappings):
            rows = {i for i, _ in M}
            cols = {j for _, j in M}
            for i, j in M:
                self.indicators[k, i, j] = 1.0
            for i in set(range(m)) - rows:
                self.indicators[k, i, n] = 1.0
            for j in set(range(n)) - cols:
                self.indicators[k, m, j] = 1.0

    def soft(self, T):
        low = self.costs.min()
        return float(low - T * np.log(np.exp(-(self.costs - low) / T).sum()))

    def expected(self, T):
        p = np.exp(-(self.costs - self.costs.min()) / T)
        p /= p.sum()
        return np.tensordot(p, self.indicators, axes=1)


def _lae(a, b):
    """log(exp(a) + exp(b)) for scalars, -inf for none."""
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    hi = max(a, b)
    return hi + math.log1p(math.exp(-abs(a - b)))


def sequence_soft_reference(C, T):
    """(soft distance, expected alignment) of two sequences with costs C ((m+1, n+1), the
    library's layout), by a log-domain DP over alignments: log-weights of the cells entered
    by a deletion (LD) and otherwise (LO); an insertion only from LO."""
    m, n = C.shape[0] - 1, C.shape[1] - 1
    ninf = -math.inf
    LD = [[ninf] * (n + 1) for _ in range(m + 1)]
    LO = [[ninf] * (n + 1) for _ in range(m + 1)]
    LO[0][0] = 0.0
    for j in range(1, n + 1):
        LO[0][j] = LO[0][j - 1] - C[m, j - 1] / T
    LT = lambda i, j: _lae(LD[i][j], LO[i][j])  # noqa: E731
    for i in range(1, m + 1):
        LD[i][0] = LT(i - 1, 0) - C[i - 1, n] / T
        for j in range(1, n + 1):
            LD[i][j] = LT(i - 1, j) - C[i - 1, n] / T
            LO[i][j] = _lae(LO[i][j - 1] - C[m, j - 1] / T, LT(i - 1, j - 1) - C[i - 1, j - 1] / T)
    LZ = LT(m, n)
    # outside log-weights: any continuation (BA), continuations that insert first (BI)
    BA = [[ninf] * (n + 1) for _ in range(m + 1)]
    BI = [[ninf] * (n + 1) for _ in range(m + 1)]
    BA[m][n] = 0.0
    P = np.zeros((m + 1, n + 1))
    for i in range(m, -1, -1):
        for j in range(n, -1, -1):
            out_d, out_o = BA[i][j], _lae(BA[i][j], BI[i][j])
            if i > 0 and out_d > ninf:
                step = out_d - C[i - 1, n] / T
                BA[i - 1][j] = _lae(BA[i - 1][j], step)
                P[i - 1, n] += math.exp(LT(i - 1, j) + step - LZ)
            if j > 0 and out_o > ninf:
                step = out_o - C[m, j - 1] / T
                BI[i][j - 1] = _lae(BI[i][j - 1], step)
                P[m, j - 1] += math.exp(LO[i][j - 1] + step - LZ)
            if i > 0 and j > 0 and out_o > ninf:
                step = out_o - C[i - 1, j - 1] / T
                BA[i - 1][j - 1] = _lae(BA[i - 1][j - 1], step)
                P[i - 1, j - 1] += math.exp(LT(i - 1, j - 1) + step - LZ)
    return -T * LZ, P


# ------------------------------------------------------------------------------ helpers
def soft_and_grad(x, y, C, T, dtype=torch.float64):
    costs = torch.as_tensor(C, dtype=dtype).clone().requires_grad_(True)
    d = bedl_torch.soft_edit_distance(lib(x), lib(y), costs, T)
    d.backward()
    return d.item(), costs.grad.double().numpy()


def _cases(kind_of_input, count, lo, hi, seed, cost_kinds):
    rng = np.random.default_rng(seed)
    cases = []
    for k in range(count):
        alphabet = ALPHABETS[k % len(ALPHABETS)]
        make = random_tree if kind_of_input == "tree" else random_sequence
        lo_k = max(lo, 1) if kind_of_input == "tree" else lo
        x = make(int(rng.integers(lo_k, hi + 1)), alphabet, rng)
        y = make(int(rng.integers(lo_k, hi + 1)), alphabet, rng)
        cases.append((x, y, random_costs(x, y, cost_kinds[k % len(cost_kinds)], rng)))
    return cases


def _check_against_enumeration(cases, temperatures):
    failures = []
    for x, y, C in cases:
        ref = Enumerated(x, y, C)
        for T in temperatures:
            d, g = soft_and_grad(x, y, C, T)
            want_d, want_g = ref.soft(T), ref.expected(T)
            if abs(d - want_d) > 1e-10 * max(1.0, abs(want_d)) or np.abs(g - want_g).max() > 1e-10:
                failures.append((size(x) + size(y), x, y, T, d, want_d, np.abs(g - want_g).max()))
    if failures:
        failures.sort(key=lambda f: f[0])
        _, x, y, T, d, want_d, gerr = failures[0]
        pytest.fail(f"{len(failures)} cases differ; smallest: x={x!r} y={y!r} T={T}: soft {d!r} vs "
                    f"{want_d!r}, gradient off by {gerr:.3g}")


# ------------------------------------------------------------------------------ enumeration
@pytest.mark.parametrize("cost_kinds", [("integer",), ("arbitrary", "signed", "euclidean", "unit")])
def test_trees_against_enumeration(cost_kinds):
    """Trees of 1..6 nodes; integer costs {0, 1, 2} make many exact ties."""
    seed = 11 if cost_kinds == ("integer",) else 12
    _check_against_enumeration(_cases("tree", 70, 1, 6, seed, cost_kinds), TEMPERATURES)


@pytest.mark.parametrize("cost_kinds", [("integer",), ("arbitrary", "signed", "euclidean", "unit")])
def test_sequences_against_enumeration(cost_kinds):
    """Sequences of 0..7 elements, empty ones included."""
    seed = 21 if cost_kinds == ("integer",) else 22
    _check_against_enumeration(_cases("sequence", 60, 0, 7, seed, cost_kinds), TEMPERATURES)


def test_small_temperatures_against_enumeration():
    """T = 1e-3 with costs up to 10: the cheapest mapping's weight, relative to the row and
    column minima, falls far below the range of doubles for many pairs (the passes with
    exponents); compared with the enumeration as everywhere."""
    rng = np.random.default_rng(31)
    cases = []
    for k in range(30):
        make = random_tree if k % 2 else random_sequence
        x = make(int(rng.integers(1, 6)), "ab", rng)
        y = make(int(rng.integers(1, 6)), "ab", rng)
        cases.append((x, y, 10.0 * random_costs(x, y, "arbitrary", rng)))
    _check_against_enumeration(cases, (1e-3,))


def test_gradcheck():
    rng = np.random.default_rng(41)
    for x, y in [(random_tree(4, "ab", rng), random_tree(5, "ab", rng)), ("abca", "bca"), ("", "ab")]:
        C = torch.as_tensor(random_costs(x, y, "arbitrary", rng)).requires_grad_(True)
        for T in (0.3, 2.0):
            assert torch.autograd.gradcheck(lambda c: bedl_torch.soft_edit_distance(lib(x), lib(y), c, T), (C,))


# ------------------------------------------------------------------------------ limits
def _mapping_gap(ref):
    costs = np.sort(ref.costs)
    return costs[1] - costs[0] if len(costs) > 1 else math.inf


def test_small_temperature_tends_to_distance_and_P():
    """T = 1e-4, costs in [0, 1) whose cheapest mapping is unique with a gap of at least 0.01
    (every other mapping weighs below exp(-100)): soft == distance, gradient == P."""
    rng = np.random.default_rng(51)
    checked = 0
    while checked < 30:
        make = random_tree if checked % 2 else random_sequence
        x = make(int(rng.integers(1, 7)), "abc", rng)
        y = make(int(rng.integers(1, 7)), "abc", rng)
        C = random_costs(x, y, "arbitrary", rng)
        ref = Enumerated(x, y, C)
        if _mapping_gap(ref) < 0.01:
            continue
        checked += 1
        d, g = soft_and_grad(x, y, C, 1e-4)
        dist, P = bedl_torch.coopt_matrix(lib(x), lib(y), torch.as_tensor(C))
        assert abs(d - float(dist)) <= 1e-12 * max(1.0, abs(float(dist))), (x, y)
        assert np.abs(g - P.numpy()).max() <= 1e-10, (x, y)


def test_small_temperature_with_ties_averages_the_cheapest_mappings():
    """Integer costs: the N cheapest mappings tie exactly and all others cost at least 1 more,
    so at T = 1e-4 soft == distance - T log N and the gradient is the co-optimal P."""
    for x, y, C in _cases("tree", 25, 1, 6, 61, ("integer",)) + _cases("sequence", 25, 0, 6, 62, ("integer",)):
        ref = Enumerated(x, y, C)
        ties = int((ref.costs == ref.costs.min()).sum())
        d, g = soft_and_grad(x, y, C, 1e-4)
        dist, P = bedl_torch.coopt_matrix(lib(x), lib(y), torch.as_tensor(C))
        assert abs(d - (float(dist) - 1e-4 * math.log(ties))) <= 1e-12, (x, y, ties)
        assert np.abs(g - P.numpy()).max() <= 1e-10, (x, y)


@pytest.mark.parametrize("T, scale", [(1e4, 1e6), (1e-4, 1e6), (1e4, 1.0), (1e-4, 1e-3)])
def test_extreme_temperatures_and_costs(T, scale):
    """Costs up to 1e6 (or tiny) at T = 1e-4 and 1e4: finite, and equal to the enumeration
    (the gradient within :func:`gradient_tol`: about 1e-5 where c / T reaches 1e10)."""
    cases = _cases("tree", 12, 1, 5, 71, ("integer", "arbitrary")) + _cases("sequence", 12, 0, 6, 72, ("arbitrary",))
    failures = []
    for x, y, C in cases:
        C = C * scale
        ref = Enumerated(x, y, C)
        d, g = soft_and_grad(x, y, C, T)
        want_d, want_g = ref.soft(T), ref.expected(T)
        assert math.isfinite(d) and np.isfinite(g).all()
        if abs(d - want_d) > 1e-10 * max(1.0, abs(want_d)) or np.abs(g - want_g).max() > gradient_tol(x, y, C, T):
            failures.append((x, y, d, want_d, np.abs(g - want_g).max()))
    assert not failures, failures[:3]


# ------------------------------------------------------------------------------ long inputs
def _long_pair(rng, m, n):
    x = random_sequence(m, "abcd", rng)
    y = random_sequence(n, "abcd", rng)
    return x, y, random_costs(x, y, "arbitrary", rng)


@pytest.mark.parametrize("T", [0.5, 1e-3])
def test_long_sequences_and_paths_against_log_domain_reference(T):
    """|x| + |y| = 1005 (beyond the doubles' pass, so weights carry exponents) and 60 (doubles),
    sequences and path trees, against the log-domain reference."""
    rng = np.random.default_rng(81)
    for m, n in [(510, 495), (31, 29)]:
        x, y, C = _long_pair(rng, m, n)
        want_d, want_g = sequence_soft_reference(C, T)
        paths = (path_tree(m, x), path_tree(n, y))
        for a, b in [(x, y), paths]:
            d, g = soft_and_grad(a, b, C, T)
            assert abs(d - want_d) <= 1e-10 * max(1.0, abs(want_d)), (m, n, type(a), d, want_d)
            assert np.abs(g - want_g).max() <= gradient_tol(x, y, C, T), (m, n, type(a))


@pytest.mark.parametrize("kind, sizes", [("tree", (40, 80)), ("tree", (505, 515)), ("sequence", (290, 310))])
def test_large_inputs_at_small_temperature_give_P(kind, sizes):
    """Integer costs at T = 1e-4: every mapping that is not cheapest costs at least 1 more and
    weighs below exp(-1e4) of a cheapest one, so the gradient is the co-optimal P (tested
    against the oracles elsewhere) and 0 <= distance - soft = T log(cheapest mappings)
    <= T (|x| + |y|) log 2; the largest take the wide weights (at this temperature any size
    does)."""
    rng = np.random.default_rng(121 + sizes[0])
    make = random_tree if kind == "tree" else random_sequence
    for _ in range(2):
        x = make(int(rng.integers(sizes[0], sizes[1] + 1)), "abc", rng)
        y = make(int(rng.integers(sizes[0], sizes[1] + 1)), "abc", rng)
        C = random_costs(x, y, "integer", rng)
        d, g = soft_and_grad(x, y, C, 1e-4)
        dist, P = bedl_torch.coopt_matrix(lib(x), lib(y), torch.as_tensor(C))
        gap = float(dist) - d
        assert -1e-9 <= gap <= 1e-4 * (size(x) + size(y)) * math.log(2) + 1e-9, gap
        assert np.abs(g - P.numpy()).max() <= gradient_tol(x, y, C, 1e-4)


# ------------------------------------------------------------------------------ API
def test_float32_matches_float64():
    for x, y, C in _cases("tree", 10, 2, 6, 91, ("arbitrary",)) + _cases("sequence", 10, 0, 7, 92, ("euclidean",)):
        C32 = torch.as_tensor(C, dtype=torch.float32)
        d64, g64 = soft_and_grad(x, y, C32.double().numpy(), 0.3)
        costs = C32.clone().requires_grad_(True)
        d32 = bedl_torch.soft_edit_distance(lib(x), lib(y), costs, 0.3)
        d32.backward()
        assert d32.dtype == torch.float32 and costs.grad.dtype == torch.float32
        assert abs(d32.item() - d64) <= 1e-6 * max(1.0, abs(d64))
        assert np.abs(costs.grad.double().numpy() - g64).max() <= 1e-6


def test_batched_equals_single():
    cases = _cases("tree", 8, 1, 9, 101, ("arbitrary", "integer"))
    for group in (cases, _cases("sequence", 8, 0, 9, 102, ("signed",))):
        xs, ys = [lib(x) for x, _, _ in group], [lib(y) for _, y, _ in group]
        costs = [torch.as_tensor(C).requires_grad_(True) for _, _, C in group]
        batched = bedl_torch.soft_edit_distance_batch(xs, ys, costs, 0.7)
        batched.sum().backward()
        for k, (x, y, C) in enumerate(group):
            single = torch.as_tensor(C).requires_grad_(True)
            d = bedl_torch.soft_edit_distance(xs[k], ys[k], single, 0.7)
            d.backward()
            assert torch.equal(batched[k].detach(), d.detach())
            assert torch.equal(costs[k].grad, single.grad)


def test_pair_batch_and_pairwise_soft_mode():
    rng = np.random.default_rng(111)
    X = [Tree(*random_tree(int(rng.integers(1, 7)), "abc", rng)) for _ in range(5)]
    cost = EuclideanCost(list("abc"), torch.as_tensor(rng.normal(size=(3, 2))))  # float64
    D = bedl_torch.pairwise_distances(X, cost=cost, mode="soft", temperature=0.5)
    D.sum().backward()
    grad = cost.embedding.grad.clone()
    cost.embedding.grad = None
    batch = PairBatch([a for a in X for _ in X], [b for _ in X for b in X])
    flat = batch.distances(cost, mode="soft", temperature=0.5)
    flat.sum().backward()
    torch.testing.assert_close(D.reshape(-1), flat, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad, cost.embedding.grad, rtol=1e-10, atol=1e-12)
    padded = batch.costs(cost).detach()
    for k in range(len(batch)):
        m, n = int(batch.m[k]), int(batch.n[k])
        single = bedl_torch.soft_edit_distance(batch.x_table.objects[k], batch.y_table.objects[k],
                                               padded[k, : m + 1, : n + 1], 0.5)
        assert single.item() == flat[k].item()
    # sequences and unit costs: the soft distance lies below the distance, equal to it where
    # one side is empty (a single mapping)
    S = ["abca", "ba", "", "cab"]
    soft = bedl_torch.pairwise_distances(S, cost=UnitCost(list("abc")), mode="soft", temperature=0.2)
    exact = bedl_torch.pairwise_distances(S, cost=UnitCost(list("abc")))
    one_mapping = torch.tensor([len(a) == 0 or len(b) == 0 for a in S for b in S]).reshape(4, 4)
    assert (soft[~one_mapping] < exact[~one_mapping]).all()
    assert torch.equal(soft[one_mapping], exact[one_mapping])


def test_bad_temperature_and_modes():
    x, y = Tree.from_bracket("{a{b}}"), Tree.from_bracket("{a}")
    C = torch.rand(3, 2, dtype=torch.float64)
    for T in (0.0, -1.0, math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="temperature"):
            bedl_torch.soft_edit_distance(x, y, C, T)
        with pytest.raises(ValueError, match="temperature"):
            torch.ops.bedl_torch.sed_soft(C[None], torch.tensor([2]), torch.tensor([1]), T, False)
    with pytest.raises(TypeError, match="temperature"):
        bedl_torch.soft_edit_distance(x, y, C, "1.0")
    with pytest.raises(ValueError, match="needs a temperature"):
        PairBatch([x], [y]).distances(C[None], mode="soft")
    with pytest.raises(ValueError, match="only with mode='soft'"):
        PairBatch([x], [y]).distances(C[None], temperature=1.0)
    with pytest.raises(ValueError, match="needs a temperature"):
        bedl_torch.pairwise_distances(["ab"], mode="soft")
    with pytest.raises(ValueError, match="shape"):
        bedl_torch.soft_edit_distance(x, y, C[:, :1], 1.0)
    bad = C.clone()
    bad[0, 0] = math.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        bedl_torch.soft_edit_distance(x, y, bad, 1.0)
    with pytest.raises(ValueError, match="too large for temperature"):
        bedl_torch.soft_edit_distance(x, y, C * 1e300, 1e-300)


def test_opcheck():
    batch = PairBatch([Tree.from_bracket("{a{b}{c}}"), Tree.from_bracket("{b}")],
                      [Tree.from_bracket("{a{c}}"), Tree.from_bracket("{c{a}{b}}")])
    costs = torch.rand(2, batch.rows, batch.cols, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    utils = ["test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"]
    for need_grad in (False, True):
        torch.library.opcheck(torch.ops.bedl_torch.ted_soft.default,
                              (costs, batch.x_table.sizes, batch.x_table.ptr, batch.y_table.sizes,
                               batch.y_table.ptr, batch.pair_x, batch.pair_y, 0.5, need_grad), test_utils=utils)
        torch.library.opcheck(torch.ops.bedl_torch.sed_soft.default,
                              (costs, torch.tensor([3, 1]), torch.tensor([2, 3]), 0.5, need_grad), test_utils=utils)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_costs_on_cuda():
    x, y = Tree.from_bracket("{a{b}{c}}"), Tree.from_bracket("{a{c}}")
    C = torch.rand(4, 3, dtype=torch.float64)
    Cc = C.cuda().requires_grad_(True)
    d = bedl_torch.soft_edit_distance(x, y, Cc, 0.5)
    d.backward()
    assert d.device.type == "cuda" and Cc.grad.device.type == "cuda"
    C.requires_grad_(True)
    d_cpu = bedl_torch.soft_edit_distance(x, y, C, 0.5)
    d_cpu.backward()
    assert float(d) == float(d_cpu) and torch.equal(Cc.grad.cpu(), C.grad)
