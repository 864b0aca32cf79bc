"""Median GLVQ on constructed distance matrices."""
import itertools

import numpy as np
import pytest
import torch

from bedl_torch.learning.mglvq import (
    MedianGLVQ,
    glvq_likelihood,
    init_prototypes,
    kmedoids_pp_candidates,
    median_glvq_em,
)


def _dist(points):
    points = np.asarray(points, dtype=float)
    if points.ndim == 1:
        points = points[:, None]
    return np.linalg.norm(points[:, None] - points[None], axis=-1)


def _likelihood(D, y, protos):
    protos = np.asarray(protos)
    same = y[protos][None, :] == y[:, None]
    Dp = D[:, protos]
    return glvq_likelihood(np.where(same, Dp, np.inf).min(1), np.where(~same, Dp, np.inf).min(1))


def _em_bound(D, y, protos_gamma, protos):
    """L(protos) at the gammas of protos_gamma."""
    def g(ps):
        ps = np.asarray(ps)
        same = y[ps][None, :] == y[:, None]
        Dp = D[:, ps]
        dp, dm = np.where(same, Dp, np.inf).min(1), np.where(~same, Dp, np.inf).min(1)
        return 2 - dp / (dp + dm), 2 + dm / (dp + dm)

    gp0, gm0 = g(protos_gamma)
    cp, cm = gp0 / (gp0 + gm0), gm0 / (gp0 + gm0)
    gp, gm = g(protos)
    return float(np.sum(cp * np.log(gp / cp) + cm * np.log(gm / cm)))


def _brute_force(D, y, k):
    """Best likelihood over all choices of k prototypes per class."""
    classes = np.unique(y)
    per_class = [list(itertools.combinations(np.flatnonzero(y == c), k)) for c in classes]
    best = -np.inf
    for combo in itertools.product(*per_class):
        best = max(best, _likelihood(D, y, np.concatenate(combo)))
    return best


def test_two_clusters_medoids_are_prototypes():
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 10.0, 11.0, 12.0, 13.0, 14.0])
    y = np.array([0] * 5 + [1] * 5)
    D = _dist(x)
    model = MedianGLVQ().fit(D, y)
    # the class centres are the unique best prototypes
    assert _likelihood(D, y, [2, 7]) == pytest.approx(_brute_force(D, y, 1))
    assert list(model.prototypes_) == [2, 7]
    assert list(model.prototype_labels_) == [0, 1]
    assert model.score(D, y) == 1.0


def test_em_moves_bad_initial_prototypes_to_the_optimum():
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 10.0, 11.0, 12.0, 13.0, 14.0])
    y = np.array([0] * 5 + [1] * 5)
    D = _dist(x)
    start = [4, 5]  # the two points closest to the other class
    protos, n_iter, lik = median_glvq_em(D, y, start)
    assert n_iter >= 1
    assert lik == pytest.approx(_brute_force(D, y, 1))
    assert sorted(protos) == [2, 7]
    model = MedianGLVQ().fit(D, y, init_prototypes=start)
    assert list(model.prototypes_) == [2, 7]


def test_several_prototypes_per_class_cover_subclusters():
    # class 0 lives around 0 and 20, class 1 around 10 and 30 (XOR-like on a line)
    rng = np.random.default_rng(1)
    centres = [0.0, 20.0, 10.0, 30.0]
    labels = [0, 0, 1, 1]
    x = np.concatenate([c + rng.uniform(-1, 1, 6) for c in centres])
    y = np.repeat(labels, 6)
    D = _dist(x)
    # one prototype per class cannot separate alternating clusters on a line; two per class
    # found one in each cluster on all draws of seeds 0-29
    one = MedianGLVQ(n_prototypes=1).fit(D, y)
    two = MedianGLVQ(n_prototypes=2).fit(D, y)
    assert one.score(D, y) < 1.0
    assert two.score(D, y) == 1.0
    assert len(two.prototypes_) == 4
    assert list(two.prototype_labels_) == [0, 0, 1, 1]
    # one prototype in each sub-cluster
    cluster_of = np.repeat(np.arange(4), 6)
    assert sorted(cluster_of[two.prototypes_]) == [0, 1, 2, 3]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_multiclass_em_ends_at_a_fixed_point_above_its_start(seed):
    rng = np.random.default_rng(seed)
    n_classes, n_per, k = 3, 5, 2
    means = np.array([[0.0, 0.0], [8.0, 0.0], [4.0, 7.0]])
    pts = np.concatenate([m + rng.normal(0, 1.5, (n_per, 2)) for m in means])
    y = np.repeat(np.arange(n_classes), n_per)
    D = _dist(pts)
    model = MedianGLVQ(n_prototypes=k).fit(D, y)
    assert len(model.prototypes_) == n_classes * k
    assert np.all(y[model.prototypes_] == model.prototype_labels_)
    lik = _likelihood(D, y, model.prototypes_)
    assert lik == pytest.approx(model.likelihood_)
    # the EM fixed point: no single move improves L at the final gammas ...
    L_final = _em_bound(D, y, model.prototypes_, model.prototypes_)
    for idx, p in enumerate(model.prototypes_):
        for j in np.flatnonzero(y == y[p]):
            if j in model.prototypes_:
                continue
            trial = model.prototypes_.copy()
            trial[idx] = j
            assert _em_bound(D, y, model.prototypes_, trial) <= L_final + 1e-9
    # ... reached by moves that each raise L: never below the start (a fixed point need not
    # be the global optimum, which differs on some draws)
    assert lik >= _likelihood(D, y, init_prototypes(D, y, k)) - 1e-12


