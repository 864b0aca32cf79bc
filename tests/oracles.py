"""Slow, independent pure-Python references for edit distances and co-optimal matrices P.

Nothing here uses the library: these are the oracles the library is tested against
(definitions in ``docs/edit-distances.md``).

Inputs
------
* A **tree** is a 2-tuple ``(labels, children)`` in preorder (the edist format), or any object
  with ``labels`` and ``children`` attributes (e.g. ``bedl_torch.tree.Tree``).
* A **sequence** is a ``str`` or a ``list`` of labels (may be empty). Internally a sequence is
  treated as a forest of single-node trees, which makes tree mappings and sequence alignments
  the same thing.
* A **cost matrix** ``C`` has shape ``(m + 1, n + 1)``: ``C[i, j]`` replaces ``x_i`` by ``y_j``,
  ``C[i, n]`` deletes ``x_i``, ``C[m, j]`` inserts ``y_j``; ``C[m, n]`` is unused.

Oracles
-------
* :func:`enumerate_mappings` / :func:`brute_force`: every valid mapping, from the definition
  (trees up to about 6 nodes, sequences up to about 7).
* :func:`forest_recursion`: memoised recursion over forests (remove the rightmost root, or
  match the rightmost trees), counting each co-optimal mapping exactly once; P from exact
  per-event integer counts (trees up to about 12 nodes).
* :func:`sequence_reference`: O(mn) DP with exact (Python int) counts and P by
  forward-backward (sequences up to ~1000).

All three return ``(distance, P, count)`` with ``P`` a float64 ``(m + 1, n + 1)`` array and
``count`` the number of co-optimal mappings (a Python int).
"""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np

__all__ = [
    "Structure",
    "structure",
    "is_valid_mapping",
    "enumerate_mappings",
    "mapping_cost",
    "default_tol",
    "brute_force",
    "forest_recursion",
    "sequence_reference",
    "random_tree",
    "random_sequence",
    "path_tree",
    "star_tree",
    "comb_tree",
    "random_costs",
    "COST_KINDS",
    "binomial_path_P",
    "zero_cost_sequence_P",
]


# ----------------------------------------------------------------------------------------------
# Structures
# ----------------------------------------------------------------------------------------------
class Structure:
    """A forest in preorder: labels, children, subtree sizes, roots; trees have one root."""

    __slots__ = ("labels", "children", "sizes", "roots", "is_tree", "n")

    def __init__(self, labels, children, roots, is_tree):
        self.labels = tuple(labels)
        self.children = tuple(tuple(c) for c in children)
        self.n = len(self.labels)
        self.roots = tuple(roots)
        self.is_tree = is_tree
        sizes = [1] * self.n
        for i in range(self.n - 1, -1, -1):
            sizes[i] = 1 + sum(sizes[c] for c in self.children[i])
        self.sizes = tuple(sizes)

    def is_ancestor(self, a, b):
        """True iff ``a`` is a proper ancestor of ``b``."""
        return a < b < a + self.sizes[a]

    def relation(self, a, b):
        """Relation of ``a`` to ``b`` for ``a != b``: 'anc', 'desc', 'left' or 'right'."""
        if self.is_ancestor(a, b):
            return "anc"
        if self.is_ancestor(b, a):
            return "desc"
        return "left" if a < b else "right"


def _check_preorder_tree(labels, children):
    n = len(labels)
    if n == 0:
        raise ValueError("a tree needs at least one node")
    if len(children) != n:
        raise ValueError("labels and children differ in length")
    seen = [False] * n

    def visit(i, expect):
        if i != expect or i >= n or seen[i]:
            raise ValueError(f"tree is not in preorder at node {i}")
        seen[i] = True
        nxt = i + 1
        for c in children[i]:
            nxt = visit(c, nxt)
        return nxt

    end = visit(0, 0)
    if end != n:
        raise ValueError("not every node is reachable from the root")


def structure(x) -> Structure:
    """Normalise a tree or sequence into a :class:`Structure`."""
    if isinstance(x, Structure):
        return x
    if hasattr(x, "labels") and hasattr(x, "children"):
        labels, children = list(x.labels), [list(c) for c in x.children]
        _check_preorder_tree(labels, children)
        return Structure(labels, children, (0,), True)
    if isinstance(x, tuple) and len(x) == 2:
        labels, children = list(x[0]), [list(c) for c in x[1]]
        _check_preorder_tree(labels, children)
        return Structure(labels, children, (0,), True)
    if isinstance(x, (str, list)):
        labels = list(x)
        return Structure(labels, [[] for _ in labels], range(len(labels)), False)
    raise TypeError(f"not a tree (labels, children) or a sequence (str/list): {type(x).__name__}")


