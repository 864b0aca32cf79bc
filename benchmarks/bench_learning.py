"""The learning path's cost: gradients of distance matrices and co-optimal matrices P,
each against the distance alone, on this tree and on a base build in the same run.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_learning.py [--base /path/to/other/tree]
[--rounds 3]``. Each round runs one measuring process per build (this tree first, then the
base), so both see the same phases of a shared machine; the table has the median over
rounds of each process's best-of times. Rows:

* ``grad30``: a 100 x 100 ``pairwise_distances`` matrix of 30-node random trees with an
  ``EuclideanCost`` (symmetric: 5050 pairs), 2 threads: forward + ``D.sum().backward()``
  against the forward alone (``torch.no_grad``).
* ``grad30_glvq``: the same with a loss that reads two entries per row (as GLVQ's nearest
  right and wrong prototype do), so most pairs have gradient 0.
* ``grad30_1t``: ``grad30`` on 1 thread.
* ``coopt100``: 16 pairs of 100-node random trees, Euclidean costs, 1 thread, one batched
  call: distance + P (``PairBatch.coopt``) against the distance alone.
* ``seq_grad12``: the sequence kernels of BEDL's exact mode on Strings: a 100 x 2 matrix of
  12-symbol strings, forward + backward against the forward, 1 thread.
* ``seq_coopt40``: 16 pairs of 40-symbol strings: distance + P against the distance.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys

from bench_common import best_seconds, cpu_model

HERE = os.path.dirname(os.path.abspath(__file__))


def _alternating(fns, repeat: int, min_time: float):
    """Best-of times of several functions timed in turns (the same phases of the machine)."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            best[k] = min(best[k], best_seconds(fn, 1, min_time))
    return best


