"""Exact k-nearest-neighbour and range search over edit distances, pruned by bounds.

The engine works on blocks of query rows (objects of X) against all of Y:

1. the label-multiset lower bound of every pair of the block (one matrix product,
   :class:`~bedl_torch.search.bounds.LabelBound`) and, for k-NN, the cheap mapping upper
   bounds, whose ``k``-th smallest per row starts each row's threshold;
2. k-NN (:func:`knn_block`): a batched multi-step search. Each round refines, per row, the
   entries with the smallest current lower bounds that do not exceed the row's threshold by one
   level (trees: preorder, then postorder sequence edit distance, then the exact distance;
   sequences: the exact distance), one batched kernel call per level
   (:meth:`SearchProblem.traversal_values`, :meth:`SearchProblem.exact`);
3. each row keeps its ``k`` best exact distances (ties by index); its threshold is the
   ``k``-th of them. An entry is pruned only where its bound, less the rounding margin of
   :meth:`~bedl_torch.search.bounds.SymbolCosts.margin`, is strictly greater than the
   threshold, so an entry whose distance equals the ``k``-th one is never lost. Where the
   arithmetic is exact (integer costs from a whole table: the margin is 0) an entry whose bound
   equals the ``k``-th distance is pruned too when its index comes after the ``k``-th's: it
   cannot win the tie.

Where the bounds cannot pay for the whole problem (:func:`bounds_cannot_pay`: no lower bound;
one exact distance costs about what a round spends per entry, :attr:`SearchProblem.cheap_exact`,
short sequences under unit costs on bit vectors; or, for sequences, a probe of rows spread over
X expects most entries to stay open), :func:`kneighbors` computes the matrix's own tiles one by
one and keeps each row's ``k`` best (:func:`knn_all_pairs`). Within the blocks (and in every
block of a distributed search) a block's open entries go to one exact call under the same
conditions, and once every row has ``k`` exact distances when most undecided entries are still
open.

Range search (:func:`radius_block`) applies the same bounds with the fixed threshold
``radius``; :func:`radius_blocks` verifies the open entries of consecutive blocks in one exact
call. Where no bound pays (:func:`exact_is_cheapest`) it thresholds the matrix's tiles
(:func:`radius_all_pairs`).

Correctness: every entry of a row is either computed exactly or has a lower bound above a
threshold that is never below the row's final ``k``-th (distance, index) (a threshold is
always the ``k``-th smallest of some ``k`` upper bounds or exact distances), so every entry
that belongs to the answer is computed, and the ``k`` best by (distance, index) among the
computed entries are those of the full matrix. Exact distances come from
:func:`bedl_torch.ops.table_pair_distances` over the same flattened collections and the same
orientation as :func:`bedl_torch.pairwise_distances` (``i <= j`` where that function computes
half the matrix and mirrors it), hence the same bits (see :meth:`SearchProblem.exact` for
cost modules without a whole table).

For a distributed caller: :func:`knn_block` and :func:`radius_block` each take one block of
rows of a shared :class:`SearchProblem` and return that block's results and a stats dict
whose entries add up across blocks; k-NN blocks also hand on the exact distances they computed
for later rows (symmetric problems), which a caller may pass to later blocks or drop.
"""
from __future__ import annotations

import math
import numbers
from typing import Collection, Optional, Sequence, Tuple

import numpy as np
import torch

from .._memory import release_freed_memory
from ..costs import SymbolCost
from .problem import BOUNDS, SearchProblem, merge_stats, new_stats

__all__ = ["kneighbors", "radius_neighbors", "SearchProblem", "knn_block", "radius_block", "knn_blocks",
           "knn_all_pairs", "radius_all_pairs", "exact_is_cheapest", "sorted_entries", "matrix_block_pairs",
           "bounds_cannot_pay", "merge_nearest", "radius_blocks",
           "radius_candidates", "radius_verify", "RADIUS_POOL_ENTRIES", "BLOCKS_PER_PART", "block_rows",
           "check_k", "check_mode", "check_radius", "merge_stats", "BOUNDS", "problem_kneighbors",
           "problem_radius_neighbors"]

# Pairs per block of rows (its bound matrices are float64 and int64 of this many entries).
_BLOCK_CELLS = 1 << 22
#: Where parts (ranks) share the blocks of :func:`knn_all_pairs`, they are cut so that each part
#: gets about this many: enough to balance blocks of unequal cost.
BLOCKS_PER_PART = 4
_NO_INDEX = torch.iinfo(torch.int64).max
# Largest number of entries per row refined in one round of k-NN (wider rounds refine more
# entries before the thresholds fall; 2,000 syntax trees, unit costs: 1024 computed 24% more
# exact and 37% more traversal distances than 128).
_MAX_WIDTH = 128
# Once every row of a k-NN block has k exact distances: if more than this share of the
# undecided entries is still open (bound <= threshold), all of them are computed exactly at once.
_DENSE_SHARE = 0.5
# Sequences (the label bound alone): before the first round, rows of a block probed for that
# share, each with the exact distances of its candidates of smallest bound.
_PROBE_ROWS = 16
_PROBE_PER_K = 4


