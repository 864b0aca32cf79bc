"""Sequence distances under 0/1 replacement costs and unit gaps (unit costs and their
variants): the CPU kernel computes them with bit vectors, 64 table rows a word
(csrc/cpu/seq/unit_bits.h). Checked against an edit-distance DP written here and against the
DP kernel (the fast paths off) bit for bit, at lengths around the word boundaries, with
tables that let several symbols match and with a threshold (max_distance)."""
import math

import numpy as np
import pytest
import torch

import bedl_torch as bt
from bedl_torch import _ext

from conftest import _simd_requested

LENGTHS = [0, 1, 2, 31, 63, 64, 65, 127, 128, 129, 190]


def _reference(x, y, table):
    """The edit distance by the textbook DP (table: rows x's symbols, columns y's, gap last)."""
    m, n = len(x), len(y)
    delete = [float(table[a][-1]) for a in x]
    insert = [float(table[-1][b]) for b in y]
    prev = [0.0]
    for j in range(n):
        prev.append(prev[-1] + insert[j])
    for i in range(1, m + 1):
        cur = [prev[0] + delete[i - 1]] + [0.0] * n
        for j in range(1, n + 1):
            cur[j] = min(prev[j] + delete[i - 1], cur[j - 1] + insert[j - 1],
                         prev[j - 1] + float(table[x[i - 1]][y[j - 1]]))
        prev = cur
    return prev[n]


def _zero_one_table(rows, cols, rng, zeros_per_row):
    """(rows + 1, cols + 1): 1 everywhere but `zeros_per_row` random zeros in each symbol row;
    the gap row and column 1 (their corner 0, unused)."""
    t = np.ones((rows + 1, cols + 1))
    for r in range(rows):
        t[r, rng.choice(cols, size=min(zeros_per_row, cols), replace=False)] = 0.0
    t[-1, -1] = 0.0
    return t


def _flat(seqs):
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.int64)
    ptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
    labels = torch.tensor([v for s in seqs for v in s], dtype=torch.int64)
    return labels, ptr


def _distances(table, xs, ys, max_distance=None):
    x_lab, x_ptr = _flat(xs)
    y_lab, y_ptr = _flat(ys)
    pair_x = torch.arange(len(xs)).repeat_interleave(len(ys))
    pair_y = torch.arange(len(ys)).repeat(len(xs))
    return torch.ops.bedl_torch.sed_symbols(table, x_lab, x_ptr, y_lab, y_ptr, pair_x, pair_y, False, 1e-9,
                                           max_distance)[0]


def _both_paths(table, xs, ys, max_distance=None):
    """As the session runs (bit vectors unless BEDL_TORCH_SIMD=0), and on the DP alone."""
    try:
        fast = _distances(table, xs, ys, max_distance)
        _ext.set_simd_enabled(False)
        slow = _distances(table, xs, ys, max_distance)
    finally:
        _ext.set_simd_enabled(_simd_requested())
    return fast, slow


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("zeros_per_row", [1, 3], ids=["one-match", "several-matches"])
def test_distances_equal_the_dp_at_word_boundaries(dtype, zeros_per_row):
    rng = np.random.default_rng(zeros_per_row)
    rows, cols = 4, 5  # x and y from different symbol sets (a rectangular table)
    t = _zero_one_table(rows, cols, rng, zeros_per_row)
    xs = [list(rng.integers(0, rows, size=L)) for L in LENGTHS]
    ys = [list(rng.integers(0, cols, size=L)) for L in LENGTHS]
    table = torch.tensor(t, dtype=dtype)
    fast, slow = _both_paths(table, xs, ys)
    expected = torch.tensor([_reference(x, y, t) for x in xs for y in ys], dtype=dtype)
    assert torch.equal(fast, expected)
    assert torch.equal(fast, slow)


def test_unit_costs_on_real_sized_alphabets_and_repeats():
    """UnitCost's own table (one zero per row, on the diagonal) through the public API, with
    sequences made of one repeated symbol (long carries through the words) and of all symbols."""
    rng = np.random.default_rng(7)
    k = 40
    seqs = [[0] * 150, [0] * 149 + [1], list(range(k)) * 3, list(rng.integers(0, k, size=70)),
            list(rng.integers(0, 3, size=130)), [], [5]]
    cost = bt.UnitCost(list(range(k)))
    fast = bt.pairwise_distances(seqs, cost=cost).detach()
    try:
        _ext.set_simd_enabled(False)
        slow = bt.pairwise_distances(seqs, cost=cost).detach()
    finally:
        _ext.set_simd_enabled(_simd_requested())
    table = np.ones((k + 1, k + 1)) - np.eye(k + 1)
    expected = torch.tensor([[_reference(x, y, table) for y in seqs] for x in seqs], dtype=fast.dtype)
    assert torch.equal(fast, expected)
    assert torch.equal(fast, slow)


def test_threshold_marks_exactly_the_pairs_above_it():
    rng = np.random.default_rng(3)
    t = _zero_one_table(3, 3, rng, 1)
    xs = [list(rng.integers(0, 3, size=L)) for L in (0, 5, 64, 65, 100)]
    ys = [list(rng.integers(0, 3, size=L)) for L in (3, 64, 66, 120)]
    table = torch.tensor(t)
    exact = torch.tensor([_reference(x, y, t) for x in xs for y in ys])
    for shift in (-1.0, -0.5, 0.0, 0.5, 2.0):
        limits = exact + shift
        fast, slow = _both_paths(table, xs, ys, max_distance=limits)
        expected = torch.where(exact <= limits, exact, torch.full_like(exact, math.inf))
        assert torch.equal(fast, expected)
        assert torch.equal(fast, slow)


@pytest.mark.parametrize("change", ["half", "gap-two", "negative"])
def test_tables_that_do_not_qualify_take_the_dp(change):
    """A replacement of 0.5, a gap of 2 or a negative entry: the general DP, same reference."""
    rng = np.random.default_rng(11)
    t = _zero_one_table(3, 3, rng, 1)
    if change == "half":
        t[0, 1] = 0.5
    elif change == "gap-two":
        t[1, -1] = 2.0
    else:
        t[2, 2] = -1.0
    xs = [list(rng.integers(0, 3, size=L)) for L in (0, 7, 70)]
    ys = [list(rng.integers(0, 3, size=L)) for L in (4, 65)]
    fast, slow = _both_paths(torch.tensor(t), xs, ys)
    expected = torch.tensor([_reference(x, y, t) for x in xs for y in ys])
    assert torch.equal(fast, expected)
    assert torch.equal(fast, slow)


def test_gap_labels_keep_the_dp():
    """A label equal to the gap's index (what unknown="gap" gives) deletes at the table's
    gap-gap corner (0 here): no longer unit gaps, so the DP; same reference."""
    rng = np.random.default_rng(5)
    t = np.ones((4, 4)) - np.eye(4)  # unit costs over 3 symbols, the corner 0
    gap = 3
    xs = [[0, gap, 1], [gap] * 70, list(rng.integers(0, 4, size=66))]
    ys = [[0, 1], list(rng.integers(0, 3, size=65)), []]
    fast, slow = _both_paths(torch.tensor(t), xs, ys)
    expected = torch.tensor([_reference(x, y, t) for x in xs for y in ys])
    assert torch.equal(fast, expected)
    assert torch.equal(fast, slow)
    assert expected[0] == 0.0  # ([0, gap, 1] against [0, 1]: the gap-labelled element deleted for free)
