"""1 vs 2 processes for a pairwise distance matrix (bedl_torch.distributed), unit costs.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_distributed.py [--n 400] [--nodes 30]``;
with ``--search N``: the exact k-NN (k = 10) and range search (radius 10) of ``N`` standard-library
syntax trees (``bench_search.py``'s) under unit costs instead, ``bedl_torch.kneighbors`` /
``radius_neighbors`` in one process against ``bedl_torch.distributed``'s in two, with the CPU time
of the least busy rank beside the busiest's (how evenly the ranks share the search).

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
import os
import random
import statistics
import sys
import tempfile

import torch
import torch.distributed as dist

import bedl_torch as bt
from bedl_torch import distributed as bd
from bench_common import cpu_model, group_times, load_average, random_tree, timed


def make_trees(n: int, nodes: int, seed: int = 0):
    rng = random.Random(seed)
    return [random_tree(nodes, "abcde", rng) for _ in range(n)]


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


SEARCH_K, SEARCH_RADIUS = 10, 10.0


def search_trees(n: int):
    from bench_search import stdlib_functions

    return stdlib_functions(n)[0]


def _search_rank(rank, world, port, n, repeat, queue):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(minutes=10))
    try:
        trees = search_trees(n)
        results = {
            "knn": timed(lambda: bd.kneighbors(trees, k=SEARCH_K), repeat, dist.barrier),
            "radius": timed(lambda: bd.radius_neighbors(trees, radius=SEARCH_RADIUS), repeat, dist.barrier),
        }
        queue.put((rank, results))
    finally:
        dist.destroy_process_group()


def search_main(args):
    """1 vs 2 processes for the exact search (``--search N``)."""
    torch.set_num_threads(1)
    load_before = load_average()
    trees = search_trees(args.search)
    two = group_times(2, _search_rank, (args.search, args.repeat), least_busy=True)
    rows = []
    for key, name, one in (("knn", f"kneighbors, k = {SEARCH_K}",
                            lambda: bt.kneighbors(trees, k=SEARCH_K)),
                           ("radius", f"radius_neighbors, radius {SEARCH_RADIUS:g}",
                            lambda: bt.radius_neighbors(trees, radius=SEARCH_RADIUS))):
        rows.append((name, timed(one, args.repeat), two[key]))
    load_after = load_average()
    print(f"command: `{' '.join([os.path.basename(sys.executable)] + sys.argv)}`")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} logical cores; torch {torch.__version__}; "
          f"load average (1, 5, 15 min) before {load_before}, after {load_after}")
    print()
    print(f"{args.search} standard-library syntax trees, unit costs, 1 thread per process, "
          f"{args.repeat} timed calls each (medians)")
    print()
    print("| search | 1 process s | 2 processes s | speed-up | CPU s, busiest rank | CPU s, least busy rank |")
    print("|---|---|---|---|---|---|")
    for name, (one_wall, _), (wall, cpu_max, cpu_min) in rows:
        one, two_med = statistics.median(one_wall), statistics.median(wall)
        print(f"| {name} | {one:.3f} | {two_med:.3f} | {one / two_med:.2f}x | "
              f"{statistics.median(cpu_max):.3f} | {statistics.median(cpu_min):.3f} |")


def distributed_times(world, n, nodes, repeat, tile_size):
    with tempfile.TemporaryDirectory() as folder:
        return group_times(world, _rank, (n, nodes, repeat, tile_size, folder))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=400, help="trees (default 400)")
    parser.add_argument("--nodes", type=int, default=30, help="nodes per tree (default 30)")
    parser.add_argument("--repeat", type=int, default=7, help="timed calls each (default 7)")
    parser.add_argument("--tile-size", type=int, default=None,
                        help="tile side (default: bedl_torch.distributed's)")
    parser.add_argument("--search", type=int, default=None, metavar="N",
                        help="time the exact search of N syntax trees instead")
    args = parser.parse_args()
    if args.search is not None:
        return search_main(args)
    torch.set_num_threads(1)
    load_before = load_average()
    trees = make_trees(args.n, args.nodes)
    rows = []
    ops_times = timed(lambda: bt.pairwise_distances(trees), args.repeat)
    rows.append(("bedl_torch.pairwise_distances, 1 process", ops_times))
    rows.append(("distributed, 1 process (no group)",
                 timed(lambda: bd.pairwise_distances(trees, tile_size=args.tile_size,
                                                     progress=False), args.repeat)))
    two = distributed_times(2, args.n, args.nodes, args.repeat, args.tile_size)
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
