"""bedl_torch.search: the bounds against exact distances, and kneighbors / radius_neighbors
against sorting and thresholding the full matrix (ties by index, empty results, k = all,
duplicates at distance 0, Y given and Y=None), on random and adversarial inputs under unit,
Euclidean, integer, signed (negative) and asymmetric costs. Nothing here depends on timing."""
import ast
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import bedl_torch as bt
from bedl_torch.costs import MatrixCost
from bedl_torch.search import (SearchProblem, SymbolCosts, kneighbors, knn_block,
                               label_lower_bound, mapping_upper_bound, merge_stats,
                               postorder_labels, radius_block, radius_neighbors,
                               traversal_lower_bound)
from bedl_torch.search import label_bound as label_bound_module
from bedl_torch.search import symbol_costs as symbol_costs_module
from bedl_torch.search import problem as problem_module
from bedl_torch.search.knn import knn_blocks
from oracles import comb_tree, path_tree, random_sequence, random_tree, star_tree

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ALPHABET = list("abcde")
COSTS = ("unit", "euclidean", "integer", "signed", "asymmetric", "float32")


def make_cost(kind, rng, alphabet=ALPHABET):
    s = len(alphabet) + 1
    if kind == "unit":
        return bt.UnitCost(alphabet)
    if kind == "euclidean":
        return bt.EuclideanCost(alphabet, torch.as_tensor(rng.normal(size=(s - 1, 3))))
    if kind == "float32":
        return bt.EuclideanCost(alphabet, torch.as_tensor(rng.normal(size=(s - 1, 2)), dtype=torch.float32))
    if kind == "integer":  # symmetric, many exact ties
        m = rng.integers(0, 3, size=(s, s)).astype(float)
        return MatrixCost(alphabet, np.triu(m) + np.triu(m, 1).T)
    if kind == "signed":  # negative costs too
        m = rng.uniform(-1.0, 1.0, size=(s, s))
        return MatrixCost(alphabet, np.triu(m) + np.triu(m, 1).T)
    if kind == "asymmetric":
        return MatrixCost(alphabet, rng.uniform(-0.5, 1.5, size=(s, s)))
    raise ValueError(kind)


def adversarial_trees(rng, alphabet=ALPHABET):
    """Paths, stars, combs (both orientations), single nodes, and random trees."""
    out = []
    for n in (1, 2, 3, 6, 9):
        labels = [alphabet[int(i)] for i in rng.integers(0, len(alphabet), size=n)]
        out += [bt.Tree(*path_tree(n, labels)), bt.Tree(*star_tree(n, labels)),
                bt.Tree(*comb_tree(n, labels)), bt.Tree(*comb_tree(n, labels, leaf_first=False))]
    out += [bt.Tree(*random_tree(int(rng.integers(1, 12)), alphabet, rng)) for _ in range(16)]
    return out


def random_trees(rng, n, max_nodes=10, alphabet=ALPHABET):
    return [bt.Tree(*random_tree(int(rng.integers(1, max_nodes + 1)), alphabet, rng)) for _ in range(n)]


def random_sequences(rng, n, max_len=10, alphabet=ALPHABET):
    return [random_sequence(int(rng.integers(0, max_len + 1)), alphabet, rng) for _ in range(n)]


def exact_matrix(X, Y, cost, **kw):
    with torch.no_grad():
        return bt.pairwise_distances(X, Y, cost, **kw).detach().to("cpu", torch.float64)


def margins(X, Y, cost):
    """The rounding margins the engine subtracts from a bound before pruning."""
    Y = X if Y is None else Y
    codes = [bt.ops.FlatTable(Z, "Z").flat_labels(cost, "error") for Z in (X, Y)]
    costs = SymbolCosts(cost, codes)
    m = torch.tensor([len(x) for x in X], dtype=torch.float64)
    n = torch.tensor([len(y) for y in Y], dtype=torch.float64)
    return costs.margin(m[:, None], n[None, :])


def reference_knn(D, k, same):
    D = D.clone()
    if same:
        D.fill_diagonal_(math.inf)
    order = torch.argsort(D, dim=1, stable=True)[:, :k]  # stable: equal distances by index
    return D.gather(1, order), order


def reference_radius(D, radius, same):
    mask = D <= radius
    if same:
        mask.fill_diagonal_(False)
    r, c = torch.nonzero(mask, as_tuple=True)  # row-major: sorted by row, then column
    return r, c, D[r, c]


# ---------------------------------------------------------------------------
# Bounds against exact distances
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", COSTS)
@pytest.mark.parametrize("objects", ["trees", "sequences"])
def test_bounds_never_cross_the_distance(kind, objects):
    rng = np.random.default_rng(COSTS.index(kind) + (0 if objects == "trees" else 100))
    cost = make_cost(kind, rng)
    if objects == "trees":
        X = adversarial_trees(rng)
    else:
        X = random_sequences(rng, 30) + [[], ["a"], list("aaaa"), list("abcde")]
    D = exact_matrix(X, None, cost)
    M = margins(X, None, cost)
    L = label_lower_bound(X, cost=cost)
    U = mapping_upper_bound(X, cost=cost)
    # what the engine prunes with: bound - margin never above the kernel's distance
    assert (L - M <= D).all()
    assert (U + M >= D).all()
    # the raw bounds hold up to rounding
    scale = 1e-9 if cost.dtype == torch.float64 else 1e-4
    assert (L <= D + scale * (1 + D.abs())).all()
    assert (U >= D - scale * (1 + D.abs())).all()
    if objects == "trees":
        for order in ("pre", "post", "both"):
            T = traversal_lower_bound(X, cost=cost, order=order)
            assert (T - M <= D).all()
            assert (T <= D + scale * (1 + D.abs())).all()


def test_bounds_between_two_collections_and_against_negative_insertions():
    rng = np.random.default_rng(7)
    X, Y = random_trees(rng, 12), random_trees(rng, 9)
    s = len(ALPHABET) + 1
    m = rng.uniform(0.0, 1.0, size=(s, s))
    m[-1, :] = -0.75  # inserting is profitable: distances grow negative with |y|
    m[:, -1] = 2.0
    cost = MatrixCost(ALPHABET, m)
    D = exact_matrix(X, Y, cost)
    assert (D < 0).any()
    M = margins(X, Y, cost)
    assert (label_lower_bound(X, Y, cost) - M <= D).all()
    assert (traversal_lower_bound(X, Y, cost) - M <= D).all()
    assert (mapping_upper_bound(X, Y, cost) + M >= D).all()


def test_label_bound_orientations_share_their_products():
    """Both orientations from one set of products equal the separate blocks, and the swapped
    one is the transposed matrix of a collection against itself (integer asymmetric costs with
    negative entries: every value exact)."""
    rng = np.random.default_rng(11)
    X = random_trees(rng, 14)
    s = len(ALPHABET) + 1
    m = rng.integers(-1, 4, size=(s, s)).astype(np.float64)
    cost = MatrixCost(ALPHABET, m)
    label = SearchProblem(X, None, cost, symmetric=False).label
    rows = torch.arange(len(X))
    straight, swapped = label.both_orientations(rows)
    assert torch.equal(straight, label.block(rows))
    assert torch.equal(swapped, label.block(rows, swap=True))
    assert torch.equal(swapped, straight.T)
    assert not torch.equal(straight, straight.T)  # (asymmetric: the orientation matters)


def test_label_bound_swap_invariance():
    """A bound whose choices of potentials come in swapped pairs is the same in both
    orientations (the engine then skips the second): unit costs are; asymmetric costs are
    not; symmetric costs may be (their "half" choice need not be symmetric), and where they
    are the orientations agree; two different collections never are."""
    rng = np.random.default_rng(12)
    X = random_trees(rng, 14)
    s = len(ALPHABET) + 1
    m = rng.integers(-1, 4, size=(s, s)).astype(np.float64)
    rows = torch.arange(len(X))
    for cost, invariant in ((None, True), (MatrixCost(ALPHABET, m + m.T), None), (MatrixCost(ALPHABET, m), False)):
        label = SearchProblem(X, None, cost, symmetric=False).label
        assert invariant is None or label.swap_invariant == invariant
        straight, swapped = label.both_orientations(rows)
        if label.swap_invariant:
            assert torch.equal(straight, swapped)
        if invariant is False:
            assert not torch.equal(straight, swapped)
    assert not SearchProblem(X[:7], X[7:], None).label.swap_invariant
    # a symmetric table serves both orientations too (its label bound need not be the same
    # numbers in both): the search answers as the matrix does
    sym = MatrixCost(ALPHABET, m + m.T)
    assert SearchProblem(X, None, sym).costs.table_symmetric
    assert not SearchProblem(X, None, MatrixCost(ALPHABET, m)).costs.table_symmetric
    check_search(X, None, sym, rng, ks=[1, 5], radii=[0.0, 2.0], block_size=5)


def test_label_bound_is_histogram_intersection_under_unit_costs():
    rng = np.random.default_rng(3)
    X = random_trees(rng, 15) + [bt.Tree(*star_tree(7, "a"))]
    L = label_lower_bound(X)
    for i, x in enumerate(X):
        for j, y in enumerate(X):
            hx, hy = {}, {}
            for lab in x.labels:
                hx[lab] = hx.get(lab, 0) + 1
            for lab in y.labels:
                hy[lab] = hy.get(lab, 0) + 1
            common = sum(min(c, hy.get(a, 0)) for a, c in hx.items())
            assert L[i, j] == max(len(x), len(y)) - common
    assert torch.equal(L.diagonal(), torch.zeros(len(X), dtype=torch.float64))


def test_label_counts_equal_a_count_of_each_objects_labels():
    rng = np.random.default_rng(21)
    X = random_sequences(rng, 25, 12, alphabet=list("abc")) + [[], list("aaaa")]
    table = bt.ops.FlatTable(X, "X")
    counts = bt.ops.encoding.label_counts(table.flat_labels(bt.UnitCost(list("abc")), "error"), table.ptr)
    codes = table.flat_labels(bt.UnitCost(list("abc")), "error").tolist()
    for t, x in enumerate(X):
        start = int(table.ptr[t])
        seen = {}
        for n, label in enumerate(x):  # level: that label's nodes before it in x
            assert int(counts.level[start + n]) == seen.get(label, 0)
            seen[label] = seen.get(label, 0) + 1
        entries = range(int(counts.ptr[t]), int(counts.ptr[t + 1]))
        got = {codes[int(counts.first[e])]: int(counts.count[e]) for e in entries}
        assert len(got) == len(entries)
        assert got == {codes[start + x.index(label)]: c for label, c in seen.items()}
        for e in entries:  # the first node of its symbol in x
            n = int(counts.first[e]) - start
            assert x.index(x[n]) == n


