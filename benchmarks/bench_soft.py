"""The soft edit distance against the distance and the distance + P, in the same run.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_soft.py [--quick] [--temperature T]``.

One thread, one batched kernel call over all pairs (20 pairs of 100-node random trees with
Euclidean costs of random 5-d embeddings, the gap at the origin; and 4 pairs of sequences of
length 300), padded costs for every quantity, so that the kernels compare like for like. Prints
a Markdown table: milliseconds per pair and the ratio to the distance.
"""
from __future__ import annotations

import argparse
import os
import platform
import random
import sys

import numpy as np
import torch

import bedl_torch as bt
from bedl_torch import _ext

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_core import random_tree, timeit  # noqa: E402


def euclidean_costs(batch: bt.PairBatch, seed: int) -> torch.Tensor:
    """Padded costs ||e(a) - e(b)|| of random 5-d embeddings per node, ||e(a)|| for the gap."""
    gen = torch.Generator().manual_seed(seed)
    costs = torch.zeros(batch.shape, dtype=torch.float64)
    for k in range(len(batch)):
        m, n = int(batch.m[k]), int(batch.n[k])
        ex = torch.cat([torch.randn(m, 5, generator=gen, dtype=torch.float64), torch.zeros(1, 5, dtype=torch.float64)])
        ey = torch.cat([torch.randn(n, 5, generator=gen, dtype=torch.float64), torch.zeros(1, 5, dtype=torch.float64)])
        costs[k, : m + 1, : n + 1] = torch.cdist(ex, ey)
    return costs


def kernels(batch: bt.PairBatch, temperature: float):
    """(name, callable) for each quantity: the kernel operators on the batch's padded costs."""
    def call(c, what):
        if batch.kind == "tree":
            args = (c, batch.x_table.sizes, batch.x_table.ptr, batch.y_table.sizes, batch.y_table.ptr,
                    batch.pair_x, batch.pair_y)
            if what == "soft":
                return lambda: _ext.ted_soft_cpu(*args, temperature, False)
            if what == "soft_grad":
                return lambda: _ext.ted_soft_cpu(*args, temperature, True)
            return lambda: _ext.ted_cpu(*args, what == "coopt", 1e-9)
        if what == "soft":
            return lambda: _ext.sed_soft_cpu(c, batch.m, batch.n, temperature, False)
        if what == "soft_grad":
            return lambda: _ext.sed_soft_cpu(c, batch.m, batch.n, temperature, True)
        return lambda: _ext.sed_cpu(c, batch.m, batch.n, what == "coopt", 1e-9)
    return call


def measure(batch: bt.PairBatch, costs: torch.Tensor, temperature: float, rounds: int):
    """Milliseconds per pair, best of ``rounds``; the quantities alternate within a round so
    that all see the same phases of a machine whose speed drifts."""
    call = kernels(batch, temperature)
    names = ("distance", "coopt", "soft", "soft_grad")
    fns = {name: call(costs, name) for name in names}
    best = {name: float("inf") for name in names}
    for _ in range(rounds):
        for name in names:
            best[name] = min(best[name], timeit(fns[name], repeat=1, min_time=0.3) / len(batch) * 1e3)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--temperature", type=float, default=1.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rounds = 2 if args.quick else 5
    rng = random.Random(1)
    trees = bt.PairBatch(*zip(*[(random_tree(100, "abcde", rng), random_tree(100, "abcde", rng))
                                for _ in range(20)]))
    seq_rng = np.random.default_rng(2)
    seqs = bt.PairBatch([list(seq_rng.integers(0, 20, 300)) for _ in range(4)],
                        [list(seq_rng.integers(0, 20, 300)) for _ in range(4)])
    rows = []
    for label, batch in (("20 pairs of 100-node random trees", trees), ("4 pairs of sequences of length 300", seqs)):
        costs = euclidean_costs(batch, seed=3)
        t = measure(batch, costs, args.temperature, rounds)
        base = t["distance"]
        rows.append((label, "distance", t["distance"], base))
        rows.append((label, "distance + P", t["coopt"], base))
        rows.append((label, f"soft distance (T = {args.temperature:g})", t["soft"], base))
        rows.append((label, f"soft distance + gradient (T = {args.temperature:g})", t["soft_grad"], base))
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch "
          f"{torch.__version__}, 1 thread, load average {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print()
    print("| inputs | quantity | ms per pair | ratio to the distance |")
    print("|---|---|---|---|")
    for label, what, ms, base in rows:
        print(f"| {label} | {what} | {ms:.4g} | {ms / base:.2f}x |")


if __name__ == "__main__":
    main()
