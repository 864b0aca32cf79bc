"""Prototype candidates: median GLVQ restricted to a few candidates per class (chosen by
k-medoids++ seeding), so that BEDL needs m x C distances per round instead of m x m.

References: the square algorithm where every point is a candidate (bit-identical results), an
independent slow median GLVQ over candidates written here, the seeding rule on constructed
distances, and a count of the distance pairs a fit computes."""
import numpy as np
import pytest
import torch

import bedl_torch as bt
from bedl_torch.datasets import make_strings
from bedl_torch.ops.pairwise import PairwisePlan
from bedl_torch.learning.mglvq import (MedianGLVQ, init_prototypes, kmedoids_pp_candidates,
                                       median_glvq_em)


def _points(m, seed, dim=2):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, m)
    y[:3] = [0, 1, 2]
    Z = rng.normal(size=(m, dim)) + y[:, None] * 0.8
    D = np.sqrt(((Z[:, None, :] - Z[None, :, :]) ** 2).sum(-1))
    return D, y


def _slow_em(D, y, candidates, protos, max_iter):
    """Median GLVQ's EM written out move by move over candidate training points: the single
    move of a prototype to another candidate of its class that raises L most at fixed gammas."""
    protos = list(protos)

    def closest(ps):
        dp = np.array([min(D[i, p] for p in ps if y[p] == y[i]) for i in range(len(y))])
        dm = np.array([min(D[i, p] for p in ps if y[p] != y[i]) for i in range(len(y))])
        return dp, dm

    for _ in range(max_iter):
        dp, dm = closest(protos)
        s = dp + dm
        r = np.where(s > 0, dp / np.where(s > 0, s, 1), 0.5)
        gp, gm = 2 - r, 2 + dm / np.where(s > 0, s, 1) * (s > 0)
        gam_p = gp / (gp + gm)
        best = (0.0, None)
        for k, p in enumerate(protos):
            def L(q):
                trial = protos[:k] + [q] + protos[k + 1:]
                a, b = closest(trial)
                t = a + b
                rr = np.where(t > 0, a / np.where(t > 0, t, 1), 0.5)
                g1, g2 = 2 - rr, 2 + b / np.where(t > 0, t, 1) * (t > 0)
                return float((gam_p * np.log(g1) + (1 - gam_p) * np.log(g2)).sum())
            now = L(p)
            for q in candidates:
                if y[q] == y[p] and q not in protos:
                    gain = L(q) - now
                    if gain > 1e-12 * max(1.0, abs(now)) and gain > best[0]:
                        best = (gain, (k, q))
        if best[1] is None:
            break
        k, q = best[1]
        protos[k] = q
    return protos


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_point_a_candidate_is_the_square_algorithm(seed):
    D, y = _points(30, seed)
    everyone = np.arange(30)
    for K in (1, 2):
        start = init_prototypes(D, y, K)
        assert np.array_equal(init_prototypes(D, y, K, everyone), start)
        a = median_glvq_em(D, y, start, 50)
        b = median_glvq_em(D, y, start, 50, candidates=everyone)
        assert np.array_equal(a[0], b[0]) and a[1:] == b[1:]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_em_over_candidates_equals_the_slow_reference(seed):
    D, y = _points(24, seed)
    rng = np.random.default_rng(100 + seed)
    cand = np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), 4, replace=False)
                                   for c in range(3)]))
    Dc = D[:, cand]
    start = init_prototypes(Dc, y, 2, cand)
    assert set(start.tolist()) <= set(cand.tolist())
    protos, n_iter, _ = median_glvq_em(Dc, y, start, 40, candidates=cand)
    assert protos.tolist() == _slow_em(D, y, cand, start.tolist(), 40)


def test_seeding_takes_far_points_and_avoids_duplicates():
    # one class on a line: three copies of 0 and one point at 10 (distance |a - b|); after any
    # first choice the second has weight only on the other kind (duplicates weigh 0)
    pos = np.array([0.0, 0.0, 0.0, 10.0, 5.0, 5.0])
    y = np.array([0, 0, 0, 0, 1, 1])
    D = np.abs(pos[:, None] - pos[None, :])
    calls = []

    def column(js):
        calls.append(list(js))
        return D[:, js]

    for seed in range(20):
        cand, Dc = kmedoids_pp_candidates(y, 2, column, seed)
        first_class = [int(j) for j in cand if y[j] == 0]
        assert 3 in first_class and len(first_class) == 2
        assert [int(j) for j in cand if y[j] == 1] == [4, 5]  # a class of <= M points: all
        assert np.array_equal(Dc, D[:, cand])
    a = kmedoids_pp_candidates(y, 2, column, 7)
    b = kmedoids_pp_candidates(y, 2, column, 7)
    assert np.array_equal(a[0], b[0])
    with pytest.raises(ValueError, match="n_candidates"):
        kmedoids_pp_candidates(y, 0, column)


