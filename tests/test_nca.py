"""BEDL(loss="nca"): the soft nearest-neighbour objective over learned edit distances.

(a) the loss's closed form against autograd, and every evaluator's value and gradient against
a reference built on the public API (``pairwise_distances`` + ``nca_loss`` + the regularisers)
and its finite differences, at generic embeddings (no ties: the exact distance is
differentiable there); (b) a constructed data set with a two-cluster class, which one
prototype per class cannot separate under any costs and the neighbour objective separates
with a margin; (c) bad parameters; (d) state dicts, parameters and prediction.
"""
import numpy as np
import pytest
import torch

import bedl_torch as bt
from bedl_torch.costs import EuclideanCost, UnitCost
from bedl_torch.learning import BEDL
from bedl_torch.learning.losses import (frobenius_regularizer, logdet_regularizer, nca_loss,
                                        nca_loss_and_grad_numpy)
from bedl_torch.learning.nca import (NCALossTerms, NCAObjective, NCAReferences,
                                     NumpyEuclideanNCAObjective, knn_vote, nca_scale,
                                     SparsePseudoNCAObjective)
from bedl_torch.learning.training import ObjectiveFactory, make_fit_data
from bedl_torch.ops import limits
from bedl_torch.learning.ranks import Ranks
from bedl_torch.tree import Tree

F64 = torch.float64

STRINGS = ["ab", "abca", "ca", "bcc", "acb", "cab", "bb", "acbb", "cc", "ba", "cba"]
TREES = [Tree.from_bracket(s) for s in
         ["{a{b}{c}}", "{a{b{c}}{a}}", "{c{a}}", "{b{c}{c}}", "{a{c}}", "{c{a}{b}}",
          "{b{b}}", "{a{c}{b{b}}}", "{c{c}}", "{b{a}}", "{c{b{a}}}"]]
LABELS = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2])
OBJECTS = {"sequence": STRINGS, "tree": TREES}


def _embedding(seed, dim=3):
    return torch.as_tensor(np.random.default_rng(seed).normal(size=(3, dim)), dtype=F64)


# ---------------------------------------------------------------------------
# (a) the loss and the evaluators
# ---------------------------------------------------------------------------


def test_closed_form_loss_matches_autograd():
    rng = np.random.default_rng(0)
    m, n = 7, 9
    D = rng.uniform(0, 5, size=(m, n))
    refs = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8])
    y = rng.integers(0, 3, m)
    y_ref = rng.integers(0, 3, n)
    y[6] = 9  # a point without a reference of its class: left out of the loss
    valid = refs[None, :] != np.arange(m)[:, None]
    same = (y[:, None] == y_ref[None, :]) & valid
    for scale in (0.7, 3.0):
        loss, G = nca_loss_and_grad_numpy(D, same, valid, scale)
        Dt = torch.tensor(D, requires_grad=True)
        ref = nca_loss(Dt, torch.as_tensor(same), torch.as_tensor(valid), scale)
        ref.backward()
        assert loss == pytest.approx(float(ref.detach()), rel=1e-12)
        assert np.allclose(G, Dt.grad.numpy(), rtol=1e-10, atol=1e-13)
        assert np.all(G[~valid] == 0) and np.all(G[6] == 0)
    # by hand: one row, references at 1 (same class) and 2 (other), scale 1
    loss, G = nca_loss_and_grad_numpy(np.array([[1.0, 2.0]]), np.array([[True, False]]),
                                      np.array([[True, True]]), 1.0)
    p = np.exp(-1) / (np.exp(-1) + np.exp(-2))
    assert loss == pytest.approx(-np.log(p))
    assert np.allclose(G, [[1 - p, -(1 - p)]])


def test_loss_is_stable_for_large_distances():
    D = np.array([[1e4, 2e4, 3e4], [5e5, 1e3, 7e5]])
    same = np.array([[False, True, False], [True, False, False]])
    valid = np.ones_like(same)
    loss, G = nca_loss_and_grad_numpy(D, same, valid, 1e-2)
    assert np.isfinite(loss) and np.all(np.isfinite(G))
    assert loss == pytest.approx((2e4 - 1e4) / 1e-2 + (5e5 - 1e3) / 1e-2, rel=1e-12)