@pytest.mark.parametrize("kind", ["unit", "euclidean", "float32"])
def test_label_bound_from_counts_equals_its_features_and_the_formula(monkeypatch, kind):
    """Few rows take the weighted intersections from the label counts, many rows from dense
    features (or Y's side sparse, for many features): all equal the bound's formula, max over the potentials of
    ``P(x) + Q(y) + sum_a w[a] min(h_x(a), h_y(a))`` summed here pair by pair."""
    rng = np.random.default_rng(23)
    cost = make_cost(kind, rng)
    X, Y = random_trees(rng, 9, 12), random_trees(rng, 14, 12) + [bt.Tree(*star_tree(7, "a"))]
    problem = SearchProblem(X, Y, cost)
    bound = problem.label
    rows, cols = torch.tensor([4, 0]), torch.tensor([1, 14, 3, 8])
    monkeypatch.setattr(label_bound_module, "_COUNT_FORM_RATIO", 1e9)
    counted = bound.block(rows, cols)
    monkeypatch.setattr(label_bound_module, "_COUNT_FORM_RATIO", 0.0)
    dense = bound.block(rows, cols)
    monkeypatch.setattr(label_bound_module, "_DENSE_FEATURES", 1)  # Y's side sparse
    monkeypatch.setattr(label_bound_module, "_COUNT_FORM_SPARSE_ROWS", len(rows))
    counted_sparse = bound.block(rows, cols)
    monkeypatch.setattr(label_bound_module, "_COUNT_FORM_SPARSE_ROWS", len(rows) - 1)
    sparse = bound.block(rows, cols)
    lx, ly = problem._label_codes
    want = torch.zeros(len(rows), len(cols), dtype=torch.float64)
    shared = torch.zeros(len(rows), len(cols), dtype=torch.float64)  # the intersections' part
    for i, r in enumerate(rows.tolist()):
        for j, c in enumerate(cols.tolist()):
            hx = np.bincount(lx[problem.x_table.ptr[r]:problem.x_table.ptr[r + 1]].numpy(), minlength=bound.costs.k)
            hy = np.bincount(ly[problem.y_table.ptr[c]:problem.y_table.ptr[c + 1]].numpy(), minlength=bound.costs.k)
            want[i, j] = max(float(hx @ p.numpy()) + float(hy @ q.numpy()) + float(np.minimum(hx, hy) @ w.numpy())
                             for p, q, w in bound.variants)
            shared[i, j] = min(float(np.minimum(hx, hy) @ w.numpy()) for _, _, w in bound.variants)
    assert int((shared < 0).sum()) >= 4  # (the intersections matter: entries share symbols)
    if kind == "unit":  # integers: every order of the sums gives the same numbers
        for got in (counted, dense, counted_sparse, sparse):
            assert torch.equal(got, want)
    else:  # (float32 costs: the bounds are float64 sums of their float64 values)
        for got in (counted, dense, counted_sparse, sparse):
            assert torch.allclose(got, want, rtol=0, atol=1e-12)


def test_traversal_bound_is_tight_where_the_tree_structure_does_not_matter():
    # a path and a star with the same preorder labels: SED(pre) = 0 but not postorder
    path = bt.Tree(*path_tree(4, list("abcd")))
    star = bt.Tree(*star_tree(4, list("abcd")))
    assert traversal_lower_bound([path], [star], order="pre")[0, 0] == 0
    post = traversal_lower_bound([path], [star], order="post")[0, 0]
    assert post > 0
    assert post <= exact_matrix([path], [star], None)[0, 0]


def test_postorder_labels():
    t = bt.Tree(["a", "b", "c", "d", "e"], [[1, 4], [2, 3], [], [], []])
    assert postorder_labels(t) == ["c", "d", "b", "e", "a"]
    assert postorder_labels(bt.Tree(*path_tree(3, list("xyz")))) == ["z", "y", "x"]
    assert postorder_labels(bt.Tree(["r"], [[]])) == ["r"]


def test_tree_postorder_labels_and_depths_against_a_recursive_walk():
    """Tree.postorder_labels and Tree.depths (cached on the tree, the same tuple each call)
    against a recursive walk of random trees; a pickled copy computes its own."""
    import pickle

    rng = np.random.default_rng(7)
    for tree in random_trees(rng, 30, max_nodes=25):
        post, depth = [], {}

        def walk(v, d):
            depth[v] = d
            for c in tree.children[v]:
                walk(c, d + 1)
            post.append(tree.labels[v])

        walk(0, 0)
        assert tree.postorder_labels() == tuple(post)
        assert tree.depths() == tuple(depth[v] for v in range(len(tree)))
        assert tree.postorder_labels() is tree.postorder_labels() and tree.depths() is tree.depths()
        copy = pickle.loads(pickle.dumps(tree))
        assert copy.postorder_labels() == tuple(post) and copy.depths() == tree.depths()


def test_traversal_bound_rejects_sequences():
    with pytest.raises(TypeError, match="trees"):
        traversal_lower_bound(["ab", "b"])
    with pytest.raises(ValueError, match="order"):
        traversal_lower_bound([bt.Tree(["a"], [[]])], order="in")


def test_bounds_read_costs_in_blocks_for_many_symbols(monkeypatch):
    """Alphabets whose symbols in use exceed the whole-table limit: the potentials are taken
    over blocks of rows (choices A and B: the half choice needs a second pass over the
    blocks), and many label features make the product sparse, with the whole table's result
    for those two choices."""
    rng = np.random.default_rng(11)
    X = random_sequences(rng, 14, alphabet=ALPHABET)
    cost = make_cost("signed", rng)
    all_three = label_lower_bound(X, cost=cost)
    potentials = label_bound_module._potentials
    with monkeypatch.context() as m:
        m.setattr(label_bound_module, "_potentials", lambda *a: potentials(*a)[:2])
        whole = label_lower_bound(X, cost=cost)
    assert bool((whole <= all_three).all()) and bool((whole < all_three).any())  # (H decides some here)
    up = mapping_upper_bound(X, cost=cost)
    monkeypatch.setattr(label_bound_module, "_DENSE_FEATURES", 1)  # the sparse product too
    monkeypatch.setattr(symbol_costs_module, "_TABLE_SYMBOLS", 3)
    monkeypatch.setattr(symbol_costs_module, "_ROW_BLOCK", 2)
    monkeypatch.setattr(bt.costs.base, "table_of", lambda c: None)
    monkeypatch.setattr(symbol_costs_module, "table_of", lambda c: None)
    blocked = label_lower_bound(X, cost=cost)
    assert torch.allclose(blocked, whole, rtol=0, atol=1e-12)
    assert torch.allclose(mapping_upper_bound(X, cost=cost), up, rtol=0, atol=1e-12)


@pytest.mark.parametrize("bounds", [("label", "traversal", "upper"), ("upper",), ()],
                         ids=["all", "upper-only", "none"])
def test_costs_read_in_blocks_must_be_finite(monkeypatch, bounds):
    """A cost module without a whole table whose only non-finite cost lies between two
    symbols (not a deletion, insertion or the diagonal): the largest cost, taken in the label
    bound's pass over the blocks or in a pass of its own, or the kernels' own check, names it."""
    cost = MatrixCost(ALPHABET, np.ones((len(ALPHABET) + 1,) * 2) - np.eye(len(ALPHABET) + 1))
    cost.matrix[1, 3] = math.inf  # (after the constructor's own check)
    monkeypatch.setattr(symbol_costs_module, "_TABLE_SYMBOLS", 3)
    monkeypatch.setattr(symbol_costs_module, "_ROW_BLOCK", 2)
    monkeypatch.setattr(symbol_costs_module, "table_of", lambda c: None)
    X = ["abcd", "bdd", "ea", "cc"]
    with pytest.raises(ValueError, match="NaN or inf"):
        kneighbors(X, k=2, cost=cost, bounds=bounds)
    with pytest.raises(ValueError, match="NaN or inf"):
        radius_neighbors(X, radius=1.0, cost=cost, bounds=bounds)


def test_queries_read_only_their_own_symbols_cost_rows(monkeypatch):
    """X against another Y reads the costs of X's symbols' rows only (a few queries against a
    vocabulary): the label bound's potentials and the largest cost (the rounding margin's) from
    those rows and the gap's, the same bounds as a pass over every row, the matrix's answers."""
    monkeypatch.setattr(symbol_costs_module, "_TABLE_SYMBOLS", 3)
    monkeypatch.setattr(symbol_costs_module, "_ROW_BLOCK", 2)
    monkeypatch.setattr(symbol_costs_module, "table_of", lambda c: None)
    rng = np.random.default_rng(31)
    alphabet = [f"w{i}" for i in range(12)]
    m = rng.uniform(0.1, 1.0, size=(len(alphabet) + 1,) * 2)
    np.fill_diagonal(m, 0.0)
    m[9, 10] = 50.0  # the largest cost, between two symbols that X does not hold
    cost = MatrixCost(alphabet, m)
    X = [random_sequence(6, alphabet[:4], rng) for _ in range(3)]
    Y = [random_sequence(int(rng.integers(0, 9)), alphabet, rng) for _ in range(30)]
    read = []
    block_of = symbol_costs_module.block_of
    monkeypatch.setattr(symbol_costs_module, "block_of", lambda c, r, cols: read.append(r) or block_of(c, r, cols))
    problem = SearchProblem(X, Y, cost)
    x_symbols = set(problem.x_table.flat_labels(cost, "error").tolist())
    used = problem.costs.used.tolist()
    rows_x = [a for a in used if a in x_symbols]
    want = max(float(np.abs(m[rows_x][:, used]).max()), float(np.abs(m[-1, used]).max()))
    assert problem.costs.maxabs == want < 50.0
    lx, ly = problem._label_codes
    every_row = label_bound_module.LabelBound(problem.costs, lx, problem.x_table.ptr, ly, problem.y_table.ptr)
    read.clear()
    bound = problem.label.block(torch.arange(len(X)))
    assert read and {a for r in read for a in r.tolist()} <= x_symbols
    assert torch.equal(bound, every_row.block(torch.arange(len(X))))
    check_search(X, Y, cost, rng, ks=[1, 4], radii=[0.5, 2.0])


def test_a_small_query_under_tiled_costs_makes_one_exact_call(monkeypatch):
    """Where every exact call builds every tile's costs (no whole table, symbols beyond one
    local table), a k-NN too small to probe goes to one covered call: not rounds (several
    calls) nor the matrix's tiles (a call each); the matrix's answer."""
    monkeypatch.setattr(symbol_costs_module, "_TABLE_SYMBOLS", 3)
    monkeypatch.setattr(symbol_costs_module, "table_of", lambda c: None)
    monkeypatch.setattr(bt.ops.limits, "LOCAL_TABLE_CELLS", 6 * 6)  # runs of at most 5 symbols
    rng = np.random.default_rng(41)
    alphabet = [f"w{i}" for i in range(12)]
    cost = make_cost("euclidean", rng, alphabet)
    X = [random_sequence(5, alphabet, rng)]
    Y = [random_sequence(int(rng.integers(1, 7)), alphabet, rng) for _ in range(40)]
    problem = SearchProblem(X, Y, cost)
    assert problem.calls_build_every_tile
    calls = []
    real = problem_module.table_pair_distances
    monkeypatch.setattr(problem_module, "table_pair_distances", lambda *a, **kw: calls.append(len(a[2])) or real(*a, **kw))
    d, i, stats = kneighbors(X, Y, k=3, cost=cost, return_stats=True)
    assert calls == [len(Y)] and stats["exact_computed"] == len(Y)
    monkeypatch.setattr(problem_module, "table_pair_distances", real)
    rd, ri = reference_knn(exact_matrix(X, Y, cost), 3, False)  # (the same tiles: the same bits)
    assert torch.equal(d, rd) and torch.equal(i, ri)


