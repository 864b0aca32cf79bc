"""The metric-step evaluators of bedl_torch.learning.objectives against losses.py + autograd.

Each evaluator's value and gradient is compared, on a small hand-built problem in float64, with
the same objective written directly: the pseudo distances sum(P0 * C) (or the exact distances)
of every data-prototype pair from the cost module's padded costs, the closest correct and wrong
prototype by min, glvq_loss plus the regularisers of losses.py, differentiated by autograd.
"""
import copy

import numpy as np
import pytest
import torch

from bedl_torch.costs import CosineCost, EuclideanCost
from bedl_torch.learning import BEDL
from bedl_torch.learning.losses import (
    frobenius_regularizer,
    frobenius_regularizer_and_grad_numpy,
    glvq_loss,
    glvq_loss_and_grad_numpy,
    logdet_regularizer,
    logdet_regularizer_and_grad_numpy,
)
from bedl_torch.learning.objectives import (
    DenseFrequencyTerms,
    ExactObjective,
    LinearPseudoObjective,
    LossTerms,
    NumpyEuclideanObjective,
    PrototypePairs,
    SparsePairTerms,
    flat_symbol_table,
    padded_symbol_indices,
    regularized_matrix,
    symbol_frequencies,
)
from bedl_torch.ops import PairBatch, pairwise_distances

F64 = torch.float64
REL = 1e-10

# Two classes of strings over a, b, c; class 0 has two prototypes (indices 0 and 2), class 1
# one (index 7), so each point picks the closer of two correct or two wrong prototypes.
STRINGS = ["ab", "abca", "ca", "bcc", "a", "cab", "bb", "acbb", "cc", "ba"]
STRING_LABELS = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
# a generic (hand-written) embedding of a, b, c in two dimensions
EMBEDDING = [[0.9, -0.2], [0.1, 0.7], [-0.4, 0.35]]

WORDS = ["w0", "w1", "w2", "w3", "w4", "w5"]
WORD_VECTORS = [[1.0, 0.2, -0.3], [0.4, 1.1, 0.0], [-0.5, 0.3, 0.9],
                [0.2, -0.8, 0.6], [0.9, 0.9, 0.1], [-0.3, -0.2, -1.0]]
OMEGA = [[1.1, 0.2, -0.1], [0.0, 0.8, 0.3], [-0.2, 0.1, 1.3]]
SENTENCES = [["w0", "w1", "w0", "w4", "w1", "w0", "w4", "w1"],
             ["w1", "w4", "w0", "w1", "w1", "w4", "w0"],
             ["w0", "w0", "w4", "w1", "w4", "w0", "w1"], ["w4", "w1", "w1", "w0"],
             ["w1", "w0", "w4", "w4", "w0"], ["w2", "w3", "w5"], ["w3", "w5", "w2", "w2"],
             ["w5", "w3", "w2", "w5", "w5", "w3", "w2"], ["w2", "w5", "w5", "w3", "w2"],
             ["w3", "w2", "w3"]]

LOSSES = [LossTerms("log4", "both", 0.3), LossTerms("sigmoid", "logdet", 0.3),
          LossTerms("identity", "frobenius", 0.3), LossTerms(lambda mu: torch.exp(mu), None, 0.3)]
LOSS_IDS = ["log4-both", "sigmoid-logdet", "identity-frobenius", "callable-none"]


def _problem(cost_kind, prototypes):
    """(cost, objects, labels, full batch, pairs, P0 under the unit-cost start, X_idx)."""
    if cost_kind == "euclidean":
        X, y = STRINGS, STRING_LABELS
        cost = EuclideanCost(list("abc"), embedding=torch.tensor(EMBEDDING, dtype=F64))
        start = EuclideanCost(list("abc"), dtype=F64)  # the simplex: unit costs
    else:
        X, y = SENTENCES, STRING_LABELS
        vectors = torch.tensor(WORD_VECTORS, dtype=F64)
        cost = CosineCost(WORDS, vectors, omega=torch.tensor(OMEGA, dtype=F64))
        start = CosineCost(WORDS, vectors)
    y_idx = np.asarray(y)
    m, P = len(X), len(prototypes)
    protos = torch.as_tensor(prototypes, dtype=torch.long)
    base = PairBatch(X, X)
    full = PairBatch.from_tables(base.x_table, base.y_table,
                                 torch.arange(m).repeat_interleave(P), protos.repeat(m))
    same = torch.as_tensor(y_idx[:, None] == y_idx[prototypes][None, :])
    _, P0 = full.coopt(start)
    return cost, X, y_idx, full, PrototypePairs(same), P0, padded_symbol_indices(X, cost, "error")


