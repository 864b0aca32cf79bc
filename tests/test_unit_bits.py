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


# ---------------------------------------------------------------------------
# Unit costs between the labels themselves, without a table (sed_unit)
# ---------------------------------------------------------------------------


def _unit_reference(x, y):
    """The unit-cost edit distance of two label lists (equal labels match): _reference over a
    unit table of the pair's own symbols."""
    index = {v: k for k, v in enumerate(sorted(set(x) | set(y)))}
    table = np.ones((len(index) + 1,) * 2) - np.eye(len(index) + 1)
    return _reference([index[v] for v in x], [index[v] for v in y], table)


def _unit_op(xs, ys, pairs):
    x_lab, x_ptr = _flat(xs)
    y_lab, y_ptr = _flat(ys)
    px = torch.tensor([a for a, _ in pairs], dtype=torch.int64)
    py = torch.tensor([b for _, b in pairs], dtype=torch.int64)
    return torch.ops.bedl_torch.sed_unit(x_lab, x_ptr, y_lab, y_ptr, px, py)


def test_table_free_unit_distances_equal_the_dp():
    """Labels far apart (up to 10^6, no table could hold them) and few distinct ones repeated,
    at lengths around the word boundaries; x and y as patterns in turn (the shorter one)."""
    rng = np.random.default_rng(21)
    words = rng.choice(1_000_000, size=12, replace=False)
    xs = [list(words[rng.integers(0, 12, size=L)]) for L in LENGTHS]
    ys = [list(words[rng.integers(0, 5, size=L)]) for L in (0, 3, 64, 65, 140)] + [[int(words[0])] * 129]
    pairs = [(a, b) for a in range(len(xs)) for b in range(len(ys))]
    got = _unit_op(xs, ys, pairs)
    assert got.dtype == torch.int64
    assert got.tolist() == [_unit_reference(xs[a], ys[b]) for a, b in pairs]


def test_runs_of_pairs_that_share_x_equal_the_dp():
    """Consecutive pairs with the same x run against it as one pattern (one word, or several
    for x of 65 and 200 symbols), four texts at a time, each lane taking the next text when its
    own ends: runs of 1 to 23 pairs (texts empty, shorter and longer than x, beyond one word,
    in an order that ends the lanes at different steps) and a repeated x that is not
    consecutive."""
    rng = np.random.default_rng(5)
    words = rng.choice(1_000_000, size=6, replace=False)
    xs = [list(words[rng.integers(0, 6, size=L)]) for L in (1, 7, 40, 64, 65, 200)]
    ys = [list(words[rng.integers(0, 6, size=L)]) for L in (0, 1, 3, 9, 17, 33, 63, 64, 65, 100, 150)]
    pairs = [(2, b) for b in rng.permutation(len(ys))] + [(2, b) for b in rng.permutation(len(ys))] + \
        [(2, 0)] + [(0, 5), (1, 5), (0, 6)] + [(3, b) for b in range(len(ys))] + \
        [(4, b) for b in (0, 1, 10)] + [(1, b) for b in (9, 2)] + [(3, 3)] + \
        [(5, b) for b in rng.permutation(len(ys))] + [(4, b) for b in rng.permutation(len(ys))]
    pairs = [(int(a), int(b)) for a, b in pairs]
    got = _unit_op(xs, ys, pairs)
    assert got.tolist() == [_unit_reference(xs[a], ys[b]) for a, b in pairs]
    # the same pairs through a 0/1 table that lets several symbols match (the table path)
    table = _zero_one_table(6, 6, rng, 2)
    index = {int(w): k for k, w in enumerate(words)}
    xi = [[index[int(v)] for v in x] for x in xs]
    yi = [[index[int(v)] for v in y] for y in ys]
    fast, slow = _both_paths(torch.tensor(table), xi, yi)
    expected = torch.tensor([_reference(x, y, table) for x in xi for y in yi], dtype=fast.dtype)
    assert torch.equal(fast, expected)
    assert torch.equal(fast, slow)


