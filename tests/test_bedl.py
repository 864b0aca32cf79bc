"""The BEDL estimator on the Strings data set and small trees."""
import math
import re
import sys

import numpy as np
import pytest
import torch

from bedl_torch.costs import EuclideanCost, UnitCost
from bedl_torch.datasets import make_strings
from bedl_torch.learning import BEDL, MedianGLVQ, init_prototypes, median_glvq_em
from bedl_torch.learning.bedl import initial_embedding
from bedl_torch.learning.training import ObjectiveFactory
from bedl_torch.ops import PairBatch, pairwise_distances
from bedl_torch.pretrained import CosineCost
from bedl_torch.tree import Tree
from lbfgs_probe import ProbeLBFGS


@pytest.fixture(scope="module")
def strings():
    Xtr, ytr = make_strings(100, seed=101)
    Xte, yte = make_strings(100, seed=202)  # a fresh draw
    return Xtr, ytr, Xte, yte


@pytest.fixture(scope="module")
def fitted(strings):
    Xtr, ytr, _, _ = strings
    return BEDL().fit(Xtr, ytr)


def test_strings_initial_distance_is_poor(strings):
    # sanity: with unit costs the task is hard (the paper: 36% MGLVQ, 21% KNN error)
    # (seeds 0-29, test draws seed + 1000: lowest error 32%)
    Xtr, ytr, Xte, yte = strings
    D = pairwise_distances(Xtr, None).numpy()
    D_te = pairwise_distances(Xte, Xtr).numpy()
    err = 1 - MedianGLVQ().fit(D, ytr).score(D_te, yte)
    assert err > 0.1


def test_strings_test_error_at_most_two_percent(strings, fitted):
    # BEDL() on seeds 0-29 (test draws seed + 1000): worst error 0% (median GLVQ and 1-NN)
    Xtr, ytr, Xte, yte = strings
    assert 1 - fitted.score(Xte, yte) <= 0.02  # median GLVQ with the learned distance
    D = fitted.pairwise_distances(Xte, Xtr)
    assert D.shape == (100, 100) and isinstance(D, np.ndarray)
    knn_err = np.mean(ytr[np.argmin(D, axis=1)] != yte)  # 1-NN
    assert knn_err <= 0.02


def test_fitted_attributes(strings, fitted):
    Xtr, ytr, _, _ = strings
    assert fitted.alphabet_ == ["a", "b", "c", "d"]
    assert isinstance(fitted.cost_, EuclideanCost)
    assert fitted.cost_.embedding.shape == (4, 4)
    assert list(fitted.classes_) == [0, 1]
    assert list(fitted.prototype_labels_) == [0, 1]
    for p, i, lab in zip(fitted.prototypes_, fitted.prototype_indices_, fitted.prototype_labels_):
        assert Xtr[i] == p and ytr[i] == lab
    assert len(fitted.loss_history_) == fitted.n_rounds_ + 1 == len(fitted.n_evals_) + 1
    # a metric step never ends above its start (the later entries start from other alignments
    # and prototypes, so the history as a whole need not fall)
    assert fitted.loss_history_[1] <= fitted.loss_history_[0]
    assert all(n >= 1 for n in fitted.n_evals_)
    # the learned cost is still a pseudo-metric: symmetric, zero diagonal
    D = fitted.pairwise_distances(Xtr[:10])
    assert np.allclose(D, D.T) and np.allclose(np.diag(D), 0)


def _sorted_rows(D, k, skip_self):
    """Reference k-NN: each row of D by (distance, index), the diagonal left out if asked."""
    D = np.array(D, dtype=np.float64)
    if skip_self:
        np.fill_diagonal(D, np.inf)
    order = np.lexsort((np.broadcast_to(np.arange(D.shape[1]), D.shape), D), axis=1)[:, :k]
    return np.take_along_axis(D, order, 1), order


def test_kneighbors_and_radius_are_the_learned_matrix_sorted(strings, fitted):
    Xtr, ytr, Xte, yte = strings
    # duplicates in Y: equal distances ordered by index
    Y = Xtr[:30] + Xtr[:5]
    D = fitted.pairwise_distances(Xte[:20], Y)
    d, i = fitted.kneighbors(Xte[:20], Y, k=7)
    want_d, want_i = _sorted_rows(D, 7, False)
    assert d.dtype == np.float64 and i.dtype == np.int64 and d.shape == (20, 7)
    assert np.array_equal(i, want_i) and np.array_equal(d, want_d)
    S = fitted.pairwise_distances(Xtr[:25])
    d, i = fitted.kneighbors(Xtr[:25], k=24)  # k = all others
    want_d, want_i = _sorted_rows(S, 24, True)
    assert np.array_equal(i, want_i) and np.array_equal(d, want_d)
    radius = float(np.sort(S[np.triu_indices(25, 1)])[40])
    rows, cols, vals = fitted.radius_neighbors(Xtr[:25], radius=radius)
    mask = S <= radius
    np.fill_diagonal(mask, False)
    want_r, want_c = np.nonzero(mask)
    assert np.array_equal(rows, want_r) and np.array_equal(cols, want_c)
    assert np.array_equal(vals, S[want_r, want_c]) and len(rows) >= 80
    rows, cols, vals = fitted.radius_neighbors(Xte[:3], Xtr[:4], radius=-1.0)
    assert len(rows) == len(cols) == len(vals) == 0


