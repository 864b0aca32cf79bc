"""The rounds of :meth:`BEDL.fit <bedl_torch.learning.BEDL.fit>`: the alternation of median GLVQ
with metric steps (``loss="glvq"``), the neighbour objective's rounds (``loss="nca"``), the
metric step (L-BFGS on the objective :class:`~.training.ObjectiveFactory` builds) and the
return to the best round. A mixin of :class:`~.bedl.BEDL`, whose parameters and fitted
attributes it reads and sets.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import List, Optional

import numpy as np
import torch

from .lbfgs import LBFGS
from .mglvq import init_prototypes, median_glvq_em
from .nca import NCAReferences, nca_scale
from .objective_base import MetricObjective
from .ranks import Ranks
from .training import FitData, train_distances

__all__ = ["FitRounds"]


@dataclass
class _Round:
    """A round's state: its actual objective, the parameters and the prototypes."""

    objective: float
    params: List[torch.Tensor]
    prototypes: np.ndarray
    index: int


class FitRounds:
    """The rounds of a BEDL fit (mixed into :class:`~.bedl.BEDL`)."""

    def _alternate(self, cost, params, data: FitData):
        """Rounds of prototype selection and metric steps until a stop criterion holds; returns
        the last prototypes and the round with the lowest actual objective."""
        protos = None
        best: Optional[_Round] = None
        seen = set()
        self.loss_history_ = []
        self.actual_loss_history_ = []
        self.n_evals_ = []
        self.stop_reason_ = "max_rounds"
        self.n_rounds_ = 0
        for rnd in range(int(self.max_rounds) + 1):
            t_round = time.perf_counter()
            D = self._train_distances(cost, data)
            new = self._prototype_step(data, D, protos)
            # Pseudo mode optimises a surrogate: remember the round whose actual objective is
            # lowest (exact distances, the prototypes chosen on them, the regularisers).
            columns = None if data.candidates is None else np.searchsorted(data.candidates, new)
            objective = data.loss.on_matrix(D, new, data.y_idx, cost, columns)
            best = self._record_round(objective, params, new, rnd, best)
            key = frozenset(int(i) for i in new)
            n_moved = len(new) if protos is None else int(np.sum(~np.isin(new, protos)))
            stop = self._stop_reason(rnd, protos, key, seen, params)
            protos = new
            seen.add(key)
            if stop is not None:
                self.stop_reason_ = stop
                if self.verbose:
                    print(f"[BEDL] round {rnd}: {stop}; stop")
                break
            step = self._recorded_metric_step(cost, params, data, protos, rnd)
            if step is None:
                # the solver could not improve the metric: the distances, hence the
                # prototypes, stay as they are
                break
            loss0, loss1, n_eval = step
            if self.verbose:
                what = "initial prototypes" if rnd == 0 else f"{n_moved} prototype(s) moved"
                print(
                    f"[BEDL] round {rnd}: {what}; loss {loss0:.6g} -> "
                    f"{loss1:.6g} in {n_eval} evaluations ({time.perf_counter() - t_round:.3f} s)"
                )
        return protos, best

    def _record_round(self, objective: float, params, prototypes, rnd: int,
                      best: Optional[_Round]) -> _Round:
        """Records a round's actual objective; returns the better of it and ``best`` (the
        earlier round on ties), and remembers round 0."""
        self.actual_loss_history_.append(objective)
        if best is None or objective < best.objective:
            best = _Round(objective, [p.detach().clone() for p in params], prototypes, rnd)
        if rnd == 0:
            self._first_round = best
        return best

    def _stop_reason(self, rnd: int, previous, key: frozenset, seen: set,
                     params) -> Optional[str]:
        """Why the alternation stops before this round's metric step, or ``None``."""
        if previous is not None and key == frozenset(int(i) for i in previous):
            return "prototypes unchanged"
        if key in seen:
            return "prototypes cycle back to an earlier set"
        if rnd == int(self.max_rounds):
            return "max_rounds"
        if not params:
            return "no parameters to learn"
        return None

    #: ``loss="nca"`` stops when a round's actual objective improves on the previous round's
    #: by less than this fraction of it
    _NCA_RTOL = 1e-4

    def _nca_rounds(self, cost, params, data: FitData):
        """``loss="nca"``: rounds of a metric step on the neighbour objective over the
        references (the candidates), see the class docstring; returns the references and the
        round with the lowest actual objective."""
        refs = self.candidates_
        data.nca_refs = NCAReferences(data.y_idx, refs, bool(getattr(cost, "symmetric", False)))
        best: Optional[_Round] = None
        previous = None
        self.loss_history_ = []
        self.actual_loss_history_ = []
        self.n_evals_ = []
        self.stop_reason_ = "max_rounds"
        self.n_rounds_ = 0
        for rnd in range(int(self.max_rounds) + 1):
            t_round = time.perf_counter()
            D = self._train_distances(cost, data)
            if rnd == 0:  # the softmax's scale, fixed for the fit
                self.scale_ = nca_scale(D, data.nca_refs, float(self.nca_scale))
                data.loss = dataclasses.replace(data.loss, scale=self.scale_)
            objective = data.loss.on_matrix(D, data.nca_refs, cost)
            best = self._record_round(objective, params, refs, rnd, best)
            stop = None
            if previous is not None and not objective < previous - self._NCA_RTOL * abs(previous):
                stop = "objective not improved"
            elif rnd == int(self.max_rounds):
                stop = "max_rounds"
            elif not params:
                stop = "no parameters to learn"
            previous = objective
            if stop is not None:
                self.stop_reason_ = stop
                if self.verbose:
                    print(f"[BEDL] round {rnd}: {stop} ({objective:.6g}); stop")
                break
            step = self._recorded_metric_step(cost, params, data, refs, rnd)
            if step is None:
                break
            loss0, loss1, n_eval = step
            if self.verbose:
                print(f"[BEDL] round {rnd}: NCA objective {objective:.6g}; step {loss0:.6g} -> "
                      f"{loss1:.6g} in {n_eval} evaluations ({time.perf_counter() - t_round:.3f} s)")
        return refs, best

    def _keep_best_round(self, params, best: _Round, prototypes):
        """Return to the round with the lowest actual objective (its parameters and
        prototypes) if it is not the last."""
        if best.index != len(self.actual_loss_history_) - 1:
            with torch.no_grad():
                for p, saved in zip(params, best.params):
                    p.copy_(saved)
            prototypes = best.prototypes
            if self.verbose:
                print(f"[BEDL] keep round {best.index} (actual loss {best.objective:.6g}, the lowest)")
        self.best_round_ = int(best.index)
        return prototypes

    def _finish(self, data: FitData, prototypes) -> None:
        """The fitted prototype attributes, prototypes ordered by class."""
        order = np.argsort(data.y_idx[prototypes], kind="stable")
        prototypes = prototypes[order]
        self.prototype_indices_ = prototypes
        self.prototypes_ = [data.X[int(i)] for i in prototypes]
        self.prototype_labels_ = data.classes[data.y_idx[prototypes]]

    def _train_distances(self, cost, data: FitData) -> np.ndarray:
        """The actual distances of the training objects to the prototype candidates: ``(m, m)``
        (only ``i <= j`` for a symmetric cost, mirrored) or ``(m, C)`` with candidates."""
        return train_distances(data, self._fit_ranks())

    def _prototype_step(self, data: FitData, D: np.ndarray, previous) -> np.ndarray:
        """Median GLVQ on the distances ``D``, from the previous prototypes (first round: the
        class medoids and greedy additions)."""
        if previous is None:
            start = init_prototypes(D, data.y_idx, int(self.n_prototypes), data.candidates)
        else:
            start = previous
        ranks = self._fit_ranks()
        return median_glvq_em(D, data.y_idx, start, max_iter=100 * max(1, len(start)),
                              candidates=data.candidates,
                              split=ranks if ranks.size > 1 else None)[0]

    # -- the metric step ------------------------------------------------------

    def _recorded_metric_step(self, cost, params, data: FitData, prototypes, rnd: int):
        """:meth:`_metric_step`, counted and recorded in the histories; ``None`` (with the stop
        reason set) where it did not lower the loss, else ``(loss0, loss1, n_eval)``."""
        loss0, loss1, n_eval = self._metric_step(cost, params, data, prototypes)
        self.n_rounds_ += 1
        if not self.loss_history_:
            self.loss_history_.append(loss0)
        self.loss_history_.append(loss1)
        self.n_evals_.append(n_eval)
        if not loss1 < loss0:
            self.stop_reason_ = "metric not improved"
            if self.verbose:
                print(f"[BEDL] round {rnd}: metric not improved ({loss0:.6g}); stop")
            return None
        return loss0, loss1, n_eval

    def _metric_step(self, cost, params, data: FitData, prototypes):
        """One L-BFGS run over ``params`` (the learned parameters of ``cost``) on the loss of
        the data-to-prototype pairs; returns the loss at the start and at the end, and the
        number of gradient evaluations. A step never ends worse than it started (or at
        NaN/inf): then the parameters are restored."""
        objective = self._make_objective(cost, params, data, prototypes)
        solver = LBFGS(
            max_iter=int(self.max_eval),
            max_eval=int(self.max_eval),
            tolerance_grad=1e-7,
            tolerance_change=1e-9,
            history_size=self._LBFGS_HISTORY,
        )
        x0 = objective.get_flat()
        # without autograd in the objective, inference mode trims the dispatch overhead of
        # whatever small torch operations the evaluations still run
        with torch.enable_grad() if objective.uses_autograd else torch.inference_mode():
            x, loss0, final, _ = solver.minimize(objective.flat_value_and_grad, x0)
            if not math.isfinite(final) or final > loss0:
                x, final = x0, loss0
            objective.set_flat(x)
        for p in params:
            p.grad = None
        return loss0, final, objective.n_evals

    def _make_objective(self, cost, params, data: FitData, prototypes) -> MetricObjective:
        """The evaluator for this step, chosen and built by :attr:`objective_factory` (see
        :class:`~.training.ObjectiveFactory`)."""
        factory = self.objective_factory(self.mode, self.temperature, self._fit_ranks())
        return factory.build(cost, params, data, prototypes)

    def _fit_ranks(self) -> Ranks:
        ranks = getattr(self, "_ranks", None)
        return ranks if ranks is not None else Ranks()

