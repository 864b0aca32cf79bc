"""The CUDA kernels against the CPU kernels in the same run, on the same inputs.

Run on a machine with a GPU and a CUDA build of the extension (``tools/device_check.sh``
does): ``python benchmarks/bench_gpu.py [--quick]``. Prints a Markdown table: seconds per
call of each operator on the CPU (all cores) and on the GPU (synchronised), their ratio, and
whether the results are the same bits. Record it in benchmarks/README.md with the GPU, the
CPU and the command.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository's bedl_torch
from bench_common import best_seconds, cpu_model, load_average  # noqa: E402

import bedl_torch  # noqa: E402
from bedl_torch import _ext  # noqa: E402


def label_sequences(rng, count, length, symbols):
    ptr = torch.arange(count + 1, dtype=torch.int64) * length
    return torch.as_tensor(rng.integers(0, symbols, count * length)), ptr


def label_trees(rng, count, nodes, symbols):
    """Random trees of ``nodes`` nodes: subtree sizes in preorder (each new node hangs off
    the rightmost path)."""
    sizes = []
    for _ in range(count):
        parent = [-1]
        path = [0]
        for k in range(1, nodes):
            path = path[: int(rng.integers(1, len(path) + 1))]
            parent.append(path[-1])
            path.append(k)
        size = [1] * nodes
        for k in range(nodes - 1, 0, -1):
            size[parent[k]] += size[k]
        sizes += size
    ptr = torch.arange(count + 1, dtype=torch.int64) * nodes
    return torch.as_tensor(rng.integers(0, symbols, count * nodes)), torch.tensor(sizes), ptr


def all_pairs(count):
    px, py = torch.triu_indices(count, count, 1)
    return px.contiguous(), py.contiguous()


def timed(fn, device):
    def call():
        out = fn()
        if device == "cuda":
            torch.cuda.synchronize()
        return out
    call()  # warm-up (and the CUDA context)
    return best_seconds(call, repeat=3, min_time=0.3), call()


def timed_once(fn, device, repeat=2):
    """Seconds of the best of ``repeat`` calls after a warm-up, and the last call's result
    (for calls of a second or more)."""
    best, out = float("inf"), fn()
    if device == "cuda":
        torch.cuda.synchronize()  # (the warm-up's kernels finish outside the timings)
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best, out


def kernel_seconds(fn):
    """Seconds the GPU spent in kernels and copies during one call of fn (torch's profiler;
    NaN where the profiler gives no device times)."""
    fn()
    torch.cuda.synchronize()
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        total = sum(getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
                    for e in prof.key_averages())
    except Exception as exc:  # (a profiler problem must not cost the rest of the table)
        print(f"(profiler: {type(exc).__name__}: {exc})")
        return float("nan")
    return total / 1e6 if total else float("nan")


def varied_sequences(rng, count, lo, hi, symbols):
    lengths = rng.integers(lo, hi + 1, count)
    ptr = torch.zeros(count + 1, dtype=torch.int64)
    ptr[1:] = torch.as_tensor(np.cumsum(lengths))
    return torch.as_tensor(rng.integers(0, symbols, int(ptr[-1]))), ptr


# The goal-sized tree cases: (trees, nodes, with P).
GOAL_TREES = {"trees": (2000, 30, False), "trees_p": (120, 100, True)}


def goal_sequences(rng, S):
    """The goal's 4,000 sequences of 5-40 symbols (labels, ptr) and all their pairs (px, py)."""
    labels, ptr = varied_sequences(rng, 4000, 5, 40, S - 1)
    return (labels, ptr, *all_pairs(4000))


def goal_trees(rng, S, count, nodes):
    """``count`` random trees of ``nodes`` nodes on both sides and all their pairs: the index
    arguments of ``ted_symbols``."""
    labels, sizes, ptr = label_trees(rng, count, nodes, S - 1)
    return (labels, sizes, ptr, labels, sizes, ptr, *all_pairs(count))


