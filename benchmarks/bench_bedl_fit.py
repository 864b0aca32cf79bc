"""BEDL fit time on the Strings data set: bedl_torch beside edist (1.2.2) in the same run, and
optionally beside another build of bedl_torch (an earlier commit) in alternating rounds.

Run: ``.venv/bin/python benchmarks/bench_bedl_fit.py [--n 100] [--repeats 5] [--threads 1]
[--compare-with TREE]``. edist is a benchmark-only peer (GPL; only imported and run here,
never by the library).

Every bedl_torch fit runs in a worker process per build (``PYTHONPATH`` set to the build's
source tree; this tree's worker has this process's environment), warmed up by a tiny fit first,
whose time is printed: builds whose metric step used ``torch.optim.LBFGS`` pay the one-time
import of torch._dynamo there (1.5-4 s per process, not fit work). CPU ms per evaluation is a
fit's CPU time over its L-BFGS evaluations (the rounds' distance matrices included), which
compares builds whose fits take different numbers of evaluations. Repeats alternate between the builds (and their order
within a repeat), so both see the same phases of a loaded machine. Both fit on the same
``make_strings(n, seed)`` training strings with one prototype per class; the test error is
measured on a fresh draw (median GLVQ with the learned distance). Prints the machine, the load
average (``os.getloadavg``) before and after the timings, and Markdown tables of wall-clock and
CPU seconds (on a loaded machine the wall time also counts waiting for a core).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

from bench_common import cpu_model

#: the fits timed per build: (label, BEDL keyword arguments)
CONFIGS = (
    ('pseudo (default, alignments="step")', {}),
    ("pseudo, max_rounds=1", {"max_rounds": 1}),
    ('pseudo, alignments="initial"', {"alignments": "initial"}),
    ("exact", {"mode": "exact"}),
)


def _cpu_seconds() -> float:
    """User + system CPU time of this process and its finished children (edist's BEDL runs
    its distance matrices and backtraces in a multiprocessing pool)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


# -- the worker: fits with one build of bedl_torch --------------------------------------------


def worker(args) -> None:
    """Answer one JSON request per stdin line (``{"config": i}``) with one JSON line: the wall
    and CPU seconds of ``BEDL(**CONFIGS[i][1]).fit`` and what the fit did."""
    import torch

    from bedl_torch.datasets import make_strings
    from bedl_torch.learning import BEDL

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    Xtr, ytr = make_strings(args.n, seed=args.seed)
    Xte, yte = make_strings(args.n, seed=args.seed + 1000)
    t = time.perf_counter()
    BEDL(max_rounds=1, max_eval=2).fit(Xtr, ytr)  # warm-up: the one-time torch._dynamo import
    hello = {"cold": time.perf_counter() - t, "torch": torch.__version__,
             "threads": torch.get_num_threads()}
    print(json.dumps(hello), flush=True)
    for line in sys.stdin:
        kw = CONFIGS[json.loads(line)["config"]][1]
        t, c = time.perf_counter(), _cpu_seconds()
        model = BEDL(**kw).fit(Xtr, ytr)
        wall, cpu = time.perf_counter() - t, _cpu_seconds() - c
        norms = model.cost_.embedding.detach().norm(dim=1).tolist()
        print(json.dumps({
            "wall": wall, "cpu": cpu, "error": 1.0 - model.score(Xte, yte),
            "evals": [int(e) for e in model.n_evals_], "kept": int(model.best_round_),
            "ratio": max(norms[:2]) / min(norms[2:]),  # Figure 1: a, b within half of c, d
        }), flush=True)


