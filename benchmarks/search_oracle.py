"""How much exact work any bound-based exact k-NN must do on a data set: the least number of
kernel pairs (and their share of the matrix's DP work) whose exact distance is needed when
each row's final k-th distance is known in advance, for each choice of lower bounds.

An entry ``(i, j)`` can be excluded only by a bound strictly above row ``i``'s k-th distance
(or equal to it with ``j`` after the k-th's index, where the arithmetic is exact, as under
unit costs). So the entries whose best bound is at most that must be computed by every exact
k-NN that uses these bounds, with any engine; with ``Y=None`` and symmetric costs a kernel pair
serves ``(i, j)`` and ``(j, i)``. Work is counted as ``|x| |y|`` per pair (the matrix's DP
cells, up to the trees' keyroot factor). Unit costs only (integer distances).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/search_oracle.py [--n 2000] [--k 10] [--euler]``
(computes the full matrix and the traversal matrices: about a minute for 2,000 syntax trees on
2 cores; ``--euler`` also the Euler-string bound, four times a traversal's cells).

Data: the syntax trees of ``bench_search.py`` (standard-library functions of 10-150 nodes).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch

import bedl_torch as bt
from bedl_torch.search import label_lower_bound, traversal_lower_bound
from bench_common import cpu_model
from bench_search import stdlib_functions


def euler_sequence(tree) -> list:
    """Each node's label on entering and on leaving it (marked): a tree edit operation changes
    at most two symbols, so under unit costs half the sequences' edit distance bounds the
    tree edit distance from below (Akutsu)."""
    out, stack = [], [(0, False)]
    children = tree.children
    while stack:
        v, leaving = stack.pop()
        out.append((")" if leaving else "(") + str(tree.labels[v]))
        if not leaving:
            stack.append((v, True))
            stack.extend((c, False) for c in reversed(children[v]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--euler", action="store_true")
    ap.add_argument("--pivots", type=int, nargs="*", default=[],
                    help="also the triangle-inequality bound max_p |d(x, p) - d(p, y)| over this many "
                         "pivots chosen farthest-first (valid where the costs are a metric, as unit "
                         "costs are), each count's pivot distances reported as extra work")
    args = ap.parse_args()
    sys.setrecursionlimit(10000)
    X, _, found = stdlib_functions(args.n)
    n, k = len(X), args.k
    start = time.perf_counter()
    with torch.no_grad():
        D = bt.pairwise_distances(X).detach().double()
    matrix_s = time.perf_counter() - start
    bounds = {"label": label_lower_bound(X),
              "preorder": traversal_lower_bound(X, order="pre"),
              "postorder": traversal_lower_bound(X, order="post")}
    bounds["label, pre, post (the engine's)"] = torch.maximum(
        bounds["label"], torch.maximum(bounds["preorder"], bounds["postorder"]))
    if args.euler:
        E = [euler_sequence(t) for t in X]
        with torch.no_grad():
            half = bt.pairwise_distances(E, cost=bt.UnitCost(bt.labels.alphabet_of(E))).detach().double() / 2
        assert bool((half <= D).all()), "the Euler-string bound exceeded a distance"
        bounds["label, pre, post, Euler"] = torch.maximum(bounds["label, pre, post (the engine's)"],
                                                          torch.ceil(half))
    pivot_work = {}
    for count in args.pivots:
        chosen, nearest = [0], D[0].clone()
        for _ in range(count - 1):  # farthest-first: each next pivot the object farthest from the chosen
            chosen.append(int(torch.argmax(nearest)))
            nearest = torch.minimum(nearest, D[chosen[-1]])
        to_pivots = D[:, chosen]
        triangle = (to_pivots[:, None, :] - to_pivots[None, :, :]).abs().amax(dim=2)
        name = f"label, pre, post, {count} pivots"
        bounds[name] = torch.maximum(bounds["label, pre, post (the engine's)"], triangle)
        pivot_work[name] = chosen
    bounds["the distance itself"] = D
    Dd = D.clone()
    Dd.fill_diagonal_(math.inf)
    order = torch.argsort(Dd, dim=1, stable=True)
    kth, kidx = Dd.gather(1, order[:, k - 1:k]), order[:, k - 1:k]
    cols = torch.arange(n)[None, :]
    sizes = torch.tensor([len(t) for t in X], dtype=torch.float64)
    work = sizes[:, None] * sizes[None, :]
    upper = torch.ones(n, n, dtype=torch.bool).triu(1)
    total = float(work[upper].sum())
    pivots = f" --pivots {' '.join(map(str, args.pivots))}" if args.pivots else ""
    print(f"command: `PYTHONPATH=. .venv/bin/python benchmarks/search_oracle.py --n {args.n} --k {k}"
          f"{' --euler' if args.euler else ''}{pivots}`  ")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; {n} of {found} functions, median "
          f"{int(sizes.median())} nodes; matrix {matrix_s:.1f} s; row k-th distances: median "
          f"{float(kth.median()):g}, 90th percentile {float(torch.quantile(kth, 0.9)):g}\n")
    print("| lower bound | entries needed | kernel pairs needed | share of the matrix's pairs | "
          "share of its DP work | pivot distances' share of the DP work |")
    print("|---|---|---|---|---|---|")
    for name, b in bounds.items():
        need = (b < kth) | ((b == kth) & (cols <= kidx))
        need.fill_diagonal_(False)
        pairs = (need | need.T) & upper
        extra = (f"{float(sizes[pivot_work[name]].sum() * sizes.sum()) / total:.1%}" if name in pivot_work
                 else "-")
        print(f"| {name} | {int(need.sum())} | {int(pairs.sum())} | {float(pairs.sum()) / float(upper.sum()):.1%} | "
              f"{float(work[pairs].sum()) / total:.1%} | {extra} |")


if __name__ == "__main__":
    main()
