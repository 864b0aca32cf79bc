"""BEDL with the soft edit distance: the metric step's objective is the GLVQ loss on soft
distances at the given temperature, checked against the ops; parameters are validated."""

import pytest
import torch

import bedl_torch
from bedl_torch.datasets import make_strings
from bedl_torch.learning import BEDL
from bedl_torch.ops import PairBatch


def test_soft_mode_objective_uses_soft_distances(monkeypatch):
    """A spy on PairBatch.distances: every call of the metric step asks for mode='soft' at the
    temperature, and the loss each evaluation returns is the loss on soft_edit_distance_batch."""
    X, y = make_strings(20, seed=3)
    seen = []
    original = PairBatch.distances

    def spy(self, cost_or_costs, mode="exact", reference=None, **kw):
        seen.append((mode, kw.get("temperature")))
        return original(self, cost_or_costs, mode, reference, **kw)

    monkeypatch.setattr(PairBatch, "distances", spy)
    model = BEDL(mode="soft", temperature=0.25, max_rounds=1, max_eval=5).fit(X, y)
    assert seen and all(s == ("soft", 0.25) for s in seen)
    assert model.get_params()["temperature"] == 0.25


@pytest.mark.parametrize("temperature", [0.05, 0.5, 3.0])
def test_soft_objective_value_and_gradient_match_the_ops(temperature):
    """The metric step's objective in soft mode (ExactObjective with soft distances) against the
    loss written directly: soft pairwise distances to the prototypes, closest correct and wrong
    prototype, GLVQ loss and regularisers from losses.py, gradient by autograd."""
    import copy
    from bedl_torch.learning import frobenius_regularizer, glvq_loss, logdet_regularizer
    from bedl_torch.learning.objectives import ExactObjective, regularized_matrix
    from test_objectives import LOSSES, _closest, _problem

    prototypes = [0, 2, 7]
    loss = LOSSES[0]
    cost, X, _, full, pairs, _, _ = _problem("euclidean", prototypes)
    ref = copy.deepcopy(cost)
    d = bedl_torch.pairwise_distances(X, [X[k] for k in prototypes], ref, mode="soft", temperature=temperature)
    d_plus, d_minus = _closest(d, pairs.same)
    A = regularized_matrix(ref)
    want = glvq_loss(d_plus, d_minus, loss.phi) + logdet_regularizer(A, loss.beta) + frobenius_regularizer(A, loss.beta)
    want.backward()
    params = [p for p in cost.parameters() if p.requires_grad]
    objective = ExactObjective(cost, params, full, torch.as_tensor(prototypes), pairs, loss, "error",
                               distance_kw={"mode": "soft", "temperature": temperature})
    value = float(objective.value_and_grad().detach())
    assert value == pytest.approx(float(want.detach()), rel=1e-10)
    for g, w in zip(params, [p for p in ref.parameters() if p.requires_grad]):
        assert float((g.grad - w.grad).norm()) <= 1e-10 * float(w.grad.norm())


@pytest.mark.parametrize("kw, match", [
    ({"mode": "soft"}, "temperature"),
    ({"mode": "soft", "temperature": 0.0}, "temperature"),
    ({"mode": "soft", "temperature": float("nan")}, "temperature"),
    ({"mode": "exact", "temperature": 1.0}, "only with mode='soft'"),
    ({"mode": "hard"}, "mode must be"),
])
def test_soft_mode_parameters(kw, match):
    X, y = make_strings(6, seed=1)
    with pytest.raises(ValueError, match=match):
        BEDL(**kw).fit(X, y)
