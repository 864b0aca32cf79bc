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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs")
    args = parser.parse_args()
    if not torch.cuda.is_available() or "sed_symbols" not in _ext.cuda_operators:
        sys.exit("needs a GPU and the extension built with CUDA (BEDL_TORCH_CUDA=1)")
    rng = np.random.default_rng(0)
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
        results = []
        for device in ("cpu", "cuda"):
            emb = torch.as_tensor(np.random.default_rng(1).normal(size=(S - 1, 8)))
            cost = bedl_torch.EuclideanCost([str(k) for k in range(S - 1)], emb, device=device)

            def step():
                cost.zero_grad()
                bedl_torch.pairwise_distances(items, cost=cost).sum().backward()
                return cost.embedding.grad

            t, grad = timed(step, device)
            results.append((t, grad.cpu()))
        (t_cpu, g_cpu), (t_gpu, g_gpu) = results
        diff = float(((g_gpu - g_cpu).abs().max() / g_cpu.abs().max()))
        print(f"| {name} | {t_cpu:.4g} | {t_gpu:.4g} | {t_cpu / t_gpu:.3g} | {diff:.1e} |", flush=True)


def training_items(rng, scale):
    """A matrix's items for a training step: strings of 100 symbols, trees of 30 nodes."""
    strings = [[str(k) for k in rng.integers(0, 20, 100)] for _ in range(100 * scale)]
    yield f"{len(strings)} strings of 100 symbols", strings
    labels, sizes, ptr = label_trees(rng, 60 * scale, 30, 20)
    trees = []
    for t in range(len(ptr) - 1):
        size = sizes[ptr[t]:ptr[t + 1]].tolist()
        children = [[] for _ in size]
        for k in range(len(size)):  # preorder: k's children follow it, each after the last one's subtree
            c = k + 1
            while c < k + size[k]:
                children[k].append(c)
                c += size[c]
        trees.append(bedl_torch.Tree([str(int(v)) for v in labels[ptr[t]:ptr[t + 1]]], children))
    yield f"{len(trees)} trees of 30 nodes", trees


if __name__ == "__main__":
    main()
