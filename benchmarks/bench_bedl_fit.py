"""BEDL fit time on the Strings data set: bedl_torch beside edist (1.2.2) in the same run.

Run: ``.venv/bin/python benchmarks/bench_bedl_fit.py [--n 100] [--repeats 5] [--threads 1]``.
edist is a benchmark-only peer (GPL; only imported and run here, never by the library).

Both fit on the same ``make_strings(n, seed)`` training strings with one prototype per class
and their default settings; the test error is measured on a fresh draw (median GLVQ with the
learned distance). Prints a Markdown table. The first bedl_torch fit in a process also pays a
one-time import inside ``torch.optim`` (torch._dynamo, several seconds); it is reported
separately ("cold") and excluded from the repeated ("warm") timings.
"""
from __future__ import annotations

import argparse
import platform
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


def _time_ours(Xtr, ytr, Xte, yte, repeats, **kw):
    times, model = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        model = BEDL(**kw).fit(Xtr, ytr)
        times.append(time.perf_counter() - t)
    err = 1.0 - model.score(Xte, yte)
    return times, err, model


def _time_edist(Xtr, ytr, Xte, yte, repeats):
    Xl = [list(x) for x in Xtr]
    times, model = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        model = edist_bedl.BEDL(1).fit(Xl, ytr)
        times.append(time.perf_counter() - t)
    # classify the test strings by the closest prototype under edist's learned distance
    protos = model._classifier._w
    plabels = np.asarray(ytr)[protos]
    D = np.array([[edist_sed.sed(list(x), Xl[p], model._delta) for p in protos] for x in Xte])
    err = float(np.mean(plabels[np.argmin(D, axis=1)] != np.asarray(yte)))
    return times, err


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
    BEDL(max_rounds=1, max_eval=2).fit(Xtr, ytr)
    cold = time.perf_counter() - t
    for label, kw in (
        ("bedl_torch BEDL (pseudo, default)", {}),
        ("bedl_torch BEDL (pseudo, max_rounds=1)", {"max_rounds": 1}),
        ("bedl_torch BEDL (exact)", {"mode": "exact"}),
    ):
        times, err, model = _time_ours(Xtr, ytr, Xte, yte, args.repeats, **kw)
        rows.append((label, times, err, f"rounds {model.n_rounds_}, evals {model.n_evals_}"))
    if edist_bedl is not None:
        times, err = _time_edist(Xtr, ytr, Xte, yte, args.edist_repeats)
        rows.append(("edist.bedl.BEDL(K=1)", times, err, "edist defaults (T=5)"))
    else:
        rows.append(("edist.bedl.BEDL(K=1)", [], float("nan"), "edist not installed"))

    print(f"Strings, {args.n} training / {args.n} test strings (seed {args.seed}); "
          f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); "
          f"{platform.processor() or platform.machine()}, {platform.python_version()}")
    print(f"first bedl_torch fit in the process (one-time torch.optim import): {cold:.2f} s\n")
    print("| method | fit time median (s) | min (s) | runs | test error | notes |")
    print("|---|---|---|---|---|---|")
    for label, times, err, notes in rows:
        if times:
            print(f"| {label} | {statistics.median(times):.3f} | {min(times):.3f} | {len(times)} "
                  f"| {100 * err:.1f}% | {notes} |")
        else:
            print(f"| {label} | - | - | 0 | - | {notes} |")


if __name__ == "__main__":
    main()
