"""The overflow rule: costs are accepted where 2 (|x| + |y|) max|cost| is finite in their dtype
(every value the DP forms is a sum of at most |x| + |y| costs, and a tie test subtracts two).
Within it results are exact; beyond it a ValueError names the pair, never a crash or a wrong P."""
import math

import numpy as np
import pytest
import torch

import bedl_torch
from bedl_torch import _ext
from bedl_torch.costs import UnitCost
from bedl_torch.tree import Tree
from oracles import forest_recursion, random_tree, sequence_reference

XA = Tree.from_bracket("{a{b}}")
YA = Tree.from_bracket("{a}")


def _entry_points(x, y, C):
    """Every public op that runs the kernel on one pair's costs C."""
    yield lambda: bedl_torch.edit_distance(x, y, C)
    yield lambda: bedl_torch.edit_distance(x, y, C.clone().requires_grad_(True)).backward()
    yield lambda: bedl_torch.coopt_matrix(x, y, C)
    yield lambda: bedl_torch.pseudo_edit_distance(x, y, C, C)
    yield lambda: bedl_torch.edit_distance_batch([x], [y], [C])
    yield lambda: bedl_torch.coopt_matrix_batch([x], [y], [C])


@pytest.mark.parametrize("x, y, C", [
    (XA, YA, torch.full((3, 2), 1e308, dtype=torch.float64)),  # crashed the process before the rule
    (XA, YA, -torch.full((3, 2), 1e308, dtype=torch.float64)),
    (XA, YA, torch.tensor([[0, 1e308], [1e308, 0], [1e308, 0]], dtype=torch.float64)),  # gave a wrong P
    ("ab", "cd", torch.full((3, 3), 1e308, dtype=torch.float64)),  # gave d = inf and P = 0
    ("ab", "cd", torch.full((3, 3), 3e38, dtype=torch.float32)),
])
def test_costs_beyond_the_rule_raise_value_error(x, y, C):
    for op in _entry_points(x, y, C):
        with pytest.raises(ValueError, match=r"pair 0 are too large"):
            op()


def test_long_path_pair_beyond_the_rule():
    path = Tree(["a"] * 2000, [[k + 1] for k in range(1999)] + [[]])
    with pytest.raises(ValueError, match="too large"):
        bedl_torch.coopt_matrix(path, path, torch.full((2001, 2001), 1e306, dtype=torch.float64))


@pytest.mark.parametrize("dtype, fits, exceeds", [
    # m + n = 4: 2 (m + n) = 2^3, so 2^1020 reaches 2^1023 (finite) and 2^1021 reaches 2^1024 (inf)
    (torch.float64, 2.0 ** 1020, 2.0 ** 1021),
    (torch.float32, 2.0 ** 124, 2.0 ** 125),
])
def test_rule_boundary(dtype, fits, exceeds):
    x, y = Tree.from_bracket("{a{b}}"), Tree.from_bracket("{a{c}}")  # m + n = 4
    C = torch.ones(3, 3, dtype=dtype)
    C[0, 0] = 0
    d, P = bedl_torch.coopt_matrix(x, y, C * fits)
    assert float(d) == fits and torch.equal(P, bedl_torch.coopt_matrix(x, y, C)[1])
    with pytest.raises(ValueError, match="too large"):
        bedl_torch.coopt_matrix(x, y, C * exceeds)
    with pytest.raises(ValueError, match="too large"):
        bedl_torch.edit_distance(x, y, C * exceeds)
    # the unused corner [m, n] does not count
    C2 = C * fits
    C2[2, 2] = torch.finfo(dtype).max
    assert float(bedl_torch.edit_distance(x, y, C2)) == fits


@pytest.mark.parametrize("dtype, scale, sign", [(torch.float64, 2.0 ** 1014, 1), (torch.float32, 2.0 ** 118, 1),
                                                (torch.float64, 2.0 ** 1014, -1)])