def test_kneighbors_unknown_labels_and_bad_k(strings, fitted):
    Xtr = strings[0]
    bad = ["abzab", "aabbq"]
    with pytest.raises(ValueError, match="'z'"):
        fitted.kneighbors(bad, Xtr[:5], k=2)
    with pytest.raises(ValueError, match="'q'"):
        fitted.radius_neighbors(Xtr[:5], bad, radius=1.0)
    with pytest.raises(ValueError, match="k must be between 1 and 5"):
        fitted.kneighbors(Xtr[:2], Xtr[:5], k=6)
    origin = BEDL(unknown="origin").load_state_dict(fitted.state_dict())
    origin.set_params(unknown="origin")
    d, i = origin.kneighbors(bad, Xtr[:5], k=5)
    want_d, want_i = _sorted_rows(origin.pairwise_distances(bad, Xtr[:5]), 5, False)
    assert np.array_equal(i, want_i) and np.array_equal(d, want_d)
    with pytest.raises(Exception, match="fit"):
        BEDL().kneighbors(Xtr[:3], k=1)


def test_distance_kwargs_give_the_learned_distances(strings, fitted):
    Xtr, _, Xte, _ = strings
    kw = fitted.distance_kwargs(Xte[:7], Xtr[:9])
    assert kw["cost"] is fitted.cost_ and kw["unknown"] == "error"
    D = pairwise_distances(Xte[:7], Xtr[:9], **kw).detach().numpy()
    assert np.array_equal(D, fitted.pairwise_distances(Xte[:7], Xtr[:9]))
    with pytest.raises(ValueError, match="'z'"):
        fitted.distance_kwargs(["abzab"])
    origin = BEDL(unknown="origin").load_state_dict(fitted.state_dict())
    origin.set_params(unknown="origin")
    assert origin.distance_kwargs(["abzab"])["unknown"] == "gap"


def _balanced(X, y, k):
    """The first k points of each class (make_strings puts class 0 first)."""
    idx = np.concatenate([np.flatnonzero(y == c)[:k] for c in np.unique(y)])
    return [X[i] for i in idx], y[idx]


def _test_errors(model, X, y, Xte, yte):
    """(median GLVQ with the fitted prototypes, 1-NN) test errors with the learned distance."""
    D = model.pairwise_distances(Xte, X)
    return 1 - model.score(Xte, yte), float(np.mean(y[np.argmin(D, axis=1)] != yte))


@pytest.mark.parametrize("alignments, seed", [("initial", 2), ("initial", 13), ("step", 0),
                                              ("step", 13)])
def test_learned_costs_reach_low_test_error(alignments, seed):
    """Either alignments option: median GLVQ with the fitted prototypes and 1-NN are at most 2%
    wrong on a fresh draw, and the learned costs merge the noise symbols a and b (replacing
    one by the other costs little next to replacing a by c). Whether a and b also end at the
    origin (the paper's Figure 1) depends on the draw and is not tested here."""
    # seeds 0-29 (test draws seed + 1000), both options: worst test error 0%, worst
    # C(a, b) / C(a, c) 0.0006
    X, y = make_strings(100, seed=seed)
    Xte, yte = make_strings(100, seed=seed + 1000)
    model = BEDL(alignments=alignments).fit(X, y)
    err_mglvq, err_knn = _test_errors(model, X, y, Xte, yte)
    assert err_mglvq <= 0.02 and err_knn <= 0.02
    C = model.cost_.symbol_costs().detach()
    assert C[0, 1] < 0.1 * C[0, 2]


def test_default_alignments_are_step():
    assert BEDL().alignments == "step"
    with pytest.raises(ValueError, match="alignments"):
        BEDL(alignments="current").fit(*make_strings(10, seed=0))


# ---------------------------------------------------------------------------
# The alternation, constructed: median GLVQ and the metric step replaced by scripts, so that
# the rounds' costs, prototypes and actual losses are known in advance.
# ---------------------------------------------------------------------------

_FIT_MODULE = sys.modules[BEDL._metric_step.__module__]  # where the rounds call median GLVQ and L-BFGS

#: embeddings of a, b, c, d (rows), full rank, with clearly different actual losses on
#: make_strings(40, seed=5)
_EMBEDDINGS = {
    "simplex": initial_embedding(4),  # where every fit starts
    "a-b-small": torch.tensor([[0.1, 0, 0, 0], [0.1, 0.05, 0, 0], [0, 0, 2, 0], [0, 0, 2, 0.1]],
                              dtype=torch.float64),
    "a-b-diagonal": torch.diag(torch.tensor([0.1, 0.1, 2.0, 2.0], dtype=torch.float64)),
    "c-d-small": torch.diag(torch.tensor([2.0, 2.0, 0.1, 0.1], dtype=torch.float64)),
}


def _round_data():
    X, y = make_strings(40, seed=5)
    return X, np.asarray(y)


def _prototype_pair(y, k):
    """The k-th string of class 0 and the k-th of class 1 (indices, class 0 first)."""
    return [int(np.flatnonzero(y == 0)[k]), int(np.flatnonzero(y == 1)[k])]


