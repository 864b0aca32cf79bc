"""Core benchmarks: bedl_torch against edist (1.2.2, PyPI) in the same run.

Run: ``make bench`` or ``.venv/bin/python benchmarks/bench_core.py [--quick]``.
edist is a benchmark-only peer: the library never imports it.

Prints a Markdown table of absolute times and ratios; record the output in
benchmarks/README.md with the machine and the command.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import time

import numpy as np
import torch

import bedl_torch as bt
from bench_common import best_seconds as timeit, random_tree

try:
    import edist.multiprocess as edist_mp
    import edist.ted as edist_ted
except ImportError:  # pragma: no cover
    edist_ted = None


def comb_tree(n: int) -> bt.Tree:
    """A spine whose every node has one leaf child on the left (many keyroots)."""
    labels, children = [], []
    # preorder: spine node, its leaf, next spine node, ...
    k = 0
    while k < n:
        labels.append("s")
        children.append([])
        if k + 1 < n:
            labels.append("l")
            children.append([])
            children[k].append(k + 1)
            if k + 2 < n:
                children[k].append(k + 2)
        k += 2
    return bt.Tree(labels, children)


def zigzag_tree(n: int) -> bt.Tree:
    """A path that hangs alternately left and right of a leaf sibling (keyroots on both sides)."""

    def build(remaining: int, left: bool):
        if remaining <= 1:
            return ("z",)
        if remaining == 2:
            return ("z", ("z",))
        inner = build(remaining - 2, not left)
        return ("z", inner, ("z",)) if left else ("z", ("z",), inner)

    return bt.Tree.from_tuple(build(n, True))


def bench_pair_100(rows, quick):
    """Per-pair time on 100-node random trees, one thread: ours as one batched call over
    all pairs (the normal workload) divided by the number of pairs, and as single calls;
    edist pair by pair (it has no batch call)."""
    torch.set_num_threads(1)
    rng = random.Random(1)
    k = 4 if quick else 16
    pairs = [(random_tree(100, "abcde", rng), random_tree(100, "abcde", rng)) for _ in range(k)]
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    alphabet = sorted({a for t in xs + ys for a in t.labels})
    gen = torch.Generator().manual_seed(0)
    emb = torch.randn(len(alphabet), 5, generator=gen, dtype=torch.float64)
    cost = bt.EuclideanCost(alphabet, emb)
    unit = bt.UnitCost(alphabet)
    vec = {a: emb[i].numpy() for i, a in enumerate(alphabet)}

    def delta(a, b):
        if a is None:
            return float(np.linalg.norm(vec[b]))
        if b is None:
            return float(np.linalg.norm(vec[a]))
        return float(np.linalg.norm(vec[a] - vec[b]))

    batch = bt.PairBatch(xs, ys)
    singles = [bt.PairBatch([x], [y]) for x, y in pairs]
    with torch.no_grad():
        d_ours = batch.distances(cost).numpy()
        # The distance and distance + P alternate, so that both see the same phases of a
        # machine whose speed drifts (best of five each).
        t_cb = t_p = float("inf")
        for _ in range(5):
            t_cb = min(t_cb, timeit(lambda: batch.distances(cost), repeat=1) / k)
            t_p = min(t_p, timeit(lambda: batch.coopt(cost), repeat=1) / k)
        t_unit = timeit(lambda: batch.distances(unit)) / k
        t_single = timeit(lambda: [s.distances(cost) for s in singles]) / k
    t_ed_cb = t_ed_unit = None
    if edist_ted is not None:
        forms = [((list(x.labels), [list(c) for c in x.children]), (list(y.labels), [list(c) for c in y.children]))
                 for x, y in pairs]
        for (fx, fy), d in zip(forms, d_ours):
            assert abs(edist_ted.ted(fx[0], fx[1], fy[0], fy[1], delta) - d) < 1e-9
        t_ed_cb = timeit(lambda: [edist_ted.ted(fx[0], fx[1], fy[0], fy[1], delta) for fx, fy in forms], repeat=3) / k
        t_ed_unit = timeit(lambda: [edist_ted.standard_ted(fx[0], fx[1], fy[0], fy[1]) for fx, fy in forms]) / k
    rows.append(("100-node random trees, 1 thread, Euclidean costs (edist: Python cost callback), s per pair, batched",
                 t_cb, t_ed_cb))
    rows.append(("same, ours as single calls (Python overhead per call included)", t_single, t_ed_cb))
    rows.append(("100-node random trees, 1 thread, unit costs (edist: standard_ted), s per pair, batched",
                 t_unit, t_ed_unit))
    rows.append(("100-node random trees, 1 thread, distance + P (ours) vs our distance", t_p, t_cb))


def bench_pairwise_30(rows, quick):
    torch.set_num_threads(2)
    rng = random.Random(2)
    n = 40 if quick else 100
    trees = [random_tree(30, "abcde", rng) for _ in range(n)]
    with torch.no_grad():
        t_ours = timeit(lambda: bt.pairwise_distances(trees), repeat=3, min_time=0.5)
        d_ours = bt.pairwise_distances(trees).numpy()
    t_ed = None
    if edist_ted is not None:
        forms = [(list(t.labels), [list(c) for c in t.children]) for t in trees]
        t_ed = float("inf")
        for _ in range(3):  # best of three, as for ours (each run starts its worker processes)
            start = time.perf_counter()
            d_ed = edist_mp.pairwise_distances_symmetric(forms, edist_ted.ted, num_jobs=2)
            t_ed = min(t_ed, time.perf_counter() - start)
        assert np.allclose(d_ed, d_ours), "pairwise distances disagree with edist"
    rows.append((f"{n}x{n} matrix of 30-node trees, 2 threads, unit costs", t_ours, t_ed))
    # The same with the AVX2 lanes (four pairs that share x at a time) off: the scalar
    # kernel, one pair at a time (same bits).
    from bedl_torch import _ext

    if _ext.simd_enabled():
        try:
            _ext.set_simd_enabled(False)
            with torch.no_grad():
                t_scalar = timeit(lambda: bt.pairwise_distances(trees), repeat=3, min_time=0.5)
                assert torch.equal(bt.pairwise_distances(trees), torch.as_tensor(d_ours))
        finally:
            _ext.set_simd_enabled(True)
        rows.append(("same, AVX2 lanes (ours) vs the scalar kernel (peer: ours, lanes off)", t_ours, t_scalar))
        if t_ed is not None:
            rows.append(("same, the scalar kernel vs edist", t_scalar, t_ed))
    torch.set_num_threads(1)


def bench_thread_scaling(rows, quick):
    """pairwise_distances on collections of mixed sizes with 2 threads against 1 (the peer
    column is our own 1-thread time): pairs are sorted by size, so the work must be
    shared out dynamically, not as one range per thread."""
    rng = random.Random(4)
    trees = [random_tree(rng.randint(5, 60), "abcde", rng) for _ in range(60 if quick else 120)]
    seqs = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(5, 300)))
            for _ in range(60 if quick else 150)]
    old = torch.get_num_threads()
    try:
        with torch.no_grad():
            for name, X in ((f"{len(trees)} trees of 5-60 nodes", trees),
                            (f"{len(seqs)} sequences of 5-300 symbols", seqs)):
                torch.set_num_threads(1)
                t1 = timeit(lambda: bt.pairwise_distances(X), repeat=3)
                torch.set_num_threads(2)
                t2 = timeit(lambda: bt.pairwise_distances(X), repeat=3)
                rows.append((f"pairwise matrix of {name}, unit costs: s with 2 threads (peer: ours with 1)",
                             t2, t1))
    finally:
        torch.set_num_threads(old)


def bench_lanes(rows, quick):
    """pairwise_distances of random trees on one thread with the AVX2 lanes (four pairs that
    share x at a time) against the scalar kernel (lanes off; the peer column), by tree size:
    where lanes pay, and where the wide rows outgrow the caches (lanes stop at (n+1) x wide
    width of 128k cells, about 250-node random trees)."""
    from bedl_torch import _ext

    if not _ext.simd_enabled():
        return
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    sizes = ((10, 100), (50, 60), (150, 20)) if quick else ((10, 100), (20, 100), (50, 60), (100, 30),
                                                            (150, 20), (200, 12), (300, 8))
    try:
        for n, count in sizes:
            rng = random.Random(n)
            trees = [random_tree(n, "abcde", rng) for _ in range(count)]
            best = {}
            with torch.no_grad():
                for on in (False, True, False, True):  # alternated: both see the same phases
                    _ext.set_simd_enabled(on)
                    best[on] = min(best.get(on, float("inf")),
                                   timeit(lambda: bt.pairwise_distances(trees), repeat=3))
            rows.append((f"{count} trees of {n} nodes, pairwise matrix, 1 thread: s with lanes "
                         f"(peer: lanes off)", best[True], best[False]))
    finally:
        _ext.set_simd_enabled(True)
        torch.set_num_threads(old)


def bench_sequences(rows, quick):
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(3)
    n = 1000
    x = list(np.random.default_rng(0).integers(0, 20, n))
    y = list(np.random.default_rng(1).integers(0, 20, n))
    C = torch.rand(n + 1, n + 1, generator=gen, dtype=torch.float64)
    batch = bt.PairBatch([x], [y])
    from bedl_torch import _ext

    with torch.no_grad():
        t = timeit(lambda: batch.distances(C[None]), repeat=5)
        tk = timeit(lambda: _ext.sed_cpu(C[None], batch.m, batch.n, False, 1e-9), repeat=5)
        tp = timeit(lambda: batch.coopt(C[None]), repeat=3)
    cells = (n + 1) * (n + 1)
    rows.append(("sequences of length 1000, arbitrary costs: ns per DP cell (distance)", t / cells * 1e9, None))
    rows.append(("same, the kernel alone (_C.sed_cpu, with its own cost checks)", tk / cells * 1e9, None))
    rows.append(("sequences of length 1000, arbitrary costs: ns per DP cell (distance + P)", tp / cells * 1e9, None))
    # A symbol table over a small alphabet (the kernels gather each pair's costs from it).
    rng = random.Random(4)
    alphabet = [chr(97 + k) for k in range(20)]
    strings = [[rng.choice(alphabet) for _ in range(rng.randint(150, 300))] for _ in range(100 if quick else 300)]
    cost = bt.EuclideanCost(alphabet, torch.randn(20, 4, generator=gen, dtype=torch.float64))
    with torch.no_grad():
        ts = timeit(lambda: bt.pairwise_distances(strings, cost=cost), repeat=3)
    rows.append((f"{len(strings)} sequences of 150-300 symbols over 20, Euclidean symbol table, 1 thread: "
                 "matrix seconds", ts, None))


def _alternating_matrices(objects, ours, peer):
    """Seconds of ``pairwise_distances(objects)`` under ``ours`` and under ``peer``: the best
    of two rounds each, in turn, so that both see the same phases of the machine's load."""
    best = {"ours": float("inf"), "peer": float("inf")}
    with torch.no_grad():
        for name, cost in (("ours", ours), ("peer", peer)) * 2:
            best[name] = min(best[name], timeit(lambda: bt.pairwise_distances(objects, cost=cost), repeat=2))
    return best["ours"], best["peer"]


