"""Exact k-NN and range search (``bedl_torch.kneighbors`` / ``radius_neighbors``) against the
full matrix (``pairwise_distances`` + sort / threshold) on real data, in the same run.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_search.py [--only ast sst]
[--n-ast 3000] [--ast-nodes 10 150] [--n-sst 3000] [--repeats 3] [--k 10] [--threads 2]
[--queries Q]``.

Data:

* ``ast``: syntax trees (``Tree.from_python``, node types as labels) of the functions defined
  in the Python standard library that runs this script (``def`` and ``async def`` at any
  depth, test packages excluded), those of 10 to 150 nodes (about the 10th to the 90th
  percentile of sizes; ``--ast-nodes LO HI`` for others), ``--n-ast`` of them drawn with seed 0.
* ``sst``: ``--n-sst`` sentences of the Stanford Sentiment Treebank as word sequences (the
  leaves of ``datasets.load("sentiment")``), drawn with seed 0.
* with ``--queries Q``, also the first ``Q`` syntax trees as queries against the others
  (``kneighbors(X, Y)``, the matrix ``pairwise_distances(X, Y)``): a user looking up new
  objects in a collection.

Costs: unit costs, and learned costs. ``ast``: the Euclidean costs of a ``bedl_torch.BEDL``
fit (pseudo mode, 2 rounds) on 200 of the trees labelled "method" (defined in a class body)
or "function", extended to labels the fit did not see by unit vectors of their own. ``sst``:
the protocol's cosine costs over GloVe (``SentimentCosts``, untrained ``Omega = I``: a stand-in
for learned costs, no fit).

For each: the full matrix (timed), the radius within which the closest 1% of pairs fall (the
1% quantile of the off-diagonal distances), then ``kneighbors(k)`` and ``radius_neighbors`` at
that radius (timed), each checked against the matrix (same indices, same distance bits).
Each repeat times the matrix, the k-NN search and the range search in turn (the machine is
shared: the three then see the same phase of its load); the table has their medians, the
speed-up over the matrix, the share of matrix entries whose exact distance was needed and the
kernel pairs computed against the matrix's.
"""
from __future__ import annotations

import argparse
import ast
import math
import os
import random
import statistics
import sysconfig
import time

import torch

import bedl_torch as bt
from bench_common import cpu_model, load_average


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------


def stdlib_functions(n: int, lo: int = 10, hi: int = 150, seed: int = 0):
    """``n`` function syntax trees of ``lo .. hi`` nodes from the standard library, and whether
    each is a method (defined directly in a class body); also how many qualified."""
    root = sysconfig.get_paths()["stdlib"]
    skip = {"test", "tests", "idlelib", "site-packages", "lib2to3"}
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in skip)
        files += [os.path.join(d, f) for f in sorted(names) if f.endswith(".py")]
    found = []
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                module = ast.parse(f.read())
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        methods = {id(node) for cls in ast.walk(module) if isinstance(cls, ast.ClassDef)
                   for node in cls.body}
        for node in ast.walk(module):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                tree = bt.Tree.from_python(node)
                if lo <= len(tree) <= hi:
                    found.append((tree, int(id(node) in methods)))
    random.Random(seed).shuffle(found)
    chosen = found[:n]
    return [t for t, _ in chosen], [m for _, m in chosen], len(found)


def sst_sentences(n: int, seed: int = 0):
    from bedl_torch.datasets import load
    from bedl_torch.evaluation.protocol.data import leaf_sequence

    trees, _ = load("sentiment")
    words = [leaf_sequence(t) for t in trees]
    random.Random(seed).shuffle(words)
    return words[:n], len(words)


