"""Large alphabets: SST word sequences under cosine costs on GloVe vectors (thousands of words,
no whole symbol table), in ns per DP cell, this tree against a baseline tree in the same run.

The protocol's setting for one Sentiment fold: a 300-sentence training sample and a
961-sentence test fold (a tenth of the 9,613 sentences), ``SentimentCosts`` over their words;
the training matrix (symmetric, ``i <= j``) and the test-to-training matrix, distances only,
one thread. A DP cell is one of a pair's ``(m + 1) (n + 1)``. Also: the same with gradients
(``Omega`` requires grad; distances, then backward through a weighted sum) on a 100 x 300
sample, the test matrix under an ``EuclideanCost`` over the same words (a random 50-d
embedding), and BEDL's exact-mode batch (300 sentences x 10 prototypes, ``PairBatch.distances``
and backward), each gradient row also over 4 symbols with the same sentence lengths (every
word replaced by one of a, b, c, d: the gradient's cost without a large alphabet). Each
measurement runs in a fresh process per tree, the trees alternating, and
reports CPU seconds (the machine is shared; wall time moves with the other jobs).

``--full``: the whole SST matrix (9,613 sentences, symmetric) as word sequences on 2 threads,
extrapolated by DP cells from its first rows against all columns (this tree: the first two
runs of sentences its tiles use; the baseline: ``--full-rows-baseline``; say so where you
quote it); wall and CPU time.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_alphabet.py --baseline /path/to/old/tree
[--rounds 3] [--full]`` (the baseline tree needs its extension built in place).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def _sst():
    import numpy as np

    from bedl_torch.evaluation.protocol.data import leaf_sequence, load_dataset

    X, _ = load_dataset("sentiment")
    perm = np.random.default_rng(0).permutation(len(X))
    return X, [leaf_sequence(t) for t in X], perm


def _cells(A, B, symmetric=False):
    import numpy as np

    la = np.array([len(a) + 1 for a in A], dtype=np.float64)
    lb = np.array([len(b) + 1 for b in B], dtype=np.float64)
    if symmetric:
        return float(np.triu(np.outer(la, lb)).sum())
    return float(la.sum() * lb.sum())


def _timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def child_fold(repeats: int) -> dict:
    """One fold's matrices (1 thread) and the gradient rows; ns per cell in CPU time."""
    import torch

    import bedl_torch as bt
    from bedl_torch.evaluation.protocol.data import SentimentCosts

    torch.set_num_threads(1)
    X, seqs, perm = _sst()
    te, tr = perm[:961], perm[961:1261]
    Xtr, Xte = [seqs[i] for i in tr], [seqs[i] for i in te]
    cost, info = SentimentCosts().make([X[i] for i in tr], [X[i] for i in tr] + [X[i] for i in te])
    out = {"words": info["n_words"]}
    jobs = {
        "train 300 x 300 (symmetric)": (lambda: bt.pairwise_distances(Xtr, cost=cost),
                                        _cells(Xtr, Xtr, True)),
        "test 961 x train 300": (lambda: bt.pairwise_distances(Xte, Xtr, cost=cost),
                                 _cells(Xte, Xtr)),
    }
    # EuclideanCost over the same words (no whole table above 2,048 symbols): a fixed random
    # 50-d embedding, the gap at the origin
    emb = torch.randn(len(cost.alphabet), 50, dtype=torch.float64,
                      generator=torch.Generator().manual_seed(0)) / 50 ** 0.5
    euclid = bt.EuclideanCost(cost.alphabet, emb)
    jobs["test 961 x train 300, EuclideanCost (50-d)"] = (
        lambda: bt.pairwise_distances(Xte, Xtr, cost=euclid), _cells(Xte, Xtr))
    for name, (fn, cells) in jobs.items():
        with torch.no_grad():
            fn()  # warm
            best = min(_timed(fn)[1] for _ in range(repeats))
        out[name] = best / cells * 1e9
    # gradients: distances then backward, 100 x 300
    A = Xte[:100]
    cells_grad = _cells(A, Xtr)
    weights = torch.rand(len(A), len(Xtr), dtype=cost.dtype, generator=torch.Generator().manual_seed(0))

    def with_grad():
        cost.Omega.grad = None
        (bt.pairwise_distances(A, Xtr, cost=cost) * weights).sum().backward()

    with_grad()
    out["100 x 300 with gradient"] = min(_timed(with_grad)[1] for _ in range(repeats)) / cells_grad * 1e9
    # BEDL's exact-mode batch: the training sample against 10 of its sentences
    protos = list(range(0, 300, 30))
    batch = bt.PairBatch([Xtr[i] for i in range(300) for _ in protos],
                         [Xtr[j] for _ in range(300) for j in protos])
    cells_batch = float(sum((len(Xtr[i]) + 1) * (len(Xtr[j]) + 1) for i in range(300) for j in protos))

    def bedl_batch():
        cost.Omega.grad = None
        batch.distances(cost).sum().backward()

    bedl_batch()
    out["PairBatch 300 x 10 with gradient"] = min(_timed(bedl_batch)[1] for _ in range(repeats)) / cells_batch * 1e9
    # the same two gradient rows with the same sentence lengths over 4 symbols (each word
    # replaced by one of a, b, c, d): what the gradient costs per cell without a large alphabet
    words = {w: i for i, w in enumerate(cost.alphabet)}
    small = {s: "".join("abcd"[words[w] % 4] for w in s) for s in set(map(tuple, Xtr + A))}
    A4, Xtr4 = [small[tuple(s)] for s in A], [small[tuple(s)] for s in Xtr]
    cost4 = bt.EuclideanCost(list("abcd"), torch.randn(4, 5, dtype=torch.float64,
                                                       generator=torch.Generator().manual_seed(1)))

    def with_grad_small():
        cost4.zero_grad()
        (bt.pairwise_distances(A4, Xtr4, cost=cost4) * weights).sum().backward()

    with_grad_small()
    out["100 x 300 with gradient, 4 symbols"] = min(_timed(with_grad_small)[1]
                                                    for _ in range(repeats)) / cells_grad * 1e9
    batch4 = bt.PairBatch([Xtr4[i] for i in range(300) for _ in protos],
                          [Xtr4[j] for _ in range(300) for j in protos])

    def bedl_batch_small():
        cost4.zero_grad()
        batch4.distances(cost4).sum().backward()

    bedl_batch_small()
    out["PairBatch 300 x 10 with gradient, 4 symbols"] = min(
        _timed(bedl_batch_small)[1] for _ in range(repeats)) / cells_batch * 1e9
    return out


