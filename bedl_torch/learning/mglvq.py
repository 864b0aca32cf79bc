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

from typing import Callable, Optional, Sequence, Tuple

import numpy as np

from .estimator import Estimator, NotFittedError, accuracy, check_random_state, encode_class_labels

__all__ = ["MedianGLVQ", "median_glvq_em", "init_prototypes", "glvq_likelihood",
           "kmedoids_pp_candidates"]

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


# Median GLVQ decides by ratios d+ / (d+ + d-) and by comparing sums of distances, which a
# power of two scales exactly: training distances above this (or squared ones above its root)
# are scaled below 1 first, so that those sums, d+ + d- and squares stay finite.
_SCALE_ABOVE = 2.0 ** 960
_SQUARES_SCALE_ABOVE = 2.0 ** 480


def _scaled_down(values: np.ndarray, limit: float = _SCALE_ABOVE) -> np.ndarray:
    """``values`` (finite, >= 0) times the power of two that brings their largest into [1/2, 1)
    where it exceeds ``limit``; unchanged otherwise."""
    top = float(values.max()) if values.size else 0.0
    if top <= limit:
        return values
    return np.ldexp(values, -int(np.frexp(top)[1]))


def _as_training_matrix(D) -> np.ndarray:
    """Training distances: finite and >= 0, where the ratios ``d+ / (d+ + d-)`` are defined
    (a negative or infinite distance would make the likelihood NaN); scaled by a power of two
    where their sums could overflow (:func:`_scaled_down`: the same decisions)."""
    D = _as_numpy_matrix(D)
    if not np.isfinite(D).all():
        raise ValueError("the distance matrix contains inf")
    if (D < 0).any():
        raise ValueError(f"the distance matrix has negative entries (smallest {D.min()!r}); "
                         "median GLVQ needs distances >= 0")
    return _scaled_down(D)


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


def _candidate_columns(D: np.ndarray, y_idx: np.ndarray, candidates) -> np.ndarray:
    """The training point of each column of ``D`` (sorted, distinct); all points if None."""
    m = len(y_idx)
    if D.shape[0] != m:
        raise ValueError(f"D has {D.shape[0]} rows for {m} labels")
    if candidates is None:
        if D.shape[1] != m:
            raise ValueError(f"expected a square training distance matrix, got shape {D.shape}")
        return np.arange(m, dtype=np.int64)
    cand = np.asarray(candidates)
    if cand.ndim != 1 or (cand.size and cand.dtype.kind not in "iu"):
        raise TypeError(f"candidates must be a sequence of int indices, got {candidates!r}")
    cand = cand.astype(np.int64)
    if cand.size != D.shape[1]:
        raise ValueError(f"D has {D.shape[1]} columns for {cand.size} candidates")
    if cand.size and (cand.min() < 0 or cand.max() >= m):
        raise ValueError(f"candidates must be indices in [0, {m}), got {cand.tolist()}")
    if np.any(np.diff(cand) <= 0):
        raise ValueError("candidates must be sorted and distinct")
    return cand


def init_prototypes(D, y_idx: np.ndarray, n_prototypes: int = 1,
                    candidates: Optional[Sequence[int]] = None) -> np.ndarray:
    """Deterministic initial prototypes (training point indices).

    ``D[i, j]`` is the distance of training point ``i`` to candidate ``j``: the training
    points themselves (square ``D``), or the sorted training points ``candidates``.
    ``y_idx`` integer class labels ``0 .. C-1``. First the medoid of every class (the
    candidate ``j`` of the class minimising ``sum_{i in class} D[i, j]``), then, round by
    round and class by class, the candidate of the class whose addition increases
    ``sum_i log(g+_i + g-_i)`` the most, until every class has ``n_prototypes`` prototypes (or
    all its candidates). Ties go to the smallest index. Returns the indices ordered by class,
    then by selection order.
    """
    D = _as_training_matrix(D)
    y_idx = np.asarray(y_idx)
    columns = _candidate_columns(D, y_idx, candidates)
    n_classes = int(y_idx.max()) + 1
    if n_prototypes < 1:
        raise ValueError(f"n_prototypes must be >= 1, got {n_prototypes}")
    col_labels = y_idx[columns]
    members = [np.flatnonzero(col_labels == c) for c in range(n_classes)]  # columns
    protos: list[list[int]] = []
    for c, idx in enumerate(members):
        if len(idx) == 0:
            raise ValueError("every class needs at least one training point" if candidates is None
                             else f"class index {c} has no candidate")
        sums = D[np.ix_(np.flatnonzero(y_idx == c), idx)].sum(axis=0)
        protos.append([int(idx[int(np.argmin(sums))])])
    for _ in range(1, n_prototypes):
        for c, idx in enumerate(members):
            if len(protos[c]) >= len(idx):
                continue
            flat = np.array([p for ps in protos for p in ps])
            labels = col_labels[flat]
            d_plus, d_minus = _closest(D[:, flat], labels[None, :] == y_idx[:, None])
            cand = np.setdiff1d(idx, flat)
            Dc = D[:, cand]  # (m, n_cand)
            in_c = (y_idx == c)[:, None]
            new_plus = np.where(in_c, np.minimum(d_plus[:, None], Dc), d_plus[:, None])
            new_minus = np.where(in_c, d_minus[:, None], np.minimum(d_minus[:, None], Dc))
            g_plus, g_minus = _g_values(new_plus, new_minus)
            gains = np.log(g_plus + g_minus).sum(axis=0)
            protos[c].append(int(cand[int(np.argmax(gains))]))
    return columns[np.array([p for ps in protos for p in ps], dtype=np.int64)]


