"""A stand-in for BEDL's metric-step solver that probes the objective it is given."""
import sys

import torch

from bedl_torch.learning import BEDL


class ProbeLBFGS:
    """Evaluates the objective at the start point and at two perturbed points, records loss
    and gradient (``records``, one list per step) and the points (``points``), both in the
    shape of the (single) learned parameter, and reports the start as the result.

    Install with :meth:`install` (replaces the solver class that ``BEDL`` uses)."""

    records = []
    points = []

    def __init__(self, **kwargs):
        pass

    def minimize(self, fun, x0):
        (p,) = fun.__self__.params  # the metric step's objective: the parameter's shape
        start = torch.from_numpy(x0).view(p.shape)
        gen = torch.Generator().manual_seed(0)
        out = []
        for scale in (0.0, 0.05, 0.3):
            step = torch.randn(start.shape, generator=gen, dtype=start.dtype)
            point = start + scale * step
            ProbeLBFGS.points.append(point.to(p.device))
            loss, grad = fun(point.reshape(-1).numpy())
            out.append((loss, torch.from_numpy(grad).view(p.shape).to(p.device)))
        ProbeLBFGS.records.append(out)
        return x0, out[0][0], out[0][0], len(out)

    @classmethod
    def reset(cls):
        cls.records, cls.points = [], []

    @classmethod
    def install(cls, monkeypatch):
        monkeypatch.setattr(sys.modules[BEDL._metric_step.__module__], "LBFGS", cls)
        cls.reset()
