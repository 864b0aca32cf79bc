"""A stand-in for torch.optim.LBFGS that probes a metric step's closure."""
import torch


class ProbeLBFGS:
    """Evaluates the closure at the start point and at two perturbed points, records loss and
    gradient (``records``, one list per step) and the points (``points``), and leaves the
    parameters as they were."""

    records = []
    points = []

    def __init__(self, params, **kwargs):
        self.params = list(params)

    def step(self, closure):
        (p,) = self.params
        start = p.detach().clone()
        gen = torch.Generator().manual_seed(0)
        out = []
        for scale in (0.0, 0.05, 0.3):
            with torch.no_grad():
                step = torch.randn(start.shape, generator=gen, dtype=start.dtype)
                p.copy_(start + scale * step.to(start.device))
            ProbeLBFGS.points.append(p.detach().clone())
            loss = closure()
            out.append((float(loss.detach()), p.grad.detach().clone()))
        with torch.no_grad():
            p.copy_(start)
        ProbeLBFGS.records.append(out)
        return torch.tensor(out[0][0])

    @classmethod
    def reset(cls):
        cls.records, cls.points = [], []
