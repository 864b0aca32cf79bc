"""Per-call overhead of small matrices: the forward of a 100 x 2 matrix of 12-symbol strings
(as BEDL's predictions on Strings) against the kernel alone, on this tree and optionally on a
base build, in alternating processes.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_overhead.py [--base OTHER_TREE]
[--rounds 3]``. Rows: the symbol-table kernel on prebuilt arguments (200 pairs);
``pairwise_distances(X, Y, cost)`` with an ``EuclideanCost`` without and with gradients (the
forward alone) and with a ``UnitCost``; ``BEDL.decision_distances`` of a fitted model. Every
call gets the same list objects, so what a build caches about them is reused. 1 thread;
medians over rounds of each process's best-of times.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from bench_common import best_seconds, cpu_model, load_average

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = (
    ("kernel", "the kernel alone (sed_symbols_cpu, prebuilt arguments, 200 pairs)"),
    ("euclidean", "pairwise_distances, EuclideanCost, no gradient"),
    ("euclidean_grad", "pairwise_distances, EuclideanCost, with gradient (forward)"),
    ("unit", "pairwise_distances, UnitCost, no gradient"),
    ("bedl", "BEDL.decision_distances (100 strings, 2 prototypes)"),
)


def measure() -> dict:
    import random

    import torch

    import bedl_torch as bt
    from bedl_torch import _ext
    from bedl_torch.datasets import make_strings
    from bedl_torch.ops import FlatTable, PairBatch

    torch.set_num_threads(1)
    rng = random.Random(0)
    X = ["".join(rng.choice("abcd") for _ in range(12)) for _ in range(100)]
    Y = ["".join(rng.choice("abcd") for _ in range(12)) for _ in range(2)]
    eu, unit = bt.EuclideanCost(list("abcd")), bt.UnitCost(list("abcd"))
    b = PairBatch.from_tables(FlatTable(X, "X"), FlatTable(Y, "Y"),
                              torch.arange(100).repeat_interleave(2), torch.arange(2).repeat(100))
    table = eu.symbol_table().detach()
    args = (table, b.x_table.flat_labels(eu, "error"), b.x_table.ptr,
            b.y_table.flat_labels(eu, "error"), b.y_table.ptr, b.pair_x, b.pair_y)
    model = bt.BEDL(max_rounds=1, max_eval=20).fit(*make_strings(40, seed=0))

    def no_grad(fn):
        def run():
            with torch.no_grad():
                fn()
        return run

    fns = {
        "kernel": lambda: _ext.sed_symbols_cpu(*args, False, 1e-9),
        "euclidean": no_grad(lambda: bt.pairwise_distances(X, Y, eu)),
        "euclidean_grad": lambda: bt.pairwise_distances(X, Y, eu),
        "unit": no_grad(lambda: bt.pairwise_distances(X, Y, unit)),
        "bedl": lambda: model.decision_distances(X),
    }
    return {name: best_seconds(fn, repeat=7, min_time=0.2) for name, fn in fns.items()}


def _run_build(tree: str) -> dict:
    env = dict(os.environ, PYTHONPATH=tree, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, os.path.join(HERE, "bench_overhead.py"), "--worker"],
                         env=env, capture_output=True, text=True, check=True, cwd=tree)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="another source tree (with its extension built)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure()))
        return
    builds = {"this tree": os.path.dirname(HERE)}
    if args.base:
        builds["base"] = os.path.abspath(args.base)
    print(f"{cpu_model()}, load average {load_average()} before")
    runs = {name: [] for name in builds}
    for _ in range(args.rounds):
        for name, tree in builds.items():
            runs[name].append(_run_build(tree))
    med = {name: {row: statistics.median(r[row] for r in rs) for row, _ in ROWS}
           for name, rs in runs.items()}
    print(f"load average {load_average()} after\n")
    names = list(builds)
    print("| measurement | " + " | ".join(f"{n}: ms (x kernel)" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for row, text in ROWS:
        cells = [f"{med[n][row] * 1e3:.3f} ({med[n][row] / med[n]['kernel']:.1f}x)" for n in names]
        print(f"| {text} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
