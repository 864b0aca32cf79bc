"""One co-optimal mapping, uniform samples of all co-optimal mappings, and edit scripts.

A mapping between x (m nodes) and y (n nodes) is a list of ``(i, j)`` pairs covering every
node of both exactly once: ``(i, j)`` replaces x_i by y_j, ``(i, None)`` deletes x_i,
``(None, j)`` inserts y_j. Pairs come in preorder of x (a node's replacement or deletion),
then the insertions in preorder of y. Works for trees and sequences.

How: node by node of x in preorder, the co-optimal matrix P of the mappings still allowed
gives the fraction of them in which x_i takes each partner (or is deleted); the choice is
then pinned by raising the costs of x_i's other options by a margin well above the tie
tolerance, so that the co-optimal mappings of the new costs are exactly those of the old
ones that contain every choice made so far. Drawing each choice with probability P[i, :]
draws a mapping uniformly from all co-optimal mappings (P comes from exact counts, so this
holds for trees of thousands of nodes whose counts leave the float range). Each pair needs
up to |x| co-optimal matrices (rows where one option has P = 1 need none).
Ties are decided as for P, with ``rel_tol`` relative to the pair's largest cost; the margin
raises that scale by at most 1/1024 (float64), so only alternatives that differ by about
the tolerance itself could be judged differently than in P.
"""
from __future__ import annotations

import math
import numbers
from typing import Hashable, List, Optional, Sequence, Tuple

import torch

from .ops import PairBatch, check_rel_tol, pair_costs
from .validation import check_cost_tensor

Mapping = List[Tuple[Optional[int], Optional[int]]]

__all__ = ["optimal_mapping", "optimal_mappings", "sample_mappings", "edit_script", "format_edit_script",
           "plot_mapping", "mapping_cost", "check_mapping", "Mapping"]