def child_full(rows: int) -> dict:
    """The first ``rows`` rows of the whole SST matrix (symmetric: columns j >= i), 2 threads."""
    import torch

    from bedl_torch.evaluation.protocol.data import SentimentCosts
    from bedl_torch.ops import FlatTable, table_pair_distances

    torch.set_num_threads(2)
    X, seqs, _ = _sst()
    cost, info = SentimentCosts().make(X, X)
    table = FlatTable(seqs, "X")
    n = len(seqs)
    if rows == 0:  # the first two runs of sentences that this tree's tiles use
        from bedl_torch.ops import limits
        from bedl_torch.ops.pairwise import _symbol_runs

        runs = _symbol_runs(table, torch.arange(n), cost, "error",
                            math.isqrt(limits.LOCAL_TABLE_CELLS) - 1)
        rows = len(runs[0]) + len(runs[1])
    ii = torch.arange(rows).repeat_interleave(n)
    jj = torch.arange(n).repeat(rows)
    keep = jj >= ii
    ii, jj = ii[keep], jj[keep]
    lengths = table.lengths.double() + 1
    cells_sample = float((lengths[ii] * lengths[jj]).sum())
    cells_full = float((torch.outer(lengths, lengths).triu()).sum())
    with torch.no_grad():
        wall, cpu = _timed(lambda: table_pair_distances(table, table, ii, jj, cost))
    return {"words": info["n_words"], "rows": rows, "sample_cells": cells_sample, "full_cells": cells_full,
            "sample_wall": wall, "sample_cpu": cpu}


def _run_child(tree: str, args: list) -> dict:
    env = dict(os.environ, PYTHONPATH=tree, OMP_NUM_THREADS="2")
    res = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"] + args, env=env,
                         cwd=tree, check=True, capture_output=True, text=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", help="a source tree with its extension built in place")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--full", action="store_true", help="also the whole SST matrix (extrapolated)")
    ap.add_argument("--full-rows", type=int, default=0,
                    help="rows of the sample (default: the first two runs of this tree's tiles)")
    ap.add_argument("--full-rows-baseline", type=int, default=40)
    ap.add_argument("--child", nargs="*")
    a = ap.parse_args()
    if a.child is not None:
        kind = a.child[0]
        res = child_fold(int(a.child[1])) if kind == "fold" else child_full(int(a.child[1]))
        print(json.dumps(res))
        return
    trees = [("this tree", REPO)] + ([("baseline", os.path.abspath(a.baseline))] if a.baseline else [])
    load0 = os.getloadavg()
    results = {name: [] for name, _ in trees}
    for _ in range(a.rounds):
        for name, tree in trees:
            results[name].append(_run_child(tree, ["fold", str(a.repeats)]))
    load1 = os.getloadavg()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
          f"load average {load0[0]:.2f} -> {load1[0]:.2f}; {a.rounds} rounds, best of "
          f"{a.repeats} per round, median over rounds; {results['this tree'][0]['words']} words")
    print()
    keys = [k for k in results["this tree"][0] if k != "words"]
    head = "| ns per DP cell, 1 thread, CPU time | " + " | ".join(n for n, _ in trees)
    head += " | baseline / this |" if a.baseline else " |"
    print(head)
    print("|---" * (len(trees) + 1 + bool(a.baseline)) + "|")
    for k in keys:
        med = [statistics.median(r[k] for r in results[n]) for n, _ in trees]
        line = f"| {k} | " + " | ".join(f"{v:.2f}" for v in med)
        line += f" | {med[1] / med[0]:.1f}x |" if a.baseline else " |"
        print(line)
    if a.full:
        print()
        for name, tree in trees:
            rows = a.full_rows if name == "this tree" else a.full_rows_baseline
            load0 = os.getloadavg()
            r = _run_child(tree, ["full", str(rows)])
            rows = r["rows"]
            load1 = os.getloadavg()
            scale = r["full_cells"] / r["sample_cells"]
            print(f"whole SST matrix ({name}), 9,613 word sequences, symmetric, 2 threads, "
                  f"{r['words']} words: extrapolated from rows 0-{rows - 1} against all columns "
                  f"({r['sample_cells'] / 1e9:.2f}G of {r['full_cells'] / 1e9:.1f}G cells): "
                  f"wall {r['sample_wall'] * scale:.0f} s, CPU {r['sample_cpu'] * scale:.0f} s "
                  f"({r['sample_wall'] / r['sample_cells'] * 1e9:.2f} ns per cell wall); load "
                  f"average {load0[0]:.2f} -> {load1[0]:.2f}")


if __name__ == "__main__":
    main()
