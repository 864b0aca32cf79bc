"""The gradient of distances computed from a symbol cost table, against the sum of the
pairs' co-optimal matrices P, computed pair by pair with ``coopt_matrix`` in float64 and
scattered by label, by both backward paths: the lists of P by label pair that forward keeps
(``bedl_torch::ted_symbols_sums`` / ``sed_symbols_sums``, then ``weighted_pair_sums``), and
the gradient kernels that recompute P (``ted_symbols_grad`` / ``sed_symbols_grad``, where the
lists would be too large); and the kernels' own contract (thread count, zero weights,
checks)."""
import numpy as np
import pytest
import torch
from torch import nn

import bedl_torch as bt
from bedl_torch import _ext, ops
from bedl_torch.costs import SymbolCost
from bedl_torch.ops import PairBatch, default_rel_tol
from bedl_torch.ops.batch import SymbolEditDistanceFn

import oracles

ALPHABET = ["a", "b", "c", "d"]
GAP = len(ALPHABET)


class TableCost(SymbolCost):
    """A learnable (U + 1, U + 1) symbol table, handed to the kernels whole."""

    def __init__(self, alphabet, table):
        super().__init__(alphabet)
        self.table = nn.Parameter(table)

    @property
    def dtype(self):
        return self.table.dtype

    @property
    def device(self):
        return self.table.device

    def forward(self, x_idx, y_idx):
        return self.table[x_idx[:, :, None], y_idx[:, None, :]]

    def symbol_table(self):
        return self.table


def _table(kind, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    S = GAP + 1
    if kind == "unit":  # ties everywhere
        t = 1.0 - torch.eye(S, dtype=torch.float64)
    elif kind == "integer":  # many exact ties
        t = torch.randint(0, 3, (S, S), generator=g).to(torch.float64)
    else:  # random: mostly one co-optimal mapping
        t = 0.1 + torch.rand(S, S, generator=g, dtype=torch.float64)
    t[GAP, GAP] = 0.0
    return t.to(dtype)


def _objects(kind, count, seed, labels=ALPHABET, sizes=(1, 9)):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(sizes[0], sizes[1] + 1))
        if kind == "tree":
            out.append(bt.Tree(*oracles.random_tree(n, labels, rng)))
        else:
            out.append(oracles.random_sequence(n, labels, rng))
    return out


def _labels(obj):
    return list(obj.labels) if isinstance(obj, bt.Tree) else list(obj)


def _reference_grad(X, Y, table, weights):
    """sum_(i, j) weights[i, j] * P_ij scattered by label, each P from coopt_matrix on the
    pair's padded costs (float64 copies of the table's values, the table dtype's tolerance);
    labels outside the alphabet are the gap."""
    rel_tol = default_rel_tol(table.dtype)
    t = table.detach().to(torch.float64)
    index = {a: k for k, a in enumerate(ALPHABET)}
    grad = torch.zeros_like(t)
    for i, x in enumerate(X):
        lx = torch.tensor([index.get(a, GAP) for a in _labels(x)] + [GAP])
        for j, y in enumerate(Y):
            ly = torch.tensor([index.get(a, GAP) for a in _labels(y)] + [GAP])
            C = t[lx[:, None], ly[None, :]].clone()
            C[-1, -1] = 0.0
            _, P = bt.coopt_matrix(x, y, C, rel_tol=rel_tol)
            P = P.clone()
            P[-1, -1] = 0.0
            grad.index_put_((lx[:, None].expand_as(P), ly[None, :].expand_as(P)),
                            float(weights[i, j]) * P, accumulate=True)
    return grad


def _count_backward_calls(monkeypatch):
    """Counts calls of the two backward paths' kernels."""
    calls = {"lists": 0, "recompute": 0}

    def counted(name, fn):
        def wrapper(*args):
            calls[name] += 1
            return fn(*args)
        return wrapper

    monkeypatch.setattr(_ext, "weighted_pair_sums_cpu", counted("lists", _ext.weighted_pair_sums_cpu))
    for op in ("ted_symbols_grad_cpu", "sed_symbols_grad_cpu"):
        monkeypatch.setattr(_ext, op, counted("recompute", getattr(_ext, op)))
    return calls


