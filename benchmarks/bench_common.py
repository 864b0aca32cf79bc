"""What the benchmark scripts share: the machine line (CPU model, load average), a best-of
timer and the random trees they time. Imported as ``bench_common`` (the scripts run from this
folder)."""
from __future__ import annotations

import os
import platform
import random
import time


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def load_average() -> str:
    """The 1, 5 and 15-minute load averages, ``"a b c"``."""
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "unknown"


def best_seconds(fn, repeat: int = 5, min_time: float = 0.2) -> float:
    """Best-of-``repeat`` seconds per call, each timing looping until ``min_time``."""
    best = float("inf")
    for _ in range(repeat):
        calls, start = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        best = min(best, elapsed / calls)
    return best


def random_tree(n: int, alphabet: str, rng: random.Random):
    """Random preorder tree: each new node hangs off a random node on the rightmost path."""
    import bedl_torch as bt

    labels = [rng.choice(alphabet) for _ in range(n)]
    children = [[] for _ in range(n)]
    path = [0]
    for i in range(1, n):
        path = path[: rng.randint(1, len(path))]
        children[path[-1]].append(i)
        path.append(i)
    return bt.Tree(labels, children)


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


def group_times(world: int, target, args: tuple, least_busy: bool = False) -> dict:
    """Run ``target(rank, world, port, *args, queue)`` in ``world`` spawned processes (one gloo
    group on 127.0.0.1); each puts ``(rank, {key: timed(...)})`` on the queue. Returns per key
    rank 0's wall times (the calls end together at a barrier) and, per call, the CPU time of
    the busiest rank (with ``least_busy``, also that of the least busy rank: the balance)."""
    import multiprocessing
    import socket

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [ctx.Process(target=target, args=(r, world, port, *args, queue)) for r in range(world)]
    for p in procs:
        p.start()
    per_rank = dict(queue.get() for _ in range(world))
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        raise RuntimeError("a rank failed")
    def cpu(key, pick):
        return [pick(per_rank[r][key][1][i] for r in range(world)) for i in range(len(per_rank[0][key][1]))]

    return {key: (per_rank[0][key][0], cpu(key, max)) + ((cpu(key, min),) if least_busy else ())
            for key in per_rank[0]}