@pytest.mark.parametrize("whole_table", [True, False])
def test_unit_potentials_equal_the_general_ones(monkeypatch, whole_table):
    """Under UnitCost the label bound's potentials come from per-side minima in O(k), not from
    the table's rows: the general computation's bits, for sides with no symbol, one symbol,
    the same symbol, overlapping and disjoint symbols (the gap included or not)."""
    rng = np.random.default_rng(12)
    alphabet = [f"s{i}" for i in range(9)]
    cost = bt.UnitCost(alphabet)
    if not whole_table:  # rows in blocks of 2 (a large alphabet)
        monkeypatch.setattr(symbol_costs_module, "_TABLE_SYMBOLS", 3)
        monkeypatch.setattr(symbol_costs_module, "_ROW_BLOCK", 2)
        monkeypatch.setattr(symbol_costs_module, "table_of", lambda c: None)
    costs = SymbolCosts(cost, [torch.arange(len(alphabet))])
    assert costs.unit and costs.exact and costs.maxabs == 1.0 and (costs.table is None) != whole_table
    k = costs.k
    masks = [torch.zeros(k, dtype=torch.bool), torch.ones(k, dtype=torch.bool)]
    for one in (0, 3, k - 1):
        m = torch.zeros(k, dtype=torch.bool)
        m[one] = True
        masks.append(m)
    masks += [torch.as_tensor(rng.random(k) < 0.4) for _ in range(6)]
    for in_x in masks:
        for in_y in masks:
            fast = label_bound_module._potentials(costs, in_x, in_y)
            costs.unit = False
            general = label_bound_module._potentials(costs, in_x, in_y)
            costs.unit = True
            for f, g in zip(fast, general):
                for a, b in zip(f, g):
                    assert torch.equal(a, b), (in_x, in_y)


def test_unit_costs_of_a_large_alphabet_search_with_exact_arithmetic(monkeypatch):
    """UnitCost without a whole table (a large alphabet) is still exact arithmetic (its costs are
    the kernels' 0s and 1s): ties at the k-th distance are decided by index, as with a table."""
    rng = np.random.default_rng(13)
    X = random_trees(rng, 25, max_nodes=8, alphabet=list("abcdefg")) + [bt.Tree(*star_tree(4, "a"))] * 2
    monkeypatch.setattr(symbol_costs_module, "_TABLE_SYMBOLS", 3)
    monkeypatch.setattr(symbol_costs_module, "table_of", lambda c: None)
    cost = bt.UnitCost(list("abcdefg"))
    problem = SearchProblem(X, None, cost)
    assert problem.costs.table is None and problem.exact_arithmetic
    check_search(X, None, cost, rng)


# ---------------------------------------------------------------------------
# kneighbors and radius_neighbors against the full matrix
# ---------------------------------------------------------------------------


def check_search(X, Y, cost, rng, *, ks=None, radii=None, **kw):
    """kneighbors and radius_neighbors equal sorting / thresholding the full matrix."""
    same = Y is None
    D = exact_matrix(X, Y, cost)
    ny = D.shape[1]
    cands = ny - 1 if same else ny
    if ks is None:
        ks = sorted({1, cands, int(rng.integers(1, cands + 1))}) if cands >= 1 else []
    for k in ks:
        d, i, stats = kneighbors(X, Y, k=k, cost=cost, return_stats=True, **kw)
        rd, ri = reference_knn(D, k, same)
        assert d.dtype == torch.float64 and i.dtype == torch.int64
        assert torch.equal(i, ri), f"k={k}"
        assert torch.equal(d, rd), f"k={k}"
        assert stats["pairs"] == len(X) * cands
        assert stats["pairs"] == stats["decided_by_label"] + stats["decided_by_traversal"] + stats["exact"]
        assert stats["exact_computed"] <= stats["exact"]
    off = D[~torch.eye(*D.shape, dtype=torch.bool)] if same else D.reshape(-1)
    if radii is None:
        radii = [-math.inf, math.inf]
        if off.numel():
            radii += [float(off.min()) - 1e-3, float(torch.quantile(off, 0.3)), float(off.max())]
    for radius in radii:
        r, c, v, stats = radius_neighbors(X, Y, radius=radius, cost=cost, return_stats=True, **kw)
        rr, rc, rv = reference_radius(D, radius, same)
        assert torch.equal(r, rr) and torch.equal(c, rc) and torch.equal(v, rv), f"radius={radius}"
        assert stats["pairs"] == stats["decided_by_label"] + stats["decided_by_traversal"] + stats["exact"]


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("max_pairs", [5, 37, 400, 10**6])
def test_all_pairs_blocks_merge_to_the_full_matrix(symmetric, max_pairs):
    """knn_all_pairs over blocks of every size, from a few pairs to the whole matrix in one: each
    block's entries, their partners (symmetric: those whose row lies in the block go into its
    own rectangle, the others are merged by the transpose) and the dropped diagonal give the
    full matrix's answer, ties by index included (strings over two letters tie often)."""
    from bedl_torch.search.tiles import knn_all_pairs
    rng = np.random.default_rng(max_pairs)
    X = ["".join(rng.choice(list("ab"), size=int(rng.integers(0, 6)))) for _ in range(23)] + ["ab", "ab"]
    problem = SearchProblem(X, None, None, symmetric=symmetric)
    assert problem.symmetric == symmetric
    D = exact_matrix(X, None, None)
    for k in (1, 3, len(X) - 1):
        d, i, stats = knn_all_pairs(problem, k, max_pairs=max_pairs)
        rd, ri = reference_knn(D, k, True)
        assert torch.equal(i, ri) and torch.equal(d, rd), k
        assert stats["exact"] == stats["pairs"] == len(X) * (len(X) - 1)
        assert stats["exact_computed"] == (len(X) * (len(X) - 1) // (2 if symmetric else 1))


@pytest.mark.parametrize("kind", COSTS)
@pytest.mark.parametrize("same", [True, False])
def test_search_equals_the_full_matrix_on_trees(kind, same):
    rng = np.random.default_rng(20 + COSTS.index(kind) + (50 if same else 0))
    cost = make_cost(kind, rng)
    X = adversarial_trees(rng)[:24] + random_trees(rng, 6)
    Y = None if same else random_trees(rng, 17) + [bt.Tree(*star_tree(5, list("abcde")))]
    check_search(X, Y, cost, rng, block_size=int(rng.integers(3, 40)))


@pytest.mark.parametrize("kind", ("unit", "euclidean", "signed", "asymmetric"))
@pytest.mark.parametrize("same", [True, False])
def test_search_equals_the_full_matrix_on_sequences(kind, same):
    rng = np.random.default_rng(40 + len(kind) + (50 if same else 0))
    cost = make_cost(kind, rng)
    X = random_sequences(rng, 25) + [[], [], ["a"]]
    Y = None if same else random_sequences(rng, 12) + [[]]
    check_search(X, Y, cost, rng, block_size=int(rng.integers(2, 30)))


def test_ties_duplicates_and_zero_distances():
    """Many identical objects (distance 0 among them) and integer costs: the lists break ties
    by index, exactly as a stable sort of the matrix rows."""
    rng = np.random.default_rng(5)
    base = random_trees(rng, 4, max_nodes=5, alphabet="ab")
    X = [base[int(i)] for i in rng.integers(0, 4, size=30)]
    for cost in (None, make_cost("integer", rng, alphabet=["a", "b"])):
        check_search(X, None, cost, rng, ks=[1, 3, 7, 29], block_size=8)
        check_search(X, X[:9], cost, rng, ks=[1, 5, 9], block_size=4)
    D = exact_matrix(X, None, None)
    d, i = kneighbors(X, k=5)
    assert (d[:, 0] == 0).all()  # every object has a duplicate
    assert torch.equal(i, reference_knn(D, 5, True)[1])


def test_every_bound_choice_gives_the_same_answer():
    rng = np.random.default_rng(9)
    X = random_trees(rng, 25)
    cost = make_cost("euclidean", rng)
    D = exact_matrix(X, None, cost)
    want = reference_knn(D, 4, True)
    for bounds in [(), ("label",), ("traversal",), ("upper",), ("label", "traversal", "upper")]:
        d, i = kneighbors(X, k=4, cost=cost, bounds=bounds)
        assert torch.equal(d, want[0]) and torch.equal(i, want[1])
        r, c, v = radius_neighbors(X, radius=float(D.median()), cost=cost, bounds=bounds)
        assert torch.equal(torch.stack([r, c]), torch.stack(reference_radius(D, float(D.median()), True)[:2]))


def test_asymmetric_cost_forced_symmetric_matches_the_mirrored_matrix():
    """symmetric=True with an asymmetric cost: pairwise_distances computes i <= j and
    mirrors; the search gives the same answer (bounds taken for the pair it computes)."""
    rng = np.random.default_rng(13)
    X = random_trees(rng, 20)
    cost = make_cost("asymmetric", rng)
    D = exact_matrix(X, None, cost, symmetric=True)
    assert torch.equal(D, D.T)
    d, i = kneighbors(X, k=3, cost=cost, symmetric=True, block_size=7)
    want = reference_knn(D, 3, True)
    assert torch.equal(d, want[0]) and torch.equal(i, want[1])
    r, c, v = radius_neighbors(X, radius=float(D.median()), cost=cost, symmetric=True, block_size=6)
    rr, rc, rv = reference_radius(D, float(D.median()), True)
    assert torch.equal(r, rr) and torch.equal(c, rc) and torch.equal(v, rv)


def test_many_symbols_without_a_whole_table():
    """More symbols in use than one local table holds: the kernels tile, the bounds read the
    costs in blocks; unit costs are exact in every path, so the answers equal the matrix's."""
    rng = np.random.default_rng(17)
    words = [f"w{i}" for i in range(2300)]
    X = [list(rng.choice(words, size=int(rng.integers(0, 120)))) for _ in range(45)]
    cost = bt.UnitCost(words)
    assert bt.costs.table_of(cost) is None
    check_search(X, None, cost, rng, ks=[3], radii=[100.0])


def test_agrees_with_distributed_kneighbors():
    from bedl_torch.distributed import kneighbors as tiled_kneighbors
    rng = np.random.default_rng(23)
    X = random_trees(rng, 30)
    cost = make_cost("euclidean", rng)
    want = tiled_kneighbors(X, k=6, cost=cost, tile_size=8)
    got = kneighbors(X, k=6, cost=cost)
    assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1])


def test_blocks_merge_as_the_whole():
    """The per-block functions a distributed caller would run: blocks of rows (in any order,
    without handing exact values on) give the same rows and additive stats."""
    rng = np.random.default_rng(29)
    X = random_trees(rng, 22)
    problem = SearchProblem(X, None, None)
    D = exact_matrix(X, None, None)
    want = reference_knn(D, 4, True)
    parts = []
    for r0, r1 in [(15, 22), (0, 6), (6, 15)]:
        d, i, _, stats = knn_block(problem, r0, r1, 4)
        assert torch.equal(d, want[0][r0:r1]) and torch.equal(i, want[1][r0:r1])
        parts.append(stats)
    total = merge_stats(*parts)
    assert total["pairs"] == 22 * 21
    rows = [radius_block(problem, r0, r1, 3.0) for r0, r1 in [(0, 11), (11, 22)]]
    r = torch.cat([p[0] for p in rows])
    c = torch.cat([p[1] for p in rows])
    order = torch.argsort(r * 22 + c)
    rr, rc, _ = reference_radius(D, 3.0, True)
    assert torch.equal(r[order], rr) and torch.equal(c[order], rc)


