"""BEDL across the ranks of a process group (real gloo groups of two processes on 127.0.0.1):
every rank ends with the model of a single-process fit on the same data (pseudo mode bit for
bit; exact mode within rounding of the gradient's summation order), and predictions and
distances of the fitted model match the single-process ones."""
import numpy as np
import pytest
import torch
import torch.distributed as dist

import bedl_torch as bt
from bedl_torch.datasets import make_strings
from bedl_torch.learning.ranks import Ranks, resolve_ranks
from bedl_torch.tree import Tree
from oracles import random_tree
from process_groups import run_ranks


def _data():
    X, y = make_strings(24, seed=5)
    rng = np.random.default_rng(7)
    trees = [Tree(*random_tree(int(rng.integers(3, 9)), "abc", rng)) for _ in range(16)]
    t_y = np.array([i % 2 for i in range(16)])
    return list(X), np.asarray(y), trees, t_y


class PlainEuclidean(bt.EuclideanCost):
    """The Euclidean cost through the generic (autograd) objectives: not the numpy ones,
    which take the EuclideanCost class itself only."""


#: Settings of the fits compared: short runs that still take several L-BFGS steps
FITS = {
    "exact_generic": dict(mode="exact", n_prototypes=2, max_rounds=1, max_eval=20,
                          cost=PlainEuclidean(list("abcd"))),
    "pseudo_strings": dict(mode="pseudo", n_prototypes=2, max_rounds=2, max_eval=30),
    # exact mode: one short metric step, where the rank-order sums (rounding) are not yet
    # amplified by the optimiser (a longer fit amplifies any rounding difference)
    "exact_strings": dict(mode="exact", n_prototypes=2, max_rounds=1, max_eval=20),
    "exact_trees": dict(mode="exact", n_prototypes=1, max_rounds=1, max_eval=20),
    "pseudo_candidates": dict(mode="pseudo", n_prototypes=2, max_rounds=2, max_eval=30,
                              prototype_candidates=5),
    # loss="nca": the training distances split among the ranks, the objective whole on each
    "pseudo_nca": dict(loss="nca", max_rounds=2, max_eval=30),
    "exact_nca_candidates": dict(loss="nca", mode="exact", max_rounds=1, max_eval=20,
                                 prototype_candidates=5),
}


def _fit(name, process_group):
    X, y, trees, t_y = _data()
    data, labels = (trees, t_y) if name.endswith("trees") else (X, y)
    model = bt.BEDL(process_group=process_group, **FITS[name]).fit(data, labels)
    return {
        "embedding": model.cost_.embedding.detach().clone(),
        "prototypes": model.prototype_indices_.tolist(),
        "predictions": model.predict(data[::-1]).tolist(),
        "decision": model.decision_distances(data[:7]),
        "pairwise": model.pairwise_distances(data[:9], data[3:8]),
        # the search shared among the ranks (one process: bedl_torch.kneighbors)
        "knn": model.kneighbors(data[:9], data[3:12], k=3),
        "knn_self": model.kneighbors(data, k=2),
        "radius": model.radius_neighbors(data[:10], radius=float(np.median(
            model.pairwise_distances(data[:10])))),
        "losses": list(model.loss_history_),
    }


def _scenario_fits(rank):
    results = {name: _fit(name, "auto") for name in FITS}
    # the same data is required: rank 1 drops a point
    X, y, _, _ = _data()
    try:
        n = len(X) - rank
        bt.BEDL(max_rounds=1).fit(X[:n], y[:n])
        results["mismatch"] = None
    except ValueError as e:
        results["mismatch"] = str(e)
    return results


@pytest.fixture(scope="module")
def two_rank_fits(tmp_path_factory):
    return run_ranks("test_bedl_ranks", "_scenario_fits", (), tmp_path_factory.mktemp("bedl"))


@pytest.mark.parametrize("name", sorted(FITS))
def test_two_ranks_fit_the_single_process_model(two_rank_fits, name):
    single = _fit(name, None)
    r0, r1 = (r[name] for r in two_rank_fits)
    # every rank holds the same model, bit for bit
    for key in single:
        a, b = r0[key], r1[key]
        if isinstance(a, tuple):  # the search's answers
            assert all(np.array_equal(u, v) for u, v in zip(a, b)), key
            continue
        assert (torch.equal(a, b) if isinstance(a, torch.Tensor)
                else np.array_equal(np.asarray(a), np.asarray(b))), key
    assert r0["prototypes"] == single["prototypes"]
    assert r0["predictions"] == single["predictions"]
    if name.startswith("pseudo"):
        # gathered co-optimal matrices and training distances: the single-process bits
        assert torch.equal(r0["embedding"], single["embedding"])
        assert r0["losses"] == single["losses"]
    else:
        scale = float(single["embedding"].abs().max())
        assert float((r0["embedding"] - single["embedding"]).abs().max()) <= 1e-8 * scale
    np.testing.assert_allclose(r0["decision"], single["decision"], rtol=1e-8, atol=0)
    np.testing.assert_allclose(r0["pairwise"], single["pairwise"], rtol=1e-8, atol=0)
    if name.startswith("pseudo"):  # the same costs: the same answers, bit for bit
        for key in ("knn", "knn_self", "radius"):
            assert all(np.array_equal(a, b) for a, b in zip(r0[key], single[key])), key


def test_ranks_with_different_data_raise(two_rank_fits):
    for r in two_rank_fits:
        assert r["mismatch"] is not None and "differs between ranks" in r["mismatch"]


def test_blocks_balance_weights_contiguously():
    ranks = Ranks()
    assert ranks.blocks([3, 1, 2]) == [0, 3]
    ranks.size = 3  # the split alone (no collective runs)
    b = ranks.blocks([1] * 9)
    assert b == [0, 3, 6, 9]
    b = ranks.blocks([10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])  # 20 in all: about 6.7 per rank
    assert b[0] == 0 and b[-1] == 11 and b == sorted(b)
    ranks.size = 4
    assert ranks.blocks([5, 5]) == [0, 1, 1, 2, 2]  # more ranks than items: empty blocks


def test_process_group_argument():
    assert not dist.is_initialized()
    assert resolve_ranks("auto").size == 1 and resolve_ranks(None).size == 1
    with pytest.raises(ValueError, match="process_group"):
        resolve_ranks("world")
    with pytest.raises(ValueError, match="not initialised"):
        resolve_ranks(object())
    with pytest.raises(ValueError, match="process_group"):
        bt.BEDL(process_group="all").fit(["ab", "ba"], [0, 1])
