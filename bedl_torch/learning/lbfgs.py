"""L-BFGS with a strong-Wolfe line search on a flat numpy vector: BEDL's metric-step solver.

The iteration is that of ``torch.optim.LBFGS(line_search_fn="strong_wolfe")``: the same
two-loop direction (here through the curvature pairs' Gram products, see :func:`_two_loop`),
curvature test ``y.s > 1e-10``, first step ``min(1, 1 / |g|_1)``, bracketing and
cubic-interpolation zoom, stop rules and evaluation budget. A metric step therefore takes the
same path as with torch's optimiser up to rounding: dot products, the direction and ``x + t d``
(which torch fuses into one multiply-add) are rounded differently, which moves the iterates by a
few units in the last place. Why: BEDL's problems have tens of parameters, where torch's
per-operation dispatch on 0-dim and 16-element tensors cost more than the objective itself.

The line search's scalars stay numpy scalars of the vector's dtype where torch's stay 0-dim
tensors, so float32 problems also compute it in float32.
"""
from __future__ import annotations

from typing import Callable, Tuple

import numpy as np

__all__ = ["LBFGS"]

Objective = Callable[[np.ndarray], Tuple[float, np.ndarray]]


def _cubic_minimizer(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through ``(x1, f1)``, ``(x2, f2)`` with slopes ``g1``, ``g2``,
    clipped to ``bounds`` (default: between the two points); their midpoint where the cubic
    has no real minimiser."""
    if bounds is not None:
        lo, hi = bounds
    else:
        lo, hi = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = np.sqrt(d2_square)
        if x1 <= x2:
            t = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            t = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(t, lo), hi)
    return (lo + hi) / 2.0


def _strong_wolfe(fun: Objective, x, t, d, f, g, gtd, max_ls, c1=1e-4, c2=0.9,
                  tolerance_change=1e-9):
    """Step length along ``d`` from ``x`` (loss ``f``, gradient ``g``, slope ``gtd``) that
    satisfies the strong Wolfe conditions, within ``max_ls`` further evaluations after the
    first: returns ``(f_new, g_new, t, evaluations)``."""
    d_norm = np.abs(d).max()
    f_new, g_new = fun(x + t * d)
    evals = 1
    gtd_new = np.dot(g_new, d)

    # bracket an interval that holds a point satisfying the conditions
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        # extrapolate by cubic interpolation
        t_next = _cubic_minimizer(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                  bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = t_next
        f_new, g_new = fun(x + t * d)
        evals += 1
        gtd_new = np.dot(g_new, d)
        ls_iter += 1

    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    # zoom: shrink the bracket until a point satisfies the conditions
    insufficient_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_minimizer(bracket[0], bracket_f[0], bracket_gtd[0],
                             bracket[1], bracket_f[1], bracket_gtd[1])
        # a trial too close to an end of the bracket moves to 0.1 of its length from that end
        # (at once if it is at the end or the previous trial was also too close)
        top, bottom = max(bracket), min(bracket)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:
            if insufficient_progress or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False

        f_new, g_new = fun(x + t * d)
        evals += 1
        gtd_new = np.dot(g_new, d)
        ls_iter += 1

        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low]:
            # not sufficiently lower than at x, or not the lowest point: the new high end
            bracket[high], bracket_f[high] = t, f_new
            bracket_g[high], bracket_gtd[high] = g_new, gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                # the old low end becomes the high end
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low] = t, f_new
            bracket_g[low], bracket_gtd[low] = g_new, gtd_new

    return bracket_f[low], bracket_g[low], bracket[low], evals


def _two_loop(g, steps, dirs, rho, h_diag):
    """The L-BFGS direction ``-H g`` of the two-loop recursion over the curvature pairs
    ``(steps[i], dirs[i])`` (oldest first), with ``h_diag`` the initial inverse Hessian scale.

    The recursion's dot products with the running vector are expanded into the pairs' Gram
    products (``S g``, ``S Y^T``, ``Y r``), so that each loop runs over scalars and the vectors
    are formed by two matrix products: the same direction up to rounding, in a dozen numpy
    calls instead of four per pair.
    """
    k = len(dirs)
    if k == 0:
        return -g * h_diag
    S, Y = np.array(steps), np.array(dirs)
    sg = (S @ g).tolist()
    sy = (S @ Y.T).tolist()  # sy[i][j] = s_i . y_j
    al = [0.0] * k
    for i in range(k - 1, -1, -1):  # newest first: q = -g - sum_{j > i} al_j y_j
        row = sy[i]
        acc = -sg[i]
        for j in range(i + 1, k):
            acc -= al[j] * row[j]
        al[i] = acc * rho[i]
    r = -(g + np.array(al, dtype=g.dtype) @ Y) * h_diag
    yr = (Y @ r).tolist()
    c = [0.0] * k
    for i in range(k):  # oldest first: r + sum_{j < i} c_j s_j
        acc = yr[i]
        for j in range(i):
            acc += c[j] * sy[j][i]
        c[i] = al[i] - acc * rho[i]
    return r + np.array(c, dtype=g.dtype) @ S


class LBFGS:
    """Minimises a function of a flat numpy vector from its value and gradient.

    Args:
        max_iter, max_eval: most iterations and most evaluations of ``fun``.
        tolerance_grad: stop when the largest gradient entry is at most this.
        tolerance_change: stop when a step, the change of the loss or the slope along the
            search direction is below this.
        history_size: curvature pairs kept.
        lr: the first trial step length of every line search after the first iteration.
    """

    def __init__(self, max_iter: int = 20, max_eval: int = 25, tolerance_grad: float = 1e-7,
                 tolerance_change: float = 1e-9, history_size: int = 100, lr: float = 1.0):
        self.max_iter, self.max_eval = int(max_iter), int(max_eval)
        self.tolerance_grad, self.tolerance_change = tolerance_grad, tolerance_change
        self.history_size, self.lr = int(history_size), lr

    def minimize(self, fun: Objective, x0: np.ndarray) -> Tuple[np.ndarray, float, float, int]:
        """Run from ``x0`` (1-D float array, not modified). ``fun(x)`` returns the loss (a
        float) and its gradient (an array like ``x``, which the solver does not modify and
        ``fun`` must not reuse). Returns ``(x, loss at x0, loss at x, evaluations)``."""
        x = np.array(x0, copy=True)
        loss, g = fun(x)
        loss0 = loss = float(loss)
        evals = 1
        if np.abs(g).max() <= self.tolerance_grad:
            return x, loss0, loss, evals

        dirs, steps, rho = [], [], []  # curvature pairs y, s and 1 / (y.s)
        d = t = g_prev = None
        h_diag = 1
        n_iter = 0
        while n_iter < self.max_iter:
            n_iter += 1
            if n_iter == 1:
                d = -g
            else:
                y = g - g_prev
                s = d * t
                ys = np.dot(y, s)
                if ys > 1e-10:
                    if len(dirs) == self.history_size:
                        dirs.pop(0)
                        steps.pop(0)
                        rho.pop(0)
                    dirs.append(y)
                    steps.append(s)
                    rho.append(float(1.0 / ys))
                    h_diag = ys / np.dot(y, y)
                d = _two_loop(g, steps, dirs, rho, h_diag)
            g_prev = g
            loss_prev = loss

            t = min(1.0, 1.0 / np.abs(g).sum()) * self.lr if n_iter == 1 else self.lr
            gtd = np.dot(g, d)
            if gtd > -self.tolerance_change:
                break
            loss, g, t, ls_evals = _strong_wolfe(fun, x, t, d, loss, g, gtd,
                                                 max_ls=self.max_eval - evals,
                                                 tolerance_change=self.tolerance_change)
            x = x + t * d
            evals += ls_evals
            if n_iter == self.max_iter or evals >= self.max_eval:
                break
            if np.abs(g).max() <= self.tolerance_grad:
                break
            if np.abs(d * t).max() <= self.tolerance_change:
                break
            if abs(loss - loss_prev) < self.tolerance_change:
                break
        return x, loss0, float(loss), evals
