"""Good edit similarity learning (GESL; Bellet, Habrard and Sebban 2012) on the pseudo edit
distance, as the baseline of the BEDL paper (its Equation gesl_loss).

The edit scripts are fixed by a reference ("initial") cost, unit costs by default: for a pair
``(x, y)`` the core's co-optimal matrix ``P0`` (shape ``(|x|+1, |y|+1)``) is aggregated into a
symbol-pair frequency matrix ``F`` of shape ``(S, S)``, ``S = U + 1`` (alphabet plus the gap,
which is index ``U``): ``F[a, b] = sum of P0[i, j] over nodes x_i labelled a and y_j labelled b``
(``i = |x|`` / ``j = |y|`` stand for the gap). The pseudo edit distance under a cost matrix ``C``
(``C[a, b]`` replaces a by b, ``C[a, U]`` deletes a, ``C[U, b]`` inserts b) is then linear in C:
``d~(x, y) = <F, C>``.

Note: the core's ``P0`` is the *average* over all co-optimal edit scripts (a script counted once
per co-optimal choice), not one arbitrary cheapest script as in Bellet et al.; on ties this is the
symmetric, order-independent choice, and ``<F, C0> = d_C0(x, y)`` still holds for the reference
cost ``C0``.

GESL solves the convex quadratic program

    min_{C, eta}  lam ||C||_F^2 + sum_{(x,y) in pos} [d~(x,y) - eta]_+
                               + sum_{(x,y) in neg} [log 2 + eta - d~(x,y)]_+
    s.t.  C >= 0 (entry-wise; Bellet et al.'s constraint, optional here), 0 <= eta <= log 2,

with ``pos`` = each training point with its ``K`` nearest neighbours of the same class and ``neg``
= each point with its ``K`` farthest points of other classes, under the reference cost. It is
solved to optimality with the interior-point solver Clarabel (``pip install clarabel``), and the
optimality of the returned solution is certified by an explicit Lagrangian dual bound
(``info["gap"]``, see :func:`gesl_dual_bound`). Entries of C that occur in no selected pair are
0 at the optimum (they only add ``lam C[a,b]^2``) and are fixed to 0 without entering the solver.
Without the non-negativity constraint (``nonnegative=False``) the learned "costs" can be
negative, in which case the exact edit distance under them is not a meaningful distance; the
pseudo distance is still defined.
"""
from __future__ import annotations

import math
import time
from typing import Sequence

import numpy as np
from scipy import sparse

from ..costs import MatrixCost, UnitCost
from ..labels import alphabet_of, labels_of
from ..learning.estimator import Estimator, encode_class_labels
from ..ops import PairBatch, pairwise_distances

__all__ = ["solve_gesl_qp", "gesl_objective", "gesl_dual_bound", "select_pairs",
           "PairFrequencies", "GESL", "MatrixCost", "node_labels", "frequency_rows"]

LOG2 = math.log(2.0)


# --------------------------------------------------------------------------- the QP
def gesl_objective(c, eta, F_pos, F_neg, lam):
    """GESL loss for a flattened cost matrix ``c`` (``F_pos @ c`` = positive pair distances)."""
    c = np.asarray(c, dtype=np.float64)
    dp = F_pos @ c
    dn = F_neg @ c
    return (lam * float(c @ c) + float(np.maximum(dp - eta, 0.0).sum())
            + float(np.maximum(LOG2 + eta - dn, 0.0).sum()))


def gesl_dual_bound(a_pos, a_neg, F_pos, F_neg, lam, nonnegative=True):
    """Lagrange dual function of the GESL QP at multipliers ``a_pos``, ``a_neg`` in [0, 1].

    With ``v = F_neg^T a_neg - F_pos^T a_pos``:
    ``g = -||v_+||^2 / (4 lam) + log2 * sum(a_neg) + log2 * min(0, sum(a_neg) - sum(a_pos))``
    (``v`` instead of ``v_+`` without the constraint C >= 0). Multipliers are clipped to [0, 1],
    so the value is always a valid lower bound on the optimum (weak duality).
    """
    a_pos = np.clip(np.asarray(a_pos, dtype=np.float64), 0.0, 1.0)
    a_neg = np.clip(np.asarray(a_neg, dtype=np.float64), 0.0, 1.0)
    v = F_neg.T @ a_neg - F_pos.T @ a_pos
    if nonnegative:
        v = np.maximum(v, 0.0)
    s_neg, s_pos = a_neg.sum(), a_pos.sum()
    return float(-(v @ v) / (4.0 * lam) + LOG2 * s_neg + LOG2 * min(0.0, s_neg - s_pos))


