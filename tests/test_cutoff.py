"""The kernels' distance cutoff (max_distance of ted_symbols / sed_symbols): a pair whose
distance is above its threshold comes back as +inf, every other pair with its exact distance
(the same bits as without a threshold), for any costs; and long sequence pairs in memory linear
in their length."""
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

import bedl_torch as bt
from bedl_torch import _ext
from bedl_torch.ops import FlatTable

from oracles import random_sequence, random_tree

ALPHABET = "abcde"


def _inputs(xs, ys, kind):
    cost = bt.UnitCost(list(ALPHABET))
    xt, yt = FlatTable(xs, "X"), FlatTable(ys, "Y")
    x_lab, y_lab = xt.flat_labels(cost, "error"), yt.flat_labels(cost, "error")
    nx, ny = len(xs), len(ys)
    pair_x = torch.arange(nx).repeat_interleave(ny)
    pair_y = torch.arange(ny).repeat(nx)
    if kind == "tree":
        return (x_lab, xt.sizes, xt.ptr, y_lab, yt.sizes, yt.ptr, pair_x, pair_y)
    return (x_lab, xt.ptr, y_lab, yt.ptr, pair_x, pair_y)


def _run(kind, table, args, max_distance=None):
    op = torch.ops.bedl_torch.ted_symbols if kind == "tree" else torch.ops.bedl_torch.sed_symbols
    return op(table, *args, False, 1e-9, max_distance)[0]


def _objects(kind, count, lo, hi, rng):
    if kind == "tree":
        return [bt.Tree(*random_tree(int(rng.integers(lo, hi + 1)), ALPHABET, rng)) for _ in range(count)]
    return ["".join(random_sequence(int(rng.integers(lo, hi + 1)), ALPHABET, rng)) for _ in range(count)]


def _table(kind_of_costs, rng, dtype):
    S = len(ALPHABET) + 1
    if kind_of_costs == "unit":
        t = np.ones((S, S)) - np.eye(S)
    elif kind_of_costs == "integer":  # many exact ties at the thresholds
        t = rng.integers(0, 3, size=(S, S)).astype(float)
    elif kind_of_costs == "signed":  # negative costs: the cutoff's bounds must still hold
        t = rng.uniform(-0.3, 1.0, size=(S, S))
    else:
        t = rng.random((S, S))
    t[-1, -1] = 0.0
    return torch.tensor(t, dtype=dtype)