def matrix_block_pairs(problem: SearchProblem, parts: int = 1) -> int:
    """Kernel pairs per block of :func:`knn_all_pairs` where its blocks are shared among
    ``parts`` parts (ranks): about 4M, cut so that each part gets about :data:`BLOCKS_PER_PART`
    blocks to balance."""
    if parts <= 1:
        return _BLOCK_CELLS
    nx, ny = problem.nx, problem.ny
    total = nx * (nx + 1) // 2 if problem.symmetric else nx * ny
    return max(1, min(_BLOCK_CELLS, -(-total // (BLOCKS_PER_PART * parts))))


def block_rows(problem: SearchProblem, block_size: Optional[int]) -> int:
    """Query rows per block: ``block_size``, or about 4M pairs a block."""
    if block_size is None:
        return max(1, _BLOCK_CELLS // max(1, problem.ny))
    if isinstance(block_size, bool) or not isinstance(block_size, numbers.Integral) or block_size < 1:
        raise ValueError(f"block_size must be an int >= 1, got {block_size!r}")
    return int(block_size)


# ---------------------------------------------------------------------------
# k nearest neighbours
# ---------------------------------------------------------------------------


def _merge_into(best_d, best_i, rl, c, v, k):
    """Row-wise merge of the entries ``(rl[q], c[q], v[q])`` into the ``k`` best lists by
    (distance, index); rows without entries stay as they are."""
    keep = v <= best_d[rl, -1]  # only these can enter a row's k best
    if not keep.all():
        rl, c, v = rl[keep], c[keep], v[keep]
    if len(rl) == 0:
        return
    touched, local = torch.unique(rl, return_inverse=True)
    counts = torch.bincount(local, minlength=len(touched))
    order = torch.argsort(local, stable=True)
    ls = local[order]
    start = torch.cumsum(counts, 0) - counts
    slot = torch.arange(len(ls)) - start[ls]
    width = int(counts.max())
    cd = torch.full((len(touched), width), math.inf, dtype=torch.float64)
    ci = torch.full((len(touched), width), _NO_INDEX, dtype=torch.int64)
    cd[ls, slot] = v[order]
    ci[ls, slot] = c[order]
    d = torch.cat([best_d[touched], cd], 1)
    i = torch.cat([best_i[touched], ci], 1)
    o = torch.argsort(i, dim=1, stable=True)
    d, i = d.gather(1, o), i.gather(1, o)
    o = torch.argsort(d, dim=1, stable=True)[:, :k]
    best_d[touched], best_i[touched] = d.gather(1, o), i.gather(1, o)


def _k_smallest(M: torch.Tensor, k: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Each row's ``k`` smallest entries of ``M`` by (value, column), as ``(values, columns)``;
    ``+inf`` entries count as missing (column ``_NO_INDEX``). ``topk`` gives the values (their
    multiset is unique); only the columns of the ties at a row's ``k``-th value are chosen
    again, the first ones of the row, so no sort over a row's ties (integer distances tie by
    the thousand) and two passes over ``M`` besides ``topk``'s."""
    B, ny = M.shape
    kk = min(k, ny)
    if B == 0 or kk == 0:
        return (torch.full((B, kk), math.inf, dtype=torch.float64),
                torch.full((B, kk), _NO_INDEX, dtype=torch.int64))
    d, i = torch.topk(M, kk, dim=1, largest=False, sorted=True)
    d = d.to(torch.float64)
    kth = d[:, -1:]
    below = (d < kth).sum(1)  # slots before the ties at the k-th value (d ascends)
    tr, tc = torch.nonzero(M == kth, as_tuple=True)  # row-major: columns ascending in a row
    counts = torch.bincount(tr, minlength=B)
    pos = torch.arange(len(tr)) - (torch.cumsum(counts, 0) - counts)[tr]
    slot = below[tr] + pos
    keep = slot < kk
    i[tr[keep], slot[keep]] = tc[keep]
    # equal values below the k-th: columns ascending (both sorts over k entries a row)
    o = torch.argsort(i, dim=1, stable=True)
    d, i = d.gather(1, o), i.gather(1, o)
    o = torch.argsort(d, dim=1, stable=True)
    d, i = d.gather(1, o), i.gather(1, o)
    i.masked_fill_(torch.isinf(d), _NO_INDEX)
    return d, i


def _pair_thresholds(problem: SearchProblem, thr: torch.Tensor, r: torch.Tensor, c: torch.Tensor, r0: int,
                     r1: int) -> torch.Tensor:
    """The thresholds of the kernel pairs of entries ``(r, c)`` (``r`` block rows): the row's,
    and in a symmetric problem, where the value also serves the partner entry ``(c, r)``, the
    larger of both rows' within the block and ``+inf`` for a later block's row (which needs the
    exact value)."""
    out = thr[r]
    if problem.symmetric:
        inb = (c >= r0) & (c < r1)
        out[inb] = torch.maximum(out[inb], thr[c[inb] - r0])
        out[c >= r1] = math.inf
    return out


def _dense_exact(problem: SearchProblem, rows: torch.Tensor, r0: int, r1: int, open_mask: torch.Tensor,
                 thr: torch.Tensor, final: torch.Tensor, cur: torch.Tensor, best_d: torch.Tensor,
                 best_i: torch.Tensor, k: int, stats: dict, handed: list) -> None:
    """Every open entry of a k-NN block computed in one exact call, the matrix's way: in a
    symmetric problem an entry ``(r, c)`` whose partner ``(c, r)`` is open in the block with
    ``c < r`` is left to the partner. The values, their partners' copies and each row's ``k``
    best go into one ``(rows, ny)`` matrix, whose ``k`` smallest by (distance, index) per row
    become the ``k`` best."""
    B, ny = open_mask.shape
    take = open_mask
    if problem.symmetric:
        square = open_mask[:, r0:r1]
        take = open_mask.clone()
        take[:, r0:r1] &= ~torch.tril(square & square.T, -1)
    rl, c = torch.nonzero(take, as_tuple=True)
    a, b = problem.kernel_pairs(rows[rl], c)
    pair_thr = None if bool(torch.isinf(thr).all()) else _pair_thresholds(problem, thr, rl, c, r0, r1)
    v = problem.exact(a, b, threshold=pair_thr, distinct=True)
    stats["exact_computed"] += len(a)
    M = torch.full((B, ny), math.inf, dtype=torch.float64)
    M[rl, c] = v
    final[rl, c] = True
    if problem.symmetric:
        # partners within the block: at most one of (r, c) and (c, r) was computed
        square = M[:, r0:r1]
        M[:, r0:r1] = torch.minimum(square, square.T)
        final[:, r0:r1] |= take[:, r0:r1].T
        later = c >= r1
        handed.append((c[later], rows[rl[later]], v[later]))
    cur.masked_fill_(final, math.inf)
    have = best_i != _NO_INDEX
    M[torch.arange(B)[:, None].expand_as(best_i)[have], best_i[have]] = best_d[have]
    d, i = _k_smallest(M, k)
    best_d[:, : d.shape[1]] = d
    best_i[:, : i.shape[1]] = i


def _bounds_leave_most_open(problem: SearchProblem, rows: torch.Tensor, cand: torch.Tensor, k: int) -> bool:
    """Whether the label bound is expected to leave more than ``_DENSE_SHARE`` of a block's
    entries open. Probe rows (evenly spaced) get their bounds and the exact distances of their
    ``_PROBE_PER_K * k`` candidates of smallest bound (:meth:`SearchProblem.estimate`); the
    ``k``-th of those is at least a row's final ``k``-th distance, so the share of the probe
    rows' entries whose bound is at most it is at least the share that stays open there."""
    B, ny = cand.shape
    probe = torch.unique(torch.linspace(0, B - 1, steps=min(B, _PROBE_ROWS)).round().long())
    lower = problem.probe_lower(rows[probe]).masked_fill(~cand[probe], math.inf)
    vals, cols = torch.topk(lower, min(ny, _PROBE_PER_K * k), dim=1, largest=False)
    usable = torch.isfinite(vals)  # (the row's own entry is +inf)
    if int(usable.sum(1).min()) < k:
        return False
    pr = probe[:, None].expand_as(cols)[usable]
    a, b = problem.kernel_pairs(rows[pr], cols[usable])
    exact = torch.full(vals.shape, math.inf, dtype=torch.float64)
    exact[usable] = problem.estimate(a, b)
    kth = torch.kthvalue(exact, k, dim=1).values
    open_ = (lower <= kth[:, None]) & cand[probe]
    return int(open_.sum()) > _DENSE_SHARE * int(cand[probe].sum())


def knn_block(problem: SearchProblem, r0: int, r1: int, k: int,
              known: Optional[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = None):
    """The ``k`` nearest neighbours of the rows ``r0 .. r1 - 1`` of X.

    A batched multi-step search (after Seidl and Kriegel's optimal multi-step k-NN): every
    entry has a current lower bound (first the label bound) and a level (which refinement comes
    next: preorder bound, postorder bound, exact distance; sequences: exact distance only).
    Each round takes, per row, the ``width`` entries with the smallest current bounds that do
    not exceed the row's threshold, refines each by one level (one batched kernel call per
    level), merges exact distances into the row's ``k`` best and lowers the threshold to its
    ``k``-th; ``width`` doubles from ``k`` up to 128. A row is finished when no open entry's
    bound is at most its threshold. Once every row has ``k`` exact distances, if more than
    half of the undecided entries are still open (the bounds do not pay, e.g. costs whose
    replacements can be nearly free), they are all computed exactly in one call; so is the
    whole block from the start where there is no lower bound, where exact distances are about
    as cheap as a round's work per entry (``problem.cheap_exact``), or (sequences) where a
    probe of a few rows expects the label bound to leave most entries open.

    Args:
        problem: the prepared search. k: neighbours per row (``<=`` the candidates per row).
        known: optional exact distances ``(rows, cols, values)`` (matrix entries, float64)
            already computed, e.g. by earlier blocks of a symmetric problem; entries outside the
            block are ignored.

    Returns:
        ``(distances, indices, handed_on, stats)``: float64 and int64 ``(r1 - r0, k)``, each row
        sorted by (distance, index); ``handed_on`` the exact distances this block computed that
        are entries of later rows (symmetric problems: ``(c, r)`` for a computed ``(r, c)``,
        ``c >= r1``), as ``(rows, cols, values)``; the block's stats.
    """
    rows = torch.arange(r0, r1)
    B, ny = len(rows), problem.ny
    stats = new_stats()
    cand = torch.ones(B, ny, dtype=torch.bool)
    if problem.same:
        cand[torch.arange(B), rows] = False
    stats["pairs"] = int(cand.sum())
    best_d = torch.full((B, k), math.inf, dtype=torch.float64)
    best_i = torch.full((B, k), _NO_INDEX, dtype=torch.int64)
    empty = (torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long),
             torch.zeros(0, dtype=torch.float64))
    if B == 0 or ny == 0:
        return best_d, best_i, empty, stats
    # Without a lower bound, where an exact distance costs about what a round spends per entry
    # (problem.cheap_exact), or (sequences: the label bound alone) where a probe expects the
    # bound to leave most entries open, the block is computed in one exact call, the matrix's
    # way, without the bounds of the whole block or a first round (where costs come in tiles,
    # each exact call builds every tile's costs).
    dense_first = _one_exact_call(problem, rows, cand, k)
    if dense_first:
        cur = torch.full((B, ny), -math.inf, dtype=torch.float64).masked_fill(~cand, math.inf)
    else:
        cur = problem.lower_block(rows).masked_fill(~cand, math.inf)
    level = torch.zeros(B, ny, dtype=torch.int8)
    final = ~cand
    # the row's threshold (distance, index): an entry can still enter the k best only if
    # its (distance, index) is below it; an upper bound carries no index
    thr = torch.full((B,), math.inf, dtype=torch.float64)
    thr_i = torch.full((B,), _NO_INDEX, dtype=torch.int64)
    if problem.upper is not None and not dense_first:
        thr = torch.kthvalue(problem.upper_block(rows).masked_fill(~cand, math.inf), k, dim=1).values
    all_cols = torch.arange(ny)[None, :]

    def lower_threshold():
        d, i = best_d[:, -1], best_i[:, -1]
        better = (d < thr) | ((d == thr) & (i < thr_i))
        thr[better] = d[better]
        thr_i[better] = i[better]

    if known is not None and len(known[0]):
        kr, kc, kv = known
        inside = (kr >= r0) & (kr < r1)
        kr, kc, kv = kr[inside] - r0, kc[inside], kv[inside]
        fresh = ~final[kr, kc]
        kr, kc, kv = kr[fresh], kc[fresh], kv[fresh]
        final[kr, kc] = True
        cur[kr, kc] = math.inf
        _merge_into(best_d, best_i, kr, kc, kv, k)
        lower_threshold()
    steps = ["pre", "post", "exact"] if problem.traversal is not None else ["exact"]
    live = torch.ones(B, dtype=torch.bool)
    handed = []
    width = k
    dense_done = False
    while True:
        if problem.exact_arithmetic:
            # bounds and distances are exact: an entry whose bound equals the k-th distance
            # and whose index comes after the k-th's cannot win the tie; close it (an infinite
            # bound keeps the open entries, bound <= threshold, first in the selection)
            # (rows still searched whose threshold is a distance with an index)
            tied = torch.nonzero(live & (thr_i != _NO_INDEX)).reshape(-1)
            if len(tied) == B:
                cur.masked_fill_((cur == thr[:, None]) & (all_cols > thr_i[:, None]), math.inf)
            elif len(tied):
                sub = cur[tied]
                cur[tied] = sub.masked_fill_((sub == thr[tied, None]) & (all_cols > thr_i[tied, None]), math.inf)
        dense = False
        if not dense_done and dense_first:
            open_mask, dense, dense_done = ~final, True, True
        elif not dense_done and bool((best_i[:, -1] != _NO_INDEX).all()):
            # every row has k exact distances: where the bounds still leave most of the
            # undecided entries open, they do not pay; compute all open entries exactly in
            # one call (the matrix's way) instead of refining them round by round
            open_mask = (cur <= thr[:, None]) & ~final
            dense = int(open_mask.sum()) > _DENSE_SHARE * int((~final).sum())
            dense_done = True
        if dense:
            _dense_exact(problem, rows, r0, r1, open_mask, thr, final, cur, best_d, best_i, k, stats, handed)
            lower_threshold()
            continue
        # (a row without an open entry at or below its threshold never gets one again:
        # thresholds only fall and bounds only rise)
        rows_live = torch.nonzero(live).reshape(-1)
        if len(rows_live) == 0:
            break
        vals, cols = torch.topk(cur if len(rows_live) == B else cur[rows_live], min(width, ny), dim=1,
                                largest=False, sorted=False)
        act = (vals <= thr[rows_live, None]) & ~final[rows_live[:, None], cols]
        live[rows_live[~act.any(1)]] = False
        if not act.any():
            break
        rl = rows_live[:, None].expand_as(cols)[act]
        c = cols[act]
        lv = level[rl, c]
        width = min(2 * width, _MAX_WIDTH)
        for step, what in enumerate(steps):
            sel = lv == step
            if not sel.any():
                continue
            sr, sc = rl[sel], c[sel]
            inb = None
            if problem.symmetric:
                # the partner entry (c, r) is the same kernel pair: where both are selected,
                # refine (r, c) with r < c and let the partner follow
                inb = (sc >= r0) & (sc < r1)
                mark = torch.zeros(B, ny, dtype=torch.bool)
                mark[sr, sc] = True
                dup = inb & (rows[sr] > sc) & mark[(sc - r0).clamp(0, B - 1), rows[sr]]
                if dup.any():
                    sr, sc, inb = sr[~dup], sc[~dup], inb[~dup]
                del mark
            a, b = problem.kernel_pairs(rows[sr], sc)
            n_pairs = len(a)
            pair_thr = _pair_thresholds(problem, thr, sr, sc, r0, r1)
            if what != "exact":
                margin = problem.margin(a, b)
                # a bound above the pair's threshold comes back as inf: the entry is pruned
                t = problem.traversal_values(a, b, what, distinct=True, threshold=pair_thr + margin) - margin
                stats["traversal_computed"] += n_pairs
                cur[sr, sc] = torch.maximum(cur[sr, sc], t)
                level[sr, sc] = step + 1
                if inb is not None and inb.any():
                    pr, pc = sc[inb] - r0, rows[sr][inb]
                    cur[pr, pc] = torch.maximum(cur[pr, pc], t[inb])
                    level[pr, pc] = torch.clamp(level[pr, pc], min=step + 1)
                continue
            v = problem.exact(a, b, threshold=pair_thr, distinct=True)
            stats["exact_computed"] += n_pairs
            final[sr, sc] = True
            cur[sr, sc] = math.inf
            ents_r, ents_c, ents_v = [sr], [sc], [v]
            if inb is not None:
                pr, pc, pv = sc[inb] - r0, rows[sr][inb], v[inb]
                fresh = ~final[pr, pc]
                pr, pc, pv = pr[fresh], pc[fresh], pv[fresh]
                final[pr, pc] = True
                cur[pr, pc] = math.inf
                ents_r.append(pr)
                ents_c.append(pc)
                ents_v.append(pv)
                later = sc >= r1
                handed.append((sc[later], rows[sr][later], v[later]))
            _merge_into(best_d, best_i, torch.cat(ents_r), torch.cat(ents_c), torch.cat(ents_v), k)
        lower_threshold()
    open_ = cand & ~final
    stats["exact"] = int((cand & final).sum())
    stats["decided_by_traversal"] = int((open_ & (level > 0)).sum())
    stats["decided_by_label"] = int((open_ & (level == 0)).sum())
    handed_on = tuple(torch.cat(t) for t in zip(*handed)) if handed else empty
    return best_d, best_i, handed_on, stats


def bounds_cannot_pay(problem: SearchProblem, k: int) -> bool:
    """Whether every block of a k-NN would be computed in one exact call (no lower bound,
    :attr:`SearchProblem.cheap_exact`, or, for sequences, a probe of rows spread over X that
    expects the label bound to leave most entries open): then :func:`knn_all_pairs`. Not for a
    problem of sequences too small to probe whose exact calls build every tile's costs: its
    block's one covered call (:func:`knn_block`) cuts Y into runs once, where the matrix's tiles
    would be a call each (one sentence against 5,000: 0.07 s against 0.11 s)."""
    nx, ny = problem.nx, problem.ny
    if _too_few_to_probe(problem, k, nx * ny) and problem.calls_build_every_tile and not exact_is_cheapest(problem):
        return False
    rows = torch.unique(torch.linspace(0, max(nx - 1, 0), steps=min(nx, _PROBE_ROWS)).round().long())
    cand = torch.ones(len(rows), ny, dtype=torch.bool)
    if problem.same:
        cand[torch.arange(len(rows)), rows] = False
    return _one_exact_call(problem, rows, cand, k, cells=nx * ny)


def exact_is_cheapest(problem: SearchProblem) -> bool:
    """Whether no bound can pay for itself: the problem has no lower bound, or an exact
    distance costs about what a bound does (:attr:`SearchProblem.cheap_exact`). Then a search
    computes the matrix's tiles (:func:`knn_all_pairs`, :func:`radius_all_pairs`)."""
    return (not problem.has_label and problem.traversal is None) or problem.cheap_exact


def _one_exact_call(problem: SearchProblem, rows: torch.Tensor, cand: torch.Tensor, k: int,
                    cells: Optional[int] = None) -> bool:
    """Whether the entries of ``rows`` (candidates ``cand``; ``cells`` entries in all, default
    ``cand``'s) go to one exact call rather than rounds: no lower bound, exact distances about
    as cheap as a round's work per entry, or (sequences) a probe of ``rows`` expecting the
    label bound to leave most entries open, or too few entries to probe where every exact
    call builds every tile's costs (rounds make several calls: one sentence against 5,000
    under cosine costs took 2.5 calls)."""
    if exact_is_cheapest(problem):
        return True
    cells = cand.numel() if cells is None else cells
    if problem.traversal is not None or len(rows) == 0:
        return False
    if _too_few_to_probe(problem, k, cells):
        return problem.calls_build_every_tile
    return _bounds_leave_most_open(problem, rows, cand, k)


def _too_few_to_probe(problem: SearchProblem, k: int, cells: int) -> bool:
    """Whether ``cells`` entries are too few for a probe of their bounds to pay (sequences)."""
    return problem.traversal is None and cells < _PROBE_ROWS * k * _PROBE_PER_K * 8


def knn_all_pairs(problem: SearchProblem, k: int, blocks: Optional[Collection[int]] = None,
                  max_pairs: int = _BLOCK_CELLS, on_pairs=None):
    """Every entry exactly, block by block of the matrix's own tiles (its bits, and its work:
    half the matrix where symmetric), each value merged into the running ``k`` best of its row
    and of its partner row, in ``O(len(X) k)`` memory beside one block. The blocks are
    :meth:`SearchProblem.matrix_blocks` ``(max_pairs)``; ``blocks`` (optional) the numbers of
    those to compute (one rank's part: the entries and stats of all parts together are the
    whole's, see :func:`merge_nearest`); ``on_pairs(m)`` (optional) is told the kernel pairs
    of each block done. Returns ``(distances, indices, stats)``: rows that got fewer than ``k``
    entries in this part are padded with ``inf`` and index ``2**63 - 1``."""
    nx = problem.nx
    best_d = torch.full((nx, k), math.inf, dtype=torch.float64)
    best_i = torch.full((nx, k), _NO_INDEX, dtype=torch.int64)
    stats = new_stats()
    for a, b, v in _exact_tiles(problem, blocks, max_pairs, on_pairs, stats):
        # (the diagonal keeps each tile's objects in the call; not an entry: dropped in the merge)
        _merge_block(best_d, best_i, a, b, v, k, problem.symmetric, problem.same)
    return best_d, best_i, stats


def _exact_tiles(problem: SearchProblem, blocks: Optional[Collection[int]], max_pairs: int, on_pairs,
                 stats: dict):
    """The matrix's tiles (:meth:`SearchProblem.matrix_blocks` ``(max_pairs)``, those numbered in
    ``blocks`` where given) one by one: yields each tile's pairs ``(a, b)`` and exact values,
    counting them in ``stats`` (the diagonal of a tile of ``Y=None`` is computed, not an entry)
    and telling ``on_pairs`` (optional) the kernel pairs of each."""
    for number, block in enumerate(problem.matrix_blocks(max_pairs)):
        if blocks is not None and number not in blocks:
            continue
        a, b = block.pairs()
        v = problem.block_values(a, b)
        if on_pairs is not None:
            on_pairs(len(a))
        computed = len(a) - (int((a == b).sum()) if problem.same else 0)
        stats["exact_computed"] += computed
        entries = 2 * computed if problem.symmetric else computed
        stats["pairs"] += entries
        stats["exact"] += entries
        yield a, b, v
        release_freed_memory()


def radius_all_pairs(problem: SearchProblem, radius: float, blocks: Optional[Collection[int]] = None,
                     max_pairs: int = _BLOCK_CELLS, on_pairs=None):
    """Every entry within ``radius`` from the matrix's own tiles (its bits and its work, as
    :func:`knn_all_pairs`; ``blocks``, ``max_pairs`` and ``on_pairs`` likewise), for problems
    where no bound pays (:func:`exact_is_cheapest`). Returns ``(rows, cols, distances, stats)``,
    unsorted; a symmetric problem's entries listed both ways, no diagonal where ``Y=None``."""
    stats = new_stats()
    found = []
    for a, b, v in _exact_tiles(problem, blocks, max_pairs, on_pairs, stats):
        within = torch.nonzero(v <= radius).squeeze(1)  # (few: the diagonal tested on those alone)
        r, c, v = a[within], b[within], v[within]
        if problem.same:
            off = r != c
            r, c, v = r[off], c[off], v[off]
        found.append(_with_partners(problem, r, c, v))  # (tiles of a symmetric problem hold r <= c)
    return (*_entries(found), stats)


def _with_partners(problem: SearchProblem, r: torch.Tensor, c: torch.Tensor, v: torch.Tensor):
    """Entries ``(r, c, v)`` computed once for a symmetric problem (``r < c``) listed both ways;
    others as they are."""
    if problem.symmetric:
        return torch.cat([r, c]), torch.cat([c, r]), torch.cat([v, v])
    return r, c, v


def _entries(found):
    """The concatenation of a list of ``(rows, cols, distances)`` (empty tensors for none)."""
    if found:
        return tuple(torch.cat([f[i] for f in found]) for i in range(3))
    return (torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long),
            torch.zeros(0, dtype=torch.float64))


def sorted_entries(r: torch.Tensor, c: torch.Tensor, v: torch.Tensor, ny: int):
    """Entries ``(r, c, v)`` sorted by row, then column (``ny`` columns)."""
    order = torch.argsort(r * max(ny, 1) + c)
    return r[order], c[order], v[order]


def _merge_block(best_d, best_i, r, c, v, k, partners: bool, same: bool = False):
    """:func:`_merge_into` of a block of entries ``(r, c)`` that lie in a rectangle of rows and
    columns (a tile, or consecutive rows against the columns from the first row on), each row's
    ``k`` best of the block taken first (:func:`_k_smallest`); with ``partners`` (entries
    ``r <= c`` only) also the entries ``(c, r)``; with ``same`` (rows and columns index one
    collection) without the diagonal's ``(i, i)``."""
    if len(r) == 0:
        return
    r0, c0 = int(r.min()), int(c.min())
    M = torch.full((int(r.max()) + 1 - r0, int(c.max()) + 1 - c0), math.inf, dtype=torch.float64)
    M[r - r0, c - c0] = v
    passes = [(M, r0, c0)]
    if partners and r0 == c0:
        # rows from r0 against columns from r0 (entries r <= c): a partner (c, r) whose row
        # lies in the block goes into M itself (the square's lower triangle is empty, so one
        # minimum with its transpose writes them); only the columns past its rows need M.T
        h = M.shape[0]
        sq = M[:, :h]
        sq.copy_(torch.minimum(sq, sq.T))
        if M.shape[1] > h:
            passes.append((M[:, h:].T, c0 + h, r0))
    elif partners:
        passes.append((M.T, c0, r0))
    if same:  # M[i - r0, i - c0] holds (i, i): the diagonal at offset r0 - c0
        M.diagonal(r0 - c0).fill_(math.inf)
    for rect, first_row, first_col in passes:
        d, i = _k_smallest(rect, k)
        have = i != _NO_INDEX
        rows = torch.arange(first_row, first_row + rect.shape[0])[:, None].expand_as(i)
        _merge_into(best_d, best_i, rows[have], i[have] + first_col, d[have], k)


def merge_nearest(parts, k: int):
    """The ``k`` best of every row over parts ``(distances, indices)`` of distinct entries (e.g.
    the shares of :func:`knn_all_pairs`), by (distance, index)."""
    best_d, best_i = parts[0][0].clone(), parts[0][1].clone()
    rows = torch.arange(len(best_d))[:, None].expand_as(best_i)
    for d, i in parts[1:]:
        have = i != _NO_INDEX
        _merge_into(best_d, best_i, rows[have], i[have], d[have], k)
    return best_d, best_i


def check_k(k, candidates: int, same: bool) -> int:
    if isinstance(k, bool) or not isinstance(k, (numbers.Integral, np.integer)):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    k = int(k)
    if candidates < 1:
        raise ValueError("k-NN needs at least one candidate: " + (
            f"X has {candidates + 1} object(s), so none is left besides itself" if same
            else "Y is empty"))
    if not 1 <= k <= candidates:
        raise ValueError(f"k must be between 1 and {candidates} (the "
                         f"{'other objects of X' if same else 'objects of Y'}), got {k}")
    return k


def check_mode(mode):
    if mode != "exact":
        raise ValueError(f"mode must be 'exact' (bounds hold for exact distances; pseudo and soft "
                         f"modes are not searched), got {mode!r}")


def kneighbors(X: Sequence, Y: Optional[Sequence] = None, *, k: int,
               cost: Optional[SymbolCost] = None, mode: str = "exact",
               chunk_size: Optional[int] = None, rel_tol: Optional[float] = None,
               unknown: str = "error", symmetric: Optional[bool] = None,
               block_size: Optional[int] = None, bounds: Sequence[str] = BOUNDS,
               return_stats: bool = False):
    """The ``k`` nearest objects of ``Y`` (of ``X`` itself when ``Y`` is None, each object left
    out of its own list) for every object of ``X``, exactly, without the whole matrix.

    The answer is that of sorting each row of ``bedl_torch.pairwise_distances(X, Y, cost)`` by
    distance, equal distances by index (the distances bit for bit wherever that function
    computes the whole matrix from one symbol table: a cost module's whole table, e.g.
    :class:`~bedl_torch.UnitCost` or :class:`~bedl_torch.EuclideanCost` up to 2047 symbols, or at
    most 1999 distinct symbols in X and Y; for larger alphabets without a whole table both
    build their cost blocks in their own tiles and agree to rounding). Pairs are pruned by
    bounds that hold for any finite costs (:mod:`bedl_torch.search.bounds`); see
    ``docs/search.md``. No gradient.

    Args:
        X, Y: lists of trees or of sequences. k: neighbours per object, ``1 .. len(Y)``
            (``len(X) - 1`` without ``Y``). cost: a :class:`~bedl_torch.SymbolCost` (default unit
            costs over the labels of X and Y).
        mode: ``"exact"`` only.
        chunk_size, rel_tol, unknown: as for :func:`bedl_torch.pairwise_distances`.
        symmetric: as for :func:`bedl_torch.pairwise_distances` (default: ``Y`` is None and
            ``cost.symmetric``); needs ``Y=None``.
        block_size: query rows per block (default: about 4M pairs per block).
        bounds: the bounds to use, a subset of ``("label", "traversal", "upper")``.
        return_stats: also return a dict: ``pairs`` (matrix entries searched),
            ``decided_by_label`` and ``decided_by_traversal`` (entries excluded by that
            bound), ``exact`` (entries whose exact distance was used), ``exact_computed``
            (kernel pairs computed; with a symmetric problem one serves two entries),
            ``traversal_computed`` (pairs whose traversal bounds were computed).

    Returns:
        ``(distances, indices)`` (and the stats): float64 and int64 ``(len(X), k)`` CPU tensors,
        each row sorted by distance, then index.

    Raises:
        TypeError: ``k`` not an int; the errors of :class:`SearchProblem`.
        ValueError: ``k`` out of range, ``mode`` other than ``"exact"``, ``block_size < 1``;
            the errors of :class:`SearchProblem`.
    """
    check_mode(mode)
    problem = SearchProblem(X, Y, cost, rel_tol=rel_tol, unknown=unknown, symmetric=symmetric,
                            chunk_size=chunk_size, bounds=bounds)
    return problem_kneighbors(problem, k, block_size, return_stats)


def problem_kneighbors(problem: SearchProblem, k: int, block_size: Optional[int] = None,
                       return_stats: bool = False):
    """:func:`kneighbors` of a prepared problem (``k`` and ``block_size`` checked here)."""
    candidates = problem.ny - 1 if problem.same else problem.ny
    k = check_k(k, candidates, problem.same)
    step = block_rows(problem, block_size)  # (checks block_size either way)
    if bounds_cannot_pay(problem, k):
        distances, indices, stats = knn_all_pairs(problem, k)
    else:
        _, distances, indices, stats = knn_blocks(problem, list(range(0, problem.nx, step)), k, step)
    if return_stats:
        return distances, indices, stats
    return distances, indices


def knn_blocks(problem: SearchProblem, starts: Sequence[int], k: int, step: Optional[int] = None,
               on_rows=None, stop: Optional[int] = None):
    """:func:`knn_block` over the blocks of rows starting at ``starts`` (ascending; each
    ``step`` rows, default :func:`block_rows`' own, none past row ``stop``, default the last),
    exact values handed on from block to block; ``on_rows(m)`` (optional) is told the rows of
    each block done. Returns ``(rows, distances, indices, stats)``: the rows covered (int64),
    their ``k`` best, and the merged stats."""
    step = block_rows(problem, None) if step is None else step
    stop = problem.nx if stop is None else min(stop, problem.nx)
    ds, js, rs, parts = [], [], [], []
    known = None
    for r0 in starts:
        r1 = min(stop, r0 + step)
        d, j, handed, stats = knn_block(problem, r0, r1, k, known)
        release_freed_memory()
        ds.append(d)
        js.append(j)
        rs.append(torch.arange(r0, r1))
        parts.append(stats)
        if on_rows is not None:
            on_rows(r1 - r0)
        if known is not None:  # what later blocks may still use
            keep = known[0] >= r1
            known = tuple(t[keep] for t in known)
        if len(handed[0]):
            known = handed if known is None else tuple(torch.cat(p) for p in zip(known, handed))
    distances = torch.cat(ds) if ds else torch.zeros(0, k, dtype=torch.float64)
    indices = torch.cat(js) if js else torch.zeros(0, k, dtype=torch.int64)
    rows = torch.cat(rs) if rs else torch.zeros(0, dtype=torch.int64)
    return rows, distances, indices, merge_stats(*parts)


# ---------------------------------------------------------------------------
# Range search
# ---------------------------------------------------------------------------


#: Range search pools the entries its bounds leave open over blocks of rows up to this many, so
#: that one exact call verifies them: where costs come in tiles (no whole symbol table), every
#: exact call builds the tiles of all the objects it covers (see :meth:`SearchProblem.exact`)
RADIUS_POOL_ENTRIES = 1 << 22


def radius_candidates(problem: SearchProblem, r0: int, r1: int, radius: float):
    """The entries ``(r, c)`` of rows ``r0 .. r1 - 1`` that no bound places above ``radius``
    (symmetric problems: only ``c > r``), and the block's stats so far (``exact`` and
    ``exact_computed`` are :func:`radius_verify`'s)."""
    rows = torch.arange(r0, r1)
    B, ny = len(rows), problem.ny
    stats = new_stats()
    if B == 0 or ny == 0:
        return torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), stats
    # symmetric: only the columns after the block's first row (the entries c > r)
    first = r0 + 1 if problem.symmetric else 0
    cols = torch.arange(first, ny)
    if problem.symmetric:
        cand = cols[None, :] > rows[:, None]
        weight = 2  # each computed pair stands for two entries
    elif problem.same:
        cand = cols[None, :] != rows[:, None]
        weight = 1
    else:
        cand = torch.ones(B, ny, dtype=torch.bool)
        weight = 1
    n_cand = int(cand.sum())
    stats["pairs"] = weight * n_cand
    L = problem.lower_block(rows, first)
    rl, c = torch.nonzero(cand & (L <= radius), as_tuple=True)
    c += first
    del L, cand
    stats["decided_by_label"] = weight * (n_cand - len(rl))
    thr = torch.full((len(rl),), float(radius), dtype=torch.float64)
    sub = new_stats()
    rl, c, _, _ = problem.prune_by_traversal(rows, rl, c, thr, sub)
    stats["decided_by_traversal"] = weight * sub["decided_by_traversal"]
    stats["traversal_computed"] = sub["traversal_computed"]
    return rows[rl], c, stats


def radius_verify(problem: SearchProblem, r: torch.Tensor, c: torch.Tensor, radius: float, stats: dict):
    """The entries among ``(r, c)`` (from :func:`radius_candidates`) with distance ``<= radius``,
    by one exact call; symmetric problems also list them mirrored. Counts the call in
    ``stats``."""
    a, b = problem.kernel_pairs(r, c)
    v = problem.exact(a, b, threshold=torch.full((len(r),), float(radius), dtype=torch.float64),
                      distinct=True)
    stats["exact_computed"] += len(r)
    stats["exact"] += (2 if problem.symmetric else 1) * len(r)
    keep = v <= radius
    return _with_partners(problem, r[keep], c[keep], v[keep])


def radius_block(problem: SearchProblem, r0: int, r1: int, radius: float):
    """Every entry ``(r, c)`` with ``r0 <= r < r1`` and distance ``<= radius`` (symmetric
    problems: computed for ``c > r`` and also returned mirrored as ``(c, r)``, so the blocks of
    all rows together give every entry once).

    Returns:
        ``(rows, cols, distances, stats)``, unsorted; int64, int64, float64.
    """
    r, c, stats = radius_candidates(problem, r0, r1, radius)
    return (*radius_verify(problem, r, c, radius, stats), stats)


def check_radius(radius) -> float:
    if isinstance(radius, bool) or not isinstance(radius, (numbers.Real, np.floating, np.integer)):
        if isinstance(radius, torch.Tensor) and radius.numel() == 1 and not radius.is_complex():
            radius = radius.item()
        else:
            raise TypeError(f"radius must be a real number, got {type(radius).__name__}")
    radius = float(radius)
    if math.isnan(radius):
        raise ValueError("radius must not be NaN")
    return radius


def radius_neighbors(X: Sequence, Y: Optional[Sequence] = None, *, radius: float,
                     cost: Optional[SymbolCost] = None, mode: str = "exact",
                     chunk_size: Optional[int] = None, rel_tol: Optional[float] = None,
                     unknown: str = "error", symmetric: Optional[bool] = None,
                     block_size: Optional[int] = None, bounds: Sequence[str] = BOUNDS,
                     return_stats: bool = False):
    """Every pair ``(i, j)`` with ``d(X[i], Y[j]) <= radius``, exactly, without the whole matrix.

    The answer is the entries of ``bedl_torch.pairwise_distances(X, Y, cost)`` at most
    ``radius`` (compared in float64), without the diagonal when ``Y`` is None (an object is
    not its own neighbour; both ``(i, j)`` and ``(j, i)`` are listed). Distances as for
    :func:`kneighbors`. Costs may be negative, and so may ``radius``.

    Args:
        radius: a real number (not NaN; ``inf`` gives every pair).
        Others: as for :func:`kneighbors`.

    Returns:
        ``(rows, cols, distances)`` (and the stats dict of :func:`kneighbors`): 1-D int64,
        int64 and float64 CPU tensors sorted by row, then column.

    Raises:
        TypeError: ``radius`` not a real number; as :func:`kneighbors`.
        ValueError: ``radius`` NaN; as :func:`kneighbors`.
    """
    check_mode(mode)
    radius = check_radius(radius)
    problem = SearchProblem(X, Y, cost, rel_tol=rel_tol, unknown=unknown, symmetric=symmetric,
                            chunk_size=chunk_size, bounds=bounds)
    return problem_radius_neighbors(problem, radius, block_size, return_stats)


def problem_radius_neighbors(problem: SearchProblem, radius: float, block_size: Optional[int] = None,
                             return_stats: bool = False):
    """:func:`radius_neighbors` of a prepared problem (``radius`` checked by the caller)."""
    step = block_rows(problem, block_size)  # (checks block_size either way)
    if exact_is_cheapest(problem):
        r, c, v, stats = radius_all_pairs(problem, radius)
        out = (*sorted_entries(r, c, v, problem.ny), stats)
    else:
        out = radius_blocks(problem, list(range(0, problem.nx, step)), radius, step)
    if return_stats:
        return out
    return out[:3]


def radius_blocks(problem: SearchProblem, starts: Sequence[int], radius: float,
                  step: Optional[int] = None, on_rows=None, stop: Optional[int] = None):
    """Every entry within ``radius`` of the blocks of rows starting at ``starts`` (each ``step``
    rows, default :func:`block_rows`' own, none past row ``stop``, default the last): each
    block's bounds, then the open entries of consecutive blocks, up to
    :data:`RADIUS_POOL_ENTRIES`, in one exact call. ``on_rows(n)`` (optional) is told each time
    ``n`` more rows are finished. Returns ``(rows, cols, distances, stats)`` sorted by row, then
    column."""
    step = block_rows(problem, None) if step is None else step
    stop = problem.nx if stop is None else min(stop, problem.nx)
    found, parts, pool, pool_rows, pool_entries = [], [], [], 0, 0

    def verify_pool():
        nonlocal pool, pool_rows, pool_entries
        if pool:
            r, c = torch.cat([p[0] for p in pool]), torch.cat([p[1] for p in pool])
            found.append(radius_verify(problem, r, c, radius, parts[-1]))
        if on_rows is not None and pool_rows:
            on_rows(pool_rows)
        pool, pool_rows, pool_entries = [], 0, 0

    for r0 in starts:
        r1 = min(stop, r0 + step)
        r, c, stats = radius_candidates(problem, r0, r1, radius)
        release_freed_memory()
        parts.append(stats)
        if len(r):
            pool.append((r, c))
            pool_entries += len(r)
        pool_rows += r1 - r0
        if pool_entries >= RADIUS_POOL_ENTRIES:
            verify_pool()
    verify_pool()
    return (*sorted_entries(*_entries(found), problem.ny), merge_stats(*parts))
