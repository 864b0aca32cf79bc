"""Search over many short strings under unit costs (a rapidfuzz-like workload): time and peak
resident memory of ``kneighbors`` and ``radius_neighbors``, each in a fresh process, with the
heap trimming between blocks (``bedl_torch._memory``) on and off.

Data: clustered strings (seed 0): ``n / 10`` random centres of 8-30 letters over a-z, each
string a centre with 0-4 random letters replaced. Cases:

* ``knn``: ``kneighbors(X, k=5)`` of all ``n`` strings among themselves (every pair computed:
  unit-cost strings take the all-pairs path, ``SearchProblem.cheap_exact``);
* ``radius``: ``radius_neighbors(X, radius=2)`` among themselves (symmetric);
* ``radius_xy``: the first ``queries`` strings against the others.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_search_strings.py [--n 20000]
[--queries 8000] [--only knn radius radius_xy] [--trim on off]``.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_common import cpu_model, load_average  # noqa: E402


def clustered_strings(n: int, seed: int = 0) -> list:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    centres = ["".join(rng.choice(letters) for _ in range(rng.randint(8, 30))) for _ in range(max(1, n // 10))]
    out = []
    for _ in range(n):
        s = list(rng.choice(centres))
        for _ in range(rng.randint(0, 4)):
            s[rng.randrange(len(s))] = rng.choice(letters)
        out.append("".join(s))
    return out


def run_case(case: str, n: int, queries: int, trim: bool) -> dict:
    """One case in this process: seconds, peak resident GB, and the size of the answer."""
    import resource

    import bedl_torch as bt
    import bedl_torch.search.knn as knn
    import bedl_torch.search.radius as radius
    import bedl_torch.search.tiles as tiles

    if not trim:
        for module in (knn, radius, tiles):
            module.release_freed_memory = lambda *a, **k: False
    X = clustered_strings(n)
    start = time.perf_counter()
    if case == "knn":
        d, _ = bt.kneighbors(X, k=5)
        size = d.numel()
    elif case == "radius":
        size = len(bt.radius_neighbors(X, radius=2)[0])
    else:
        size = len(bt.radius_neighbors(X[:queries], X[queries:], radius=2)[0])
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # (KB on Linux)
    return {"seconds": seconds, "peak_gb": peak, "size": size}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--queries", type=int, default=8000)
    parser.add_argument("--only", nargs="+", default=["knn", "radius", "radius_xy"])
    parser.add_argument("--trim", nargs="+", default=["on", "off"])
    parser.add_argument("--case", help=argparse.SUPPRESS)  # (one case, in a child process)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.n, args.queries, args.trim == ["on"])))
        return
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; load average at start {load_average()}")
    print(f"{args.n} clustered strings of 8-30 letters (queries: the first {args.queries})\n")
    print("| case | heap trimming | s | peak resident GB | answer size |")
    print("|---|---|---|---|---|")
    for case in args.only:
        for trim in args.trim:
            cmd = [sys.executable, os.path.abspath(__file__), "--case", case, "--n", str(args.n),
                   "--queries", str(args.queries), "--trim", trim]
            res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
            print(f"| {case} | {trim} | {res['seconds']:.2f} | {res['peak_gb']:.2f} | {res['size']} |", flush=True)
    print(f"\nload average at end {load_average()}")


if __name__ == "__main__":
    main()