_SCALAR_CHAINS_SCRIPT = """
import json, sys
import numpy as np
import torch
import bedl_torch  # noqa: F401 (registers the operators)
rng = np.random.default_rng(17)
def flat(seqs):
    lengths = torch.tensor([len(q) for q in seqs], dtype=torch.int64)
    ptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
    return torch.tensor([int(v) for q in seqs for v in q], dtype=torch.int64), ptr
out = {"xs": [], "ys": [], "pairs": [], "got": []}
# labels up to a million (a call's masks span its largest label: patterns of one word run, longer
# ones take their pairs one by one) and up to 1000 (patterns of every length in runs)
for extent in (1_000_000, 1000):
    words = rng.choice(extent, size=8, replace=False)
    # patterns of one word and of two to four (over 8 labels, and over 2: long carry chains)
    xs = [list(words[rng.integers(0, 8, size=L)]) for L in (1, 5, 20, 64, 65, 128, 130, 200)]
    xs += [list(words[rng.integers(0, 2, size=L)]) for L in (64, 129, 250)]
    ys = [list(words[rng.integers(0, 8, size=L)]) for L in (0, 1, 2, 7, 19, 40, 64, 65, 99, 140, 260)]
    ys += [list(words[rng.integers(0, 2, size=L)]) for L in (3, 70, 131)]
    # a label only in a pattern's first word: a text that starts with it carries out of the first
    # word into words whose match mask is 0 and whose steps are all +1 (the sum's second carry)
    xs += [list(words[rng.integers(0, 3, size=64)]) + list(words[rng.integers(0, 2, size=L)]) for L in (1, 90)]
    ys += [[words[2]] + list(words[rng.integers(0, 3, size=L)]) for L in (0, 5, 150)]
    pairs = [(a, int(b)) for a in range(len(xs)) for b in rng.permutation(len(ys))]
    xl, xp = flat(xs)
    yl, yp = flat(ys)
    px = torch.tensor([a for a, _ in pairs]); py = torch.tensor([b for _, b in pairs])
    out["got"] += torch.ops.bedl_torch.sed_unit(xl, xp, yl, yp, px, py).tolist()
    nx, ny = len(out["xs"]), len(out["ys"])
    out["pairs"] += [(a + nx, b + ny) for a, b in pairs]
    out["xs"] += [[int(v) for v in x] for x in xs]
    out["ys"] += [[int(v) for v in y] for y in ys]
print(json.dumps(out))
"""