def measure() -> dict:
    """This process's bedl_torch: seconds per call of each row's two sides."""
    import torch

    import bedl_torch as bt
    from bench_core import random_tree

    out = {}
    torch.set_num_threads(2)
    rng = random.Random(2)
    trees = [random_tree(30, "abcde", rng) for _ in range(100)]
    alphabet = sorted({a for t in trees for a in t.labels})
    emb = torch.randn(len(alphabet), 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    cost = bt.EuclideanCost(alphabet, emb.clone())
    pick = torch.zeros(100, 100, dtype=torch.float64)
    g = torch.Generator().manual_seed(1)
    for i in range(100):
        pick[i, torch.randperm(100, generator=g)[:2]] = 1.0

    def forward():
        with torch.no_grad():
            bt.pairwise_distances(trees, cost=cost)

    def forward_backward():
        cost.zero_grad()
        bt.pairwise_distances(trees, cost=cost).sum().backward()

    def forward_backward_glvq():
        cost.zero_grad()
        (bt.pairwise_distances(trees, cost=cost) * pick).sum().backward()

    t_f, t_fb, t_glvq = _alternating([forward, forward_backward, forward_backward_glvq], 3, 0.5)
    out["grad30"] = (t_fb, t_f)
    out["grad30_glvq"] = (t_glvq, t_f)
    torch.set_num_threads(1)  # two threads on a shared machine wait on each other's phases
    t_f, t_fb = _alternating([forward, forward_backward], 3, 0.5)
    out["grad30_1t"] = (t_fb, t_f)

    torch.set_num_threads(1)
    rng = random.Random(1)
    pairs = [(random_tree(100, "abcde", rng), random_tree(100, "abcde", rng)) for _ in range(16)]
    alphabet = sorted({a for p in pairs for t in p for a in t.labels})
    emb = torch.randn(len(alphabet), 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    cost = bt.EuclideanCost(alphabet, emb)
    batch = bt.PairBatch([p[0] for p in pairs], [p[1] for p in pairs])
    with torch.no_grad():
        t_d, t_p = _alternating([lambda: batch.distances(cost), lambda: batch.coopt(cost)], 5, 0.2)
    out["coopt100"] = (t_p, t_d)

    # sequences: BEDL's exact-mode kernels (100 strings of 12 symbols against 2 prototypes)
    # and P of 40-symbol strings, both on the symbol-table path
    g = torch.Generator().manual_seed(3)
    letters = "abcd"

    def strings(count, length):
        return ["".join(letters[k] for k in torch.randint(0, 4, (length,), generator=g).tolist())
                for _ in range(count)]

    emb = torch.randn(4, 3, generator=g, dtype=torch.float64)
    cost = bt.EuclideanCost(list(letters), emb.clone())
    X12, protos = strings(100, 12), strings(2, 12)

    def seq_forward():
        with torch.no_grad():
            bt.pairwise_distances(X12, protos, cost=cost)

    def seq_forward_backward():
        cost.zero_grad()
        bt.pairwise_distances(X12, protos, cost=cost).sum().backward()

    t_f, t_fb = _alternating([seq_forward, seq_forward_backward], 5, 0.2)
    out["seq_grad12"] = (t_fb, t_f)
    X40 = strings(32, 40)
    batch = bt.PairBatch(X40[:16], X40[16:])
    with torch.no_grad():
        t_d, t_p = _alternating([lambda: batch.distances(cost), lambda: batch.coopt(cost)], 5, 0.2)
    out["seq_coopt40"] = (t_p, t_d)
    return out


ROWS = [
    ("grad30", "100 x 100 matrix, 30-node trees, EuclideanCost, 2 threads: forward + backward vs forward",
     "<= 4x"),
    ("grad30_glvq", "same, loss on 2 entries per row (GLVQ-like) vs forward", "-"),
    ("grad30_1t", "same as the first row on 1 thread", "-"),
    ("coopt100", "16 pairs of 100-node trees, Euclidean, 1 thread, batched: distance + P vs distance",
     "<= 2.5x"),
    ("seq_grad12", "100 x 2 matrix of 12-symbol strings (BEDL's exact mode on Strings), 1 thread: "
     "forward + backward vs forward", "-"),
    ("seq_coopt40", "16 pairs of 40-symbol strings, Euclidean, 1 thread, batched: distance + P vs "
     "distance", "-"),
]


def _run_build(tree: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    res = subprocess.run([sys.executable, os.path.abspath(__file__), "--measure"], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])



def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measure", action="store_true", help="(internal) measure this process's build")
    parser.add_argument("--base", default=None, help="another source tree (extension built in place)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.measure:
        sys.path.insert(0, HERE)
        print(json.dumps(measure()))
        return
    repo = os.path.dirname(HERE)
    builds = [("this tree", repo)] + ([("base", args.base)] if args.base else [])
    results = {name: [] for name, _ in builds}
    load_before = os.getloadavg()
    for _ in range(args.rounds):
        for name, tree in builds:
            results[name].append(_run_build(tree))
    load_after = os.getloadavg()
    print(f"command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    print(f"CPU: {cpu_model()} ({os.cpu_count()} logical cores); load average before "
          f"{load_before[0]:.2f}, after {load_after[0]:.2f}; {args.rounds} rounds, medians")
    print()
    header = "| measurement | " + " | ".join(f"{name}: ratio (s vs s)" for name, _ in builds)
    header += " | base / this tree (time of the first side) | goal |" if args.base else " | goal |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for key, label, goal in ROWS:
        cells, firsts = [], []
        for name, _ in builds:
            first = statistics.median(r[key][0] for r in results[name])
            second = statistics.median(r[key][1] for r in results[name])
            ratios = [r[key][0] / r[key][1] for r in results[name]]
            cells.append(f"{statistics.median(ratios):.2f}x ({first:.4g} vs {second:.4g})")
            firsts.append(first)
        line = f"| {label} | " + " | ".join(cells)
        if args.base:
            line += f" | {firsts[1] / firsts[0]:.2f}x"
        print(line + f" | {goal} |")


if __name__ == "__main__":
    main()
