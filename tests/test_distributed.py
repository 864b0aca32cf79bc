"""bedl_torch.distributed: tiled pairwise matrices and k nearest neighbours across processes.

References: ``bedl_torch.pairwise_distances`` on the whole matrix (the values must agree bit for
bit where it computes from one symbol table), brute-force neighbour lists sorted by
(distance, index), and the plan's cells summed pair by pair. Process groups are real gloo groups
of two processes on 127.0.0.1.
"""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import torch.distributed as dist

import bedl_torch as bt
from bedl_torch import distributed as bd
from bedl_torch.costs import SymbolCost
from oracles import random_tree
from process_groups import TIMEOUT, run_ranks

REPO = pathlib.Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------


def _trees(count, seed, max_nodes=12, alphabet="abc"):
    rng = np.random.default_rng(seed)
    return [bt.Tree(*random_tree(int(rng.integers(1, max_nodes + 1)), alphabet, rng))
            for _ in range(count)]


def _strings(count, seed, max_len=4, alphabet="ab"):
    """Short strings over few letters: many equal distances (ties for the neighbour lists)."""
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list(alphabet), size=int(rng.integers(0, max_len + 1))))
            for _ in range(count)]


def _word_sequences(count, seed):
    """Sequences of GloVe words and the cosine costs on their vectors (no whole symbol table:
    the ops build one over the words in use)."""
    words, vectors = bt.datasets.load_glove_subset()
    words, vectors = words[:40], torch.as_tensor(vectors[:40], dtype=torch.float64)
    rng = np.random.default_rng(seed)
    seqs = [[words[i] for i in rng.integers(0, len(words), size=int(rng.integers(0, 9)))]
            for _ in range(count)]
    return seqs, bt.CosineCost(words, vectors)


class _TableCost(SymbolCost):
    """Costs from a fixed table that is not symmetric (the whole square must be computed)."""

    def __init__(self, alphabet, seed):
        super().__init__(alphabet)
        gen = torch.Generator().manual_seed(seed)
        size = len(self.alphabet) + 1
        table = torch.rand(size, size, generator=gen, dtype=torch.float64) + 0.5
        table.fill_diagonal_(0.0)
        self.register_buffer("table", table)

    def symbol_table(self):
        return self.table

    def forward(self, x_idx, y_idx):
        return self.table[x_idx[:, :, None], y_idx[:, None, :]]


def _reference_neighbours(D, k, exclude_self):
    """Brute force: per row the k smallest (distance, index) pairs."""
    D = np.asarray(D, dtype=np.float64)
    dist_rows, index_rows = [], []
    for i, row in enumerate(D):
        order = sorted((j for j in range(len(row)) if not (exclude_self and j == i)),
                       key=lambda j: (row[j], j))[:k]
        dist_rows.append([row[j] for j in order])
        index_rows.append(order)
    return np.array(dist_rows), np.array(index_rows, dtype=np.int64)


def _tile_block(D, tile):
    return np.asarray(D)[tile.r0: tile.r1, tile.c0: tile.c1]


# ---------------------------------------------------------------------------
# Groups of processes
# ---------------------------------------------------------------------------


def _run_ranks(scenario, args, tmp_path, world=2, backend="gloo"):
    return run_ranks("test_distributed", scenario, args, tmp_path, world, backend)


def _scenario_matrices(rank, trees, others, seqs, strings, out_dir):
    """Every result a rank gets (on rank 1 too: the whole matrix)."""
    seq_words, seq_cost = seqs
    res = {
        "trees": bd.pairwise_distances(trees, tile_size=5, progress=False),
        "trees_xy": bd.pairwise_distances(trees, others, tile_size=4, progress=False),
        "seqs": bd.pairwise_distances(seq_words, cost=seq_cost, tile_size=6, progress=False),
        "seqs_xy": bd.pairwise_distances(seq_words[:9], seq_words[5:], cost=seq_cost,
                                         tile_size=4, progress=False),
        "default_tiles": bd.pairwise_distances(trees, progress=False),
    }
    M = bd.pairwise_distances(trees, tile_size=5, out=os.path.join(out_dir, "D.npy"),
                              progress=False)
    res["file_type"] = (type(M).__name__, bool(M.flags.writeable))
    res["file"] = np.array(M)
    res["knn"] = bd.kneighbors(strings, k=4, tile_size=6)
    res["knn_xy"] = bd.kneighbors(strings[:13], strings[5:], k=5, tile_size=4)
    # the search engine's blocks shared among the ranks (2 rows each)
    res["knn_blocks"] = bd.kneighbors(trees, k=3, block_size=2, return_stats=True)
    res["radius"] = bd.radius_neighbors(strings, radius=4.0, block_size=3, return_stats=True)
    res["radius_xy"] = bd.radius_neighbors(trees, others, radius=6.0, block_size=2)
    res["knn_pseudo"] = bd.kneighbors(strings, k=3, mode="pseudo", tile_size=5)
    # no lower bound: the matrix's tiles shared among the ranks
    res["knn_all_pairs"] = bd.kneighbors(trees, k=3, bounds=(), return_stats=True)
    res["knn_all_pairs_seqs"] = bd.kneighbors(seq_words, k=2, cost=seq_cost, bounds=())
    res["radius_all_pairs"] = bd.radius_neighbors(trees, radius=5.0, bounds=(), return_stats=True)
    res["radius_all_pairs_xy"] = bd.radius_neighbors(trees, others, radius=6.0, bounds=())
    # a collection prepared once, queried across the ranks
    index = bd.NeighborIndex(trees)
    res["index_knn"] = index.kneighbors(others, k=3, block_size=4, return_stats=True)
    res["index_self"] = index.kneighbors(k=2)
    res["index_radius"] = index.radius_neighbors(others, radius=6.0, block_size=3)
    res["index_radius_self"] = index.radius_neighbors(radius=4.0)
    return res


def _stopping_after(stop_after, done):
    """``bd.problem.tile_values`` that raises KeyboardInterrupt once ``stop_after`` tiles are done
    (their names appended to ``done``)."""
    real = bd.problem.tile_values

    def stopping(problem, tile):
        if len(done) == stop_after:
            raise KeyboardInterrupt
        done.append(tile.name)
        return real(problem, tile)

    return stopping


