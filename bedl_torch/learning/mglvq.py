"""Median generalised learning vector quantisation (median GLVQ) on a distance matrix.

Prototypes are training points. They are chosen with the generalised EM scheme of Nebel et
al. (2015) as described in the BEDL paper: with
``r_i = d+_i / (d+_i + d-_i)``,

    g+_i = 2 - d+_i / (d+_i + d-_i),      g-_i = 2 + d-_i / (d+_i + d-_i)

(so ``g+_i + g-_i = 4 - mu_i``), the scheme maximises ``sum_i log(g+_i + g-_i)``. The E-step
computes ``gamma+_i = g+_i / (g+_i + g-_i)`` and ``gamma-_i = g-_i / (g+_i + g-_i)``; the
M-step moves one prototype to another training point of its class if that increases

    L = sum_i gamma+_i log(g+_i / gamma+_i) + gamma-_i log(g-_i / gamma-_i)

at fixed gammas. Each accepted move strictly increases the likelihood, so the scheme
terminates; it stops when no single move increases ``L``.

Only numpy is needed; scikit-learn is not imported. :class:`MedianGLVQ` follows the
scikit-learn conventions through :class:`~bedl_torch.learning.estimator.Estimator`
(``get_params``/``set_params``, ``fit``/``predict``/``score``, ``classes_``), so
``sklearn.base.clone``, ``cross_val_score`` and ``GridSearchCV`` work.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .estimator import Estimator

__all__ = ["MedianGLVQ", "median_glvq_em", "init_prototypes", "glvq_likelihood"]

# Relative tolerance for accepting an improvement (guards against cycling on float noise).
_REL_TOL = 1e-12


def _as_numpy_matrix(D) -> np.ndarray:
    if hasattr(D, "detach"):  # torch tensor, without importing torch here
        from ..validation import check_real_tensor

        check_real_tensor(D, "the distance matrix")
        D = D.detach().cpu().double().numpy()
    if np.iscomplexobj(D):
        raise TypeError("the distance matrix must be real, got complex values")
    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 2:
        raise ValueError(f"expected a 2-D distance matrix, got shape {D.shape}")
    if np.isnan(D).any():
        raise ValueError("the distance matrix contains NaN")
    return D


def _as_training_matrix(D) -> np.ndarray:
    """Training distances: finite and >= 0, where the ratios ``d+ / (d+ + d-)`` are defined
    (a negative or infinite distance would make the likelihood NaN)."""
    D = _as_numpy_matrix(D)
    if not np.isfinite(D).all():
        raise ValueError("the distance matrix contains inf")
    if (D < 0).any():
        raise ValueError(f"the distance matrix has negative entries (smallest {D.min()!r}); "
                         "median GLVQ needs distances >= 0")
    return D


def _ratio_plus(d_plus: np.ndarray, d_minus: np.ndarray) -> np.ndarray:
    """``d+ / (d+ + d-)`` with 1/2 (i.e. mu = 0) where both distances are 0."""
    denom = d_plus + d_minus
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(denom != 0, d_plus / np.where(denom != 0, denom, 1.0), 0.5)
    return r


def _g_values(d_plus, d_minus):
    r = _ratio_plus(d_plus, d_minus)
    return 2.0 - r, 3.0 - r  # g+ = 2 - r+, g- = 2 + r- = 2 + (1 - r+)


def glvq_likelihood(d_plus: np.ndarray, d_minus: np.ndarray) -> float:
    """``sum_i log(g+_i + g-_i) = sum_i log(4 - mu_i)``, what the EM scheme maximises."""
    g_plus, g_minus = _g_values(np.asarray(d_plus, float), np.asarray(d_minus, float))
    return float(np.log(g_plus + g_minus).sum())


def _closest(Dp: np.ndarray, same: np.ndarray):
    """Closest correct / wrong prototype distances from (m, P) distances to prototypes."""
    d_plus = np.where(same, Dp, np.inf).min(axis=1)
    d_minus = np.where(~same, Dp, np.inf).min(axis=1)
    return d_plus, d_minus


def _encode_labels(y):
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got shape {y.shape}")
    classes, y_idx = np.unique(y, return_inverse=True)
    return classes, y_idx.reshape(-1)


def init_prototypes(D, y_idx: np.ndarray, n_prototypes: int = 1) -> np.ndarray:
    """Deterministic initial prototypes (indices into the columns of ``D``).

    ``D[i, j]`` is the distance of training point ``i`` to candidate ``j`` (same index set),
    ``y_idx`` integer class labels ``0 .. C-1``. First the medoid of every class (the point
    ``j`` minimising ``sum_{i in class} D[i, j]``), then, round by round and class by class,
    the point of the class whose addition increases ``sum_i log(g+_i + g-_i)`` the most,
    until every class has ``n_prototypes`` prototypes (or all its points). Ties go to the
    smallest index. Returns the indices ordered by class, then by selection order.
    """
    D = _as_training_matrix(D)
    y_idx = np.asarray(y_idx)
    n_classes = int(y_idx.max()) + 1
    if n_prototypes < 1:
        raise ValueError(f"n_prototypes must be >= 1, got {n_prototypes}")
    members = [np.flatnonzero(y_idx == c) for c in range(n_classes)]
    protos: list[list[int]] = []
    for idx in members:
        if len(idx) == 0:
            raise ValueError("every class needs at least one training point")
        sums = D[np.ix_(idx, idx)].sum(axis=0)
        protos.append([int(idx[int(np.argmin(sums))])])
    for _ in range(1, n_prototypes):
        for c, idx in enumerate(members):
            if len(protos[c]) >= len(idx):
                continue
            flat = np.array([p for ps in protos for p in ps])
            labels = y_idx[flat]
            d_plus, d_minus = _closest(D[:, flat], labels[None, :] == y_idx[:, None])
            cand = np.setdiff1d(idx, flat)
            Dc = D[:, cand]  # (m, n_cand)
            in_c = (y_idx == c)[:, None]
            new_plus = np.where(in_c, np.minimum(d_plus[:, None], Dc), d_plus[:, None])
            new_minus = np.where(in_c, d_minus[:, None], np.minimum(d_minus[:, None], Dc))
            g_plus, g_minus = _g_values(new_plus, new_minus)
            gains = np.log(g_plus + g_minus).sum(axis=0)
            protos[c].append(int(cand[int(np.argmax(gains))]))
    return np.array([p for ps in protos for p in ps], dtype=np.int64)


def median_glvq_em(D, y_idx: np.ndarray, prototypes: Sequence[int], max_iter: int = 100):
    """Generalised EM for median GLVQ from the given initial prototypes.

    ``D`` (m, m'): distances of the m training points (labels ``y_idx``, integers) to the
    candidates; the candidates are the training points themselves, so ``m' = m`` and a
    prototype ``p`` has class ``y_idx[p]``. ``prototypes``: initial candidate indices (each
    class needs at least one). Per iteration: E-step, then the single move (a prototype to a
    non-prototype point of its class) that increases ``L`` most; stops when no move increases
    ``L`` (relative tolerance 1e-12) or after ``max_iter`` moves.

    Returns ``(prototypes (np.int64 array, same order as given), n_iter, likelihood)`` where
    ``likelihood = sum_i log(g+_i + g-_i)`` at the returned prototypes.
    """
    D = _as_training_matrix(D)
    y_idx = np.asarray(y_idx)
    m = D.shape[0]
    if D.shape[1] != m:
        raise ValueError(f"expected a square training distance matrix, got shape {D.shape}")
    protos = np.array(prototypes)
    if protos.ndim != 1 or (protos.size and protos.dtype.kind not in "iu"):
        raise TypeError(f"prototypes must be a sequence of int indices, got {prototypes!r}")
    protos = protos.astype(np.int64)
    if protos.size and (protos.min() < 0 or protos.max() >= m):
        raise ValueError(f"prototypes must be indices in [0, {m}), got {protos.tolist()}")
    if len(np.unique(protos)) != len(protos):
        raise ValueError("prototypes must be distinct")
    n_classes = int(y_idx.max()) + 1
    plabels = y_idx[protos]
    if len(np.unique(plabels)) != n_classes:
        raise ValueError("every class needs at least one prototype")
    members = [np.flatnonzero(y_idx == c) for c in range(n_classes)]

    n_iter = 0
    while n_iter < max_iter:
        same = plabels[None, :] == y_idx[:, None]  # (m, P)
        Dp = D[:, protos]
        d_plus, d_minus = _closest(Dp, same)
        # E-step
        g_plus, g_minus = _g_values(d_plus, d_minus)
        gamma_plus = g_plus / (g_plus + g_minus)
        gamma_minus = 1.0 - gamma_plus
        # M-step: best single move over all prototypes
        best = (0.0, None, None)
        for k, p in enumerate(protos):
            c = plabels[k]
            others = np.ones(len(protos), dtype=bool)
            others[k] = False
            # distances to the closest correct / wrong prototype other than k
            a_plus, a_minus = _closest(Dp[:, others], same[:, others])
            cand = np.setdiff1d(members[c], np.delete(protos, k))  # includes p itself
            Dc = D[:, cand]
            in_c = (y_idx == c)[:, None]
            new_plus = np.where(in_c, np.minimum(a_plus[:, None], Dc), d_plus[:, None])
            new_minus = np.where(in_c, d_minus[:, None], np.minimum(a_minus[:, None], Dc))
            gp, gm = _g_values(new_plus, new_minus)
            with np.errstate(divide="ignore"):
                L = (gamma_plus[:, None] * np.log(gp) + gamma_minus[:, None] * np.log(gm)).sum(0)
            L_now = L[int(np.searchsorted(cand, p))]
            j = int(np.argmax(L))
            gain = L[j] - L_now
            if cand[j] != p and gain > _REL_TOL * max(1.0, abs(L_now)) and gain > best[0]:
                best = (gain, k, int(cand[j]))
        if best[1] is None:
            break
        protos[best[1]] = best[2]
        n_iter += 1
    same = plabels[None, :] == y_idx[:, None]
    d_plus, d_minus = _closest(D[:, protos], same)
    return protos, n_iter, glvq_likelihood(d_plus, d_minus)


_init_prototypes = init_prototypes  # `fit` has an argument of that name


class MedianGLVQ(Estimator):
    """Median GLVQ classifier on precomputed distances.

    Parameters
    ----------
    n_prototypes : int
        Prototypes per class (capped at the class size).
    max_iter : int
        Maximum number of EM iterations (accepted prototype moves).
    random_state : None or int
        Unused (initialisation and EM are deterministic); kept for a uniform interface.

    ``fit(D, y)`` takes the (m, m) distances between the training points (``D[i, j]`` =
    distance of point i to candidate prototype j, numpy array or torch tensor), ``predict(D)``
    the (n, m) distances of new points to the *training* points. Only the columns of the
    prototypes are used, so ``predict`` also accepts ``(n, len(prototypes_))`` matrices when
    passed ``prototypes_only=True``.

    Fitted attributes: ``classes_``, ``prototypes_`` (indices into the training data, ordered
    by class), ``prototype_labels_``, ``n_iter_``, ``likelihood_`` (``sum_i log(4 - mu_i)``
    on the training data), ``loss_`` (GLVQ cost ``sum_i log(4 + mu_i)``).

    Raises ValueError for a bad parameter, a matrix of the wrong shape or with NaN, or fewer
    than two classes, and RuntimeError when predicting before ``fit``.
    """

    _estimator_type = "classifier"
    _pairwise = True

    def __init__(self, n_prototypes: int = 1, max_iter: int = 100, random_state=None):
        self.n_prototypes = n_prototypes
        self.max_iter = max_iter
        self.random_state = random_state

    def _validate_params(self) -> None:
        if int(self.n_prototypes) < 1:
            raise ValueError(f"n_prototypes must be >= 1, got {self.n_prototypes}")
        if int(self.max_iter) < 0:
            raise ValueError(f"max_iter must be >= 0, got {self.max_iter}")

    def fit(self, D, y, init_prototypes: Optional[Sequence[int]] = None):
        """Fit on the (m, m) training distances. ``init_prototypes``: optional starting
        prototype indices (warm start, e.g. the previous round of BEDL); by default class
        medoids plus greedy additions (:func:`init_prototypes`).

        Raises:
            ValueError: a bad parameter, a non-square matrix, NaN, inf or negative distances,
                fewer than two classes, initial prototypes out of range.
            TypeError: initial prototypes that are not int indices, a complex matrix.
        """
        self._validate_params()
        D = _as_training_matrix(D)
        classes, y_idx = _encode_labels(y)
        if D.shape[0] != len(y_idx) or D.shape[1] != len(y_idx):
            raise ValueError(
                f"D must be ({len(y_idx)}, {len(y_idx)}) for {len(y_idx)} labels, got {D.shape}"
            )
        if len(classes) < 2:
            raise ValueError("median GLVQ needs at least two classes")
        n_proto = int(self.n_prototypes)
        if init_prototypes is None:
            init = _init_prototypes(D, y_idx, n_proto)
        else:
            init = init_prototypes
        protos, n_iter, likelihood = median_glvq_em(D, y_idx, init, self.max_iter)
        order = np.argsort(y_idx[protos], kind="stable")
        protos = protos[order]
        self.classes_ = classes
        self.prototypes_ = protos
        self.prototype_labels_ = classes[y_idx[protos]]
        self.n_iter_ = n_iter
        self.likelihood_ = likelihood
        same = y_idx[protos][None, :] == y_idx[:, None]
        d_plus, d_minus = _closest(D[:, protos], same)
        r = _ratio_plus(d_plus, d_minus)
        self.loss_ = float(np.log(4.0 + (2.0 * r - 1.0)).sum())
        return self

    def _check_fitted(self):
        if not hasattr(self, "prototypes_"):
            raise RuntimeError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def decision_distances(self, D, prototypes_only: bool = False) -> np.ndarray:
        """(n, P) distances of the points to the prototypes (columns as ``prototypes_``)."""
        self._check_fitted()
        D = _as_numpy_matrix(D)
        if prototypes_only:
            if D.shape[1] != len(self.prototypes_):
                raise ValueError(f"expected {len(self.prototypes_)} columns, got {D.shape[1]}")
            return D
        if D.shape[1] <= int(self.prototypes_.max()):
            raise ValueError(
                f"D has {D.shape[1]} columns; expected distances to all training points"
            )
        return D[:, self.prototypes_]

    def predict(self, D, prototypes_only: bool = False) -> np.ndarray:
        """Label of the closest prototype (first one on ties)."""
        Dp = self.decision_distances(D, prototypes_only)
        return self.prototype_labels_[np.argmin(Dp, axis=1)]

    def score(self, D, y, prototypes_only: bool = False) -> float:
        """Mean accuracy."""
        return float(np.mean(self.predict(D, prototypes_only) == np.asarray(y)))