def learned_ast_cost(X, is_method, n_train: int = 200):
    """BEDL's Euclidean costs fitted on ``n_train`` trees (half methods), over every label of X."""
    import numpy as np

    methods = [i for i, m in enumerate(is_method) if m][: n_train // 2]
    functions = [i for i, m in enumerate(is_method) if not m][: n_train // 2]
    idx = methods + functions
    train = [X[i] for i in idx]
    y = np.array([1] * len(methods) + [0] * len(functions))
    start = time.perf_counter()
    model = bt.BEDL(mode="pseudo", max_rounds=2, random_state=0).fit(train, y)
    fit_s = time.perf_counter() - start
    learned = model.cost_
    alphabet = bt.labels.alphabet_of(X)
    known = {a: i for i, a in enumerate(learned.alphabet)}
    unseen = [a for a in alphabet if a not in known]
    emb = learned.embedding.detach()
    full = torch.zeros(len(alphabet), emb.shape[1] + len(unseen), dtype=emb.dtype)
    for r, a in enumerate(alphabet):
        if a in known:
            full[r, : emb.shape[1]] = emb[known[a]]
    for j, a in enumerate(unseen):
        full[alphabet.index(a), emb.shape[1] + j] = 1.0
    return bt.EuclideanCost(alphabet, full), fit_s, len(unseen)


def sst_cost(X):
    from bedl_torch.evaluation.protocol.data import SentimentCosts

    return SentimentCosts().make(X, X)[0]


# ---------------------------------------------------------------------------
# Timing and checks
# ---------------------------------------------------------------------------


def timed(fn, repeats: int):
    """``(result of the last run, median wall seconds, median CPU seconds)``."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return out, statistics.median(walls), statistics.median(cpus)


def full_knn(D: torch.Tensor, k: int, same: bool = True):
    D = D.clone()
    if same:
        D.fill_diagonal_(math.inf)
    order = torch.argsort(D, dim=1, stable=True)[:, :k]
    return D.gather(1, order), order


def full_radius(D: torch.Tensor, radius: float, same: bool = True):
    mask = D <= radius
    if same:
        mask.fill_diagonal_(False)
    r, c = torch.nonzero(mask, as_tuple=True)
    return r, c, D[r, c]


def run_case(name: str, X, cost, k: int, repeats: int, unknown: str = "error", Y=None):
    """The matrix of X (against Y where given: queries against a collection) and the searches."""
    n, same = len(X), Y is None

    def matrix():
        with torch.no_grad():
            return bt.pairwise_distances(X, Y, cost=cost, unknown=unknown).detach().to("cpu", torch.float64)

    D, w0, c0 = timed(matrix, 1)
    (want_d, want_i), t_sort, _ = timed(lambda: full_knn(D, k, same), 1)
    upper = D[torch.triu(torch.ones(n, n, dtype=torch.bool), 1)] if same else D.reshape(-1)
    if len(upper) > 4_000_000:
        upper = upper[torch.randperm(len(upper), generator=torch.Generator().manual_seed(0))[:4_000_000]]
    radius = float(torch.quantile(upper, 0.01))
    # matrix, k-NN and range search in turn, so that each repeat's three see the same phase
    # of the shared machine; medians per kind
    times = {"full": [(w0, c0)], "knn": [], "rad": []}
    for rep in range(repeats):
        for kind, fn in (("full", matrix),
                         ("knn", lambda: bt.kneighbors(X, Y, k=k, cost=cost, unknown=unknown, return_stats=True)),
                         ("rad", lambda: bt.radius_neighbors(X, Y, radius=radius, cost=cost, unknown=unknown,
                                                             return_stats=True))):
            if kind == "full" and rep == 0:
                continue  # the matrix above was this repeat's
            out, w, c = timed(fn, 1)
            times[kind].append((w, c))
            if kind == "knn":
                d, i, ks = out
                assert torch.equal(i, want_i) and torch.equal(d, want_d), f"{name}: kneighbors differs"
            elif kind == "rad":
                r, c_, v, rs = out
                rr, rc, rv = full_radius(D, radius, same)
                assert torch.equal(r, rr) and torch.equal(c_, rc) and torch.equal(v, rv), \
                    f"{name}: radius_neighbors differs"
    med = {kind: (statistics.median(w for w, _ in ts), statistics.median(c for _, c in ts))
           for kind, ts in times.items()}
    t_full, c_full = med["full"]
    t_knn, c_knn = med["knn"]
    t_rad, c_rad = med["rad"]
    symmetric = same and (cost is None or getattr(cost, "symmetric", False))
    half = n * (n + 1) // 2 if symmetric else n * D.shape[1]  # kernel pairs of the matrix
    rows = []
    for what, t, cpu, stats, base in (("k-NN k=%d" % k, t_knn, c_knn, ks, t_full + t_sort),
                                      ("radius %.4g (%d pairs)" % (radius, len(r)), t_rad, c_rad, rs, t_full)):
        rows.append(f"| {name} | {what} | {base:.2f} | {t:.2f} | **{base / t:.1f}x** | "
                    f"{c_full / max(cpu, 1e-9):.1f}x | {stats['exact'] / stats['pairs']:.2%} | "
                    f"{stats['exact_computed'] / half:.2%} | "
                    f"{stats['decided_by_label'] / stats['pairs']:.1%} / "
                    f"{stats['decided_by_traversal'] / stats['pairs']:.1%} |")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=["ast", "sst"], choices=["ast", "sst"])
    ap.add_argument("--n-ast", type=int, default=3000)
    ap.add_argument("--ast-nodes", type=int, nargs=2, default=(10, 150), metavar=("LO", "HI"),
                    help="the syntax trees' sizes, LO to HI nodes (default 10 150)")
    ap.add_argument("--n-sst", type=int, default=3000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--queries", type=int, default=0, metavar="Q",
                    help="also the first Q syntax trees as queries against the others (kneighbors(X, Y))")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores, {args.threads} threads; torch {torch.__version__}; "
          f"load average at start {load_average()}")
    rows = []
    if "ast" in args.only:
        lo, hi = args.ast_nodes
        X, is_method, total = stdlib_functions(args.n_ast, lo, hi)
        sizes = sorted(len(t) for t in X)
        print(f"ast: {len(X)} of {total} standard-library functions with {lo}-{hi} nodes "
              f"(median {sizes[len(sizes) // 2]} nodes, {len(bt.labels.alphabet_of(X))} labels)")
        cost, fit_s, unseen = learned_ast_cost(X, is_method)
        print(f"ast: BEDL fit on 200 trees in {fit_s:.1f} s; {unseen} labels unseen in the fit")
        rows += run_case(f"ast {len(X)}, unit", X, None, args.k, args.repeats)
        rows += run_case(f"ast {len(X)}, BEDL", X, cost, args.k, args.repeats)
        if args.queries:
            Q, DB = X[:args.queries], X[args.queries:]
            rows += run_case(f"ast {len(Q)} queries x {len(DB)}, unit", Q, None, args.k, args.repeats, Y=DB)
            rows += run_case(f"ast {len(Q)} queries x {len(DB)}, BEDL", Q, cost, args.k, args.repeats, Y=DB)
    if "sst" in args.only:
        X, total = sst_sentences(args.n_sst)
        print(f"sst: {len(X)} of {total} sentences, {len(bt.labels.alphabet_of(X))} words")
        rows += run_case(f"sst {len(X)}, unit", X, None, args.k, args.repeats)
        rows += run_case(f"sst {len(X)}, cosine", X, sst_cost(X), args.k, args.repeats)
    print()
    print("| data, costs | search | matrix s | search s | speed-up (wall) | speed-up (CPU) | "
          "entries exact | kernel pairs vs matrix | decided by label / traversal |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)
    print(f"\nload average at end {load_average()}; all answers equal the matrix's (indices and bits)")


if __name__ == "__main__":
    main()