def _reference_loss(X, refs_idx, y, emb, scale, beta, mode="exact", align=None):
    """The objective through the public ops, as autograd sees it."""
    cost = EuclideanCost(list("abc"), embedding=emb)
    kw = {} if mode == "exact" else {"mode": "pseudo", "reference_cost": align}
    D = bt.pairwise_distances(X, [X[j] for j in refs_idx], cost, **kw)
    refs = NCAReferences(y, refs_idx, True)
    loss = nca_loss(D, torch.as_tensor(refs.same), torch.as_tensor(refs.valid), scale)
    A = cost.embedding
    return loss + logdet_regularizer(A, beta) + frobenius_regularizer(A, beta), cost


def _objective(kind, X, refs_idx, emb, scale, beta, mode, numpy_path, align_emb=None):
    cost = EuclideanCost(list("abc"), embedding=emb)
    y = LABELS
    loss = NCALossTerms("both", beta, scale)
    align = None if align_emb is None else EuclideanCost(list("abc"), embedding=align_emb)
    data = make_fit_data(X, y, np.unique(y), cost, "error", align, loss)
    data.nca_refs = NCAReferences(y, refs_idx, True)
    factory = ObjectiveFactory(mode, None, Ranks())
    if not numpy_path:
        factory.numpy_path_ok = staticmethod(lambda c, p: False)
    obj = factory.build(cost, [cost.embedding], data, refs_idx)
    expected = (NumpyEuclideanNCAObjective if numpy_path
                else SparsePseudoNCAObjective if mode == "pseudo" else NCAObjective)
    assert type(obj) is expected
    return obj