def _script_rounds(monkeypatch, prototypes, embeddings=(), improves=True, real_step=False):
    """Replace median GLVQ and the metric step inside BEDL.fit by scripts. Median GLVQ in
    round k returns ``prototypes[k]`` (its warm starts are logged); metric step k sets the
    embedding to ``embeddings[k]`` and reports its loss going from ``10 - k`` to ``9 - k`` in
    ``k + 1`` evaluations, or, with ``improves=False``, changes nothing and reports no
    improvement. ``real_step``: run the real metric step first (its result is overwritten)."""
    log = {"starts": [], "steps": 0}
    original_step = BEDL._metric_step

    def median_glvq(D, y_idx, start, max_iter=None, candidates=None, split=None):
        log["starts"].append([int(i) for i in start])
        return np.array(prototypes[len(log["starts"]) - 1]), 1, 0.0

    def metric_step(self, cost, params, *args, **kwargs):
        k = log["steps"]
        log["steps"] += 1
        if real_step:
            original_step(self, cost, params, *args, **kwargs)
        if not improves:
            return 1.0, 1.0, 1
        (embedding,) = params
        with torch.no_grad():
            embedding.copy_(embeddings[k])
        return 10.0 - k, 9.0 - k, k + 1

    monkeypatch.setattr(_FIT_MODULE, "median_glvq_em", median_glvq)
    monkeypatch.setattr(BEDL, "_metric_step", metric_step)
    return log


def _actual_objective(X, y, embedding, prototypes, beta=0.05):
    """The fit's objective on exact distances, from scratch: sum of log(4 + mu) over the
    training strings (closest prototype of the own class and of the other) plus
    beta (||A||_F^2 - log det(A^T A))."""
    cost = EuclideanCost(list("abcd"), embedding=embedding)
    with torch.no_grad():
        D = pairwise_distances(X, [X[p] for p in prototypes], cost).numpy()
    same = y[:, None] == y[prototypes][None, :]
    d_plus = np.where(same, D, np.inf).min(1)
    d_minus = np.where(same, np.inf, D).min(1)
    mu = (d_plus - d_minus) / (d_plus + d_minus)
    A = embedding.numpy()
    return float(np.log(4.0 + mu).sum() + beta * ((A * A).sum() - np.linalg.slogdet(A.T @ A)[1]))


# rounds 1 and 2 as (embedding after the metric step before it, prototype pair); round 0 is
# the simplex with prototype pair 1
_SCENARIOS = {
    "middle-round-best": ((("a-b-small", 2), ("c-d-small", 0)), 1),
    "first-round-best": ((("c-d-small", 2), ("a-b-diagonal", 0)), 0),
    # a round that raises the actual loss does not stop the fit; a later one lowers it
    "last-round-best-after-a-worse-one": ((("c-d-small", 0), ("a-b-small", 2)), 2),
}


@pytest.mark.parametrize("scenario", list(_SCENARIOS))
def test_fit_keeps_the_state_with_the_best_actual_loss(monkeypatch, scenario):
    """Pseudo mode optimises a surrogate, so the actual loss need not fall from round to
    round: the fit records it at every round's start and returns the costs and prototypes of
    the round where it was lowest. The rounds' actual losses are recomputed here from
    scratch; which round is best is fixed by the constructed costs, with a clear margin."""
    X, y = _round_data()
    later, best = _SCENARIOS[scenario]
    rounds = [("simplex", 1)] + list(later)
    embeddings = [_EMBEDDINGS[name] for name, _ in rounds]
    prototypes = [_prototype_pair(y, k) for _, k in rounds]
    expected = [_actual_objective(X, y, E, p) for E, p in zip(embeddings, prototypes)]
    assert int(np.argmin(expected)) == best
    assert sorted(expected)[1] - expected[best] > 0.5
    if best == 2:
        assert expected[1] > expected[0] + 0.5

    _script_rounds(monkeypatch, prototypes, embeddings[1:])
    model = BEDL(max_rounds=2).fit(X, y)
    assert model.n_rounds_ == 2 and model.stop_reason_ == "max_rounds"
    assert model.actual_loss_history_ == pytest.approx(expected, rel=1e-9)
    assert model.loss_history_ == [10.0, 9.0, 8.0] and model.n_evals_ == [1, 2]
    assert model.best_round_ == best
    assert torch.equal(model.cost_.embedding.detach(), embeddings[best])
    assert model.prototype_indices_.tolist() == prototypes[best]
    assert model.prototypes_ == [X[i] for i in prototypes[best]]
    # the returned state's own objective, from the fitted model's distances
    D = model.pairwise_distances(X, model.prototypes_)
    same = y[:, None] == np.asarray(model.prototype_labels_)[None, :]
    d_plus = np.where(same, D, np.inf).min(1)
    d_minus = np.where(~same, D, np.inf).min(1)
    recomputed = model._objective(torch.as_tensor(d_plus), torch.as_tensor(d_minus), model.cost_)
    assert float(recomputed.detach()) == pytest.approx(min(expected), rel=1e-9)


@pytest.mark.parametrize("repeated, reason", [(1, "prototypes unchanged"),
                                              (0, "prototypes cycle back to an earlier set")])
def test_alternation_stops_when_the_prototypes_repeat(monkeypatch, repeated, reason):
    """Median GLVQ is warm-started from the previous round's prototypes (round 0: the class
    medoids under the initial costs); the fit stops when they come back unchanged or as a set
    of an earlier round."""
    X, y = _round_data()
    prototypes = [_prototype_pair(y, 1), _prototype_pair(y, 2)]
    prototypes.append(prototypes[repeated])
    log = _script_rounds(monkeypatch, prototypes, [_EMBEDDINGS["a-b-small"], _EMBEDDINGS["c-d-small"]])
    model = BEDL(max_rounds=5).fit(X, y)
    assert model.stop_reason_ == reason
    assert model.n_rounds_ == 2 and len(model.actual_loss_history_) == 3
    medoids = init_prototypes(pairwise_distances(X).numpy(), y, 1)
    assert log["starts"] == [medoids.tolist(), prototypes[0], prototypes[1]]