def goals(rng, S):
    """The GPU issue's goal sizes: the distance matrix of 4,000 sequences of 5-40 symbols
    (float32 and float64, with cell updates per second), of 2,000 trees of 30 nodes (and a
    training step's forward and backward over it), and P of 100-node trees."""
    print("| goal case | CPU s | GPU s | CPU / GPU | GPU G cells/s | same bits |")
    print("|---|---|---|---|---|---|")
    labels, ptr, px, py = goal_sequences(rng, S)
    lengths = ptr[1:] - ptr[:-1]
    cells = float((lengths[px].double() * lengths[py].double()).sum())
    for dtype in (torch.float32, torch.float64):
        table = torch.as_tensor(rng.random((S, S)), dtype=dtype)
        args = (labels, ptr, labels, ptr, px, py, False, 1e-9)
        t_cpu, (d_cpu, _) = timed_once(lambda: _ext.sed_symbols_cpu(table, *args), "cpu")
        table_gpu = table.cuda()
        args_gpu = tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in args)
        for where, a in (("index tensors on the host", args), ("on the GPU", args_gpu)):
            t_gpu, (d_gpu, _) = timed_once(lambda: _ext.sed_symbols_cpu(table_gpu, *a), "cuda")
            print(f"| sequences 4000 x 4000 (5-40), {str(dtype)[6:]}, distance, {where} | {t_cpu:.4g} | {t_gpu:.4g} | "
                  f"{t_cpu / t_gpu:.3g} | {cells / t_gpu / 1e9:.1f} | {torch.equal(d_gpu.cpu(), d_cpu)} |", flush=True)
        t_kernel = kernel_seconds(lambda: _ext.sed_symbols_cpu(table_gpu, *args_gpu))
        print(f"| (GPU busy in kernels and copies, by the profiler: {t_kernel:.4g} s, {cells / t_kernel / 1e9:.1f} G cells/s) "
              "| | | | | |", flush=True)
    table = torch.as_tensor(rng.random((S, S)))
    for count, nodes, coopt in GOAL_TREES.values():
        args = (*goal_trees(rng, S, count, nodes), coopt, 1e-9)
        t_cpu, (d_cpu, p_cpu) = timed_once(lambda: _ext.ted_symbols_cpu(table, *args), "cpu")
        args_gpu = tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in args)
        table_gpu = table.cuda()
        # distances: the lane groups' kernel, then the per-pair kernel alone in the same run
        for kernel in ("",) if coopt else (", lane groups", ", per-pair kernel"):
            os.environ["BEDL_TORCH_CUDA_TREE_LANES"] = "0" if kernel == ", per-pair kernel" else "1"
            t_gpu, (d_gpu, p_gpu) = timed_once(lambda: _ext.ted_symbols_cpu(table_gpu, *args_gpu), "cuda")
            same = torch.equal(d_gpu.cpu(), d_cpu) and torch.equal(p_gpu.cpu(), p_cpu)
            print(f"| trees {count} x {count} of {nodes} nodes, {'distance + P' if coopt else 'distance'}{kernel} | "
                  f"{t_cpu:.4g} | {t_gpu:.4g} | {t_cpu / t_gpu:.3g} | - | {same} |", flush=True)
        os.environ.pop("BEDL_TORCH_CUDA_TREE_LANES")
    t_cpu, t_gpu, diff = training_step(list(training_trees(rng, 2000, 30)), S,
                                       lambda step, device: timed_once(step, device, repeat=1))
    print(f"| training step, 2000 trees of 30 nodes (forward and backward; gradient max rel. diff {diff:.1e}) | "
          f"{t_cpu:.4g} | {t_gpu:.4g} | {t_cpu / t_gpu:.3g} | - | - |", flush=True)