@pytest.fixture(params=["lists", "recompute", "no_room"])
def backward_path(request, monkeypatch):
    """Which backward the symbol-table distances take: the lists of P by label pair kept
    by forward, or the gradient kernels that compute P in backward (chosen so, or because
    the lists would exceed their room); checked by counting calls."""
    monkeypatch.setattr(ops.limits, "BACKWARD_LISTS", request.param != "recompute")
    if request.param == "no_room":
        monkeypatch.setattr(ops.limits, "PAIR_SUM_ENTRIES", 0)
    calls = _count_backward_calls(monkeypatch)
    yield request.param
    used = "lists" if request.param == "lists" else "recompute"
    assert calls[used] > 0 and sum(calls.values()) == calls[used]


def _kernel_grad(X, Y, table, weights, unknown="error"):
    cost = TableCost(ALPHABET, table.clone())
    D = bt.pairwise_distances(X, Y, cost=cost, unknown=unknown)
    (D * weights.to(D.dtype)).sum().backward()
    return cost.table.grad


def _tolerances(dtype):
    return dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("table_kind", ["random", "unit", "integer"])
@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_gradient_is_the_weighted_sum_of_coopt_matrices(kind, table_kind, dtype, backward_path):
    X = _objects(kind, 5, seed=1)
    Y = _objects(kind, 4, seed=2)
    table = _table(table_kind, dtype, seed=3)
    weights = torch.randn(len(X), len(Y), generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    got = _kernel_grad(X, Y, table, weights)
    assert got.dtype == dtype
    want = _reference_grad(X, Y, table, weights)
    assert torch.allclose(got.to(torch.float64), want, **_tolerances(dtype))
    assert want.abs().sum() > 0


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_unknown_labels_mapped_to_the_gap(kind, backward_path):
    """Labels outside the alphabet read the gap's row and column: their replacements and
    deletions land there (the [gap, gap] entry included)."""
    labels = ALPHABET + ["z", "w"]
    X = _objects(kind, 4, seed=5, labels=labels)
    Y = _objects(kind, 3, seed=6, labels=labels)
    assert any(a in ("z", "w") for x in X for a in _labels(x))
    table = _table("random", torch.float64, seed=7)
    table[GAP, GAP] = 0.25  # read for unknown labels against each other
    weights = torch.rand(len(X), len(Y), generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    got = _kernel_grad(X, Y, table, weights, unknown="gap")
    want = _reference_grad(X, Y, table, weights)
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    assert want[GAP, GAP] > 0


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_ties_split_the_gradient_between_coopt_mappings(kind, backward_path):
    """One node a against b, c (a root with a child, or a sequence) under unit costs: a
    replaced by b and c inserted, or a replaced by c and b inserted, both cost 2 (deleting
    a costs 3). Each co-optimal mapping carries half the weight."""
    if kind == "tree":
        x, y = bt.Tree.from_bracket("{a}"), bt.Tree.from_bracket("{b{c}}")
    else:
        x, y = ["a"], ["b", "c"]
    table = _table("unit", torch.float64, seed=0)
    got = _kernel_grad([x], [y], table, torch.full((1, 1), 3.0, dtype=torch.float64))
    want = torch.zeros_like(table)
    want[0, 1] = want[0, 2] = 1.5  # a -> b, a -> c
    want[GAP, 1] = want[GAP, 2] = 1.5  # b, c inserted
    assert torch.equal(got, want)


@pytest.mark.parametrize("kind", ["tree", "sequence"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_matches_the_scatter_of_materialised_coopt(kind, dtype, backward_path):
    """The gradient kernel against the path that keeps P (want_coopt): the same sums up to
    their order."""
    X = _objects(kind, 6, seed=9)
    Y = _objects(kind, 5, seed=10)
    batch = PairBatch.from_tables(bt.ops.FlatTable(X, "X"), bt.ops.FlatTable(Y, "Y"),
                                  torch.arange(len(X)).repeat_interleave(len(Y)),
                                  torch.arange(len(Y)).repeat(len(X)))
    weights = torch.randn(len(batch), generator=torch.Generator().manual_seed(11), dtype=dtype)
    grads = []
    for want_coopt in (False, True):
        cost = TableCost(ALPHABET, _table("integer", dtype, seed=12))
        view = batch.symbol_view(cost, "error")
        d, _ = SymbolEditDistanceFn.apply(view.table, batch, view, default_rel_tol(dtype), want_coopt)
        (d * weights).sum().backward()
        grads.append(cost.table.grad)
    assert torch.allclose(grads[0], grads[1], **_tolerances(dtype))


def _op_args(kind, count=30, seed=13, sizes=(15, 25)):
    X = _objects(kind, count, seed=seed, sizes=sizes)
    cost = TableCost(ALPHABET, _table("random", torch.float64, seed=seed))
    table = bt.ops.FlatTable(X, "X")
    labels = table.flat_labels(cost, "error")
    px = torch.arange(count).repeat_interleave(count)
    py = torch.arange(count).repeat(count)
    t = cost.table.detach()
    if kind == "tree":
        return _ext.ted_symbols_grad_cpu, (t, labels, table.sizes, table.ptr, labels, table.sizes, table.ptr, px, py)
    return _ext.sed_symbols_grad_cpu, (t, labels, table.ptr, labels, table.ptr, px, py)


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_same_bits_for_one_and_two_threads(kind):
    op, args = _op_args(kind)
    weights = torch.randn(len(args[-1]), generator=torch.Generator().manual_seed(14), dtype=torch.float64)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = op(*args, weights, 1e-9)
        torch.set_num_threads(2)
        two = [op(*args, weights, 1e-9) for _ in range(3)]
    finally:
        torch.set_num_threads(threads)
    for g in two:
        assert torch.equal(g, one)
    assert one.abs().sum() > 0


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_zero_weights_add_nothing(kind):
    """Pairs of weight 0 are skipped; the rest sum as if alone."""
    op, args = _op_args(kind, count=6, sizes=(2, 8))
    B = len(args[-1])
    weights = torch.zeros(B, dtype=torch.float64)
    weights[3], weights[17] = 2.0, -0.5
    got = op(*args, weights, 1e-9)
    want = torch.zeros_like(got)
    for b in (3, 17):
        single = list(args)
        single[-2], single[-1] = args[-2][b:b + 1], args[-1][b:b + 1]
        want += op(*single, weights[b:b + 1], 1e-9)
    assert torch.allclose(got, want, rtol=1e-15, atol=0)
    assert torch.equal(op(*args, torch.zeros(B, dtype=torch.float64), 1e-9), torch.zeros_like(got))


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_bad_weights_and_overflow(kind):
    op, args = _op_args(kind, count=3, sizes=(2, 4))
    B = len(args[-1])
    with pytest.raises(TypeError, match="pair_weights must have the dtype of symbol_costs"):
        op(*args, torch.ones(B, dtype=torch.float32), 1e-9)
    with pytest.raises(ValueError, match=rf"pair_weights must have shape \({B},\)"):
        op(*args, torch.ones(B + 1, dtype=torch.float64), 1e-9)
    huge = list(args)
    huge[0] = torch.full_like(args[0], 1e308)
    with pytest.raises(ValueError, match="too large"):
        op(*huge, torch.ones(B, dtype=torch.float64), 1e-9)


# ---- the lists of P by label pair that forward keeps ------------------------------------


def _sums_args(kind, X, Y, table):
    """(sums op, distance op, arguments without rel_tol/max_entries) for all pairs of X x Y."""
    cost = TableCost(ALPHABET, table.clone())
    xt, yt = bt.ops.FlatTable(X, "X"), bt.ops.FlatTable(Y, "Y")
    xl, yl = xt.flat_labels(cost, "error"), yt.flat_labels(cost, "error")
    px = torch.arange(len(X)).repeat_interleave(len(Y))
    py = torch.arange(len(Y)).repeat(len(X))
    t = cost.table.detach()
    if kind == "tree":
        return (_ext.ted_symbols_sums_cpu, _ext.ted_symbols_cpu,
                (t, xl, xt.sizes, xt.ptr, yl, yt.sizes, yt.ptr, px, py))
    return _ext.sed_symbols_sums_cpu, _ext.sed_symbols_cpu, (t, xl, xt.ptr, yl, yt.ptr, px, py)


def _first_appearance(labels):
    index = {a: k for k, a in enumerate(ALPHABET)}
    out = []
    for a in labels:
        if index[a] not in out:
            out.append(index[a])
    return out + [GAP]


@pytest.mark.parametrize("table_kind", ["random", "unit", "integer"])
@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_pair_lists_are_each_pairs_coopt_by_label(kind, table_kind):
    """Pair b's list: P summed by (x label, y label), each sum nonzero and listed once, in
    the documented order (x's labels by first appearance, then the gap; y's within them);
    the distances are the distance kernel's bits."""
    X = _objects(kind, 5, seed=21, sizes=(0 if kind == "sequence" else 1, 9))
    Y = _objects(kind, 4, seed=22)
    table = _table(table_kind, torch.float64, seed=23)
    sums_op, dist_op, args = _sums_args(kind, X, Y, table)
    rel_tol = default_rel_tol(torch.float64)
    d, ptr, entry, value = sums_op(*args, rel_tol, 1 << 20)
    assert torch.equal(d, dist_op(*args, False, rel_tol)[0])
    S = GAP + 1
    assert ptr.shape == (len(X) * len(Y) + 1,) and ptr[0] == 0 and ptr[-1] == len(entry) == len(value)
    for b in range(len(X) * len(Y)):
        x, y = X[b // len(Y)], Y[b % len(Y)]
        e, v = entry[ptr[b]:ptr[b + 1]], value[ptr[b]:ptr[b + 1]]
        assert len(set(e.tolist())) == len(e) and bool((v != 0).all())
        order = [a * S + c for a in _first_appearance(_labels(x)) for c in _first_appearance(_labels(y))]
        positions = [order.index(k) for k in e.tolist()]
        assert positions == sorted(positions)
        got = torch.zeros(S * S, dtype=torch.float64).index_put_((e,), v).view(S, S)
        want = _reference_grad([x], [y], table, torch.ones(1, 1, dtype=torch.float64))
        assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_pair_lists_same_bits_for_threads_and_simd(kind):
    X = _objects(kind, 12, seed=24, sizes=(10, 25))
    sums_op, _, args = _sums_args(kind, X, X, _table("integer", torch.float64, seed=25))
    threads, simd = torch.get_num_threads(), _ext.simd_enabled()
    try:
        torch.set_num_threads(1)
        one = sums_op(*args, 1e-9, 1 << 20)
        torch.set_num_threads(2)
        others = [sums_op(*args, 1e-9, 1 << 20)]
        _ext.set_simd_enabled(not simd)
        others.append(sums_op(*args, 1e-9, 1 << 20))
    finally:
        torch.set_num_threads(threads)
        _ext.set_simd_enabled(simd)
    for other in others:
        assert all(torch.equal(a, b) for a, b in zip(one, other))
    assert len(one[2]) > len(X) ** 2


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_pair_lists_within_max_entries_or_none(kind):
    """The lists come where the pairs' room ((distinct x labels + 1)(distinct y labels + 1)
    - 1 each) fits max_entries, else none (and the same distances)."""
    X = _objects(kind, 4, seed=26)
    Y = _objects(kind, 3, seed=27)
    sums_op, _, args = _sums_args(kind, X, Y, _table("random", torch.float64, seed=28))
    room = sum(min((len(set(_labels(x))) + 1) * (len(set(_labels(y))) + 1), (len(x) + 1) * (len(y) + 1)) - 1
               for x in X for y in Y)
    full = sums_op(*args, 1e-9, room)
    assert full[1].numel() == len(X) * len(Y) + 1 and 0 < full[2].numel() <= room
    none = sums_op(*args, 1e-9, room - 1)
    assert torch.equal(none[0], full[0])
    assert all(t.numel() == 0 for t in none[1:])


def test_weighted_pair_sums_adds_the_weighted_lists():
    """sum_b w_b * list_b by entry, against a dense sum; zero weights add nothing."""
    ptr = torch.tensor([0, 2, 2, 5])
    entry = torch.tensor([0, 7, 7, 3, 8])
    value = torch.tensor([1.0, 2.0, 0.5, -1.0, 4.0], dtype=torch.float64)
    for dtype in (torch.float64, torch.float32):
        weights = torch.tensor([2.0, 5.0, -1.0], dtype=dtype)
        got = _ext.weighted_pair_sums_cpu(ptr, entry, value, weights, 3, 3)
        want = torch.zeros(9, dtype=torch.float64)
        want[0], want[7], want[3], want[8] = 2.0, 4.0 - 0.5, 1.0, -4.0
        assert got.dtype == dtype and torch.equal(got, want.view(3, 3).to(dtype))
    zero = _ext.weighted_pair_sums_cpu(ptr, entry, value, torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64), 3, 3)
    assert torch.equal(zero, torch.zeros(3, 3, dtype=torch.float64))


def test_weighted_pair_sums_checks():
    ptr, entry = torch.tensor([0, 2]), torch.tensor([0, 3])
    value, weights = torch.tensor([1.0, 2.0], dtype=torch.float64), torch.ones(1, dtype=torch.float64)
    op = _ext.weighted_pair_sums_cpu
    with pytest.raises(ValueError, match=r"sum_entry\[1\] = 9 is outside a \(3, 3\) table"):
        op(ptr, torch.tensor([0, 9]), value, weights, 3, 3)
    with pytest.raises(ValueError, match="sum_ptr must run from 0 to the 2 entries"):
        op(torch.tensor([0, 1]), entry, value, weights, 3, 3)
    with pytest.raises(ValueError, match="sum_ptr must not decrease"):
        op(torch.tensor([0, 3, 2]), entry, value, torch.ones(2, dtype=torch.float64), 3, 3)
    with pytest.raises(TypeError, match="sum_value must be float64"):
        op(ptr, entry, value.float(), weights, 3, 3)
    with pytest.raises(ValueError, match="sum_value must be 1-D like sum_entry"):
        op(ptr, entry, value[:1], weights, 3, 3)
    with pytest.raises(ValueError, match=r"pair_weights must have shape \(1,\)"):
        op(ptr, entry, value, torch.ones(2, dtype=torch.float64), 3, 3)
    with pytest.raises(TypeError, match="pair_weights must be float32 or float64"):
        op(ptr, entry, value, torch.ones(1, dtype=torch.float16), 3, 3)
    with pytest.raises(TypeError, match="sum_entry must be int64"):
        op(ptr, entry.int(), value, weights, 3, 3)
    with pytest.raises(ValueError, match=r"at least one row and one column, got \(3, 0\)"):
        op(ptr, entry, value, weights, 3, 0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_both_backward_paths_give_the_same_bits(kind, dtype, monkeypatch):
    """Lists kept by forward, or computed in backward for the pairs of nonzero weight: the
    same lists added pair by pair in order, so the same gradient bit for bit."""
    X = _objects(kind, 7, seed=31, sizes=(1, 20))
    Y = _objects(kind, 6, seed=32, sizes=(1, 20))
    table = _table("integer", dtype, seed=33)
    weights = torch.randn(len(X), len(Y), generator=torch.Generator().manual_seed(34), dtype=torch.float64)
    weights[weights.abs() < 0.5] = 0.0
    grads = []
    for lists in (True, False):
        monkeypatch.setattr(ops.limits, "BACKWARD_LISTS", lists)
        grads.append(_kernel_grad(X, Y, table, weights))
    assert torch.equal(grads[0], grads[1])
    assert grads[0].abs().sum() > 0


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_forward_keeps_lists_after_a_dense_backward(kind, monkeypatch):
    """The adaptive choice: forward keeps the lists only where the last backward through the
    same cost module gave at least limits.LISTS_MIN_NONZERO of the pairs a nonzero weight."""
    calls = _count_backward_calls(monkeypatch)
    X = _objects(kind, 4, seed=35)
    cost = TableCost(ALPHABET, _table("random", torch.float64, seed=36))
    dense = torch.ones(4, 4, dtype=torch.float64)
    sparse = torch.zeros(4, 4, dtype=torch.float64)
    sparse[:, 0] = 1.0  # a quarter of the pairs
    used = []
    for weights in (dense, dense, sparse, sparse, dense, dense):
        before = dict(calls)
        D = bt.pairwise_distances(X, X, cost=cost)
        (D * weights).sum().backward()
        used.append("lists" if calls["lists"] > before["lists"] else "recompute")
    assert used == ["recompute", "lists", "lists", "recompute", "recompute", "lists"]
