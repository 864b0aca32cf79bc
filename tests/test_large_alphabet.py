"""Cost modules over large alphabets (no whole symbol table): pairs split into tiles, each with
a local table between the symbols of its x objects (rows) and of its y objects (columns).

References, both through the padded kernels (``edit_distance_batch`` on per-pair cost
matrices) and autograd into the cost module's parameters:

* a smaller alphabet: each pair's costs gathered from the module's full ``(U+1, U+1)`` table
  (``forward`` on all symbols, ``symbol_costs()`` for the Euclidean cost);
* a larger one: each pair's costs from one ``cost.forward`` call on its own indices.

The tile tables are computed by one matrix product per tile (rounding differs from
``forward``'s batched products), so values and gradients agree within rounding.
Run the file once more with ``BEDL_TORCH_SIMD=0`` for the scalar kernels.
"""
import math
import random

import pytest
import torch

import bedl_torch
from bedl_torch import ops
from bedl_torch.costs import block_of, table_of
from bedl_torch.pretrained import CosineCost
from oracles import random_tree
from test_local_tables import _spy_symbol_kernels

UNKNOWN = "not-in-the-alphabet"  # a label the cost modules lack: unknown="gap" maps it to the gap


class _NoTableEuclidean(bedl_torch.EuclideanCost):
    """An EuclideanCost without a whole table at any size (as above 2,048 symbols)."""

    table_limit = 0


def _cosine(n_words, dtype, seed=0, dim=5):
    gen = torch.Generator().manual_seed(seed)
    vecs = torch.randn(n_words, dim, dtype=torch.float64, generator=gen)
    vecs[3] = 0.0  # a word without a vector
    omega = torch.eye(dim, dtype=torch.float64) + 0.3 * torch.randn(dim, dim, dtype=torch.float64,
                                                                    generator=gen)
    words = [f"w{i}" for i in range(n_words)]
    cost = CosineCost(words, vecs.to(dtype), omega=omega.to(dtype))
    return cost, words + [None]


def _euclidean(n_symbols, dtype, seed=0, dim=4):
    gen = torch.Generator().manual_seed(seed)
    alphabet = [f"s{i}" for i in range(n_symbols)]
    emb = torch.randn(n_symbols, dim, dtype=torch.float64, generator=gen).to(dtype)
    cls = _NoTableEuclidean if n_symbols <= bedl_torch.EuclideanCost.table_limit else bedl_torch.EuclideanCost
    return cls(alphabet, emb), alphabet


def _make_cost(kind, n_symbols, dtype, seed=0):
    cost, alphabet = (_cosine if kind == "cosine" else _euclidean)(n_symbols, dtype, seed)
    assert table_of(cost) is None
    return cost, alphabet


def _sequences(count, seed, alphabet, max_len=8):
    rng = random.Random(seed)
    pool = list(alphabet) + [UNKNOWN]
    return [[rng.choice(pool) for _ in range(rng.randint(0, max_len))] for _ in range(count)]


def _trees(count, seed, alphabet, max_size=7):
    rng = random.Random(seed)
    pool = list(alphabet) + [UNKNOWN]
    return [bedl_torch.Tree(*random_tree(rng.randint(1, max_size), pool, rng.randrange(10**6)))
            for _ in range(count)]


def _labels(obj):
    return list(obj.labels) if isinstance(obj, bedl_torch.Tree) else list(obj)


def _indices(cost, obj):
    """The object's symbol indices, the gap appended (the padded layout's last row/column)."""
    return torch.cat([cost.encode(_labels(obj), unknown="gap"), torch.tensor([cost.gap_index])])


def _full_table(cost):
    """The module's whole (U+1, U+1) table, differentiable in its parameters."""
    if isinstance(cost, bedl_torch.EuclideanCost):
        return cost.symbol_costs()
    every = torch.arange(cost.gap_index + 1)
    return cost(every[None], every[None])[0]


