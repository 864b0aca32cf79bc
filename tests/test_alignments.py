"""optimal_mapping, sample_mappings and edit scripts against enumeration of all valid mappings."""
import math

import numpy as np
import pytest
import torch

import bedl_torch
from bedl_torch.alignments import (edit_script, format_edit_script, mapping_cost, mapping_indicator,
                                   optimal_mapping, optimal_mappings, plot_mapping, sample_mappings)
from bedl_torch.tree import Tree
from oracles import enumerate_mappings, is_valid_mapping, mapping_cost as oracle_cost, random_tree


def _pairs(mapping):
    return frozenset((i, j) for i, j in mapping if i is not None and j is not None)


def _covers_each_node_once(mapping, m, n):
    xs = [i for i, _ in mapping if i is not None]
    ys = [j for _, j in mapping if j is not None]
    return sorted(xs) == list(range(m)) and sorted(ys) == list(range(n))


def _co_optimal(x, y, C):
    """All co-optimal mappings (as frozensets of pairs), by enumeration; integer costs: exact ties."""
    m, n = len(x), len(y)
    scored = [(oracle_cost(M, C, m, n), M) for M in enumerate_mappings(x, y)]
    best = min(c for c, _ in scored)
    return best, [M for c, M in scored if c == best]


def _first_by_rule(mappings, m, n):
    """The documented rule: x's nodes in preorder, each the smallest partner index, deletion last."""
    def key(M):
        partner = dict(M)
        return tuple(partner.get(i, n) for i in range(m))
    return min(mappings, key=key)


def _cases(seed, count, max_nodes, trees=True):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        m, n = int(rng.integers(1, max_nodes + 1)), int(rng.integers(1, max_nodes + 1))
        if trees:
            x, y = Tree(*random_tree(m, "ab", rng)), Tree(*random_tree(n, "ab", rng))
        else:
            x, y = "".join(rng.choice(list("ab"), m)), "".join(rng.choice(list("ab"), n))
        C = rng.integers(0, 3, size=(m + 1, n + 1)).astype(np.float64)  # integer costs: many ties
        yield x, y, C


@pytest.mark.parametrize("trees", [True, False])
def test_optimal_mapping_is_the_first_co_optimal_mapping_by_rule(trees):
    for x, y, C in _cases(1, 60, 5, trees):
        m, n = len(x), len(y)
        Ct = torch.tensor(C)
        mapping = optimal_mapping(x, y, Ct)
        assert _covers_each_node_once(mapping, m, n)
        assert is_valid_mapping(x, y, _pairs(mapping))
        d = float(bedl_torch.edit_distance(x, y, Ct))
        assert float(mapping_cost(mapping, Ct)) == d
        best, opt = _co_optimal(x, y, C)
        assert best == d
        assert _pairs(mapping) == _first_by_rule(opt, m, n)
        # preorder of x first, then the insertions in preorder of y
        assert [i for i, _ in mapping if i is not None] == list(range(m))
        ins = [j for i, j in mapping if i is None]
        assert ins == sorted(ins) and all(i is None for i, _ in mapping[m:])


def test_optimal_mapping_random_costs_float32_and_batch():
    rng = np.random.default_rng(2)
    xs, ys, cs = [], [], []
    for _ in range(20):
        m, n = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        x, y = Tree(*random_tree(m, "abc", rng)), Tree(*random_tree(n, "abc", rng))
        C = torch.tensor(rng.random((m + 1, n + 1)), dtype=torch.float32)
        mapping = optimal_mapping(x, y, C)
        assert is_valid_mapping(x, y, _pairs(mapping))
        assert float(mapping_cost(mapping, C)) == pytest.approx(float(bedl_torch.edit_distance(x, y, C)), rel=1e-6)
        xs.append(x), ys.append(y), cs.append(C)
    assert optimal_mappings(xs, ys, cs) == [optimal_mapping(x, y, c) for x, y, c in zip(xs, ys, cs)]