def _closest(d, same):
    inf = torch.tensor(float("inf"), dtype=d.dtype)
    return torch.where(same, d, inf).min(1).values, torch.where(same, inf, d).min(1).values


def _assert_no_ties(d, same):
    """The constructed problem picks every closest prototype by a clear margin (so the
    selection does not hang on rounding)."""
    d = d.detach()
    for mask in (same, ~same):
        masked = torch.where(mask, d, torch.tensor(float("inf"), dtype=d.dtype))
        two = masked.topk(2, dim=1, largest=False).values
        finite = torch.isfinite(two[:, 1])
        assert torch.all(two[finite, 1] - two[finite, 0] > 1e-3)


def _reference(cost, loss, X, full, pairs, P0, exact, prototypes):
    """Value and gradients of the objective written directly (autograd through losses.py)."""
    ref = copy.deepcopy(cost)
    m, P = pairs.shape
    if exact:
        d = pairwise_distances(X, [X[k] for k in prototypes], ref)
    else:
        d = (P0 * full.costs(ref)).sum(dim=(1, 2)).view(m, P)
    _assert_no_ties(d, pairs.same)
    d_plus, d_minus = _closest(d, pairs.same)
    value = glvq_loss(d_plus, d_minus, loss.phi)
    A = regularized_matrix(ref)
    if loss.regularizer in ("logdet", "both"):
        value = value + logdet_regularizer(A, loss.beta)
    if loss.regularizer in ("frobenius", "both"):
        value = value + frobenius_regularizer(A, loss.beta)
    value.backward()
    return float(value.detach()), [p.grad for p in ref.parameters() if p.requires_grad]


def _evaluator(kind, cost, full, pairs, P0, X_idx, loss, prototypes):
    params = [p for p in cost.parameters() if p.requires_grad]
    m, P = pairs.shape
    if kind in ("numpy", "dense"):
        F = symbol_frequencies(cost, full, P0, X_idx, 1 << 16)
        assert F is not None
        if kind == "numpy":
            return NumpyEuclideanObjective(cost, F.view(m, P, -1), pairs, loss)
        terms = DenseFrequencyTerms(flat_symbol_table(cost), F.view(m * P, -1))
        return LinearPseudoObjective(cost, params, terms, pairs, loss)
    if kind == "sparse":
        return LinearPseudoObjective(cost, params, SparsePairTerms(cost, full, P0, X_idx),
                                     pairs, loss)
    protos = torch.as_tensor(prototypes, dtype=torch.long)
    return ExactObjective(cost, params, full, protos, pairs, loss, "error")


CASES = [("numpy", "euclidean"), ("dense", "euclidean"), ("dense", "cosine"),
         ("sparse", "euclidean"), ("sparse", "cosine"), ("exact", "euclidean"),
         ("exact", "cosine")]


@pytest.mark.parametrize("loss", LOSSES, ids=LOSS_IDS)
@pytest.mark.parametrize("prototypes", [[0, 2, 7], [1, 7]], ids=["selected", "fixed"])
@pytest.mark.parametrize("kind,cost_kind", CASES, ids=[f"{k}-{c}" for k, c in CASES])
def test_evaluator_value_and_gradient_equal_autograd_reference(kind, cost_kind, prototypes, loss):
    cost, X, _, full, pairs, P0, X_idx = _problem(cost_kind, prototypes)
    assert (pairs.fixed is not None) == (len(prototypes) == 2)
    want_value, want_grads = _reference(cost, loss, X, full, pairs, P0, kind == "exact",
                                        prototypes)
    objective = _evaluator(kind, cost, full, pairs, P0, X_idx, loss, prototypes)
    value = float(objective.value_and_grad().detach())
    grads = [p.grad for p in cost.parameters() if p.requires_grad]
    assert value == pytest.approx(want_value, rel=REL)
    assert len(grads) == len(want_grads)
    for g, w in zip(grads, want_grads):
        assert float(w.norm()) > 1e-3  # a gradient worth comparing
        assert float((g - w).norm()) <= REL * float(w.norm())
    # value() is the same objective without gradient; only value_and_grad counts
    assert float(objective.value()) == pytest.approx(want_value, rel=REL)
    assert objective.n_evals == 1