def _scenario_resume(rank, trees, out_dir, stop_after):
    """A run stopped by KeyboardInterrupt on both ranks after ``stop_after`` tiles each, then
    the same call with resume=True; a resume refused; an error on rank 1 reaching rank 0."""
    path = os.path.join(out_dir, "D.npy")
    done = []
    real, bd.problem.tile_values = bd.problem.tile_values, _stopping_after(stop_after, done)
    try:
        bd.pairwise_distances(trees, tile_size=4, out=path, progress=False)
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    dist.barrier()
    res = {"interrupted": interrupted, "first_run": list(done),
           "partial": np.load(path).copy(), "markers": bd.npy_file.finished_tiles(path)}
    dist.barrier()  # every rank has read the partial state before the resume writes more

    computed = []

    def counting(problem, tile):
        computed.append(tile.name)
        return real(problem, tile)

    bd.problem.tile_values = counting
    res["resumed"] = np.array(bd.pairwise_distances(trees, tile_size=4, out=path, resume=True,
                                                    progress=False))
    res["second_run"] = list(computed)
    bd.problem.tile_values = real

    try:
        bd.pairwise_distances(trees[:-1], tile_size=4, out=path, resume=True, progress=False)
        res["refused"] = None
    except ValueError as error:
        res["refused"] = str(error)

    def failing(problem, tile):
        raise ValueError("tile failed on purpose")

    bd.problem.tile_values = failing if rank == 1 else real
    try:
        bd.pairwise_distances(trees, tile_size=4, progress=False)
        res["failure"] = None
    except (ValueError, RuntimeError) as error:
        res["failure"] = (type(error).__name__, str(error))
    bd.problem.tile_values = real
    return res


def _scenario_cuda(rank, trees):
    cost = bt.EuclideanCost(list("abc"), dtype=torch.float64, device="cuda")
    D = bd.pairwise_distances(trees, cost=cost, tile_size=5, progress=False)
    return {"device": D.device.type, "D": D.cpu(), "knn": bd.kneighbors(trees, k=3, cost=cost,
                                                                         tile_size=5)}


# ---------------------------------------------------------------------------
# Tiles and their assignment
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("symmetric,nx,ny", [(True, 11, 11), (False, 11, 7), (False, 3, 12)])
def test_plan_covers_every_entry_once_and_counts_cells_pair_by_pair(symmetric, nx, ny):
    rng = np.random.default_rng(nx * 100 + ny)
    xs = rng.integers(0, 9, size=nx).tolist()
    ys = xs if symmetric else rng.integers(0, 9, size=ny).tolist()
    tiles = bd.plan_tiles(xs, ys, 4, symmetric)
    covered = np.zeros((nx, len(ys)), dtype=int)
    for t in tiles:
        pairs = [(i, j) for i in range(t.r0, t.r1) for j in range(t.c0, t.c1)
                 if not (t.triangle and j < i)]
        assert t.cells == sum((xs[i] + 1) * (ys[j] + 1) for i, j in pairs)
        for i, j in pairs:
            covered[i, j] += 1
            if t.triangle or t.mirrored:
                if i != j:
                    covered[j, i] += 1
        assert t.mirrored == (symmetric and t.row != t.col)
        assert t.triangle == (symmetric and t.row == t.col)
    assert (covered == 1).all()


def test_assignment_is_largest_first_to_least_loaded_rank():
    tiles = [bd.Tile(0, c, 0, 1, c, c + 1, False, False, cells)
             for c, cells in enumerate([7, 10, 1, 9, 8])]
    shares = bd.assign_tiles(tiles, 2)
    # 10 -> r0, 9 -> r1, 8 -> r1 (9 < 10), 7 -> r0 (10 < 17), 1 -> r0 (17 = 17: lower rank)
    assert [[t.cells for t in s] for s in shares] == [[10, 7, 1], [9, 8]]
    assert bd.assign_tiles(tiles, 2)[0][0] is shares[0][0]  # deterministic
    assert [len(s) for s in bd.assign_tiles(tiles, 7)] == [1, 1, 1, 1, 1, 0, 0]


def test_assignment_balances_cells_not_pairs():
    sizes = [60] * 4 + [1] * 60  # the first tile holds half the cells in 16 of 2,000 pairs
    tiles = bd.plan_tiles(sizes, sizes, 4, True)
    shares = bd.assign_tiles(tiles, 2)
    loads = [sum(t.cells for t in s) for s in shares]
    pairs = [sum(t.shape[0] * t.shape[1] for t in s) for s in shares]
    assert abs(loads[0] - loads[1]) <= max(t.cells for t in tiles)
    assert abs(loads[0] - loads[1]) < 0.05 * sum(loads)
    assert max(pairs) > 2 * min(pairs)  # equal cells are far from equal pair counts here


def test_balanced_shares_split_every_index_once_by_weight():
    from bedl_torch.distributed.tiles import balanced_shares

    weights = [7, 10, 1, 9, 8]
    # 10 -> r0, 9 -> r1, 8 -> r1, 7 -> r0, 1 -> r0 (17 = 17: the lower rank)
    assert balanced_shares(weights, 2) == [[1, 0, 2], [3, 4]]
    assert balanced_shares([], 3) == [[], [], []]