def _node_index(value, side: str, size: int, k: int) -> Optional[int]:
    """One side of the mapping's ``k``-th pair: None or a node index in ``[0, size)``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"mapping pair {k}: the {side} index must be an int or None, got {type(value).__name__}")
    value = int(value)
    if not 0 <= value < size:
        raise ValueError(f"mapping pair {k}: {side} index {value} is out of range for {size} nodes")
    return value


def _checked_pairs(mapping, m: int, n: int) -> Mapping:
    """The mapping's pairs as ints; ValueError/TypeError unless it covers each of the ``m``
    nodes of x and ``n`` nodes of y exactly once."""
    if isinstance(mapping, (str, bytes)) or not hasattr(mapping, "__iter__"):
        raise TypeError(f"mapping must be a list of (i, j) pairs, got {type(mapping).__name__}")
    pairs: Mapping = []
    seen_x, seen_y = [False] * m, [False] * n
    for k, pair in enumerate(mapping):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"mapping pair {k} must be an (i, j) pair, got {pair!r}")
        i, j = _node_index(pair[0], "x", m, k), _node_index(pair[1], "y", n, k)
        if i is None and j is None:
            raise ValueError(f"mapping pair {k} is (None, None): it names no node")
        for index, seen, side in ((i, seen_x, "x"), (j, seen_y, "y")):
            if index is not None:
                if seen[index]:
                    raise ValueError(f"mapping pair {k}: node {index} of {side} appears twice")
                seen[index] = True
        pairs.append((i, j))
    for seen, side in ((seen_x, "x"), (seen_y, "y")):
        if not all(seen):
            raise ValueError(f"mapping leaves node {seen.index(False)} of {side} out (a mapping lists every "
                             f"node once: replaced, deleted or inserted)")
    return pairs


def _postorder_ranks(obj) -> List[int]:
    """Each node's postorder position (nodes are in preorder; a sequence's order is both)."""
    if not hasattr(obj, "children"):
        return list(range(len(obj)))
    sizes, depths = obj.subtree_sizes(), obj.depths()
    return [i + sizes[i] - 1 - depths[i] for i in range(len(sizes))]


def check_mapping(mapping, x, y) -> Mapping:
    """The mapping's pairs, checked against trees or sequences ``x`` and ``y``: every node
    once, and the replacements keep both the preorder and the postorder of the nodes (which
    for trees is keeping ancestors and the order of siblings, for sequences the order).
    ValueError/TypeError naming the first pair that breaks a rule."""
    pairs = _checked_pairs(mapping, len(x), len(y))
    replaced = sorted((i, j) for i, j in pairs if i is not None and j is not None)
    for (i, j), (i2, j2) in zip(replaced, replaced[1:]):
        if j2 <= j:
            raise ValueError(f"mapping pairs ({i}, {j}) and ({i2}, {j2}) cross: x's nodes come in the other "
                             f"preorder than y's")
    post_x, post_y = _postorder_ranks(x), _postorder_ranks(y)
    by_post = sorted((post_x[i], post_y[j], i, j) for i, j in replaced)
    for (_, b, i, j), (_, b2, i2, j2) in zip(by_post, by_post[1:]):
        if b2 <= b:
            raise ValueError(f"mapping pairs ({i}, {j}) and ({i2}, {j2}) cross: one node is an ancestor of "
                             f"the other in one tree and not in the other")
    return pairs


def _checked_costs(x, y, costs) -> torch.Tensor:
    costs = pair_costs(x, y, costs)
    check_cost_tensor(costs)
    expected = (len(x) + 1, len(y) + 1)
    if tuple(costs.shape) != expected:
        raise ValueError(f"costs must have shape (|x|+1, |y|+1) = {expected} (last row insertions, last "
                         f"column deletions), got {tuple(costs.shape)}")
    return costs.detach().to("cpu")


def _normalized(costs: torch.Tensor) -> torch.Tensor:
    """The costs times the power of two that brings their largest magnitude into [1, 2): an
    exact scaling (ties, P and so every choice stay the same), so that the pin margin neither
    vanishes for subnormal costs nor overflows for the largest ones."""
    m, n = costs.shape[0] - 1, costs.shape[1] - 1
    used = costs.clone()
    used[m, n] = 0
    scale = float(used.abs().max())
    if scale == 0.0:
        return costs
    exponent = -math.floor(math.log2(scale))
    out = costs.to(torch.float64) if costs.dtype == torch.float64 else costs.clone()
    # two steps: 2^exponent alone may leave the range (subnormal scales need up to 2^1074)
    half = exponent // 2
    out = out * (2.0 ** half) * (2.0 ** (exponent - half))
    out[m, n] = 0
    return out


def _pin_margin(costs: torch.Tensor, rel_tol: float) -> float:
    """How much a pinned-out option's cost rises: far above the tie tolerance (which is at
    most rel_tol (|x| + |y|) times the largest cost), far below the largest cost itself."""
    m, n = costs.shape[0] - 1, costs.shape[1] - 1
    used = costs.clone()
    used[m, n] = 0
    scale = float(used.abs().max())
    if scale == 0.0:
        return 1.0
    return scale * min(1.0, max(2.0 ** -10, 8.0 * rel_tol * (m + n + 1)))


def _mappings(x, y, costs: torch.Tensor, count: int, generator, rel_tol, draw: bool) -> List[Mapping]:
    """`count` co-optimal mappings of one pair: drawn uniformly (draw) or the first by rule."""
    C = _normalized(_checked_costs(x, y, costs))
    tol = check_rel_tol(rel_tol, C.dtype)
    m, n = len(x), len(y)
    margin = _pin_margin(C, tol)
    pinned = C.unsqueeze(0).repeat(count, 1, 1)
    batch = PairBatch([x] * count, [y] * count)
    partner = torch.full((count, m), -1, dtype=torch.long)
    P = None
    for i in range(m):
        if P is None:
            _, P = batch.coopt(pinned, rel_tol=tol)
        row = P[:, i, : n + 1].to(torch.float64)  # partners 0 .. n-1, deletion at n
        if draw:
            choice = torch.multinomial(row, 1, generator=generator).squeeze(1)
        else:
            choice = (row > 0).to(torch.int8).argmax(dim=1)  # the first partner in preorder, deletion last
        partner[:, i] = choice
        # every choice is pinned, also those that every allowed mapping makes already: ties
        # within the tolerance are not transitive, so a later P could otherwise let it go
        others = torch.ones(count, n + 1, dtype=torch.bool)
        others[torch.arange(count), choice] = False
        pinned[:, i, : n + 1] += others.to(pinned.dtype) * margin
        if not bool((row.gather(1, choice[:, None]) == 1).all()):
            P = None  # the pin removes some allowed mappings: count again
    result = []
    for k in range(count):
        mapping: Mapping = []
        taken = set()
        for i in range(m):
            j = int(partner[k, i])
            if j == n:
                mapping.append((i, None))
            else:
                mapping.append((i, j))
                taken.add(j)
        mapping.extend((None, j) for j in range(n) if j not in taken)
        result.append(mapping)
    return result


def optimal_mapping(x, y, costs: torch.Tensor, *, rel_tol: Optional[float] = None) -> Mapping:
    """One co-optimal mapping of x and y (trees or sequences), the same on every run.

    The rule: nodes of x in preorder, each takes the partner of y with the smallest preorder
    index among those that some co-optimal mapping, consistent with the earlier choices,
    gives it; deletion only where no partner is left. Its cost (:func:`mapping_cost`) equals
    ``edit_distance(x, y, costs)``.

    Args:
        x, y: trees (:class:`~bedl_torch.tree.Tree`) or sequences.
        costs: ``(|x|+1, |y|+1)`` float32/float64 tensor on any device (last row insertions,
            last column deletions).
        rel_tol: tie tolerance as for :func:`~bedl_torch.ops.coopt_matrix`.

    Raises:
        ValueError/TypeError: as :func:`~bedl_torch.ops.coopt_matrix`.
    """
    return _mappings(x, y, costs, 1, None, rel_tol, draw=False)[0]


def optimal_mappings(xs: Sequence, ys: Sequence, costs: Sequence[torch.Tensor], *,
                     rel_tol: Optional[float] = None) -> List[Mapping]:
    """:func:`optimal_mapping` for the pairs ``(xs[k], ys[k])`` with costs ``costs[k]``."""
    if not (len(xs) == len(ys) == len(costs)):
        raise ValueError(f"xs, ys and costs must have the same length, got {len(xs)}, {len(ys)}, {len(costs)}")
    return [optimal_mapping(x, y, c, rel_tol=rel_tol) for x, y, c in zip(xs, ys, costs)]


def sample_mappings(x, y, costs: torch.Tensor, n: int, generator: Optional[torch.Generator] = None, *,
                    rel_tol: Optional[float] = None) -> List[Mapping]:
    """``n`` mappings drawn independently and uniformly from all co-optimal mappings.

    The mean of their indicator matrices (1 at ``(i, j)`` replacements, ``(i, |y|)``
    deletions, ``(|x|, j)`` insertions) converges to ``coopt_matrix(x, y, costs)[1]``.
    ``generator``: a CPU :class:`torch.Generator` for reproducible draws.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if n == 0:
        _checked_costs(x, y, costs)
        return []
    return _mappings(x, y, costs, n, generator, rel_tol, draw=True)


