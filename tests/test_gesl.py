"""GESL: the QP against hand-derived (KKT) optima, a grid search and an independent solver."""
import itertools
import math

import numpy as np
import pytest

pytest.importorskip("scipy")
pytest.importorskip("sklearn")
pytest.importorskip("clarabel")

from bedl_torch.evaluation.gesl import (  # noqa: E402
    gesl_dual_bound, gesl_objective, select_pairs, solve_gesl_qp)

LOG2 = math.log(2)


# Instance A (entries: 0 = C[a,b], 1 = C[a,a], 2 = C[-,a]):
#   pos ("a", "b"): d = C[a,b];  pos ("a", "a"): d = C[a,a];  neg ("a", "aa"): d = C[a,a] + C[-,a]
# KKT (see test docstring): C[a,b] = C[a,a] = eta = 0, C[-,a] = min(1 / (2 lam), log 2).
FA_POS = np.array([[1.0, 0, 0], [0, 1.0, 0]])
FA_NEG = np.array([[0, 1.0, 1.0]])


@pytest.mark.parametrize("lam", [2.0, 1.0, 0.5, 0.1])
def test_instance_a_matches_kkt(lam):
    """At C[a,b] = C[a,a] = eta = 0 and w = C[-,a] the multipliers a_neg = min(1, 2 lam w),
    a_pos2 = a_neg, a_pos1 = 0 satisfy stationarity (2 lam w = a_neg; the gradients for C[a,b],
    C[a,a] and eta are a_pos1 >= 0, a_pos2 - a_neg >= 0 and a_neg - a_pos1 - a_pos2 >= 0 at
    their lower bounds), so the point is optimal; the optimum is log 2 - 1 / (4 lam) when
    1 / (2 lam) < log 2, else lam log(2)^2."""
    c, eta, info = solve_gesl_qp(FA_POS, FA_NEG, lam)
    w = min(1 / (2 * lam), LOG2)
    np.testing.assert_allclose(c, [0, 0, w], atol=1e-5)
    assert abs(eta) < 1e-5
    expected = LOG2 - 1 / (4 * lam) if 1 / (2 * lam) < LOG2 else lam * LOG2 ** 2
    assert info["objective"] == pytest.approx(expected, abs=1e-9)
    assert 0 <= info["gap"] < 1e-8


def test_instance_b_eta_interior_and_grid():
    """Two positive pairs ("b", "ba") (d = C[b,b] + C[-,a]) and one negative ("b", "baaa")
    (d = C[b,b] + 3 C[-,a]), lam = 4. KKT: u = C[b,b] = 0, x = C[-,a] = 1/lam = 0.25,
    eta = x = 0.25, multipliers a_neg = 1 (log 2 + eta - 3x > 0), a_pos1 + a_pos2 = 1:
    d/dx = 2 lam x + 1 - 3 = 0, d/deta = -1 + 1 = 0, d/du = 1 - 1 = 0 at u's bound.
    Optimum 4 * 0.0625 + log 2 + 0.25 - 0.75."""
    F_pos = np.array([[1.0, 1.0], [1.0, 1.0]])  # entries (C[b,b], C[-,a])
    F_neg = np.array([[1.0, 3.0]])
    lam = 4.0
    c, eta, info = solve_gesl_qp(F_pos, F_neg, lam)
    np.testing.assert_allclose(c, [0.0, 0.25], atol=1e-5)
    assert eta == pytest.approx(0.25, abs=1e-5)
    opt = 0.25 + LOG2 - 0.5
    assert info["objective"] == pytest.approx(opt, abs=1e-9)
    # brute force on a grid: never below the optimum, and close to it
    u = np.linspace(0, 0.6, 121)[:, None, None]
    x = np.linspace(0, 0.6, 121)[None, :, None]
    e = np.linspace(0, LOG2, 140)[None, None, :]
    grid = (lam * (u ** 2 + x ** 2) + 2 * np.maximum(u + x - e, 0)
            + np.maximum(LOG2 + e - u - 3 * x, 0))
    assert grid.min() >= opt - 1e-12
    assert grid.min() <= opt + 1e-2
    i = np.unravel_index(grid.argmin(), grid.shape)
    assert abs(x.ravel()[i[1]] - 0.25) <= 0.01 and abs(e.ravel()[i[2]] - 0.25) <= 0.01