@pytest.mark.parametrize("kind", ["trees", "sequences"])
def test_search_shares_give_every_rank_work_and_cover_the_search_once(kind):
    """A search that fits one engine block (here 60 objects) is shared so that every rank gets
    some (before, rank 1 got none): query rows in contiguous ranges of about equal DP cells,
    the all-pairs blocks cut to several per rank and balanced by cells; the all-pairs parts
    merged give the single answer with stats that sum to the whole."""
    from types import SimpleNamespace
    from bedl_torch.distributed.search import _row_range, _tile_shares
    from bedl_torch.search.merge import merge_nearest
    from bedl_torch.search.problem import SearchProblem, merge_stats
    from bedl_torch.search.tiles import knn_all_pairs

    X = _trees(60, 31, max_nodes=20) if kind == "trees" else _strings(60, 31, max_len=12)
    problem = SearchProblem(X, None, None)
    ranks = [SimpleNamespace(rank=r, size=2) for r in range(2)]
    sizes = [n + 1 for n in problem.x_table.lengths.tolist()]
    for triangle in (False, True):
        def cells(i):  # row i against every column, or the columns after it
            return sizes[i] * sum(sizes[i + 1:] if triangle else sizes)

        for size in (2, 3):
            bounds = [_row_range(problem, SimpleNamespace(rank=r, size=size), triangle) for r in range(size)]
            assert bounds[0][0] == 0 and bounds[-1][1] == len(X)
            assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))  # contiguous, in rank order
            assert all(r1 > r0 for r0, r1 in bounds)  # every rank gets rows
            loads = [sum(cells(i) for i in range(r0, r1)) for r0, r1 in bounds]
            assert max(loads) - min(loads) <= 2 * max(cells(i) for i in range(len(X)))

    tiles = [_tile_shares(problem, g) for g in ranks]
    blocks = [b for b, _, _ in tiles]
    n_blocks = len(list(problem.matrix_blocks(tiles[0][1])))
    assert all(blocks) and not (blocks[0] & blocks[1]) and blocks[0] | blocks[1] == set(range(n_blocks))
    assert tiles[0][2] + tiles[1][2] == len(X) * (len(X) + 1) // 2  # kernel pairs, diagonal included
    parts = [knn_all_pairs(problem, 4, b, max_pairs) for b, max_pairs, _ in tiles]
    d, i = merge_nearest([p[:2] for p in parts], 4)
    d1, i1, stats1 = knn_all_pairs(problem, 4)
    assert torch.equal(d, d1) and torch.equal(i, i1)
    assert merge_stats(*[p[2] for p in parts]) == stats1
    assert stats1["pairs"] == stats1["exact"] == len(X) * (len(X) - 1)
    ref = _reference_neighbours(bt.pairwise_distances(X).numpy(), 4, exclude_self=True)
    assert np.array_equal(d.numpy(), ref[0]) and np.array_equal(i.numpy(), ref[1])


def test_neighbor_index_in_one_process_and_pickled():
    """Without a process group the distributed index answers as bedl_torch.NeighborIndex; a
    pickled one loads with the default group and its options, and checks its queries."""
    import pickle

    Y, X = _trees(20, 40), _trees(5, 41)
    index = bd.NeighborIndex(Y, progress=False, bounds=("label",))
    want = bt.NeighborIndex(Y, bounds=("label",))
    for got in (index, pickle.loads(pickle.dumps(index))):
        assert got.group is None and got.progress is False and len(got) == 20
        assert all(torch.equal(a, b) for a, b in zip(got.kneighbors(X, k=4), want.kneighbors(X, k=4)))
        assert all(torch.equal(a, b) for a, b in zip(got.radius_neighbors(radius=5.0),
                                                     want.radius_neighbors(radius=5.0)))
        with pytest.raises(ValueError, match="k"):
            got.kneighbors(X, k=21)
        with pytest.raises(ValueError, match="NaN"):
            got.radius_neighbors(X, radius=float("nan"))


def test_bad_arguments():
    trees = _trees(6, 0)
    with pytest.raises(ValueError, match="tile_size"):
        bd.pairwise_distances(trees, tile_size=0, progress=False)
    with pytest.raises(TypeError, match="tile_size must be an int"):
        bd.pairwise_distances(trees, tile_size=2.5, progress=False)
    with pytest.raises(ValueError, match="resume=True needs out"):
        bd.pairwise_distances(trees, resume=True, progress=False)
    with pytest.raises(ValueError, match="not initialised"):
        bd.pairwise_distances(trees, group=object(), progress=False)
    with pytest.raises(TypeError, match="SymbolCost"):
        bd.pairwise_distances(trees, cost="unit", progress=False)
    with pytest.raises(TypeError, match="both hold trees or both sequences"):
        bd.pairwise_distances(trees, ["ab"], progress=False)
    with pytest.raises(ValueError, match="labels missing"):
        bd.pairwise_distances(trees, cost=bt.UnitCost(["a"]), progress=False)
    with pytest.raises(ValueError, match="k must be between 1 and 5"):
        bd.kneighbors(trees, k=6)
    with pytest.raises(ValueError, match="k must be between 1 and 2"):
        bd.kneighbors(trees, trees[:2], k=3)
    with pytest.raises(TypeError, match="k must be an int"):
        bd.kneighbors(trees, k=2.0)


# ---------------------------------------------------------------------------
# One process (no process group)
# ---------------------------------------------------------------------------


def test_single_process_matrices_equal_pairwise_distances_bit_for_bit():
    trees, others = _trees(23, 1), _trees(9, 2)
    seqs, cosine = _word_sequences(25, 3)
    strings = _strings(17, 4, max_len=6, alphabet="abcd")
    euclid = bt.EuclideanCost(list("abcd"), torch.randn(4, 3, dtype=torch.float64))
    table = _TableCost(list("abc"), 5)
    cases = [
        ((trees,), {}),
        ((trees, others), {}),
        ((seqs,), {"cost": cosine}),
        ((seqs[:7], seqs[3:]), {"cost": cosine}),
        ((strings,), {"cost": euclid}),
        ((trees,), {"cost": table}),  # not symmetric: the whole square in tiles
        ((trees[:9], others), {"cost": table}),
        ((trees[:9], others), {"symmetric": True}),  # square X x Y, upper triangle mirrored
        ((trees,), {"symmetric": False}),
        ((trees,), {"chunk_size": 7}),
        ((trees[:1],), {}),
        ((trees[:8], others[:5]), {}),
        ((seqs[:9],), {"cost": cosine}),
        (([],), {}),
        ((strings,), {}),  # unit costs on bit vectors: tiles written without pair lists
        ((strings,), {"symmetric": False}),
        ((strings[:7], strings[3:]), {"cost": bt.UnitCost(list("abcd"), dtype=torch.float32)}),
    ]
    for args, kw in cases:
        expected = bt.pairwise_distances(*args, **kw).detach()
        sizes = (1, 4, 100, None) if len(args[0]) < 10 else (4, 100, None)
        if "cost" in kw and kw["cost"] is cosine and len(args[0]) >= 10:
            sizes = (6, None)  # rebuilds its symbol table per tile: slow on a busy machine
        for tile_size in sizes:
            got = bd.pairwise_distances(*args, tile_size=tile_size, progress=False, **kw)
            assert got.dtype == expected.dtype and got.shape == expected.shape
            assert torch.equal(got, expected), (kw, tile_size)
    assert not torch.equal(bt.pairwise_distances(trees, cost=table),
                           bt.pairwise_distances(trees, cost=table).T)  # really asymmetric