def mapping_indicator(mapping: Mapping, m: int, n: int, dtype=torch.float64) -> torch.Tensor:
    """The ``(m+1, n+1)`` 0/1 matrix of a mapping in the cost layout (sum with costs = its cost).
    ValueError/TypeError unless the mapping lists each of the ``m`` and ``n`` nodes once."""
    out = torch.zeros(m + 1, n + 1, dtype=dtype)
    for i, j in _checked_pairs(mapping, m, n):
        out[m if i is None else i, n if j is None else j] = 1
    return out


def mapping_cost(mapping: Mapping, costs: torch.Tensor) -> torch.Tensor:
    """The cost of a mapping: its replacements, deletions and insertions summed from ``costs``
    (``(m+1, n+1)``, last row insertions, last column deletions)."""
    check_cost_tensor(costs)
    if costs.dim() != 2:
        raise ValueError(f"costs must be 2-D (|x|+1, |y|+1), got shape {tuple(costs.shape)}")
    m, n = costs.shape[0] - 1, costs.shape[1] - 1
    return (mapping_indicator(mapping, m, n, costs.dtype).to(costs.device) * costs).sum()


def edit_script(x, y, costs: torch.Tensor, mapping: Optional[Mapping] = None, *,
                rel_tol: Optional[float] = None) -> List[tuple]:
    """The operations of a mapping (default :func:`optimal_mapping`) with their costs:
    ``("replace", i, j, cost)``, ``("delete", i, cost)``, ``("insert", j, cost)``, in the
    mapping's order."""
    costs = _checked_costs(x, y, costs)  # (a cost module's pair costs computed once)
    if mapping is None:
        mapping = optimal_mapping(x, y, costs, rel_tol=rel_tol)
    else:
        mapping = check_mapping(mapping, x, y)
    C = costs.to(torch.float64)
    m, n = len(x), len(y)
    script = []
    for i, j in mapping:
        if i is not None and j is not None:
            script.append(("replace", i, j, float(C[i, j])))
        elif j is None:
            script.append(("delete", i, float(C[i, n])))
        else:
            script.append(("insert", j, float(C[m, j])))
    return script