def one_call(case, rng, S):
    """One GPU call of a goal-sized case, for a profiler (``ncu``): ``sequences`` (the
    4,000 x 4,000 matrix of 5-40 symbols, float32), ``trees`` (2,000 x 2,000 of 30 nodes),
    ``trees_p`` (P of 120 x 120 trees of 100 nodes)."""
    if case == "sequences":
        labels, ptr, px, py = goal_sequences(rng, S)
        table = torch.as_tensor(rng.random((S, S)), dtype=torch.float32).cuda()
        args = [a.cuda() for a in (labels, ptr, labels, ptr, px, py)]
        _ext.sed_symbols_cpu(table, *args, False, 1e-9)
    else:
        count, nodes, coopt = GOAL_TREES[case]
        table = torch.as_tensor(rng.random((S, S))).cuda()
        _ext.ted_symbols_cpu(table, *[a.cuda() for a in goal_trees(rng, S, count, nodes)], coopt, 1e-9)
    torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs")
    parser.add_argument("--goals", action="store_true", help="the GPU issue's goal sizes alone")
    parser.add_argument("--one", choices=["sequences", "trees", "trees_p"],
                        help="one GPU call of a goal-sized case and nothing else (for ncu)")
    args = parser.parse_args()
    if not torch.cuda.is_available() or "sed_symbols" not in _ext.cuda_operators:
        sys.exit("needs a GPU and the extension built with CUDA (BEDL_TORCH_CUDA=1)")
    rng = np.random.default_rng(0)
    if args.one:
        one_call(args.one, rng, 21)
        return
    if args.goals:
        print(f"CPU: {cpu_model()}, {torch.get_num_threads()} threads, load {load_average()}; "
              f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__}")
        print()
        goals(rng, 21)
        return
    S = 21
    table = torch.as_tensor(rng.random((S, S)))
    scale = 1 if args.quick else 2
    cases = []
    for count, length in ((100 * scale, 100), (20 * scale, 1000)):
        labels, ptr = label_sequences(rng, count, length, S - 1)
        px, py = all_pairs(count)
        for coopt in (False, True):
            cases.append((f"sequences, {len(px)} pairs of length {length}, {'distance + P' if coopt else 'distance'}",
                          _ext.sed_symbols_cpu, (labels, ptr, labels, ptr, px, py, coopt, 1e-9)))
    for count, nodes in ((100 * scale, 30), (30 * scale, 100)):
        labels, sizes, ptr = label_trees(rng, count, nodes, S - 1)
        px, py = all_pairs(count)
        for coopt in (False, True):
            cases.append((f"trees, {len(px)} pairs of {nodes} nodes, {'distance + P' if coopt else 'distance'}",
                          _ext.ted_symbols_cpu, (labels, sizes, ptr, labels, sizes, ptr, px, py, coopt, 1e-9)))
    soft_cases = []
    for count, length in ((2000 * scale, 40),):
        costs = torch.as_tensor(rng.random((count, length + 1, length + 1)))
        lengths = torch.as_tensor(rng.integers(length // 2, length + 1, count))
        soft_cases.append((f"soft sequences, {count} pairs of length <= {length}, distance + gradient",
                           _ext.sed_soft_cpu, costs, (lengths, lengths.flip(0), 0.5, True)))
    for count, nodes in ((60 * scale, 30),):
        _, sizes, ptr = label_trees(rng, count, nodes, S - 1)
        px, py = all_pairs(count)
        costs = torch.as_tensor(rng.random((len(px), nodes + 1, nodes + 1)))
        soft_cases.append((f"soft trees, {len(px)} pairs of {nodes} nodes, distance + gradient", _ext.ted_soft_cpu,
                           costs, (sizes, ptr, sizes, ptr, px, py, 0.5, True)))
    print(f"CPU: {cpu_model()}, {torch.get_num_threads()} threads, load {load_average()}; "
          f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__}")
    print()
    print("| operator | CPU s | GPU s | CPU / GPU | same bits |")
    print("|---|---|---|---|---|")
    for name, op, rest in cases:
        t_cpu, (d_cpu, p_cpu) = timed(lambda: op(table, *rest), "cpu")
        table_gpu = table.cuda()
        t_gpu, (d_gpu, p_gpu) = timed(lambda: op(table_gpu, *rest), "cuda")
        same = torch.equal(d_gpu.cpu(), d_cpu) and torch.equal(p_gpu.cpu(), p_cpu)
        print(f"| {name} | {t_cpu:.4g} | {t_gpu:.4g} | {t_cpu / t_gpu:.3g} | {same} |", flush=True)
    print()
    print("| soft operator | CPU s | GPU s | CPU / GPU | max rel. diff |")
    print("|---|---|---|---|---|")
    for name, op, costs, rest in soft_cases:
        t_cpu, (d_cpu, p_cpu) = timed(lambda: op(costs, *rest), "cpu")
        costs_gpu = costs.cuda()
        t_gpu, (d_gpu, p_gpu) = timed(lambda: op(costs_gpu, *rest), "cuda")
        diff = max(float(((d_gpu.cpu() - d_cpu).abs() / d_cpu.abs().clamp_min(1e-300)).max()),
                   float((p_gpu.cpu() - p_cpu).abs().max()))
        print(f"| {name} | {t_cpu:.4g} | {t_gpu:.4g} | {t_cpu / t_gpu:.3g} | {diff:.1e} |", flush=True)
    print()
    print("| training step (pairwise distances, backward into the embedding) | CPU s | GPU s | CPU / GPU |"
          " max rel. diff of the gradient |")
    print("|---|---|---|---|---|")
    for name, items in training_items(rng, scale):
        t_cpu, t_gpu, diff = training_step(items, S, timed)
        print(f"| {name} | {t_cpu:.4g} | {t_gpu:.4g} | {t_cpu / t_gpu:.3g} | {diff:.1e} |", flush=True)


def training_step(items, S, timer):
    """A training step over the matrix of ``items`` (pairwise distances with an 8-dimensional
    EuclideanCost over S - 1 symbols, summed, backward) on the CPU and the GPU, timed by
    ``timer(step, device)``: the seconds of each and the gradients' largest relative difference."""
    results = []
    for device in ("cpu", "cuda"):
        emb = torch.as_tensor(np.random.default_rng(1).normal(size=(S - 1, 8)))
        cost = bedl_torch.EuclideanCost([str(k) for k in range(S - 1)], emb, device=device)

        def step():
            cost.zero_grad()
            bedl_torch.pairwise_distances(items, cost=cost).sum().backward()
            return cost.embedding.grad

        t, grad = timer(step, device)
        results.append((t, grad.cpu()))
    (t_cpu, g_cpu), (t_gpu, g_gpu) = results
    return t_cpu, t_gpu, float(((g_gpu - g_cpu).abs().max() / g_cpu.abs().max()))


def training_items(rng, scale):
    """A matrix's items for a training step: strings of 100 symbols, trees of 30 nodes."""
    strings = [[str(k) for k in rng.integers(0, 20, 100)] for _ in range(100 * scale)]
    yield f"{len(strings)} strings of 100 symbols", strings
    trees = list(training_trees(rng, 60 * scale, 30))
    yield f"{len(trees)} trees of 30 nodes", trees


def training_trees(rng, count, nodes):
    """``count`` random trees of ``nodes`` nodes as bedl_torch.Tree, labels "0" to "19"."""
    labels, sizes, ptr = label_trees(rng, count, nodes, 20)
    for t in range(len(ptr) - 1):
        size = sizes[ptr[t]:ptr[t + 1]].tolist()
        children = [[] for _ in size]
        for k in range(len(size)):  # preorder: k's children follow it, each after the last one's subtree
            c = k + 1
            while c < k + size[k]:
                children[k].append(c)
                c += size[c]
        yield bedl_torch.Tree([str(int(v)) for v in labels[ptr[t]:ptr[t + 1]]], children)


if __name__ == "__main__":
    main()
