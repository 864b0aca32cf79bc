"""k-NN where the bounds cannot pay (``knn_all_pairs``: the matrix's tiles, each merged into
the running ``k`` best): SST sentences as word sequences under unit costs, whose distances are
cheap bit-vector runs, against the matrix and ``topk`` in the same run; also across two ranks
of one thread each (``bedl_torch.distributed.kneighbors``, a gloo group on this machine).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_knn_all_pairs.py [--n 8000] [--k 10]
[--repeats 3]``. Compare two trees by running it with ``PYTHONPATH`` set to each (the
extension built in each). Prints the median wall seconds of each.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import cpu_model, group_times, load_average, timed  # noqa: E402
from bench_search import sst_sentences  # noqa: E402


def _rank(rank, world, port, n, k, repeats, queue):
    import torch.distributed as dist

    import bedl_torch.distributed as bd

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    X, _ = sst_sentences(n)
    out = {"ranks": timed(lambda: bd.kneighbors(X, k=k, progress=False), repeats, dist.barrier)}
    dist.destroy_process_group()
    queue.put((rank, out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import bedl_torch as bt

    torch.set_num_threads(2)
    X, _ = sst_sentences(args.n)

    def matrix_topk():
        D = bt.pairwise_distances(X)
        D.fill_diagonal_(float("inf"))
        return torch.topk(D, args.k, dim=1, largest=False)

    times = {"matrix + topk (2 threads)": [], "kneighbors (2 threads)": []}
    matrix_topk()
    bt.kneighbors(X, k=args.k)
    for _ in range(args.repeats):  # alternating, so both see the machine's same phases
        for name, call in (("matrix + topk (2 threads)", matrix_topk),
                           ("kneighbors (2 threads)", lambda: bt.kneighbors(X, k=args.k))):
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    times["distributed kneighbors (2 ranks x 1 thread)"] = group_times(
        2, _rank, (args.n, args.k, args.repeats))["ranks"][0]
    print(f"command: `PYTHONPATH={os.environ.get('PYTHONPATH', '')} .venv/bin/python "
          f"benchmarks/bench_knn_all_pairs.py --n {args.n} --k {args.k} --repeats {args.repeats}`  ")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; load {load_average()}; bedl_torch at "
          f"{os.path.dirname(bt.__file__)}\n")
    print("| SST sentences, unit costs | median s | all |\n|---|---|---|")
    for name, ts in times.items():
        print(f"| {name} | {statistics.median(ts):.2f} | {' '.join(f'{t:.2f}' for t in ts)} |")


if __name__ == "__main__":
    main()