def test_alternation_stops_when_the_metric_step_cannot_improve(monkeypatch):
    X, y = _round_data()
    _script_rounds(monkeypatch, [_prototype_pair(y, 1)], improves=False)
    model = BEDL().fit(X, y)
    assert model.stop_reason_ == "metric not improved"
    assert model.n_rounds_ == 1 and model.loss_history_ == [1.0, 1.0] and model.n_evals_ == [1]
    # the round's start was recorded; the unchanged state is the one returned
    assert len(model.actual_loss_history_) == 1 and model.best_round_ == 0
    assert torch.equal(model.cost_.embedding.detach(), _EMBEDDINGS["simplex"])


@pytest.mark.parametrize("alignments, second_step_aligns_under", [("initial", "simplex"),
                                                                   ("step", "a-b-small")])
def test_alignments_option_sets_the_costs_of_the_frozen_alignments(monkeypatch, alignments,
                                                                   second_step_aligns_under):
    """Pseudo mode freezes the co-optimal alignments P0 of every metric step: under the
    initial costs with ``alignments="initial"``, under the costs at the step's start (the
    previous step's result) with ``"step"``. The first step aligns under the initial costs
    either way. The real metric steps run; their results are then replaced by the script's."""
    X, y = _round_data()
    aligned_under = []
    coopt = PairBatch.coopt

    def spy(self, cost, *args, **kwargs):
        aligned_under.append(cost.embedding.detach().clone())
        return coopt(self, cost, *args, **kwargs)

    monkeypatch.setattr(PairBatch, "coopt", spy)
    prototypes = [_prototype_pair(y, k) for k in (1, 2, 0)]
    _script_rounds(monkeypatch, prototypes, [_EMBEDDINGS["a-b-small"], _EMBEDDINGS["c-d-small"]],
                   real_step=True)
    model = BEDL(max_rounds=2, max_eval=5, alignments=alignments).fit(X, y)
    assert model.n_rounds_ == 2
    assert len(aligned_under) == 2
    assert torch.equal(aligned_under[0], _EMBEDDINGS["simplex"])
    assert torch.equal(aligned_under[1], _EMBEDDINGS[second_step_aligns_under])


def test_fit_state_is_consistent_with_its_history():
    """A real fit (whatever its trajectory): one actual loss per round's start, the kept round
    is the lowest, its prototypes are a fixed point of median GLVQ on the kept costs, and the
    kept state's objective is that lowest loss."""
    X, y = make_strings(100, seed=13)
    model = BEDL().fit(X, y)
    h = model.actual_loss_history_
    assert model.stop_reason_ in ("prototypes unchanged", "prototypes cycle back to an earlier set",
                                  "max_rounds", "metric not improved")
    assert len(h) == model.n_rounds_ + (model.stop_reason_ != "metric not improved")
    assert len(model.loss_history_) == model.n_rounds_ + 1 == len(model.n_evals_) + 1
    assert h[model.best_round_] == min(h)
    D = model.pairwise_distances(X)
    again, _, _ = median_glvq_em(D, y, model.prototype_indices_)
    assert sorted(again.tolist()) == sorted(model.prototype_indices_.tolist())
    Dp = D[:, model.prototype_indices_]
    same = y[:, None] == np.asarray(model.prototype_labels_)[None, :]
    d_plus = torch.as_tensor(np.where(same, Dp, np.inf).min(1))
    d_minus = torch.as_tensor(np.where(~same, Dp, np.inf).min(1))
    recomputed = model._objective(d_plus, d_minus, model.cost_)
    assert float(recomputed.detach()) == pytest.approx(min(h), rel=1e-9)