def _costs(C, m, n):
    C = np.asarray(C, dtype=np.float64)
    if C.shape != (m + 1, n + 1):
        raise ValueError(f"cost matrix has shape {C.shape}, expected {(m + 1, n + 1)}")
    return C


def default_tol(C):
    """Absolute tie tolerance used by the oracles: 1e-9 of the largest cost magnitude (>= 1e-9)."""
    C = np.asarray(C, dtype=np.float64)
    return 1e-9 * max(1.0, float(np.abs(C).max()) if C.size else 1.0)


# ----------------------------------------------------------------------------------------------
# (a) Enumeration of all valid mappings
# ----------------------------------------------------------------------------------------------
def is_valid_mapping(x, y, mapping) -> bool:
    """Brute-force check of the definition, over all pairs of pairs.

    One-to-one; for all (i, j), (i', j') in the mapping: i ancestor of i' iff j ancestor of j',
    and i left of i' iff j left of j' ("left of" = neither is an ancestor of the other and i
    precedes i' in preorder). For sequences nothing is an ancestor: order is preserved.
    """
    X, Y = structure(x), structure(y)
    pairs = list(mapping)
    for i, j in pairs:
        if not (0 <= i < X.n and 0 <= j < Y.n):
            return False
    if len({i for i, _ in pairs}) != len(pairs) or len({j for _, j in pairs}) != len(pairs):
        return False
    for (i, j), (i2, j2) in itertools.permutations(pairs, 2):
        if X.is_ancestor(i, i2) != Y.is_ancestor(j, j2):
            return False
        x_left = not X.is_ancestor(i, i2) and not X.is_ancestor(i2, i) and i < i2
        y_left = not Y.is_ancestor(j, j2) and not Y.is_ancestor(j2, j) and j < j2
        if x_left != y_left:
            return False
    return True


def enumerate_mappings(x, y):
    """Yield every valid mapping between ``x`` and ``y`` as a frozenset of (i, j) pairs.

    Backtracking over the nodes of ``x`` in preorder; each node is left out or paired with an
    unused node of ``y`` whose relation (ancestor / left) to every earlier pair's partner equals
    the relation in ``x``. Every yielded mapping also passes :func:`is_valid_mapping` (checked in
    the tests).
    """
    X, Y = structure(x), structure(y)
    m, n = X.n, Y.n
    relx = [[X.relation(a, b) if a != b else None for b in range(m)] for a in range(m)]
    rely = [[Y.relation(a, b) if a != b else None for b in range(n)] for a in range(n)]
    chosen = []
    used = [False] * n

    def rec(i):
        if i == m:
            yield frozenset(chosen)
            return
        yield from rec(i + 1)  # x_i left out
        for j in range(n):
            if used[j]:
                continue
            if all(relx[i2][i] == rely[j2][j] for i2, j2 in chosen):
                chosen.append((i, j))
                used[j] = True
                yield from rec(i + 1)
                used[j] = False
                chosen.pop()

    yield from rec(0)


def mapping_cost(mapping, C, m, n) -> float:
    C = np.asarray(C, dtype=np.float64)
    mx = {i for i, _ in mapping}
    my = {j for _, j in mapping}
    total = 0.0
    for i, j in sorted(mapping):
        total += C[i, j]
    for i in range(m):
        if i not in mx:
            total += C[i, n]
    for j in range(n):
        if j not in my:
            total += C[m, j]
    return total


def brute_force(x, y, C, tol=None):
    """(distance, P, count) by enumerating all valid mappings.

    A mapping is co-optimal if its cost is within ``tol`` of the minimum. ``P[i, j]`` is the
    fraction of co-optimal mappings containing (i, j), ``P[i, n]`` the fraction deleting x_i,
    ``P[m, j]`` the fraction inserting y_j, ``P[m, n] = 0``; fractions are exact until the final
    conversion to float64.
    """
    X, Y = structure(x), structure(y)
    m, n = X.n, Y.n
    C = _costs(C, m, n)
    if tol is None:
        tol = default_tol(C)
    scored = [(mapping_cost(M, C, m, n), M) for M in enumerate_mappings(X, Y)]
    d = min(c for c, _ in scored)
    opt = [M for c, M in scored if c <= d + tol]
    counts = [[0] * (n + 1) for _ in range(m + 1)]
    for M in opt:
        mx = {i for i, _ in M}
        my = {j for _, j in M}
        for i, j in M:
            counts[i][j] += 1
        for i in range(m):
            if i not in mx:
                counts[i][n] += 1
        for j in range(n):
            if j not in my:
                counts[m][j] += 1
    N = len(opt)
    P = np.array([[float(Fraction(c, N)) for c in row] for row in counts], dtype=np.float64)
    return float(d), P, N