def _labels(obj) -> Sequence[Hashable]:
    return obj.labels if hasattr(obj, "labels") else list(obj)


def format_edit_script(script: List[tuple], x, y) -> str:
    """A readable text of an edit script, one operation a line, with the nodes' labels and
    the total cost; operations of cost 0 (replacing a label by itself) are listed as kept."""
    lx, ly = _labels(x), _labels(y)
    lines = []
    total = 0.0
    for op in script:
        total += op[-1]
        if op[0] == "replace":
            _, i, j, c = op
            verb = "keep   " if c == 0 and lx[i] == ly[j] else "replace"
            lines.append(f"{verb} x[{i}] {lx[i]!r} -> y[{j}] {ly[j]!r}  ({c:g})")
        elif op[0] == "delete":
            _, i, c = op
            lines.append(f"delete  x[{i}] {lx[i]!r}  ({c:g})")
        else:
            _, j, c = op
            lines.append(f"insert  y[{j}] {ly[j]!r}  ({c:g})")
    lines.append(f"total cost {total:g}")
    return "\n".join(lines)


def _layout(obj) -> Tuple[List[float], List[float], List[Tuple[int, int]]]:
    """x (leaf order) and y (depth) positions of every node in preorder, and the edges."""
    if not hasattr(obj, "children"):
        n = len(obj)
        return [float(k) for k in range(n)], [0.0] * n, []
    children = obj.children
    n = len(children)
    xs, ys, edges = [0.0] * n, [0.0] * n, []
    next_leaf = 0.0
    stack = [(0, 0, False)]  # (node, depth, children placed); iterative: trees can be deep
    while stack:
        v, depth, done = stack.pop()
        if done:
            xs[v] = (xs[children[v][0]] + xs[children[v][-1]]) / 2.0
            continue
        ys[v] = -float(depth)
        if not children[v]:
            xs[v] = next_leaf
            next_leaf += 1.0
            continue
        stack.append((v, depth, True))
        for c in reversed(children[v]):
            edges.append((v, c))
            stack.append((c, depth + 1, False))
    return xs, ys, edges


def plot_mapping(x, y, mapping: Mapping, ax=None, *, gap: float = 2.0):
    """Draws x (left) and y (right) with the mapping: replacements as grey lines (dashed where
    the labels differ), deleted nodes of x in red, inserted nodes of y in green. Needs
    matplotlib; returns the axes."""
    import matplotlib.pyplot as plt  # optional dependency, imported only here

    mapping = check_mapping(mapping, x, y)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    lx, ly = _labels(x), _labels(y)
    px, py_, ex = _layout(x)
    qx, qy, ey = _layout(y)
    shift = (max(px) if px else 0.0) + gap - (min(qx) if qx else 0.0)
    qx = [v + shift for v in qx]
    deleted = {i for i, j in mapping if j is None}
    inserted = {j for i, j in mapping if i is None}
    for a, b in ex:
        ax.plot([px[a], px[b]], [py_[a], py_[b]], color="black", lw=1, zorder=1)
    for a, b in ey:
        ax.plot([qx[a], qx[b]], [qy[a], qy[b]], color="black", lw=1, zorder=1)
    for i, j in mapping:
        if i is not None and j is not None:
            ax.plot([px[i], qx[j]], [py_[i], qy[j]], color="grey", lw=0.8, alpha=0.7, zorder=0,
                    ls="-" if lx[i] == ly[j] else "--")
    for i in range(len(px)):
        ax.scatter(px[i], py_[i], s=250, color="tab:red" if i in deleted else "white", edgecolor="black", zorder=2)
        ax.annotate(str(lx[i]), (px[i], py_[i]), ha="center", va="center", fontsize=8, zorder=3)
    for j in range(len(qx)):
        ax.scatter(qx[j], qy[j], s=250, color="tab:green" if j in inserted else "white", edgecolor="black", zorder=2)
        ax.annotate(str(ly[j]), (qx[j], qy[j]), ha="center", va="center", fontsize=8, zorder=3)
    ax.set_axis_off()
    return ax