class Worker:
    """A worker process for the build in ``tree`` (None: the one this process imports, from
    the same environment and working directory)."""

    def __init__(self, tree, args):
        env = dict(os.environ)
        if tree is not None:
            env["PYTHONPATH"] = os.path.abspath(tree)
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--n", str(args.n),
               "--seed", str(args.seed), "--threads", str(args.threads)]
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        self.hello = json.loads(self.proc.stdout.readline())

    def fit(self, config: int) -> dict:
        self.proc.stdin.write(json.dumps({"config": config}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the worker process ended")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


# -- edist ------------------------------------------------------------------------------------


def _time_edist(Xtr, ytr, Xte, yte, repeats):
    import edist.bedl as edist_bedl
    import edist.sed as edist_sed

    Xl = [list(x) for x in Xtr]
    times, cpu, model = [], [], None
    for _ in range(repeats):
        t, c = time.perf_counter(), _cpu_seconds()
        model = edist_bedl.BEDL(1).fit(Xl, ytr)
        times.append(time.perf_counter() - t)
        cpu.append(_cpu_seconds() - c)
    # classify the test strings by the closest prototype under edist's learned distance
    protos = model._classifier._w
    plabels = np.asarray(ytr)[protos]
    D = np.array([[edist_sed.sed(list(x), Xl[p], model._delta) for p in protos] for x in Xte])
    err = float(np.mean(plabels[np.argmin(D, axis=1)] != np.asarray(yte)))
    return times, cpu, err


# -- main -------------------------------------------------------------------------------------


def _summary(runs):
    wall = [r["wall"] for r in runs]
    return statistics.median(wall), min(wall), statistics.median(r["cpu"] for r in runs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100, help="training strings (and test strings)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--edist-repeats", type=int, default=2, help="0: skip edist")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: leave)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*", type=int, default=None,
                    help="indices into CONFIGS (default: all)")
    ap.add_argument("--compare-with", metavar="TREE", default=None,
                    help="source tree of another build (its extension built in place), timed "
                         "in alternating rounds")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)

    configs = args.only if args.only is not None else list(range(len(CONFIGS)))
    builds = {"this tree": Worker(None, args)}
    if args.compare_with is not None:
        builds["previous"] = Worker(args.compare_with, args)
    names = list(builds)
    runs = {(b, c): [] for b in names for c in configs}
    load_before = os.getloadavg()
    for rep in range(args.repeats):
        order = names if rep % 2 == 0 else names[::-1]
        for c in configs:
            for b in order:
                runs[b, c].append(builds[b].fit(c))
    edist = None
    if args.edist_repeats > 0:
        try:
            from bedl_torch.datasets import make_strings

            Xtr, ytr = make_strings(args.n, seed=args.seed)
            Xte, yte = make_strings(args.n, seed=args.seed + 1000)
            edist = _time_edist(Xtr, ytr, Xte, yte, args.edist_repeats)
        except ImportError:
            edist = None
    load_after = os.getloadavg()
    for w in builds.values():
        w.close()

    hello = builds["this tree"].hello
    print(f"Strings, {args.n} training / {args.n} test strings (seed {args.seed}); torch "
          f"{hello['torch']}, {hello['threads']} thread(s); {cpu_model()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"load average (1, 5, 15 min) before: {', '.join(f'{v:.2f}' for v in load_before)}; "
          f"after: {', '.join(f'{v:.2f}' for v in load_after)}")
    print("warm-up fit per worker: "
          + ", ".join(f"{b} {w.hello['cold']:.2f} s" for b, w in builds.items()) + "\n")
    cols = " | ".join(f"{b}: wall median (min) | {b}: CPU median | {b}: CPU ms per evaluation"
                      for b in names)
    extra = " | this / previous (wall medians)" if len(names) > 1 else ""
    print(f"| BEDL.fit | {cols}{extra} | test error | runs | L-BFGS evaluations per metric step "
          f"(kept round), Figure 1 ratio |")
    print("|---" * (1 + 3 * len(names) + (len(names) > 1) + 3) + "|")
    for c in configs:
        cells = []
        for b in names:
            med, lo, cpu = _summary(runs[b, c])
            per_eval = 1e3 * cpu / max(1, sum(runs[b, c][-1]["evals"]))
            cells.append(f"{med:.3f} ({lo:.3f}) | {cpu:.3f} | {per_eval:.2f}")
        if len(names) > 1:
            cells.append(f"{_summary(runs[names[0], c])[0] / _summary(runs[names[1], c])[0]:.2f}")
        errors = "/".join(f"{100 * runs[b, c][-1]['error']:.0f}%" for b in names)
        notes = "; ".join(f"{b} {runs[b, c][-1]['evals']} ({runs[b, c][-1]['kept']}), "
                          f"max(|a|,|b|)/min(|c|,|d|) {runs[b, c][-1]['ratio']:.2f}"
                          for b in names)
        print(f"| {CONFIGS[c][0]} | {' | '.join(cells)} | {errors} | {len(runs[names[0], c])} "
              f"| {notes} |")
    pseudo = [c for c in configs if not CONFIGS[c][1]]
    exact = [c for c in configs if CONFIGS[c][1] == {"mode": "exact"}]
    if pseudo and exact:
        print("\nexact / pseudo (default), wall medians: " + ", ".join(
            f"{b} {_summary(runs[b, exact[0]])[0] / _summary(runs[b, pseudo[0]])[0]:.2f}"
            for b in names))
    if edist is not None and pseudo:
        times, cpu, err = edist
        print(f"\nedist.bedl.BEDL(K=1) (defaults, T=5), this process: wall median "
              f"{statistics.median(times):.3f} s (min {min(times):.3f}), CPU median "
              f"{statistics.median(cpu):.3f} s, {len(times)} runs, test error {100 * err:.0f}%; "
              f"edist / this tree (default fit, wall medians): "
              f"{statistics.median(times) / _summary(runs['this tree', pseudo[0]])[0]:.1f}x")


if __name__ == "__main__":
    main()