# ----------------------------------------------------------------------------------------------
# (c) Memoised forest recursion with canonical counting
# ----------------------------------------------------------------------------------------------
def forest_recursion(x, y, C, tol=None):
    """(distance, P, count) by a memoised recursion over forests.

    A forest is a tuple of root indices (each root stands for its whole subtree). For forests
    F, G with rightmost roots r, s a mapping either leaves r out (delete r: F -> F - r), or
    leaves s out (insert s: G -> G - s), or maps r to s (match: (F - T(r), G - T(s)) and
    (T(r) - r, T(s) - s) independently). A mapping that leaves out both r and s would be reached
    twice; canonically it is reached by deleting first: a deletion may never directly follow an
    insertion in the same forest subproblem (state flag ``after_ins``). Each state keeps the
    number of co-optimal mappings and, per event (replacement (i, j), deletion i, insertion j),
    the number of them containing it, as exact integers.
    """
    X, Y = structure(x), structure(y)
    m, n = X.n, Y.n
    C = _costs(C, m, n)
    if tol is None:
        tol = default_tol(C)
    # Tree mappings preserve preorder, so the count is at most C(m+n, m); int64 is exact while
    # that fits, else fall back to Python ints (object arrays).
    dtype = np.int64 if math.comb(m + n, m) < 2**62 else object
    Cl = C.tolist()
    zero = np.zeros((m + 1, n + 1), dtype=dtype)
    INF = math.inf
    memo = {}
    xch, ych = X.children, Y.children

    def solve(F, G, after_ins):
        key = (F, G, after_ins)
        hit = memo.get(key)
        if hit is not None:
            return hit
        if not F and not G:
            res = (0.0, 1, zero)
            memo[key] = res
            return res
        options = []  # (cost, kind, payload)
        if F and not after_ins:
            r = F[-1]
            sub = solve(F[:-1] + xch[r], G, False)
            options.append((Cl[r][n] + sub[0], "del", (r, sub)))
        if G:
            s = G[-1]
            sub = solve(F, G[:-1] + ych[s], True)
            options.append((Cl[m][s] + sub[0], "ins", (s, sub)))
        if F and G:
            r, s = F[-1], G[-1]
            a = solve(F[:-1], G[:-1], False)
            b = solve(xch[r], ych[s], False)
            options.append((Cl[r][s] + a[0] + b[0], "match", (r, s, a, b)))
        best = min((o[0] for o in options), default=INF)
        if best == INF:
            res = (INF, 0, zero)
            memo[key] = res
            return res
        count = 0
        events = zero.copy()
        for cost, kind, p in options:
            if cost > best + tol:
                continue
            if kind == "del":
                r, sub = p
                if sub[1] == 0:
                    continue
                count += sub[1]
                events += sub[2]
                events[r, n] += sub[1]
            elif kind == "ins":
                s, sub = p
                if sub[1] == 0:
                    continue
                count += sub[1]
                events += sub[2]
                events[m, s] += sub[1]
            else:
                r, s, a, b = p
                k = a[1] * b[1]
                if k == 0:
                    continue
                count += k
                events += a[2] * b[1] + b[2] * a[1]
                events[r, s] += k
        res = (best, count, events)
        memo[key] = res
        return res

    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 10 * (m + n) + 1000))
    try:
        d, count, events = solve(X.roots, Y.roots, False)
    finally:
        sys.setrecursionlimit(old)
    P = np.array([[float(Fraction(int(e), count)) for e in row] for row in events.tolist()],
                 dtype=np.float64)
    return float(d), P, int(count)


