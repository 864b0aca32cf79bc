"""Exact k-nearest-neighbour search, pruned by bounds.

A block of query rows (objects of X) against all of Y (:func:`knn_block`): the label-multiset
lower bound of every entry (:class:`~bedl_torch.search.label_bound.LabelBound`) and the cheap
mapping upper bounds, whose ``k``-th smallest per row starts each row's threshold; then rounds
of a batched multi-step search (after Seidl and Kriegel's optimal multi-step k-NN). Each round
refines, per row, the entries with the smallest current lower bounds that do not exceed the
row's threshold by one level (trees: preorder, then postorder sequence edit distance, then the
exact distance; sequences: the exact distance), one batched kernel call per level; each row
keeps its ``k`` best exact distances (ties by index), and its threshold falls to the ``k``-th.

An entry is pruned only where its bound, less the rounding margin
(:meth:`~bedl_torch.search.symbol_costs.SymbolCosts.margin`), is strictly greater than the
threshold, so an entry whose distance equals the ``k``-th one is never lost. Where the arithmetic is exact
(the margin is 0) an entry whose bound equals the ``k``-th distance is pruned too when its index
comes after the ``k``-th's: it cannot win the tie.

Correctness: every entry of a row is either computed exactly or has a lower bound above a
threshold that is never below the row's final ``k``-th (distance, index) (a threshold is always
the ``k``-th smallest of some ``k`` upper bounds or exact distances), so every entry of the
answer is computed, and the ``k`` best by (distance, index) among the computed entries are the
full matrix's. Exact distances come from :func:`bedl_torch.ops.table_pair_distances` over the
same flattened collections and orientation as :func:`bedl_torch.pairwise_distances`, hence the
same bits (see :meth:`SearchProblem.exact` for cost modules without a whole table).

Where the bounds cannot pay for the whole problem (:func:`bounds_cannot_pay`), the matrix's
tiles are computed instead (:func:`~bedl_torch.search.tiles.knn_all_pairs`); within a block,
its open entries go to one exact call under the same conditions, and once every row has ``k``
exact distances while most undecided entries are still open.

For a distributed caller: :func:`knn_block` takes one block of rows of a shared
:class:`SearchProblem` and returns its results, a stats dict whose entries add up across
blocks, and (symmetric problems) the exact distances it computed for later rows, which a caller
may pass to later blocks or drop.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import torch

from .._memory import release_freed_memory
from ..costs import SymbolCost
from .arguments import block_rows, check_k, check_mode
from .merge import NO_INDEX, k_smallest, merge_into
from . import probe
from .probe import keep_after_traversals, label_bounds, probe_candidates, probe_rows, work_of
from .problem import BOUNDS, SearchProblem, merge_stats, new_stats
from .tiles import exact_is_cheapest, knn_all_pairs

__all__ = ["kneighbors", "problem_kneighbors", "knn_blocks", "knn_block", "bounds_cannot_pay"]

# Largest number of entries per row refined in one round of k-NN (wider rounds refine more
# entries before the thresholds fall; 2,000 syntax trees, unit costs: 1024 computed 24% more
# exact and 37% more traversal distances than 128).
_MAX_WIDTH = 128
# Once every row of a k-NN block has k exact distances: if more than this share of the
# undecided entries is still open (bound <= threshold), all of them are computed exactly at once.
_DENSE_SHARE = 0.5
# Sequences (the label bound alone): before the first round, rows of a block probed for that
# share (probe.PROBE_ROWS), each with the exact distances of its candidates of smallest bound.
_PROBE_PER_K = 4
# Trees: where a probe of a problem's rows expects the entries left open by the label and
# traversal bounds to hold more than this share of its rows' DP work (|x| |y|), the matrix's
# tiles are computed instead (near where the rounds stop paying: docs/search.md). Probed only
# with at least probe.TREE_PROBE_MIN_ROWS rows of X.
_TREE_OPEN_WORK_SHARE = 0.5


def _bounds_leave_most_open(problem: SearchProblem, rows: torch.Tensor, cand: torch.Tensor, k: int) -> bool:
    """Whether the label bound is expected to leave more than ``_DENSE_SHARE`` of a block's
    entries open. Probe rows (evenly spaced) get their bounds and the exact distances of their
    ``_PROBE_PER_K * k`` candidates of smallest bound (:meth:`SearchProblem.estimate`); the
    ``k``-th of those is at least a row's final ``k``-th distance, so the share of the probe
    rows' entries whose bound is at most it is at least the share that stays open there."""
    picked = probe_rows(cand.shape[0])
    lower = problem.probe_lower(rows[picked]).masked_fill(~cand[picked], math.inf)
    kth = _probe_thresholds(problem, rows[picked], lower, k)[0]
    if kth is None:
        return False
    open_ = (lower <= kth[:, None]) & cand[picked]
    return int(open_.sum()) > _DENSE_SHARE * int(cand[picked].sum())