def test_median_glvq_estimator_with_candidates():
    D, y = _points(40, 5)
    full = MedianGLVQ(n_prototypes=2).fit(D, y)
    same = MedianGLVQ(n_prototypes=2, prototype_candidates=40).fit(D, y)
    assert np.array_equal(full.prototypes_, same.prototypes_)
    few = MedianGLVQ(n_prototypes=2, prototype_candidates=5, random_state=3).fit(D, y)
    assert len(few.candidates_) == 15
    assert set(few.prototypes_.tolist()) <= set(few.candidates_.tolist())
    # the caller's candidates and only their columns
    again = MedianGLVQ(n_prototypes=2).fit(D[:, few.candidates_], y, candidates=few.candidates_)
    assert np.array_equal(again.prototypes_, few.prototypes_)
    assert np.array_equal(again.predict(D), few.predict(D))
    with pytest.raises(ValueError, match="at least n_prototypes"):
        MedianGLVQ(n_prototypes=3, prototype_candidates=2).fit(D, y)
    with pytest.raises(ValueError, match="columns"):
        MedianGLVQ().fit(D[:, :5], y, candidates=[0, 1, 2])
    with pytest.raises(ValueError, match="sorted and distinct"):
        MedianGLVQ().fit(D[:, :3], y, candidates=[2, 1, 0])


def test_bedl_with_candidates_computes_m_by_c_distances(monkeypatch):
    X, y = make_strings(60, seed=11)
    kw = dict(n_prototypes=2, max_rounds=2, max_eval=20)
    plain = bt.BEDL(**kw).fit(X, y)
    everyone = bt.BEDL(prototype_candidates=60, **kw).fit(X, y)
    assert np.array_equal(plain.prototype_indices_, everyone.prototype_indices_)
    assert torch.equal(plain.cost_.embedding, everyone.cost_.embedding)

    computed = []
    original = PairwisePlan.values

    def counting(plan, ii, jj):
        computed.append(len(ii))
        return original(plan, ii, jj)

    monkeypatch.setattr(PairwisePlan, "values", counting)
    model = bt.BEDL(prototype_candidates=4, random_state=1, **kw).fit(X, y)
    C = len(model.candidates_)
    assert C == 8
    assert set(model.prototype_indices_.tolist()) <= set(model.candidates_.tolist())
    # seeding: one column of m pairs per candidate; then m x C per later round
    assert computed[:C] == [60] * C
    assert all(n == 60 * C for n in computed[C:])
    assert len(computed[C:]) == model.n_rounds_  # the first round reuses the seeding columns


class _ThreadSplit:
    """Stands in for the ranks of a group: threads exchange their vectors at a barrier."""

    def __init__(self, rank, size, board, barrier):
        self.rank, self.size, self.board, self.barrier = rank, size, board, barrier

    def gather(self, vector):
        self.board[self.rank] = np.array(vector, dtype=np.float64)
        self.barrier.wait()
        rows = np.stack([self.board[r] for r in range(self.size)])
        self.barrier.wait()  # nobody overwrites the board before everyone has read it
        return rows


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_em_with_a_shared_m_step_takes_the_single_process_moves(size, seed):
    import threading

    D, y = _points(36, 10 + seed)
    start = init_prototypes(D, y, 2)
    alone = median_glvq_em(D, y, start, 60)
    board, barrier, results = {}, threading.Barrier(size), {}

    def run(rank):
        results[rank] = median_glvq_em(D, y, start, 60,
                                       split=_ThreadSplit(rank, size, board, barrier))

    threads = [threading.Thread(target=run, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert alone[1] > 0  # the EM moved prototypes, so the shared moves were compared
    for r in range(size):
        assert np.array_equal(results[r][0], alone[0]) and results[r][1:] == alone[1:]
