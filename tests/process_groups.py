"""Real gloo (or nccl) process groups of a few processes on 127.0.0.1 for the tests:
``run_ranks("test_module", "_scenario", args, tmp_path)`` runs ``test_module._scenario(rank,
*args)`` on every rank of one group and returns each rank's (pickled) result."""
import datetime
import importlib
import multiprocessing
import os
import pickle
import socket

import torch
import torch.distributed as dist

TIMEOUT = 180  # seconds for a group of processes: only a hang comes near it


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank, world, port, backend, module, scenario, args, result_dir):
    torch.set_num_threads(1)
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=TIMEOUT))
    try:
        result = getattr(importlib.import_module(module), scenario)(rank, *args)
        with open(os.path.join(result_dir, f"rank{rank}.pkl"), "wb") as f:
            pickle.dump(result, f)
        # no rank tears its connections down while another may still be in a collective
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_ranks(module, scenario, args, tmp_path, world=2, backend="gloo"):
    """Run ``module.scenario(rank, *args)`` in ``world`` spawned processes of one group;
    returns each rank's result."""
    ctx = multiprocessing.get_context("spawn")
    port = free_port()
    result_dir = tmp_path / f"results_{scenario}"
    result_dir.mkdir()
    procs = [ctx.Process(target=_rank_main,
                         args=(r, world, port, backend, module, scenario, args, str(result_dir)))
             for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(TIMEOUT)
    hung = [r for r, p in enumerate(procs) if p.is_alive()]
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    assert not hung, f"ranks {hung} did not finish"
    assert [p.exitcode for p in procs] == [0] * world
    results = []
    for r in range(world):
        with open(result_dir / f"rank{r}.pkl", "rb") as f:
            results.append(pickle.load(f))
    return results
