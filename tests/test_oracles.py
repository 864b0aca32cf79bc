"""The test oracles agree with each other and with hand-checked examples (no library needed)."""
import itertools
import math

import numpy as np
import pytest

from oracles import (
    COST_KINDS,
    binomial_path_P,
    brute_force,
    comb_tree,
    enumerate_mappings,
    forest_recursion,
    is_valid_mapping,
    mapping_cost,
    path_tree,
    random_costs,
    random_sequence,
    random_tree,
    sequence_reference,
    star_tree,
    structure,
    zero_cost_sequence_P,
)

ALPHABETS = ("a", "ab", "abc")


def _all_partial_injections(m, n):
    for k in range(min(m, n) + 1):
        for xs in itertools.combinations(range(m), k):
            for ys in itertools.permutations(range(n), k):
                yield frozenset(zip(xs, ys))


def _close(r1, r2):
    d1, P1, c1 = r1
    d2, P2, c2 = r2
    assert abs(d1 - d2) <= 1e-9
    assert c1 == c2
    np.testing.assert_allclose(P1, P2, rtol=0, atol=1e-12)


def _check_P_invariants(x, y, C, d, P):
    m, n = len(structure(x).labels), len(structure(y).labels)
    assert P.shape == (m + 1, n + 1)
    assert P[m, n] == 0
    assert np.all(P >= 0) and np.all(P <= 1 + 1e-12)
    np.testing.assert_allclose(P[:m].sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(P[:, :n].sum(0), 1.0, atol=1e-12)
    assert abs((P * C).sum() - d) <= 1e-9 * max(1, abs(d))


# --------------------------------------------------------------------------------- enumeration
@pytest.mark.parametrize("seed", range(40))
def test_enumeration_is_exactly_the_valid_mappings(seed):
    """Backtracking enumeration == all partial injections filtered by the definition."""
    rng = np.random.default_rng(seed)
    m, n = rng.integers(1, 5, size=2)
    x = random_tree(int(m), "ab", rng)
    y = random_tree(int(n), "ab", rng)
    got = list(enumerate_mappings(x, y))
    assert len(got) == len(set(got))
    want = {M for M in _all_partial_injections(int(m), int(n)) if is_valid_mapping(x, y, M)}
    assert set(got) == want


@pytest.mark.parametrize("m,n", [(0, 0), (0, 3), (2, 0), (3, 3), (4, 2), (5, 5)])
def test_sequence_mapping_count_is_binomial(m, n):
    """Order-preserving partial matchings of m and n elements: sum_k C(m,k) C(n,k) = C(m+n, m)."""
    x, y = ["a"] * m, ["b"] * n
    got = list(enumerate_mappings(x, y))
    assert len(got) == math.comb(m + n, m)
    assert all(is_valid_mapping(x, y, M) for M in got)


def test_validity_definition_by_hand():
    x = (["a", "b", "c"], [[1, 2], [], []])  # a(b, c)
    y = (["a", "c"], [[1], []])  # a(c)
    assert is_valid_mapping(x, y, {(0, 0), (2, 1)})
    assert is_valid_mapping(x, y, {(0, 0), (1, 1)})
    assert not is_valid_mapping(x, y, {(1, 0), (2, 1)})  # siblings -> ancestor/descendant
    assert not is_valid_mapping(x, y, {(0, 1), (1, 0)})  # ancestry reversed
    assert not is_valid_mapping(x, y, {(1, 1), (2, 1)})  # not one-to-one
    p = (["a", "b", "c"], [[1], [2], []])  # a(b(c)), a path
    assert not is_valid_mapping(x, p, {(1, 1), (2, 2)})  # siblings vs parent/child
    assert is_valid_mapping("abc", "cab", {(0, 1), (2, 2)})
    assert not is_valid_mapping("abc", "cab", {(0, 2), (2, 1)})  # order reversed
    assert len(list(enumerate_mappings(x, y))) == 1 + 3 * 2 + 2  # {}, singles, {(0,0),(1|2,1)}


def test_zero_costs_count_every_mapping():
    """With all costs 0 every valid mapping is co-optimal: the counts are the mapping counts."""
    rng = np.random.default_rng(7)
    for _ in range(30):
        x = random_tree(int(rng.integers(1, 7)), "a", rng)
        y = random_tree(int(rng.integers(1, 7)), "a", rng)
        C = np.zeros((len(x[0]) + 1, len(y[0]) + 1))
        total = sum(1 for _ in enumerate_mappings(x, y))
        assert forest_recursion(x, y, C)[2] == total
        assert brute_force(x, y, C)[2] == total


# --------------------------------------------------------------------------------- hand examples
def test_hand_a_bc_vs_a_c_unit():
    x = (["a", "b", "c"], [[1, 2], [], []])
    y = (["a", "c"], [[1], []])
    C = random_costs(x, y, "unit", 0)
    # unique optimum: a-a, c-c, delete b -> 1
    want = np.array([[1, 0, 0], [0, 0, 1], [0, 1, 0], [0, 0, 0]], dtype=float)
    for f in (brute_force, forest_recursion):
        d, P, count = f(x, y, C)
        assert d == 1.0 and count == 1
        np.testing.assert_array_equal(P, want)


def test_hand_swap_three_way_tie():
    """ab vs ba (and a(b) vs b(a)) with unit costs: d = 2 reached by {(0,0),(1,1)}, {(0,1)} and
    {(1,0)}: every entry off the corner is 1/3."""
    third = 1 / 3
    want = np.array([[third] * 3, [third] * 3, [third, third, 0]])
    C = random_costs("ab", "ba", "unit", 0)
    for f in (brute_force, forest_recursion, sequence_reference):
        d, P, count = f("ab", "ba", C)
        assert d == 2.0 and count == 3
        np.testing.assert_allclose(P, want, atol=1e-15)
    x = (["a", "b"], [[1], []])
    y = (["b", "a"], [[1], []])
    for f in (brute_force, forest_recursion):
        d, P, count = f(x, y, C)
        assert d == 2.0 and count == 3
        np.testing.assert_allclose(P, want, atol=1e-15)


def test_hand_delete_insert_counted_once():
    """x = a, y = b, replacement 2, indels 1: {(0,0)} and {} both cost 2 -> exactly 2 mappings
    (a DP path count would give 3: replace, delete-insert, insert-delete)."""
    C = np.array([[2.0, 1.0], [1.0, 0.0]])
    want = np.array([[0.5, 0.5], [0.5, 0.0]])
    for x, y, fs in [("a", "b", (brute_force, forest_recursion, sequence_reference)),
                     ((["a"], [[]]), (["b"], [[]]), (brute_force, forest_recursion))]:
        for f in fs:
            d, P, count = f(x, y, C)
            assert d == 2.0 and count == 2
            np.testing.assert_array_equal(P, want)


def test_hand_empty_sequences():
    C = np.array([[0.0]])
    for f in (brute_force, forest_recursion, sequence_reference):
        d, P, count = f("", "", C)
        assert d == 0 and count == 1 and P.shape == (1, 1) and P[0, 0] == 0
    C = np.array([[2.0, 3.0, 0.0]])  # x empty: insert both symbols
    for f in (brute_force, forest_recursion, sequence_reference):
        d, P, count = f("", "ab", C)
        assert d == 5 and count == 1
        np.testing.assert_array_equal(P, [[1, 1, 0]])
    C = np.array([[0.5], [0.25], [0.0]])  # y empty: delete both symbols
    for f in (brute_force, forest_recursion, sequence_reference):
        d, P, count = f("ab", "", C)
        assert d == 0.75 and count == 1
        np.testing.assert_array_equal(P, [[1], [1], [0]])


def test_hand_star_vs_path_unit():
    """a(a, a) vs a(a(a)), unit costs (all labels equal: replacement 0), worked by hand.

    A mapping of k pairs costs (3 - k) + (3 - k). Size 3 is impossible (x's leaves are siblings,
    y's lower nodes are ancestor and descendant), so d = 2, reached by the six size-2 mappings
    {root or (0,1)} x {leaf1, leaf2}: {(0,0),(1,1)}, {(0,0),(1,2)}, {(0,1),(1,2)} and the same
    with leaf 2. Root of x: y0 in 4, y1 in 2. Leaf 1: y1 in 1, y2 in 2, deleted in 3.
    Every y node is left out by 2 of the 6.
    """
    x = star_tree(3)
    y = path_tree(3)
    C = random_costs(x, y, "unit", 0)
    got = brute_force(x, y, C)
    assert got[0] == 2.0 and got[2] == 6
    opt = {M for M in enumerate_mappings(x, y) if mapping_cost(M, C, 3, 3) == 2.0}
    expected = {
        frozenset({(0, 0), (1, 1)}), frozenset({(0, 0), (1, 2)}), frozenset({(0, 1), (1, 2)}),
        frozenset({(0, 0), (2, 1)}), frozenset({(0, 0), (2, 2)}), frozenset({(0, 1), (2, 2)}),
    }
    assert opt == expected
    P = got[1]
    np.testing.assert_allclose(P[0], [4 / 6, 2 / 6, 0, 0])
    np.testing.assert_allclose(P[1], [0, 1 / 6, 2 / 6, 3 / 6])
    np.testing.assert_allclose(P[2], [0, 1 / 6, 2 / 6, 3 / 6])
    np.testing.assert_allclose(P[3], [2 / 6, 2 / 6, 2 / 6, 0])
    _close(got, forest_recursion(x, y, C))


# --------------------------------------------------------------------------------- cross checks
@pytest.mark.parametrize("kind", COST_KINDS)
def test_forest_recursion_equals_brute_force_trees(kind):
    rng = np.random.default_rng(hash(kind) % 2**32)
    for _ in range(80):
        alphabet = ALPHABETS[int(rng.integers(0, 3))]
        x = random_tree(int(rng.integers(1, 7)), alphabet, rng)
        y = random_tree(int(rng.integers(1, 7)), alphabet, rng)
        C = random_costs(x, y, kind, rng)
        bf = brute_force(x, y, C)
        _close(bf, forest_recursion(x, y, C))
        _check_P_invariants(x, y, C, bf[0], bf[1])


@pytest.mark.parametrize("kind", COST_KINDS)
def test_sequence_reference_equals_brute_force(kind):
    rng = np.random.default_rng(1 + hash(kind) % 2**32)
    for _ in range(80):
        alphabet = ALPHABETS[int(rng.integers(0, 3))]
        x = random_sequence(int(rng.integers(0, 7)), alphabet, rng)
        y = random_sequence(int(rng.integers(0, 7)), alphabet, rng)
        C = random_costs(x, y, kind, rng)
        bf = brute_force(x, y, C)
        _close(bf, sequence_reference(x, y, C))
        _close(bf, forest_recursion(x, y, C))
        _check_P_invariants(x, y, C, bf[0], bf[1])


def test_sequence_reference_equals_forest_recursion_longer():
    rng = np.random.default_rng(11)
    for kind in COST_KINDS:
        for _ in range(5):
            x = random_sequence(int(rng.integers(0, 25)), "ab", rng)
            y = random_sequence(int(rng.integers(0, 25)), "ab", rng)
            C = random_costs(x, y, kind, rng)
            _close(sequence_reference(x, y, C), forest_recursion(x, y, C))


def test_path_trees_behave_like_sequences():
    """A path's mappings are monotone matchings, like a sequence's."""
    rng = np.random.default_rng(5)
    for _ in range(10):
        m, n = (int(v) for v in rng.integers(1, 12, size=2))
        x, y = path_tree(m), path_tree(n)
        C = random_costs(x, y, "integer", rng)
        _close(forest_recursion(x, y, C), sequence_reference(["a"] * m, ["a"] * n, C))


@pytest.mark.parametrize("m,n", [(1, 1), (3, 1), (5, 3), (9, 4), (4, 9), (11, 11)])
def test_closed_form_all_ones(m, n):
    """All costs 1: every maximum mapping (size min(m, n)) is co-optimal."""
    Pw, count = binomial_path_P(m, n)
    C = np.ones((m + 1, n + 1))
    for got in (forest_recursion(path_tree(m), path_tree(n), C),
                sequence_reference("a" * m, "b" * n, C)):
        assert got[0] == max(m, n) and got[2] == count
        np.testing.assert_allclose(got[1], Pw, atol=1e-15)


@pytest.mark.parametrize("m,n", [(30, 12), (12, 30), (60, 60), (200, 150)])
def test_closed_form_log_space_matches_exact(m, n):
    Pe, ce = binomial_path_P(m, n, exact=True)
    Pl, cl = binomial_path_P(m, n, exact=False)
    assert ce == cl
    np.testing.assert_allclose(Pl, Pe, rtol=0, atol=1e-11)


def test_closed_form_matches_sequence_reference_larger():
    m, n = 120, 80
    got = sequence_reference("a" * m, "a" * n, random_costs("a" * m, "a" * n, "unit", 0))
    P, count = binomial_path_P(m, n)
    assert got[0] == m - n and got[2] == count
    np.testing.assert_allclose(got[1], P, rtol=0, atol=1e-12)


@pytest.mark.parametrize("m,n", [(0, 3), (3, 0), (1, 1), (4, 7), (30, 20)])
def test_zero_cost_sequences_closed_form(m, n):
    C = np.zeros((m + 1, n + 1))
    d, P, count = sequence_reference("a" * m, "b" * n, C)
    Pw, cw = zero_cost_sequence_P(m, n)
    assert d == 0 and count == cw
    np.testing.assert_allclose(P, Pw, rtol=0, atol=1e-12)


def test_identical_shapes_all_ones_identity():
    for x in (comb_tree(9), comb_tree(10, leaf_first=False), star_tree(7), random_tree(11, "a", 3)):
        n = len(x[0])
        C = np.ones((n + 1, n + 1))
        d, P, count = forest_recursion(x, x, C)
        assert d == n and count == 1
        want = np.zeros((n + 1, n + 1))
        want[:n, :n] = np.eye(n)
        np.testing.assert_array_equal(P, want)


def test_generators():
    rng = np.random.default_rng(0)
    shapes = set()
    for _ in range(200):
        k = int(rng.integers(1, 8))
        t = random_tree(k, "xyz", rng)
        s = structure(t)  # validates preorder
        assert s.n == k and set(t[0]) <= set("xyz")
        shapes.add(tuple(map(tuple, t[1])))
    assert len(shapes) > 50  # of 1+1+2+5+14+42+132 possible
    combs = (comb_tree, lambda k: comb_tree(k, leaf_first=False))
    for f in (path_tree, star_tree) + combs:
        for k in range(1, 12):
            t = structure(f(k))
            assert t.n == k
            if f in combs:
                assert sum(1 for c in t.children if not c) == (k + 1) // 2
    x, y = random_tree(4, "ab", rng), random_sequence(3, "ab", rng)
    for kind in COST_KINDS:
        C = random_costs(x, y, kind, rng)
        assert C.shape == (5, 4) and C.dtype == np.float64 and np.isfinite(C).all()
    C = random_costs("aab", "ab", "euclidean", rng)
    assert C[0, 0] == 0 and C[1, 0] == 0 and C[2, 1] == 0
    with pytest.raises(ValueError):
        structure((["a", "b"], [[], [0]]))