@pytest.mark.parametrize("unit_avx2", ["0", "1"], ids=["scalar-chains", "avx2-chains"])
def test_chains_scalar_and_avx2_equal_the_dp(unit_avx2):
    """unit_run's four chains (patterns of one word and of two to four) as four scalar chains
    (BEDL_TORCH_UNIT_AVX2=0, read once per process, so in a child process) and, where the
    processor has AVX2, in vectors: runs of texts of 0-260 symbols in an order that ends the
    lanes at different steps, over 8 labels and over 2 (long carry chains across words)."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, BEDL_TORCH_UNIT_AVX2=unit_avx2)
    out = subprocess.run([sys.executable, "-c", _SCALAR_CHAINS_SCRIPT], env=env, check=True,
                         capture_output=True, text=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    expected = [_unit_reference(res["xs"][a], res["ys"][b]) for a, b in res["pairs"]]
    assert res["got"] == expected


def test_table_free_unit_op_passes_opcheck():
    xs, ys = [[3, 1, 4, 1, 5], [], [9, 2, 6]], [[1, 4], [5, 9, 2, 6, 5, 3]]
    x_lab, x_ptr = _flat(xs)
    y_lab, y_ptr = _flat(ys)
    args = (x_lab, x_ptr, y_lab, y_ptr, torch.tensor([0, 1, 2, 0]), torch.tensor([1, 0, 1, 0]))
    torch.library.opcheck(torch.ops.bedl_torch.sed_unit, args)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64, torch.float32], ids=["i64", "f64", "f32"])
def test_unit_matrix_op_equals_the_pairs_op_and_the_dp(dtype):
    """sed_unit_matrix writes the entries of the matrix's rows without pair lists: each one the
    pairs op's value (and the DP's) in the dtype asked for; with triangle (x against itself)
    the columns from the first row on, the entries i <= j computed and the square mirrored. Sizes around the scheduler's pieces and the mirror's
    64-row tiles (130 sequences: three tiles, the last ragged), labels up to 10^6, empty
    sequences, a rectangle with more rows than columns and one with fewer."""
    rng = np.random.default_rng(22)
    words = rng.choice(1_000_000, size=9, replace=False)
    xs = [list(words[rng.integers(0, 9, size=int(L))]) for L in rng.integers(0, 80, size=130)]
    xs[7], xs[70] = [], []
    ys = xs[:3] + [list(words[rng.integers(0, 4, size=L)]) for L in (0, 64, 65, 130)]
    for a, b, triangle in ((xs, xs, True), (xs, ys, False), (ys, xs, False), (xs[:1], xs[:1], True)):
        x_lab, x_ptr = _flat(a)
        y_lab, y_ptr = _flat(b)
        ii, jj = torch.meshgrid(torch.arange(len(a)), torch.arange(len(b)), indexing="ij")
        pairs = torch.ops.bedl_torch.sed_unit(x_lab, x_ptr, y_lab, y_ptr, ii.reshape(-1), jj.reshape(-1))
        full = pairs.reshape(len(a), len(b)).to(dtype)
        # the whole matrix, and blocks of rows (triangle: the columns from the block's first row)
        n = len(a)
        for r0, r1 in ((0, n), (0, 1), (min(5, n), min(75, n)), (max(0, n - 3), n), (min(4, n), min(4, n))):
            got = torch.ops.bedl_torch.sed_unit_matrix(x_lab, x_ptr, y_lab, y_ptr, r0, r1, triangle, dtype)
            c0 = r0 if triangle else 0
            assert got.dtype == dtype and got.shape == (r1 - r0, len(b) - c0)
            assert torch.equal(got, full[r0:r1, c0:]), (r0, r1, triangle)
    sample = [(int(i), int(j)) for i, j in rng.integers(0, 130, size=(40, 2))]
    x_lab, x_ptr = _flat(xs)
    got = torch.ops.bedl_torch.sed_unit_matrix(x_lab, x_ptr, x_lab, x_ptr, 0, 130, True, dtype)
    assert [int(got[i, j]) for i, j in sample] == [_unit_reference(xs[i], xs[j]) for i, j in sample]


def test_unit_matrix_op_passes_opcheck():
    xs, ys = [[3, 1, 4, 1, 5], [], [9, 2, 6]], [[1, 4], [5, 9, 2, 6, 5, 3]]
    x_lab, x_ptr = _flat(xs)
    y_lab, y_ptr = _flat(ys)
    op = torch.ops.bedl_torch.sed_unit_matrix
    torch.library.opcheck(op, (x_lab, x_ptr, y_lab, y_ptr, 0, 3, False, torch.float64))
    torch.library.opcheck(op, (x_lab, x_ptr, x_lab, x_ptr, 1, 3, True, torch.int64))


@pytest.mark.parametrize("case,error,message", [
    ("negative", ValueError, r"y_labels\[0\] = -1 is not a label"),
    ("ptr", ValueError, r"x_ptr must start at 0 and end at the number of labels \(2\)"),
    ("triangle", ValueError, r"triangle needs as many x as y sequences, got 1 and 2"),
    ("rows", ValueError, r"rows 0 \.\. 2 are not a range of the 1 x sequences"),
    ("dtype", TypeError, r"dtype must be int64, float64 or float32"),
    ("labels", TypeError, r"y_labels must be int64"),
])
def test_unit_matrix_op_rejects_bad_input(case, error, message):
    x_lab, x_ptr = torch.tensor([1, 2]), torch.tensor([0, 3 if case == "ptr" else 2])
    y_lab, y_ptr = torch.tensor([-1 if case == "negative" else 1, 2]), torch.tensor([0, 1, 2])
    if case == "labels":
        y_lab = y_lab.to(torch.int32)
    dtype = torch.int32 if case == "dtype" else torch.float64
    with pytest.raises(error, match=message):
        torch.ops.bedl_torch.sed_unit_matrix(x_lab, x_ptr, y_lab, y_ptr, 0, 2 if case == "rows" else 1,
                                             case == "triangle", dtype)


@pytest.mark.parametrize("case,error,message", [
    ("negative", ValueError, r"x_labels\[1\] = -3 is not a label"),
    ("ptr", ValueError, r"y_ptr must start at 0 and end at the number of labels \(2\)"),
    ("pair", ValueError, r"pair_y\[0\] = 5 is not a sequence index \(1 y sequences\)"),
    ("dtype", TypeError, r"x_labels must be int64"),
])
def test_table_free_unit_op_rejects_bad_input(case, error, message):
    x_lab, x_ptr = torch.tensor([1, -3 if case == "negative" else 2]), torch.tensor([0, 2])
    y_lab, y_ptr = torch.tensor([1, 2]), torch.tensor([0, 3 if case == "ptr" else 2])
    px, py = torch.tensor([0]), torch.tensor([5 if case == "pair" else 0])
    if case == "dtype":
        x_lab = x_lab.to(torch.int32)
    with pytest.raises(error, match=message):
        torch.ops.bedl_torch.sed_unit(x_lab, x_ptr, y_lab, y_ptr, px, py)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_large_vocabularies_under_unit_cost_need_no_table(dtype, monkeypatch):
    """UnitCost over more symbols than its whole table holds (so far: tiles of local tables):
    the matrix and the search take the table-free op, with the DP's values (the reference
    here) and the DP kernel's bits (the fast paths off); unknown="gap" keeps the tables."""
    rng = np.random.default_rng(4)
    vocab = [f"w{i}" for i in range(bt.UnitCost.table_limit + 500)]
    seqs = [list(rng.choice(vocab, size=L)) for L in (0, 1, 30, 64, 65, 90)]
    seqs += [seqs[3][:40] + ["w1"] * 30, list(rng.choice(vocab[:20], size=70))]
    cost = bt.UnitCost(vocab, dtype=dtype)
    calls = []
    op, matrix_op = _ext.sed_unit_cpu, _ext.sed_unit_matrix_cpu
    monkeypatch.setattr(_ext, "sed_unit_cpu", lambda *a: calls.append(len(a[-1])) or op(*a))
    monkeypatch.setattr(_ext, "sed_unit_matrix_cpu", lambda *a: calls.append("matrix") or matrix_op(*a))
    fast = bt.pairwise_distances(seqs, cost=cost)
    expected = torch.tensor([[_unit_reference(x, y) for y in seqs] for x in seqs], dtype=dtype)
    assert torch.equal(fast, expected)
    if _simd_requested():
        assert calls, "the table-free op was not used"
    d, i = bt.kneighbors(seqs, k=3, cost=cost)
    masked = expected.double().clone().fill_diagonal_(math.inf)
    order = torch.argsort(masked, dim=1, stable=True)[:, :3]
    assert torch.equal(i, order) and torch.equal(d, masked.gather(1, order))
    try:
        _ext.set_simd_enabled(False)
        calls.clear()
        slow = bt.pairwise_distances(seqs, cost=cost)
        assert not calls
    finally:
        _ext.set_simd_enabled(_simd_requested())
    assert torch.equal(fast, slow)
    unknown = [s + ["never-seen"] for s in seqs[:3]]
    calls.clear()
    gapped = bt.pairwise_distances(unknown, cost=cost, unknown="gap")
    assert not calls
    assert torch.equal(gapped, expected[:3, :3])  # the unknown label is deleted for free
