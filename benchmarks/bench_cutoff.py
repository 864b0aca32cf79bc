"""What the kernels' cutoff (``max_distance``) saves in a real search: the exact calls of one
``bedl_torch.kneighbors`` run (k = 10) are captured and replayed with their thresholds and
without, alternating, in the same process.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_cutoff.py [--repeats 3] [--n-trees 600]``.

Data: 600 sequences of each length scale (30, 100 and 300 symbols at most, half that at least)
over 20 symbols, mutated copies of 30 random seeds (so a row's neighbours are close and its
threshold falls well below the typical distance), under a random ``EuclideanCost``; and
standard-library syntax trees (``bench_search.py``'s) under unit costs. Reports per case the
kernel pairs replayed, how many came back as beyond their threshold (``inf``), and the median
seconds with and without the thresholds.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

import torch

import bedl_torch as bt
import bedl_torch._ext as ext
from bench_common import cpu_model, load_average

SEQ_THRESHOLD_ARG, TREE_THRESHOLD_ARG = 9, 11  # max_distance's position in the kernels' arguments


def clustered_sequences(longest: int, n: int = 600, seeds: int = 30, symbols: int = 20):
    rng = random.Random(longest)
    alphabet = [chr(97 + i) for i in range(symbols)]
    roots = [[rng.choice(alphabet) for _ in range(rng.randint(longest // 2, longest))] for _ in range(seeds)]
    out = []
    for _ in range(n):
        s = list(rng.choice(roots))
        for _ in range(rng.randint(0, max(1, len(s) // 5))):
            s[rng.randrange(len(s))] = rng.choice(alphabet)
        out.append(s)
    return out, alphabet


def captured_calls(name: str, X, cost, position: int):
    """The kernel calls with thresholds of one ``kneighbors(X, k=10)``."""
    kernel = getattr(ext, name)
    calls = []

    def capture(*args):
        if len(args) > position and args[position] is not None:
            calls.append(args)
        return kernel(*args)

    setattr(ext, name, capture)
    try:
        bt.kneighbors(X, k=10, cost=cost)
    finally:
        setattr(ext, name, kernel)
    return kernel, calls


def replay(kernel, calls, position: int, repeats: int):
    with_t, without_t = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        for args in calls:
            kernel(*args)
        with_t.append(time.perf_counter() - start)
        start = time.perf_counter()
        for args in calls:
            kernel(*args[:position])
        without_t.append(time.perf_counter() - start)
    stopped = sum(int(torch.isinf(kernel(*args)[0]).sum()) for args in calls)
    return statistics.median(with_t), statistics.median(without_t), stopped


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-trees", type=int, default=600)
    args = parser.parse_args()
    load_before = load_average()
    cases = []
    torch.manual_seed(0)
    for longest in (30, 100, 300):
        X, alphabet = clustered_sequences(longest)
        cost = bt.EuclideanCost(alphabet, torch.randn(len(alphabet), 4, dtype=torch.float64))
        cases.append((f"sequences of {longest // 2}-{longest} symbols, Euclidean costs", "sed_symbols_cpu",
                      X, cost, SEQ_THRESHOLD_ARG))
    from bench_search import stdlib_functions

    trees = stdlib_functions(args.n_trees)[0]
    cases.append((f"{args.n_trees} syntax trees, unit costs", "ted_symbols_cpu", trees, None, TREE_THRESHOLD_ARG))
    rows = []
    for name, kernel_name, X, cost, position in cases:
        kernel, calls = captured_calls(kernel_name, X, cost, position)
        pairs = sum(len(a[position - 3]) for a in calls)
        rows.append((name, pairs, *replay(kernel, calls, position, args.repeats)))
    print(f"command: `{' '.join([os.path.basename(sys.executable)] + sys.argv)}`")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} logical cores, {torch.get_num_threads()} threads; "
          f"load average before {load_before}, after {load_average()}")
    print()
    print("| data | kernel pairs | beyond (inf) | with thresholds s | without s | ratio |")
    print("|---|---|---|---|---|---|")
    for name, pairs, with_t, without_t, stopped in rows:
        print(f"| {name} | {pairs} | {stopped} | {with_t:.3f} | {without_t:.3f} | {with_t / without_t:.2f} |")


if __name__ == "__main__":
    main()