def solve_gesl_qp(F_pos, F_neg, lam: float, *, nonnegative: bool = True,
                  tol: float = 1e-12, max_iter: int = 500, verbose: bool = False):
    """Solve the GESL QP over flattened cost vectors.

    ``F_pos`` ``(P, D)`` and ``F_neg`` ``(Q, D)`` (dense or scipy sparse) give the pseudo
    distances of the positive and negative pairs as ``F @ c``. Returns ``(c, eta, info)`` with
    ``info`` holding the primal objective, the dual bound, the (absolute) duality ``gap`` and the
    solver status. Whatever the solver's status, the solution is accepted iff the certified gap is
    at most ``1e-6 * max(1, |objective|)``, else RuntimeError. (The objective is optimal to about
    ``tol``; as ``lam ||C||^2`` is strongly convex, ``||C - C*||^2 <= gap / lam``.)
    """
    try:
        import clarabel
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("GESL needs the QP solver Clarabel: pip install clarabel "
                          "(or pip install 'bedl_torch[experiments]')") from exc
    lam = float(lam)
    if not lam > 0:
        raise ValueError(f"lam must be > 0, got {lam}")
    F_pos = sparse.csr_matrix(F_pos, dtype=np.float64)
    F_neg = sparse.csr_matrix(F_neg, dtype=np.float64)
    if F_pos.shape[1] != F_neg.shape[1]:
        raise ValueError("F_pos and F_neg must have the same number of columns")
    D = F_pos.shape[1]
    P, Q = F_pos.shape[0], F_neg.shape[0]
    # only entries that occur in some pair enter the solver; the others are 0 at the optimum
    used = np.zeros(D, dtype=bool)
    used[np.unique(np.concatenate([F_pos.indices, F_neg.indices]))] = True
    active = np.flatnonzero(used)
    Fp, Fn = F_pos[:, active], F_neg[:, active]
    n = len(active)
    nv = n + 1 + P + Q  # [c, eta, xi_pos, xi_neg]
    # objective 1/2 z^T H z + q^T z, with H = 2 lam on the c block
    H = sparse.diags(np.concatenate([np.full(n, 2.0 * lam), np.zeros(1 + P + Q)]), format="csc")
    q = np.concatenate([np.zeros(n + 1), np.ones(P + Q)])
    # constraints A z + s = b, s >= 0
    I_P, I_Q = sparse.identity(P, format="csr"), sparse.identity(Q, format="csr")
    blocks = [
        # F_p c - eta - xi_p <= 0
        sparse.hstack([Fp, -np.ones((P, 1)), -I_P, sparse.csr_matrix((P, Q))]),
        # -F_n c + eta - xi_n <= -log 2
        sparse.hstack([-Fn, np.ones((Q, 1)), sparse.csr_matrix((Q, P)), -I_Q]),
        # -xi <= 0
        sparse.hstack([sparse.csr_matrix((P + Q, n + 1)), -sparse.identity(P + Q)]),
        # -eta <= 0, eta <= log 2
        sparse.csr_matrix(([-1.0, 1.0], ([0, 1], [n, n])), shape=(2, nv)),
    ]
    b = [np.zeros(P), np.full(Q, -LOG2), np.zeros(P + Q), np.array([0.0, LOG2])]
    if nonnegative and n:
        blocks.append(sparse.hstack([-sparse.identity(n), sparse.csr_matrix((n, 1 + P + Q))]))
        b.append(np.zeros(n))
    A = sparse.vstack(blocks, format="csc")
    b = np.concatenate(b)
    settings = clarabel.DefaultSettings()
    settings.verbose = verbose
    settings.max_iter = max_iter
    settings.tol_gap_abs = tol
    settings.tol_gap_rel = tol
    settings.tol_feas = tol
    solver = clarabel.DefaultSolver(sparse.triu(H, format="csc"), q, A, b,
                                    [clarabel.NonnegativeConeT(A.shape[0])], settings)
    sol = solver.solve()
    status = str(sol.status)
    z = np.asarray(sol.x, dtype=np.float64)
    c = np.zeros(D)
    c[active] = z[:n]
    if nonnegative:
        c = np.maximum(c, 0.0)
    eta = float(np.clip(z[n], 0.0, LOG2))
    # the multipliers of the two hinge blocks make the dual certificate
    y = np.asarray(sol.z, dtype=np.float64)
    primal = gesl_objective(c, eta, F_pos, F_neg, lam)
    dual = gesl_dual_bound(y[:P], y[P:P + Q], F_pos, F_neg, lam, nonnegative)
    gap = primal - dual
    info = {"objective": primal, "dual_bound": dual, "gap": gap, "status": status,
            "iterations": int(sol.iterations), "n_active_entries": n, "n_pos": P, "n_neg": Q}
    if not np.isfinite(gap) or gap > 1e-6 * max(1.0, abs(primal)):
        raise RuntimeError(f"GESL QP: certified duality gap {gap:.3g} too large ({info})")
    return c, eta, info


