"""How much exact work any bound-based exact k-NN must do on a data set: the least number of
kernel pairs (and their share of the matrix's DP work) whose exact distance is needed when
each row's final k-th distance is known in advance, for each choice of lower bounds.

An entry ``(i, j)`` can be excluded only by a bound strictly above row ``i``'s k-th distance
(or equal to it with ``j`` after the k-th's index, where the arithmetic is exact, as under
unit costs). So the entries whose best bound is at most that must be computed by every exact
k-NN that uses these bounds, with any engine; with ``Y=None`` and symmetric costs a kernel pair
serves ``(i, j)`` and ``(j, i)``. Work is counted as ``|x| |y|`` per pair (the matrix's DP
cells, up to the trees' keyroot factor). Unit costs only (integer distances).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/search_oracle.py [--n 2000] [--k 10] [--euler]
[--relaxed 1000] [--ceiling] [--gap] [--free-pivots]`` (computes the full matrix and the traversal matrices: about a minute for
2,000 syntax trees on 2 cores; ``--euler`` also the Euler-string bound, four times a
traversal's cells; ``--relaxed S`` the relaxed final table below on a sample of ``S`` of the
pairs that the engine's bounds leave needed and that lie above their threshold; ``--ceiling``
times ``kneighbors`` and its exact calls against the matrix, and the exact distances that a
perfect bound would leave: the speed-up an engine with a perfect, free bound and today's other
costs would reach).

The relaxed final table (a candidate bound, measured here, not in the engine): Zhang-Shasha's
table of the two roots with every subtree distance it reads replaced by a lower bound of it,
which makes the table's corner a lower bound of the distance (its recurrence is monotone).
The bound of the subtrees of ``i`` and ``j`` comes from the traversals' DP tables of the whole
trees: their postorder (and preorder) sequences are intervals, and for any costs
``SED(intervals) >= F(end) - F(before start)`` and ``>= B(before start) - B(end)``, with ``F``
and ``B`` the prefix and suffix tables. It costs four sequence tables and one forest table of
``|x| |y|`` cells each, against the keyroot tables' cells of the exact distance.

Data: the syntax trees of ``bench_search.py`` (standard-library functions of 10-150 nodes).
"""
from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time

import numpy as np
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


def postorder_index(tree):
    """``(labels, leftmost, pre_start, pre_labels)`` of a tree's nodes in postorder (1-based; entry
    0 unused): each node's label, its subtree's first node in postorder and in preorder
    (1-based), and the labels in preorder."""
    sizes, depths, n = tree.subtree_sizes(), tree.depths(), len(tree.labels)
    labels, leftmost, pre_start = [None] * (n + 1), [0] * (n + 1), [0] * (n + 1)
    for i in range(n):  # preorder node i is postorder node i + size - depth (1-based)
        v = i + sizes[i] - depths[i]
        labels[v], leftmost[v], pre_start[v] = tree.labels[i], v - sizes[i] + 1, i + 1
    return labels, np.array(leftmost), np.array(pre_start), [None] + list(tree.labels)


def unit_sed_table(a, b):
    """The unit-cost edit distance table of label lists ``a`` and ``b`` (``(|a|+1, |b|+1)``)."""
    m, n = len(a), len(b)
    table = np.zeros((m + 1, n + 1))
    table[0] = np.arange(n + 1)
    ar, bb = np.arange(n + 1), np.array(b, dtype=object)
    for i in range(1, m + 1):
        t = np.empty(n + 1)
        t[0] = table[i - 1][0] + 1
        t[1:] = np.minimum(table[i - 1][1:] + 1, table[i - 1][:-1] + (bb != a[i - 1]))
        table[i] = np.minimum.accumulate(t - ar) + ar  # the insertion chain as a running minimum
    return table


RELAXED_ORDERS = {"both": (True, False), "preorder": (False,), "postorder": (True,), "histograms": ()}


def subtree_histogram_bound(x, y):
    """``max(|s_i|, |s_j|) - |labels(s_i) & labels(s_j)|`` (multisets) for every pair of subtrees
    of two ``postorder_index`` results: the label bound of each subtree pair under unit costs."""
    (lx, fx, _, _), (ly, fy, _, _) = x, y
    codes = {label: c for c, label in enumerate(dict.fromkeys(lx[1:] + ly[1:]))}
    counts = []
    for labels, first in ((lx, fx), (ly, fy)):
        prefix = np.zeros((len(labels), len(codes)))
        for v in range(1, len(labels)):
            prefix[v] = prefix[v - 1]
            prefix[v, codes[labels[v]]] += 1
        counts.append(prefix[1:] - prefix[first[1:] - 1])  # node v's subtree: postorder l(v) .. v
    cx, cy = counts
    common = np.minimum(cx[:, None, :], cy[None, :, :]).sum(2)
    return np.maximum(cx.sum(1)[:, None], cy.sum(1)[None, :]) - common


