"""The whole SST distance matrix (9,613 sentences, symmetric: i <= j computed) in one process.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_sst_matrix.py [--threads 2] [--trees]``.

Word sequences by default (the leaf sequences, whose distances equal the parse trees' under the
protocol's costs), ``--trees`` for the parse trees; the protocol's cosine costs over GloVe
(PCA fitted on all the words). Prints wall and CPU time, the DP cells computed and the CPU
nanoseconds per cell, with the CPU model and the load average.
"""
from __future__ import annotations

import argparse
import os
import time

import torch

import bedl_torch as bt
from bedl_torch.datasets import load
from bedl_torch.evaluation.protocol.data import SentimentCosts, leaf_sequence
from bench_common import cpu_model, load_average


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--trees", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    trees, _ = load("sentiment")
    words = [leaf_sequence(t) for t in trees]
    X = trees if args.trees else words
    cost = SentimentCosts().make(words, words)[0]
    sizes = [len(x) + 1 for x in X]
    total = sum(sizes)
    cells = (total * total + sum(s * s for s in sizes)) / 2  # pairs i <= j
    load0 = load_average()
    start, start_cpu = time.perf_counter(), time.process_time()
    with torch.no_grad():
        D = bt.pairwise_distances(X, cost=cost)
    wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    load1 = load_average()
    kind = "parse trees" if args.trees else "word sequences"
    print(f"SST {kind}, {len(X)} x {len(X)} (i <= j computed), {args.threads} thread(s): "
          f"wall {wall:.1f} s, CPU {cpu:.1f} s, {cells / 1e9:.2f} G DP cells, "
          f"{1e9 * cpu / cells:.2f} ns CPU per cell; all finite: {bool(torch.isfinite(D).all())}")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; load average before {load0}, after {load1}; "
          f"torch {torch.__version__}")


if __name__ == "__main__":
    main()