@pytest.mark.parametrize("pool", [1, 9, 1 << 22])
def test_radius_blocks_pool_open_entries(monkeypatch, pool):
    """Open entries of consecutive blocks are verified together, in pools of at most ``pool``
    entries (a pool is verified once it reaches that): the same answer and stats for any pool
    size and any order of blocks, and every row reported finished once."""
    import bedl_torch.search.radius as radius_module

    monkeypatch.setattr(radius_module, "RADIUS_POOL_ENTRIES", pool)
    rng = np.random.default_rng(31)
    X = random_trees(rng, 26)
    for Y, same in ((None, True), (X[:9], False)):
        problem = SearchProblem(X, Y, None)
        D = exact_matrix(X, Y, None)
        rr, rc, rv = reference_radius(D, 3.0, same)
        finished = []
        r, c, v, stats = radius_module.radius_blocks(problem, [18, 0, 24, 6, 12], 3.0, 6,
                                                     on_rows=finished.append)
        assert torch.equal(r, rr) and torch.equal(c, rc) and torch.equal(v, rv)
        assert sum(finished) == 26 and (pool > 1 << 20) == (len(finished) == 1)
        total = stats["decided_by_label"] + stats["decided_by_traversal"] + stats["exact"]
        assert stats["pairs"] == total == (26 * 25 if same else 26 * 9)
        # a symmetric problem computes a pair once for two entries
        assert stats["exact"] == (2 if same else 1) * stats["exact_computed"] > 0


def test_empty_and_tiny_inputs():
    d, i = kneighbors([], ["ab"], k=1)
    assert d.shape == (0, 1) and i.shape == (0, 1)
    assert d.dtype == torch.float64 and i.dtype == torch.int64
    r, c, v = radius_neighbors([], None, radius=1.0)
    assert len(r) == len(c) == len(v) == 0 and v.dtype == torch.float64
    r, c, v = radius_neighbors(["a"], None, radius=math.inf)
    assert len(r) == 0
    d, i = kneighbors(["a", "b"], k=1)
    assert i.tolist() == [[1], [0]] and d.tolist() == [[1.0], [1.0]]
    r, c, v = radius_neighbors(["", "", "x"], radius=0.0)
    assert r.tolist() == [0, 1] and c.tolist() == [1, 0] and v.tolist() == [0.0, 0.0]


def test_public_exports():
    assert bt.kneighbors is kneighbors and bt.radius_neighbors is radius_neighbors
    assert "kneighbors" in bt.__all__ and "radius_neighbors" in bt.__all__


# ---------------------------------------------------------------------------
# Input errors
# ---------------------------------------------------------------------------


def test_costs_the_matrix_rejects_are_rejected_even_where_no_pair_reads_them():
    """A whole symbol table is checked as the matrix checks it (every symbol's costs finite,
    the right shape, the kernels' overflow rule for the longest pair), also where the objects
    use none of the bad symbols, the bounds decide every pair or no pair is computed at all (one
    object): the search raises the matrix's ValueError."""
    # (z at 1e200: its squared distances overflow, so the table holds inf)
    bad = bt.EuclideanCost(["a", "b", "z"], torch.tensor([[1.0], [2.0], [1e200]], dtype=torch.float64))

    class WrongShape(bt.UnitCost):
        def symbol_table(self):
            return torch.zeros(2, 2, dtype=self.dtype)

    huge = MatrixCost(["a", "b"], np.full((3, 3), 1e308))  # 2 (|x| + |y|) max|c| overflows float64
    for cost, message in ((bad, "must be finite"), (WrongShape(["a", "b"]), r"must return a \(3, 3\)"),
                          (huge, "too large")):
        for X in (["ab", "b", "ba"], ["ab"]):
            with pytest.raises(ValueError, match=message):
                bt.pairwise_distances(X, cost=cost)
            with pytest.raises(ValueError, match=message):
                radius_neighbors(X, radius=1.0, cost=cost)
            with pytest.raises(ValueError, match=message):  # (the label bound would decide every pair)
                radius_neighbors(X, radius=-1.0, cost=cost, bounds=("label",))
            with pytest.raises(ValueError, match=message):
                bt.NeighborIndex(X, cost)
        with pytest.raises(ValueError, match=message):
            kneighbors(["ab", "b", "ba"], k=1, cost=cost)


def test_input_errors():
    X = ["ab", "b", "ba"]
    with pytest.raises(TypeError, match="k must be an int"):
        kneighbors(X, k=1.0)
    with pytest.raises(TypeError, match="k must be an int"):
        kneighbors(X, k=True)
    with pytest.raises(ValueError, match="between 1 and 2"):
        kneighbors(X, k=3)
    with pytest.raises(ValueError, match="between 1 and 1"):
        kneighbors(X, ["a"], k=2)
    with pytest.raises(ValueError, match="between 1 and 2"):
        kneighbors(X, k=0)
    with pytest.raises(ValueError, match="X has 1 object"):
        kneighbors(X[:1], k=1)
    with pytest.raises(ValueError, match="X has 0 object"):
        kneighbors([], k=1)
    with pytest.raises(ValueError, match="Y is empty"):
        kneighbors(X, [], k=1)
    with pytest.raises(ValueError, match="NaN"):
        radius_neighbors(X, radius=float("nan"))
    with pytest.raises(TypeError, match="radius"):
        radius_neighbors(X, radius="1")
    with pytest.raises(TypeError, match="both hold trees or both sequences"):
        kneighbors(X, [bt.Tree(["a"], [[]])], k=1)
    with pytest.raises(TypeError, match="mix trees and sequences"):
        radius_neighbors(X + [bt.Tree(["a"], [[]])], radius=1.0)
    with pytest.raises(ValueError, match="mode"):
        kneighbors(X, k=1, mode="pseudo")
    with pytest.raises(ValueError, match="block_size"):
        kneighbors(X, k=1, block_size=0)
    with pytest.raises(ValueError, match="symmetric=True needs Y=None"):
        radius_neighbors(X, X, radius=1.0, symmetric=True)
    with pytest.raises(ValueError, match="unknown bounds"):
        kneighbors(X, k=1, bounds=("label", "pivot"))
    with pytest.raises(TypeError, match="bounds must be a sequence of bound names"):
        kneighbors(X, k=1, bounds="label")  # not split into ('l', 'a', ...)
    # a single object or a non-collection is not read as a collection of its elements
    with pytest.raises(TypeError, match="not a single str"):
        kneighbors("abc", k=1)
    with pytest.raises(TypeError, match="Y must be a list .* not a single Tree"):
        radius_neighbors(X, bt.Tree(["a"], [[]]), radius=1.0)
    with pytest.raises(TypeError, match="X must be a list of trees or of sequences, got int"):
        kneighbors(5, k=1)
    with pytest.raises(TypeError, match="got int at index 1"):
        radius_neighbors(["a", 3], radius=1.0)
    with pytest.raises(TypeError, match="not a single str"):
        bt.pairwise_distances("abc")
    with pytest.raises(TypeError, match="not a single str"):
        label_lower_bound("abc")
    with pytest.raises(TypeError):
        kneighbors(X, k=1, cost="unit")
    with pytest.raises(ValueError, match="missing from the cost's alphabet"):
        kneighbors(X, k=1, cost=bt.UnitCost(["a"]))
    with pytest.raises(ValueError, match="chunk_size"):
        radius_neighbors(X, radius=1.0, chunk_size=0)
    # radius may be negative (costs may be) or a 0-d tensor
    assert len(radius_neighbors(X, radius=-1.0)[0]) == 0
    assert len(radius_neighbors(X, radius=torch.tensor(1.0))[0]) == 4


def test_tiled_costs_give_the_matrix_bits(monkeypatch):
    """A cost module without a whole table whose symbols in use exceed one local table: the
    ops build cost blocks per tile of objects, and the search makes every exact call use every
    object (cheap extra pairs) so that its tiles, blocks and bits are the matrix's. The local
    table limit is lowered here so that a few hundred symbols take that path."""
    monkeypatch.setattr(bt.ops.limits, "LOCAL_TABLE_CELLS", 120 * 120)
    monkeypatch.setattr(symbol_costs_module, "_TABLE_SYMBOLS", 120)
    rng = np.random.default_rng(31)
    words = [f"w{i}" for i in range(400)]
    cost = MatrixCost(words, rng.uniform(-0.2, 1.0, size=(401, 401)))  # no whole table
    X = [list(rng.choice(words, size=int(rng.integers(0, 25)))) for _ in range(30)]
    problem = SearchProblem(X, None, cost)
    assert problem.costs.table is None and problem.calls_build_every_tile
    check_search(X, None, cost, rng, ks=[3], radii=[3.0], block_size=12)
    check_search(X[:12], X[12:], cost, rng, ks=[2], radii=[3.0], block_size=5)
    # no lower bound: the matrix's own tiles, one call each (no covering pairs)
    calls = _spy_exact_calls(monkeypatch)
    check_search(X, None, cost, rng, ks=[1, 4, 29], radii=[], bounds=())
    check_search(X[:12], X[12:], cost, rng, ks=[2], radii=[], bounds=())
    assert _pairs_of(calls, "exact") == [] and len(_pairs_of(calls, "matrix")) > 3
    calls.clear()
    # a symmetric module: the label bound in one orientation (its costs are not the kernels'
    # numbers, so the margin allows for their rounding either way)
    m = rng.uniform(-0.2, 1.0, size=(401, 401))
    sym = MatrixCost(words, m + m.T)
    assert sym.symmetric and not SearchProblem(X, None, sym).costs.exact
    check_search(X, None, sym, rng, ks=[1, 3], radii=[1.0, 3.0], block_size=12)
    check_search(X, None, sym, rng, ks=[2], radii=[], bounds=())  # the upper triangle's tiles
    assert len(_pairs_of(calls, "matrix")) > 3


class IntegerTable(bt.SymbolCost):
    """A fixed integer cost table with a whole symbol table (the kernels' numbers): bounds and
    distances are exact, so the search uses ties by index to prune."""

    def __init__(self, alphabet, matrix):
        super().__init__(alphabet)
        self.register_buffer("matrix", torch.as_tensor(matrix, dtype=torch.float64))

    def symbol_table(self):
        return self.matrix

    def forward(self, x_idx, y_idx):
        return self.matrix[x_idx[:, :, None], y_idx[:, None, :]]


@pytest.mark.parametrize("low", [0, -1])
def test_exact_arithmetic_ties_by_index(low):
    """Integer costs read from a whole table (unit costs, or any integer table, negative
    entries included): the margin is 0, and an entry whose bound equals a row's k-th distance
    is pruned when its index comes after the k-th's. Many duplicates make such ties common."""
    rng = np.random.default_rng(41 + low)
    s = len(ALPHABET) + 1
    cost = IntegerTable(ALPHABET, rng.integers(low, 3, size=(s, s)))
    base = random_trees(rng, 6, max_nodes=6)
    X = [base[int(i)] for i in rng.integers(0, 6, size=28)] + random_trees(rng, 6)
    problem = SearchProblem(X, None, cost)
    assert problem.exact_arithmetic
    assert not problem.margin(torch.arange(3), torch.arange(3)).any()
    assert SearchProblem(X, None, None).exact_arithmetic  # unit costs
    assert not SearchProblem(X, None, make_cost("euclidean", rng)).exact_arithmetic
    assert not SearchProblem(X, None, make_cost("integer", rng)).exact_arithmetic  # no whole table
    check_search(X, None, cost, rng, ks=[1, 4, 9], radii=[0.0, 3.0], block_size=13)
    check_search(X, None, None, rng, ks=[2, 7], radii=[2.0], block_size=9)