@pytest.mark.parametrize("simd", [True, False], ids=["avx2", "scalar"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("costs", ["unit", "integer", "signed", "arbitrary"])
@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_cutoff_keeps_exactly_the_pairs_within(kind, costs, dtype, simd):
    rng = np.random.default_rng([7, len(costs), int(simd)])
    if kind == "tree":
        xs, ys = _objects(kind, 5, 1, 25, rng), _objects(kind, 6, 1, 25, rng)
    else:  # long enough for the four-row strips and the two-row loop
        xs, ys = _objects(kind, 4, 0, 90, rng), _objects(kind, 5, 0, 90, rng)
    table = _table(costs, rng, dtype)
    args = _inputs(xs, ys, kind)
    prev = _ext.simd_enabled()
    _ext.set_simd_enabled(simd)
    try:
        full = _run(kind, table, args)
        values = full.double()
        for threshold in [float(torch.quantile(values, q)) for q in (0.0, 0.3, 0.7)] + [-1.0, math.inf]:
            # thresholds exactly at distances (ties), below all, above all
            limits = torch.full_like(values, threshold)
            got = _run(kind, table, args, limits)
            within = values <= threshold
            assert torch.equal(got[within], full[within])  # the same bits
            assert torch.isinf(got[~within]).all() and (got[~within] > 0).all()
        # per-pair thresholds: each pair's own distance (kept) or just below it (beyond)
        own = _run(kind, table, args, values)
        assert torch.equal(own, full)
        below = values - 1e-3 * (values.abs() + 1)
        assert torch.isinf(_run(kind, table, args, below)).all()
    finally:
        _ext.set_simd_enabled(prev)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("costs", ["unit", "integer", "signed", "arbitrary"])
def test_tree_cutoff_per_pair_thresholds_in_lane_groups(costs, dtype):
    """Pairs of 15-40-node trees that share x (the AVX2 kernel's groups of four; the scalar
    kernel's cutoff in the final table), each with a threshold of its own below, at or above its
    distance, or +inf: the unthresholded bits within, +inf beyond, on both kernels. (A kernel that
    skips tables for some lanes of a group must still compute every table some lane needs.)"""
    rng = np.random.default_rng([11, len(costs)])
    xs, ys = _objects("tree", 3, 15, 40, rng), _objects("tree", 9, 15, 40, rng)
    table = _table(costs, rng, dtype)
    args = _inputs(xs, ys, "tree")
    prev = _ext.simd_enabled()
    try:
        for simd in (True, False):
            _ext.set_simd_enabled(simd)
            full = _run("tree", table, args)
            values = full.double()
            spread = values.abs().max() + 1
            for shift in (-0.3, -0.05, 0.0, 0.05, 0.3):
                limits = values + shift * spread * torch.tensor(rng.random(len(values)))
                limits[rng.random(len(values)) < 0.15] = math.inf
                got = _run("tree", table, args, limits)
                within = values <= limits
                assert torch.equal(got[within], full[within])
                assert torch.isinf(got[~within]).all() and (got[~within] > 0).all()
    finally:
        _ext.set_simd_enabled(prev)


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_cutoff_bad_input(kind):
    rng = np.random.default_rng(0)
    xs, ys = _objects(kind, 2, 1, 5, rng), _objects(kind, 2, 1, 5, rng)
    table = _table("unit", rng, torch.float64)
    args = _inputs(xs, ys, kind)
    op = torch.ops.bedl_torch.ted_symbols if kind == "tree" else torch.ops.bedl_torch.sed_symbols
    with pytest.raises(ValueError, match="max_distance needs need_coopt=False"):
        op(table, *args, True, 1e-9, torch.zeros(4, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"max_distance\[2\] is NaN"):
        op(table, *args, False, 1e-9, torch.tensor([0.0, 1.0, math.nan, 2.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="one entry per pair"):
        op(table, *args, False, 1e-9, torch.zeros(3, dtype=torch.float64))
    with pytest.raises(TypeError, match="max_distance must be float32 or float64"):
        op(table, *args, False, 1e-9, torch.zeros(4, dtype=torch.int64))


_LONG_PAIR = """
import resource, sys, numpy as np, torch, bedl_torch as bt
n = int(sys.argv[1])
rng = np.random.default_rng(0)
x = "".join(rng.choice(list("abcd"), n)); y = "".join(rng.choice(list("abcd"), n))
cost = bt.UnitCost(list("abcd")) if sys.argv[2] == "unit" else bt.EuclideanCost(list("abcd"), torch.eye(4, dtype=torch.float64))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with torch.no_grad():
    d = bt.pairwise_distances([x], [y], cost)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(float(d[0, 0]), (after - before) * 1024)
"""


@pytest.mark.parametrize("costs", ["unit", "table"])
def test_long_sequence_pair_distance_in_linear_memory(costs):
    """Two 20,000-symbol sequences: 4e8 cells, 3.2 GB as a table of doubles; the distance
    alone must not allocate more than a few rows of them (unit costs: bit vectors; a symbol
    table: its rows gathered a few at a time)."""
    n = 20000
    out = subprocess.run([sys.executable, "-c", _LONG_PAIR, str(n), costs], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    distance, grown = out.stdout.split()
    assert 0 < float(distance) <= n
    assert int(grown) < 200 * 2**20, f"the distance of two {n}-symbol sequences grew the process by {grown} bytes"


def test_whole_tables_beyond_the_memory_limit_raise_before_allocating(monkeypatch):
    """P needs a pair's whole table: where it would exceed what the process may use, a
    ValueError names the pair, its sizes and the memory, instead of std::bad_alloc."""
    monkeypatch.setenv("BEDL_TORCH_MEMORY_LIMIT", "1000000")  # 1 MB
    rng = np.random.default_rng(3)
    x, y = "".join(random_sequence(300, ALPHABET, rng)), "".join(random_sequence(250, ALPHABET, rng))
    cost = bt.UnitCost(list(ALPHABET))
    # the distance alone takes rows: fine
    d = bt.pairwise_distances(["ab", x], [y], cost)
    assert float(d[1, 0]) > 0
    with pytest.raises(ValueError, match=r"pair 1 \(\|x\| = 300, \|y\| = 250\): P needs its whole "
                                         r"\(301 x 251\) table, about 0\.00\d+ GB, more than the 0\.001 GB"):
        bt.PairBatch(["ab", x], [y, y]).coopt(cost)
    with pytest.raises(ValueError, match=r"the gradient|P \(for the gradient"):
        table_cost = bt.EuclideanCost(list(ALPHABET))
        bt.pairwise_distances([x, "abc"], [y], table_cost).sum().backward()
    trees = [bt.Tree(*random_tree(260, ALPHABET, rng)), bt.Tree(*random_tree(3, ALPHABET, rng))]
    with pytest.raises(ValueError, match=r"pair 0 \(\|x\| = 260, \|y\| = 260\): the distance needs"):
        bt.pairwise_distances(trees[:1], trees[:1], cost)
    monkeypatch.setenv("BEDL_TORCH_MEMORY_LIMIT", "lots")
    with pytest.raises(ValueError, match="BEDL_TORCH_MEMORY_LIMIT must be a number of bytes > 0, got 'lots'"):
        bt.PairBatch(["ab"], ["abc"]).coopt(cost)


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_table_pair_distances_with_thresholds(kind):
    """The ops' path to the cutoff: each pair's exact distance where it is within its
    threshold, inf or its exact distance above it; the thresholds follow the pairs."""
    from bedl_torch.ops import table_pair_distances

    rng = np.random.default_rng(11)
    xs, ys = _objects(kind, 6, 1, 30, rng), _objects(kind, 5, 1, 30, rng)
    cost = bt.EuclideanCost(list(ALPHABET))
    xt, yt = FlatTable(xs, "X"), FlatTable(ys, "Y")
    ii = torch.tensor([5, 0, 3, 3, 1, 4, 2, 0])
    jj = torch.tensor([0, 4, 1, 2, 3, 0, 4, 0])
    with torch.no_grad():
        _, _, exact = table_pair_distances(xt, yt, ii, jj, cost)
    exact = exact.double()
    limits = exact.clone()
    limits[::2] -= 0.5  # every other pair beyond its threshold
    ri, rj, got = table_pair_distances(xt, yt, ii, jj, cost, max_distance=limits)
    assert torch.equal(ri, ii) and torch.equal(rj, jj)
    got = got.double()
    assert torch.equal(got[1::2], exact[1::2])
    assert ((got[::2] == exact[::2]) | torch.isinf(got[::2])).all()
    assert torch.isinf(got[::2]).any()
    with pytest.raises(ValueError, match="one threshold per pair"):
        table_pair_distances(xt, yt, ii, jj, cost, max_distance=limits[:3])
    with pytest.raises(ValueError, match="max_distance needs mode='exact'"):
        table_pair_distances(xt, yt, ii, jj, cost, mode="pseudo", max_distance=limits)
