"""Classifiers on precomputed distance matrices: small cases checked by hand."""
import math

import numpy as np
import pytest
import torch

pytest.importorskip("sklearn")
pytest.importorskip("scipy")

from sklearn.base import clone  # noqa: E402
from sklearn.svm import SVC  # noqa: E402

from bedl_torch.evaluation.classifiers import (  # noqa: E402
    GoodnessClassifier, KNNClassifier, SVMClassifier, clip_eigenvalues)


def dist(a, b=None):
    a = np.asarray(a, float).reshape(len(a), -1)
    b = a if b is None else np.asarray(b, float).reshape(len(b), -1)
    return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))


# ---------------------------------------------------------------- KNN
def test_knn_one_dimensional_by_hand():
    x = [0.0, 1.0, 2.0, 10.0, 11.0]
    y = ["a", "a", "a", "b", "b"]
    t = [0.4, 9.0, 6.2, 5.8]
    knn = KNNClassifier(1).fit(dist(x), y)
    assert list(knn.predict(dist(t, x))) == ["a", "b", "b", "a"]
    # 3 neighbours of 9.0 are 10, 11 (b) and 2 (a) -> b; of 6.2: 10, 11, 2 -> b
    knn3 = KNNClassifier(3).fit(dist(x), y)
    assert list(knn3.predict(dist(t, x))) == ["a", "b", "b", "a"]
    # 5 neighbours: always the majority a
    assert list(KNNClassifier(5).fit(dist(x), y).predict(dist(t, x))) == ["a"] * 4
    # more neighbours than training points: all of them
    assert list(KNNClassifier(50).fit(dist(x), y).predict(dist(t, x))) == ["a"] * 4


def test_knn_vote_tie_goes_to_nearest_class():
    x = [0.0, 3.0]
    y = [1, 2]
    knn = KNNClassifier(2).fit(dist(x), y)
    # one vote each: the class of the nearest neighbour wins
    assert list(knn.predict(dist([0.5, 2.9], x))) == [1, 2]


def test_knn_accepts_torch_and_checks_shapes():
    x = [0.0, 1.0, 5.0]
    D = torch.tensor(dist(x))
    knn = KNNClassifier(1).fit(D, [0, 0, 1])
    assert list(knn.predict(torch.tensor(dist([4.0], x)))) == [1]
    with pytest.raises(ValueError):
        knn.predict(np.zeros((1, 2)))
    with pytest.raises(ValueError):
        KNNClassifier(1).fit(np.zeros((3, 2)), [0, 0, 1])
    with pytest.raises(ValueError, match="not fitted"):
        KNNClassifier(1).predict(np.zeros((1, 3)))
    with pytest.raises(ValueError):
        KNNClassifier(0).fit(D, [0, 0, 1])


def test_params_and_clone():
    knn = KNNClassifier(3)
    assert knn.get_params() == {"n_neighbors": 3}
    knn.set_params(n_neighbors=5)
    assert clone(knn).n_neighbors == 5
    svm = SVMClassifier(bandwidth=2.0)
    assert svm.get_params() == {"bandwidth": 2.0, "C": 1.0}
    assert clone(svm.set_params(bandwidth=0.5)).bandwidth == 0.5
    good = GoodnessClassifier(lam=0.1)
    assert good.get_params() == {"lam": 0.1}
    assert clone(good).lam == 0.1


# ---------------------------------------------------------------- SVM
def test_clip_eigenvalues_by_hand():
    # eigenvalues 3 (vector (1,1)/sqrt2) and -1 (vector (1,-1)/sqrt2)
    K = np.array([[1.0, 2.0], [2.0, 1.0]])
    Kc, T = clip_eigenvalues(K)
    np.testing.assert_allclose(Kc, 1.5 * np.ones((2, 2)), atol=1e-12)
    np.testing.assert_allclose(T, 0.5 * np.ones((2, 2)), atol=1e-12)
    np.testing.assert_allclose(K @ T, Kc, atol=1e-12)
    # a positive definite matrix is left alone and T is the identity
    K = np.array([[2.0, 1.0], [1.0, 2.0]])
    Kc, T = clip_eigenvalues(K)
    np.testing.assert_allclose(Kc, K, atol=1e-12)
    np.testing.assert_allclose(T, np.eye(2), atol=1e-12)


def test_svm_equals_libsvm_rbf_on_euclidean_distances():
    # Euclidean distances give a PSD RBF kernel: clip is the identity and the classifier
    # must match SVC(kernel="rbf", gamma=1 / (2 bandwidth^2)) on the raw points. (The test
    # point closest to SVC's boundary has |decision| 0.05, far above rounding differences.)
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(0, 1, (15, 2)), rng.normal(2, 1, (15, 2))])
    y = np.repeat([0, 1], 15)
    T = rng.normal(1, 1.5, (20, 2))
    bw = 0.8
    ours = SVMClassifier(bandwidth=bw).fit(dist(X), y).predict(dist(T, X))
    ref = SVC(kernel="rbf", gamma=1 / (2 * bw ** 2)).fit(X, y).predict(T)
    np.testing.assert_array_equal(ours, ref)


def test_svm_indefinite_kernel_and_multiclass():
    # a non-Euclidean "distance" (triangle inequality broken) gives an indefinite kernel
    D = np.array([[0, 1, 5, 5, 5, 5],
                  [1, 0, 5, 5, 0.2, 5],
                  [5, 5, 0, 1, 5, 5],
                  [5, 5, 1, 0, 5, 5],
                  [5, 0.2, 5, 5, 0, 1],
                  [5, 5, 5, 5, 1, 0]], float)
    y = ["a", "a", "b", "b", "c", "c"]
    svm = SVMClassifier(bandwidth=1.0, C=10.0).fit(D, y)
    lam = np.linalg.eigvalsh(np.exp(-D ** 2 / 2))
    assert lam.min() < -1e-3  # really indefinite
    # the corrected training kernel is PSD
    Kc = svm.decision_kernel(D)
    assert np.linalg.eigvalsh(0.5 * (Kc + Kc.T)).min() > -1e-9
    assert list(svm.predict(D)) == y
    with pytest.raises(ValueError):
        SVMClassifier(bandwidth=0.0).fit(D, y)