@pytest.mark.parametrize("numpy_path", [True, False], ids=["numpy", "autograd"])
@pytest.mark.parametrize("refs_idx", [list(range(11)), [1, 4, 6, 9]], ids=["all", "candidates"])
@pytest.mark.parametrize("kind", ["sequence", "tree"])
def test_exact_objective_value_and_gradient(kind, refs_idx, numpy_path):
    X = OBJECTS[kind]
    refs_idx = np.array(refs_idx)
    emb = _embedding(1)
    scale, beta = 0.8, 0.1
    obj = _objective(kind, X, refs_idx, emb, scale, beta, "exact", numpy_path)
    x0 = obj.get_flat()
    value, grad = obj.flat_value_and_grad(x0)
    ref, cost = _reference_loss(X, refs_idx, LABELS, emb, scale, beta)
    (g_ref,) = torch.autograd.grad(ref, cost.embedding)
    assert value == pytest.approx(float(ref.detach()), rel=1e-12)
    assert np.allclose(grad, g_ref.numpy().reshape(-1), rtol=1e-9, atol=1e-12)
    # central finite differences of the reference objective (piecewise smooth in the
    # embedding; a generic embedding sits inside one piece)
    eps = 1e-6
    fd = np.zeros_like(x0)
    for k in range(len(x0)):
        e = torch.zeros(len(x0), dtype=F64)
        e[k] = eps
        with torch.no_grad():
            plus = _reference_loss(X, refs_idx, LABELS, emb + e.view_as(emb), scale, beta)[0]
            minus = _reference_loss(X, refs_idx, LABELS, emb - e.view_as(emb), scale, beta)[0]
        fd[k] = (float(plus) - float(minus)) / (2 * eps)
    assert np.allclose(grad, fd, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("chunk_cells", [None, 64], ids=["one-chunk", "chunks"])
@pytest.mark.parametrize("numpy_path", [True, False], ids=["numpy", "sparse"])
@pytest.mark.parametrize("kind", ["sequence", "tree"])
def test_pseudo_objective_freezes_the_alignments(kind, numpy_path, chunk_cells, monkeypatch):
    """Pseudo mode: the distances of the alignments under the alignment costs, linear in the
    costs; equal to the exact objective at those costs. The sparse path freezes the pairs'
    ``P0`` chunk by chunk (64 padded cells: a chunk or a few pairs each)."""
    if chunk_cells is not None:
        monkeypatch.setattr(limits, "CHUNK_CELLS", chunk_cells)
    X = OBJECTS[kind]
    refs_idx = np.arange(11)
    align_emb, emb = _embedding(2), _embedding(3)
    align = EuclideanCost(list("abc"), embedding=align_emb)
    scale, beta = 1.3, 0.05
    obj = _objective(kind, X, refs_idx, emb, scale, beta, "pseudo", numpy_path, align_emb)
    value, grad = obj.flat_value_and_grad(obj.get_flat())
    ref, cost = _reference_loss(X, refs_idx, LABELS, emb, scale, beta, "pseudo", align)
    (g_ref,) = torch.autograd.grad(ref, cost.embedding)
    assert value == pytest.approx(float(ref.detach()), rel=1e-10)
    assert np.allclose(grad, g_ref.numpy().reshape(-1), rtol=1e-8, atol=1e-11)
    at_align = _objective(kind, X, refs_idx, align_emb, scale, beta, "pseudo", numpy_path,
                          align_emb)
    exact = _reference_loss(X, refs_idx, LABELS, align_emb, scale, beta)[0]
    assert float(at_align.value()) == pytest.approx(float(exact.detach()), rel=1e-10)


def test_references_pairs_and_scale():
    y = np.array([0, 0, 1, 1, 1])
    refs = NCAReferences(y, np.array([1, 2, 4]), symmetric=True)
    assert refs.valid.tolist() == [[True] * 3, [False, True, True], [True, False, True],
                                   [True] * 3, [True, True, False]]
    # distinct unordered pairs: (0,1) (0,2) (0,4) (1,2) (1,4) (2,4) (1,3) (2,3) (3,4)
    assert sorted(zip(refs.pair_x.tolist(), refs.pair_y.tolist())) == [
        (0, 1), (0, 2), (0, 4), (1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 4)]
    D = np.arange(15, dtype=float).reshape(5, 3)
    # nearest valid reference per row: 0, 4, 6, 9, 12 -> median 6
    assert nca_scale(D, refs, 0.5) == 3.0
    assert nca_scale(np.zeros((5, 3)), refs, 2.0) == 2.0  # all 0: scale 1 times the factor
    one_sided = NCAReferences(y, np.array([1, 2, 4]), symmetric=False)
    assert len(one_sided) == 12


def test_knn_vote_ties_go_to_the_nearest():
    D = np.array([[1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 1.0, 2.0]])
    labels = np.array([0, 1, 1, 0])
    assert knn_vote(D, labels, 1, 2).tolist() == [0, 1]
    assert knn_vote(D, labels, 2, 2).tolist() == [0, 1]  # 1:1 votes: the nearest wins
    assert knn_vote(D, labels, 3, 2).tolist() == [1, 1]
    assert knn_vote(D, labels, 99, 2).tolist() == [0, 1]


# ---------------------------------------------------------------------------
# (b) two clusters in one class, the other class between them
# ---------------------------------------------------------------------------

#: class 0 is two clusters (cores "aaaa" and "cccc"), class 1 lies between them ("aacc"); six
#: noise symbols (m, n) inserted at random places hide the cores under unit costs
CORES = ("aaaa", "cccc", "aacc")


def _clusters(n, seed):
    rng = np.random.default_rng(seed)
    X, y, cluster = [], [], []
    for c, core in enumerate(CORES):
        for _ in range(2 * n if c == 2 else n):
            s = list(core)
            for _ in range(6):
                s.insert(int(rng.integers(0, len(s) + 1)), str(rng.choice(["m", "n"])))
            X.append("".join(s))
            y.append(int(c == 2))
            cluster.append(c)
    return X, np.array(y), np.array(cluster)


def _best_single_prototype_error(D, y):
    """The lowest error of a nearest-prototype classifier over every choice of one prototype
    per class (training points) on the square matrix ``D``."""
    best = 1.0
    for a in np.flatnonzero(y == 0):
        for b in np.flatnonzero(y == 1):
            pred = (D[:, b] < D[:, a]).astype(int)
            best = min(best, float(np.mean(pred != y)))
    return best


@pytest.fixture(scope="module")
def clusters():
    return _clusters(10, 0), _clusters(10, 1)


@pytest.mark.parametrize("mode", ["pseudo", "exact"])
def test_neighbour_objective_separates_what_one_prototype_per_class_cannot(clusters, mode):
    """For any costs, a point of one class-0 cluster is twice as far (in its core) from the
    other class-0 cluster as from class 1, so one prototype per class errs on a whole cluster
    (a quarter of the points) unless the noise decides. Learned costs that make the noise
    cheap put every point's nearest neighbour in its own cluster: that is what NCA must find,
    with a margin, and then 1-NN classifies new strings without error."""
    (X, y, cluster), (Xt, yt, _) = clusters
    unit = bt.pairwise_distances(X, None, UnitCost(list("acmn"))).numpy()
    model = BEDL(loss="nca", mode=mode).fit(X, y)
    D = model.pairwise_distances(X)
    off = ~np.eye(len(X), dtype=bool)
    nearest_same = np.where((y[:, None] == y[None, :]) & off, D, np.inf).min(1)
    nearest_other = np.where(y[:, None] != y[None, :], D, np.inf).min(1)
    # a global margin: every point's nearest same-class neighbour is closer than 0.8 times the
    # smallest distance between the classes (0.4-0.6 on other draws; under unit costs the
    # noise hides the classes: no such margin)
    assert nearest_same.max() < 0.8 * nearest_other.min()
    assert not nearest_same.max() < np.where(y[:, None] != y[None, :], unit, np.inf).min()
    assert model.score(Xt, yt) == 1.0
    # the learned embedding: the noise symbols near the origin, a and c far apart
    emb = dict(zip(model.alphabet_, model.cost_.embedding.detach().numpy()))
    assert max(np.linalg.norm(emb["m"]), np.linalg.norm(emb["n"])) < 0.3 * np.linalg.norm(emb["a"] - emb["c"])
    # one prototype per class under the learned costs: a whole cluster (a quarter of the
    # points) on the wrong side, whichever prototypes
    assert _best_single_prototype_error(D, y) >= 0.25


def test_glvq_with_one_prototype_per_class_cannot(clusters):
    (X, y, cluster), (Xt, yt, cluster_t) = clusters
    glvq = BEDL(n_prototypes=1).fit(X, y)
    assert 1.0 - glvq.score(Xt, yt) >= 0.2
    nca = BEDL(loss="nca").fit(X, y)
    assert 1.0 - nca.score(Xt, yt) == 0.0


# ---------------------------------------------------------------------------
# (c) bad input
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kw, word", [
    (dict(loss="nce"), "'nce'"), (dict(loss=None), "None"), (dict(loss="NCA"), "'NCA'"),
    (dict(n_neighbors=0), "n_neighbors"), (dict(n_neighbors=1.5), "n_neighbors"),
    (dict(n_neighbors=True), "n_neighbors"), (dict(nca_scale=0.0), "nca_scale"),
    (dict(nca_scale=float("nan")), "nca_scale"), (dict(nca_scale="1"), "nca_scale"),
    (dict(nca_scale=float("inf")), "nca_scale"),
])
def test_bad_parameters(kw, word):
    with pytest.raises(ValueError, match=word):
        BEDL(**kw).fit(["ab", "ba", "aa"], [0, 1, 0])


