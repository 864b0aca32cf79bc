"""BEDL's numpy L-BFGS solver against torch.optim.LBFGS, and the fast metric-step paths
(the solver, the numpy exact-mode objective) against the straightforward ones (torch's
optimiser on the autograd objectives)."""
import sys

import numpy as np
import pytest
import torch

from bedl_torch.costs import EuclideanCost
from bedl_torch.datasets import make_strings
from bedl_torch.learning import BEDL
from bedl_torch.learning.lbfgs import LBFGS
from bedl_torch.learning.objectives import ExactObjective, NumpyEuclideanExactObjective
from bedl_torch.learning import training
from bedl_torch.learning.training import ObjectiveFactory
from lbfgs_probe import ProbeLBFGS

_FIT_MODULE = sys.modules[BEDL._metric_step.__module__]  # where the rounds call L-BFGS


def _logistic(n=8, m=30, seed=0):
    """A smooth, strongly convex logistic loss with a ridge term: value and gradient."""
    rng = np.random.default_rng(seed)
    A = 3 * rng.standard_normal((m, n))
    b = rng.standard_normal(m)

    def f(x):
        z = A @ x - b
        s = 1.0 / (1.0 + np.exp(-z))
        return float(np.logaddexp(0.0, z).sum() + 0.05 * x @ x), A.T @ s + 0.1 * x

    return f


def _rosenbrock(x):
    f = np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
    g = np.zeros_like(x)
    g[:-1] += -400 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2 * (1 - x[:-1])
    g[1:] += 200 * (x[1:] - x[:-1] ** 2)
    return float(f), g


def _torch_lbfgs_points(f, x0, **kw):
    """The points torch.optim.LBFGS (strong Wolfe) evaluates, and where it ends."""
    p = torch.tensor(x0, requires_grad=True)
    points = []

    def closure():
        x = p.detach().numpy().copy()
        points.append(x)
        value, grad = f(x)
        p.grad = torch.from_numpy(grad)
        return torch.tensor(value, dtype=torch.float64)

    opt = torch.optim.LBFGS([p], lr=1.0, line_search_fn="strong_wolfe", tolerance_grad=1e-7,
                            tolerance_change=1e-9, **kw)
    opt.step(closure)
    return points, p.detach().numpy()