def _probe_thresholds(problem: SearchProblem, rows: torch.Tensor, bound: torch.Tensor, k: int,
                      exact: Optional[torch.Tensor] = None):
    """Each probe row's estimate of its final ``k``-th distance (at least it): the ``k``-th
    smallest of the exact distances computed for it, here those of its ``_PROBE_PER_K * k``
    candidates of smallest ``bound`` (``+inf``: not a candidate) and those in ``exact``
    (``(len(rows), ny)``, NaN where not computed), which is returned with the new ones.
    ``(None, exact)`` where a row has fewer than ``k`` candidates."""
    vals, cols = torch.topk(bound, min(bound.shape[1], _PROBE_PER_K * k), dim=1, largest=False)
    usable = torch.isfinite(vals)  # (the row's own entry is +inf)
    if int(usable.sum(1).min()) < k:
        return None, exact
    if exact is None:
        exact = torch.full(bound.shape, math.nan, dtype=torch.float64)
    pr = torch.arange(len(rows))[:, None].expand_as(cols)[usable]
    pc = cols[usable]
    todo = torch.isnan(exact[pr, pc])
    pr, pc = pr[todo], pc[todo]
    a, b = problem.kernel_pairs(rows[pr], pc)
    exact[pr, pc] = problem.estimate(a, b)
    return torch.kthvalue(exact.nan_to_num(nan=math.inf), k, dim=1).values, exact


def _tree_bounds_leave_most_work_open(problem: SearchProblem, rows: torch.Tensor, cand: torch.Tensor,
                                      k: int) -> bool:
    """Whether the label and traversal bounds are expected to leave entries holding more than
    ``_TREE_OPEN_WORK_SHARE`` of the probe rows' DP work (``|x| |y|``) at or below the rows'
    ``k``-th distances (trees; large ``k``). Probe rows spread over X get their label bounds, an
    estimate of their ``k``-th distance from the candidates of smallest label bound
    (:func:`_probe_thresholds`), and where the label bound leaves more than that share at or
    below it, the traversal bounds of those entries and a second estimate from the
    candidates of smallest bound among all three; each estimate is at
    least the row's final ``k``-th distance, so the share of the work still at or below the
    smaller one is at least the share that stays open for these rows (``rows``, candidates
    ``cand``)."""
    bound = label_bounds(problem, rows, cand)
    kth, exact = _probe_thresholds(problem, rows, bound, k)
    if kth is None:
        return False
    work = work_of(problem, rows)
    limit = _TREE_OPEN_WORK_SHARE * float(work[cand].sum())
    if float(work[bound <= kth[:, None]].sum()) <= limit:  # (the traversal bounds only lower it)
        return False
    rl, c = torch.nonzero(bound <= kth[:, None], as_tuple=True)
    keep_after_traversals(problem, rows, rl, c, kth[rl], bound)
    second = _probe_thresholds(problem, rows, bound, k, exact)[0]  # (the union's k-th: at most the first)
    kth = kth if second is None else second
    return float(work[(bound <= kth[:, None]) & cand].sum()) > limit