# ----------------------------------------------------------------------------------------------
# Sequence DP with exact counts and forward-backward P
# ----------------------------------------------------------------------------------------------
def sequence_reference(x, y, C, tol=None):
    """(distance, P, count) for sequences: O(mn) DP, exact Python-int counts, forward-backward.

    Alignment paths go from (0, 0) to (m, n) by match (i, j) -> (i+1, j+1) [cost C[i, j]],
    deletion (i, j) -> (i+1, j) [C[i, n]] and insertion (i, j) -> (i, j+1) [C[m, j]]. An edge
    u -> v is co-optimal iff D[u] + c + E[v] <= d + tol (D: cost from the origin, E: cost to the
    end). Canonical paths (one per mapping): an insertion never directly follows a deletion.
    Forward counts F_del/F_oth (paths into a cell, last step deletion / otherwise) and backward
    counts B_del/B_oth (completions given the cell was entered by a deletion / otherwise) over
    co-optimal edges; each event's count is the sum over its edges of forward x backward.
    """
    X, Y = structure(x), structure(y)
    m, n = X.n, Y.n
    C = _costs(C, m, n)
    if tol is None:
        tol = default_tol(C)
    c = C.tolist()
    dl = [c[i][n] for i in range(m)]
    ins = [c[m][j] for j in range(n)]
    INF = math.inf
    D = [[INF] * (n + 1) for _ in range(m + 1)]
    D[0][0] = 0.0
    for i in range(m + 1):
        Di = D[i]
        Dp = D[i - 1] if i else None
        for j in range(n + 1):
            if i == 0 and j == 0:
                continue
            best = INF
            if i:
                best = Dp[j] + dl[i - 1]
                if j:
                    v = Dp[j - 1] + c[i - 1][j - 1]
                    if v < best:
                        best = v
            if j:
                v = Di[j - 1] + ins[j - 1]
                if v < best:
                    best = v
            Di[j] = best
    E = [[INF] * (n + 1) for _ in range(m + 1)]
    E[m][n] = 0.0
    for i in range(m, -1, -1):
        Ei = E[i]
        En = E[i + 1] if i < m else None
        for j in range(n, -1, -1):
            if i == m and j == n:
                continue
            best = INF
            if i < m:
                best = dl[i] + En[j]
                if j < n:
                    v = c[i][j] + En[j + 1]
                    if v < best:
                        best = v
            if j < n:
                v = ins[j] + Ei[j + 1]
                if v < best:
                    best = v
            Ei[j] = best
    d = D[m][n]
    lim = d + tol
    # co-optimal edge flags
    def ok_match(i, j):
        return D[i][j] + c[i][j] + E[i + 1][j + 1] <= lim

    def ok_del(i, j):
        return D[i][j] + dl[i] + E[i + 1][j] <= lim

    def ok_ins(i, j):
        return D[i][j] + ins[j] + E[i][j + 1] <= lim

    on = [[D[i][j] + E[i][j] <= lim for j in range(n + 1)] for i in range(m + 1)]
    Fd = [[0] * (n + 1) for _ in range(m + 1)]
    Fo = [[0] * (n + 1) for _ in range(m + 1)]
    Fo[0][0] = 1
    for i in range(m + 1):
        for j in range(n + 1):
            if not on[i][j]:
                continue
            if i and on[i - 1][j] and ok_del(i - 1, j):
                Fd[i][j] += Fd[i - 1][j] + Fo[i - 1][j]
            if j and on[i][j - 1] and ok_ins(i, j - 1):
                Fo[i][j] += Fo[i][j - 1]
            if i and j and on[i - 1][j - 1] and ok_match(i - 1, j - 1):
                Fo[i][j] += Fd[i - 1][j - 1] + Fo[i - 1][j - 1]
    Bd = [[0] * (n + 1) for _ in range(m + 1)]
    Bo = [[0] * (n + 1) for _ in range(m + 1)]
    Bd[m][n] = Bo[m][n] = 1
    for i in range(m, -1, -1):
        for j in range(n, -1, -1):
            if (i == m and j == n) or not on[i][j]:
                continue
            common = 0
            if i < m and ok_del(i, j):
                common += Bd[i + 1][j]
            if i < m and j < n and ok_match(i, j):
                common += Bo[i + 1][j + 1]
            Bd[i][j] = common
            Bo[i][j] = common + (Bo[i][j + 1] if j < n and ok_ins(i, j) else 0)
    total = Fd[m][n] + Fo[m][n]
    assert total == Bo[0][0], (total, Bo[0][0])
    ev = [[0] * (n + 1) for _ in range(m + 1)]
    for i in range(m + 1):
        for j in range(n + 1):
            if not on[i][j]:
                continue
            fin = Fd[i][j] + Fo[i][j]
            if i < m and j < n and ok_match(i, j):
                ev[i][j] += fin * Bo[i + 1][j + 1]
            if i < m and ok_del(i, j):
                ev[i][n] += fin * Bd[i + 1][j]
            if j < n and ok_ins(i, j):
                ev[m][j] += Fo[i][j] * Bo[i][j + 1]
    P = np.array([[float(Fraction(e, total)) for e in row] for row in ev], dtype=np.float64)
    return float(d), P, total


