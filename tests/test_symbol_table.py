"""Costs from a symbol table: the kernels gather each pair's costs from a (U+1, U+1) table.

Cost modules that expose ``symbol_table()`` (UnitCost, EuclideanCost up to its table
limit) take this path in PairBatch.distances/coopt and pairwise_distances. References:
the padded path (costs materialised by the module's ``forward``), which the rest of the
suite checks against enumeration and recursion oracles.
"""
import random

import re

import pytest
import torch

import bedl_torch
from bedl_torch import _ext
from bedl_torch.costs import table_of
from oracles import random_tree


def lib(x):
    return bedl_torch.Tree(x[0], x[1]) if isinstance(x, tuple) else x


def _trees(count, seed, alphabet="abcd", max_size=12):
    rng = random.Random(seed)
    return [lib(random_tree(rng.randint(1, max_size), alphabet, rng.randrange(10**6))) for _ in range(count)]


def _strings(count, seed, alphabet="abcd", max_len=12):
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, max_len))) for _ in range(count)]


def _all_pairs(objs):
    xs = [a for a in objs for _ in objs]
    ys = [b for _ in objs for b in objs]
    return bedl_torch.PairBatch(xs, ys)


def _euclidean(alphabet, seed, dim=3, integer=False, tenths=False):
    gen = torch.Generator().manual_seed(seed)
    if integer:  # small integer coordinates: many exact ties
        emb = torch.randint(-1, 2, (len(alphabet), dim), generator=gen).to(torch.float64)
    elif tenths:  # coordinates in tenths: sums of equal value that round apart (the tie test decides)
        emb = torch.randint(-3, 4, (len(alphabet), dim), generator=gen).to(torch.float64) * 0.1
    else:
        emb = torch.randn(len(alphabet), dim, generator=gen, dtype=torch.float64)
    return bedl_torch.EuclideanCost(alphabet, emb)


