"""GLVQ loss and regularisers: values by hand, guards, gradients vs finite differences."""
import math

import pytest
import torch

from bedl_torch.costs import EuclideanCost
from bedl_torch.learning.losses import (
    frobenius_regularizer,
    frobenius_regularizer_and_grad,
    glvq_loss,
    glvq_loss_and_grad,
    glvq_mu,
    gram_matrix,
    logdet_regularizer,
    logdet_regularizer_and_grad,
)
from bedl_torch.ops import PairBatch, pairwise_distances

F64 = torch.float64


def test_mu_values_by_hand():
    dp = torch.tensor([1.0, 3.0, 0.0, 2.0, 0.0], dtype=F64)
    dm = torch.tensor([3.0, 1.0, 2.0, 2.0, 0.0], dtype=F64)
    assert glvq_mu(dp, dm).tolist() == [-0.5, 0.5, -1.0, 0.0, 0.0]


def test_mu_guard_no_nan_in_value_or_gradient():
    dp = torch.tensor([0.0, 1.0], dtype=F64, requires_grad=True)
    dm = torch.tensor([0.0, 3.0], dtype=F64, requires_grad=True)
    mu = glvq_mu(dp, dm)
    mu.sum().backward()
    assert mu.tolist() == [0.0, -0.5]
    # d mu / d d+ = 2 d- / (d+ + d-)^2, d mu / d d- = -2 d+ / (d+ + d-)^2; 0 at the guard
    assert dp.grad.tolist() == [0.0, 6.0 / 16.0]
    assert dm.grad.tolist() == [0.0, -2.0 / 16.0]
    loss = glvq_loss(torch.zeros(3, dtype=F64, requires_grad=True), torch.zeros(3, dtype=F64))
    assert loss.item() == pytest.approx(3 * math.log(4.0))


def test_glvq_loss_values_by_hand():
    dp = torch.tensor([1.0, 3.0], dtype=F64)
    dm = torch.tensor([3.0, 1.0], dtype=F64)
    assert glvq_loss(dp, dm).item() == pytest.approx(math.log(3.5) + math.log(4.5))
    assert glvq_loss(dp, dm, "log4").item() == pytest.approx(math.log(3.5) + math.log(4.5))
    assert glvq_loss(dp, dm, "identity").item() == pytest.approx(0.0)
    sig = lambda x: 1 / (1 + math.exp(-x))
    assert glvq_loss(dp, dm, "sigmoid").item() == pytest.approx(sig(-0.5) + sig(0.5))
    assert glvq_loss(dp, dm, lambda mu: mu ** 2).item() == pytest.approx(0.5)
    with pytest.raises(ValueError):
        glvq_loss(dp, dm, "tanh")


def test_regularizers_by_hand():
    A = torch.tensor([[2.0, 0.0], [0.0, 3.0], [0.0, 0.0]], dtype=F64)
    # tall: G = A^T A = diag(4, 9)
    assert gram_matrix(A).tolist() == [[4.0, 0.0], [0.0, 9.0]]
    assert logdet_regularizer(A, 0.5).item() == pytest.approx(-0.5 * math.log(36.0))
    # wide: G = A A^T, the same non-zero spectrum
    assert gram_matrix(A.T).shape == (2, 2)
    assert logdet_regularizer(A.T, 0.5).item() == pytest.approx(-0.5 * math.log(36.0))
    assert frobenius_regularizer(A, 0.25).item() == pytest.approx(0.25 * 13.0)
    assert logdet_regularizer(A, 0.0).item() == 0.0
    B = torch.randn(6, 4, dtype=F64)
    assert logdet_regularizer(B, 2.0).item() == pytest.approx(-2.0 * torch.logdet(B.T @ B).item())


def test_logdet_gradient_is_minus_two_beta_pinv_transpose():
    A = torch.randn(5, 3, dtype=F64, requires_grad=True)
    logdet_regularizer(A, 0.7).backward()
    expected = -2 * 0.7 * torch.linalg.pinv(A.detach()).T
    assert torch.allclose(A.grad, expected, atol=1e-10)


