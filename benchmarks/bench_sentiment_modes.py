"""Exact mode against pseudo mode on Sentiment training samples: the time of a BEDL fit in each
mode, as the protocol fits them (the issue's goal: exact at most 2x pseudo).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_sentiment_modes.py [--samples 3]
[--k 5] [--threads 1]``.

Data: the Sentiment data set as the protocol uses it (word sequences of the parse trees, the
cosine costs over GloVe 6B 50d reduced by PCA on each sample's words, unknown words at the
origin); a sample is 300 sentences drawn at random (seed ``s``) from all 9,613, as the
protocol's training sample of a fold. BEDL: ``n_prototypes=K``, ``beta = 2 K m 1e-4`` (the
grid's middle), defaults otherwise (``max_rounds`` 5, ``max_eval`` 200); the two modes start
from the same costs and prototypes. Prints per sample the fit times (wall and CPU), rounds and
evaluations of each mode and the ratios; then the medians; the command, CPU model and load.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

from bedl_torch.evaluation.protocol.data import SentimentCosts, leaf_sequence, load_dataset
from bedl_torch.learning import BEDL
from bench_common import cpu_model, load_average


def fit_time(X, y, K, mode):
    cost = SentimentCosts().make(X, X)[0]
    model = BEDL(n_prototypes=K, beta=2 * K * len(X) * 1e-4, cost=cost, unknown="origin", mode=mode)
    w, c = time.perf_counter(), time.process_time()
    model.fit(X, y)
    return {"wall": time.perf_counter() - w, "cpu": time.process_time() - c,
            "rounds": model.n_rounds_, "evals": model.n_evals_}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--k", type=int, default=5, help="prototypes per class")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    load0 = load_average()
    trees, labels = load_dataset("sentiment")
    words = [leaf_sequence(t) for t in trees]
    warm = np.random.default_rng(99).choice(len(words), 40, replace=False)
    fit_time([words[i] for i in warm], labels[warm], 1, "exact")  # one-off imports
    rows = []
    for s in range(args.samples):
        idx = np.random.default_rng(s).choice(len(words), 300, replace=False)
        X, y = [words[i] for i in idx], labels[idx]
        r = {mode: fit_time(X, y, args.k, mode) for mode in ("pseudo", "exact")}
        rows.append(r)
        print(f"(sample {s}: pseudo {r['pseudo']['wall']:.1f} s, exact {r['exact']['wall']:.1f} s)", flush=True)
    print(f"\ncommand: `PYTHONPATH=. .venv/bin/python benchmarks/bench_sentiment_modes.py --samples "
          f"{args.samples} --k {args.k} --threads {args.threads}`  ")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores, {args.threads} thread(s); load average before "
          f"{load0}, after {load_average()}; torch {torch.__version__}\n")
    print("| sample | pseudo wall [s] | exact wall [s] | exact / pseudo (wall) | exact / pseudo (CPU) | "
          "pseudo rounds, evaluations | exact rounds, evaluations |")
    print("|---|---|---|---|---|---|---|")
    for s, r in enumerate(rows):
        p, e = r["pseudo"], r["exact"]
        print(f"| {s} | {p['wall']:.1f} | {e['wall']:.1f} | {e['wall'] / p['wall']:.2f} | "
              f"{e['cpu'] / p['cpu']:.2f} | {p['rounds']}, {p['evals']} | {e['rounds']}, {e['evals']} |")
    ratios = [r["exact"]["wall"] / r["pseudo"]["wall"] for r in rows]
    print(f"\nmedian exact / pseudo (wall): {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