def test_samples_are_uniform_over_co_optimal_mappings():
    """Frequencies of each co-optimal mapping against the uniform distribution (chi-square with a
    generous bound), and the mean indicator against P; fixed generator."""
    x = Tree.from_bracket("{a{a}{a}{a}}")
    y = Tree.from_bracket("{a{a}{a}}")
    C = torch.ones(5, 4, dtype=torch.float64)
    C[:4, :3] = 2.0  # a replacement costs a deletion and an insertion: every valid mapping is co-optimal
    best, opt = _co_optimal(x, y, C.numpy())
    assert len(opt) == len(list(enumerate_mappings(x, y))) > 20
    N = 3000
    samples = sample_mappings(x, y, C, N, generator=torch.Generator().manual_seed(0))
    counts = {M: 0 for M in opt}
    for s in samples:
        assert float(mapping_cost(s, C)) == best
        counts[_pairs(s)] += 1  # KeyError if a sample is not co-optimal
    expected = N / len(opt)
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    dof = len(opt) - 1
    assert chi2 < dof + 6 * math.sqrt(2 * dof)  # about 6 standard deviations of the chi-square
    mean = torch.stack([mapping_indicator(s, len(x), len(y)) for s in samples]).mean(0)
    _, P = bedl_torch.coopt_matrix(x, y, C)
    P[len(x), len(y)] = 0
    assert torch.allclose(mean, P, atol=6 * math.sqrt(0.25 / N))


@pytest.mark.parametrize("trees", [True, False])
def test_sample_frequencies_converge_to_P(trees):
    gen = torch.Generator().manual_seed(5)
    N = 400
    for x, y, C in _cases(7, 8, 5, trees):
        Ct = torch.tensor(C)
        samples = sample_mappings(x, y, Ct, N, generator=gen)
        d = float(bedl_torch.edit_distance(x, y, Ct))
        assert all(float(mapping_cost(s, Ct)) == d for s in samples)
        mean = torch.stack([mapping_indicator(s, len(x), len(y)) for s in samples]).mean(0)
        _, P = bedl_torch.coopt_matrix(x, y, Ct)
        P[len(x), len(y)] = 0
        bound = 6 * torch.sqrt(P * (1 - P) / N) + 1e-12  # entries with P in {0, 1} must match exactly
        assert bool(((mean - P).abs() <= bound).all())


def test_sampling_with_many_ties():
    """All costs equal on two 150-symbol sequences (about 10^85 co-optimal alignments): every
    sample is co-optimal and covers each symbol once."""
    x, y = "a" * 150, "a" * 140
    C = torch.ones(151, 141, dtype=torch.float64)
    d = float(bedl_torch.edit_distance(x, y, C))
    for s in sample_mappings(x, y, C, 2, generator=torch.Generator().manual_seed(1)):
        assert float(mapping_cost(s, C)) == d and _covers_each_node_once(s, 150, 140)


def test_edit_script_and_text():
    x = Tree.from_bracket("{f{a}{b}}")
    y = Tree.from_bracket("{f{b}{c}}")
    C = torch.ones(4, 4, dtype=torch.float64)
    C[:3, :3] = 2  # replacing by another label costs a deletion and an insertion
    C[0, 0] = 0  # f -> f
    C[2, 1] = 0  # b -> b
    mapping = optimal_mapping(x, y, C)
    script = edit_script(x, y, C, mapping)
    assert script == [("replace", 0, 0, 0.0), ("delete", 1, 1.0), ("replace", 2, 1, 0.0), ("insert", 2, 1.0)]
    text = format_edit_script(script, x, y)
    assert "keep    x[0] 'f' -> y[0] 'f'" in text and "delete  x[1] 'a'" in text
    assert "insert  y[2] 'c'" in text and text.endswith("total cost 2")
    assert edit_script(x, y, C) == script


def test_plot_mapping_draws_every_node():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    x = Tree(["a"] * 300, [[k + 1] for k in range(299)] + [[]])  # deep: no recursion limit
    y = Tree.from_bracket("{a{b}{a}}")
    C = torch.ones(301, 4, dtype=torch.float64)
    mapping = optimal_mapping(x, y, C)
    ax = plot_mapping(x, y, mapping)
    assert len(ax.collections) == 303  # one marker per node
    import matplotlib.pyplot as plt
    plt.close(ax.figure)


def test_bad_input():
    C = torch.ones(3, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="shape"):
        optimal_mapping("ab", "abc", C)
    with pytest.raises(ValueError, match="n must be"):
        sample_mappings("ab", "ab", C, -1)
    with pytest.raises(TypeError, match="generator"):
        sample_mappings("ab", "ab", C, 2, generator=3)
    with pytest.raises(TypeError):
        optimal_mapping("ab", "ab", C.long())
    bad = C.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError):
        optimal_mapping("ab", "ab", bad)
    assert sample_mappings("ab", "ab", C, 0) == []


