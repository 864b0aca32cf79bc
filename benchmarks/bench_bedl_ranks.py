"""BEDL.fit in one process vs a gloo group of two processes (``process_group="auto"``).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_bedl_ranks.py [--n 200] [--repeats 3]``.

Strings (``make_strings(n, seed=0)``), exact and pseudo mode, ``n_prototypes=2``,
``max_rounds=2``; every process runs one thread. A time is one ``fit`` between two barriers
after a warm-up fit (rank 0's wall time; the CPU time of the busiest process beside it: a wall
time well above it means the processes waited for cores). Prints a Markdown table with the
command, the CPU model and the load average.
"""
from __future__ import annotations

import argparse
import datetime
import multiprocessing
import statistics

import torch
import torch.distributed as dist

import bedl_torch as bt
from bedl_torch.datasets import make_strings

from bench_common import cpu_model, group_times, load_average, timed

SETTINGS = {"exact": dict(mode="exact", n_prototypes=2, max_rounds=2),
            "pseudo": dict(mode="pseudo", n_prototypes=2, max_rounds=2)}


def fits(n, repeat, barrier, process_group):
    X, y = make_strings(n, seed=0)
    return {name: timed(lambda kw=kw: bt.BEDL(process_group=process_group, **kw).fit(X, y),
                        repeat, barrier)
            for name, kw in SETTINGS.items()}


def _rank(rank, world, port, n, repeat, queue):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(minutes=20))
    try:
        queue.put((rank, fits(n, repeat, dist.barrier, "auto")))
    finally:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    load0 = load_average()
    torch.set_num_threads(1)
    one = fits(args.n, args.repeats, lambda: None, None)
    two = group_times(2, _rank, (args.n, args.repeats))
    print(f"command: `PYTHONPATH=. .venv/bin/python benchmarks/bench_bedl_ranks.py --n {args.n} "
          f"--repeats {args.repeats}`  ")
    print(f"CPU: {cpu_model()}, {multiprocessing.cpu_count()} cores; load average before "
          f"{load0}, after {load_average()}; torch {torch.__version__}\n")
    print("| mode | 1 process [s] | 2 ranks [s] | speed-up | 1 process CPU [s] | busiest rank CPU [s] |")
    print("|---|---|---|---|---|---|")
    for name in SETTINGS:
        t1 = statistics.median(one[name][0])
        t2 = statistics.median(two[name][0])
        c1 = statistics.median(one[name][1])
        c2 = statistics.median(two[name][1])
        print(f"| {name} | {t1:.3f} | {t2:.3f} | {t1 / t2:.2f}x | {c1:.3f} | {c2:.3f} |")


if __name__ == "__main__":
    main()