@pytest.mark.parametrize("problem, x0, kw", [
    # converges (stops on the change of the loss); 3 curvature pairs kept of many made
    ("logistic", np.full(8, 3.0), dict(max_iter=100, max_eval=100, history_size=3)),
    # runs out of evaluations inside a line search; zoom steps
    ("rosenbrock", np.linspace(-1.2, 1.0, 6), dict(max_iter=40, max_eval=40, history_size=4)),
    # zoom trials near an end of the bracket (moved away from it)
    ("rosenbrock", np.array([-2.0, 1.0]), dict(max_iter=60, max_eval=60, history_size=2)),
])
def test_solver_evaluates_the_points_of_torch_lbfgs(problem, x0, kw):
    """Same iteration as torch.optim.LBFGS: the same points (up to the rounding of dot
    products, of the two-loop direction and of ``x + t d``, which numpy and torch order
    differently), as many of them, the same end point. The problems are well conditioned over
    these runs, so rounding stays at its own size."""
    f = _logistic() if problem == "logistic" else _rosenbrock
    want_points, want_x = _torch_lbfgs_points(f, x0, **kw)
    points = []

    def fun(x):
        points.append(x.copy())
        return f(x)

    x, loss0, loss, evals = LBFGS(**kw).minimize(fun, x0)
    assert evals == len(points) == len(want_points) > 20
    np.testing.assert_allclose(np.array(points), np.array(want_points), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(x, want_x, rtol=1e-9, atol=1e-10)
    assert loss0 == f(x0)[0] and loss == pytest.approx(f(x)[0], rel=1e-12)
    assert x0[0] in (3.0, -1.2, -2.0)  # the start is not modified


def test_solver_stops_at_once_on_a_flat_start_and_keeps_float32():
    calls = []

    def flat(x):
        calls.append(x.copy())
        return 2.0, np.zeros_like(x)

    x0 = np.ones(3, dtype=np.float32)
    x, loss0, loss, evals = LBFGS(max_iter=10, max_eval=10).minimize(flat, x0)
    assert (evals, loss0, loss, len(calls)) == (1, 2.0, 2.0, 1) and np.array_equal(x, x0)

    def quadratic(x):
        return float(x @ x), 2 * x

    x, _, loss, _ = LBFGS(max_iter=20, max_eval=25).minimize(quadratic, np.array([1, -2], np.float32))
    assert x.dtype == np.float32 and loss < 1e-8


class _TorchSolver:
    """The straightforward metric step: torch.optim.LBFGS on the objective's parameters with
    its ``value_and_grad`` closure, behind the solver's interface."""

    def __init__(self, **kw):
        self.kw = kw

    def minimize(self, fun, x0):
        objective = fun.__self__
        opt = torch.optim.LBFGS(objective.params, lr=1.0, line_search_fn="strong_wolfe", **self.kw)
        loss0 = float(opt.step(objective.value_and_grad).detach())
        return objective.get_flat(), loss0, float(objective.value()), objective.n_evals


def _step_results(monkeypatch, mode, reference):
    """The embedding after the first metric step of a Strings fit (25 evaluations), with the
    fast paths or (``reference``) torch's optimiser on the autograd objectives."""
    X, y = make_strings(100, seed=0)
    results = []
    step = BEDL._metric_step

    def recording_step(self, cost, params, *args):
        out = step(self, cost, params, *args)
        results.append((params[0].detach().clone(), out))
        return out

    with monkeypatch.context() as mp:
        mp.setattr(BEDL, "_metric_step", recording_step)
        if reference:
            mp.setattr(_FIT_MODULE, "LBFGS", _TorchSolver)
            mp.setattr(ObjectiveFactory, "numpy_path_ok", staticmethod(lambda cost, params: False))
        BEDL(mode=mode, max_rounds=1, max_eval=25).fit(X, y)
    return results[0]


@pytest.mark.parametrize("mode", ["pseudo", "exact"])
def test_fast_metric_step_matches_the_straightforward_one(monkeypatch, mode):
    """A metric step of 25 evaluations on Strings (float64) ends at the same embedding within
    1e-10 relative, as many evaluations, the same losses. (Longer steps drift apart: the
    optimum puts symbols together, where the Euclidean cost is not smooth, and rounding grows
    there with either optimiser; a 1-ulp change of the start does the same.)"""
    fast, (loss0, loss1, evals) = _step_results(monkeypatch, mode, reference=False)
    ref, (ref0, ref1, ref_evals) = _step_results(monkeypatch, mode, reference=True)
    assert evals == ref_evals >= 25
    assert loss0 == pytest.approx(ref0, rel=1e-12) and loss1 == pytest.approx(ref1, rel=1e-12)
    assert loss1 < loss0 - 1
    assert float((fast - ref).abs().max() / ref.abs().max()) < 1e-10


@pytest.mark.parametrize("mode, n_prototypes", [("exact", 1), ("exact", 2), ("soft", 2)])
def test_numpy_exact_objective_matches_autograd(monkeypatch, mode, n_prototypes):
    """The numpy exact-mode objective (autograd only through the distances to their cost
    table) gives the loss and gradient of the autograd objective at the same points, with a
    fixed selection of prototypes (one per class) and with the closest ones chosen per
    evaluation (two per class). A generic start avoids ties between prototypes."""
    X, y = make_strings(40, seed=9)
    start = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    made = []
    for name in ("ExactObjective", "NumpyEuclideanExactObjective"):
        cls = getattr(training, name)
        monkeypatch.setattr(training, name,
                            lambda *a, _cls=cls, **k: made.append(_cls) or _cls(*a, **k))
    ProbeLBFGS.install(monkeypatch)
    kw = {"temperature": 0.5} if mode == "soft" else {}
    for numpy_path in (True, False):
        with monkeypatch.context() as mp:
            if not numpy_path:
                mp.setattr(ObjectiveFactory, "numpy_path_ok", staticmethod(lambda cost, params: False))
            cost = EuclideanCost(list("abcd"), embedding=start)
            BEDL(mode=mode, n_prototypes=n_prototypes, max_rounds=1, cost=cost, **kw).fit(X, y)
    assert made == [NumpyEuclideanExactObjective, ExactObjective]
    fast, ref = ProbeLBFGS.records
    for (loss, grad), (ref_loss, ref_grad) in zip(fast, ref):
        assert ref_grad.abs().max() > 0.01
        assert loss == pytest.approx(ref_loss, rel=1e-12)
        torch.testing.assert_close(grad, ref_grad, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_numpy_regularizers_match_the_torch_closed_forms(dtype):
    """The numpy log-det and Frobenius terms (the numpy evaluators' regularisers) against the
    torch closed forms, for a full-rank matrix and for matrices with singular values at the
    clamp (zero and below sqrt(tiny)), whose gradient there is 0."""
    from bedl_torch.learning.losses import (frobenius_regularizer_and_grad,
                                            frobenius_regularizer_and_grad_numpy,
                                            logdet_regularizer_and_grad,
                                            logdet_regularizer_and_grad_numpy)

    tiny = np.finfo(dtype).tiny
    full = np.random.default_rng(3).standard_normal((4, 3)).astype(dtype)
    zero = np.array([[2.0, 0.0], [0.0, 0.0], [0.0, 0.0]], dtype=dtype)
    small = np.array([[2.0, 0.0], [0.0, 0.5 * np.sqrt(tiny)]], dtype=dtype)
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    for A in (full, zero, small):
        for numpy_fn, torch_fn in ((logdet_regularizer_and_grad_numpy, logdet_regularizer_and_grad),
                                   (frobenius_regularizer_and_grad_numpy,
                                    frobenius_regularizer_and_grad)):
            value, grad = numpy_fn(A, 0.3)
            want_value, want_grad = torch_fn(torch.from_numpy(A), 0.3)
            assert value == pytest.approx(float(want_value), rel=rtol)
            assert grad.dtype == dtype
            np.testing.assert_allclose(grad, want_grad.numpy(), rtol=rtol, atol=rtol)
            assert numpy_fn(A, 0.3, backward=False) == (value, None)
    # the clamped directions get no gradient: only the live singular value's entry is set
    for A in (zero, small):
        grad = logdet_regularizer_and_grad_numpy(A, 0.5)[1]
        want = np.zeros_like(A)
        want[0, 0] = -0.5  # -2 beta / sigma with sigma = 2
        np.testing.assert_allclose(grad, want, rtol=rtol, atol=0)