def test_loss_error_names_the_parameter():
    with pytest.raises(ValueError, match="loss must be 'glvq' or 'nca'"):
        BEDL(loss="lmnn").fit(["ab", "ba"], [0, 1])


def test_a_class_of_one_object_is_left_out_of_the_loss():
    """A point whose class has no other reference cannot pick its class: it adds nothing to
    the objective (and no NaN)."""
    X = ["ab", "abb", "ba", "bba", "cc"]
    model = BEDL(loss="nca", mode="exact", max_rounds=2).fit(X, [0, 0, 1, 1, 2])
    assert all(np.isfinite(v) for v in model.actual_loss_history_)
    assert model.predict(["cc"]).tolist() == [2]


# ---------------------------------------------------------------------------
# (d) persistence, parameters, prediction
# ---------------------------------------------------------------------------


def test_params_state_dict_and_prediction(tmp_path, clusters):
    (X, y, _), (Xt, yt, _) = clusters
    model = BEDL(loss="nca", n_neighbors=3, nca_scale=0.5, prototype_candidates=6,
                 max_rounds=2).fit(X, y)
    params = model.get_params()
    assert params["loss"] == "nca" and params["n_neighbors"] == 3 and params["nca_scale"] == 0.5
    # the references are the candidates; prediction is the vote of the 3 nearest
    assert len(model.prototypes_) == len(model.candidates_) == 12
    D = model.decision_distances(Xt)
    labels = np.searchsorted(model.classes_, model.prototype_labels_)
    assert np.array_equal(model.predict(Xt), model.classes_[knn_vote(D, labels, 3, 2)])
    assert model.scale_ > 0 and len(model.actual_loss_history_) >= 2
    path = tmp_path / "nca.pt"
    model.save(path)
    state = torch.load(path, weights_only=True)
    assert state["hyperparameters"]["loss"] == "nca" and state["scale"] == model.scale_
    loaded = BEDL.load(path)
    assert loaded.get_params() == params
    assert loaded.scale_ == model.scale_
    assert np.array_equal(loaded.predict(Xt), model.predict(Xt))
    other = BEDL().load_state_dict(model.state_dict())
    assert other.loss == "nca" and np.array_equal(other.predict(Xt), model.predict(Xt))
    # set_params round trip, and a GLVQ state keeps loss="glvq" and no scale_
    assert BEDL().set_params(**params).get_params() == params
    glvq = BEDL(max_rounds=1).fit(X, y)
    back = BEDL(loss="nca").load_state_dict(glvq.state_dict())
    assert back.loss == "glvq" and not hasattr(back, "scale_")