def median_glvq_em(D, y_idx: np.ndarray, prototypes: Sequence[int], max_iter: int = 100,
                   candidates: Optional[Sequence[int]] = None, split=None):
    """Generalised EM for median GLVQ from the given initial prototypes.

    ``D`` (m, m'): distances of the m training points (labels ``y_idx``, integers) to the
    candidates: the training points themselves (``m' = m``) or the sorted training points
    ``candidates``; a prototype ``p`` (a training point index) has class ``y_idx[p]``.
    ``prototypes``: initial prototypes among the candidates (each class needs at least one).
    Per iteration: E-step, then the single move (a prototype to a non-prototype candidate of
    its class) that increases ``L`` most; stops when no move increases ``L`` (relative
    tolerance 1e-12) or after ``max_iter`` moves.

    ``split``: the processes of a group sharing the M-step (BEDL across ranks): an object with
    ``rank``, ``size`` and ``gather(vector) -> (size, len(vector))`` array; each process scores
    the moves of the prototypes ``k`` with ``k % size == rank`` and the best moves are gathered,
    so every process takes the move (and gets the result) one process alone would.

    Returns ``(prototypes (np.int64 array, same order as given), n_iter, likelihood)`` where
    ``likelihood = sum_i log(g+_i + g-_i)`` at the returned prototypes.
    """
    D = _as_training_matrix(D)
    y_idx = np.asarray(y_idx)
    m = D.shape[0]
    columns = _candidate_columns(D, y_idx, candidates)
    shared = split is not None and split.size > 1
    protos = np.array(prototypes)
    if protos.ndim != 1 or (protos.size and protos.dtype.kind not in "iu"):
        raise TypeError(f"prototypes must be a sequence of int indices, got {prototypes!r}")
    protos = protos.astype(np.int64)
    if protos.size and (protos.min() < 0 or protos.max() >= m):
        raise ValueError(f"prototypes must be indices in [0, {m}), got {protos.tolist()}")
    if len(np.unique(protos)) != len(protos):
        raise ValueError("prototypes must be distinct")
    col_of = np.searchsorted(columns, protos)
    if protos.size and not np.array_equal(columns[np.minimum(col_of, len(columns) - 1)], protos):
        raise ValueError("every initial prototype must be a candidate")
    n_classes = int(y_idx.max()) + 1
    plabels = y_idx[protos]
    if len(np.unique(plabels)) != n_classes:
        raise ValueError("every class needs at least one prototype")
    protos = col_of.astype(np.int64)  # from here on: columns of D
    col_labels = y_idx[columns]
    members = [np.flatnonzero(col_labels == c) for c in range(n_classes)]

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
            if shared and k % split.size != split.rank:
                continue
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
        if shared:
            best = _best_shared_move(split, best)
        if best[1] is None:
            break
        protos[best[1]] = best[2]
        n_iter += 1
    same = plabels[None, :] == y_idx[:, None]
    d_plus, d_minus = _closest(D[:, protos], same)
    return columns[protos], n_iter, glvq_likelihood(d_plus, d_minus)


