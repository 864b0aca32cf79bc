"""BEDL fit time on the Strings data set: bedl_torch beside edist (1.2.2) in the same run.

Run: ``.venv/bin/python benchmarks/bench_bedl_fit.py [--n 100] [--repeats 5] [--threads 1]``.
edist is a benchmark-only peer (GPL; only imported and run here, never by the library).

Both fit on the same ``make_strings(n, seed)`` training strings with one prototype per class
and their default settings; the test error is measured on a fresh draw (median GLVQ with the
learned distance). Prints a Markdown table (wall-clock and CPU seconds: on a loaded machine the
wall time also counts waiting for a core) and the load average (``os.getloadavg``) before and
after the timings. The first ``torch.optim.LBFGS`` in a process imports torch._dynamo (1.5-4 s,
once per process, not fit work); a tiny warm-up fit outside the timings pays it, and its time
is printed separately ("cold").
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import time

import numpy as np
import torch

from bedl_torch.datasets import make_strings
from bedl_torch.learning import BEDL

try:
    import edist.bedl as edist_bedl
    import edist.sed as edist_sed
except ImportError:  # pragma: no cover
    edist_bedl = None


def _cpu_seconds() -> float:
    """User + system CPU time of this process and its finished children (edist's BEDL runs
    its distance matrices and backtraces in a multiprocessing pool)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(fit):
    t, c = time.perf_counter(), _cpu_seconds()
    model = fit()
    return model, time.perf_counter() - t, _cpu_seconds() - c


def _time_ours(Xtr, ytr, Xte, yte, repeats, **kw):
    times, cpu, model = [], [], None
    for _ in range(repeats):
        model, wall, c = _timed(lambda: BEDL(**kw).fit(Xtr, ytr))
        times.append(wall)
        cpu.append(c)
    err = 1.0 - model.score(Xte, yte)
    return times, cpu, err, model


def _time_edist(Xtr, ytr, Xte, yte, repeats):
    Xl = [list(x) for x in Xtr]
    times, cpu, model = [], [], None
    for _ in range(repeats):
        model, wall, c = _timed(lambda: edist_bedl.BEDL(1).fit(Xl, ytr))
        times.append(wall)
        cpu.append(c)
    # classify the test strings by the closest prototype under edist's learned distance
    protos = model._classifier._w
    plabels = np.asarray(ytr)[protos]
    D = np.array([[edist_sed.sed(list(x), Xl[p], model._delta) for p in protos] for x in Xte])
    err = float(np.mean(plabels[np.argmin(D, axis=1)] != np.asarray(yte)))
    return times, cpu, err


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100, help="training strings (and test strings)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--edist-repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: leave)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    Xtr, ytr = make_strings(args.n, seed=args.seed)
    Xte, yte = make_strings(args.n, seed=args.seed + 1000)

    rows = []
    t = time.perf_counter()
    BEDL(max_rounds=1, max_eval=2).fit(Xtr, ytr)  # warm-up: the one-time torch._dynamo import
    cold = time.perf_counter() - t
    load_before = os.getloadavg()
    for label, kw in (
        ('bedl_torch BEDL (pseudo, default: alignments="step")', {}),
        ("bedl_torch BEDL (pseudo, max_rounds=1)", {"max_rounds": 1}),
        ('bedl_torch BEDL (pseudo, alignments="initial")', {"alignments": "initial"}),
        ("bedl_torch BEDL (exact)", {"mode": "exact"}),
    ):
        times, cpu, err, model = _time_ours(Xtr, ytr, Xte, yte, args.repeats, **kw)
        norms = model.cost_.embedding.detach().norm(dim=1).tolist()
        ratio = max(norms[:2]) / min(norms[2:])  # Figure 1: a, b within half the norm of c, d
        rows.append((label, times, cpu, err,
                     f"rounds {model.n_rounds_} (kept {model.best_round_}), evals {model.n_evals_}, "
                     f"max(|a|,|b|)/min(|c|,|d|) = {ratio:.2f}"))
    if edist_bedl is not None:
        times, cpu, err = _time_edist(Xtr, ytr, Xte, yte, args.edist_repeats)
        rows.append(("edist.bedl.BEDL(K=1)", times, cpu, err, "edist defaults (T=5)"))
    else:
        rows.append(("edist.bedl.BEDL(K=1)", [], [], float("nan"), "edist not installed"))

    load_after = os.getloadavg()
    print(f"Strings, {args.n} training / {args.n} test strings (seed {args.seed}); "
          f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); "
          f"{platform.processor() or platform.machine()}, {platform.python_version()}, "
          f"{os.cpu_count()} CPUs")
    print(f"load average (1, 5, 15 min) before: {', '.join(f'{v:.2f}' for v in load_before)}; "
          f"after: {', '.join(f'{v:.2f}' for v in load_after)}")
    print(f"warm-up fit (pays the one-time torch._dynamo import of torch.optim): {cold:.2f} s\n")
    ref = statistics.median(rows[-1][1]) if rows[-1][1] else float("nan")
    print("| method | wall median (s) | wall min (s) | CPU median (s) | runs "
          "| edist wall / this wall (medians) | test error | notes |")
    print("|---|---|---|---|---|---|---|---|")
    for label, times, cpu, err, notes in rows:
        if times:
            med = statistics.median(times)
            print(f"| {label} | {med:.3f} | {min(times):.3f} | {statistics.median(cpu):.3f} "
                  f"| {len(times)} | {ref / med:.1f} | {100 * err:.1f}% | {notes} |")
        else:
            print(f"| {label} | - | - | - | 0 | - | - | {notes} |")


if __name__ == "__main__":
    main()
