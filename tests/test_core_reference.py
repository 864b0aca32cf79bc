"""The library's distances and co-optimal matrices P against the independent oracles.

* trees of 1..6 nodes: brute-force mapping enumeration (distance, P);
* trees of 7..14 nodes: the memoised forest recursion (distance, P);
* sequences of 0..25 symbols (empty ones included): the exact-count sequence DP;
* trees of 100+ nodes and long sequences, unit costs: edist's distances.

Cost kinds: unit, Euclidean (pseudo-metric), integer {0, 1, 2} (many exact ties), arbitrary
uniform [0, 1) and signed uniform [-1, 1) (non-metric, asymmetric). Every failure message names
the smallest failing input.
"""
import numpy as np
import pytest
import torch

import bedl_torch
from bedl_torch.tree import Tree
from oracles import (
    COST_KINDS,
    brute_force,
    forest_recursion,
    random_costs,
    random_sequence,
    random_tree,
    sequence_reference,
)

TOL = 1e-9
ALPHABETS = ("a", "ab", "abc", "abcdef")


def lib(x):
    """Oracle input -> library input: (labels, children) -> Tree; sequences unchanged."""
    if isinstance(x, tuple):
        return Tree(x[0], x[1])
    return x


def _compare(cases, oracle):
    """Run the library on every case, compare with ``oracle``; fail naming the smallest case."""
    failures = []
    for x, y, C in cases:
        d_ref, P_ref, _ = oracle(x, y, C)
        Ct = torch.as_tensor(C, dtype=torch.float64)
        try:
            d, P = bedl_torch.coopt_matrix(lib(x), lib(y), Ct)
            d2 = bedl_torch.edit_distance(lib(x), lib(y), Ct)
        except Exception as exc:  # report, don't stop at the first
            failures.append((x, y, C, d_ref, P_ref, f"raised {exc!r}", None))
            continue
        d, d2, P = float(d), float(d2), P.detach().numpy()
        bad = (
            abs(d - d_ref) > TOL
            or abs(d2 - d_ref) > TOL
            or P.shape != P_ref.shape
            or not np.all(np.abs(P - P_ref) <= TOL)
        )
        if bad:
            failures.append((x, y, C, d_ref, P_ref, (d, d2), P))
    if failures:
        def size(f):
            return (len(f[0][0]) if isinstance(f[0], tuple) else len(f[0])) + (
                len(f[1][0]) if isinstance(f[1], tuple) else len(f[1]))

        x, y, C, d_ref, P_ref, got, P = min(failures, key=size)
        np.set_printoptions(precision=17, linewidth=150)
        pytest.fail(
            f"{len(failures)} of {len(cases)} cases differ; smallest:\n"
            f"x = {x!r}\ny = {y!r}\nC = np.{C!r}\n"
            f"expected d = {d_ref!r}\nexpected P =\n{P_ref!r}\n"
            f"got (coopt_matrix d, edit_distance d) = {got!r}\ngot P =\n{P!r}"
        )


def _tree_cases(kind, count, lo, hi, seed):
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        alphabet = ALPHABETS[int(rng.integers(0, len(ALPHABETS)))]
        x = random_tree(int(rng.integers(lo, hi + 1)), alphabet, rng)
        y = random_tree(int(rng.integers(lo, hi + 1)), alphabet, rng)
        cases.append((x, y, random_costs(x, y, kind, rng)))
    return cases


def _seq_cases(kind, count, lo, hi, seed):
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        alphabet = ALPHABETS[int(rng.integers(0, len(ALPHABETS)))]
        x = random_sequence(int(rng.integers(lo, hi + 1)), alphabet, rng)
        y = random_sequence(int(rng.integers(lo, hi + 1)), alphabet, rng)
        if rng.random() < 0.3:
            x = "".join(x)  # strings too
            y = "".join(y)
        cases.append((x, y, random_costs(x, y, kind, rng)))
    return cases


@pytest.mark.parametrize("kind", COST_KINDS)
def test_small_trees_vs_brute_force(kind):
    _compare(_tree_cases(kind, 300, 1, 6, 100 + COST_KINDS.index(kind)), brute_force)


@pytest.mark.parametrize("kind", COST_KINDS)
def test_medium_trees_vs_forest_recursion(kind):
    _compare(_tree_cases(kind, 100, 7, 14, 200 + COST_KINDS.index(kind)), forest_recursion)


@pytest.mark.parametrize("kind", COST_KINDS)
def test_tiny_sequences_vs_brute_force(kind):
    _compare(_seq_cases(kind, 100, 0, 5, 300 + COST_KINDS.index(kind)), brute_force)


@pytest.mark.parametrize("kind", COST_KINDS)
def test_sequences_vs_sequence_reference(kind):
    _compare(_seq_cases(kind, 300, 0, 25, 400 + COST_KINDS.index(kind)), sequence_reference)


def test_special_shapes_vs_forest_recursion():
    """Paths, stars and single nodes against each other, all cost kinds."""
    from oracles import comb_tree, path_tree, star_tree

    rng = np.random.default_rng(5)
    shapes = [path_tree, star_tree, comb_tree]
    cases = []
    for kind in COST_KINDS:
        for f in shapes:
            for g in shapes:
                for m, n in [(1, 1), (1, 9), (9, 1), (8, 11)]:
                    x, y = f(m, "a"), g(n, "a")
                    cases.append((x, y, random_costs(x, y, kind, rng)))
    _compare(cases, forest_recursion)


# ------------------------------------------------------------------------------ edist distances
def _edist():
    try:
        import edist.sed
        import edist.ted
    except ImportError:
        pytest.skip("edist is not installed")
    return edist


def _unit(x, y):
    return torch.as_tensor(random_costs(x, y, "unit", 0))


def test_large_trees_unit_costs_vs_edist():
    edist = _edist()
    rng = np.random.default_rng(17)
    for k in range(12):
        alphabet = ALPHABETS[k % len(ALPHABETS)]
        x = random_tree(int(rng.integers(100, 161)), alphabet, rng)
        y = random_tree(int(rng.integers(100, 161)), alphabet, rng)
        want = edist.ted.standard_ted(x[0], x[1], y[0], y[1])
        C = _unit(x, y)
        got = bedl_torch.edit_distance(lib(x), lib(y), C)
        assert float(got) == want, (k, float(got), want)
        d, P = bedl_torch.coopt_matrix(lib(x), lib(y), C)
        assert float(d) == want
        assert torch.isfinite(P).all()
        m, n = len(x[0]), len(y[0])
        torch.testing.assert_close(P[:m].sum(1), torch.ones(m, dtype=P.dtype), rtol=0, atol=1e-9)
        torch.testing.assert_close(P[:, :n].sum(0), torch.ones(n, dtype=P.dtype), rtol=0,
                                   atol=1e-9)


def test_long_sequences_unit_costs_vs_edist():
    edist = _edist()
    rng = np.random.default_rng(18)
    for k in range(12):
        alphabet = ALPHABETS[k % len(ALPHABETS)]
        x = random_sequence(int(rng.integers(150, 400)), alphabet, rng)
        y = random_sequence(int(rng.integers(150, 400)), alphabet, rng)
        want = edist.sed.standard_sed(x, y)
        got = bedl_torch.edit_distance(x, y, _unit(x, y))
        assert float(got) == want, (k, float(got), want)