# --------------------------------------------------------------------------- pairs
def select_pairs(D0, y, n_neighbors: int):
    """Bellet et al.'s pairs: each point with its ``K`` nearest same-class points (itself
    excluded) and its ``K`` farthest points of other classes under ``D0``.

    Ties keep the index order (stable sort). Returns two ``(n_pairs, 2)`` int arrays of (i, j)
    index pairs (positive, negative); a class with fewer than ``K + 1`` members contributes all
    its other members.
    """
    D0 = np.asarray(D0, dtype=np.float64)
    _, y = encode_class_labels(y)  # (class indices: ValueError for NaN labels or a 2-D y)
    if D0.ndim != 2 or D0.shape != (len(y), len(y)):
        raise ValueError(f"y must hold one label per point: {len(y)} labels for distances of shape {D0.shape}")
    K = int(n_neighbors)
    if K < 1:
        raise ValueError(f"n_neighbors must be >= 1, got {n_neighbors}")
    pos, neg = [], []
    idx = np.arange(len(y))
    for i in range(len(y)):
        same = idx[(y == y[i]) & (idx != i)]
        other = idx[y != y[i]]
        if len(same):
            near = same[np.argsort(D0[i, same], kind="stable")[:K]]
            pos.extend((i, j) for j in near)
        if len(other):
            far = other[np.argsort(-D0[i, other], kind="stable")[:K]]
            neg.extend((i, j) for j in far)
    as_arr = lambda p: np.array(p, dtype=np.int64).reshape(-1, 2)  # noqa: E731
    return as_arr(pos), as_arr(neg)


def node_labels(obj) -> list:
    """Node labels of a tree (``.labels``, preorder) or the elements of a sequence, as a list."""
    return list(labels_of(obj))


def frequency_rows(xs: Sequence, ys: Sequence, reference_cost, *,
                   max_elements: int = 1 << 23, progress=None):
    """Symbol-pair frequencies of the pairs ``(xs[k], ys[k])`` under ``reference_cost``.

    Returns ``(F, d)``: ``F`` a scipy CSR matrix ``(B, S * S)`` with ``S = len(alphabet) + 1``
    (row k = the flattened ``(S, S)`` frequency matrix of pair k, gap = index ``S - 1``) and
    ``d`` the ``B`` reference distances. Uses the core's ``PairBatch(...).coopt`` on chunks of
    pairs whose padded co-optimal matrices hold at most ``max_elements`` numbers.
    ``progress(done, total)`` is called after each chunk.
    """
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} left but {len(ys)} right objects")
    S = reference_cost.gap_index + 1
    gap = reference_cost.gap_index
    n = len(xs)
    if n == 0:
        return sparse.csr_matrix((0, S * S)), np.zeros(0)
    # encode every distinct object once
    codes = {}

    def code(obj):
        key = id(obj)
        if key not in codes:
            codes[key] = (obj, np.append(reference_cost.encode(node_labels(obj)).numpy(), gap))
        return codes[key][1]

    cx_all = [code(o) for o in xs]
    cy_all = [code(o) for o in ys]
    size = max(len(c) for c in cx_all) * max(len(c) for c in cy_all)
    chunk = max(1, int(max_elements) // size)
    rows, cols, vals, dists = [], [], [], []
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        d, P = PairBatch(list(xs[start:stop]), list(ys[start:stop])).coopt(reference_cost)
        P = P.detach().cpu().double().numpy()
        dists.append(d.detach().cpu().double().numpy().reshape(-1))
        B = stop - start
        # per pair: symbol codes of the rows / columns of its block (gap last), -1 = padding
        cx = np.full((B, P.shape[1]), -1, dtype=np.int64)
        cy = np.full((B, P.shape[2]), -1, dtype=np.int64)
        for k in range(B):
            ex, ey = cx_all[start + k], cy_all[start + k]
            cx[k, :len(ex)] = ex
            cy[k, :len(ey)] = ey
        ks, ii, jj = np.nonzero(P)
        a, b = cx[ks, ii], cy[ks, jj]
        if np.any(a < 0) or np.any(b < 0):
            raise RuntimeError("co-optimal matrix has mass outside a pair's block (core bug?)")
        rows.append(ks + start)
        cols.append(a * S + b)
        vals.append(P[ks, ii, jj])
        if progress is not None:
            progress(stop, n)
    F = sparse.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(n, S * S)).tocsr()
    F.sum_duplicates()
    return F, np.concatenate(dists)


