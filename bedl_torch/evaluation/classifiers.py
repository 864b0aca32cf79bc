"""Classifiers on precomputed distance matrices.

Every classifier here follows the same convention:

- ``fit(D_train_train, y)``: ``D_train_train`` is the ``(m, m)`` matrix of distances between the
  training points, ``y`` their ``m`` labels (any hashable, sortable values);
- ``predict(D_test_train)``: ``D_test_train`` is the ``(n, m)`` matrix of distances from ``n``
  new points to the ``m`` training points, in the training order; returns ``n`` labels;
- ``score(D_test_train, y)``: accuracy; ``get_params`` / ``set_params`` as in scikit-learn
  (the classes derive from :class:`sklearn.base.BaseEstimator`, so ``sklearn.base.clone`` works).

Matrices may be numpy arrays or torch tensors (converted to float64 numpy arrays).

Ties are broken deterministically: among tied classes the one that is more frequent in the
training data wins, and among equally frequent ones the smaller label (``np.unique`` order).
"""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError

from ..learning.estimator import encode_class_labels

__all__ = ["KNNClassifier", "SVMClassifier", "GoodnessClassifier", "clip_eigenvalues"]


def _as_matrix(D, name: str = "D") -> np.ndarray:
    if hasattr(D, "detach"):  # torch tensor
        D = D.detach().cpu().numpy()
    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 2:
        raise ValueError(f"{name} must be a 2-D distance matrix, got shape {D.shape}")
    if not np.all(np.isfinite(D)):
        raise ValueError(f"{name} contains NaN or infinite entries")
    return D


class _PrecomputedClassifier(ClassifierMixin, BaseEstimator):
    """Shared bookkeeping: labels, class order, tie-breaking priority, input checks."""

    def _fit_labels(self, D, y):
        D = _as_matrix(D, "D_train_train")
        y = np.asarray(y)
        if D.shape[0] != D.shape[1]:
            raise ValueError(f"D_train_train must be square, got shape {D.shape}")
        if y.shape != (D.shape[0],):
            raise ValueError(f"y must have {D.shape[0]} labels, got shape {y.shape}")
        if len(y) == 0:
            raise ValueError("cannot fit on zero training points")
        self.classes_, y_idx = encode_class_labels(y)
        counts = np.bincount(y_idx, minlength=len(self.classes_))
        # priority[c]: larger = preferred on ties (more frequent, then smaller label).
        order = np.lexsort((np.arange(len(counts)), -counts))
        self._priority = np.empty(len(counts), dtype=np.int64)
        self._priority[order] = np.arange(len(counts))[::-1]
        self.n_train_ = D.shape[0]
        self._y_idx = y_idx
        return D, y_idx

    def _check_test(self, D):
        if not hasattr(self, "classes_"):
            raise NotFittedError(f"{type(self).__name__} is not fitted yet; call fit first")
        D = _as_matrix(D, "D_test_train")
        if D.shape[1] != self.n_train_:
            raise ValueError(
                f"D_test_train must have {self.n_train_} columns (one per training point), "
                f"got shape {D.shape}")
        return D

    def _argmax_with_ties(self, scores: np.ndarray, atol: float = 1e-12) -> np.ndarray:
        """Row-wise argmax over classes; ties (within atol) go to the preferred class."""
        best = scores.max(axis=1, keepdims=True)
        tied = scores >= best - atol
        pri = np.where(tied, self._priority[None, :], -1)
        return pri.argmax(axis=1)


class KNNClassifier(_PrecomputedClassifier):
    """k-nearest-neighbour majority vote.

    Neighbours are the ``n_neighbors`` training points with the smallest distance (stable order:
    equal distances keep the training order). Vote ties go to the tied class with the nearest
    neighbour; ``n_neighbors`` larger than the training set uses all training points.
    """

    def __init__(self, n_neighbors: int = 1):
        self.n_neighbors = n_neighbors

    def fit(self, D_train_train, y):
        if int(self.n_neighbors) < 1:
            raise ValueError(f"n_neighbors must be >= 1, got {self.n_neighbors}")
        self._fit_labels(D_train_train, y)
        return self

    def predict(self, D_test_train):
        D = self._check_test(D_test_train)
        k = min(int(self.n_neighbors), self.n_train_)
        order = np.argsort(D, axis=1, kind="stable")[:, :k]
        neigh = self._y_idx[order]  # (n, k) class indices, nearest first
        n_classes = len(self.classes_)
        votes = np.zeros((D.shape[0], n_classes))
        np.add.at(votes, (np.arange(D.shape[0])[:, None], neigh), 1.0)
        # rank of the nearest neighbour of each class (k if the class has none)
        first = np.full((D.shape[0], n_classes), k, dtype=np.int64)
        for r in range(k - 1, -1, -1):
            first[np.arange(D.shape[0]), neigh[:, r]] = r
        # votes dominate; among equal votes the class whose nearest neighbour ranks first wins
        scores = votes - first / (k + 1.0)
        return self.classes_[scores.argmax(axis=1)]