@pytest.mark.parametrize("scale", [2.0 ** -1070, 1e-300, 1e300, 2.0 ** 1015])
def test_mappings_of_tiny_and_huge_costs_are_those_of_scaled_ones(scale):
    """A power-of-two scaling is exact, so the mappings are the same; subnormal and near-overflow
    costs included (where a margin relative to the costs would vanish or overflow)."""
    for x, y, C in _cases(11, 15, 5):
        Ct = torch.tensor(C)
        want = optimal_mapping(x, y, Ct)
        k = math.frexp(scale)[1] - 1
        scaled = torch.ldexp(Ct, torch.tensor(k))
        assert optimal_mapping(x, y, scaled) == want
        samples = sample_mappings(x, y, scaled, 5, generator=torch.Generator().manual_seed(3))
        assert samples == sample_mappings(x, y, Ct, 5, generator=torch.Generator().manual_seed(3))


#: float32 costs whose tie tolerance (1e-5 of the largest cost) spans every other cost: ties
#: within it are not transitive, so pinning one choice may change which others are allowed
NEAR_TIES_FLOAT32 = [
    [4.5455e+05, -8.4275, 1.6289, 5.8638, -0.36142, -8.1728, -1.5846, 5.4241, -4.8586, 6.7534, -9.1378],
    [-1.393, 7.0324, -2.4383, 6.213, 4.7482, -6.6865, 1.1378, -5.8114, 2.2485, 8.7966, 5.1885],
    [-2.745, 6.5743, -6.9057, 5.377, 1.9182, 1.0455, 6.4068, 9.097, 3.2629, 0.35139, 6.9972],
    [7.1482, -5.1076, -2.7358, -5.3317, 2.1237, 2.7395, 8.6961, 4.74, -9.3502, 2.2205, 9.1012],
    [-6.4165, 4.2537, -3.0697, -2.1854, -7.233, 2.7253, 1.7411, -5.5371, -4.803, -0.61634, -1.3172],
    [6.5014, 0.29561, 1.0255, -1.0506, -8.4117, -7.064, -3.7763, -7.511, -3.2131, 4.5881, -7.4788],
    [2.3644, -3.8281, 7.7137, -0.92282, -2.1405, 3.8434, -8.4357, 0.57858, 3.8246, 4.6557, 4.5049],
    [2.4899, -4.561, 3.2148, 9.1788, 7.9576, -0.38753, -9.4126, -9.6382, 5.4842, 0.25514, 1.4777],
    [1.9415, 1.369, 1.2242, 0.32059, -8.1014, -5.5306, 6.1152, -0.31378, 6.9836, -8.1928, -6.9883],
    [0.59025, -3.2587, -3.7063, -0.71299, 4.4879, -9.5752, -7.0422, -2.0504, -3.8651, 5.9769, -6.0581],
    [0.50157, -3.4686, -3.2501, -6.4192, 6.3109, 3.6149, 9.5577, -6.4511, -2.2682, -1.7794, -5.0785],
]


def test_samples_stay_valid_where_ties_are_not_transitive():
    """Every choice stays pinned, also those that P already makes with certainty: otherwise a
    later pin may let an earlier choice go and a y node is taken twice."""
    x = Tree(["a"] * 10, [list(range(1, 10))] + [[] for _ in range(9)])
    C = torch.tensor(NEAR_TIES_FLOAT32, dtype=torch.float32)
    d = float(bedl_torch.edit_distance(x, x, C))
    slack = 20 * 1e-5 * float(C.abs().max())  # |x| + |y| tie tests of the tolerance at most
    for seed in range(100):
        for s in sample_mappings(x, x, C, 2, generator=torch.Generator().manual_seed(seed)):
            assert _covers_each_node_once(s, 10, 10), s
            assert abs(float(mapping_cost(s, C.double())) - d) <= slack
    m = optimal_mapping(x, x, C)
    assert _covers_each_node_once(m, 10, 10) and abs(float(mapping_cost(m, C.double())) - d) <= slack


def _completed(pairs, m, n):
    """A set of replacement pairs as a full mapping: the other nodes deleted or inserted."""
    xs, ys = {i for i, _ in pairs}, {j for _, j in pairs}
    return (sorted(pairs) + [(i, None) for i in range(m) if i not in xs]
            + [(None, j) for j in range(n) if j not in ys])