def test_chunked_modes_agree_to_rounding():
    """Where bedl_torch.pairwise_distances computes chunk by chunk with chunk-own costs (more
    than 1024 symbols in use and no whole table; pseudo mode's padded sums) its values depend on
    the chunks in the last bits; the tiles agree to rounding."""
    rng = np.random.default_rng(6)
    alphabet = [f"w{i}" for i in range(3000)]  # beyond EuclideanCost.table_limit: no table
    seqs = [[alphabet[i] for i in rng.integers(0, 3000, size=int(rng.integers(20, 40)))]
            for _ in range(45)]
    assert len({w for s in seqs for w in s}) > 1024
    cost = bt.EuclideanCost(alphabet, torch.randn(3000, 4, dtype=torch.float64))
    with torch.no_grad():
        expected = bt.pairwise_distances(seqs, cost=cost)
    got = bd.pairwise_distances(seqs, cost=cost, tile_size=10, progress=False)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12, atol=0)

    trees = _trees(20, 7)
    euclid = bt.EuclideanCost(list("abc"), torch.randn(3, 2, dtype=torch.float64))
    reference = bt.EuclideanCost(list("abc"), torch.randn(3, 2, dtype=torch.float64))
    kw = dict(cost=euclid, mode="pseudo", reference_cost=reference)
    with torch.no_grad():
        expected = bt.pairwise_distances(trees, **kw)
    got = bd.pairwise_distances(trees, tile_size=6, progress=False, **kw)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12, atol=0)
    exact = bt.pairwise_distances(trees, cost=euclid).detach()
    assert (got - exact).abs().max() > 1e-3  # P frozen at other costs: not the exact distance


def test_no_gradient_reaches_the_cost():
    trees = _trees(8, 8)
    cost = bt.EuclideanCost(list("abc"), torch.randn(3, 2, dtype=torch.float64))
    D = bd.pairwise_distances(trees, cost=cost, tile_size=3, progress=False)
    assert not D.requires_grad


def test_out_file_holds_the_matrix(tmp_path):
    trees = _trees(21, 9)
    expected = bt.pairwise_distances(trees).numpy()
    path = tmp_path / "D.npy"
    M = bd.pairwise_distances(trees, tile_size=4, out=path, progress=False)
    assert isinstance(M, np.memmap) and not M.flags.writeable
    assert M.dtype == np.float64 and M.shape == (21, 21)
    assert np.array_equal(np.load(path), expected)
    meta = json.loads((tmp_path / "D.npy.tiles" / "meta.json").read_text())
    assert meta["shape"] == [21, 21] and meta["dtype"] == "<f8" and meta["tile_size"] == 4
    tiles = bd.plan_tiles([len(t) for t in trees], [len(t) for t in trees], 4, True)
    assert bd.npy_file.finished_tiles(str(path)) == sorted(t.name for t in tiles)
    # float32 costs: a float32 file
    euclid = bt.EuclideanCost(list("abc"), torch.randn(3, 2))
    M = bd.pairwise_distances(trees, trees[:5], cost=euclid, tile_size=3, out=tmp_path / "E.npy",
                              progress=False)
    assert M.dtype == np.float32
    assert np.array_equal(M, bt.pairwise_distances(trees, trees[:5], cost=euclid).detach().numpy())


def _interrupted_run(trees, path, stop_after, monkeypatch, **kw):
    real, done = bd.problem.tile_values, []
    monkeypatch.setattr(bd.problem, "tile_values", _stopping_after(stop_after, done))
    with pytest.raises(KeyboardInterrupt):
        bd.pairwise_distances(trees, out=path, progress=False, **kw)
    monkeypatch.setattr(bd.problem, "tile_values", real)
    return done


def test_resume_computes_only_the_missing_tiles_and_gives_the_same_bits(tmp_path, monkeypatch):
    trees = _trees(22, 10)
    expected = bt.pairwise_distances(trees).numpy()
    path = tmp_path / "D.npy"
    first = _interrupted_run(trees, path, 4, monkeypatch, tile_size=5)
    assert sorted(first) == bd.npy_file.finished_tiles(str(path))
    tiles = {t.name: t for t in bd.plan_tiles([len(t) for t in trees], [len(t) for t in trees],
                                               5, True)}
    partial = np.load(path)
    written = np.zeros(partial.shape, dtype=bool)
    for name in first:  # a marked tile's data (and its mirror) is in the file
        t = tiles[name]
        assert np.array_equal(_tile_block(partial, t), _tile_block(expected, t))
        assert np.array_equal(partial[t.c0: t.c1, t.r0: t.r1], expected[t.c0: t.c1, t.r0: t.r1])
        written[t.r0: t.r1, t.c0: t.c1] = written[t.c0: t.c1, t.r0: t.r1] = True
    assert (partial[~written] == 0).all() and (expected[~written] != 0).any()

    real = bd.problem.tile_values
    computed = []
    monkeypatch.setattr(bd.problem, "tile_values",
                        lambda problem, tile: computed.append(tile.name) or real(problem, tile))
    M = bd.pairwise_distances(trees, tile_size=5, out=path, resume=True, progress=False)
    assert sorted(computed) == sorted(set(tiles) - set(first))
    assert np.array_equal(M, expected)
    computed.clear()
    M = bd.pairwise_distances(trees, out=path, resume=True, progress=False)  # tiles of 5 kept
    assert computed == [] and np.array_equal(M, expected)
    # without resume everything is computed again, the old record dropped first
    bd.pairwise_distances(trees, tile_size=5, out=path, progress=False)
    assert sorted(computed) == sorted(tiles)


def test_resume_refuses_another_call(tmp_path, monkeypatch):
    trees = _trees(14, 11)
    path = tmp_path / "D.npy"
    _interrupted_run(trees, path, 2, monkeypatch, tile_size=4)
    with pytest.raises(ValueError, match=r"14x14 <f8 matrix in tiles of 4, this call makes a "
                                         r"13x13 <f8 matrix in tiles of 4 \(shape differs\)"):
        bd.pairwise_distances(trees[:-1], tile_size=4, out=path, resume=True, progress=False)
    with pytest.raises(ValueError, match="tile_size differs"):
        bd.pairwise_distances(trees, tile_size=5, out=path, resume=True, progress=False)
    with pytest.raises(ValueError, match="dtype differs"):
        euclid32 = bt.EuclideanCost(list("abc"), torch.eye(3, dtype=torch.float32))
        bd.pairwise_distances(trees, cost=euclid32, tile_size=4, out=path, resume=True,
                              progress=False)
    with pytest.raises(ValueError, match="other objects, costs or options"):
        bd.pairwise_distances(trees[1:] + trees[:1], tile_size=4, out=path, resume=True,
                              progress=False)
    with pytest.raises(ValueError, match="other objects, costs or options"):
        euclid = bt.EuclideanCost(list("abc"), 2 * torch.eye(3, dtype=torch.float64))
        bd.pairwise_distances(trees, cost=euclid, tile_size=4, out=path, resume=True,
                              progress=False)
    # the refused calls left the partial file and its record alone: the right call finishes it
    assert len(bd.npy_file.finished_tiles(str(path))) == 2
    M = bd.pairwise_distances(trees, tile_size=4, out=path, resume=True, progress=False)
    assert np.array_equal(M, bt.pairwise_distances(trees).numpy())