class _TiledUnitCost(bt.UnitCost):
    """UnitCost's costs through the symbol-table path (the table-free op takes UnitCost itself)."""


def bench_unit_sequences(rows, quick):
    """pairwise_distances of sequences under unit costs, 2 threads: the bit-vector path (0/1
    replacements, unit gaps) against the DP on the same work (the peer: every cost doubled,
    ``MatrixCost(2 (1 - I))``, which no bit vector takes; its distances are twice the unit
    ones, checked)."""
    rng = random.Random(6)
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for lo, hi, count in ((5, 60, 300 if quick else 1000), (100, 300, 100 if quick else 300)):
            seqs = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(lo, hi)))
                    for _ in range(count)]
            alphabet = sorted(set("".join(seqs)))
            unit = bt.UnitCost(alphabet)
            doubled = bt.costs.MatrixCost(alphabet, 2.0 * (1.0 - torch.eye(len(alphabet) + 1, dtype=torch.float64)))
            with torch.no_grad():
                assert torch.equal(2 * bt.pairwise_distances(seqs, cost=unit), bt.pairwise_distances(seqs, cost=doubled))
            rows.append((f"{count} sequences of {lo}-{hi} symbols, pairwise matrix, unit costs, 2 threads: s with "
                         f"bit vectors (peer: the DP, costs doubled)", *_alternating_matrices(seqs, unit, doubled)))
        # A vocabulary beyond UnitCost's whole table: the table-free op against the tiles of local
        # tables that any other module takes (the peer: a subclass, same costs, which the op skips).
        vocab = [f"w{i}" for i in range(10_000)]
        weights = [1.0 / (r + 1) for r in range(len(vocab))]  # Zipf-like word frequencies
        count = 500 if quick else 2000
        sentences = [rng.choices(vocab, weights, k=rng.randint(5, 40)) for _ in range(count)]
        unit, tiled = bt.UnitCost(vocab), _TiledUnitCost(vocab)
        with torch.no_grad():
            assert torch.equal(bt.pairwise_distances(sentences, cost=unit), bt.pairwise_distances(sentences, cost=tiled))
        rows.append((f"{count} sentences of 5-40 words over a 10,000-word vocabulary, pairwise matrix, unit costs, "
                     f"2 threads: s without a table (peer: tiles of local tables)",
                     *_alternating_matrices(sentences, unit, tiled)))
    finally:
        torch.set_num_threads(old)