def test_selection_uses_both_correct_prototypes():
    """In the 'selected' problem the closest correct prototype differs between points, so the
    evaluators' selection (not a fixed choice) is what the comparison above checks."""
    cost, X, y_idx, full, pairs, P0, _ = _problem("euclidean", [0, 2, 7])
    with torch.no_grad():
        d = (P0 * full.costs(cost)).sum(dim=(1, 2)).view(len(X), 3)
    class0 = torch.as_tensor(y_idx == 0)
    chosen = d[class0][:, :2].argmin(1)
    assert set(chosen.tolist()) == {0, 1}


def test_numpy_losses_equal_torch_closed_forms():
    d_plus = np.array([1.0, 0.0, 2.5, 0.3])
    d_minus = np.array([2.0, 0.0, 0.5, 0.3])
    for phi in ("log4", "sigmoid", "identity"):
        dp = torch.tensor(d_plus, requires_grad=True)
        dm = torch.tensor(d_minus, requires_grad=True)
        want = glvq_loss(dp, dm, phi)
        want.backward()
        value, g_plus, g_minus = glvq_loss_and_grad_numpy(d_plus, d_minus, phi)
        assert value == pytest.approx(float(want.detach()), rel=REL)
        np.testing.assert_allclose(g_plus, dp.grad.numpy(), rtol=REL, atol=0)
        np.testing.assert_allclose(g_minus, dm.grad.numpy(), rtol=REL, atol=0)
        assert glvq_loss_and_grad_numpy(d_plus, d_minus, phi, backward=False) == (value, None, None)
    A = np.array(EMBEDDING)
    for numpy_fn, torch_fn in ((logdet_regularizer_and_grad_numpy, logdet_regularizer),
                               (frobenius_regularizer_and_grad_numpy, frobenius_regularizer)):
        At = torch.tensor(A, requires_grad=True)
        want = torch_fn(At, 0.7)
        want.backward()
        value, grad = numpy_fn(A, 0.7)
        assert value == pytest.approx(float(want.detach()), rel=REL)
        np.testing.assert_allclose(grad, At.grad.numpy(), rtol=REL, atol=1e-15)


def test_callable_phi_through_the_numpy_objective_in_a_fit():
    """A callable phi needs autograd for its derivative, so the metric step must not run the
    numpy objective in inference mode: the fit runs, and the loss at the first step's start
    (pseudo distances at their own alignment costs are the exact distances) equals the actual
    objective of round 0."""
    X = STRINGS * 2
    y = STRING_LABELS * 2
    model = BEDL(phi=lambda mu: torch.exp(mu), max_rounds=1, max_eval=5).fit(X, y)
    assert model.loss_history_[0] == pytest.approx(model.actual_loss_history_[0], rel=REL)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_backward_with_gives_torch_backward_bits(dtype):
    """backward_with (the evaluators' backward through a scalar) leaves the same gradients as
    torch.autograd.backward with explicit gradients, bit for bit: into leaves and through
    non-leaf tensors, several at once, with signed and zero gradients."""
    from bedl_torch.learning.objective_base import backward_with

    gen = torch.Generator().manual_seed(5)
    grads = []
    for how in ("torch", "ours"):
        gen.manual_seed(5)
        a = torch.randn(4, 3, generator=gen, dtype=dtype).requires_grad_(True)
        b = torch.randn(3, generator=gen, dtype=dtype).requires_grad_(True)
        t1 = (a.exp() * b).sin()               # a non-leaf of a and b
        t2 = b                                 # a leaf
        g1 = torch.randn(4, 3, generator=gen, dtype=dtype)
        g1[0, 0] = 0.0
        g1[1, 1] = -0.0
        g2 = torch.randn(3, generator=gen, dtype=dtype) * 1e-30
        if how == "torch":
            torch.autograd.backward([t1, t2], [g1, g2])
        else:
            backward_with([t1, t2], [g1, g2])
        grads.append((a.grad, b.grad))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])