def relaxed_final_table(x, y, orders=(True, False)):
    """The relaxed final table's corner for two ``postorder_index`` results (unit costs), the
    subtree bounds from the prefix and suffix tables of the postorder (``True`` in ``orders``)
    and of the preorder (``False``), each alongside the subtrees' size difference."""
    (lx, fx, sx, qx), (ly, fy, sy, qy) = x, y
    n, m = len(lx) - 1, len(ly) - 1
    size_x, size_y = np.arange(1, n + 1) - fx[1:] + 1, np.arange(1, m + 1) - fy[1:] + 1
    bounds = [np.abs(size_x[:, None] - size_y[None, :]).astype(float)]
    if not orders:  # no table: the subtrees' label histograms
        bounds.append(subtree_histogram_bound(x, y))
    for postorder, a, b in ((True, lx[1:], ly[1:]), (False, qx[1:], qy[1:])):
        if postorder not in orders:
            continue
        F = unit_sed_table(a, b)
        B = unit_sed_table(a[::-1], b[::-1])[::-1, ::-1]  # B[i, j]: a[i+1 ..] against b[j+1 ..]
        if postorder:  # postorder intervals [l(v), v]
            end_x, end_y, start_x, start_y = np.arange(1, n + 1), np.arange(1, m + 1), fx[1:], fy[1:]
        else:  # preorder intervals [s(v), s(v) + size - 1]
            start_x, start_y = sx[1:], sy[1:]
            end_x, end_y = start_x + np.arange(1, n + 1) - fx[1:], start_y + np.arange(1, m + 1) - fy[1:]
        ex, ey, bx, by = end_x[:, None], end_y[None, :], start_x[:, None] - 1, start_y[None, :] - 1
        bounds.append(F[ex, ey] - F[bx, by])
        bounds.append(B[bx, by] - B[ex, ey])
    lower = np.maximum.reduce(bounds)  # (n, m): a lower bound of every subtree pair's distance
    fd = np.zeros((n + 1, m + 1))
    fd[:, 0], fd[0] = np.arange(n + 1), np.arange(m + 1)
    ar = np.arange(m + 1)
    on_path_y = fy[1:] == 1  # y[1 .. j] is j's whole subtree
    differ = np.array([[lx[i] != ly[j] for j in range(1, m + 1)] for i in range(1, n + 1)], dtype=float)
    for i in range(1, n + 1):
        jump = fd[fx[i] - 1, fy[1:] - 1] + lower[i - 1]
        if fx[i] == 1:  # cells of two whole subtrees define their distance from the table itself
            jump = np.where(on_path_y, fd[i - 1, :-1] + differ[i - 1], jump)
        t = np.empty(m + 1)
        t[0] = i
        t[1:] = np.minimum(fd[i - 1, 1:] + 1, jump)
        fd[i] = np.minimum.accumulate(t - ar) + ar
    return fd[n, m]


def keyroot_cells(tree):
    """The exact distance's forest cells on this tree's side: its keyroots' subtree sizes summed
    (a pair's cells are the product of both sides')."""
    labels, leftmost, _, _ = postorder_index(tree)
    seen, total = set(), 0
    for v in range(len(labels) - 1, 0, -1):
        if leftmost[v] not in seen:
            seen.add(leftmost[v])
            total += v - leftmost[v] + 1
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--euler", action="store_true")
    ap.add_argument("--relaxed", type=int, default=0, metavar="S",
                    help="also the relaxed final table on S sampled pairs above their threshold")
    ap.add_argument("--pivots", type=int, nargs="*", default=[],
                    help="also the triangle-inequality bound max_p |d(x, p) - d(p, y)| over this many "
                         "pivots chosen farthest-first (valid where the costs are a metric, as unit "
                         "costs are), each count's pivot distances reported as extra work")
    ap.add_argument("--ceiling", action="store_true",
                    help="also time kneighbors, its exact calls and a perfect bound's exact pairs")
    ap.add_argument("--gap", action="store_true",
                    help="also where the entries lie that the engine's bounds leave needed beyond the "
                         "answer: their distance above the row's threshold, and which rows hold their work")
    ap.add_argument("--free-pivots", action="store_true",
                    help="also the triangle inequality over the exact distances a search has already "
                         "computed (no extra distances), rows in order, told the final thresholds")
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
    sizes = torch.tensor([len(t) for t in X], dtype=torch.float64)
    work = sizes[:, None] * sizes[None, :]
    upper = torch.ones(n, n, dtype=torch.bool).triu(1)
    total = float(work[upper].sum())
    pivots = f" --pivots {' '.join(map(str, args.pivots))}" if args.pivots else ""
    print(f"command: `PYTHONPATH=. .venv/bin/python benchmarks/search_oracle.py --n {args.n} --k {k}"
          f"{' --euler' if args.euler else ''}{pivots}{f' --relaxed {args.relaxed}' if args.relaxed else ''}"
          f"{' --gap' if args.gap else ''}"
          f"{' --free-pivots' if args.free_pivots else ''}`  ")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; {n} of {found} functions, median "
          f"{int(sizes.median())} nodes; matrix {matrix_s:.1f} s; row k-th distances: median "
          f"{float(kth.median()):g}, 90th percentile {float(torch.quantile(kth, 0.9)):g}\n")
    print("| lower bound | entries needed | kernel pairs needed | share of the matrix's pairs | "
          "share of its DP work | pivot distances' share of the DP work |")
    print("|---|---|---|---|---|---|")
    needed = {}  # per bound, the kernel pairs it leaves
    for name, b in bounds.items():
        need = _needed(b, kth, kidx)
        pairs = needed[name] = (need | need.T) & upper
        extra = (f"{float(sizes[pivot_work[name]].sum() * sizes.sum()) / total:.1%}" if name in pivot_work
                 else "-")
        print(f"| {name} | {int(need.sum())} | {int(pairs.sum())} | {float(pairs.sum()) / float(upper.sum()):.1%} | "
              f"{float(work[pairs].sum()) / total:.1%} | {extra} |")
    engine = bounds["label, pre, post (the engine's)"]
    if args.relaxed:
        relaxed_sample(X, D, engine, kth, kidx, args.relaxed)
    if args.gap:
        gap(D, engine, kth, kidx, sizes)
    if args.free_pivots:
        free_pivots(D, engine, kth, kidx, sizes)
    if args.ceiling:
        ceiling(X, k, matrix_s, torch.nonzero(needed["the distance itself"], as_tuple=True))