def _spy_exact_calls(monkeypatch):
    """Record the pairs of every exact call of the search: ``("exact", n)`` for the rounds' and
    blocks' calls, ``("matrix", n)`` for the blocks of the matrix's tiles (pairs or dense) and
    range search's length windows."""
    from bedl_torch.search import problem as problem_module

    calls = []
    cls = problem_module.SearchProblem
    exact, block_values, block_matrix = cls.exact, cls.block_values, cls.block_matrix
    monkeypatch.setattr(cls, "exact", lambda self, a, b, **kw: calls.append(("exact", len(a)))
                        or exact(self, a, b, **kw))
    monkeypatch.setattr(cls, "block_values", lambda self, a, b: calls.append(("matrix", len(a)))
                        or block_values(self, a, b))

    def dense(self, block):  # (a block of rows as one matrix: its pairs are j >= i where triangle)
        M = block_matrix(self, block)
        if M is not None:
            h, w = M.shape
            calls.append(("matrix", h * w - (h * (h - 1) // 2 if block.triangle else 0)))
        return M

    monkeypatch.setattr(cls, "block_matrix", dense)
    window_matrix = cls.window_matrix

    def window(self, w):  # (a range search's length window: its pairs j >= i where triangle)
        M = window_matrix(self, w)
        h, width = M.shape
        calls.append(("matrix", h * width - (h * (h - 1) // 2 if w.triangle else 0)))
        return M

    monkeypatch.setattr(cls, "window_matrix", window)
    return calls


def _pairs_of(calls, kind):
    return [n for what, n in calls if what == kind]


@pytest.mark.parametrize("bounds", [(), ("upper",)], ids=["none", "upper-only"])
def test_knn_without_a_lower_bound_computes_the_matrix_once(monkeypatch, bounds):
    """Without the label and traversal bounds nothing can be pruned: kneighbors computes the
    matrix's blocks (each kernel pair once, the diagonal kept in the calls), not round by
    round; the blocks of the distributed engine compute each block in one exact call, pairs
    handed on not recomputed."""
    calls = _spy_exact_calls(monkeypatch)
    rng = np.random.default_rng(44)
    X = random_trees(rng, 16, max_nodes=8)
    D = exact_matrix(X, None, None)
    want = reference_knn(D, 3, True)
    d, i, stats = kneighbors(X, k=3, bounds=bounds, block_size=6, return_stats=True)
    assert torch.equal(d, want[0]) and torch.equal(i, want[1])
    assert _pairs_of(calls, "exact") == [] and sum(_pairs_of(calls, "matrix")) == 16 * 17 // 2
    assert stats["exact_computed"] == 16 * 15 // 2 and stats["exact"] == stats["pairs"] == 16 * 15
    calls.clear()
    rows, d, i, stats = knn_blocks(SearchProblem(X, None, None, bounds=bounds), [0, 6, 12], 3, 6)
    assert torch.equal(d, want[0]) and torch.equal(i, want[1])
    assert len(_pairs_of(calls, "exact")) == 3  # blocks of 6, 6 and 4 rows
    assert stats["exact_computed"] == sum(_pairs_of(calls, "exact")) == 16 * 15 // 2


@pytest.mark.parametrize("bounds", [(), ("upper",)], ids=["none", "upper-only"])
@pytest.mark.parametrize("same", [True, False])
def test_radius_without_a_lower_bound_thresholds_the_matrix(monkeypatch, bounds, same):
    """Without a lower bound, radius_neighbors thresholds the matrix's blocks (each kernel pair
    once), not block by block of rows with one exact call each; at every radius (none within,
    ties at the radius, negative, every pair) the answer and stats are the matrix's. With every
    bound on, so does radius inf (no bound exceeds it), and a finite radius goes by the bounds."""
    calls = _spy_exact_calls(monkeypatch)
    rng = np.random.default_rng(48 + same)
    X = random_trees(rng, 16, max_nodes=8)
    Y = None if same else random_trees(rng, 9, max_nodes=8)
    D = exact_matrix(X, Y, None)
    ny = 16 if same else 9
    off = D[~torch.eye(16, dtype=torch.bool)] if same else D.flatten()
    for radius in (float(off.min()) - 1, float(off.min()), float(torch.median(off)), -3.0, math.inf):
        calls.clear()
        r, c, v, stats = radius_neighbors(X, Y, radius=radius, bounds=bounds, block_size=5,
                                          return_stats=True)
        rr, rc, rv = reference_radius(D, radius, same)
        assert torch.equal(r, rr) and torch.equal(c, rc) and torch.equal(v, rv), radius
        assert _pairs_of(calls, "exact") == []
        assert sum(_pairs_of(calls, "matrix")) == (16 * 17 // 2 if same else 16 * ny)
        entries = 16 * 15 if same else 16 * ny
        assert stats["exact"] == stats["pairs"] == entries
        assert stats["exact_computed"] == (entries // 2 if same else entries)
    if bounds == ():  # every bound on: at radius inf, which no bound can exceed, the matrix's blocks
        for radius in (math.inf, float(D.max()) - 1):
            calls.clear()
            r, c, v, stats = radius_neighbors(X, Y, radius=radius, block_size=5, return_stats=True)
            assert all(torch.equal(a, b) for a, b in zip((r, c, v), reference_radius(D, radius, same)))
            every = radius == math.inf
            assert (_pairs_of(calls, "exact") == []) == every and (stats["traversal_computed"] == 0) == every


@pytest.mark.parametrize("case", ["symmetric", "asymmetric", "x-against-y"])
@pytest.mark.parametrize("max_pairs", [7, 60, 10**6])
def test_dense_unit_tiles_equal_the_pairs_tiles(monkeypatch, case, max_pairs, simd_lanes):
    """Unit-cost sequences on bit vectors take the matrix's blocks of rows as dense matrices
    (SearchProblem.block_matrix): k-NN and range search over all tiles, and over the tiles
    split in two parts (as ranks do), give the answers and stats of the blocks' pair lists
    (skipped where the fast paths, which gate the bit vectors, are off: ``simd_lanes``)."""
    from bedl_torch.search.merge import merge_nearest, sorted_entries
    from bedl_torch.search.tiles import knn_all_pairs, radius_all_pairs

    rng = np.random.default_rng(max_pairs)
    X = ["".join(rng.choice(list("abc"), size=int(rng.integers(0, 9)))) for _ in range(26)] + ["ab", "ab"]
    Y = None if case != "x-against-y" else ["".join(rng.choice(list("abc"), size=int(rng.integers(0, 9))))
                                            for _ in range(11)]
    problem = SearchProblem(X, Y, None, symmetric=False if case == "asymmetric" else None)
    assert problem.block_matrix(problem.matrix_blocks(max_pairs)[0]) is not None
    n_blocks = len(problem.matrix_blocks(max_pairs))
    halves = [set(range(p, n_blocks, 2)) for p in (0, 1)]

    def run():
        knn = knn_all_pairs(problem, 3, max_pairs=max_pairs)
        parts = [knn_all_pairs(problem, 3, h, max_pairs) for h in halves]
        joined = merge_nearest([q[:2] for q in parts], 3)
        radius = [radius_all_pairs(problem, r, max_pairs=max_pairs) for r in (0.0, 2.0, math.inf)]
        return knn, joined, [(*sorted_entries(*q[:3], problem.ny), q[3]) for q in radius]

    dense = run()
    monkeypatch.setattr(SearchProblem, "block_matrix", lambda self, block: None)
    problem.dense_unit = False  # (range search: the matrix's blocks of pairs, not length windows)
    pairs = run()
    assert all(torch.equal(a, b) for a, b in zip(dense[0][:2], pairs[0][:2])) and dense[0][2] == pairs[0][2]
    assert all(torch.equal(a, b) for a, b in zip(dense[1], pairs[1]))
    assert all(torch.equal(a, b) for a, b in zip(dense[1], dense[0][:2]))
    for radius, got, want in zip((0.0, 2.0, math.inf), dense[2], pairs[2]):
        assert all(torch.equal(a, b) for a, b in zip(got[:3], want[:3]))
        assert got[3]["pairs"] == want[3]["pairs"] == want[3]["exact"]
        assert got[3]["exact"] + got[3]["decided_by_label"] == got[3]["pairs"]
        if radius == math.inf:  # (the matrix's dense blocks)
            assert got[3] == want[3]
    D = exact_matrix(X, Y, None)
    want = reference_knn(D, 3, Y is None)
    assert torch.equal(dense[0][0], want[0]) and torch.equal(dense[0][1], want[1])


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("max_pairs", [5, 37, 400, 10**6])
def test_radius_all_pairs_blocks_give_the_full_matrix(symmetric, max_pairs):
    """radius_all_pairs over blocks of every size, its blocks' entries thresholded, mirrored
    where symmetric and the diagonal left out, gives the matrix's entries within the radius;
    the blocks split in two parts (as ranks do) give the same entries and stats."""
    from bedl_torch.search.merge import sorted_entries
    from bedl_torch.search.tiles import radius_all_pairs, radius_tiles
    rng = np.random.default_rng(max_pairs)
    X = ["".join(rng.choice(list("ab"), size=int(rng.integers(0, 6)))) for _ in range(23)] + ["ab", "ab"]
    D = exact_matrix(X, None, None)
    lengths = torch.tensor([len(s) for s in X])
    apart = (lengths[:, None] - lengths[None, :]).abs()
    for dense in (True, False):
        problem = SearchProblem(X, None, None, symmetric=symmetric)
        if not dense:
            problem.dense_unit = False  # (the matrix's blocks, as for any costs)
        for radius in (-1e300, -1.0, 0.0, 1.0, 2.5, 1e300, math.inf):
            r, c, v, stats = radius_all_pairs(problem, radius, max_pairs=max_pairs)
            got = sorted_entries(r, c, v, len(X))
            want = reference_radius(D, radius, True)
            assert all(torch.equal(a, b) for a, b in zip(got, want)), radius
            assert stats["pairs"] == len(X) * (len(X) - 1)
            assert stats["exact"] + stats["decided_by_label"] == stats["pairs"]
            # length windows (finite radii on bit vectors) decide entries of lengths further apart only
            windows = problem.dense_unit and math.isfinite(radius)
            no_label = SearchProblem(X, None, None, symmetric=symmetric, bounds=("traversal", "upper"))
            r2, c2, v2, stats2 = radius_all_pairs(no_label, radius, max_pairs=max_pairs)
            assert stats2["exact"] == stats2["pairs"] and stats2["decided_by_label"] == 0
            assert all(torch.equal(a, b) for a, b in zip(sorted_entries(r2, c2, v2, len(X)), want))
            assert stats["decided_by_label"] <= (int((apart > radius).sum()) if windows else 0)
            far = int((apart > radius).sum())
            if windows and max_pairs == 5 and far:  # (windows of a few rows: most such entries outside)
                assert stats["decided_by_label"] > far // 2
            n_blocks = len(radius_tiles(problem, radius, max_pairs))
            parts = [radius_all_pairs(problem, radius, set(range(p, n_blocks, 2)), max_pairs) for p in (0, 1)]
            joined = sorted_entries(*(torch.cat([q[i] for q in parts]) for i in range(3)), len(X))
            assert all(torch.equal(a, b) for a, b in zip(joined, want)), radius
            assert merge_stats(*[q[3] for q in parts]) == stats


@pytest.mark.parametrize("near_free", [True, False], ids=["near-free-replacements", "unit"])
def test_sequence_probe_chooses_one_call_where_the_label_bound_cannot_prune(monkeypatch, near_free):
    """Sequences (the label bound alone): a probe of a block's rows decides before any round.
    Sequences of one length whose replacements cost almost nothing leave the label bound near
    0, so every entry stays open: after the probe, one exact call of every pair. Unit costs
    (from a table: not the bit-vector path, whose short sequences skip the probe) prune most
    entries: rounds. Both answer as the matrix does."""
    rng = np.random.default_rng(45)
    X = [random_sequence(8, ALPHABET, rng) for _ in range(40)] if near_free else random_sequences(rng, 40, 12)
    if near_free:
        m = np.full((len(ALPHABET) + 1,) * 2, 0.01)
        np.fill_diagonal(m, 0.0)
        m[-1, :], m[:, -1] = 1.0, 1.0
        cost = MatrixCost(ALPHABET, m)
    else:
        cost = MatrixCost(ALPHABET, 1.0 - np.eye(len(ALPHABET) + 1))
    calls = _spy_exact_calls(monkeypatch)
    d, i = kneighbors(X, k=2, cost=cost)
    want = reference_knn(exact_matrix(X, None, cost), 2, True)
    assert torch.equal(d, want[0]) and torch.equal(i, want[1])
    exact_pairs, matrix_pairs = _pairs_of(calls, "exact"), _pairs_of(calls, "matrix")
    if near_free:  # the probe's estimates do not go through exact(); then the matrix's blocks
        assert exact_pairs == [] and sum(matrix_pairs) >= 40 * 39 // 2
    else:
        assert matrix_pairs == [] and len(exact_pairs) > 1 and sum(exact_pairs) < 40 * 39 // 2


@pytest.mark.parametrize("case", ["every-entry-open", "paths-pruned"])
def test_tree_probe_sends_a_k_that_leaves_most_work_open_to_the_matrix_tiles(monkeypatch, case):
    """Trees: a probe of rows spread over X estimates the share of their DP work that the label
    and traversal bounds leave at or below the rows' k-th distances. With k = every candidate,
    every entry is open: the matrix's tiles, no round. Paths of one label and distinct lengths
    (distance |m - n|, which the label bound gives exactly) leave two entries a row open at
    k = 1: rounds. Both answer as the matrix does."""
    from bedl_torch.search import probe
    from bedl_torch.search.knn import bounds_cannot_pay

    monkeypatch.setattr(probe, "TREE_PROBE_MIN_ROWS", 16)
    rng = np.random.default_rng(49)
    if case == "every-entry-open":
        X, k, costs = random_trees(rng, 24, max_nodes=9), 23, [None, make_cost("signed", rng)]
    else:
        X, k, costs = [bt.Tree(*path_tree(n)) for n in rng.permutation(np.arange(1, 25))], 1, [None]
    for cost in costs:
        problem = SearchProblem(X, None, cost)
        assert bounds_cannot_pay(problem, k) == (case == "every-entry-open")
        calls = _spy_exact_calls(monkeypatch)
        d, i = kneighbors(X, k=k, cost=cost)
        want = reference_knn(exact_matrix(X, None, cost), k, True)
        assert torch.equal(d, want[0]) and torch.equal(i, want[1])
        exact_pairs, matrix_pairs = _pairs_of(calls, "exact"), _pairs_of(calls, "matrix")
        if case == "every-entry-open":  # (the probe's estimates do not go through exact())
            assert exact_pairs == [] and sum(matrix_pairs) >= 24 * 23 // 2
        else:
            assert matrix_pairs == [] and 0 < sum(exact_pairs) < 24 * 23 // 2


@pytest.mark.parametrize("case", ["every-entry-open", "paths-pruned"])
def test_tree_radius_probe_sends_a_radius_that_leaves_most_work_open_to_the_matrix_tiles(monkeypatch, case):
    """Trees: range search probes rows spread over X for the share of their DP work that the
    label and traversal bounds leave at or below the radius. A finite radius at the largest
    distance leaves every entry open: the matrix's tiles, no bound's call. Paths of one label
    and distinct lengths (distance |m - n|, which the label bound gives exactly) at radius 1
    leave two entries a row: bounds and exact calls. Both answer as the matrix does."""
    from bedl_torch.search import probe
    from bedl_torch.search.radius import open_work_share, radius_takes_every_pair

    monkeypatch.setattr(probe, "TREE_PROBE_MIN_ROWS", 16)
    rng = np.random.default_rng(50)
    if case == "every-entry-open":
        X, costs = random_trees(rng, 24, max_nodes=9), [None, make_cost("signed", rng)]
    else:
        X, costs = [bt.Tree(*path_tree(n)) for n in rng.permutation(np.arange(1, 25))], [None]
    for cost in costs:
        D = exact_matrix(X, None, cost)
        radius = float(D.max()) if case == "every-entry-open" else 1.0
        problem = SearchProblem(X, None, cost)
        share = open_work_share(problem, radius)
        assert radius_takes_every_pair(problem, radius) == (case == "every-entry-open")
        if case == "every-entry-open":
            assert share == 1.0
        else:  # (each probe row's neighbours one node longer and shorter)
            assert 0 < share < 0.25
        calls = _spy_exact_calls(monkeypatch)
        got = bt.radius_neighbors(X, radius=radius, cost=cost)
        want = reference_radius(D, radius, True)
        assert all(torch.equal(a, b) for a, b in zip(got, want))
        exact_pairs, matrix_pairs = _pairs_of(calls, "exact"), _pairs_of(calls, "matrix")
        if case == "every-entry-open":
            assert exact_pairs == [] and sum(matrix_pairs) >= 24 * 23 // 2
        else:
            assert matrix_pairs == [] and 0 < sum(exact_pairs) < 24 * 23 // 2


@pytest.mark.parametrize("length", [12, 150])
def test_short_unit_cost_sequences_take_one_call(monkeypatch, length):
    """Under UnitCost, sequences whose exact distances run on bit vectors with about one word
    per step (mean ceil(|x| / 64) |y| <= CHEAP_WORD_STEPS) cost about what a round spends per
    entry: k-NN computes each block in one exact call, range search thresholds the matrix's
    blocks. Longer ones go round by round (range search: bounds, then exact calls). With the
    fast paths off (the DP, no bit vectors) short ones do too."""
    from bedl_torch import _ext

    rng = np.random.default_rng(46)
    X = [random_sequence(length - int(rng.integers(0, 3)), ALPHABET, rng) for _ in range(30)]
    cost = bt.UnitCost(ALPHABET)
    calls = _spy_exact_calls(monkeypatch)
    D = exact_matrix(X, None, cost)
    want = reference_knn(D, 3, True)
    radius = float(torch.quantile(D[~torch.eye(30, dtype=torch.bool)], 0.2))
    want_radius = reference_radius(D, radius, True)
    before = _ext.simd_enabled()
    for simd in (True, False):
        calls.clear()
        _ext.set_simd_enabled(simd)
        try:
            on = _ext.simd_enabled()  # (False without AVX2 or where the run switched them off)
            d, i = kneighbors(X, k=3, cost=cost)
            knn_calls = list(calls)
            calls.clear()
            radius_answer = radius_neighbors(X, radius=radius, cost=cost)
            cheap = SearchProblem(X, None, cost).cheap_exact
        finally:
            _ext.set_simd_enabled(before)
        assert torch.equal(d, want[0]) and torch.equal(i, want[1])
        assert all(torch.equal(a, b) for a, b in zip(radius_answer, want_radius))
        assert cheap == (on and length == 12)
        if cheap:  # the matrix's blocks (one table: consecutive rows, the diagonal kept)
            assert _pairs_of(knn_calls, "exact") == [] and sum(_pairs_of(knn_calls, "matrix")) == 30 * 31 // 2
            # range search: the length windows, at most those pairs
            assert _pairs_of(calls, "exact") == [] and 0 < sum(_pairs_of(calls, "matrix")) <= 30 * 31 // 2
        else:
            assert _pairs_of(knn_calls, "matrix") == [] and len(_pairs_of(knn_calls, "exact")) > 1
            assert _pairs_of(calls, "matrix") == [] and len(_pairs_of(calls, "exact")) >= 1


def test_probe_bounds_hold_and_read_only_their_rows(monkeypatch):
    """The probe's label bound (a few rows of X against Y, potentials from those rows' symbols'
    cost rows only) never exceeds the exact distance; with X's own symbols, reading only their
    rows gives the full pass's numbers. A block that the probe sends to one exact call never
    builds the problem's label bound (no pass over every cost row)."""
    monkeypatch.setattr(symbol_costs_module, "_TABLE_SYMBOLS", 4)
    monkeypatch.setattr(symbol_costs_module, "_ROW_BLOCK", 3)
    monkeypatch.setattr(symbol_costs_module, "table_of", lambda c: None)
    rng = np.random.default_rng(47)
    m = rng.uniform(0.0, 1.0, size=(len(ALPHABET) + 1,) * 2)
    cost = MatrixCost(ALPHABET, m + m.T)
    X = random_sequences(rng, 12, 9, alphabet=ALPHABET[:3])
    Y = random_sequences(rng, 10, 9)
    problem = SearchProblem(X, Y, cost)
    assert problem.costs.table is None
    D = exact_matrix(X, Y, cost)
    rows = torch.tensor([1, 4, 7])
    assert bool((problem.probe_lower(rows) <= D[rows] + 1e-12).all())
    assert problem._label is None
    lx, ly = problem._label_codes
    ptr = problem.x_table.ptr
    full = label_bound_module.LabelBound(problem.costs, lx, ptr, ly, problem.y_table.ptr)
    only = label_bound_module.LabelBound(problem.costs, lx, ptr, ly, problem.y_table.ptr, x_rows_only=True)
    assert torch.equal(full.block(torch.arange(len(X))), only.block(torch.arange(len(X))))
    # near-free replacements: the probe sends the block to one call, the label bound unbuilt
    Z = [random_sequence(8, ALPHABET, rng) for _ in range(40)]
    near = np.full((len(ALPHABET) + 1,) * 2, 0.01)
    np.fill_diagonal(near, 0.0)
    near[-1, :], near[:, -1] = 1.0, 1.0
    problem = SearchProblem(Z, None, MatrixCost(ALPHABET, near))
    d, i, _, stats = knn_block(problem, 0, len(Z), 2)
    want = reference_knn(exact_matrix(Z, None, MatrixCost(ALPHABET, near)), 2, True)
    assert torch.equal(d, want[0]) and torch.equal(i, want[1])
    assert stats["exact_computed"] == 40 * 39 // 2 and problem._label is None


@pytest.mark.parametrize("whole_table", [True, False])
def test_probe_of_empty_objects(monkeypatch, whole_table):
    """Probe rows that are all empty have no symbols: their bound reads no cost row (and the
    search answers as the matrix does)."""
    if not whole_table:
        monkeypatch.setattr(symbol_costs_module, "_TABLE_SYMBOLS", 2)
        monkeypatch.setattr(symbol_costs_module, "table_of", lambda c: None)
    rng = np.random.default_rng(48)
    m = rng.uniform(0.0, 1.0, size=(len(ALPHABET) + 1,) * 2)
    cost = MatrixCost(ALPHABET, m + m.T)
    X = [[] for _ in range(40)] + random_sequences(rng, 4, 6)
    problem = SearchProblem(X, None, cost)
    assert (problem.costs.table is not None) == whole_table
    rows = torch.arange(3)
    lower = problem.probe_lower(rows)
    assert bool(torch.isfinite(lower).all()) and bool((lower <= exact_matrix(X, None, cost)[rows] + 1e-12).all())
    check_search(X, None, cost, rng, ks=[1, 3], radii=[0.5])


@pytest.mark.parametrize("share", [0.0, 2.0])
def test_dense_finish_and_rounds_alone_agree(monkeypatch, share):
    """Once every row has k exact distances, k-NN computes all open entries at once when the
    bounds leave most undecided entries open (share 0: always; 2: never): same answers."""
    from bedl_torch.search import knn as knn_module

    monkeypatch.setattr(knn_module, "_DENSE_SHARE", share)
    rng = np.random.default_rng(43)
    X = random_trees(rng, 18, max_nodes=8)
    for cost in (None, make_cost("signed", rng)):
        check_search(X, None, cost, rng, ks=[1, 5], radii=[], block_size=7)
        check_search(X[:6], X[6:], cost, rng, ks=[3], radii=[], block_size=4)


@pytest.mark.parametrize("k", [1, 3, 7])
def test_k_smallest_orders_by_value_then_column(k):
    """The dense merge's selection against a sort of each row's entries by (value, column):
    integer values (many ties), missing (+inf) entries, rows with fewer than k present."""
    from bedl_torch.search.merge import NO_INDEX, k_smallest

    g = torch.Generator().manual_seed(k)
    M = torch.randint(0, 4, (9, 7), generator=g).double()
    M[torch.rand(9, 7, generator=g) < 0.3] = math.inf
    M[0] = math.inf
    M[1, 1:] = math.inf
    d, i = k_smallest(M, k)
    for r in range(9):
        want = sorted((float(M[r, c]), c) for c in range(7) if math.isfinite(M[r, c]))[:k]
        want += [(math.inf, NO_INDEX)] * (k - len(want))
        assert list(zip(d[r].tolist(), i[r].tolist())) == want


def _merge_reference(best_d, best_i, M, r0, c0, partners, same):
    """Each row's k first by (distance, index) of its own list and the block's entries, from
    Python sorts of every entry (the definition the dense merge must meet)."""
    from bedl_torch.search.merge import NO_INDEX

    n, k = best_d.shape
    entries = {t: [(float(d), int(i)) for d, i in zip(best_d[t], best_i[t]) if i != NO_INDEX] for t in range(n)}
    for a in range(M.shape[0]):
        for b in range(M.shape[1]):
            r, c, v = r0 + a, c0 + b, float(M[a, b])
            if not math.isfinite(v) or (partners and c < r) or (same and r == c):
                continue
            entries[r].append((v, c))
            if partners and c != r:
                entries[c].append((v, r))
    out_d, out_i = torch.full_like(best_d, math.inf), torch.full_like(best_i, NO_INDEX)
    for t, found in entries.items():
        found = sorted(found)[:k]
        out_d[t, : len(found)] = torch.tensor([f[0] for f in found], dtype=torch.float64)
        out_i[t, : len(found)] = torch.tensor([f[1] for f in found], dtype=torch.int64)
    return out_d, out_i


@pytest.mark.parametrize("k", [1, 3, 8])
@pytest.mark.parametrize("layout", ["square", "triangle", "rectangle", "rows"])
def test_dense_merge_equals_a_sort_of_every_entry(k, layout):
    """``knn_merge_dense`` (the merge of the matrix's tiles) against sorts of each row's entries:
    integer values with many ties, missing (+inf) entries and rows of fewer than k, lists that
    already hold entries (some of them after the block's in a tie), blocks on the diagonal with
    partners (the square's mirrors and entries below the diagonal that must not be read), off
    the diagonal, and rows against another collection; wide enough for the column pass's chunks
    of 64 and its threads."""
    from bedl_torch.search.merge import NO_INDEX, merge_matrix

    g = torch.Generator().manual_seed(17 * k + len(layout))
    n = 150
    r0, h, c0, w, partners, same = {
        "square": (20, 30, 20, 30, True, True),
        "triangle": (20, 30, 20, 130, True, True),
        "rectangle": (10, 25, 60, 90, True, True),
        "rows": (5, 40, 0, 150, False, True),
    }[layout]
    M = torch.randint(0, 6, (h, w), generator=g).double()
    M[torch.rand(h, w, generator=g) < 0.2] = math.inf
    M[0] = math.inf
    # lists already holding entries that no entry of the block stands for: indices below both
    # the block's rows and columns (before its entries in a tie) and above n (after them)
    pool = list(range(min(r0, c0))) + list(range(n, n + 20))
    best_d = torch.full((n, k), math.inf, dtype=torch.float64)
    best_i = torch.full((n, k), NO_INDEX, dtype=torch.int64)
    for t in range(0, n, 3):
        m = int(torch.randint(0, k + 1, (1,), generator=g))
        picks = torch.randperm(len(pool), generator=g)[:m].tolist()
        vals = sorted((float(torch.randint(0, 6, (1,), generator=g)), pool[p]) for p in picks)
        for q, (v, c) in enumerate(vals):
            best_d[t, q], best_i[t, q] = v, c
    want_d, want_i = _merge_reference(best_d, best_i, M, r0, c0, partners, same)
    for threads in (1, 2):
        old = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            got_d, got_i = best_d.clone(), best_i.clone()
            merge_matrix(got_d, got_i, M, r0, c0, partners, same)
        finally:
            torch.set_num_threads(old)
        assert torch.equal(got_d, want_d) and torch.equal(got_i, want_i)


def test_dense_merge_op_passes_opcheck_and_rejects_bad_input():
    """``knn_merge_dense``: opcheck (schema with its in-place lists), and ValueError /
    TypeError naming the problem for bad shapes, dtypes, ranges and NaN."""
    from bedl_torch.search.merge import NO_INDEX

    op = torch.ops.bedl_torch.knn_merge_dense
    best_d = torch.full((6, 2), math.inf, dtype=torch.float64)
    best_i = torch.full((6, 2), NO_INDEX, dtype=torch.int64)
    M = torch.tensor([[1.0, 2.0, 0.0], [math.inf, 3.0, 1.0]], dtype=torch.float64)
    torch.library.opcheck(op, (best_d.clone(), best_i.clone(), M, 1, 2, True, True))
    bad = [
        ((best_d.float(), best_i, M, 0, 0, False, False), TypeError, "best_d must be float64"),
        ((best_d, best_i.int(), M, 0, 0, False, False), TypeError, "best_i must be int64"),
        ((best_d, best_i, M.long(), 0, 0, False, False), TypeError, "block must be float64"),
        ((best_d, best_i[:, :1].contiguous(), M, 0, 0, False, False), ValueError, "of one shape"),
        ((best_d, best_i, M[0], 0, 0, False, False), ValueError, "must be 2-D"),
        ((best_d, best_i, M, 5, 0, False, False), ValueError, "are not rows of the 6 lists"),
        ((best_d, best_i, M, 0, 4, True, False), ValueError, "with partners the block's columns 4 .. 7"),
        ((best_d, best_i, M, 0, -1, False, False), ValueError, "col0 must be >= 0"),
        ((best_d, best_i, torch.full((2, 3), math.nan, dtype=torch.float64), 0, 0, False, False), ValueError,
         "block holds NaN"),
    ]
    for args, error, text in bad:
        with pytest.raises(error, match=re.escape(text)):
            op(*args)


def test_searches_import_no_heavy_module_when_called():
    """The first search of a process imports none of torch's compiler stack (torch.broadcast_shapes,
    once used for the margin, imported sympy and torch's symbolic shapes: seconds on the first
    call); today it imports nothing at all."""
    code = (
        "import sys, torch, bedl_torch as bt\n"
        "trees = [bt.Tree.from_bracket(s) for s in ('{a{b}{c}}', '{a{b}}', '{b{c}}', '{c}')]\n"
        "before = set(sys.modules)\n"
        "bt.kneighbors(trees, k=2)\n"
        "bt.radius_neighbors(trees, radius=1.0)\n"
        "print(sorted(set(sys.modules) - before))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=REPO))
    assert out.returncode == 0, out.stderr
    imported = ast.literal_eval(out.stdout.strip().splitlines()[-1])
    heavy = ("sympy", "mpmath", "torch._dynamo", "torch._inductor", "torch._refs", "torch.fx")
    assert not [m for m in imported if m.split(".")[0] in heavy or m.startswith(heavy)]


def test_release_freed_memory_trims_a_heap_with_holes(monkeypatch):
    """Heap holes (every other 64 KB block freed) are returned to the system once the process
    has grown by more than ``keep`` since the last trim and the heap holds that much free;
    below either limit nothing is trimmed."""
    from bedl_torch import _memory
    if _memory._GLIBC is None or not _memory.resident_bytes():
        pytest.skip("needs glibc and /proc")
    monkeypatch.setattr(_memory, "_after_trim", [None])
    assert not _memory.release_freed_memory(keep=0)  # the first call only sets the baseline
    blocks = [bytearray(1 << 16) for _ in range(2048)]  # 128 MB from the heap, pages touched
    del blocks[::2]  # 64 MB of holes between live blocks: not trimmed by free() itself
    assert _memory.free_heap_bytes() > 48 << 20
    assert not _memory.release_freed_memory(keep=1 << 40)
    before = _memory.resident_bytes()
    _memory._after_trim[0] = 0
    assert _memory.release_freed_memory(keep=32 << 20)
    assert _memory.resident_bytes() < before - (32 << 20)
    assert 0 < _memory._after_trim[0] < before  # the next trim counts from here
    del blocks


# ---------------------------------------------------------------------------
# NeighborIndex: a collection prepared once
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["unit", "signed", "asymmetric"])
@pytest.mark.parametrize("objects", ["tree", "sequence"])
def test_neighbor_index_answers_equal_the_full_matrix(kind, objects):
    """Queries against an index (X against Y, and Y against itself) against the full matrix of
    the same costs, ties by index; the same answers and stats as the functions."""
    rng = np.random.default_rng(90 + COSTS.index(kind) + (7 if objects == "tree" else 0))
    cost = make_cost(kind, rng)
    make = random_trees if objects == "tree" else random_sequences
    Y = make(rng, 23) + make(rng, 2)[:1] * 2  # a duplicate: distances 0 and ties
    index = bt.NeighborIndex(Y, cost)
    assert len(index) == len(Y)
    D_yy = exact_matrix(Y, None, cost)
    for _ in range(2):  # a second round of queries reuses the index
        X = make(rng, 6)
        D = exact_matrix(X, Y, cost)
        for k in (1, 4, len(Y)):
            d, i, stats = index.kneighbors(X, k=k, return_stats=True)
            rd, ri = reference_knn(D, k, False)
            assert torch.equal(i, ri) and torch.equal(d, rd)
            assert stats == bt.kneighbors(X, Y, k=k, cost=cost, return_stats=True)[2]
        radius = float(D.flatten().kthvalue(D.numel() // 4).values)
        r, c, v = index.radius_neighbors(X, radius=radius)
        rr, rc, rv = reference_radius(D, radius, False)
        assert torch.equal(r, rr) and torch.equal(c, rc) and torch.equal(v, rv)
    d, i = index.kneighbors(k=3)
    rd, ri = reference_knn(D_yy, 3, True)
    assert torch.equal(i, ri) and torch.equal(d, rd)
    r, c, v = index.radius_neighbors(radius=1.5)
    rr, rc, rv = reference_radius(D_yy, 1.5, True)
    assert torch.equal(r, rr) and torch.equal(c, rc) and torch.equal(v, rv)


def test_neighbor_index_flattens_its_collection_once(monkeypatch):
    """A query flattens only itself (its trees and their two traversals), not the collection.
    The collections' own tables are shared with later calls on equal objects (as the matrix's
    are): a search of X against Y after them flattens only the traversals."""
    from bedl_torch.ops import encoding
    from bedl_torch.search import problem as problem_module

    monkeypatch.setattr(encoding, "_table_cache", type(encoding._table_cache)())
    rng = np.random.default_rng(5)
    Y, X = random_trees(rng, 30), random_trees(rng, 3)
    index = bt.NeighborIndex(Y)
    sides = []

    def spy(module):
        real = module.FlatTable

        class Spy(real):
            def __init__(self, objects, side):
                sides.append((side, len(objects)))
                super().__init__(objects, side)

        monkeypatch.setattr(module, "FlatTable", Spy)

    spy(problem_module)  # the traversals' tables
    spy(encoding)  # the collections' tables (flat_table)
    index.kneighbors(X, k=2)
    index.kneighbors(k=2)
    assert sides == [("X", 3)] * 3
    bt.kneighbors(X, Y, k=2)
    assert sides[3:] == [("X", 3), ("Y", 30)] * 2


def test_neighbor_index_labels_and_errors():
    """Default unit costs take a query's new labels (the functions' answer, whose default costs
    cover X and Y); a given cost names a label it lacks; bad arguments are TypeErrors."""
    Y = ["abc", "abd", "bcd", "xbc"]
    index = bt.NeighborIndex(Y)
    X = ["qqc", "ab"]
    d, i = index.kneighbors(X, k=2)
    rd, ri = reference_knn(exact_matrix(X, Y, None), 2, False)
    assert torch.equal(d, rd) and torch.equal(i, ri)
    assert index.kneighbors(["zz"], k=1)[0].tolist() == [[3.0]]  # two replacements, one insertion
    fixed = bt.NeighborIndex(Y, bt.UnitCost(list("abcdx")))
    with pytest.raises(ValueError, match="'q'"):
        fixed.kneighbors(X, k=1)
    with pytest.raises(TypeError, match="single str"):
        bt.NeighborIndex("abc")
    with pytest.raises(TypeError, match="single str"):
        index.kneighbors("abc", k=1)
    with pytest.raises(TypeError, match="bounds must be a sequence"):
        bt.NeighborIndex(Y, bounds="label")
    with pytest.raises(ValueError, match="k must be between 1 and 3"):
        index.kneighbors(k=4)
    with pytest.raises(TypeError, match="radius must be a real number"):
        index.radius_neighbors(X, radius="1")


def test_neighbor_index_keeps_its_codes_when_queries_extend_the_alphabet(monkeypatch):
    """A query with new labels extends the default unit costs by appending them: the
    collection's codes (and its traversals') are the same numbers under the longer alphabet, so
    they are carried over, not encoded again, and the answers are the functions'. Carried only
    where that holds: not for an alphabet that is no extension, nor where a label fell to the
    gap."""
    rng = np.random.default_rng(17)
    Y = random_trees(rng, 12, alphabet=list("abc"))
    index = bt.NeighborIndex(Y)
    index.kneighbors(random_trees(rng, 2, alphabet=list("abc")), k=2)
    before = index._prepared.table.flat_labels(index.cost, "error")
    encoded = []
    real = bt.UnitCost.encode
    monkeypatch.setattr(bt.UnitCost, "encode", lambda self, labels, unknown="error":
                        encoded.append(len(labels)) or real(self, labels, unknown))
    answers = []
    for new in ("xy", "z"):
        X = random_trees(rng, 3, alphabet=list("ab" + new))
        answers.append((X, index.kneighbors(X, k=3), index.radius_neighbors(X, radius=3.0)))
    assert set(index.cost.alphabet[:3]) == set("abc") and 2 <= len(set(index.cost.alphabet[3:]) & set("xyz"))
    assert encoded and max(encoded) <= 3 * 10 < sum(len(y) for y in Y)  # (the queries' tables alone)
    assert index._prepared.table.flat_labels(index.cost, "error") is before
    monkeypatch.setattr(bt.UnitCost, "encode", real)
    for X, (d, i), (r, c, v) in answers:
        D = exact_matrix(X, Y, None)
        rd, ri = reference_knn(D, 3, False)
        assert torch.equal(d, rd) and torch.equal(i, ri)
        rr, rc, rv = reference_radius(D, 3.0, False)
        assert torch.equal(r, rr) and torch.equal(c, rc) and torch.equal(v, rv)
    table = bt.ops.FlatTable(["abc", "cab"], "Y")
    old, longer = bt.UnitCost(list("abc")), bt.UnitCost(list("abcd"))
    assert table.carry_codes(old, longer, "error") is False  # (nothing encoded under old yet)
    table.flat_labels(old, "error")
    assert not table.carry_codes(old, bt.UnitCost(list("bacd")), "error")  # not an extension
    assert table.carry_codes(old, longer, "error")
    assert torch.equal(table.flat_labels(longer, "error"), bt.ops.FlatTable(["abc", "cab"], "Y").flat_labels(longer, "error"))
    gapped = bt.ops.FlatTable(["abq"], "Y")
    gapped.flat_labels(old, "gap")  # q falls to the gap under old, and is d's neighbour under longer
    assert not gapped.carry_codes(old, bt.UnitCost(list("abcq")), "gap")


def test_neighbor_index_pickles():
    """A pickled index (its objects, cost and options; tables built again) answers as the
    original, learned costs included."""
    import pickle

    rng = np.random.default_rng(11)
    Y, X = random_trees(rng, 15), random_trees(rng, 4)
    for cost in (None, make_cost("euclidean", rng)):
        index = bt.NeighborIndex(Y, cost, bounds=("label", "upper"))
        copy = pickle.loads(pickle.dumps(index))
        assert len(copy) == len(Y) and copy._options == index._options
        for a, b in zip(index.kneighbors(X, k=3), copy.kneighbors(X, k=3)):
            assert torch.equal(a, b)
        for a, b in zip(index.radius_neighbors(radius=2.0), copy.radius_neighbors(radius=2.0)):
            assert torch.equal(a, b)


# ---------------------------------------------------------------------------
# Cost modules on a device: the answers of the matrix on that device
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("device", [
    "cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"))])
@pytest.mark.parametrize("objects", ["trees", "sequences"])
def test_search_with_a_cost_module_on_a_device_equals_its_matrix(device, objects):
    """A cost module whose parameters live on a device (a GPU in a training loop): the
    search's answers are those of ``pairwise_distances`` with the same module, bit for bit
    (the matrix runs that device's kernels; the search's exact calls too, its bounds on CPU
    copies), for ``kneighbors``, ``radius_neighbors`` and a ``NeighborIndex``, and the answers
    come back on the CPU."""
    rng = np.random.default_rng(29)
    make = random_trees if objects == "trees" else random_sequences
    X, Y = make(rng, 14), make(rng, 9)
    emb = torch.as_tensor(rng.normal(size=(len(ALPHABET), 3)))
    costs = [bt.UnitCost(ALPHABET, device=device), bt.EuclideanCost(ALPHABET, emb, device=device)]
    for cost in costs:
        for A, B in ((X, None), (X, Y)):
            same = B is None
            assert bt.pairwise_distances(A, B, cost).device.type == device
            D = exact_matrix(A, B, cost)
            d, i = bt.kneighbors(A, B, k=1, cost=cost)
            assert d.device.type == "cpu" and i.device.type == "cpu"
            off = D[~torch.eye(*D.shape, dtype=torch.bool)] if same else D.reshape(-1)
            check_search(A, B, cost, rng, ks=(1, 4, len(B or A) - same),
                         radii=(float(off.min()), float(torch.quantile(off, 0.2))))
            index = bt.NeighborIndex(B if B is not None else A, cost)
            d, i = index.kneighbors(None if same else A, k=3)
            rd, ri = reference_knn(D, 3, same)
            assert torch.equal(i, ri) and torch.equal(d, rd), (type(cost).__name__, same)


# ---------------------------------------------------------------------------
# Calls on a few objects of a large table
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("objects", ["trees", "sequences"])
def test_flat_table_subset_equals_a_table_of_those_objects(objects):
    """``FlatTable.subset(rows)``: the objects in that order with the lengths, offsets, subtree
    sizes and symbol codes of a table built from them, the codes sliced from the cache."""
    rng = np.random.default_rng(37)
    make = random_trees if objects == "trees" else random_sequences
    Z = make(rng, 30) + [[] if objects == "sequences" else bt.Tree(["a"], [[]])]
    cost = bt.UnitCost(ALPHABET)
    table = bt.ops.FlatTable(Z, "Z")
    table.flat_labels(cost, "error")  # (encoded before the subset: sliced)
    rows = torch.tensor([30, 3, 17, 4, 29, 0])
    sub = table.subset(rows)
    fresh = bt.ops.FlatTable([Z[i] for i in rows.tolist()], "Z")
    assert sub.objects == fresh.objects and sub.kind == fresh.kind
    assert torch.equal(sub.lengths, fresh.lengths) and torch.equal(sub.ptr, fresh.ptr)
    if objects == "trees":
        assert torch.equal(sub.sizes, fresh.sizes)
    assert torch.equal(sub.flat_labels(cost, "error"), fresh.flat_labels(cost, "error"))
    other = bt.UnitCost(ALPHABET + ["z"])  # (not encoded before the subset: encoded anew)
    assert torch.equal(sub.flat_labels(other, "error"), fresh.flat_labels(other, "error"))
    assert len(table.subset(torch.zeros(0, dtype=torch.long))) == 0


class ForwardOnlyEuclidean(bt.EuclideanCost):
    """Euclidean costs whose ``forward`` is its own: no whole symbol table (``table_of`` is
    None), so the matrix's local tables depend on the symbols a call holds."""

    def forward(self, x_idx, y_idx):
        return super().forward(x_idx, y_idx)


def test_calls_on_few_objects_of_a_large_table_pass_those_objects_only(monkeypatch):
    """Where a call's pairs use under half of a table of at least 64 objects, the kernels get a
    table of those objects only (they check every object they are given), where the values
    cannot depend on it (the module's whole table, unit costs); the answers are the matrix's
    bits. Modules without a whole table keep the whole tables."""
    rng = np.random.default_rng(43)
    Y = random_trees(rng, 90, max_nodes=12)
    X = random_trees(rng, 3, max_nodes=12)
    subsets = []
    real = bt.ops.FlatTable.subset

    def spy(table, rows):
        subsets.append(len(rows))
        return real(table, rows)

    monkeypatch.setattr(bt.ops.FlatTable, "subset", spy)
    emb = torch.as_tensor(rng.normal(size=(len(ALPHABET), 3)))
    for cost, subsetting in ((bt.UnitCost(ALPHABET), True), (bt.EuclideanCost(ALPHABET, emb), True),
                             (ForwardOnlyEuclidean(ALPHABET, emb), False)):
        subsets.clear()
        D = exact_matrix(X, Y, cost)
        d, i = bt.NeighborIndex(Y, cost).kneighbors(X, k=4)
        rd, ri = reference_knn(D, 4, False)
        assert torch.equal(i, ri) and torch.equal(d, rd), type(cost).__name__
        radius = float(torch.quantile(D.reshape(-1), 0.05))
        got = bt.radius_neighbors(X, Y, radius=radius, cost=cost)
        assert all(torch.equal(g, w) for g, w in zip(got, reference_radius(D, radius, False)))
        for k in (1, 3):  # Y against itself: later rounds use few objects
            d, i = bt.kneighbors(Y, k=k, cost=cost)
            rd, ri = reference_knn(exact_matrix(Y, None, cost), k, True)
            assert torch.equal(i, ri) and torch.equal(d, rd), (type(cost).__name__, k)
        assert bool(subsets) == subsetting, type(cost).__name__
        assert all(0 < n < 45 for n in subsets)
    # values that come back regrouped (as tiles do) are read back by the tables' own indices
    real_pairs = problem_module.table_pair_distances

    def reversed_pairs(*args, **kw):
        ii, jj, v = real_pairs(*args, **kw)
        return ii.flip(0), jj.flip(0), v.flip(0)

    monkeypatch.setattr(problem_module, "table_pair_distances", reversed_pairs)
    subsets.clear()
    d, i = bt.NeighborIndex(Y).kneighbors(X, k=4)
    rd, ri = reference_knn(exact_matrix(X, Y, bt.UnitCost(ALPHABET)), 4, False)
    assert subsets and torch.equal(i, ri) and torch.equal(d, rd)
