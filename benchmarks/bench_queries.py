"""Single-object queries against a collection (``bench_search.py``'s syntax trees under unit
costs, or its SST sentences under unit or cosine costs): ``bedl_torch.kneighbors([q], Y)`` per
query, a ``NeighborIndex(Y)`` built once and queried per object, and all queries in one call,
in the same run (the same answers asserted).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_queries.py [--data ast|sst] [--cost
unit|cosine] [--n 5000] [--queries 20] [--k 10]``. Prints seconds per query (median of the
queries) and the index's build time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import cpu_model, load_average  # noqa: E402
from bench_search import sst_cost, sst_sentences, stdlib_functions  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--data", choices=["ast", "sst"], default="ast")
    ap.add_argument("--cost", choices=["unit", "cosine"], default="unit",
                    help="cosine: the protocol's SST word costs (--data sst)")
    args = ap.parse_args()
    import bedl_torch as bt

    torch.set_num_threads(2)
    if args.data == "ast":
        objects, _, _ = stdlib_functions(args.n + args.queries)
        what = "syntax trees"
    else:
        objects, _ = sst_sentences(args.n + args.queries)
        what = "SST sentences"
    cost = sst_cost(objects) if args.cost == "cosine" else None
    Q, Y = objects[:args.queries], objects[args.queries:]
    bt.kneighbors(Q[:1], Y[:100], k=1, cost=cost)  # warm-up
    start = time.perf_counter()
    index = bt.NeighborIndex(Y, cost)
    build = time.perf_counter() - start
    per = {"kneighbors([q], Y)": [], "index.kneighbors([q])": []}
    for q in Q:  # alternating
        start = time.perf_counter()
        d1, i1 = bt.kneighbors([q], Y, k=args.k, cost=cost)
        per["kneighbors([q], Y)"].append(time.perf_counter() - start)
        start = time.perf_counter()
        d2, i2 = index.kneighbors([q], k=args.k)
        per["index.kneighbors([q])"].append(time.perf_counter() - start)
        assert torch.equal(d1, d2) and torch.equal(i1, i2)
    start = time.perf_counter()
    bt.kneighbors(Q, Y, k=args.k, cost=cost)
    batched = (time.perf_counter() - start) / len(Q)
    print(f"command: `PYTHONPATH=. .venv/bin/python benchmarks/bench_queries.py --data {args.data} "
          f"--cost {args.cost} --n {args.n} --queries {args.queries} --k {args.k}`  ")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; load {load_average()}\n")
    print(f"| {args.n} {what}, {args.cost} costs, k = {args.k} | s per query |\n|---|---|")
    for name, ts in per.items():
        print(f"| {name} (median of {len(ts)}) | {statistics.median(ts):.3f} |")
    print(f"| kneighbors(all {len(Q)} queries, Y) | {batched:.3f} |")
    print(f"\nNeighborIndex(Y) built in {build:.2f} s")


if __name__ == "__main__":
    main()