def ceiling(X, k, matrix_s, perfect_pairs):
    """The k-NN's time split into its exact calls and the rest (bounds, traversals, the rounds'
    selection), and the exact distances of the kernel pairs a perfect bound leaves: the
    speed-up over the matrix with that bound for free and the rest as it is today."""
    from bedl_torch.search.problem import SearchProblem

    spent = []
    exact = SearchProblem.exact

    def timed_exact(self, *a, **kw):
        start = time.perf_counter()
        out = exact(self, *a, **kw)
        spent.append(time.perf_counter() - start)
        return out

    SearchProblem.exact = timed_exact
    try:
        start = time.perf_counter()
        _, _, stats = bt.kneighbors(X, k=k, return_stats=True)
        search_s = time.perf_counter() - start
    finally:
        SearchProblem.exact = exact
    problem = SearchProblem(X, None, None)
    a, b = problem.kernel_pairs(*perfect_pairs)
    start = time.perf_counter()
    problem.exact(a, b, distinct=True)
    perfect_s = time.perf_counter() - start
    rest = search_s - sum(spent)
    print(f"\nk-NN (k = {k}): {search_s:.2f} s against the matrix's {matrix_s:.2f} s "
          f"({matrix_s / search_s:.1f}x); its exact calls {sum(spent):.2f} s for "
          f"{stats['exact_computed']} kernel pairs, the rest {rest:.2f} s. A perfect bound leaves "
          f"{len(a)} kernel pairs, {perfect_s:.2f} s: with that bound free and the rest as it is, "
          f"{matrix_s / (rest + perfect_s):.1f}x.")


def _needed(bound, kth, kidx):
    """Entries ``(row, col)`` that a bound cannot exclude with the rows' final thresholds."""
    cols = torch.arange(bound.shape[1])[None, :]
    need = (bound < kth) | ((bound == kth) & (cols <= kidx))
    need.fill_diagonal_(False)
    return need