def test_resume_without_a_previous_run_starts_afresh(tmp_path):
    trees = _trees(9, 12)
    M = bd.pairwise_distances(trees, tile_size=4, out=tmp_path / "new.npy", resume=True,
                              progress=False)
    assert np.array_equal(M, bt.pairwise_distances(trees).numpy())


def test_kneighbors_equal_brute_force_with_ties():
    strings = _strings(31, 13)
    D = bt.pairwise_distances(strings).numpy()
    assert len(np.unique(D)) <= 5  # mostly ties
    for k in (1, 4, 30):
        for tile_size in (1, 7, None):
            d, i = bd.kneighbors(strings, k=k, tile_size=tile_size)
            ref_d, ref_i = _reference_neighbours(D, k, exclude_self=True)
            assert d.dtype == torch.float64 and i.dtype == torch.int64
            assert np.array_equal(d.numpy(), ref_d) and np.array_equal(i.numpy(), ref_i)
    others = _strings(12, 14)
    D = bt.pairwise_distances(strings, others).numpy()
    d, i = bd.kneighbors(strings, others, k=12, tile_size=5)
    ref_d, ref_i = _reference_neighbours(D, 12, exclude_self=False)
    assert np.array_equal(d.numpy(), ref_d) and np.array_equal(i.numpy(), ref_i)
    # an asymmetric cost: rows are X's objects against all others
    trees = _trees(15, 15)
    table = _TableCost(list("abc"), 16)
    D = bt.pairwise_distances(trees, cost=table).numpy()
    d, i = bd.kneighbors(trees, k=3, cost=table, tile_size=4)
    ref_d, ref_i = _reference_neighbours(D, 3, exclude_self=True)
    assert np.array_equal(d.numpy(), ref_d) and np.array_equal(i.numpy(), ref_i)


# ---------------------------------------------------------------------------
# Two processes (gloo on localhost)
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_rank_results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("two_ranks")
    data = {"trees": _trees(23, 20), "others": _trees(10, 21), "seqs": _word_sequences(19, 22),
            "strings": _strings(26, 23)}
    results = _run_ranks("_scenario_matrices",
                         (data["trees"], data["others"], data["seqs"], data["strings"], str(tmp)),
                         tmp)
    return data, results


def test_two_ranks_get_the_whole_matrix_bit_for_bit(two_rank_results):
    data, results = two_rank_results
    trees, others = data["trees"], data["others"]
    seqs, cost = data["seqs"]
    expected = {"trees": bt.pairwise_distances(trees),
                "trees_xy": bt.pairwise_distances(trees, others),
                "seqs": bt.pairwise_distances(seqs, cost=cost).detach(),
                "seqs_xy": bt.pairwise_distances(seqs[:9], seqs[5:], cost=cost).detach(),
                "default_tiles": bt.pairwise_distances(trees)}
    for res in results:
        for key, value in expected.items():
            assert torch.equal(res[key], value), key


def test_two_ranks_write_one_file(two_rank_results):
    data, results = two_rank_results
    expected = bt.pairwise_distances(data["trees"]).numpy()
    for res in results:
        assert res["file_type"] == ("memmap", False)
        assert np.array_equal(res["file"], expected)


def test_two_ranks_search(two_rank_results):
    """kneighbors and radius_neighbors with the rows' blocks shared among two ranks: every
    rank gets the single process's answer; the stats count every entry once."""
    data, results = two_rank_results
    trees, others, strings = data["trees"], data["others"], data["strings"]
    d1, i1, stats1 = bt.kneighbors(trees, k=3, block_size=2, return_stats=True)
    r1 = bt.radius_neighbors(strings, radius=4.0, block_size=3, return_stats=True)
    rxy = bt.radius_neighbors(trees, others, radius=6.0)
    D = bt.pairwise_distances(strings).double()
    n = len(strings)
    want = [(i, j) for i in range(n) for j in range(n) if i != j and float(D[i, j]) <= 4.0]
    for res in results:
        d, i, stats = res["knn_blocks"]
        assert torch.equal(d, d1) and torch.equal(i, i1)
        assert stats["pairs"] == stats1["pairs"] == len(trees) * (len(trees) - 1)
        assert stats["pairs"] == stats["decided_by_label"] + stats["decided_by_traversal"] + stats["exact"]
        r, c, v, st = res["radius"]
        assert all(torch.equal(a, b) for a, b in zip((r, c, v), r1[:3]))
        assert list(zip(r.tolist(), c.tolist())) == want
        assert st["pairs"] == r1[3]["pairs"] == st["exact"] + st["decided_by_label"] + st["decided_by_traversal"]
        assert all(torch.equal(a, b) for a, b in zip(res["radius_xy"], rxy))
    d0, i0, stats0 = bt.kneighbors(trees, k=3, bounds=(), return_stats=True)
    seq_words, seq_cost = data["seqs"]
    ds, js = bt.kneighbors(seq_words, k=2, cost=seq_cost, bounds=())
    n_trees = len(trees)
    for res in results:
        d, i, stats = res["knn_all_pairs"]
        assert torch.equal(d, d0) and torch.equal(i, i0) and torch.equal(d, d1) and torch.equal(i, i1)
        assert stats == stats0 and stats["exact_computed"] == n_trees * (n_trees - 1) // 2
        assert all(torch.equal(a, b) for a, b in zip(res["knn_all_pairs_seqs"], (ds, js)))
    # the distributed index: the answers of one process, stats summed over the ranks
    d3, i3, st3 = bt.kneighbors(others, trees, k=3, return_stats=True)
    self2 = bt.kneighbors(trees, k=2)
    rad = bt.radius_neighbors(others, trees, radius=6.0)
    rad_self = bt.radius_neighbors(trees, radius=4.0)
    assert 0 < len(rad[0]) < len(others) * n_trees and 0 < len(rad_self[0]) < n_trees * (n_trees - 1)
    for res in results:
        d, i, stats = res["index_knn"]
        assert torch.equal(d, d3) and torch.equal(i, i3) and stats["pairs"] == st3["pairs"]
        assert all(torch.equal(a, b) for a, b in zip(res["index_self"], self2))
        assert all(torch.equal(a, b) for a, b in zip(res["index_radius"], rad))
        assert all(torch.equal(a, b) for a, b in zip(res["index_radius_self"], rad_self))
    # no lower bound: the matrix's tiles shared among the ranks, thresholded
    D = bt.pairwise_distances(trees).to(torch.float64)
    Dxy = bt.pairwise_distances(trees, data["others"]).to(torch.float64)
    for res in results:
        r, c, v, stats = res["radius_all_pairs"]
        mask = (D <= 5.0) & ~torch.eye(n_trees, dtype=torch.bool)
        assert torch.equal(torch.stack([r, c]), torch.stack(torch.nonzero(mask, as_tuple=True)))
        assert torch.equal(v, D[mask])
        assert stats["pairs"] == stats["exact"] == n_trees * (n_trees - 1)
        assert stats["exact_computed"] == n_trees * (n_trees - 1) // 2
        r, c, v = res["radius_all_pairs_xy"]
        assert torch.equal(torch.stack([r, c]), torch.stack(torch.nonzero(Dxy <= 6.0, as_tuple=True)))
        assert torch.equal(v, Dxy[Dxy <= 6.0])
    ref = _reference_neighbours(bt.pairwise_distances(strings, mode="pseudo").numpy(), 3, exclude_self=True)
    for res in results:
        d, i = res["knn_pseudo"]
        assert np.array_equal(d.numpy(), ref[0]) and np.array_equal(i.numpy(), ref[1])