def _reference(cost, xs, ys, source):
    """Distances of the pairs (xs[k], ys[k]) through the padded kernels, from per-pair cost
    matrices gathered from the full table or computed by ``forward``."""
    if not xs:
        return torch.zeros(0, dtype=cost.dtype)
    xi, yi = [_indices(cost, x) for x in xs], [_indices(cost, y) for y in ys]
    if source == "table":
        table = _full_table(cost)
        costs = [table[a[:, None], b[None, :]] for a, b in zip(xi, yi)]
    else:  # one forward call on the indices padded with the gap, cut into the pairs' blocks
        pad = cost.gap_index
        X_idx = torch.nn.utils.rnn.pad_sequence(xi, batch_first=True, padding_value=pad)
        Y_idx = torch.nn.utils.rnn.pad_sequence(yi, batch_first=True, padding_value=pad)
        padded = cost(X_idx, Y_idx)
        costs = [padded[k, :len(a), :len(b)] for k, (a, b) in enumerate(zip(xi, yi))]
    return bedl_torch.edit_distance_batch(xs, ys, costs)


def _reference_matrix(cost, X, Y, source):
    xs = [a for a in X for _ in Y]
    ys = [b for _ in X for b in Y]
    return _reference(cost, xs, ys, source).view(len(X), len(Y))


def _grad(cost, value):
    params = [p for p in cost.parameters() if p.requires_grad]
    return torch.autograd.grad(value, params)


def _tol(dtype):
    return {"rtol": 1e-10, "atol": 1e-12} if dtype == torch.float64 else {"rtol": 2e-5, "atol": 2e-6}