@pytest.mark.parametrize("kind", ["tree", "sequence"])
@pytest.mark.parametrize("cost_kind", ["unit", "euclidean", "euclidean-ties", "euclidean-tenths", "float32"])
@pytest.mark.parametrize("layout", ["all-pairs", "distinct-x"])
def test_table_path_equals_padded_path(kind, cost_kind, layout):
    """The symbol-table kernels (lanes where pairs share x, the scalar passes where not; both with
    the tie test for costs >= 0) give the padded path's distances and P, bit for bit."""
    objs = _trees(9, 1) if kind == "tree" else _strings(9, 1)
    alphabet = list("abcd")
    cost = {
        "unit": lambda: bedl_torch.UnitCost(alphabet),
        "euclidean": lambda: _euclidean(alphabet, 2),
        "euclidean-ties": lambda: _euclidean(alphabet, 3, integer=True),
        "euclidean-tenths": lambda: _euclidean(alphabet, 4, tenths=True),
        "float32": lambda: bedl_torch.EuclideanCost(alphabet, dtype=torch.float32),
    }[cost_kind]()
    assert table_of(cost) is not None
    if layout == "all-pairs":
        batch = _all_pairs(objs)
    else:
        big = objs + (_trees(9, 5, max_size=30) if kind == "tree" else _strings(9, 5, max_len=30))
        batch = bedl_torch.PairBatch(big, big[::-1])
    with torch.no_grad():
        padded = batch.costs(cost)
        d_table = batch.distances(cost)
        d_padded = batch.distances(padded)
        dt, Pt = batch.coopt(cost)
        dp, Pp = batch.coopt(padded)
    assert d_table.dtype == cost.dtype
    assert torch.equal(d_table, d_padded)
    assert torch.equal(dt, dp)
    assert Pt.shape == Pp.shape
    assert torch.equal(Pt, Pp)


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_table_path_gradient_equals_padded_path(kind):
    objs = _trees(7, 4) if kind == "tree" else _strings(7, 4)
    alphabet = list("abcd")
    batch = _all_pairs(objs)
    weights = torch.linspace(0.5, 2.0, len(batch), dtype=torch.float64)

    cost_a = _euclidean(alphabet, 5)
    (batch.distances(cost_a) * weights).sum().backward()

    cost_b = _euclidean(alphabet, 5)
    (batch.distances(batch.costs(cost_b)) * weights).sum().backward()

    assert cost_a.embedding.grad is not None
    torch.testing.assert_close(cost_a.embedding.grad, cost_b.embedding.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("simd", [True, False], ids=["avx2", "scalar"])
def test_long_sequence_rows_by_symbol_and_ring_equal_padded_path(simd):
    """The distance of a long pair gathers its cost rows from the table either once per distinct
    symbol of x (x repeats its symbols) or four at a time (many distinct symbols, or rows by
    symbol above their memory cap at a 20,000-symbol y): each gives the padded path's bits."""
    rng = random.Random(12)
    alphabet = [f"s{k}" for k in range(40)]
    few = [rng.choice(alphabet[:3]) for _ in range(70)]       # 3 distinct: rows by symbol
    many = alphabet + [rng.choice(alphabet) for _ in range(20)]  # 40 of 60 distinct: the ring
    rng.shuffle(many)
    y_mid = [rng.choice(alphabet) for _ in range(300)]
    y_long = [rng.choice(alphabet[:5]) for _ in range(20000)]  # 5 rows of 20,001 > the cap
    xs, ys = [few, many, few[:30], many[:7]], [y_mid, y_mid, y_long, y_long]
    cost = _euclidean(alphabet, 13)
    batch = bedl_torch.PairBatch(xs, ys)
    prev = _ext.simd_enabled()
    _ext.set_simd_enabled(simd)
    try:
        with torch.no_grad():
            d_table = batch.distances(cost)
            d_padded = batch.distances(batch.costs(cost))
    finally:
        _ext.set_simd_enabled(prev)
    assert torch.equal(d_table, d_padded)


def test_table_gradient_is_P_summed_per_symbol_pair():
    """The gradient with respect to the table is sum over pairs and nodes of P at (label, label)."""
    objs = _trees(5, 6)
    alphabet = list("abcd")
    batch = _all_pairs(objs)
    cost = _euclidean(alphabet, 7)
    table = cost.symbol_table().detach().requires_grad_(True)

    class Fixed(bedl_torch.SymbolCost):
        def symbol_table(self):
            return table

        def forward(self, x_idx, y_idx):
            return table[x_idx[:, :, None], y_idx[:, None, :]]

    fixed = Fixed(alphabet)
    batch.distances(fixed).sum().backward()
    _, P = batch.coopt(cost)
    x_idx = batch.x_table.encoded(cost, "error")[batch.pair_x, : P.shape[1]]
    y_idx = batch.y_table.encoded(cost, "error")[batch.pair_y, : P.shape[2]]
    want = torch.zeros_like(table)
    for b in range(len(batch)):
        for i in range(P.shape[1]):
            for j in range(P.shape[2]):
                want[x_idx[b, i], y_idx[b, j]] += P[b, i, j]
    torch.testing.assert_close(table.grad, want, rtol=1e-12, atol=1e-12)


def test_pairwise_distances_table_path_matches_padded_with_gap_for_unknown():
    objs = _trees(8, 8, alphabet="abcde")
    cost = _euclidean(list("abcd"), 9)  # 'e' is unknown

    class NoTable(bedl_torch.EuclideanCost):
        def forward(self, x_idx, y_idx):  # overriding forward alone disables the table
            return super().forward(x_idx, y_idx)

    no_table = NoTable(list("abcd"), cost.embedding.detach())
    assert table_of(no_table) is None
    with torch.no_grad():
        D = bedl_torch.pairwise_distances(objs, cost=cost, unknown="gap")
        D_ref = bedl_torch.pairwise_distances(objs, cost=no_table, unknown="gap")
    assert torch.equal(D, D_ref)
    with pytest.raises(ValueError, match="missing from the cost's alphabet"):
        bedl_torch.pairwise_distances(objs, cost=cost)


def test_subclass_changing_forward_is_not_bypassed():
    class Doubled(bedl_torch.UnitCost):
        def forward(self, x_idx, y_idx):
            return 2.0 * super().forward(x_idx, y_idx)

    objs = _strings(5, 10)
    with torch.no_grad():
        D2 = bedl_torch.pairwise_distances(objs, cost=Doubled(list("abcd")))
        D1 = bedl_torch.pairwise_distances(objs, cost=bedl_torch.UnitCost(list("abcd")))
    assert torch.equal(D2, 2.0 * D1)


def test_bad_symbol_tables_raise_clear_errors():
    objs = _strings(3, 11)

    class WrongShape(bedl_torch.SymbolCost):
        def symbol_table(self):
            return torch.zeros(2, 3, dtype=torch.float64)

        def forward(self, x_idx, y_idx):
            raise AssertionError("not reached")

    class NotFinite(WrongShape):
        def symbol_table(self):
            t = torch.ones(5, 5, dtype=torch.float64)
            t[1, 2] = float("nan")
            return t

    with pytest.raises(ValueError, match=r"symbol_table\(\) must return a \(5, 5\) tensor"):
        bedl_torch.pairwise_distances(objs, cost=WrongShape(list("abcd")))
    with pytest.raises(ValueError, match="must be finite"):
        bedl_torch.pairwise_distances(objs, cost=NotFinite(list("abcd")))


def test_kernel_messages_print_numbers_shapes_and_types_in_full():
    """The kernels format their messages' numbers themselves (see csrc/cpu/check.h): integers,
    doubles as a default stream prints them (%g), shapes and dtypes."""
    t = torch.ones(3, 3, dtype=torch.float64)
    sizes = torch.tensor([2, 1], dtype=torch.long)
    ptr = torch.tensor([0, 2], dtype=torch.long)
    pair = torch.tensor([0], dtype=torch.long)
    good = torch.tensor([0, 1], dtype=torch.long)
    with pytest.raises(ValueError, match=re.escape("rel_tol must be finite and >= 0, got -0.125")):
        _ext.ted_symbols_cpu(t, good, sizes, ptr, good, sizes, ptr, pair, pair, False, -0.125)
    with pytest.raises(ValueError, match=re.escape("rel_tol must be finite and >= 0, got -1.23457e+20")):
        _ext.sed_symbols_cpu(t, good, ptr, good, ptr, pair, pair, False, -123456789012345678901.0)
    with pytest.raises(ValueError, match=re.escape("got shape [3, 2, 1]")):
        _ext.sed_symbols_cpu(torch.ones(3, 2, 1, dtype=torch.float64), good, ptr, good, ptr, pair, pair, False, 1e-9)
    with pytest.raises(TypeError, match=re.escape("symbol_costs must be float32 or float64, got Int")):
        _ext.sed_symbols_cpu(t.int(), good, ptr, good, ptr, pair, pair, False, 1e-9)
    with pytest.raises(ValueError, match=re.escape("pair_y[0] = -7 is not a sequence index (1 y sequences)")):
        _ext.sed_symbols_cpu(t, good, ptr, good, ptr, pair, torch.tensor([-7]), False, 1e-9)


def test_kernel_checks_labels_and_table_shape():
    t = torch.ones(3, 3, dtype=torch.float64)
    sizes = torch.tensor([2, 1], dtype=torch.long)
    ptr = torch.tensor([0, 2], dtype=torch.long)
    pair = torch.tensor([0], dtype=torch.long)
    good = torch.tensor([0, 1], dtype=torch.long)
    d, _ = _ext.ted_symbols_cpu(t, good, sizes, ptr, good, sizes, ptr, pair, pair, False, 1e-9)
    assert float(d) == 2.0  # every entry 1, diagonal included: two replacements beat 4 indels
    with pytest.raises(ValueError, match=r"x_labels\[1\] = 3 is not a row of the symbol cost table \(3 rows\)"):
        _ext.ted_symbols_cpu(t, torch.tensor([0, 3]), sizes, ptr, good, sizes, ptr, pair, pair, False, 1e-9)
    with pytest.raises(ValueError, match=r"y_labels\[1\] = 2 is not a column of the symbol cost table \(2 columns\)"):
        _ext.ted_symbols_cpu(torch.ones(3, 2, dtype=torch.float64), good, sizes, ptr, torch.tensor([0, 2]), sizes,
                             ptr, pair, pair, False, 1e-9)
    with pytest.raises(ValueError, match=r"symbol_costs must be a 2-D \(x symbols \+ gap, y symbols \+ gap\)"):
        _ext.ted_symbols_cpu(torch.ones(3, dtype=torch.float64), good, sizes, ptr, good, sizes, ptr,
                             pair, pair, False, 1e-9)
    with pytest.raises(ValueError, match="symbol_costs contain NaN or inf"):
        _ext.sed_symbols_cpu(torch.full((3, 3), float("inf")), good, ptr, good, ptr, pair, pair, False, 1e-9)
    with pytest.raises(ValueError, match="pair_y"):
        _ext.sed_symbols_cpu(t, good, ptr, good, ptr, pair, torch.tensor([1]), False, 1e-9)


@pytest.mark.parametrize("op", ["ted_symbols_cpu", "ted_cpu"])
def test_kernels_check_every_tree_but_index_only_the_used(op):
    """A call indexes only the trees its pairs use (a few pairs from a large table), but
    checks every tree's subtree sizes: a malformed tree no pair uses is still a ValueError
    naming it, and the distances of the used trees do not depend on the others."""
    # trees: a(b, c) | a | b(a) ; the third one's sizes changed below
    sizes = torch.tensor([3, 1, 1, 1, 2, 1], dtype=torch.long)
    ptr = torch.tensor([0, 3, 4, 6], dtype=torch.long)
    labels = torch.tensor([0, 1, 2, 0, 1, 0], dtype=torch.long)
    table = 1.0 - torch.eye(4, dtype=torch.float64)  # 3 symbols + gap, unit costs
    pair_x, pair_y = torch.tensor([0, 1]), torch.tensor([1, 0])

    def run(sz, p=ptr):
        if op == "ted_symbols_cpu":
            lab = labels[: len(sz)]
            return _ext.ted_symbols_cpu(table, lab, sz, p, lab, sz, p, pair_x, pair_y, False, 1e-9)[0]
        costs = torch.rand(2, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        return _ext.ted_cpu(costs, sz, p, sz, p, pair_x, pair_y, False, 1e-9)[0]

    assert torch.equal(run(sizes), run(sizes[:4], ptr[:3]))  # the same without the third tree
    if op == "ted_symbols_cpu":
        assert run(sizes).tolist() == [2.0, 2.0]  # a(b, c) vs a: delete b and c
    for bad, message in (([2, 2], "y tree 2: subtree size 2 of node 1 is out of range"),
                         ([1, 1], "x tree 2: the root's subtree size is 1 but the tree has 2 nodes")):
        wrong = sizes.clone()
        wrong[4:] = torch.tensor(bad)
        with pytest.raises(ValueError, match=re.escape(message.replace("y tree", "x tree"))):
            run(wrong)