def _best_shared_move(split, best):
    """The move one process would take, from every process's best over its prototypes: the
    largest gain, ties to the smallest prototype index (the order of the single loop)."""
    gain, k, j = best
    mine = np.array([gain, -1.0 if k is None else float(k), -1.0 if j is None else float(j)])
    rows = np.asarray(split.gather(mine), dtype=np.float64)
    best = (0.0, None, None)
    for gain, k, j in sorted(rows.tolist(), key=lambda r: r[1]):
        if k >= 0 and gain > best[0]:
            best = (gain, int(k), int(j))
    return best


def check_prototype_candidates(value, n_prototypes) -> None:
    """``prototype_candidates``: None or an int >= ``n_prototypes`` (ValueError otherwise)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"prototype_candidates must be None or an int, got {value!r}")
    if int(value) < int(n_prototypes):
        raise ValueError(f"prototype_candidates ({value}) must be at least n_prototypes "
                         f"({n_prototypes})")


def kmedoids_pp_candidates(y_idx: np.ndarray, n_candidates: int,
                           column: Callable[[np.ndarray], np.ndarray],
                           random_state=None) -> Tuple[np.ndarray, np.ndarray]:
    """Up to ``n_candidates`` prototype candidates per class by k-medoids++ seeding, so that
    median GLVQ needs the distances to ``C`` candidates, not to all ``m`` points.

    Per class (in class order): the first candidate uniformly among its points, then each
    next one among the class's points not chosen yet with probability proportional to the
    squared distance to the closest candidate chosen so far (uniformly where all those are
    0: duplicates). A class with at most ``n_candidates`` points takes them all.
    ``column(js)`` returns the ``(m, len(js))`` distances of every training point to the
    points ``js``; it is called with one point per step (every candidate's column once).
    ``random_state``: seed of a :func:`numpy.random.default_rng` (``None``: 0, so that the
    choice is the same on every run and every rank).

    Returns ``(candidates, D)``: the sorted candidate indices and their ``(m, C)`` columns.
    """
    y_idx = np.asarray(y_idx)
    if isinstance(n_candidates, bool) or int(n_candidates) != n_candidates or n_candidates < 1:
        raise ValueError(f"n_candidates must be an int >= 1, got {n_candidates!r}")
    rng = np.random.default_rng(0 if random_state is None else random_state)
    chosen: dict = {}
    for c in range(int(y_idx.max()) + 1):
        idx = np.flatnonzero(y_idx == c)
        if len(idx) <= n_candidates:
            for j in idx:
                chosen[int(j)] = None
            continue
        first = int(rng.choice(idx))
        col = np.asarray(column(np.array([first])), dtype=np.float64)[:, 0]
        chosen[first] = col
        taken = np.zeros(len(idx), dtype=bool)
        taken[np.searchsorted(idx, first)] = True
        d_min = col[idx]
        for _ in range(1, int(n_candidates)):
            # (squares of distances scaled by a power of two: the same probabilities, finite)
            w = np.where(taken, 0.0, np.square(_scaled_down(d_min, _SQUARES_SCALE_ABOVE)))
            total = w.sum()
            p = w / total if total > 0 and np.isfinite(total) else (~taken) / np.sum(~taken)
            k = int(rng.choice(len(idx), p=p))
            j = int(idx[k])
            taken[k] = True
            col = np.asarray(column(np.array([j])), dtype=np.float64)[:, 0]
            chosen[j] = col
            d_min = np.minimum(d_min, col[idx])
    candidates = np.array(sorted(chosen), dtype=np.int64)
    missing = np.array([j for j in candidates if chosen[int(j)] is None], dtype=np.int64)
    D = np.empty((len(y_idx), len(candidates)), dtype=np.float64)
    if len(missing):
        D[:, np.searchsorted(candidates, missing)] = np.asarray(column(missing), dtype=np.float64)
    for pos, j in enumerate(candidates):
        if chosen[int(j)] is not None:
            D[:, pos] = chosen[int(j)]
    return candidates, D


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
        Seed of the candidate choice (``prototype_candidates``; ``None``: 0). Initialisation
        and EM are deterministic.
    prototype_candidates : None or int
        ``None``: every training point is a candidate prototype. An int ``M``: at most ``M``
        candidates per class, chosen by :func:`kmedoids_pp_candidates` on the columns of
        ``D``; with ``fit(D, y, candidates=...)`` the caller chooses them and ``D`` holds only
        their columns, so that a fit needs ``m x C`` distances, not ``m x m``.

    ``fit(D, y)`` takes the (m, m) distances between the training points (``D[i, j]`` =
    distance of point i to candidate prototype j, numpy array or torch tensor), ``predict(D)``
    the (n, m) distances of new points to the *training* points. Only the columns of the
    prototypes are used, so ``predict`` also accepts ``(n, len(prototypes_))`` matrices when
    passed ``prototypes_only=True``.

    Fitted attributes: ``classes_``, ``candidates_`` (the candidate training points),
    ``prototypes_`` (indices into the training data, ordered by class),
    ``prototype_labels_``, ``n_iter_``, ``likelihood_`` (``sum_i log(4 - mu_i)`` on the
    training data), ``loss_`` (GLVQ cost ``sum_i log(4 + mu_i)``).

    Raises ValueError for a bad parameter, a matrix of the wrong shape or with NaN, or fewer
    than two classes, and RuntimeError when predicting before ``fit``.
    """

    _estimator_type = "classifier"
    _pairwise = True

    def __init__(self, n_prototypes: int = 1, max_iter: int = 100, random_state=None,
                 prototype_candidates: Optional[int] = None):
        self.n_prototypes = n_prototypes
        self.max_iter = max_iter
        self.random_state = random_state
        self.prototype_candidates = prototype_candidates

    def _validate_params(self) -> None:
        if int(self.n_prototypes) < 1:
            raise ValueError(f"n_prototypes must be >= 1, got {self.n_prototypes}")
        if int(self.max_iter) < 0:
            raise ValueError(f"max_iter must be >= 0, got {self.max_iter}")
        check_prototype_candidates(self.prototype_candidates, self.n_prototypes)
        check_random_state(self.random_state)

    def fit(self, D, y, init_prototypes: Optional[Sequence[int]] = None,
            candidates: Optional[Sequence[int]] = None):
        """Fit on the (m, m) training distances, or with ``candidates`` (sorted training point
        indices) on the (m, len(candidates)) distances to them. ``init_prototypes``: optional
        starting prototype indices (warm start, e.g. the previous round of BEDL); by default
        class medoids plus greedy additions (:func:`init_prototypes`).

        Raises:
            ValueError: a bad parameter, a matrix of the wrong shape, NaN, inf or negative
                distances, fewer than two classes, initial prototypes out of range or not
                candidates.
            TypeError: initial prototypes or candidates that are not int indices, a complex
                matrix.
        """
        self._validate_params()
        D = _as_training_matrix(D)
        classes, y_idx = encode_class_labels(y)
        m = len(y_idx)
        if candidates is None and (D.shape[0] != m or D.shape[1] != m):
            raise ValueError(f"D must be ({m}, {m}) for {m} labels, got {D.shape}")
        if len(classes) < 2:
            raise ValueError("median GLVQ needs at least two classes")
        if candidates is None and self.prototype_candidates is not None:
            full = D
            candidates, D = kmedoids_pp_candidates(y_idx, int(self.prototype_candidates),
                                                   lambda js: full[:, js], self.random_state)
        n_proto = int(self.n_prototypes)
        if init_prototypes is None:
            init = _init_prototypes(D, y_idx, n_proto, candidates)
        else:
            init = init_prototypes
        protos, n_iter, likelihood = median_glvq_em(D, y_idx, init, self.max_iter, candidates)
        order = np.argsort(y_idx[protos], kind="stable")
        protos = protos[order]
        self.classes_ = classes
        self.prototypes_ = protos
        self.prototype_labels_ = classes[y_idx[protos]]
        self.n_iter_ = n_iter
        self.likelihood_ = likelihood
        self.candidates_ = (np.arange(m, dtype=np.int64) if candidates is None
                            else _candidate_columns(D, y_idx, candidates))
        same = y_idx[protos][None, :] == y_idx[:, None]
        d_plus, d_minus = _closest(D[:, np.searchsorted(self.candidates_, protos)], same)
        r = _ratio_plus(d_plus, d_minus)
        self.loss_ = float(np.log(4.0 + (2.0 * r - 1.0)).sum())
        return self

    def _check_fitted(self):
        if not hasattr(self, "prototypes_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

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
        return accuracy(self.predict(D, prototypes_only), y)