def test_string_labels_torch_input_and_predict():
    x = np.array([0.0, 0.5, 1.0, 5.0, 5.5, 6.0, 10.0, 10.5, 11.0])
    y = np.array(["a", "a", "a", "b", "b", "b", "c", "c", "c"])
    D = torch.tensor(_dist(x))
    model = MedianGLVQ().fit(D, y)
    assert list(model.classes_) == ["a", "b", "c"]
    assert list(model.prototypes_) == [1, 4, 7]
    x_test = np.array([0.2, 5.9, 12.0, 3.2])
    D_test = np.abs(x_test[:, None] - x[None, :])
    assert list(model.predict(D_test)) == ["a", "b", "c", "b"]
    assert list(model.predict(D_test[:, model.prototypes_], prototypes_only=True)) == [
        "a", "b", "c", "b"
    ]


def test_zero_distances_and_duplicates_do_not_break():
    # identical points across classes: d+ = d- = 0 must not produce NaN
    D = np.zeros((4, 4))
    y = np.array([0, 0, 1, 1])
    model = MedianGLVQ().fit(D, y)
    assert np.isfinite(model.likelihood_)
    assert len(model.prototypes_) == 2


def test_more_prototypes_than_points_is_capped():
    x = np.array([0.0, 1.0, 5.0, 6.0, 7.0])
    y = np.array([0, 0, 1, 1, 1])
    model = MedianGLVQ(n_prototypes=3).fit(_dist(x), y)
    assert sorted(model.prototypes_) == [0, 1, 2, 3, 4]


def test_init_is_medoid_then_greedy():
    x = np.array([0.0, 1.0, 2.0, 9.0, 10.0, 11.0, 30.0])
    y = np.array([0, 0, 0, 1, 1, 1, 1])
    D = _dist(x)
    init = init_prototypes(D, y, 1)
    # class-1 medoid: column sums over class members
    assert list(init) == [1, 4]
    init2 = init_prototypes(D, y, 2)
    assert list(init2[:1]) == [1] and 6 in init2  # the outlier gets its own prototype


def test_errors():
    D = _dist([0.0, 1.0, 2.0])
    with pytest.raises(ValueError):
        MedianGLVQ().fit(D, [0, 0, 0])
    with pytest.raises(ValueError):
        MedianGLVQ().fit(D[:2], [0, 1, 1])
    with pytest.raises(ValueError, match="not fitted"):
        MedianGLVQ().predict(D)
    with pytest.raises(ValueError):
        MedianGLVQ().set_params(foo=1)


def test_sklearn_compatibility():
    pytest.importorskip("sklearn")
    from sklearn.base import clone, is_classifier
    from sklearn.model_selection import GridSearchCV, cross_val_score

    rng = np.random.default_rng(0)
    pts = np.concatenate([rng.normal(0, 1, (20, 2)), rng.normal(5, 1, (20, 2))])
    y = np.repeat([0, 1], 20)
    D = _dist(pts)
    model = MedianGLVQ(n_prototypes=2, max_iter=50)
    assert is_classifier(model)
    c = clone(model)
    assert c.get_params() == model.get_params() and c is not model
    # seeds 0-29: lowest mean cross-validation score 0.975, lowest grid score 1.0
    scores = cross_val_score(MedianGLVQ(), D, y, cv=4)
    assert scores.mean() >= 0.9
    grid = GridSearchCV(MedianGLVQ(), {"n_prototypes": [1, 2, 3]}, cv=3).fit(D, y)
    assert grid.best_params_["n_prototypes"] in (1, 2, 3)
    assert grid.score(D, y) >= 0.9


def test_distances_near_the_float_limit_give_the_decisions_of_the_same_matrix_scaled_down():
    """Median GLVQ decides by ratios d+ / (d+ + d-) and by comparing sums of distances, so a
    power of two (an exact scaling) changes none of its decisions: distances in [2^1023, 2^1024),
    whose class sums and d+ + d- overflow float64, give the prototypes, likelihood and loss of the
    same matrix in [1, 2); so do k-medoids++ candidates, whose weights are squared distances."""
    rng = np.random.default_rng(38)
    m = 24
    D = 1.0 + rng.random((m, m))
    np.fill_diagonal(D, 0.0)
    y = np.array([0, 1] * (m // 2))
    huge = np.ldexp(D, 1023)
    with np.errstate(over="ignore"):
        assert np.isfinite(huge).all() and np.isinf(huge[y == 0][:, y == 0].sum(axis=0)).all()
    small_model = MedianGLVQ(n_prototypes=2).fit(D, y)
    huge_model = MedianGLVQ(n_prototypes=2).fit(huge, y)
    assert small_model.prototypes_.tolist() == huge_model.prototypes_.tolist()
    assert small_model.likelihood_ == huge_model.likelihood_ and small_model.loss_ == huge_model.loss_
    assert np.array_equal(small_model.predict(D), huge_model.predict(huge))
    # (the medoid of class 0 is not simply its first point, so an overflowing argmin would differ)
    assert int(small_model.prototypes_[0]) != int(np.flatnonzero(y == 0)[0])

    picks = [kmedoids_pp_candidates(y, 5, lambda js, M=M: M[:, js], random_state=3)
             for M in (D, np.ldexp(D, 600))]
    assert picks[0][0].tolist() == picks[1][0].tolist()
