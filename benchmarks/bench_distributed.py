"""1 vs 2 processes for a pairwise distance matrix (bedl_torch.distributed), unit costs.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_distributed.py [--n 400] [--nodes 30]``.

A 400 x 400 matrix of random 30-node trees: ``bedl_torch.pairwise_distances`` in one process,
then ``bedl_torch.distributed.pairwise_distances`` in one process and in a gloo group of two
processes on 127.0.0.1 (spawned here, as torchrun would start them), in memory and into a
``.npy`` file. Every process runs one thread (``torch.set_num_threads(1)``). A time is one call
between two barriers after a warm-up call; the table gives the median and the best of the
repeats, the speed-up of the median over the one-process ``bedl_torch.pairwise_distances``, and
the CPU time of the busiest process (a wall time well above it means the processes waited for
cores). Prints a Markdown table with the command, the CPU model and the load average.
"""
from __future__ import annotations

import argparse
import datetime
import multiprocessing
import os
import random
import socket
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist

import bedl_torch as bt
from bedl_torch import distributed as bd


def random_tree(n: int, alphabet: str, rng: random.Random) -> bt.Tree:
    """Random preorder tree: each new node hangs off a random node on the rightmost path."""
    labels = [rng.choice(alphabet) for _ in range(n)]
    children = [[] for _ in range(n)]
    path = [0]
    for i in range(1, n):
        path = path[: rng.randint(1, len(path))]
        children[path[-1]].append(i)
        path.append(i)
    return bt.Tree(labels, children)


def make_trees(n: int, nodes: int, seed: int = 0):
    rng = random.Random(seed)
    return [random_tree(nodes, "abcde", rng) for _ in range(n)]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def load_average() -> str:
    try:
        with open("/proc/loadavg", encoding="utf-8") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def timed(call, repeat: int, barrier=lambda: None):
    """Wall and CPU seconds of this process for each of ``repeat`` calls (after one warm-up
    call), between barriers."""
    call()
    wall, cpu = [], []
    for _ in range(repeat):
        barrier()
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        barrier()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return wall, cpu


def _rank(rank, world, port, n, nodes, repeat, tile_size, folder, queue):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(minutes=10))
    try:
        trees = make_trees(n, nodes)
        results = {
            "memory": timed(lambda: bd.pairwise_distances(trees, tile_size=tile_size,
                                                          progress=False),
                            repeat, dist.barrier),
            "file": timed(lambda: bd.pairwise_distances(trees, tile_size=tile_size,
                                                        out=os.path.join(folder, "D.npy"),
                                                        progress=False),
                          repeat, dist.barrier),
        }
        queue.put((rank, results))
    finally:
        dist.destroy_process_group()


def group_times(world, n, nodes, repeat, tile_size):
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as folder:
        procs = [ctx.Process(target=_rank, args=(r, world, port, n, nodes, repeat, tile_size,
                                                 folder, queue)) for r in range(world)]
        for p in procs:
            p.start()
        per_rank = dict(queue.get() for _ in range(world))
        for p in procs:
            p.join()
    if any(p.exitcode for p in procs):
        raise RuntimeError("a rank failed")
    # wall times of rank 0 (the calls end together), CPU times of the busiest rank per call
    return {key: (per_rank[0][key][0],
                  [max(per_rank[r][key][1][i] for r in range(world))
                   for i in range(len(per_rank[0][key][1]))])
            for key in per_rank[0]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=400, help="trees (default 400)")
    parser.add_argument("--nodes", type=int, default=30, help="nodes per tree (default 30)")
    parser.add_argument("--repeat", type=int, default=7, help="timed calls each (default 7)")
    parser.add_argument("--tile-size", type=int, default=None,
                        help="tile side (default: bedl_torch.distributed's)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_before = load_average()
    trees = make_trees(args.n, args.nodes)
    rows = []
    ops_times = timed(lambda: bt.pairwise_distances(trees), args.repeat)
    rows.append(("bedl_torch.pairwise_distances, 1 process", ops_times))
    rows.append(("distributed, 1 process (no group)",
                 timed(lambda: bd.pairwise_distances(trees, tile_size=args.tile_size,
                                                     progress=False), args.repeat)))
    two = group_times(2, args.n, args.nodes, args.repeat, args.tile_size)
    rows.append(("distributed, 2 processes (gloo), whole matrix on every rank", two["memory"]))
    rows.append(("distributed, 2 processes (gloo), into one .npy file", two["file"]))
    load_after = load_average()

    base = statistics.median(ops_times[0])
    print(f"command: `{' '.join([os.path.basename(sys.executable)] + sys.argv)}`")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} logical cores; torch {torch.__version__}; "
          f"load average (1, 5, 15 min) before {load_before}, after {load_after}")
    print()
    print(f"{args.n} x {args.n} matrix of random {args.nodes}-node trees, unit costs, "
          f"1 thread per process, {args.repeat} timed calls each")
    print()
    print("| run | median s | best s | speed-up (median) | CPU s per process (median, busiest rank) |")
    print("|---|---|---|---|---|")
    for name, (wall, cpu) in rows:
        med = statistics.median(wall)
        print(f"| {name} | {med:.4f} | {min(wall):.4f} | {base / med:.2f}x | "
              f"{statistics.median(cpu):.4f} |")
    print()
    print("A wall time well above the CPU time of the busiest process means the processes waited "
          "for cores (other load on the machine).")


if __name__ == "__main__":
    main()