def test_sklearn_clone_keeps_the_loss():
    sklearn_base = pytest.importorskip("sklearn.base")
    model = BEDL(loss="nca", n_neighbors=5, nca_scale=0.3)
    clone = sklearn_base.clone(model)
    assert (clone.loss, clone.n_neighbors, clone.nca_scale) == ("nca", 5, 0.3)
    assert "loss='nca'" in repr(model)


# ---------------------------------------------------------------------------
# validation_fraction: never worse than the initial costs on held-out objects
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("loss", ["nca", "glvq"])
def test_validation_keeps_learned_costs_that_do_better(clusters, loss):
    (X, y, _), (Xt, yt, _) = clusters
    model = BEDL(loss=loss, validation_fraction=0.25, max_rounds=3).fit(X, y)
    held = model.validation_indices_
    assert len(held) == 10 and np.bincount(y[held]).tolist() == [5, 5]
    assert not set(held) & set(model.prototype_indices_.tolist())
    assert [X[i] for i in model.prototype_indices_] == model.prototypes_
    assert set(model.candidates_.tolist()) == set(range(40)) - set(held.tolist())
    initial, learned = model.validation_errors_
    assert learned <= initial and not model.kept_initial_
    if loss == "nca":
        assert len(model.prototypes_) == 30 and model.score(Xt, yt) == 1.0


@pytest.mark.parametrize("loss", ["nca", "glvq"])
def test_validation_falls_back_to_the_initial_costs(clusters, monkeypatch, loss):
    """A fit that ends with spoilt costs (the noise symbols far out, the core symbols at the
    origin): the held-out error rises, the fit keeps its first round."""
    (X, y, _), _ = clusters
    keep_best = BEDL._keep_best_round

    def spoil(self, params, best, prototypes):
        prototypes = keep_best(self, params, best, prototypes)
        with torch.no_grad():
            emb = self.cost_.embedding
            emb.zero_()
            emb[self.alphabet_.index("m"), 0] = 5.0
            emb[self.alphabet_.index("n"), 1] = 5.0
        return prototypes

    monkeypatch.setattr(BEDL, "_keep_best_round", spoil)
    model = BEDL(loss=loss, validation_fraction=0.3, max_rounds=1, random_state=1).fit(X, y)
    initial, learned = model.validation_errors_
    assert learned > initial and model.kept_initial_ and model.best_round_ == 0
    reference = BEDL(loss=loss, max_rounds=0)
    start = reference._make_cost(model.alphabet_).embedding
    assert torch.equal(model.cost_.embedding.detach(), start.detach())
    if loss == "glvq":  # the prototypes median GLVQ chose under the initial costs
        assert len(model.prototypes_) == 2


def test_validation_fraction_is_checked():
    for bad in (0, 1, 1.5, -0.1, True, "0.2"):
        with pytest.raises(ValueError, match="validation_fraction"):
            BEDL(validation_fraction=bad).fit(["ab", "ba", "aa", "bb"], [0, 1, 0, 1])


def test_pair_lists_split_where_the_kernels_decline(monkeypatch):
    """Frozen lists computed in chunks too large for the kernels' bound are split until they
    fit: the same lists as in one call."""
    from bedl_torch.learning.nca import PairKernels
    from bedl_torch.learning.training import distinct_labels
    from bedl_torch.ops import PairBatch, limits

    X = TREES
    cost = EuclideanCost(list("abc"), embedding=_embedding(4))
    data = make_fit_data(X, LABELS, np.unique(LABELS), cost, "error", None, NCALossTerms())
    refs = NCAReferences(LABELS, np.arange(11), True)
    batch = PairBatch.from_tables(data.x_table, data.y_table, torch.as_tensor(refs.pair_x),
                                  torch.as_tensor(refs.pair_y))
    table = cost.symbol_table().detach()
    whole = PairKernels(batch, cost, "error", distinct_labels(data), F64).lists(table)
    kernels = PairKernels(batch, cost, "error", distinct_labels(data), F64)
    monkeypatch.setattr(limits, "PAIR_SUM_ENTRIES", 40)  # the kernels now list few pairs
    calls = []
    inner = PairKernels._chunk_lists
    monkeypatch.setattr(PairKernels, "_chunk_lists",
                        lambda self, k, lo, hi, t: calls.append(hi - lo) or inner(self, k, lo, hi, t))
    split = kernels.lists(table)
    assert len(calls) > 3 and min(calls) < len(refs)
    for a, b in zip(whole, split):
        assert np.array_equal(a, b)