def test_check_mapping_accepts_exactly_the_valid_mappings():
    """Random one-to-one pair sets on random trees and sequences: check_mapping accepts a set
    exactly where the brute-force definition (oracles.is_valid_mapping) does."""
    from bedl_torch.alignments import check_mapping

    rng = np.random.default_rng(3901)
    accepted = rejected = 0
    for trial in range(400):
        m, n = int(rng.integers(1, 7)), int(rng.integers(1, 7))
        if trial % 4 == 0:
            x, y = "a" * m, "b" * n
        else:
            x, y = Tree(*random_tree(m, "ab", rng)), Tree(*random_tree(n, "ab", rng))
        k = int(rng.integers(0, min(m, n) + 1))
        pairs = list(zip(rng.permutation(m)[:k].tolist(), rng.permutation(n)[:k].tolist()))
        mapping = _completed(pairs, m, n)
        if is_valid_mapping(x, y, pairs):
            assert check_mapping(mapping, x, y) == mapping
            accepted += 1
        else:
            with pytest.raises(ValueError, match=r"mapping pairs \(\d+, \d+\) and \(\d+, \d+\) cross"):
                check_mapping(mapping, x, y)
            rejected += 1
    assert accepted > 100 and rejected > 100  # both sides of the rule were exercised


def test_every_enumerated_mapping_passes_check_mapping():
    from bedl_torch.alignments import check_mapping

    x, y = Tree.from_bracket("{a{b{c}}{d}}"), Tree.from_bracket("{a{b}{c{d}}}")
    mappings = list(enumerate_mappings(x, y))
    assert len(mappings) == 42
    for M in mappings:
        check_mapping(_completed(list(M), 4, 4), x, y)


@pytest.mark.parametrize("mapping, error, pattern", [
    ([(0, 0), (1, 1), (3, 3)], ValueError, r"leaves node 2 of x out"),
    ([(0, 0), (1, 1), (2, 2), (3, 3), (None, 3)], ValueError, r"pair 4: node 3 of y appears twice"),
    ([(0, 0), (1, 1), (2, 2), (3, -1)], ValueError, r"pair 3: y index -1 is out of range for 4 nodes"),
    ([(0, 0), (1, 1), (2, 2), (4, 3)], ValueError, r"pair 3: x index 4 is out of range"),
    ([(None, None)], ValueError, r"pair 0 is \(None, None\)"),
    ([(0, 0.0)], TypeError, r"pair 0: the y index must be an int or None, got float"),
    ([(True, 0)], TypeError, r"the x index must be an int or None, got bool"),
    ([(0,)], TypeError, r"pair 0 must be an \(i, j\) pair"),
    ("abc", TypeError, r"mapping must be a list of \(i, j\) pairs, got str"),
    (5, TypeError, r"mapping must be a list of \(i, j\) pairs, got int"),
    ([(0, 0), (1, 2), (2, 1), (3, 3)], ValueError, r"pairs \(1, 2\) and \(2, 1\) cross"),
])
def test_edit_script_rejects_a_bad_mapping_naming_the_pair(mapping, error, pattern):
    """Before, an out-of-range index raised IndexError, a negative one silently read another
    node's cost, and a crossing or partial mapping gave a script of no valid mapping."""
    x, y = Tree.from_bracket("{a{b}{c}{d}}"), Tree.from_bracket("{a{b}{c}{d}}")
    C = torch.ones(5, 5, dtype=torch.float64)
    with pytest.raises(error, match=pattern):
        edit_script(x, y, C, mapping)


def test_mapping_cost_checks_the_mapping_against_the_costs_shape():
    C = torch.ones(3, 4, dtype=torch.float64)  # |x| = 2, |y| = 3
    assert float(mapping_cost([(0, 0), (1, None), (None, 1), (None, 2)], C)) == 4.0
    with pytest.raises(ValueError, match=r"y index 3 is out of range for 3 nodes"):
        mapping_cost([(0, 3), (1, None), (None, 0), (None, 1), (None, 2)], C)
    with pytest.raises(ValueError, match=r"leaves node 1 of x out"):
        mapping_cost([(0, 0), (None, 1), (None, 2)], C)
    with pytest.raises(ValueError, match=r"2-D"):
        mapping_cost([(0, 0)], C[0])


def test_edit_script_with_a_given_mapping_checks_the_costs_shape():
    x, y = "ab", "abc"
    with pytest.raises(ValueError, match=r"\(\|x\|\+1, \|y\|\+1\) = \(3, 4\)"):
        edit_script(x, y, torch.ones(4, 4, dtype=torch.float64), [(0, 0), (1, 1), (None, 2)])
    assert edit_script(x, y, torch.ones(3, 4, dtype=torch.float64), [(0, 0), (1, 1), (None, 2)]) == [
        ("replace", 0, 0, 1.0), ("replace", 1, 1, 1.0), ("insert", 2, 1.0)]