# ----------------------------------------------------------------------------------------------
# Closed forms
# ----------------------------------------------------------------------------------------------
def binomial_path_P(m, n, exact=None):
    """Exact P (float64) for two order-only structures of m and n nodes when every maximum-size
    mapping is co-optimal and only they are (e.g. paths or sequences with all costs 1, or
    equal labels with replacement 0 and indels 1): for m >= n the co-optimal mappings are the
    C(m, n) monotone matchings of all n nodes of y into the m nodes of x.

    P[i, j] = C(i, j) C(m-1-i, n-1-j) / C(m, n); P[i, n] = 1 - sum_j P[i, j]; P[m, :] = 0.
    Returns (P, count). ``exact`` (default: m * n <= 40000) uses Fractions; otherwise log-gamma
    in numpy (relative error ~1e-12, counts far beyond float64 range are fine).
    """
    if m < n:
        P, count = binomial_path_P(n, m, exact)
        return P.T.copy(), count
    total = math.comb(m, n)
    if exact is None:
        exact = m * n <= 40000
    P = np.zeros((m + 1, n + 1), dtype=np.float64)
    if exact:
        for i in range(m):
            row_sum = Fraction(0)
            for j in range(n):
                if j <= i and n - 1 - j <= m - 1 - i:
                    f = Fraction(math.comb(i, j) * math.comb(m - 1 - i, n - 1 - j), total)
                    row_sum += f
                    P[i, j] = float(f)
            P[i, n] = float(1 - row_sum)
        return P, total
    lf = np.array([math.lgamma(k + 1) for k in range(m + 1)])
    i = np.arange(m)[:, None]
    j = np.arange(n)[None, :]
    valid = (j <= i) & (n - 1 - j <= m - 1 - i)
    a = np.where(valid, i, 0)
    b = np.where(valid, j, 0)
    c = np.where(valid, m - 1 - i, 0)
    e = np.where(valid, n - 1 - j, 0)
    logp = (lf[a] - lf[b] - lf[a - b]) + (lf[c] - lf[e] - lf[c - e]) - (lf[m] - lf[n] - lf[m - n])
    P[:m, :n] = np.where(valid, np.exp(np.where(valid, logp, 0.0)), 0.0)
    P[:m, n] = 1.0 - P[:m, :n].sum(1)
    P[:m, n][P[:m, n] < 1e-13] = 0.0
    return P, total


def zero_cost_sequence_P(m, n):
    """P (float64) for sequences of m and n elements when every cost is 0: every alignment is
    co-optimal, C(m + n, m) of them. The alignments containing (i, j) are an alignment of the
    prefixes times one of the suffixes: P[i, j] = C(i + j, i) C(m-1-i + n-1-j, m-1-i) / C(m+n, m);
    deletions / insertions are what is left of each row / column. Log-gamma in numpy.
    Returns (P, count).
    """
    lf = np.array([math.lgamma(k + 1) for k in range(m + n + 1)])

    def logc(a, b):
        return lf[a] - lf[b] - lf[a - b]

    P = np.zeros((m + 1, n + 1), dtype=np.float64)
    if m and n:
        i = np.arange(m)[:, None]
        j = np.arange(n)[None, :]
        P[:m, :n] = np.exp(logc(i + j, i) + logc(m - 1 - i + n - 1 - j, m - 1 - i)
                           - logc(m + n, m))
    P[:m, n] = 1.0 - P[:m, :n].sum(1)
    P[m, :n] = 1.0 - P[:m, :n].sum(0)
    return P, math.comb(m + n, m)