def test_two_ranks_kneighbors(two_rank_results):
    data, results = two_rank_results
    strings = data["strings"]
    ref = _reference_neighbours(bt.pairwise_distances(strings).numpy(), 4, exclude_self=True)
    ref_xy = _reference_neighbours(bt.pairwise_distances(strings[:13], strings[5:]).numpy(), 5,
                                   exclude_self=False)
    for res in results:
        for key, (ref_d, ref_i) in (("knn", ref), ("knn_xy", ref_xy)):
            d, i = res[key]
            assert np.array_equal(d.numpy(), ref_d) and np.array_equal(i.numpy(), ref_i), key


def test_two_ranks_resume_after_interrupt(tmp_path):
    trees = _trees(24, 30)
    expected = bt.pairwise_distances(trees).numpy()
    results = _run_ranks("_scenario_resume", (trees, str(tmp_path), 3), tmp_path)
    tiles = bd.plan_tiles([len(t) for t in trees], [len(t) for t in trees], 4, True)
    assert len(tiles) == 21
    first = sorted(results[0]["first_run"] + results[1]["first_run"])
    assert [r["interrupted"] for r in results] == [True, True] and len(first) == 6
    for res in results:
        assert res["markers"] == first
        for t in tiles:  # finished tiles hold their values
            if t.name in first:
                assert np.array_equal(_tile_block(res["partial"], t), _tile_block(expected, t))
        assert np.array_equal(res["resumed"], expected)
    second = sorted(results[0]["second_run"] + results[1]["second_run"])
    assert second == sorted(set(t.name for t in tiles) - set(first))  # nothing recomputed
    for res in results:
        assert "shape differs" in res["refused"]
    assert results[0]["failure"][0] == "RuntimeError" and "rank(s) [1]" in results[0]["failure"][1]
    assert results[1]["failure"] == ("ValueError", "tile failed on purpose")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_nccl_group_with_cuda_costs(tmp_path):
    trees = _trees(17, 40)
    world = min(2, torch.cuda.device_count())
    results = _run_ranks("_scenario_cuda", (trees,), tmp_path, world=world, backend="nccl")
    cost = bt.EuclideanCost(list("abc"), dtype=torch.float64)
    expected = bt.pairwise_distances(trees, cost=cost).detach()
    ref_d, ref_i = _reference_neighbours(expected.numpy(), 3, exclude_self=True)
    for res in results:
        assert res["device"] == "cuda" and torch.equal(res["D"], expected)
        assert np.array_equal(res["knn"][0].numpy(), ref_d)
        assert np.array_equal(res["knn"][1].numpy(), ref_i)


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    return env


def _write_jsonl(path, trees):
    with open(path, "w", encoding="utf-8") as f:
        for t in trees:
            f.write(json.dumps(t.to_json()) + "\n")


def _cli(args, cwd, prefix=(sys.executable, "-m", "bedl_torch")):
    return subprocess.run([*prefix, *args], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=TIMEOUT)


def _torchrun(args, cwd):
    """``torchrun --standalone --nproc_per_node=2 -m bedl_torch ARGS``, finished with exit code 0
    (skips where a local group cannot start here)."""
    run = _cli(["--standalone", "--nproc_per_node=2", "-m", "bedl_torch", *args], cwd,
               prefix=(sys.executable, "-m", "torch.distributed.run"))
    if run.returncode != 0 and ("EADDRINUSE" in run.stderr or "rendezvous" in run.stderr.lower()):
        pytest.skip(f"torchrun could not start a local group here: {run.stderr[-300:]}")
    assert run.returncode == 0, run.stderr
    return run


_INTERRUPTING_CLI = textwrap.dedent("""
    import sys
    import bedl_torch.distributed as bd
    from bedl_torch.__main__ import main

    real, done = bd.problem.tile_values, []

    def stopping(problem, tile):
        if len(done) == 2:
            raise KeyboardInterrupt
        done.append(tile.name)
        return real(problem, tile)

    bd.problem.tile_values = stopping
    sys.exit(main(sys.argv[1:]))
""")


