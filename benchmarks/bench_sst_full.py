"""BEDL on the whole binary SST training split with prototype candidates, beside the paper's
300-sentence samples, both tested on the SST test split.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_sst_full.py [--candidates 50]
[--samples 3] [--threads 1] [--prototypes 1] [--beta-factor 1e-4]``.

Data: the binary SST (root labels 0/1 negative, 3/4 positive), its own train (6,920) and test
(1,821) sentences as word sequences (the leaf sequences, whose edit distances equal the trees'
under these costs); costs as in the experiment protocol (cosine costs over GloVe 6B 50d reduced
by PCA on the training words, gap cost 1/4, words missing from training at the origin). BEDL in
pseudo mode, ``K`` prototypes per class (``--prototypes``, default 1),
``beta = 2 K m f`` (``--beta-factor`` f, default 1e-4). The full fit uses
``prototype_candidates``; the sample fits draw 300 training sentences (seeds 0, 1, ...) and
use every sample point as a candidate, as the paper's protocol does. Prints a Markdown table
with fit time, test error and the initial costs' test error (median GLVQ prototypes under the
initial costs), the command, the CPU model and the load average.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

import bedl_torch as bt
from bedl_torch.datasets import load
from bedl_torch.evaluation.protocol.data import SentimentCosts, leaf_sequence
from bench_common import cpu_model, load_average



def sst_split():
    trees, y, names = load("sentiment", return_names=True)
    X = [leaf_sequence(t) for t in trees]
    train = [i for i, n in enumerate(names) if n.startswith("train.txt")]
    test = [i for i, n in enumerate(names) if n.startswith("test.txt")]
    return ([X[i] for i in train], y[train]), ([X[i] for i in test], y[test])


def fit_and_test(X_tr, y_tr, X_te, y_te, costs: SentimentCosts, candidates, K=1, factor=1e-4):
    cost = costs.make(X_tr, X_tr + X_te)[0]
    m = len(X_tr)
    model = bt.BEDL(n_prototypes=K, beta=2 * K * m * factor, mode="pseudo", cost=cost,
                    unknown="origin", prototype_candidates=candidates, max_rounds=5)
    start, start_cpu = time.perf_counter(), time.process_time()
    model.fit(X_tr, y_tr)
    wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    error = 100.0 * float(np.mean(model.predict(X_te) != y_te))
    # the initial costs with the prototypes median GLVQ chose under them (round 0)
    initial = bt.BEDL(n_prototypes=K, cost=cost, unknown="origin", prototype_candidates=candidates,
                      max_rounds=0).fit(X_tr, y_tr)
    initial_error = 100.0 * float(np.mean(initial.predict(X_te) != y_te))
    return {"wall": wall, "cpu": cpu, "error": error, "initial_error": initial_error,
            "rounds": model.n_rounds_, "candidates": len(model.candidates_)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", type=int, default=50, help="candidates per class (full fit)")
    ap.add_argument("--samples", type=int, default=3, help="300-sentence sample fits")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prototypes", type=int, default=1, help="K, prototypes per class")
    ap.add_argument("--beta-factor", type=float, default=1e-4, help="f in beta = 2 K m f")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    load0 = load_average()
    (X_tr, y_tr), (X_te, y_te) = sst_split()
    costs = SentimentCosts()
    K, f = args.prototypes, args.beta_factor
    full = fit_and_test(X_tr, y_tr, X_te, y_te, costs, args.candidates, K, f)
    samples = []
    for seed in range(args.samples):
        idx = np.sort(np.random.default_rng(seed).choice(len(X_tr), 300, replace=False))
        samples.append(fit_and_test([X_tr[i] for i in idx], y_tr[idx], X_te, y_te, costs, None,
                                    K, f))
    print(f"command: `PYTHONPATH=. .venv/bin/python benchmarks/bench_sst_full.py --candidates "
          f"{args.candidates} --samples {args.samples} --threads {args.threads} --prototypes {K} "
          f"--beta-factor {f:g}`  ")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores, {args.threads} thread(s); load average "
          f"before {load0}, after {load_average()}; torch {torch.__version__}; SST binary: "
          f"{len(X_tr)} training, {len(X_te)} test sentences\n")
    print("| training set | candidates | fit wall [s] | fit CPU [s] | rounds | test error [%] | "
          "initial costs' test error [%] |")
    print("|---|---|---|---|---|---|---|")
    print(f"| all {len(X_tr)} | {full['candidates']} | {full['wall']:.1f} | {full['cpu']:.1f} | "
          f"{full['rounds']} | {full['error']:.1f} | {full['initial_error']:.1f} |")
    for seed, s in enumerate(samples):
        print(f"| 300 (seed {seed}) | {s['candidates']} | {s['wall']:.1f} | {s['cpu']:.1f} | "
              f"{s['rounds']} | {s['error']:.1f} | {s['initial_error']:.1f} |")
    if samples:
        print(f"\n300-sentence samples: median test error "
              f"{statistics.median(s['error'] for s in samples):.1f} %")


if __name__ == "__main__":
    main()