def _epigraph_slsqp(F_pos, F_neg, lam, nonnegative):
    """Independent solution: the smooth epigraph QP with SciPy's SLSQP from several starts."""
    from scipy.optimize import minimize

    P, Q, D = len(F_pos), len(F_neg), F_pos.shape[1]

    def split(z):
        return z[:D], z[D], z[D + 1:D + 1 + P], z[D + 1 + P:]

    def f(z):
        c, _, xp, xn = split(z)
        return lam * c @ c + xp.sum() + xn.sum()

    cons = [{"type": "ineq", "fun": lambda z: split(z)[2] - (F_pos @ split(z)[0] - split(z)[1])},
            {"type": "ineq", "fun": lambda z: split(z)[3] - (LOG2 + split(z)[1] - F_neg @ split(z)[0])}]
    bounds = ([(0, None) if nonnegative else (None, None)] * D + [(0, LOG2)]
              + [(0, None)] * (P + Q))
    rng = np.random.default_rng(0)
    best = np.inf
    for _ in range(5):
        z0 = np.concatenate([rng.uniform(0, 1, D), [0.3], rng.uniform(0, 2, P + Q)])
        res = minimize(f, z0, method="SLSQP", bounds=bounds, constraints=cons,
                       options={"ftol": 1e-13, "maxiter": 2000})
        c, eta, _, _ = split(res.x)
        best = min(best, gesl_objective(c, eta, F_pos, F_neg, lam))
    return best


@pytest.mark.parametrize("seed,nonnegative", [(0, True), (1, True), (2, False), (3, True)])
def test_random_instances_against_independent_solver(seed, nonnegative):
    rng = np.random.default_rng(seed)
    D, P, Q = 6, 5, 4
    F_pos = rng.integers(0, 3, (P, D)).astype(float) * (rng.random((P, D)) < 0.5)
    F_neg = rng.integers(0, 3, (Q, D)).astype(float) * (rng.random((Q, D)) < 0.5)
    lam = float(rng.choice([0.05, 0.3, 2.0]))
    c, eta, info = solve_gesl_qp(F_pos, F_neg, lam, nonnegative=nonnegative)
    if nonnegative:
        assert c.min() >= 0
    assert 0 <= eta <= LOG2
    assert info["gap"] < 1e-8
    ref = _epigraph_slsqp(F_pos, F_neg, lam, nonnegative)
    assert info["objective"] <= ref + 1e-7
    # SLSQP reaches the certified optimum (seeds 0-29, both bounds: at most 7e-15 above it)
    assert info["objective"] >= ref - 1e-5
    # no random perturbation is better
    for _ in range(300):
        dc = rng.normal(0, 0.02, D)
        c2 = np.maximum(c + dc, 0) if nonnegative else c + dc
        e2 = float(np.clip(eta + rng.normal(0, 0.02), 0, LOG2))
        assert gesl_objective(c2, e2, F_pos, F_neg, lam) >= info["objective"] - 1e-9


def test_dual_bound_is_a_lower_bound():
    rng = np.random.default_rng(5)
    F_pos = rng.random((4, 3))
    F_neg = rng.random((3, 3))
    c, eta, info = solve_gesl_qp(F_pos, F_neg, 0.7)
    for _ in range(200):
        g = gesl_dual_bound(rng.random(4), rng.random(3), F_pos, F_neg, 0.7)
        assert g <= info["objective"] + 1e-12


def test_unused_entries_are_zero_and_lam_checked():
    F_pos = np.array([[1.0, 0, 0, 0]])
    F_neg = np.array([[0, 1.0, 0, 0]])
    c, eta, info = solve_gesl_qp(F_pos, F_neg, 1.0)
    assert info["n_active_entries"] == 2
    assert c[2] == 0 and c[3] == 0
    with pytest.raises(ValueError):
        solve_gesl_qp(F_pos, F_neg, 0.0)


def test_select_pairs_by_hand():
    x = np.array([0.0, 1.0, 3.0, 10.0, 12.0])
    D0 = np.abs(x[:, None] - x[None, :])
    y = np.array([0, 0, 0, 1, 1])
    pos, neg = select_pairs(D0, y, 1)
    assert sorted(map(tuple, pos)) == [(0, 1), (1, 0), (2, 1), (3, 4), (4, 3)]
    assert sorted(map(tuple, neg)) == [(0, 4), (1, 4), (2, 4), (3, 0), (4, 0)]
    pos, neg = select_pairs(D0, y, 5)  # more than available: all of them
    assert len(pos) == 3 * 2 + 2 * 1 and len(neg) == 3 * 2 + 2 * 3
    assert set(itertools.chain(*pos)) <= set(range(5))