def test_cli_one_process_interrupt_and_resume(tmp_path, monkeypatch, capsys):
    trees = _trees(17, 50)
    expected = bt.pairwise_distances(trees).numpy()
    _write_jsonl(tmp_path / "trees.jsonl", trees)
    args = ["pairwise", "trees.jsonl", "--out", "D.npy", "--tile-size", "5", "--no-progress"]
    run = _cli(args, tmp_path, prefix=(sys.executable, "-c", _INTERRUPTING_CLI))
    assert run.returncode == 130, run.stderr
    assert "interrupted: 2 tiles of D.npy finished" in run.stderr
    assert len(bd.npy_file.finished_tiles(str(tmp_path / "D.npy"))) == 2
    run = _cli(args + ["--resume"], tmp_path)
    assert run.returncode == 0, run.stderr
    assert "D.npy: 17 x 17 float64" in run.stdout
    assert np.array_equal(np.load(tmp_path / "D.npy"), expected)
    # errors end the command with a line on stderr (in this process: no group is started)
    from bedl_torch.__main__ import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    capsys.readouterr()
    assert main(["pairwise", "missing.jsonl", "--out", "E.npy"]) == 2
    assert "'missing.jsonl' is neither a data set" in capsys.readouterr().err
    assert main(args + ["--resume", "--tile-size", "6"]) == 2
    assert "cannot resume D.npy" in capsys.readouterr().err


def test_cli_glove_costs_on_word_trees(tmp_path):
    from bedl_torch.evaluation.protocol.data import SentimentCosts

    words, _ = bt.datasets.load_glove_subset()
    rng = np.random.default_rng(51)
    trees = [bt.Tree(*random_tree(int(rng.integers(1, 8)), words[:30], rng)) for _ in range(12)]
    _write_jsonl(tmp_path / "words.jsonl", trees)
    run = _cli(["pairwise", "words.jsonl", "--out", "G.npy", "--cost", "glove", "--no-progress"],
               tmp_path)
    assert run.returncode == 0, run.stderr
    cost, _ = SentimentCosts().make(trees, trees)
    expected = bt.pairwise_distances(trees, cost=cost).detach().numpy()
    assert np.array_equal(np.load(tmp_path / "G.npy"), expected)


def test_cli_two_processes_under_torchrun(tmp_path):
    trees = _trees(19, 52)
    _write_jsonl(tmp_path / "trees.jsonl", trees)
    run = _torchrun(["pairwise", "trees.jsonl", "--out", "D.npy", "--tile-size", "4"], tmp_path)
    assert "D.npy: 19 x 19 float64" in run.stdout and "on 2 process(es)" in run.stdout
    assert np.array_equal(np.load(tmp_path / "D.npy"), bt.pairwise_distances(trees).numpy())


def test_cli_neighbors_under_torchrun(tmp_path):
    """The search across two processes started by torchrun: k-NN and range search equal
    sorting and thresholding the matrix (ties among small trees on two labels)."""
    trees = _trees(21, 53, max_nodes=8, alphabet="ab")
    D = bt.pairwise_distances(trees).numpy()
    _write_jsonl(tmp_path / "trees.jsonl", trees)
    run = _torchrun(["neighbors", "trees.jsonl", "--k", "3", "--out", "nn.npz", "--no-progress"], tmp_path)
    assert "nn.npz: 3 nearest of 21 objects" in run.stdout and "on 2 process(es)" in run.stdout
    with np.load(tmp_path / "nn.npz") as f:
        want_d, want_i = _sorted_matrix_rows(D, 3)
        assert np.array_equal(f["indices"], want_i) and np.array_equal(f["distances"], want_d)
    radius = float(np.median(D))
    _torchrun(["neighbors", "trees.jsonl", "--radius", str(radius), "--out", "r.npz", "--no-progress"],
              tmp_path)
    rows, cols = _matrix_entries_within(D, radius)
    with np.load(tmp_path / "r.npz") as f:
        assert len(rows) > 0 and np.array_equal(f["rows"], rows) and np.array_equal(f["cols"], cols)
        assert np.array_equal(f["distances"], D[rows, cols])


def _matrix_entries_within(D, radius):
    """Reference range search of a square matrix: ``(rows, cols)`` of the entries ``<= radius``,
    row-major, the diagonal left out."""
    mask = D <= radius
    np.fill_diagonal(mask, False)
    return np.nonzero(mask)


def _sorted_matrix_rows(D, k):
    """Reference k-NN of a square matrix: rows by (distance, index), the diagonal left out."""
    D = np.array(D, dtype=np.float64)
    np.fill_diagonal(D, np.inf)
    order = np.lexsort((np.broadcast_to(np.arange(D.shape[1]), D.shape), D), axis=1)[:, :k]
    return np.take_along_axis(D, order, 1), order


def test_cli_neighbors_in_one_process(tmp_path, monkeypatch, capsys):
    from bedl_torch.__main__ import main

    trees = _trees(23, 54, max_nodes=8, alphabet="ab")  # small trees on two labels: ties
    D = bt.pairwise_distances(trees).numpy()
    _write_jsonl(tmp_path / "trees.jsonl", trees)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert main(["neighbors", "trees.jsonl", "--k", "4", "--out", "nn", "--no-progress"]) == 0
    assert "nn: 4 nearest of 23 objects" in capsys.readouterr().out
    with np.load(tmp_path / "nn") as f:  # the name as given
        want_d, want_i = _sorted_matrix_rows(D, 4)
        assert np.array_equal(f["indices"], want_i) and np.array_equal(f["distances"], want_d)
    radius = float(np.median(D))
    assert main(["neighbors", "trees.jsonl", "--radius", str(radius), "--out", "r.npz",
                 "--no-progress"]) == 0
    rows, cols = _matrix_entries_within(D, radius)
    with np.load(tmp_path / "r.npz") as f:
        assert np.array_equal(f["rows"], rows) and np.array_equal(f["cols"], cols)
        assert np.array_equal(f["distances"], D[rows, cols]) and len(rows) > 0
    capsys.readouterr()
    assert main(["neighbors", "trees.jsonl", "--k", "23", "--out", "bad.npz"]) == 2
    assert "neighbors: error: k must be between 1 and 22" in capsys.readouterr().err
    assert not (tmp_path / "bad.npz").exists()
    with pytest.raises(SystemExit):  # --k or --radius, not both
        main(["neighbors", "trees.jsonl", "--k", "2", "--radius", "1", "--out", "x.npz"])