class PairFrequencies:
    """Reference-cost frequency rows of all pairs of a data set, computed once and reused.

    With a symmetric reference cost (the default unit cost) only the pairs ``i <= j`` are
    computed: the co-optimal scripts of ``(y, x)`` are those of ``(x, y)`` reversed, so
    ``F(y, x) = F(x, y)^T`` (as symbol-pair matrices). Pass ``symmetric=False`` for an asymmetric
    reference cost (then all ordered pairs are computed).

    ``rows(I, J)``: CSR frequency rows of the ordered pairs ``(X[I[k]], X[J[k]])``;
    ``pseudo_matrix(I, J, C)``: the ``(len(I), len(J))`` pseudo edit distances under the cost
    matrix ``C``; ``reference_matrix(I, J)``: the reference (e.g. unit cost) edit distances.
    """

    def __init__(self, X: Sequence, alphabet: Sequence | None = None, reference_cost=None,
                 *, symmetric: bool | None = None, progress=None):
        self.X = list(X)
        self.alphabet = list(alphabet) if alphabet is not None else alphabet_of(self.X)
        if reference_cost is None:
            reference_cost = UnitCost(self.alphabet)
            symmetric = True if symmetric is None else symmetric
        self.reference_cost = reference_cost
        self.symmetric = bool(symmetric) if symmetric is not None else False
        self.S = reference_cost.gap_index + 1
        N = len(self.X)
        if self.symmetric:
            I, J = np.triu_indices(N)
        else:
            I, J = np.divmod(np.arange(N * N), N)
        self.F, self._d = frequency_rows([self.X[i] for i in I], [self.X[j] for j in J],
                                         reference_cost, progress=progress)
        self._transpose = np.arange(self.S ** 2).reshape(self.S, self.S).T.ravel()

    def __len__(self):
        return len(self.X)

    def _row_index(self, I, J):
        I, J = np.asarray(I, dtype=np.int64), np.asarray(J, dtype=np.int64)
        N = len(self.X)
        if self.symmetric:
            lo, hi = np.minimum(I, J), np.maximum(I, J)
            return lo * N - lo * (lo - 1) // 2 + (hi - lo), I > J
        return I * N + J, np.zeros(len(I), dtype=bool)

    def rows(self, I, J):
        """CSR frequency rows ``(len(I), S * S)`` of the ordered pairs ``(X[I[k]], X[J[k]])``."""
        idx, flip = self._row_index(np.ravel(I), np.ravel(J))
        sub = self.F[idx]
        if flip.any():
            sub = sub.copy()
            nnz_row = np.repeat(np.arange(sub.shape[0]), np.diff(sub.indptr))
            f = flip[nnz_row]
            sub.indices[f] = self._transpose[sub.indices[f]]
            sub.has_sorted_indices = False
        return sub

    def reference_matrix(self, I, J=None):
        """Reference-cost edit distances ``(len(I), len(J))`` (numpy; ``J=None``: ``I``)."""
        I = np.asarray(I, dtype=np.int64)
        J = I if J is None else np.asarray(J, dtype=np.int64)
        idx, _ = self._row_index(np.repeat(I, len(J)), np.tile(J, len(I)))
        return self._d[idx].reshape(len(I), len(J))

    def pseudo_matrix(self, I, J, C):
        """Pseudo edit distances ``(len(I), len(J))`` (numpy) under the ``(S, S)`` cost
        matrix ``C``.

        Raises:
            ValueError: ``C`` without ``S * S`` entries.
        """
        I = np.asarray(I, dtype=np.int64)
        J = np.asarray(J, dtype=np.int64)
        c = np.asarray(C, dtype=np.float64).reshape(-1)
        if c.shape[0] != self.S ** 2:
            raise ValueError(f"cost matrix must have {self.S}x{self.S} entries")
        F = self.rows(np.repeat(I, len(J)), np.tile(J, len(I)))
        return (F @ c).reshape(len(I), len(J))