# ----------------------------------------------------------------------------------------------
# (d) Random generators
# ----------------------------------------------------------------------------------------------
def _rng(rng):
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def random_tree(n, alphabet, rng):
    """A random ordered tree of ``n >= 1`` nodes as ``(labels, children)`` in preorder.

    Node k (k >= 1) becomes the new last child of a node chosen uniformly from the current
    rightmost path, which keeps preorder numbering and produces paths, stars and everything
    in between.
    """
    rng = _rng(rng)
    if n < 1:
        raise ValueError("n must be >= 1")
    alphabet = list(alphabet)
    labels = [alphabet[int(k)] for k in rng.integers(0, len(alphabet), size=n)]
    children = [[] for _ in range(n)]
    stack = [0]
    for k in range(1, n):
        depth = int(rng.integers(0, len(stack)))
        parent = stack[depth]
        del stack[depth + 1:]
        children[parent].append(k)
        stack.append(k)
    return labels, children


def random_sequence(n, alphabet, rng):
    rng = _rng(rng)
    alphabet = list(alphabet)
    return [alphabet[int(k)] for k in rng.integers(0, len(alphabet), size=n)]


def path_tree(n, label="a"):
    labels = [label] * n if not isinstance(label, list) else label
    return labels, [[i + 1] for i in range(n - 1)] + [[]]


def star_tree(n, label="a"):
    labels = [label] * n if not isinstance(label, list) else label
    return labels, [list(range(1, n))] + [[] for _ in range(n - 1)]


def comb_tree(n, label="a", leaf_first=True):
    """A caterpillar: every spine node has a leaf child and the next spine node as children.

    ``leaf_first=True``: the leaf is the left child (the spine is the rightmost path; the worst
    case, O(n^4), of the leftmost-path Zhang-Shasha decomposition). ``leaf_first=False``: the
    spine is the leftmost path (O(n^2) keyroot work for Zhang-Shasha, worst case for a
    rightmost-path decomposition).
    """
    labels = [label] * n if not isinstance(label, list) else label
    children = [[] for _ in range(n)]
    if leaf_first:
        i = 0
        while i + 1 < n:
            children[i].append(i + 1)  # leaf
            if i + 2 < n:
                children[i].append(i + 2)  # next spine node
            i += 2
        return labels, children
    # spine first: node i's subtree has `remaining` nodes; spine child at i + 1, leaf last
    i, remaining = 0, n
    while remaining > 1:
        if remaining == 2:
            children[i].append(i + 1)
            break
        children[i] += [i + 1, i + remaining - 1]
        i, remaining = i + 1, remaining - 2
    return labels, children


COST_KINDS = ("unit", "euclidean", "integer", "arbitrary", "signed")


def random_costs(x, y, kind, rng, *, dim=None, alphabet=None):
    """A float64 ``(m + 1, n + 1)`` cost matrix for ``x``, ``y`` of the given kind.

    * ``unit``: replacement 0 for equal labels else 1; deletions and insertions 1.
    * ``euclidean``: ``||e(a) - e(b)||`` for random embeddings of the labels and of the gap
      (the gap sits at the origin half of the time); a pseudo-metric.
    * ``integer``: independent uniform integers in {0, 1, 2} (many exact ties).
    * ``arbitrary``: independent uniform [0, 1) (non-metric, asymmetric).
    * ``signed``: independent uniform [-1, 1) (costs may be negative; still finite).
    """
    rng = _rng(rng)
    X, Y = structure(x), structure(y)
    m, n = X.n, Y.n
    if kind == "unit":
        C = np.ones((m + 1, n + 1))
        for i in range(m):
            for j in range(n):
                C[i, j] = 0.0 if X.labels[i] == Y.labels[j] else 1.0
    elif kind == "euclidean":
        dim = dim or int(rng.integers(1, 4))
        symbols = sorted(set(X.labels) | set(Y.labels) | set(alphabet or ()), key=repr)
        emb = {s: rng.normal(size=dim) for s in symbols}
        gap = np.zeros(dim) if rng.random() < 0.5 else rng.normal(size=dim)
        ex = [emb[l] for l in X.labels] + [gap]
        ey = [emb[l] for l in Y.labels] + [gap]
        C = np.array([[float(np.linalg.norm(a - b)) for b in ey] for a in ex])
    elif kind == "integer":
        C = rng.integers(0, 3, size=(m + 1, n + 1)).astype(np.float64)
    elif kind == "arbitrary":
        C = rng.random((m + 1, n + 1))
    elif kind == "signed":
        C = rng.uniform(-1.0, 1.0, size=(m + 1, n + 1))
    else:
        raise ValueError(f"unknown cost kind {kind!r}")
    C[m, n] = 0.0
    return np.ascontiguousarray(C, dtype=np.float64)