def gap(D, engine_bound, kth, kidx, sizes):
    """The entries the engine's bounds leave needed that are not in the answer: how far their
    distance lies above the row's threshold, weighted by ``|x| |y|``, and the rows holding them."""
    gap_mask = _needed(engine_bound, kth, kidx) & ~_needed(D, kth, kidx)
    work = (sizes[:, None] * sizes[None, :])[gap_mask]
    excess = (D - kth)[gap_mask]
    print(f"\nEntries needed beyond the answer: {int(gap_mask.sum())}; their distance above the row's "
          f"threshold (share of their |x| |y| work):")
    for lo, hi in [(0, 1), (1, 2), (2, 4), (4, 8), (8, 16), (16, math.inf)]:
        m = (excess >= lo) & (excess < hi)
        print(f"- [{lo}, {hi}): {int(m.sum())} entries, {float(work[m].sum() / work.sum()):.1%} of the work")
    relative = excess / kth.expand_as(D)[gap_mask].clamp(min=1)
    slack = (D - engine_bound)[gap_mask]
    row_work = torch.zeros(len(D), dtype=torch.float64).index_add_(
        0, torch.nonzero(gap_mask)[:, 0], work)
    top = torch.argsort(row_work, descending=True)[: max(1, len(D) // 10)]
    print(f"Relative excess median {float(relative.median()):.2f}; distance minus bound median "
          f"{float(slack.median()):g}. The 10% of rows with the most of this work hold "
          f"{float(row_work[top].sum() / row_work.sum()):.0%} of it: median size {float(sizes[top].median()):g} "
          f"nodes, median threshold {float(kth[top].median()):g} (all rows: {float(sizes.median()):g}, "
          f"{float(kth.median()):g}).")


def free_pivots(D, engine_bound, kth, kidx, sizes):
    """The triangle inequality ``d(i, l) >= |d(i, j) - d(j, l)|`` (metric costs, as unit costs are)
    over pivots ``j`` whose two distances a search has already computed: rows in order, each
    row's needed entries by rising bound in groups of 8, told the final thresholds."""
    Dn, need = D.numpy(), _needed(engine_bound, kth, kidx).numpy()
    t, ki, sz = kth[:, 0].numpy(), kidx[:, 0].numpy(), sizes.numpy()
    bound = engine_bound.numpy()
    n = len(Dn)
    known = np.zeros((n, n), dtype=bool)
    computed, pruned, work = 0, 0, 0.0
    for i in range(n):
        cand = np.nonzero(need[i])[0]
        cand = cand[np.argsort(bound[i, cand], kind="stable")]
        for s in range(0, len(cand), 8):
            c = cand[s:s + 8]
            c = c[~known[i, c]]
            pivots = np.nonzero(known[i])[0]
            if len(c) and len(pivots):
                both = known[np.ix_(pivots, c)]
                tri = np.where(both, np.abs(Dn[i, pivots][:, None] - Dn[np.ix_(pivots, c)]), -np.inf).max(axis=0)
                out = (tri > t[i]) | ((tri == t[i]) & (c > ki[i]))
                pruned += int(out.sum())
                c = c[~out]
            known[i, c] = known[c, i] = True
            computed += len(c)
            work += float((sz[i] * sz[c]).sum())
    upper = np.triu(np.ones((n, n), dtype=bool), 1)
    base = (need | need.T) & upper
    cells = np.outer(sz, sz)
    print(f"\nFree pivots (the search's own exact distances, final thresholds): {computed} kernel pairs "
          f"computed against {int(base.sum())} without them ({pruned} entries excluded by the triangle); "
          f"|x| |y| work {work / cells[upper].sum():.1%} of the matrix's against "
          f"{cells[base].sum() / cells[upper].sum():.1%}.")


def relaxed_sample(X, D, engine_bound, kth, kidx, count):
    """The relaxed final table on ``count`` sampled kernel pairs that the engine's bounds leave
    needed (for either row) and whose distance is above that row's threshold: the share it
    proves above, and its cells against the exact distance's."""
    need = _needed(engine_bound, kth, kidx)
    above = need & (D > kth)  # entries (row, col) the exact distance puts above their row's threshold
    entries = torch.nonzero(above).tolist()
    sample = random.Random(0).sample(entries, min(count, len(entries)))
    index = {}
    proven, relaxed_cells, exact_cells = dict.fromkeys(RELAXED_ORDERS, 0), 0, 0
    start = time.perf_counter()
    for r, c in sample:
        for v in (r, c):
            if v not in index:
                index[v] = (postorder_index(X[v]), keyroot_cells(X[v]))
        (ix, kx), (iy, ky) = index[r], index[c]
        for name, orders in RELAXED_ORDERS.items():
            value = relaxed_final_table(ix, iy, orders)
            assert value <= float(D[r, c]) + 1e-9, f"the relaxed table exceeded the distance of ({r}, {c})"
            proven[name] += value > float(kth[r])
        relaxed_cells += len(X[r]) * len(X[c])
        exact_cells += kx * ky
    print(f"\nRelaxed final table on {len(sample)} of the {len(entries)} needed entries above their "
          f"row's threshold ({time.perf_counter() - start:.0f} s in numpy), proven above with the subtree "
          f"bounds of both traversals' tables (four sequence tables and the forest table: "
          f"{5 * relaxed_cells / exact_cells:.2f}x the exact distance's keyroot-table cells): "
          f"{proven['both'] / len(sample):.1%}; of the preorder's alone (two tables and the forest table: "
          f"{3 * relaxed_cells / exact_cells:.2f}x): {proven['preorder'] / len(sample):.1%}; of the "
          f"postorder's alone: {proven['postorder'] / len(sample):.1%}; with no table, the subtrees' label "
          f"histograms and sizes: {proven['histograms'] / len(sample):.1%}")


if __name__ == "__main__":
    main()