class _BlockSearch:
    """One block of k-NN rows and its state: each entry's current lower bound (``cur``, ``+inf``
    once decided) and level (the refinement it gets next), which entries have their exact value
    (``final``), each row's ``k`` best by (distance, index) and its threshold, the rows still
    searched, and the exact values handed on to later blocks."""

    def __init__(self, problem: SearchProblem, r0: int, r1: int, k: int):
        self.problem, self.r0, self.r1, self.k = problem, r0, r1, k
        self.rows = torch.arange(r0, r1)
        B, ny = len(self.rows), problem.ny
        self.stats = new_stats()
        self.cand = torch.ones(B, ny, dtype=torch.bool)
        if problem.same:
            self.cand[torch.arange(B), self.rows] = False
        self.stats["pairs"] = int(self.cand.sum())
        self.best_d = torch.full((B, k), math.inf, dtype=torch.float64)
        self.best_i = torch.full((B, k), NO_INDEX, dtype=torch.int64)
        self.handed = []
        self.steps = ["pre", "post", "exact"] if problem.traversal is not None else ["exact"]

    @property
    def empty(self) -> bool:
        return self.cand.numel() == 0

    def start(self, with_bounds: bool) -> None:
        """Every entry's first lower bound (the label bound, or ``-inf`` where the block goes to
        one exact call first) and each row's threshold (the ``k``-th smallest upper bound)."""
        problem, B, ny = self.problem, *self.cand.shape
        if with_bounds:
            self.cur = problem.lower_block(self.rows).masked_fill(~self.cand, math.inf)
        else:
            self.cur = torch.full((B, ny), -math.inf, dtype=torch.float64).masked_fill(~self.cand, math.inf)
        self.level = torch.zeros(B, ny, dtype=torch.int8)
        self.final = ~self.cand
        # the row's threshold (distance, index): an entry can still enter the k best only if its
        # (distance, index) is below it; an upper bound carries no index
        self.thr = torch.full((B,), math.inf, dtype=torch.float64)
        self.thr_i = torch.full((B,), NO_INDEX, dtype=torch.int64)
        if problem.upper is not None and with_bounds:
            upper = problem.upper_block(self.rows).masked_fill(~self.cand, math.inf)
            self.thr = torch.kthvalue(upper, self.k, dim=1).values
        self.live = torch.ones(B, dtype=torch.bool)
        self.all_cols = torch.arange(ny)[None, :]

    def take_known(self, known: Optional[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> None:
        """Exact values ``(rows, cols, values)`` computed before (earlier blocks); those of this
        block's entries become final."""
        if known is None or not len(known[0]):
            return
        kr, kc, kv = known
        inside = (kr >= self.r0) & (kr < self.r1)
        kr, kc, kv = kr[inside] - self.r0, kc[inside], kv[inside]
        fresh = ~self.final[kr, kc]
        kr, kc, kv = kr[fresh], kc[fresh], kv[fresh]
        self.final[kr, kc] = True
        self.cur[kr, kc] = math.inf
        merge_into(self.best_d, self.best_i, kr, kc, kv, self.k)
        self.lower_threshold()

    def lower_threshold(self) -> None:
        """Each row's threshold falls to its ``k``-th best where that is below it."""
        d, i = self.best_d[:, -1], self.best_i[:, -1]
        better = (d < self.thr) | ((d == self.thr) & (i < self.thr_i))
        self.thr[better] = d[better]
        self.thr_i[better] = i[better]

    def close_lost_ties(self) -> None:
        """Where bounds and distances are exact: an entry whose bound equals its row's ``k``-th
        distance and whose index comes after the ``k``-th's cannot win the tie; it is closed (an
        infinite bound keeps the open entries, bound <= threshold, first in the selection)."""
        if not self.problem.exact_arithmetic:
            return
        # (rows still searched whose threshold is a distance with an index)
        tied = torch.nonzero(self.live & (self.thr_i != NO_INDEX)).reshape(-1)
        cur, thr, thr_i, all_cols = self.cur, self.thr, self.thr_i, self.all_cols
        if len(tied) == len(self.rows):
            cur.masked_fill_((cur == thr[:, None]) & (all_cols > thr_i[:, None]), math.inf)
        elif len(tied):
            sub = cur[tied]
            cur[tied] = sub.masked_fill_((sub == thr[tied, None]) & (all_cols > thr_i[tied, None]), math.inf)

    def rows_have_k(self) -> bool:
        """Whether every row has ``k`` exact distances."""
        return bool((self.best_i[:, -1] != NO_INDEX).all())

    def open_entries(self) -> torch.Tensor:
        """The entries without an exact value whose bound is at most their row's threshold."""
        return (self.cur <= self.thr[:, None]) & ~self.final

    def mostly_open(self, open_mask: torch.Tensor) -> bool:
        """Whether more than ``_DENSE_SHARE`` of the undecided entries are open: then the bounds
        do not pay, and the open entries go to one exact call."""
        return int(open_mask.sum()) > _DENSE_SHARE * int((~self.final).sum())

    def pair_thresholds(self, r: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """The thresholds of the kernel pairs of entries ``(r, c)`` (``r`` block rows): the row's,
        and in a symmetric problem, where the value also serves the partner entry ``(c, r)``, the
        larger of both rows' within the block and ``+inf`` for a later block's row (which needs
        the exact value)."""
        out = self.thr[r]
        if self.problem.symmetric:
            inb = (c >= self.r0) & (c < self.r1)
            out[inb] = torch.maximum(out[inb], self.thr[c[inb] - self.r0])
            out[c >= self.r1] = math.inf
        return out

    def compute_dense(self, open_mask: torch.Tensor) -> None:
        """Every open entry in one exact call, the matrix's way: in a symmetric problem an entry
        ``(r, c)`` whose partner ``(c, r)`` is open in the block with ``c < r`` is left to the
        partner. The values, their partners' copies and each row's ``k`` best go into one
        ``(rows, ny)`` matrix, whose ``k`` smallest by (distance, index) per row become the ``k``
        best."""
        problem, r0, r1, rows = self.problem, self.r0, self.r1, self.rows
        B, ny = open_mask.shape
        take = open_mask
        if problem.symmetric:
            square = open_mask[:, r0:r1]
            take = open_mask.clone()
            take[:, r0:r1] &= ~torch.tril(square & square.T, -1)
        rl, c = torch.nonzero(take, as_tuple=True)
        a, b = problem.kernel_pairs(rows[rl], c)
        pair_thr = None if bool(torch.isinf(self.thr).all()) else self.pair_thresholds(rl, c)
        v = problem.exact(a, b, threshold=pair_thr, distinct=True)
        self.stats["exact_computed"] += len(a)
        M = torch.full((B, ny), math.inf, dtype=torch.float64)
        M[rl, c] = v
        self.final[rl, c] = True
        if problem.symmetric:
            # partners within the block: at most one of (r, c) and (c, r) was computed
            square = M[:, r0:r1]
            M[:, r0:r1] = torch.minimum(square, square.T)
            self.final[:, r0:r1] |= take[:, r0:r1].T
            later = c >= r1
            self.handed.append((c[later], rows[rl[later]], v[later]))
        self.cur.masked_fill_(self.final, math.inf)
        best_d, best_i = self.best_d, self.best_i
        have = best_i != NO_INDEX
        M[torch.arange(B)[:, None].expand_as(best_i)[have], best_i[have]] = best_d[have]
        d, i = k_smallest(M, self.k)
        best_d[:, : d.shape[1]] = d
        best_i[:, : i.shape[1]] = i
        self.lower_threshold()

    def select(self, width: int) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
        """A round's entries ``(block rows, cols)``: per row still searched, the ``width``
        entries of smallest bound that are at most its threshold and not final; ``None`` when no
        row has one. A row without one leaves the search for good (thresholds only fall and
        bounds only rise)."""
        rows_live = torch.nonzero(self.live).reshape(-1)
        if len(rows_live) == 0:
            return None
        cur = self.cur if len(rows_live) == len(self.rows) else self.cur[rows_live]
        vals, cols = torch.topk(cur, min(width, self.problem.ny), dim=1, largest=False, sorted=False)
        act = (vals <= self.thr[rows_live, None]) & ~self.final[rows_live[:, None], cols]
        self.live[rows_live[~act.any(1)]] = False
        if not act.any():
            return None
        return rows_live[:, None].expand_as(cols)[act], cols[act]

    def refine(self, rl: torch.Tensor, c: torch.Tensor) -> None:
        """Each selected entry refined by one level (one kernel call per level), then the
        thresholds lowered."""
        lv = self.level[rl, c]
        for step, what in enumerate(self.steps):
            sel = lv == step
            if not sel.any():
                continue
            sr, sc, inb = self._one_of_partners(rl[sel], c[sel])
            if what == "exact":
                self._refine_exact(sr, sc, inb)
            else:
                self._refine_traversal(step, what, sr, sc, inb)
        self.lower_threshold()

    def _one_of_partners(self, sr: torch.Tensor, sc: torch.Tensor):
        """The entries ``(sr, sc)`` of one level, where both an entry and its partner ``(c, r)``
        (the same kernel pair, symmetric problems) are among them, only the one with ``r < c``;
        and which columns are rows of this block (``None`` unless symmetric)."""
        if not self.problem.symmetric:
            return sr, sc, None
        B, ny = self.cur.shape
        inb = (sc >= self.r0) & (sc < self.r1)
        mark = torch.zeros(B, ny, dtype=torch.bool)
        mark[sr, sc] = True
        dup = inb & (self.rows[sr] > sc) & mark[(sc - self.r0).clamp(0, B - 1), self.rows[sr]]
        if dup.any():
            sr, sc, inb = sr[~dup], sc[~dup], inb[~dup]
        return sr, sc, inb

    def _refine_traversal(self, step: int, what: str, sr: torch.Tensor, sc: torch.Tensor, inb) -> None:
        """The ``what`` (preorder or postorder) bounds of entries ``(sr, sc)``, raising their
        current bounds (and their partners' within the block); a bound above the pair's threshold
        comes back as ``inf``: the entry is pruned."""
        problem = self.problem
        a, b = problem.kernel_pairs(self.rows[sr], sc)
        margin = problem.margin(a, b)
        threshold = self.pair_thresholds(sr, sc) + margin
        t = problem.traversal_values(a, b, what, distinct=True, threshold=threshold) - margin
        self.stats["traversal_computed"] += len(a)
        cur, level = self.cur, self.level
        cur[sr, sc] = torch.maximum(cur[sr, sc], t)
        level[sr, sc] = step + 1
        if inb is not None and inb.any():
            pr, pc = sc[inb] - self.r0, self.rows[sr][inb]
            cur[pr, pc] = torch.maximum(cur[pr, pc], t[inb])
            level[pr, pc] = torch.clamp(level[pr, pc], min=step + 1)

    def _refine_exact(self, sr: torch.Tensor, sc: torch.Tensor, inb) -> None:
        """The exact values of entries ``(sr, sc)`` (and of their partners within the block),
        merged into the rows' ``k`` best; those of later blocks' rows handed on."""
        problem, final, cur = self.problem, self.final, self.cur
        a, b = problem.kernel_pairs(self.rows[sr], sc)
        v = problem.exact(a, b, threshold=self.pair_thresholds(sr, sc), distinct=True)
        self.stats["exact_computed"] += len(a)
        final[sr, sc] = True
        cur[sr, sc] = math.inf
        ents_r, ents_c, ents_v = [sr], [sc], [v]
        if inb is not None:
            pr, pc, pv = sc[inb] - self.r0, self.rows[sr][inb], v[inb]
            fresh = ~final[pr, pc]
            pr, pc, pv = pr[fresh], pc[fresh], pv[fresh]
            final[pr, pc] = True
            cur[pr, pc] = math.inf
            ents_r.append(pr)
            ents_c.append(pc)
            ents_v.append(pv)
            later = sc >= self.r1
            self.handed.append((sc[later], self.rows[sr][later], v[later]))
        merge_into(self.best_d, self.best_i, torch.cat(ents_r), torch.cat(ents_c), torch.cat(ents_v), self.k)

    def result(self):
        """``(distances, indices, handed_on, stats)`` of :func:`knn_block`."""
        empty = (torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long),
                 torch.zeros(0, dtype=torch.float64))
        if self.empty:
            return self.best_d, self.best_i, empty, self.stats
        cand, final, level, stats = self.cand, self.final, self.level, self.stats
        open_ = cand & ~final
        stats["exact"] = int((cand & final).sum())
        stats["decided_by_traversal"] = int((open_ & (level > 0)).sum())
        stats["decided_by_label"] = int((open_ & (level == 0)).sum())
        handed_on = tuple(torch.cat(t) for t in zip(*self.handed)) if self.handed else empty
        return self.best_d, self.best_i, handed_on, stats


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
    block = _BlockSearch(problem, r0, r1, k)
    if block.empty:
        return block.result()
    # Without a lower bound, where an exact distance costs about what a round spends per entry
    # (problem.cheap_exact), or (sequences: the label bound alone) where a probe expects the
    # bound to leave most entries open, the block is computed in one exact call, the matrix's
    # way, without the bounds of the whole block or a first round (where costs come in tiles,
    # each exact call builds every tile's costs).
    dense_first = _one_exact_call(problem, block.rows, block.cand, k)
    block.start(with_bounds=not dense_first)
    block.take_known(known)
    dense_pending = True  # (one dense call at most: first, or once every row has k distances)
    width = k
    while True:
        block.close_lost_ties()
        if dense_pending and (dense_first or block.rows_have_k()):
            dense_pending = False
            open_mask = ~block.final if dense_first else block.open_entries()
            if dense_first or block.mostly_open(open_mask):
                block.compute_dense(open_mask)
                continue
        selected = block.select(width)
        if selected is None:
            break
        width = min(2 * width, _MAX_WIDTH)
        block.refine(*selected)
    return block.result()


def bounds_cannot_pay(problem: SearchProblem, k: int) -> bool:
    """Whether the rounds cannot pay for a k-NN, so that :func:`knn_all_pairs` computes the
    matrix's tiles instead: every block would be computed in one exact call (no lower bound,
    :attr:`SearchProblem.cheap_exact`, or, for sequences, a probe of rows spread over X that
    expects the label bound to leave most entries open), or, for trees of at least
    ``probe.TREE_PROBE_MIN_ROWS`` rows, a probe expects the bounds to leave most of the DP work open
    (large ``k``; :func:`_tree_bounds_leave_most_work_open`). Not for a problem of sequences
    too small to probe whose exact calls build every tile's costs: its block's one covered call
    (:func:`knn_block`) cuts Y into runs once, where the matrix's tiles would be a call each
    (one sentence against 5,000: 0.07 s against 0.11 s)."""
    nx, ny = problem.nx, problem.ny
    if _too_few_to_probe(problem, k, nx * ny) and problem.calls_build_every_tile and not exact_is_cheapest(problem):
        return False
    rows = probe_rows(nx)
    cand = probe_candidates(problem, rows)
    if problem.traversal is not None and nx >= probe.TREE_PROBE_MIN_ROWS and not exact_is_cheapest(problem):
        return _tree_bounds_leave_most_work_open(problem, rows, cand, k)
    return _one_exact_call(problem, rows, cand, k, cells=nx * ny)



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
    return problem.traversal is None and cells < probe.PROBE_ROWS * k * _PROBE_PER_K * 8



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