def _eigh(K):
    # Small matrices: one BLAS thread. Multi-threaded LAPACK gains nothing at this size and
    # is ten times slower when the cores are busy (measured: 133 x 133, 2 busy cores).
    if K.shape[0] <= 512:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # pragma: no cover - comes with scikit-learn
            return np.linalg.eigh(K)
        with threadpool_limits(1, user_api="blas"):
            return np.linalg.eigh(K)
    return np.linalg.eigh(K)


def clip_eigenvalues(K: np.ndarray, rtol: float = 1e-12):
    """Clip eigenvalue correction of a symmetric matrix.

    Returns ``(K_clipped, T)`` with ``K_clipped = V max(L, 0) V^T`` for ``K = V L V^T`` and
    ``T = V 1[L > 0] V^T`` the projection onto the eigenspace of positive eigenvalues, so that
    ``K @ T == K_clipped`` (up to rounding). ``K_new @ T`` applies the same linear correction to
    the kernel rows of new points (Chen et al. 2009's out-of-sample extension of clip).
    Eigenvalues with ``|l| <= rtol * max|L|`` count as zero.
    """
    K = 0.5 * (K + K.T)
    lam, V = _eigh(K)
    tol = rtol * max(np.abs(lam).max(initial=0.0), np.finfo(float).tiny)
    keep = lam > tol
    Vk = V[:, keep]
    K_clipped = (Vk * lam[keep]) @ Vk.T
    T = Vk @ Vk.T
    return 0.5 * (K_clipped + K_clipped.T), T


class SVMClassifier(_PrecomputedClassifier):
    """Support vector machine with an RBF kernel on distances and clip eigenvalue correction.

    Kernel ``k(x, y) = exp(-d(x, y)^2 / (2 bandwidth^2))``. The training kernel matrix need not
    be positive semi-definite when ``d`` is an edit distance; its negative eigenvalues are set
    to 0 (:func:`clip_eigenvalues`), and test kernel rows get the matching linear correction
    ``K_test @ T``. The corrected kernel goes to ``sklearn.svm.SVC(kernel="precomputed", C=C)``
    (LIBSVM, one-vs-one for more than two classes, as in the paper).
    """

    def __init__(self, bandwidth: float = 1.0, C: float = 1.0):
        self.bandwidth = bandwidth
        self.C = C

    def _kernel(self, D):
        if not float(self.bandwidth) > 0:
            raise ValueError(f"bandwidth must be > 0, got {self.bandwidth}")
        return np.exp(-np.square(D) / (2.0 * float(self.bandwidth) ** 2))

    def fit(self, D_train_train, y):
        from sklearn.svm import SVC

        D, y_idx = self._fit_labels(D_train_train, y)
        K, self._T = clip_eigenvalues(self._kernel(D))
        if len(self.classes_) == 1:
            self._svc = None
            return self
        self._svc = SVC(kernel="precomputed", C=float(self.C))
        self._svc.fit(K, y_idx)
        return self

    def decision_kernel(self, D_test_train) -> np.ndarray:
        """The corrected kernel rows of new points (what SVC sees)."""
        D = self._check_test(D_test_train)
        return self._kernel(D) @ self._T

    def predict(self, D_test_train):
        K = self.decision_kernel(D_test_train)
        if self._svc is None:
            return np.repeat(self.classes_[:1], K.shape[0])
        return self.classes_[self._svc.predict(K)]