def test_cli_neighbors_checks_its_output_before_searching(tmp_path, monkeypatch, capsys):
    """A missing folder or a folder given as --out fails at once, not after the search."""
    from bedl_torch.__main__ import main
    import bedl_torch.distributed.cli as cli

    _write_jsonl(tmp_path / "trees.jsonl", _trees(5, 55, max_nodes=4, alphabet="ab"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(cli, "kneighbors", None)  # calling the search would be a TypeError
    assert main(["neighbors", "trees.jsonl", "--k", "2", "--out", "missing/nn.npz"]) == 2
    assert f"the folder {str(tmp_path / 'missing')!r} does not exist" in capsys.readouterr().err
    (tmp_path / "taken").mkdir()
    assert main(["neighbors", "trees.jsonl", "--k", "2", "--out", "taken"]) == 2
    assert "--out 'taken' is a folder" in capsys.readouterr().err


def test_cli_with_a_saved_bedl_model(tmp_path, monkeypatch, capsys):
    """--model: the matrix and the neighbours under a saved model's learned costs, equal to the
    model's own pairwise_distances and kneighbors; unseen labels, a missing or foreign file and
    --model with --cost are errors."""
    from bedl_torch.__main__ import main
    from bedl_torch.learning import BEDL

    trees = _trees(16, 56, max_nodes=7, alphabet="abcd")
    labels = [int(t.labels[0] in "ab") for t in trees]
    model = BEDL(max_rounds=2).fit(trees, labels)
    model.save(tmp_path / "model.pt")
    _write_jsonl(tmp_path / "trees.jsonl", trees)
    _write_jsonl(tmp_path / "unseen.jsonl", trees[:3] + [bt.Tree(["a", "z"], [[1], []])])
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    D = model.pairwise_distances(trees)
    assert not np.array_equal(D, bt.pairwise_distances(trees).numpy())  # learned, not unit costs
    assert main(["pairwise", "trees.jsonl", "--model", "model.pt", "--out", "D.npy", "--no-progress"]) == 0
    assert np.array_equal(np.load(tmp_path / "D.npy"), D)
    assert main(["neighbors", "trees.jsonl", "--model", "model.pt", "--k", "3", "--out", "nn.npz",
                 "--no-progress"]) == 0
    want_d, want_i = model.kneighbors(trees, k=3)
    with np.load(tmp_path / "nn.npz") as f:
        assert np.array_equal(f["indices"], want_i) and np.array_equal(f["distances"], want_d)
    capsys.readouterr()
    assert main(["neighbors", "unseen.jsonl", "--model", "model.pt", "--k", "1", "--out", "u.npz"]) == 2
    assert "labels not seen in training: 'z'" in capsys.readouterr().err
    assert main(["pairwise", "trees.jsonl", "--model", "missing.pt", "--out", "E.npy"]) == 2
    assert "--model 'missing.pt': no such file" in capsys.readouterr().err
    assert main(["pairwise", "trees.jsonl", "--model", "other.pt", "--out", "E.npy"]) == 2
    assert "--model 'other.pt': not a model saved with BEDL.save" in capsys.readouterr().err
    (tmp_path / "text.pt").write_text("not a torch file")
    assert main(["neighbors", "trees.jsonl", "--model", "text.pt", "--k", "1", "--out", "E.npz"]) == 2
    assert "--model 'text.pt': not a model saved with BEDL.save" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # --model or --cost, not both
        main(["pairwise", "trees.jsonl", "--model", "model.pt", "--cost", "glove", "--out", "E.npy"])


def test_cli_neighbors_two_processes_under_torchrun(tmp_path):
    trees = _trees(21, 55)
    _write_jsonl(tmp_path / "trees.jsonl", trees)
    run = _torchrun(["neighbors", "trees.jsonl", "--k", "3", "--out", "nn.npz"], tmp_path)
    assert run.stdout.count("nn.npz: 3 nearest of 21 objects") == 1  # rank 0 alone
    assert "on 2 process(es)" in run.stdout
    want_d, want_i = _sorted_matrix_rows(bt.pairwise_distances(trees).numpy(), 3)
    with np.load(tmp_path / "nn.npz") as f:
        assert np.array_equal(f["indices"], want_i) and np.array_equal(f["distances"], want_d)


# ---------------------------------------------------------------------------
# Memory bound
# ---------------------------------------------------------------------------

# RLIMIT_AS is no use here: torch and glibc reserve large virtual areas, and the memmap that
# comes back maps the whole file (page cache, not process memory). RLIMIT_DATA limits what the
# process itself allocates (heap and private writable mappings), i.e. where an N x N matrix or
# an accumulation of tiles would live; the control run without out= must hit it.
_MEMORY_SCRIPT = textwrap.dedent("""
    import random, resource, sys
    import numpy as np, torch
    torch.set_num_threads(1)
    import bedl_torch as bt
    from bedl_torch import distributed as bd

    n, use_file, out = int(sys.argv[1]), sys.argv[2] == "file", sys.argv[3]
    rng = random.Random(0)
    X = ["".join(rng.choice("ab") for _ in range(rng.randint(0, 3))) for _ in range(n)]
    # warm up both paths (allocator arenas, thread pools), then measure the data segment
    bd.pairwise_distances(X[:300], tile_size=64, out=out + ".warm.npy", progress=False)
    bd.pairwise_distances(X[:300], tile_size=64, progress=False)
    data = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status")
                if l.startswith("VmData"))
    limit = data + n * n * 8 // 4  # a quarter of the matrix on top of what is in use
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    try:
        if use_file:
            D = bd.pairwise_distances(X, tile_size=128, out=out, progress=False)
        else:
            D = bd.pairwise_distances(X, tile_size=128, progress=False)
    except (MemoryError, RuntimeError) as error:
        print("out of memory:", str(error)[:200])
        sys.exit(3)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
    rows = np.arange(0, n, 97)
    check = bt.pairwise_distances([X[i] for i in rows], X).numpy()
    sys.exit(0 if np.array_equal(np.asarray(D)[rows], check) else 4)
""")


def test_memory_per_rank_is_bounded_by_the_tile_with_out(tmp_path):
    # a 72 MB matrix; the limit leaves 18 MB above the warmed-up process, and tiles of 128 x 128
    # take a few MB (their pair indices and values, and what the allocator keeps of them)
    n = 3000
    runs = {}
    for mode in ("file", "memory"):
        runs[mode] = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT, str(n), mode,
                                     str(tmp_path / "D.npy")], env=_env(), capture_output=True,
                                    text=True, timeout=TIMEOUT)
    assert runs["file"].returncode == 0, runs["file"].stdout + runs["file"].stderr
    assert runs["memory"].returncode == 3, runs["memory"].stdout + runs["memory"].stderr