def test_logdet_singular_is_finite_with_finite_gradient():
    for A in (
        torch.zeros(4, 3, dtype=F64),
        torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]], dtype=F64),
        torch.ones(3, 3, dtype=torch.float32),
    ):
        A = A.clone().requires_grad_()
        r = logdet_regularizer(A, 0.5)
        r.backward()
        assert torch.isfinite(r) and r.item() > 0
        assert torch.isfinite(A.grad).all()
    # the barrier grows as the smallest singular value shrinks
    vals = [
        logdet_regularizer(torch.diag(torch.tensor([1.0, s], dtype=F64)), 1.0).item()
        for s in (1.0, 1e-3, 1e-8, 1e-100)
    ]
    assert vals == sorted(vals)
    # repeated singular values (the simplex) have a finite gradient
    A = torch.eye(3, dtype=F64, requires_grad=True)
    logdet_regularizer(A, 1.0).backward()
    assert torch.allclose(A.grad, -2 * torch.eye(3, dtype=F64))


@pytest.mark.parametrize("phi", ["log4", "identity", "sigmoid", lambda mu: mu ** 3 + mu])
def test_closed_form_glvq_gradient_equals_autograd(phi):
    gen = torch.Generator().manual_seed(11)
    dp = torch.rand(40, dtype=F64, generator=gen) * 3
    dm = torch.rand(40, dtype=F64, generator=gen) * 3
    dp[:3] = 0.0
    dm[0] = 0.0  # the guard: both 0
    dm[5] = 0.0
    a, b = dp.clone().requires_grad_(), dm.clone().requires_grad_()
    loss = glvq_loss(a, b, phi)
    loss.backward()
    value, g_plus, g_minus = glvq_loss_and_grad(dp, dm, phi)
    assert value.item() == pytest.approx(loss.item(), rel=1e-14, abs=1e-14)
    assert torch.allclose(g_plus, a.grad, rtol=1e-12, atol=1e-14)
    assert torch.allclose(g_minus, b.grad, rtol=1e-12, atol=1e-14)
    assert g_plus[0].item() == 0.0 and g_minus[0].item() == 0.0
    assert g_plus.abs().max().item() > 0.1  # not trivially zero


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_closed_form_regularizer_gradients_equal_autograd(shape):
    gen = torch.Generator().manual_seed(sum(shape))
    A0 = torch.randn(*shape, dtype=F64, generator=gen)
    for beta in (0.0, 0.3):
        A = A0.clone().requires_grad_()
        (logdet_regularizer(A, beta) + frobenius_regularizer(A, beta)).backward()
        v1, g1 = logdet_regularizer_and_grad(A0, beta)
        v2, g2 = frobenius_regularizer_and_grad(A0, beta)
        assert (v1 + v2).item() == pytest.approx(
            (logdet_regularizer(A0, beta) + frobenius_regularizer(A0, beta)).item(), rel=1e-13, abs=0
        )
        assert torch.allclose(g1 + g2, A.grad, rtol=1e-11, atol=1e-13)
    # singular: the clamped singular values get gradient 0, as with autograd
    S = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]], dtype=F64)
    v, g = logdet_regularizer_and_grad(S, 0.5)
    assert v.item() == pytest.approx(logdet_regularizer(S, 0.5).item())
    assert torch.equal(g, torch.tensor([[-1.0, 0.0], [0.0, 0.0], [0.0, 0.0]], dtype=F64))


# ---------------------------------------------------------------------------
# gradient of the full objective w.r.t. an embedding, through the edit distance
# ---------------------------------------------------------------------------

XS = ["abcab", "bcd", "dacb", "abd", "ccab", "dd"]
YS = [0, 0, 1, 1, 0, 1]
PROTOS = [0, 2, 4, 5]  # prototype indices into XS