# ---------------------------------------------------------------- goodness
def test_goodness_lp_by_hand():
    # d(x1, x2) = ln 2 -> k(x1, x2) = 0 and K = I. With y = (+1, -1) the LP is
    # min [1 - a1]_+ + [1 + a2]_+ + lam (|a1| + |a2|): a = (1, -1) for lam < 1, 0 for lam > 1.
    D = np.array([[0.0, math.log(2)], [math.log(2), 0.0]])
    y = ["neg", "pos"]  # classes_ = [neg, pos]; pos = +1
    g = GoodnessClassifier(lam=0.5).fit(D, y)
    np.testing.assert_allclose(g.alpha_[0], [-1.0, 1.0], atol=1e-9)
    # a new point at distance 0 from x1 (neg) and ln 2 from x2: f = -1
    T = np.array([[0.0, math.log(2)], [math.log(2), 0.0], [0.1, 2.0]])
    np.testing.assert_allclose(g.decision_function(T)[:2], [-1.0, 1.0], atol=1e-9)
    assert list(g.predict(T)) == ["neg", "pos", "neg"]
    g2 = GoodnessClassifier(lam=2.0).fit(D, y)
    np.testing.assert_allclose(g2.alpha_, 0.0, atol=1e-9)
    # all scores 0: the tie goes to the more frequent class, then the smaller label
    assert list(g2.predict(T)) == ["neg"] * 3


def test_goodness_ties_prefer_majority():
    D = np.array([[0.0, math.log(2), math.log(2)],
                  [math.log(2), 0.0, 0.0],
                  [math.log(2), 0.0, 0.0]])
    g = GoodnessClassifier(lam=100.0).fit(D, ["a", "b", "b"])
    assert list(g.predict(D)) == ["b"] * 3


def test_goodness_objective_optimal_against_random_alphas():
    rng = np.random.default_rng(1)
    X = np.concatenate([rng.normal(0, 1, (8, 2)), rng.normal(1.5, 1, (8, 2))])
    y = np.repeat([0, 1], 8)
    D = dist(X)
    lam = 0.05
    g = GoodnessClassifier(lam=lam).fit(D, y)
    K = GoodnessClassifier.similarity(D)
    s = np.where(y == 1, 1.0, -1.0)

    def obj(a):
        return np.maximum(0, 1 - s * (K @ a)).sum() + lam * np.abs(a).sum()

    best = obj(g.alpha_[0])
    for _ in range(2000):
        a = g.alpha_[0] + rng.normal(0, 0.05, 16) * rng.integers(0, 2, 16)
        assert obj(a) >= best - 1e-7


def test_goodness_falls_back_to_clarabel_where_highs_fails(monkeypatch):
    """Where every HiGHS method ends without a solution (as on learned kernels with many
    nearly equal columns), Clarabel solves the same LP: its objective equals HiGHS' optimum
    and the hand-solved case gives the hand-solved alphas."""
    pytest.importorskip("clarabel")
    import scipy.optimize

    rng = np.random.default_rng(4)
    X = np.concatenate([rng.normal(0, 1, (10, 2)), rng.normal(1.5, 1, (10, 2))])
    y = np.repeat([0, 1], 10)
    D = dist(X)
    lam = 0.05
    K = GoodnessClassifier.similarity(D)
    s = np.where(y == 1, 1.0, -1.0)

    def obj(a):
        return np.maximum(0, 1 - s * (K @ a)).sum() + lam * np.abs(a).sum()

    by_highs = obj(GoodnessClassifier(lam=lam).fit(D, y).alpha_[0])
    real = scipy.optimize.linprog

    class Failed:
        status, message = 4, "HiGHS Status 15: model_status is Unknown"

    monkeypatch.setattr(scipy.optimize, "linprog", lambda *a, **k: Failed())
    from bedl_torch.evaluation import classifiers

    calls = []
    fallback = classifiers._lp_by_clarabel
    monkeypatch.setattr(classifiers, "_lp_by_clarabel",
                        lambda *a: calls.append(a[-1]) or fallback(*a))
    by_clarabel = obj(GoodnessClassifier(lam=lam).fit(D, y).alpha_[0])
    assert abs(by_clarabel - by_highs) <= 1e-6 * max(1.0, by_highs)
    # the hand-solved LP of test_goodness_lp_by_hand
    D2 = np.array([[0.0, math.log(2)], [math.log(2), 0.0]])
    g = GoodnessClassifier(lam=0.5).fit(D2, ["neg", "pos"])
    np.testing.assert_allclose(g.alpha_[0], [-1.0, 1.0], atol=1e-6)
    assert len(calls) == 2 and "Status 15" in calls[0]
    assert real is not scipy.optimize.linprog


def test_goodness_one_vs_rest_three_classes():
    x = [0.0, 0.2, 5.0, 5.2, 10.0, 10.2]
    y = [0, 0, 1, 1, 2, 2]
    g = GoodnessClassifier(lam=1e-3).fit(dist(x), y)
    assert g.alpha_.shape == (3, 6)
    assert list(g.predict(dist([0.1, 5.1, 9.9, 4.0], x))) == [0, 1, 2, 1]
    assert g.score(dist(x), y) == 1.0