def test_huge_costs_within_the_rule_are_exact(dtype, scale, sign):
    """Costs 2^k times small integers (ties included): d is 2^k times the oracle's distance and
    P the oracle's P, to the bit, right up to the rule (a power of two scales exactly)."""
    rng = np.random.default_rng(7)
    for _ in range(30):
        m, n = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        x, y = random_tree(m, "ab", rng), random_tree(n, "ab", rng)
        small = sign * rng.integers(0, 3, size=(m + 1, n + 1)).astype(np.float64)  # many ties
        d_ref, P_ref, _ = forest_recursion(x, y, small)
        d, P = bedl_torch.coopt_matrix(Tree(*x), Tree(*y), torch.tensor(small * scale, dtype=dtype))
        assert float(d) == d_ref * scale
        np.testing.assert_allclose(P.double().numpy(), P_ref, rtol=0, atol=1e-6 if dtype == torch.float32 else 1e-12)
    for _ in range(30):
        m, n = int(rng.integers(0, 12)), int(rng.integers(0, 12))
        x, y = "".join(rng.choice(list("ab"), m)), "".join(rng.choice(list("ab"), n))
        small = sign * rng.integers(0, 3, size=(m + 1, n + 1)).astype(np.float64)
        d_ref, P_ref, _ = sequence_reference(x, y, small)
        d, P = bedl_torch.coopt_matrix(x, y, torch.tensor(small * scale, dtype=dtype))
        assert float(d) == d_ref * scale
        np.testing.assert_allclose(P.double().numpy(), P_ref, rtol=0, atol=1e-6 if dtype == torch.float32 else 1e-12)


class ScaledUnitCost(UnitCost):
    """Unit costs times a constant, through the symbol-table path."""

    def __init__(self, alphabet, scale):
        super().__init__(alphabet)
        self.scale = scale

    def symbol_table(self):
        return super().symbol_table() * self.scale

    def forward(self, x_idx, y_idx):
        return super().forward(x_idx, y_idx) * self.scale


@pytest.mark.parametrize("simd", [True, False])
@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_symbol_tables_follow_the_same_rule(simd, kind):
    """pairwise_distances gathers costs from a module's symbol table (four pairs at a time where
    AVX2 runs): the rule applies to the table's largest cost and the longest pair."""
    if simd and not _ext.simd_enabled():
        pytest.skip("the AVX2 paths are off or the processor has no AVX2")
    rng = np.random.default_rng(3)
    if kind == "tree":
        X = [Tree(*random_tree(int(rng.integers(20, 30)), "abc", rng)) for _ in range(6)]
    else:
        X = ["".join(rng.choice(list("abc"), int(rng.integers(20, 30)))) for _ in range(6)]
    longest = 2 * max(len(x) for x in X)  # |x| + |y| of the longest pair
    before = _ext.simd_enabled()
    _ext.set_simd_enabled(simd)
    try:
        D1 = bedl_torch.pairwise_distances(X, cost=UnitCost(list("abc")))
        k = 1023 - math.ceil(math.log2(2 * longest))  # 2 * longest * 2^k <= 2^1023
        D2 = bedl_torch.pairwise_distances(X, cost=ScaledUnitCost(list("abc"), 2.0 ** k))
        assert torch.equal(D2, D1 * 2.0 ** k)
        with pytest.raises(ValueError, match="too large"):
            bedl_torch.pairwise_distances(X, cost=ScaledUnitCost(list("abc"), 2.0 ** (k + 2)))  # past 2^1024
    finally:
        _ext.set_simd_enabled(before)


@pytest.mark.parametrize("kind", ["tree", "sequence"])
@pytest.mark.parametrize("mode", ["exact", "pseudo"])
def test_gap_gap_cost_is_under_the_rule(kind, mode):
    """Labels missing from the alphabet map to the gap (unknown="gap"), so a pair of them costs
    the table's [gap, gap] entry: the rule counts it like every other entry."""
    from bedl_torch.costs import MatrixCost

    X = [Tree.from_bracket("{u{u}}")] if kind == "tree" else ["uu"]
    # every node is unknown, so every edit costs [gap, gap] = 1: two replacements, d = 2
    D = bedl_torch.pairwise_distances(X, None, MatrixCost([], [[1.0]]), unknown="gap", mode=mode)
    assert D.tolist() == [[2.0]]
    with pytest.raises(ValueError, match="too large"):
        bedl_torch.pairwise_distances(X, None, MatrixCost([], [[1e308]]), unknown="gap", mode=mode)
    with pytest.raises(ValueError, match="NaN or inf"):
        bedl_torch.pairwise_distances(X, None, MatrixCost([], [[math.inf]]), unknown="gap",
                                      mode=mode)