# --------------------------------------------------------------------------- cost blocks
@pytest.mark.parametrize("kind", ["cosine", "euclidean"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_block_equals_forward_with_gradients(kind, dtype):
    cost, _ = _make_cost(kind, 30, dtype)
    gap = cost.gap_index
    rows = torch.tensor([5, 3, 0, gap - 1, 17, gap])  # (cosine: gap - 1 is None)
    cols = torch.tensor([gap, 3, 29 if kind == "euclidean" else 28, 5, gap - 1])
    block = block_of(cost, rows, cols)
    ref = cost(rows[None], cols[None])[0]
    assert block.shape == (6, 5) and block.dtype == dtype
    torch.testing.assert_close(block, ref, **_tol(dtype))
    # equal symbols cost exactly 0, as in forward
    assert block[1, 1] == 0 and block[0, 3] == 0 and block[5, 0] == 0
    weights = torch.linspace(0.1, 1.0, block.numel(), dtype=dtype).view_as(block)
    for g, g_ref in zip(_grad(cost, (block * weights).sum()), _grad(cost, (ref * weights).sum())):
        torch.testing.assert_close(g, g_ref, **_tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_euclidean_block_where_the_product_formula_cancels(dtype):
    """Equal and nearly equal vectors: the block's distances are the direct ones (a product
    formula alone would return rounding noise of the norms), with forward's gradient."""
    gen = torch.Generator().manual_seed(3)
    emb = 10.0 * torch.randn(2600, 6, dtype=torch.float64, generator=gen)
    emb[9] = emb[5]  # equal vectors of different symbols
    emb[7] = emb[5]
    emb[7, 0] += 1e-6 if dtype == torch.float64 else 1e-2  # nearly equal: ||a - b|| << ||a||
    cost = bedl_torch.EuclideanCost([f"s{i}" for i in range(2600)], emb.to(dtype))
    assert table_of(cost) is None
    rows = torch.tensor([5, 7, 9, 2600, 11])
    cols = torch.tensor([9, 5, 7, 2600, 12])
    block = block_of(cost, rows, cols)
    ref = cost(rows[None], cols[None])[0]
    assert block[0, 0] == 0 and block[2, 1] == 0 and block[3, 3] == 0
    rtol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(block, ref, rtol=rtol, atol=0)
    weights = torch.linspace(0.1, 1.0, block.numel(), dtype=dtype).view_as(block)
    (g,) = _grad(cost, (block * weights).sum())
    (g_ref,) = _grad(cost, (ref * weights).sum())
    assert torch.isfinite(g).all()
    torch.testing.assert_close(g, g_ref, rtol=rtol, atol=rtol)


def test_block_of_keeps_a_subclass_forward():
    cost, words = _cosine(12, torch.float64)

    class Doubled(CosineCost):
        def forward(self, x_idx, y_idx):
            return 2.0 * super().forward(x_idx, y_idx)

    doubled = Doubled(words[:-1], cost.vectors, omega=cost.Omega.detach())
    rows, cols = torch.tensor([0, 4, 13]), torch.tensor([2, 12])
    torch.testing.assert_close(block_of(doubled, rows, cols),
                               2.0 * cost(rows[None], cols[None])[0].detach(), rtol=0, atol=1e-15)


# --------------------------------------------------------------------------- tiles
def test_symbol_runs_cover_objects_within_the_bound():
    cost, alphabet = _cosine(40, torch.float64)
    objs = _sequences(60, 1, alphabet[:-1], max_len=9) + [alphabet[:20]]  # one with 20 symbols
    table = ops.FlatTable(objs, "X")
    objects = torch.arange(len(objs))
    runs = ops.pairwise._symbol_runs(table, objects, cost, "gap", 12)
    assert torch.equal(torch.cat(runs), objects)  # consecutive, each object once
    flat = table.flat_labels(cost, "gap")
    for run in runs:
        symbols = set()
        for o in run.tolist():
            symbols |= set(flat[table.ptr[o]:table.ptr[o + 1]].tolist()) - {cost.gap_index}
        assert len(symbols) <= 12 or len(run) == 1  # the 20-symbol object forms a run alone
    assert any(len(run) == 1 and int(run[0]) == 60 for run in runs)
    # every object's runs are kept with the table's codes; a subset's are cut afresh
    again = ops.pairwise._symbol_runs(table, objects, cost, "gap", 12)
    assert again is runs
    part = ops.pairwise._symbol_runs(table, objects[1:], cost, "gap", 12)
    assert part is not runs and torch.equal(torch.cat(part), objects[1:])
    assert ops.pairwise._symbol_runs(table, objects, cost, "gap", 11) is not runs


@pytest.mark.parametrize("kind", ["cosine", "euclidean"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("objects", ["sequence", "tree"])
def test_tiled_matrices_equal_the_full_table(monkeypatch, kind, dtype, objects):
    """A smaller alphabet, tiles forced small: pairwise_distances (X with itself, and X
    against Y) and its gradient against the full table's per-pair costs."""
    cost, alphabet = _make_cost(kind, 40, dtype)
    make = _sequences if objects == "sequence" else _trees
    X, Y = make(14, 2, alphabet), make(9, 3, alphabet)
    monkeypatch.setattr(ops.limits, "LOCAL_TABLE_CELLS", 12 * 12)  # at most 11 symbols a side
    calls = _spy_symbol_kernels(monkeypatch)
    D_xx = bedl_torch.pairwise_distances(X, cost=cost, unknown="gap")
    D_xy = bedl_torch.pairwise_distances(X, Y, cost=cost, unknown="gap")
    assert len(calls) > 4 and all(shape[0] <= 12 for shape in calls)  # many small tiles
    ref_xx = _reference_matrix(cost, X, X, "table")
    ref_xy = _reference_matrix(cost, X, Y, "table")
    torch.testing.assert_close(D_xx, ref_xx, **_tol(dtype))
    torch.testing.assert_close(D_xy, ref_xy, **_tol(dtype))
    w_xx = torch.rand(D_xx.shape, dtype=dtype, generator=torch.Generator().manual_seed(4))
    w_xy = torch.rand(D_xy.shape, dtype=dtype, generator=torch.Generator().manual_seed(5))
    got = _grad(cost, (w_xx * D_xx).sum() + (w_xy * D_xy).sum())
    want = _grad(cost, (w_xx * ref_xx).sum() + (w_xy * ref_xy).sum())
    for g, g_ref in zip(got, want):
        assert g.abs().max() > 0
        torch.testing.assert_close(g, g_ref, **_tol(dtype))


@pytest.mark.parametrize("kind", ["cosine", "euclidean"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tiled_pairs_and_batches_equal_forward_on_a_large_alphabet(monkeypatch, kind, dtype):
    """2,500 symbols: table_pair_distances over tiles, PairBatch.distances / coopt over one
    table between its two sides, each against per-pair costs from forward."""
    cost, alphabet = _make_cost(kind, 2500, dtype)
    X, Y = _sequences(16, 6, alphabet), _sequences(11, 7, alphabet)
    x_table, y_table = ops.FlatTable(X, "X"), ops.FlatTable(Y, "Y")
    ii = torch.tensor([i for i in range(16) for j in range(11) if (i + j) % 3])
    jj = torch.tensor([j for i in range(16) for j in range(11) if (i + j) % 3])
    monkeypatch.setattr(ops.limits, "LOCAL_TABLE_CELLS", 24 * 24)
    calls = _spy_symbol_kernels(monkeypatch)
    oi, oj, vals = ops.table_pair_distances(x_table, y_table, ii, jj, cost, unknown="gap")
    assert len(calls) > 2 and all(shape[0] <= 24 for shape in calls)
    assert sorted(zip(oi.tolist(), oj.tolist())) == sorted(zip(ii.tolist(), jj.tolist()))
    ref = _reference(cost, [X[i] for i in oi.tolist()], [Y[j] for j in oj.tolist()], "forward")
    torch.testing.assert_close(vals, ref, **_tol(dtype))
    weights = torch.linspace(0.5, 1.5, len(vals), dtype=dtype)
    for g, g_ref in zip(_grad(cost, (weights * vals).sum()), _grad(cost, (weights * ref).sum())):
        torch.testing.assert_close(g, g_ref, **_tol(dtype))

    # a batch: its union of symbols exceeds the local limit, each side's does not
    monkeypatch.setattr(ops.limits, "LOCAL_TABLE_CELLS", 60 * 60)
    xs, ys = [X[i] for i in ii.tolist()[:40]], [Y[j] for j in jj.tolist()[:40]]
    batch = bedl_torch.PairBatch(xs, ys)
    sides = [torch.unique(torch.cat([_indices(cost, o) for o in objs])) for objs in (xs, ys)]
    assert len(torch.unique(torch.cat(sides))) > 60 and max(len(s) for s in sides) <= 60
    calls.clear()
    d = batch.distances(cost, unknown="gap")
    d_ref = _reference(cost, xs, ys, "forward")
    # one rectangular table: x's symbols by y's, each side's gap last
    rows, cols = (int((s != cost.gap_index).sum()) + 1 for s in sides)
    assert calls and all(shape == (rows, cols) for shape in calls) and rows != cols
    torch.testing.assert_close(d, d_ref, **_tol(dtype))
    w = torch.linspace(2.0, 0.5, len(d), dtype=dtype)
    for g, g_ref in zip(_grad(cost, (w * d).sum()), _grad(cost, (w * d_ref).sum())):
        torch.testing.assert_close(g, g_ref, **_tol(dtype))
    _, P = batch.coopt(cost, unknown="gap")
    with torch.no_grad():
        _, P_ref = batch.coopt(batch.costs(cost, unknown="gap"))
    torch.testing.assert_close(P, P_ref, **_tol(dtype))


def test_tiled_pairs_with_threshold_minus_inf_are_not_computed(monkeypatch):
    """max_distance in tiles: a pair whose threshold is -inf comes back as inf without being
    computed, and a tile holding only such pairs builds no table; every other pair keeps the
    bits of the call without thresholds (the same tiles)."""
    cost, alphabet = _make_cost("cosine", 2500, torch.float64)
    X, Y = _sequences(16, 6, alphabet), _sequences(11, 7, alphabet)
    x_table, y_table = ops.FlatTable(X, "X"), ops.FlatTable(Y, "Y")
    ii = torch.arange(16).repeat_interleave(11)
    jj = torch.arange(11).repeat(16)
    monkeypatch.setattr(ops.limits, "LOCAL_TABLE_CELLS", 24 * 24)
    calls = _spy_symbol_kernels(monkeypatch)
    with torch.no_grad():
        oi, oj, want = ops.table_pair_distances(x_table, y_table, ii, jj, cost, unknown="gap")
    n_tiles = len(calls)
    # the first x object's pairs and every third other pair dead
    dead = (ii == 0) | (torch.arange(len(ii)) % 3 == 0)
    limit = torch.where(dead, -math.inf, math.inf).to(torch.float64)
    calls.clear()
    ri, rj, got = ops.table_pair_distances(x_table, y_table, ii, jj, cost, unknown="gap",
                                           max_distance=limit)
    assert sorted(zip(ri.tolist(), rj.tolist())) == sorted(zip(oi.tolist(), oj.tolist()))
    value = {(i, j): v for i, j, v in zip(oi.tolist(), oj.tolist(), want.tolist())}
    is_dead = {(i, j): bool(d) for i, j, d in zip(ii.tolist(), jj.tolist(), dead.tolist())}
    for i, j, v in zip(ri.tolist(), rj.tolist(), got.tolist()):
        assert v == (math.inf if is_dead[i, j] else value[i, j])  # the same bits
    assert 0 < len(calls) <= n_tiles
    # all pairs dead: no table at all
    calls.clear()
    _, _, none = ops.table_pair_distances(x_table, y_table, ii, jj, cost, unknown="gap",
                                          max_distance=torch.full((len(ii),), -math.inf))
    assert calls == [] and bool(torch.isinf(none).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tiled_pseudo_distances_with_a_reference_cost(monkeypatch, dtype):
    """mode="pseudo": sum(P(reference) * C) per pair, P from the reference cost's own tiles."""
    cost, alphabet = _make_cost("cosine", 40, dtype, seed=0)
    ref_cost, _ = _make_cost("cosine", 40, dtype, seed=1)
    X, Y = _sequences(10, 8, alphabet), _sequences(7, 9, alphabet)
    monkeypatch.setattr(ops.limits, "LOCAL_TABLE_CELLS", 12 * 12)
    D = bedl_torch.pairwise_distances(X, Y, cost=cost, mode="pseudo", reference_cost=ref_cost,
                                      unknown="gap")
    xs = [a for a in X for _ in Y]
    ys = [b for _ in X for b in Y]
    full, full_ref = _full_table(cost), _full_table(ref_cost).detach()
    costs, ref_costs = [], []
    for x, y in zip(xs, ys):
        xi, yi = _indices(cost, x), _indices(cost, y)
        costs.append(full[xi[:, None], yi[None, :]])
        ref_costs.append(full_ref[xi[:, None], yi[None, :]])
    _, P = bedl_torch.coopt_matrix_batch(xs, ys, ref_costs)
    want = torch.stack([(p * c).sum() for p, c in zip(P, costs)]).view(len(X), len(Y))
    torch.testing.assert_close(D, want, **_tol(dtype))
    (g,) = _grad(cost, D.sum())
    (g_ref,) = _grad(cost, want.sum())
    torch.testing.assert_close(g, g_ref, **_tol(dtype))
    assert ref_cost.Omega.grad is None


def test_default_tiles_on_more_symbols_than_one_table_holds(monkeypatch):
    """At the default limit: sides with more distinct words than one table's side hold are
    split, every table within the limit; distances as from forward (padded path)."""
    cost, alphabet = _cosine(20000, torch.float64, dim=6)
    rng = random.Random(10)
    X = [[rng.choice(alphabet[:-1]) for _ in range(40)] for _ in range(70)]
    Y = [[rng.choice(alphabet[:-1]) for _ in range(40)] for _ in range(8)]
    side = math.isqrt(ops.limits.LOCAL_TABLE_CELLS)
    assert len({w for s in X for w in s}) > side  # X needs more than one run
    calls = _spy_symbol_kernels(monkeypatch)
    with torch.no_grad():
        D = bedl_torch.pairwise_distances(X, Y, cost=cost)
    assert len(calls) >= 2 and all(shape[0] <= side for shape in calls)
    calls.clear()
    monkeypatch.setattr(ops.limits, "LOCAL_TABLE_CELLS", 0)  # no local tables: forward per chunk
    with torch.no_grad():
        D_ref = bedl_torch.pairwise_distances(X, Y, cost=cost)
    assert not calls
    torch.testing.assert_close(D, D_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("tiled", [True, False])
@pytest.mark.parametrize("triangle", [True, False])
def test_matrix_tiles_cover_the_matrix_once_and_count_without_building(monkeypatch, tiled, triangle):
    """matrix_tiles' blocks (runs of objects cut by symbols, or rows of about max_pairs): their
    pairs are every entry of the matrix (i <= j with triangle) exactly once, and each block's
    weight (pairs, sum of |x_i| |y_j|) counted without building them equals the count over
    its built pairs."""
    cost, alphabet = _make_cost("cosine", 40, torch.float64)
    X = _sequences(19, 2, alphabet)
    if tiled:
        monkeypatch.setattr(ops.limits, "LOCAL_TABLE_CELLS", 12 * 12)
    table = ops.FlatTable(X, "X")
    blocks = ops.pairwise.matrix_tiles(table, table, cost, "gap", triangle, 23)
    assert len(blocks) > 4
    sizes = torch.tensor([len(x) + 3 for x in X])  # any per-object weights
    seen = []
    for block in blocks:
        ii, jj = block.pairs()
        assert (block.runs is not None) == tiled
        assert block.weight(sizes, sizes) == (len(ii), int((sizes[ii] * sizes[jj]).sum()))
        seen += list(zip(ii.tolist(), jj.tolist()))
    n = len(X)
    want = [(i, j) for i in range(n) for j in range(n) if j >= i or not triangle]
    assert sorted(seen) == want