@pytest.mark.parametrize("n_prototypes", [1, 2])
def test_metric_step_evaluators_agree(monkeypatch, n_prototypes):
    """The three evaluators of the metric step give the same loss and gradient: numpy in
    closed form (the default EuclideanCost on the CPU), torch in closed form on the dense
    symbol-pair frequencies and the symbol cost table, and torch in closed form on the sparse
    symbol pairs that carry mass in P0 with costs from the module's forward (the path for
    large alphabets). A generic starting embedding avoids ties between prototypes."""
    X, y = make_strings(40, seed=9)
    gen = torch.Generator().manual_seed(4)
    start = torch.randn(4, 3, dtype=torch.float64, generator=gen)
    calls = {}

    def spy(name):
        orig = getattr(ObjectiveFactory, name)

        def wrapped(self, *args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return orig(self, *args, **kwargs)

        monkeypatch.setattr(ObjectiveFactory, name, wrapped)

    for name in ("numpy_evaluator", "closed_form_evaluator", "pair_cost_terms"):
        spy(name)
    ProbeLBFGS.install(monkeypatch)
    for path in ("numpy", "table", "sparse"):
        with monkeypatch.context() as mp:
            if path != "numpy":
                mp.setattr(ObjectiveFactory, "numpy_path_ok", staticmethod(lambda cost, params: False))
            if path == "sparse":
                mp.setattr(ObjectiveFactory, "TABLE_LIMIT", 0)
            cost = EuclideanCost(list("abcd"), embedding=start)
            BEDL(n_prototypes=n_prototypes, max_rounds=1, cost=cost).fit(X, y)
    assert calls == {"numpy_evaluator": 1, "closed_form_evaluator": 2, "pair_cost_terms": 1}
    numpy_rec, table_rec, sparse_rec = ProbeLBFGS.records
    for k, (loss, grad) in enumerate(sparse_rec):
        assert grad.abs().max() > 0.01
        for other in (numpy_rec, table_rec):
            assert other[k][0] == pytest.approx(loss, rel=1e-12)
            assert torch.allclose(other[k][1], grad, rtol=1e-9, atol=1e-11)


def test_logdet_term_pushes_a_vanishing_direction_back(monkeypatch):
    """The log-det term keeps the embedding from collapsing: along a direction where the
    embedding nearly vanishes, the metric step's gradient points outwards (descent restores
    the rank), while the Frobenius term alone points inwards. Constructed: the symbol e never
    occurs in the data, so the GLVQ loss does not depend on its vector s * u (u orthogonal to
    the others), and its gradient row is the regularisers' alone: 2 beta (s - 1 / s) u with
    "both", 2 beta s u with "frobenius", -2 beta / s u with "logdet"."""
    X, y = _round_data()
    beta, s = 0.1, 1e-3
    gen = torch.Generator().manual_seed(2)
    A = torch.zeros(5, 5, dtype=torch.float64)
    A[:4, :4] = torch.randn(4, 4, dtype=torch.float64, generator=gen)
    A[4, 4] = s
    ProbeLBFGS.install(monkeypatch)
    start = {}
    for reg, row_e in (("both", 2 * beta * (s - 1 / s)), ("frobenius", 2 * beta * s),
                       ("logdet", -2 * beta / s)):
        ProbeLBFGS.reset()
        cost = EuclideanCost(list("abcde"), embedding=A)
        BEDL(beta=beta, regularizer=reg, max_rounds=1, cost=cost).fit(X, y)
        start[reg] = ProbeLBFGS.records[0][0]  # (loss, gradient) at the starting embedding
        want = torch.zeros(5, dtype=torch.float64)
        want[4] = row_e
        torch.testing.assert_close(start[reg][1][4], want, rtol=1e-9, atol=1e-9)
    # the log-det term is what the two objectives differ by
    logdet = float(torch.linalg.slogdet(A.T @ A)[1])
    assert start["both"][0] - start["frobenius"][0] == pytest.approx(-beta * logdet, rel=1e-9)


def test_exact_mode(strings):
    # seeds 0-29 (training on 30 + 30 strings, test draws seed + 1000): worst error 0%
    Xtr, ytr, Xte, yte = strings
    model = BEDL(mode="exact", max_rounds=1, max_eval=60).fit(*_balanced(Xtr, ytr, 30))
    assert model.score(Xte, yte) >= 0.95


def test_phi_and_regularizer_options(strings):
    Xtr, ytr, Xte, yte = strings
    for phi, reg in (("identity", "frobenius"), ("sigmoid", None), ("log4", "logdet")):
        model = BEDL(phi=phi, regularizer=reg, max_rounds=1, max_eval=40).fit(*_balanced(Xtr, ytr, 25))
        assert math.isfinite(model.loss_history_[-1])
        assert torch.isfinite(model.cost_.embedding).all()


def test_float32_and_explicit_cpu_device(strings):
    # seeds 0-29 (training on 30 + 30 strings, test draws seed + 1000): worst error 0%
    Xtr, ytr, Xte, yte = strings
    model = BEDL(dtype=torch.float32, device="cpu", max_rounds=1, max_eval=60).fit(
        *_balanced(Xtr, ytr, 30)
    )
    assert model.cost_.embedding.dtype == torch.float32
    assert model.cost_.embedding.device.type == "cpu"
    assert model.pairwise_distances(Xte[:3]).dtype == np.float32
    assert model.score(Xte, yte) >= 0.9


def _merged_embedding(ab_norm):
    """a and b together at norm ``ab_norm``, c and d together at norm 1, the pairs orthogonal
    (0.001 apart within a pair). Strings of one class are then at most 12 * 0.001 apart, strings
    of different classes at least about 2 * ab_norm (c/d must shift by one position), so median
    GLVQ and 1-NN make no test error."""
    return torch.tensor([[ab_norm, 0, 0, 0], [ab_norm, 0.001, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0.001]],
                        dtype=torch.float64)


class _DemoFit(BEDL):
    """BEDL whose fit keeps round 0 (the initial costs and their prototypes) and then puts the
    embedding of ``embeddings[alignments]`` in place of the learned one."""

    embeddings = {}

    def fit(self, X, y):
        rounds, self.max_rounds = self.max_rounds, 0
        try:
            super().fit(X, y)
        finally:
            self.max_rounds = rounds
        with torch.no_grad():
            self.cost_.embedding.copy_(self.embeddings[self.alignments])
        return self


def test_demo_reports_figure_one_by_the_learned_norms(tmp_path, capsys, monkeypatch):
    """The demo's report on constructed learned costs: a and b near the origin (Figure 1
    holds) or not, 0% test error by construction, the figure written."""
    pytest.importorskip("matplotlib")
    from bedl_torch import demo

    monkeypatch.setattr(demo, "BEDL", _DemoFit)
    monkeypatch.setattr(_DemoFit, "embeddings", {"initial": _merged_embedding(0.05),
                                                 "step": _merged_embedding(0.8)})
    out = tmp_path / "fig" / "emb.png"
    assert demo.main(["--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "[BEDL] round 0" in text
    assert 'alignments="initial"' in text and "realigns under the learned costs" in text
    assert re.search(r"learned costs +0\.0% +0\.0% +\(BEDL's own prototypes: 0\.0%\)", text)
    assert "Figure 1 (a and b at the origin, c and d together far from it): HOLDS here" in text
    assert "a: 0.050   b: 0.050   c: 1.000   d: 1.000" in text
    assert ('The default BEDL() (alignments="step") on this draw: test error 0.0% (median GLVQ), '
            "0.0% (1-NN)") in text
    assert "|a| = 0.800, |b| = 0.800, |c| = 1.000, |d| = 1.000: Figure 1 does not hold" in text
    assert out.is_file() and out.stat().st_size > 1000
    monkeypatch.setattr(_DemoFit, "embeddings", {"initial": _merged_embedding(0.8),
                                                 "step": _merged_embedding(0.8)})
    assert demo.main(["--out", str(out), "--seed", "0", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "[BEDL] round" not in text and "Figure 1 (a and b" in text and "does NOT hold here" in text


def test_demo_runs(tmp_path, capsys):
    """The demo end to end with the real fits (what it finds depends on the draw)."""
    pytest.importorskip("matplotlib")
    from bedl_torch import demo

    out = tmp_path / "emb.png"
    assert demo.main(["--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"initial costs +\d+\.\d% +\d+\.\d%", text)
    assert re.search(r"learned costs +\d+\.\d% +\d+\.\d%", text)
    assert re.search(r"Figure 1 \(a and b at the origin, c and d together far from it\): "
                     r"(HOLDS|does NOT hold) here", text)
    assert 'The default BEDL() (alignments="step") on this draw: test error' in text
    assert out.is_file() and out.stat().st_size > 1000


def test_dim_option():
    assert initial_embedding(4).shape == (4, 4)
    A = initial_embedding(5, 2)
    assert A.shape == (5, 2)
    B = initial_embedding(3, 5)
    assert B.shape == (3, 5) and torch.allclose(B[:, 3:], torch.zeros(3, 2, dtype=B.dtype))
    X, y = make_strings(40, seed=4)
    model = BEDL(dim=2, max_rounds=1, max_eval=30).fit(X, y)
    assert model.cost_.embedding.shape == (4, 2)


@pytest.mark.parametrize("kind", ["sequences", "trees"])
def test_pseudo_fast_path_matches_pair_batch(kind):
    """The aggregated symbol-frequency form of the pseudo distance equals
    PairBatch.pseudo_distances (sum of P0 * C over the cells)."""
    from bedl_torch.learning.objectives import padded_symbol_indices as _encode_padded

    if kind == "sequences":
        X, _ = make_strings(12, seed=5)
        alphabet = list("abcd")
    else:
        X, _ = _small_trees(12, 3)
        alphabet = ["a", "b", "r", "x"]
    gen = torch.Generator().manual_seed(0)
    emb = torch.randn(4, 3, dtype=torch.float64, generator=gen)
    cost = EuclideanCost(alphabet, embedding=emb)
    base = PairBatch(X, X)
    pair_y = torch.arange(11, -1, -1)
    batch = PairBatch.from_tables(base.x_table, base.y_table, torch.arange(12), pair_y)
    _, P0 = batch.coopt(cost)
    idx = _encode_padded(X, cost, "error")
    F = ObjectiveFactory("pseudo", None, None).symbol_frequencies(cost, batch, P0, idx)
    assert F is not None
    expected = batch.pseudo_distances(cost, P0)
    got = F @ cost.symbol_costs().reshape(-1)
    assert torch.allclose(got, expected, atol=1e-12)


def test_sklearn_clone_cross_val_and_grid_search(strings):
    """scikit-learn's model selection clones, fits and scores BEDL as a classifier: its
    scores are those of fits done by hand on the same folds."""
    pytest.importorskip("sklearn")
    from sklearn.base import clone, is_classifier
    from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score

    Xtr, ytr, _, _ = strings
    X, y = _balanced(Xtr, ytr, 15)
    model = BEDL(beta=0.05, max_rounds=1, max_eval=30)
    assert is_classifier(model)
    c = clone(model)
    assert c is not model and c.get_params() == model.get_params()

    def by_hand(beta, n_folds):
        scores = []
        for tr, te in StratifiedKFold(n_folds).split(X, y):
            fold = BEDL(beta=beta, max_rounds=1, max_eval=30).fit([X[i] for i in tr], y[tr])
            scores.append(fold.score([X[i] for i in te], y[te]))
        return scores

    scores = cross_val_score(model, X, y, cv=3)
    assert scores.tolist() == by_hand(0.05, 3)
    grid = GridSearchCV(model, {"beta": [0.02, 0.1]}, cv=2).fit(X, y)
    means = [float(np.mean(by_hand(beta, 2))) for beta in (0.02, 0.1)]
    assert grid.cv_results_["mean_test_score"].tolist() == pytest.approx(means, abs=1e-12)
    assert grid.best_params_["beta"] == (0.02, 0.1)[int(np.argmax(means))]
    refit = BEDL(beta=grid.best_params_["beta"], max_rounds=1, max_eval=30).fit(X, y)
    assert np.array_equal(grid.predict(X), refit.predict(X))


def test_save_load_round_trip(tmp_path, strings, fitted):
    Xtr, ytr, Xte, yte = strings
    path = tmp_path / "model.pt"
    fitted.save(path)
    state = torch.load(path, weights_only=True)  # plain data only
    assert state["alphabet"] == ["a", "b", "c", "d"]
    loaded = BEDL.load(path)
    assert np.array_equal(loaded.predict(Xte), fitted.predict(Xte))
    assert np.allclose(loaded.pairwise_distances(Xte[:20], Xtr[:20]), fitted.pairwise_distances(Xte[:20], Xtr[:20]))
    assert loaded.get_params() == fitted.get_params()
    assert loaded.prototypes_ == fitted.prototypes_
    # state_dict / load_state_dict without files
    other = BEDL().load_state_dict(fitted.state_dict())
    assert np.array_equal(other.predict(Xte), fitted.predict(Xte))


def test_load_state_dict_names_what_is_wrong_with_a_state(fitted):
    """A list, a dict without the format mark, or a state without one of its entries is a
    ValueError naming it (a missing entry was a KeyError, a list an AttributeError)."""
    with pytest.raises(ValueError, match=r"not a BEDL state dict \(got list\)"):
        BEDL().load_state_dict([1, 2])
    with pytest.raises(ValueError, match=r"not a BEDL state dict \(got dict without its format mark\)"):
        BEDL().load_state_dict({"a": 1})
    state = fitted.state_dict()
    for key in ("hyperparameters", "cost_state", "prototypes", "n_rounds"):
        partial = {k: v for k, v in state.items() if k != key}
        with pytest.raises(ValueError, match=f"BEDL state dict lacks '{key}'"):
            BEDL().load_state_dict(partial)


def test_load_state_dict_keeps_the_models_own_device(strings, fitted):
    """A model constructed with a device loads onto it whatever device was saved (a model fitted
    on a GPU loads on a machine without one); a model without a device takes the saved one."""
    Xtr, ytr, Xte, yte = strings
    state = fitted.state_dict()
    state["hyperparameters"] = dict(state["hyperparameters"], device="cuda:0")
    loaded = BEDL(device="cpu").load_state_dict(state)
    assert loaded.device == "cpu" and loaded.cost_.embedding.device.type == "cpu"
    assert np.array_equal(loaded.predict(Xte), fitted.predict(Xte))
    state["hyperparameters"]["device"] = "cpu"
    assert BEDL().load_state_dict(state).device == "cpu"


def _small_trees(n, seed):
    """Class 0: root 'r' with children whose first child is 'x'; class 1: 'x' comes last."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for i in range(n):
        cls = i % 2
        kids = [(str(rng.choice(["a", "b"])),) for _ in range(int(rng.integers(2, 4)))]
        leaf = ("x", (str(rng.choice(["a", "b"])),))
        kids = [leaf] + kids if cls == 0 else kids + [leaf]
        X.append(Tree.from_tuple(("r",) + tuple(kids)))
        y.append(cls)
    return X, np.array(y)


def test_trees_fit_predict_save_load(tmp_path):
    # training seeds 0-29 (test draws seed + 1): worst error 0%
    X, y = _small_trees(30, 0)
    Xte, yte = _small_trees(20, 1)
    model = BEDL(max_rounds=2, max_eval=60).fit(X, y)
    assert model.alphabet_ == ["a", "b", "r", "x"]
    assert model.score(Xte, yte) >= 0.9
    assert all(isinstance(p, Tree) for p in model.prototypes_)
    path = tmp_path / "trees.pt"
    model.save(path)
    loaded = BEDL.load(path)
    assert loaded.prototypes_ == model.prototypes_
    assert np.array_equal(loaded.predict(Xte), model.predict(Xte))


def test_unknown_symbols(strings, fitted):
    Xtr, ytr, Xte, yte = strings
    bad = ["abzabqabab", "aabbccdd"]
    with pytest.raises(ValueError, match=r"'z'.*'q'|'q'.*'z'"):
        fitted.predict(bad)
    with pytest.raises(ValueError, match="'z'"):
        fitted.pairwise_distances(Xtr[:2], bad)
    origin = BEDL(unknown="origin").load_state_dict(fitted.state_dict())
    origin.set_params(unknown="origin")
    D = origin.pairwise_distances(bad, Xtr[:5])
    # an unknown symbol sits at the origin (the gap): deleting it is free
    D_removed = origin.pairwise_distances(["abababab", "aabbccdd"], Xtr[:5])
    assert np.allclose(D, D_removed)
    assert len(origin.predict(bad)) == 2


def _spy_metric_steps(monkeypatch):
    """Log (cost module, learned parameters) of every metric step; the steps run as usual."""
    steps = []
    original = BEDL._metric_step

    def spy(self, cost, params, *args, **kwargs):
        steps.append((cost, list(params)))
        return original(self, cost, params, *args, **kwargs)

    monkeypatch.setattr(BEDL, "_metric_step", spy)
    return steps


def test_custom_cost_module_and_factory(tmp_path, strings, monkeypatch):
    """A factory's module (called with the training alphabet) or a copy of a given instance
    is what the metric steps learn (here Omega of a cosine cost); saving and loading keeps it."""
    Xtr, ytr, Xte, yte = strings
    gen = torch.Generator().manual_seed(0)
    vecs = torch.randn(4, 3, dtype=torch.float64, generator=gen)
    omega = torch.eye(3, dtype=torch.float64) + 0.3 * torch.randn(3, 3, dtype=torch.float64,
                                                                  generator=gen)
    alphabets = []

    def factory(alphabet):
        alphabets.append(list(alphabet))
        return CosineCost(alphabet, vecs, omega=omega)

    steps = _spy_metric_steps(monkeypatch)
    model = BEDL(cost=factory, max_rounds=1, max_eval=40).fit(*_balanced(Xtr, ytr, 20))
    assert alphabets == [["a", "b", "c", "d"]]
    assert isinstance(model.cost_, CosineCost)
    assert steps and all(cost is model.cost_ for cost, _ in steps)
    assert all(len(params) == 1 and params[0] is model.cost_.Omega for _, params in steps)
    path = tmp_path / "cos.pt"
    model.save(path)
    loaded = BEDL.load(path)
    assert isinstance(loaded.cost_, CosineCost)
    assert torch.equal(loaded.cost_.Omega.detach(), model.cost_.Omega.detach())
    assert np.array_equal(loaded.predict(Xte), model.predict(Xte))
    # an instance is copied, not modified
    instance = CosineCost(list("abcd"), vecs)
    steps.clear()
    fitted = BEDL(cost=instance, max_rounds=1, max_eval=10).fit(*_balanced(Xtr, ytr, 10))
    assert steps and all(cost is fitted.cost_ and cost is not instance for cost, _ in steps)
    assert torch.equal(instance.Omega.detach(), torch.eye(3, dtype=torch.float64))
    # a cost without parameters: median GLVQ only
    steps.clear()
    unit = BEDL(cost=UnitCost(list("abcd"))).fit(*_balanced(Xtr, ytr, 10))
    assert unit.n_rounds_ == 0 and unit.stop_reason_ == "no parameters to learn" and not steps


def test_verbose_prints_progress(capsys, monkeypatch):
    """One line per round (the scripted rounds of the middle-round-best scenario) and the kept
    round."""
    X, y = _round_data()
    prototypes = [_prototype_pair(y, k) for k in (1, 2, 0)]
    _script_rounds(monkeypatch, prototypes, [_EMBEDDINGS["a-b-small"], _EMBEDDINGS["c-d-small"]])
    BEDL(verbose=True, max_rounds=2).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    assert re.fullmatch(r"\[BEDL\] round 0: initial prototypes; loss 10 -> 9 in 1 evaluations "
                        r"\(\d+\.\d{3} s\)", lines[0])
    assert re.fullmatch(r"\[BEDL\] round 1: 2 prototype\(s\) moved; loss 9 -> 8 in 2 evaluations "
                        r"\(\d+\.\d{3} s\)", lines[1])
    assert lines[2] == "[BEDL] round 2: max_rounds; stop"
    assert re.fullmatch(r"\[BEDL\] keep round 1 \(actual loss \d+\.\d+, the lowest\)", lines[3])


def test_errors(strings):
    Xtr, ytr, _, _ = strings
    with pytest.raises(ValueError):
        BEDL().fit(Xtr[:10], np.zeros(10))
    with pytest.raises(ValueError):
        BEDL(mode="fast").fit(Xtr[:10], ytr[:10])
    with pytest.raises(ValueError):
        BEDL(regularizer="l1").fit(Xtr[:10], ytr[:10])
    with pytest.raises(ValueError):
        BEDL().fit(Xtr[:10], ytr[:9])
    with pytest.raises(TypeError):
        BEDL().fit("abc", [0, 1, 0])
    with pytest.raises(ValueError, match="not fitted"):
        BEDL().predict(Xtr[:2])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_device_matches_cpu(strings, monkeypatch):
    """On a CUDA device the metric step evaluates the objective and gradient of the CPU at the
    same points (from a generic start, so that no ties decide the prototypes), and a model
    moved there predicts as on the CPU."""
    Xtr, ytr, Xte, yte = strings
    X, y = _balanced(Xtr, ytr, 20)
    gen = torch.Generator().manual_seed(4)
    start = torch.randn(4, 3, dtype=torch.float64, generator=gen)
    ProbeLBFGS.install(monkeypatch)
    models = {}
    for device in ("cpu", "cuda"):
        cost = EuclideanCost(list("abcd"), embedding=start)
        models[device] = BEDL(max_rounds=1, cost=cost, device=device).fit(X, y)
    assert models["cuda"].cost_.embedding.device.type == "cuda"
    assert np.array_equal(models["cuda"].prototype_indices_, models["cpu"].prototype_indices_)
    cpu_records, cuda_records = ProbeLBFGS.records
    for (loss_cpu, grad_cpu), (loss_cuda, grad_cuda) in zip(cpu_records, cuda_records):
        assert loss_cuda == pytest.approx(loss_cpu, rel=1e-9)
        torch.testing.assert_close(grad_cuda.cpu(), grad_cpu, rtol=1e-7, atol=1e-9)
    fitted = models["cpu"]
    moved = BEDL(device="cuda").load_state_dict(fitted.state_dict())
    assert moved.cost_.embedding.device.type == "cuda"
    np.testing.assert_allclose(moved.decision_distances(Xte), fitted.decision_distances(Xte),
                               rtol=1e-12, atol=1e-12)
    assert np.array_equal(moved.predict(Xte), fitted.predict(Xte))
