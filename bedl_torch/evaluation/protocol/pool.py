"""The worker pool of the protocol: independent fits (BEDL's nested beta search) on forked
processes, one core each."""
from __future__ import annotations

import multiprocessing
import signal
from concurrent.futures import ProcessPoolExecutor

import torch

__all__ = ["run_tasks"]

#: what forked workers read (set before the pool starts, inherited by fork, not pickled)
_TASK_CONTEXT: dict = {}


def _worker_init():
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    torch.set_num_threads(1)  # one core per worker


def _task_call(args):
    fn, task = args
    return fn(task, **_TASK_CONTEXT)


def run_tasks(fn, tasks, context: dict, n_jobs: int) -> list:
    """``[fn(task, **context) for task in tasks]``, on ``n_jobs`` forked worker processes when
    ``n_jobs > 1`` and the platform can fork (results in task order; the context is
    inherited, not pickled, so it may hold large data). A worker's exception, or Ctrl-C,
    stops the running workers and is re-raised."""
    n_jobs = min(int(n_jobs), len(tasks))
    if n_jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [fn(task, **context) for task in tasks]

    _TASK_CONTEXT.clear()
    _TASK_CONTEXT.update(context)
    pool = ProcessPoolExecutor(max_workers=n_jobs, mp_context=multiprocessing.get_context("fork"),
                               initializer=_worker_init)
    try:
        results = list(pool.map(_task_call, [(fn, t) for t in tasks]))
    except BaseException:
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()  # running fits stop too
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        _TASK_CONTEXT.clear()
    pool.shutdown()
    return results