def _loss_from_embedding(A, mode, P0=None, beta=0.3):
    cost = EuclideanCost(list("abcd"), embedding=A.detach())
    del cost.embedding
    cost.embedding = A  # plain tensor attribute: gradients flow to A
    xs = [XS[i] for i in range(len(XS)) for _ in PROTOS]
    ys = [XS[p] for _ in range(len(XS)) for p in PROTOS]
    batch = PairBatch(xs, ys)
    if mode == "exact":
        d = batch.distances(cost)
    else:
        d = batch.pseudo_distances(cost, P0)
    d = d.view(len(XS), len(PROTOS))
    same = torch.tensor([[YS[i] == YS[p] for p in PROTOS] for i in range(len(XS))])
    with torch.no_grad():
        kp = torch.where(same, d, math.inf).argmin(1)
        km = torch.where(same, math.inf, d).argmin(1)
    r = torch.arange(len(XS))
    loss = glvq_loss(d[r, kp], d[r, km])
    loss = loss + logdet_regularizer(A, beta) + frobenius_regularizer(A, beta)
    return loss, batch, cost


@pytest.mark.parametrize("mode", ["exact", "pseudo"])
def test_gradient_matches_central_differences(mode):
    gen = torch.Generator().manual_seed(3)
    A0 = torch.randn(4, 3, dtype=F64, generator=gen)  # generic: no ties between alignments
    P0 = None
    if mode == "pseudo":
        _, batch, cost = _loss_from_embedding(A0.clone(), "exact")
        _, P0 = batch.coopt(cost)
    A = A0.clone().requires_grad_()
    loss, _, _ = _loss_from_embedding(A, mode, P0)
    loss.backward()
    grad = A.grad.clone()
    h = 1e-6
    fd = torch.zeros_like(A0)
    for i in range(A0.shape[0]):
        for j in range(A0.shape[1]):
            Ap, Am = A0.clone(), A0.clone()
            Ap[i, j] += h
            Am[i, j] -= h
            with torch.no_grad():
                fp = _loss_from_embedding(Ap, mode, P0)[0].item()
                fm = _loss_from_embedding(Am, mode, P0)[0].item()
            fd[i, j] = (fp - fm) / (2 * h)
    assert torch.allclose(grad, fd, rtol=1e-5, atol=1e-6), (grad, fd)


def test_exact_and_pseudo_gradients_agree_at_the_reference_point():
    gen = torch.Generator().manual_seed(5)
    A0 = torch.randn(4, 4, dtype=F64, generator=gen)
    _, batch, cost = _loss_from_embedding(A0.clone(), "exact")
    _, P0 = batch.coopt(cost)
    grads = []
    for mode in ("exact", "pseudo"):
        A = A0.clone().requires_grad_()
        _loss_from_embedding(A, mode, P0)[0].backward()
        grads.append(A.grad)
    assert torch.allclose(grads[0], grads[1], atol=1e-10)


def test_pairwise_distances_gradient_matches_finite_differences():
    gen = torch.Generator().manual_seed(7)
    A0 = torch.randn(4, 2, dtype=F64, generator=gen)

    def f(A):
        cost = EuclideanCost(list("abcd"), embedding=A0)
        del cost.embedding
        cost.embedding = A
        D = pairwise_distances(XS, XS[:3], cost)
        return glvq_loss(D[:, 0], D[:, 2]) + frobenius_regularizer(A, 0.1)

    A = A0.clone().requires_grad_()
    f(A).backward()
    h = 1e-6
    fd = torch.zeros_like(A0)
    for i in range(4):
        for j in range(2):
            Ap, Am = A0.clone(), A0.clone()
            Ap[i, j] += h
            Am[i, j] -= h
            with torch.no_grad():
                fd[i, j] = (f(Ap).item() - f(Am).item()) / (2 * h)
    assert torch.allclose(A.grad, fd, rtol=1e-5, atol=1e-6)