# ------------------------------------------------------------------ with the core ops
def test_fit_pairs_instance_b_with_strings():
    """Instance B built from real strings: the unit-cost scripts of ("b", "ba") are
    match b + insert a, of ("b", "baaa") match b + 3 inserts of a."""
    from bedl_torch.evaluation.gesl import GESL

    g = GESL(lam=4.0).fit_pairs([("b", "ba"), ("b", "ba")], [("b", "baaa")],
                                alphabet=["a", "b"])
    a, gap = 0, 2  # b (index 1) matches itself at cost 0
    expected = np.zeros((3, 3))
    expected[gap, a] = 0.25  # C[-, a]; C[b, b] = 0
    np.testing.assert_allclose(g.C_, expected, atol=1e-5)
    assert g.eta_ == pytest.approx(0.25, abs=1e-5)
    assert g.info_["objective"] == pytest.approx(0.25 + LOG2 - 0.5, abs=1e-9)


def test_pair_frequencies_against_direct_computation():
    import torch

    from bedl_torch.costs import UnitCost
    from bedl_torch.evaluation.gesl import GESL, PairFrequencies, frequency_rows
    from bedl_torch.ops import pairwise_distances
    from bedl_torch.tree import Tree

    X = [Tree.from_bracket(s) for s in
         ["{a{b}{c}}", "{a{c}{b}{b}}", "{b{a{c}}}", "{c}", "{a{a}{a}{b}}", "{b{b}{c{a}}}"]]
    y = np.array([0, 0, 0, 1, 1, 1])
    freq = PairFrequencies(X)
    N = len(X)
    I, J = np.divmod(np.arange(N * N), N)
    F_direct, d_direct = frequency_rows([X[i] for i in I], [X[j] for j in J],
                                        UnitCost(freq.alphabet))
    # the symmetric storage (i <= j, transposed for i > j) reproduces every ordered pair
    np.testing.assert_allclose(freq.rows(I, J).toarray(), F_direct.toarray(), atol=1e-12)
    D0 = pairwise_distances(X).numpy()
    np.testing.assert_allclose(freq.reference_matrix(np.arange(N)), D0, atol=1e-12)
    # <F, C_unit> is the unit distance; the rows sum to the script length structure
    C1 = 1.0 - np.eye(freq.S)
    np.testing.assert_allclose(freq.pseudo_matrix(np.arange(N), np.arange(N), C1), D0,
                               atol=1e-12)
    # GESL end to end: pseudo distances from the frequencies equal the core's pseudo mode
    g = GESL(n_neighbors=2, lam=0.5).fit_frequencies(freq, np.arange(N), y)
    assert g.info_["gap"] < 1e-8
    assert g.C_.min() >= 0
    Dp = freq.pseudo_matrix(np.arange(N), np.arange(N), g.C_)
    np.testing.assert_allclose(g.pseudo_distances(X).numpy(), Dp, atol=1e-10)
    # the exact edit distance under the learned costs is never above the pseudo one
    De = pairwise_distances(X, cost=g.cost_).numpy()
    assert np.all(De <= Dp + 1e-10)
    # the learned cost is a fixed table usable by the core
    assert isinstance(g.cost_.matrix, torch.Tensor) and g.cost_.matrix.shape == (freq.S,) * 2


def test_matrix_cost_checks_shape():
    from bedl_torch.evaluation.gesl import MatrixCost

    with pytest.raises(ValueError):
        MatrixCost(["a", "b"], np.zeros((2, 2)))
    c = MatrixCost(["a", "b"], np.array([[0, 1, 2], [1, 0, 2], [2, 2, 0.0]]))
    assert c.symmetric
    import torch

    out = c(torch.tensor([[0, 2]]), torch.tensor([[1, 1, 2]]))
    np.testing.assert_allclose(out.numpy(), [[[1, 1, 2], [2, 2, 0]]])


def test_fit_needs_one_class_label_per_object():
    """A short y used only its first objects and a NaN label paired its object with every
    other one as a negative, silently."""
    from bedl_torch.evaluation.gesl import GESL

    X = ["ab", "ba", "a", "bb", "abb", "b"]
    with pytest.raises(ValueError, match=r"y must hold one label per point: 3 labels for distances of shape \(6, 6\)"):
        GESL().fit(X, [0, 1, 0])
    with pytest.raises(ValueError, match=r"y contains NaN \(entry 5\)"):
        GESL().fit(X, [0.0, 1.0, 0.0, 1.0, 0.0, float("nan")])
    with pytest.raises(ValueError, match="y must be one-dimensional"):
        GESL().fit(X, np.zeros((6, 1)))