# --------------------------------------------------------------------------- the estimator
class GESL(Estimator):
    """GESL cost learning (see the module docstring).

    Parameters: ``n_neighbors`` (K: positive / negative pairs per training point), ``lam``
    (weight of ``||C||^2``), ``nonnegative`` (constrain C >= 0, Bellet et al.'s choice; default
    True), ``reference_cost`` (``None``: unit costs over the alphabet).

    ``fit(X, y)`` learns from a list of trees or sequences; ``fit_frequencies(freq, index, y)``
    from a precomputed :class:`PairFrequencies` (training points ``freq.X[index]``), which is
    what the cross-validation protocol uses; ``fit_pairs(pos, neg)`` from explicit lists of
    positive / negative ``(x, y)`` pairs. Fitted attributes: ``alphabet_``, ``C_`` (numpy
    ``(S, S)``, gap last), ``eta_``, ``info_`` (QP objective, certified duality gap, ...),
    ``cost_`` (a :class:`MatrixCost` for the core: ``pairwise_distances(X, Y, gesl.cost_,
    mode="pseudo", reference_cost=UnitCost(alphabet))`` is GESL's pseudo edit distance, with
    ``mode="exact"`` the edit distance under the learned costs).

    Every fit raises ValueError for ``n_neighbors < 1`` or ``lam <= 0`` and RuntimeError when
    the QP's certified duality gap is too large (see :func:`solve_gesl_qp`).
    """

    def __init__(self, n_neighbors: int = 1, lam: float = 1.0, nonnegative: bool = True,
                 reference_cost=None):
        self.n_neighbors = n_neighbors
        self.lam = lam
        self.nonnegative = nonnegative
        self.reference_cost = reference_cost

    def _validate_params(self) -> None:
        if int(self.n_neighbors) < 1:
            raise ValueError(f"n_neighbors must be >= 1, got {self.n_neighbors}")
        if not float(self.lam) > 0:
            raise ValueError(f"lam must be > 0, got {self.lam}")

    def _finish(self, F_pos, F_neg, alphabet, S):
        """Solve the QP on the pairs' frequency rows and set the fitted attributes."""
        t = time.perf_counter()
        c, eta, info = solve_gesl_qp(F_pos, F_neg, self.lam, nonnegative=self.nonnegative)
        info["qp_seconds"] = time.perf_counter() - t
        self.alphabet_ = list(alphabet)
        self.C_ = c.reshape(S, S)
        self.eta_ = eta
        self.info_ = info
        self.cost_ = MatrixCost(self.alphabet_, self.C_)
        return self

    def fit_frequencies(self, freq: PairFrequencies, index, y):
        """Learn from the training points ``freq.X[index]`` with labels ``y``, their pairs'
        frequency rows taken from ``freq`` (computed once per data set)."""
        self._validate_params()
        index = np.asarray(index, dtype=np.int64)
        D0 = freq.reference_matrix(index)
        pos, neg = select_pairs(D0, y, self.n_neighbors)
        self.pairs_ = (index[pos], index[neg])
        F_pos = freq.rows(index[pos[:, 0]], index[pos[:, 1]])
        F_neg = freq.rows(index[neg[:, 0]], index[neg[:, 1]])
        return self._finish(F_pos, F_neg, freq.alphabet, freq.S)

    def fit(self, X, y, alphabet: Sequence | None = None):
        """Learn from trees or sequences ``X`` with labels ``y``; ``alphabet`` default: the
        labels of ``X`` in order of first appearance."""
        self._validate_params()
        freq = PairFrequencies(X, alphabet, self.reference_cost)
        return self.fit_frequencies(freq, np.arange(len(freq)), y)

    def fit_pairs(self, pos: Sequence, neg: Sequence, alphabet: Sequence | None = None):
        """Learn from explicit positive and negative pairs (lists of ``(x, y)`` tuples)."""
        self._validate_params()
        objs = [o for pair in list(pos) + list(neg) for o in pair]
        alphabet = list(alphabet) if alphabet is not None else alphabet_of(objs)
        ref = self.reference_cost if self.reference_cost is not None else UnitCost(alphabet)
        F_pos, _ = frequency_rows([p[0] for p in pos], [p[1] for p in pos], ref)
        F_neg, _ = frequency_rows([p[0] for p in neg], [p[1] for p in neg], ref)
        return self._finish(F_pos, F_neg, alphabet, ref.gap_index + 1)

    def pseudo_distances(self, X, Y=None):
        """GESL's pseudo edit distances under the learned costs (scripts from the reference)."""
        ref = self.reference_cost if self.reference_cost is not None else UnitCost(self.alphabet_)
        return pairwise_distances(X, Y, self.cost_, mode="pseudo", reference_cost=ref)