def _lp_by_clarabel(c: np.ndarray, A, b: np.ndarray, failure: str) -> np.ndarray:
    """``min c x`` subject to ``A x <= b``, ``x >= 0`` with Clarabel, accepted only with a
    duality gap below 1e-6 (relative); RuntimeError ``failure`` (and why) otherwise."""
    try:
        import clarabel
    except ImportError:
        raise RuntimeError(f"{failure}; the fallback solver Clarabel is not installed "
                           "(pip install clarabel)") from None
    from scipy import sparse

    n = A.shape[1]
    G = sparse.vstack([A, -sparse.identity(n)], format="csc")
    h = np.concatenate([b, np.zeros(n)])
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    sol = clarabel.DefaultSolver(sparse.csc_matrix((n, n)), c, G, h,
                                 [clarabel.NonnegativeConeT(G.shape[0])], settings).solve()
    x = np.maximum(np.asarray(sol.x, dtype=np.float64), 0.0)
    primal = float(c @ x)
    dual = float(-(h @ np.asarray(sol.z, dtype=np.float64)))
    infeasible = float(np.max(A @ x - b)) if len(b) else 0.0
    if not (np.isfinite(primal) and np.isfinite(dual)) or primal - dual > 1e-6 * max(
            1.0, abs(primal)) or infeasible > 1e-6:
        raise RuntimeError(f"{failure}; Clarabel: status {sol.status}, objective {primal:.6g}, "
                           f"dual bound {dual:.6g}, largest violation {infeasible:.3g}")
    return x


class GoodnessClassifier(_PrecomputedClassifier):
    """Balcan-Blum-Srebro / Bellet et al. goodness classifier on ``k = 2 exp(-d) - 1``.

    Binary: solves the linear program
    ``min_alpha sum_i [1 - y_i sum_j alpha_j k(x_i, x_j)]_+ + lam ||alpha||_1``
    (``y_i`` in {-1, +1}, ``+1`` = ``classes_[1]``) with ``scipy.optimize.linprog(method=
    "highs")`` over ``alpha = alpha+ - alpha-`` and slacks, and predicts the sign of
    ``f(x) = sum_j alpha_j k(x, x_j)``. For more than two classes it trains one such problem per
    class (class versus rest) and predicts the class with the largest ``f``. Zero / tied scores
    go to the more frequent training class.
    """

    def __init__(self, lam: float = 1e-3):
        self.lam = lam

    @staticmethod
    def similarity(D) -> np.ndarray:
        return 2.0 * np.exp(-np.asarray(D, dtype=np.float64)) - 1.0

    def _solve(self, K: np.ndarray, s: np.ndarray) -> np.ndarray:
        from scipy.optimize import linprog
        from scipy import sparse

        m = K.shape[0]
        lam = float(self.lam)
        c = np.concatenate([np.full(2 * m, lam), np.ones(m)])
        SK = s[:, None] * K
        # -s_i K_i (a+ - a-) - xi_i <= -1
        A = sparse.hstack([sparse.csr_matrix(-SK), sparse.csr_matrix(SK),
                           -sparse.identity(m, format="csr")], format="csr")
        # The problem is always feasible and bounded (alpha = 0, xi = 1 is feasible, the
        # objective >= 0); HiGHS' automatic choice (dual simplex) can still end with status
        # "unknown" on it, where the interior point method solves it; on kernels with many
        # nearly equal columns (learned distances of near-duplicates) both can, and then
        # Clarabel's interior point method with a duality-gap certificate does.
        for method in ("highs", "highs-ipm"):
            res = linprog(c, A_ub=A, b_ub=-np.ones(m), bounds=(0, None), method=method)
            if res.status == 0:
                x = res.x
                break
        else:
            x = _lp_by_clarabel(c, A, -np.ones(m), f"goodness LP failed: {res.message}")
        return x[:m] - x[m:2 * m]

    def fit(self, D_train_train, y):
        if not float(self.lam) >= 0:
            raise ValueError(f"lam must be >= 0, got {self.lam}")
        D, y_idx = self._fit_labels(D_train_train, y)
        K = self.similarity(D)
        n_classes = len(self.classes_)
        if n_classes == 1:
            self.alpha_ = np.zeros((0, D.shape[0]))
        elif n_classes == 2:
            self.alpha_ = self._solve(K, np.where(y_idx == 1, 1.0, -1.0))[None, :]
        else:
            self.alpha_ = np.stack([self._solve(K, np.where(y_idx == c, 1.0, -1.0))
                                    for c in range(n_classes)])
        return self

    def decision_function(self, D_test_train) -> np.ndarray:
        """``f`` per class: ``(n,)`` for two classes (positive = classes_[1]), else ``(n, C)``."""
        D = self._check_test(D_test_train)
        F = self.similarity(D) @ self.alpha_.T
        return F[:, 0] if F.shape[1] == 1 else F

    def predict(self, D_test_train):
        D = self._check_test(D_test_train)
        n_classes = len(self.classes_)
        if n_classes == 1:
            return np.repeat(self.classes_, D.shape[0])
        F = self.similarity(D) @ self.alpha_.T
        scores = np.concatenate([-F, F], axis=1) if n_classes == 2 else F
        return self.classes_[self._argmax_with_ties(scores)]