_MEM_SNIPPET = r"""
import json, resource, sys, time, torch, random
sys.path.insert(0, {bench_dir!r})
import bench_core as bc, bedl_torch as bt
torch.set_num_threads(1)
shape, n, with_p = {shape!r}, {n}, {with_p}
rng = random.Random(5)
if shape == "random":
    x, y = bc.random_tree(n, "abcde", rng), bc.random_tree(n, "abcde", rng)
elif shape == "comb":
    x, y = bc.comb_tree(n), bc.comb_tree(n)
else:
    x, y = bc.zigzag_tree(n), bc.zigzag_tree(n)
batch = bt.PairBatch([x], [y])
unit = bt.UnitCost(sorted(set(x.labels) | set(y.labels)))
C = batch.costs(unit)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
out = batch.coopt(C) if with_p else batch.distances(C)
elapsed = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"seconds": elapsed, "peak_mb": peak / 1024, "extra_mb": (peak - base) / 1024}}))
"""


def bench_large(rows, quick):
    sizes = [300] if quick else [300, 1000]
    bench_dir = os.path.dirname(os.path.abspath(__file__))
    for shape in ["random", "comb", "zigzag"]:
        for n in sizes:
            for with_p in (False, True):
                if shape == "zigzag" and n >= 1000 and with_p:
                    # Zhang-Shasha is O(n^4) on zigzags in either orientation; P there
                    # takes many minutes, so only the distance is timed.
                    continue
                code = _MEM_SNIPPET.format(bench_dir=bench_dir, shape=shape, n=n, with_p=with_p)
                out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
                res = json.loads(out.stdout.strip().splitlines()[-1])
                what = "distance + P" if with_p else "distance"
                rows.append((f"{n}-node {shape} trees, {what}, 1 thread: seconds (peak RSS {res['peak_mb']:.0f} MB, "
                             f"+{res['extra_mb']:.0f} MB for the call)", res["seconds"], None))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer pairs and sizes")
    benches = {"pair100": bench_pair_100, "pairwise30": bench_pairwise_30,
               "scaling": bench_thread_scaling, "lanes": bench_lanes, "sequences": bench_sequences,
               "unit_sequences": bench_unit_sequences,
               "large": bench_large}
    parser.add_argument("--only", nargs="+", choices=sorted(benches), default=list(benches),
                        help="run only these benchmarks")
    args = parser.parse_args()
    rows = []
    for name in args.only:
        benches[name](rows, args.quick)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, bedl_torch {bt.__version__}, edist "
          f"{'1.2.2' if edist_ted else 'not installed'}")
    print()
    print_rows(rows)


def print_rows(rows):
    """The Markdown table of (measurement, ours, peer or None) rows."""
    print("| measurement | bedl_torch | peer | ratio (peer / ours) |")
    print("|---|---|---|---|")
    for name, ours, peer in rows:
        ratio = f"{peer / ours:.1f}x" if peer else "-"
        peer_s = f"{peer:.4g}" if peer else "-"
        print(f"| {name} | {ours:.4g} | {peer_s} | {ratio} |")


if __name__ == "__main__":
    main()
