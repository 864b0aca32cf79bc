"""Costs on a CUDA device: results come back there, gradients flow into CUDA parameters.

The operators with CUDA kernels (``bedl_torch._ext.cuda_operators``: distances and P of
sequences and trees) run on the GPU and must return the CPU kernels' bits; the others have
CUDA implementations in Python (``bedl_torch._cuda_fallbacks``: the gradient from P chunks on
the GPU, the soft and list operators on CPU copies). Every public op accepts CUDA costs and
parameters and agrees with the same computation on the CPU. They skip without a GPU.
"""
import random

import numpy as np
import pytest
import torch

import bedl_torch
from bedl_torch import _ext
from oracles import random_tree

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
KERNELS = {"sed", "sed_symbols", "ted", "ted_symbols"}
needs_kernels = pytest.mark.skipif(not KERNELS <= _ext.cuda_operators,
                                   reason="this build has no CUDA kernels (built with BEDL_TORCH_CUDA=0)")


def _label_sequences(rng, count, longest, symbols):
    lengths = rng.integers(0, longest + 1, count)
    ptr = torch.zeros(count + 1, dtype=torch.int64)
    ptr[1:] = torch.as_tensor(np.cumsum(lengths))
    return torch.as_tensor(rng.integers(0, symbols, int(ptr[-1]))), ptr


def _label_trees(rng, count, most, symbols):
    sizes, labels, ptr = [], [], [0]
    for _ in range(count):
        lab, children = random_tree(int(rng.integers(1, most + 1)), range(symbols), rng)
        size = [1] * len(lab)
        for k in reversed(range(len(lab))):
            size[k] += sum(size[c] for c in children[k])
        sizes += size
        labels += lab
        ptr.append(len(sizes))
    return torch.tensor(labels), torch.tensor(sizes), torch.tensor(ptr)


def _symbol_tables(rng, S, cols=None):
    """Integer costs (ties everywhere), tenths (rounding in sums), signed normals; ``(S, cols)``
    (x's symbols by y's, each side's gap last), square by default."""
    shape = (S, cols or S)
    yield torch.as_tensor(rng.integers(0, 3, shape), dtype=torch.float64)
    yield torch.as_tensor(np.round(rng.random(shape), 1), dtype=torch.float64)
    yield torch.as_tensor(rng.normal(size=shape), dtype=torch.float32)


@needs_kernels
@pytest.mark.parametrize("need_coopt", [False, True])
def test_sequence_kernels_on_cuda_match_cpu_bit_for_bit(need_coopt):
    rng = np.random.default_rng(20)
    xl, xp = _label_sequences(rng, 12, 30, 5)
    yl, yp = _label_sequences(rng, 9, 30, 3)
    px, py = torch.as_tensor(rng.integers(0, 12, 300)), torch.as_tensor(rng.integers(0, 9, 300))
    for table in [*_symbol_tables(rng, 6), *_symbol_tables(rng, 6, 4)]:  # square and rectangular
        args = (xl, xp, yl, yp, px, py, need_coopt, 1e-9)
        d_cpu, p_cpu = _ext.sed_symbols_cpu(table, *args)
        d, p = _ext.sed_symbols_cpu(table.cuda(), *args)
        assert d.is_cuda and p.is_cuda
        assert torch.equal(d.cpu(), d_cpu) and torch.equal(p.cpu(), p_cpu)
        # index tensors on the GPU too
        d2, _ = _ext.sed_symbols_cpu(table.cuda(), *[a.cuda() for a in args[:6]], need_coopt, 1e-9)
        assert torch.equal(d2.cpu(), d_cpu)
    for dtype in (torch.float64, torch.float32):
        costs = torch.as_tensor(rng.integers(0, 4, (40, 21, 17)) / 2, dtype=dtype)
        x_len, y_len = torch.as_tensor(rng.integers(0, 21, 40)), torch.as_tensor(rng.integers(0, 17, 40))
        d_cpu, p_cpu = _ext.sed_cpu(costs, x_len, y_len, need_coopt, 1e-9)
        d, p = _ext.sed_cpu(costs.cuda(), x_len, y_len, need_coopt, 1e-9)
        assert torch.equal(d.cpu(), d_cpu) and torch.equal(p.cpu(), p_cpu)


@needs_kernels
@pytest.mark.parametrize("longest", [0, 8, 16, 40, 64, 65, 130, 300, 700])
@pytest.mark.parametrize("symbols", [5, 120])  # the table in shared memory, and too large for it
def test_sequence_distances_on_cuda_at_every_row_width(longest, symbols):
    """Symbol-table distances keep their rows in registers: a thread per pair where y has at
    most 64 symbols (a kernel per width), else a warp per pair (strips of 4, 8 or 16 columns
    per lane, several passes beyond 512): the CPU's bits."""
    rng = np.random.default_rng(longest)
    xl, xp = _label_sequences(rng, 30, 50, symbols)
    yl, yp = _label_sequences(rng, 40, longest, symbols)
    px, py = torch.as_tensor(rng.integers(0, 30, 2000)), torch.as_tensor(rng.integers(0, 40, 2000))
    for table in _symbol_tables(rng, symbols + 1):
        args = (xl, xp, yl, yp, px, py, False, 1e-9)
        d_cpu, _ = _ext.sed_symbols_cpu(table, *args)
        d, _ = _ext.sed_symbols_cpu(table.cuda(), *args)
        assert torch.equal(d.cpu(), d_cpu)


@needs_kernels
def test_cuda_counts_beyond_doubles_match_cpu():
    """Zero costs tie every alignment of a 700 x 700 pair: its counts pass 2^1024 and the kernel
    with exponents solves it again, as on the CPU."""
    table = torch.zeros(3, 3, dtype=torch.float64)
    labels = torch.zeros(703, dtype=torch.int64)
    ptr = torch.tensor([0, 700, 703])
    px, py = torch.tensor([0, 1, 1]), torch.tensor([0, 1, 0])
    args = (labels, ptr, labels, ptr, px, py, True, 1e-9)
    d_cpu, p_cpu = _ext.sed_symbols_cpu(table, *args)
    d, p = _ext.sed_symbols_cpu(table.cuda(), *args)
    assert torch.equal(d.cpu(), d_cpu) and torch.equal(p.cpu(), p_cpu)


@needs_kernels
@pytest.mark.parametrize("need_coopt", [False, True])
def test_tree_kernels_on_cuda_match_cpu_bit_for_bit(need_coopt):
    rng = np.random.default_rng(21)
    xl, xs, xp = _label_trees(rng, 10, 25, 5)
    yl, ys, yp = _label_trees(rng, 8, 25, 3)
    px, py = torch.as_tensor(rng.integers(0, 10, 200)), torch.as_tensor(rng.integers(0, 8, 200))
    for table in [*_symbol_tables(rng, 6), *_symbol_tables(rng, 6, 4)]:  # square and rectangular
        args = (xl, xs, xp, yl, ys, yp, px, py, need_coopt, 1e-9)
        d_cpu, p_cpu = _ext.ted_symbols_cpu(table, *args)
        d, p = _ext.ted_symbols_cpu(table.cuda(), *args)
        assert d.is_cuda and p.is_cuda
        assert torch.equal(d.cpu(), d_cpu) and torch.equal(p.cpu(), p_cpu)
        # index tensors on the GPU too
        d2, p2 = _ext.ted_symbols_cpu(table.cuda(), *[a.cuda() for a in args[:8]], need_coopt, 1e-9)
        assert torch.equal(d2.cpu(), d_cpu) and torch.equal(p2.cpu(), p_cpu)
    rows = int((xp[1:] - xp[:-1]).max()) + 1
    pair = torch.as_tensor(rng.integers(0, 10, 50))
    for dtype in (torch.float32, torch.float64):
        costs = torch.as_tensor(rng.random((50, rows, rows)), dtype=dtype)
        costs[::2] = torch.as_tensor(rng.integers(0, 4, (25, rows, rows)) / 2, dtype=dtype)  # halves: ties
        d_cpu, p_cpu = _ext.ted_cpu(costs, xs, xp, xs, xp, pair, pair.flip(0), need_coopt, 1e-9)
        d, p = _ext.ted_cpu(costs.cuda(), xs, xp, xs, xp, pair, pair.flip(0), need_coopt, 1e-9)
        assert torch.equal(d.cpu(), d_cpu) and torch.equal(p.cpu(), p_cpu)


@needs_kernels
def test_tree_lane_groups_on_cuda_match_cpu_and_the_per_pair_kernel(monkeypatch):
    """Distances with a symbol table run in lane groups (up to 32 pairs that share x on a
    warp's lanes); pairs with a one-node tree and pairs too wide for a lane run on the per-pair
    kernel in the same call. Both kernels give the CPU's bits, here on a GPU, with full and
    partial groups of several launches (array sizes)."""
    from oracles import comb_tree

    rng = np.random.default_rng(23)
    xl, xs, xp = _label_trees(rng, 6, 40, 5)
    yl, ys, yp = _label_trees(rng, 70, 40, 3)
    comb_labels, comb_children = comb_tree(240, [int(k) for k in rng.integers(0, 3, 240)])  # too wide for a lane
    size = [1] * 240
    for k in reversed(range(240)):
        size[k] += sum(size[c] for c in comb_children[k])
    yl = torch.cat([yl, torch.tensor(comb_labels)])
    ys = torch.cat([ys, torch.tensor(size)])
    yp = torch.cat([yp, yp[-1:] + 240])
    px = torch.arange(6).repeat_interleave(71)
    py = torch.arange(71).repeat(6)
    for table in _symbol_tables(rng, 6, 4):
        args = (xl, xs, xp, yl, ys, yp, px, py, False, 1e-9)
        d_cpu, _ = _ext.ted_symbols_cpu(table, *args)
        d, _ = _ext.ted_symbols_cpu(table.cuda(), *args)
        monkeypatch.setenv("BEDL_TORCH_CUDA_TREE_LANES", "0")
        d_pairs, _ = _ext.ted_symbols_cpu(table.cuda(), *args)
        monkeypatch.delenv("BEDL_TORCH_CUDA_TREE_LANES")
        assert torch.equal(d.cpu(), d_cpu) and torch.equal(d_pairs.cpu(), d_cpu)


@needs_kernels
def test_cuda_tree_counts_beyond_doubles_match_cpu():
    """Zero costs tie every mapping of two 700-node paths: the counts pass 2^1024 and the
    kernel with exponents solves that pair again, as on the CPU."""
    table = torch.zeros(3, 3, dtype=torch.float64)
    sizes = torch.cat([torch.arange(700, 0, -1), torch.tensor([3, 1, 1])])
    ptr = torch.tensor([0, 700, 703])
    labels = torch.zeros(703, dtype=torch.int64)
    px, py = torch.tensor([0, 1, 1]), torch.tensor([0, 1, 0])
    args = (labels, sizes, ptr, labels, sizes, ptr, px, py, True, 1e-9)
    d_cpu, p_cpu = _ext.ted_symbols_cpu(table, *args)
    d, p = _ext.ted_symbols_cpu(table.cuda(), *args)
    assert torch.equal(d.cpu(), d_cpu) and torch.equal(p.cpu(), p_cpu)


@needs_kernels
@pytest.mark.parametrize("kind", ["sequence", "tree"])
def test_cuda_max_distance_marks_as_cpu(kind):
    rng = np.random.default_rng(22)
    table = torch.as_tensor(rng.random((5, 5)), dtype=torch.float64)
    if kind == "tree":
        xl, xs, xp = _label_trees(rng, 6, 12, 4)
        op, args = _ext.ted_symbols_cpu, (xl, xs, xp, xl, xs, xp)
    else:
        xl, xp = _label_sequences(rng, 6, 12, 4)
        op, args = _ext.sed_symbols_cpu, (xl, xp, xl, xp)
    px, py = torch.as_tensor(rng.integers(0, 6, 30)), torch.as_tensor(rng.integers(0, 6, 30))
    full, _ = op(table, *args, px, py, False, 1e-9)
    limit = full.clone()
    limit[::2] -= 0.25  # every other pair above its threshold
    d_cpu, _ = op(table, *args, px, py, False, 1e-9, limit)
    d, _ = op(table.cuda(), *args, px, py, False, 1e-9, limit.cuda())
    assert torch.equal(d.cpu(), d_cpu)
    assert torch.isinf(d_cpu[::2]).all() and torch.equal(d_cpu[1::2], full[1::2])


@needs_kernels
def test_bad_costs_on_cuda_raise_the_cpu_errors():
    costs = torch.ones(3, 4, 4, dtype=torch.float64)
    costs[1, 0, 2] = float("nan")
    costs[2] = 1e308
    lengths = torch.full((3,), 3)
    sizes, ptr, pair = torch.tensor([3, 1, 1]), torch.tensor([0, 3]), torch.zeros(3, dtype=torch.int64)
    for coopt in (False, True):
        with pytest.raises(ValueError, match="costs of pair 1 contain NaN or inf"):
            _ext.sed_cpu(costs.cuda(), lengths, lengths, coopt, 1e-9)
        with pytest.raises(ValueError, match="costs of pair 1 contain NaN or inf"):
            _ext.ted_cpu(costs.cuda(), sizes, ptr, sizes, ptr, pair, pair, coopt, 1e-9)
    with pytest.raises(ValueError, match="costs of pair 2 are too large"):
        _ext.sed_cpu(costs[[0, 0, 2]].cuda(), lengths, lengths, False, 1e-9)
    with pytest.raises(ValueError, match="pair_x"):
        _ext.ted_cpu(costs.cuda(), sizes, ptr, sizes, ptr, pair[:2], pair, False, 1e-9)


def _trees(count, seed):
    rng = random.Random(seed)
    return [bedl_torch.Tree(*random_tree(rng.randint(1, 15), "abcd", rng.randrange(10**6))) for _ in range(count)]


def _embedding(seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(4, 3, generator=gen, dtype=torch.float64)


def test_single_pair_ops_on_cuda_costs():
    x, y = _trees(2, 0)
    gen = torch.Generator().manual_seed(1)
    C = torch.rand(len(x) + 1, len(y) + 1, generator=gen, dtype=torch.float64)
    Cg = C.cuda().requires_grad_(True)
    d, P = bedl_torch.coopt_matrix(x, y, Cg)
    assert d.device.type == "cuda" and P.device.type == "cuda"
    d_cpu, P_cpu = bedl_torch.coopt_matrix(x, y, C)
    assert float(d) == float(d_cpu)
    assert torch.equal(P.cpu(), P_cpu)
    d.backward()
    assert Cg.grad.device.type == "cuda"
    assert torch.equal(Cg.grad.cpu(), P_cpu)
    pseudo = bedl_torch.pseudo_edit_distance(x, y, Cg, Cg.detach() * 2)
    assert pseudo.device.type == "cuda"


@pytest.mark.parametrize("mode", ["exact", "pseudo"])
def test_pairwise_distances_and_gradient_on_cuda(mode):
    trees = _trees(6, 2)
    emb = _embedding(3)
    cpu = bedl_torch.EuclideanCost(list("abcd"), emb)
    gpu = bedl_torch.EuclideanCost(list("abcd"), emb, device="cuda")
    D_cpu = bedl_torch.pairwise_distances(trees, cost=cpu, mode=mode)
    D_gpu = bedl_torch.pairwise_distances(trees, cost=gpu, mode=mode)
    assert D_gpu.device.type == "cuda"
    torch.testing.assert_close(D_gpu.cpu(), D_cpu, rtol=1e-12, atol=1e-12)
    D_cpu.sum().backward()
    D_gpu.sum().backward()
    assert gpu.embedding.grad.device.type == "cuda"
    torch.testing.assert_close(gpu.embedding.grad.cpu(), cpu.embedding.grad, rtol=1e-10, atol=1e-10)


def test_padded_batch_on_cuda_matches_cpu():
    trees = _trees(8, 4)
    batch = bedl_torch.PairBatch(trees[:4], trees[4:])
    cost = bedl_torch.EuclideanCost(list("abcd"), _embedding(5), device="cuda")
    costs = batch.costs(cost)
    assert costs.device.type == "cuda"
    d = batch.distances(costs)
    d.sum().backward()
    d_cpu = batch.distances(costs.detach().cpu())
    torch.testing.assert_close(d.cpu(), d_cpu, rtol=0, atol=0)
    assert cost.embedding.grad.device.type == "cuda"


def test_unit_cost_on_cuda():
    trees = _trees(5, 6)
    unit_gpu = bedl_torch.UnitCost(list("abcd"), device="cuda")
    D = bedl_torch.pairwise_distances(trees, cost=unit_gpu)
    assert D.device.type == "cuda"
    assert torch.equal(D.cpu(), bedl_torch.pairwise_distances(trees))


def test_cosine_cost_on_cuda():
    from bedl_torch.pretrained import CosineCost

    words = ["good", "bad", "film", None]
    gen = torch.Generator().manual_seed(7)
    vectors = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    seqs = [["good", "film"], ["bad", None, "film"], ["film"]]
    cpu = CosineCost(words[:3], vectors)
    gpu = CosineCost(words[:3], vectors).to("cuda")
    D_cpu = bedl_torch.pairwise_distances(seqs, cost=cpu)
    D_gpu = bedl_torch.pairwise_distances(seqs, cost=gpu)
    assert D_gpu.device.type == "cuda"
    torch.testing.assert_close(D_gpu.cpu(), D_cpu, rtol=1e-12, atol=1e-12)
    D_gpu.sum().backward()
    D_cpu.sum().backward()
    grads = [p.grad for p in gpu.parameters() if p.grad is not None]
    assert grads and all(g.device.type == "cuda" and torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_training_loop_steps_on_cuda_match_cpu(kind, monkeypatch):
    """Several forward/backward steps, as in a training loop: the first backward recomputes
    the per-pair lists, later forwards keep them (the loss weights every pair), and a sparse
    loss after that recomputes again. Every step's gradient on CUDA matches the CPU's."""
    from bedl_torch import ops

    if kind == "tree":
        items = _trees(7, 8)
    else:
        rng = random.Random(9)
        items = [[rng.choice("abcd") for _ in range(rng.randint(1, 12))] for _ in range(7)]
    emb = _embedding(10)
    cpu = bedl_torch.EuclideanCost(list("abcd"), emb)
    gpu = bedl_torch.EuclideanCost(list("abcd"), emb, device="cuda")
    weights = torch.rand(7, 7, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    sparse = torch.zeros(7, 7, dtype=torch.float64)
    sparse[:, 0] = 1.0
    from_lists = []
    real = bedl_torch._ext.weighted_pair_sums_cpu
    monkeypatch.setattr(bedl_torch._ext, "weighted_pair_sums_cpu", lambda *a: from_lists.append(1) or real(*a))
    for step, w in enumerate([weights, weights, weights, sparse]):
        results = []
        for cost in (cpu, gpu):
            cost.zero_grad()
            D = bedl_torch.pairwise_distances(items, cost=cost)
            (D * w.to(D.device)).sum().backward()
            assert D.device == cost.embedding.device and cost.embedding.grad.device == D.device
            results.append((D.detach().cpu(), cost.embedding.grad.cpu()))
        torch.testing.assert_close(results[1][0], results[0][0], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(results[1][1], results[0][1], rtol=1e-10, atol=1e-10)
        # each backward's share of nonzero weights decides whether the next forward keeps lists
        assert ops.batch.dense_backward[gpu] is (w is weights)
    # steps 1, 2 and 3 backward from lists on the CPU; on the GPU too, except where this build
    # has the CUDA kernels, whose backward computes P there (ops.batch.coopt_grad)
    on_gpu = ("ted_symbols" if kind == "tree" else "sed_symbols") in _ext.cuda_operators
    assert len(from_lists) == (3 if on_gpu else 2 * 3)


@needs_kernels
@pytest.mark.parametrize("kind", ["sequence", "tree"])
def test_gradient_on_cuda_stays_on_the_gpu(kind, monkeypatch):
    """A loss over a matrix of distances with the table on a GPU: no CPU kernel runs in forward
    or backward (the gradient operator runs with the table on the GPU, the per-pair lists not
    at all), and the gradient is the CPU's to within rounding."""
    rng = random.Random(30)
    if kind == "tree":
        items = _trees(12, 33)
    else:
        items = [[rng.choice("abcd") for _ in range(rng.randint(1, 25))] for _ in range(12)]
    emb = _embedding(31)
    cpu = bedl_torch.EuclideanCost(list("abcd"), emb)
    gpu = bedl_torch.EuclideanCost(list("abcd"), emb, device="cuda")
    weights = torch.rand(12, 12, generator=torch.Generator().manual_seed(32), dtype=torch.float64)
    D_cpu = bedl_torch.pairwise_distances(items, cost=cpu)
    (D_cpu * weights).sum().backward()
    for name in ("sed_symbols_sums_cpu", "ted_symbols_sums_cpu", "weighted_pair_sums_cpu"):
        monkeypatch.setattr(_ext, name, lambda *a, name=name: pytest.fail(f"{name} ran for a CUDA table"))
    grads = []
    for name in ("sed_symbols_grad_cpu", "ted_symbols_grad_cpu"):
        real = getattr(_ext, name)
        monkeypatch.setattr(_ext, name, lambda *a, real=real: grads.append(a[0].device.type) or real(*a))
    for _ in range(2):  # the second forward after a dense backward too
        gpu.zero_grad()
        D = bedl_torch.pairwise_distances(items, cost=gpu)
        (D * weights.cuda()).sum().backward()
        torch.testing.assert_close(D.detach().cpu(), D_cpu.detach(), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(gpu.embedding.grad.cpu(), cpu.embedding.grad, rtol=1e-12, atol=1e-12)
    assert grads == ["cuda", "cuda"]  # one gradient operator call per backward, on the GPU's table


@needs_kernels
@pytest.mark.parametrize("need_coopt", [False, True])
@pytest.mark.parametrize("op", ["ted", "sed", "ted_symbols", "sed_symbols"])
def test_opcheck_on_cuda(op, need_coopt):
    """The CUDA kernels against the operators' schemas and fake implementations (every tensor
    argument on the GPU), as tests/test_registration.py checks the CPU's."""
    import test_registration as reg

    make = {"ted": reg._tree_args, "sed": reg._sequence_args,
            "ted_symbols": lambda c: reg._symbol_args("tree", c),
            "sed_symbols": lambda c: reg._symbol_args("seq", c)}[op]
    args = tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in make(need_coopt))
    utils = ["test_schema", "test_autograd_registration", "test_faketensor"]
    if not (need_coopt and op.endswith("_symbols")):  # P's padded shape depends on the data there
        utils.append("test_aot_dispatch_dynamic")
    torch.library.opcheck(getattr(torch.ops.bedl_torch, op).default, args, test_utils=utils)
    d, p = getattr(torch.ops.bedl_torch, op)(*args)
    d_cpu, p_cpu = getattr(torch.ops.bedl_torch, op)(*make(need_coopt))
    assert d.is_cuda and torch.equal(d.cpu(), d_cpu) and torch.equal(p.cpu(), p_cpu)


@needs_kernels
@pytest.mark.parametrize("kind", ["sequence", "tree"])
def test_gradcheck_on_cuda(kind):
    """The distance's gradient (P from the GPU's kernel for sequences, the CPU's for trees)
    against finite differences, at random costs (no ties, so the distance is smooth there)."""
    if kind == "tree":
        x, y = _trees(2, 40)
    else:
        x, y = "abcab", "bcaacb"
    C = torch.rand(len(x) + 1, len(y) + 1, generator=torch.Generator().manual_seed(41), dtype=torch.float64)
    C = C.cuda().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda c: bedl_torch.edit_distance(x, y, c), (C,), eps=1e-7, atol=1e-6)


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_every_operator_accepts_cuda_tensors(kind):
    """The operators without a CUDA kernel (bedl_torch._cuda_fallbacks) on CUDA tensors: results
    on the GPU; the gradient from P chunks equal to the CPU's lists to rounding, the soft and
    list operators the CPU's bits (they run the CPU kernels on copies)."""
    rng = np.random.default_rng(50)
    if kind == "tree":
        xl, xs, xp = _label_trees(rng, 8, 14, 5)
        labels = (xl, xs, xp, xl, xs, xp)
        grad_op, sums_op, soft_op = _ext.ted_symbols_grad_cpu, _ext.ted_symbols_sums_cpu, _ext.ted_soft_cpu
    else:
        xl, xp = _label_sequences(rng, 8, 20, 5)
        labels = (xl, xp, xl, xp)
        grad_op, sums_op, soft_op = _ext.sed_symbols_grad_cpu, _ext.sed_symbols_sums_cpu, _ext.sed_soft_cpu
    px, py = torch.as_tensor(rng.integers(0, 8, 40)), torch.as_tensor(rng.integers(0, 8, 40))
    for table in _symbol_tables(rng, 6):
        weights = torch.as_tensor(rng.normal(size=40), dtype=table.dtype)
        expected = grad_op(table, *labels, px, py, weights, 1e-9)
        got = grad_op(table.cuda(), *labels, px, py, weights.cuda(), 1e-9)
        assert got.is_cuda
        tol = 1e-12 if table.dtype == torch.float64 else 1e-5
        torch.testing.assert_close(got.cpu(), expected, rtol=tol, atol=tol * float(expected.abs().max()))
    sums = sums_op(table.cuda(), *labels, px, py, 1e-9, 1 << 20)
    sums_cpu = sums_op(table, *labels, px, py, 1e-9, 1 << 20)
    assert all(s.is_cuda and torch.equal(s.cpu(), c) for s, c in zip(sums, sums_cpu))
    w = torch.as_tensor(rng.normal(size=40))
    g = _ext.weighted_pair_sums_cpu(*sums[1:], w.cuda(), 6, 6)
    assert g.is_cuda and torch.equal(g.cpu(), _ext.weighted_pair_sums_cpu(*sums_cpu[1:], w, 6, 6))
    if kind == "tree":
        rows = int((xp[1:] - xp[:-1]).max()) + 1
        costs = torch.as_tensor(rng.random((40, rows, rows)))
        args = (xs, xp, xs, xp, px, py, 0.5, True)
    else:
        costs = torch.as_tensor(rng.random((40, 21, 21)))
        args = (torch.as_tensor(rng.integers(0, 21, 40)), torch.as_tensor(rng.integers(0, 21, 40)), 0.5, True)
    d, p = soft_op(costs.cuda(), *args)
    d_cpu, p_cpu = soft_op(costs, *args)
    assert d.is_cuda and p.is_cuda
    # the CUDA soft kernels' exp and log round as the GPU's math library does
    torch.testing.assert_close(d.cpu(), d_cpu, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(p.cpu(), p_cpu, rtol=1e-10, atol=1e-10)


@needs_kernels
@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_soft_kernels_on_cuda_match_cpu(kind):
    """The soft distances and expected alignments on CUDA (common/sequence_soft.h,
    common/forest_soft.h per thread) against the CPU kernels: the same sums, with exp and log
    from the GPU's math library, so within 1e-10; weights as doubles, and the wide weights of
    long pairs at a low temperature; the CPU's errors for costs out of range."""
    if not {"sed_soft", "ted_soft"} <= _ext.cuda_operators:
        pytest.skip("this build has no CUDA soft kernels")
    rng = np.random.default_rng(51)
    if kind == "tree":
        xl, xs, xp = _label_trees(rng, 10, 30, 4)
        rows = int((xp[1:] - xp[:-1]).max()) + 1
        px, py = torch.as_tensor(rng.integers(0, 10, 60)), torch.as_tensor(rng.integers(0, 10, 60))
        op, index = _ext.ted_soft_cpu, (xs, xp, xs, xp, px, py)
        costs = torch.as_tensor(rng.random((60, rows, rows)) * 2 - 0.25)
    else:
        op = _ext.sed_soft_cpu
        costs = torch.as_tensor(rng.random((60, 41, 41)) * 2 - 0.25)
        index = (torch.as_tensor(rng.integers(0, 41, 60)), torch.as_tensor(rng.integers(0, 41, 60)))
    for dtype in (torch.float64, torch.float32):
        for temperature in (1.0, 0.01):
            c = costs.to(dtype)
            d_cpu, p_cpu = op(c, *index, temperature, True)
            d, p = op(c.cuda(), *index, temperature, True)
            tol = 1e-10 if dtype == torch.float64 else 1e-5
            torch.testing.assert_close(d.cpu(), d_cpu, rtol=tol, atol=tol)
            torch.testing.assert_close(p.cpu(), p_cpu, rtol=tol, atol=tol)
    if kind == "sequence":  # 300 + 300 symbols: wide weights from the start
        long = torch.as_tensor(rng.random((2, 301, 301)))
        n = torch.tensor([300, 150])
        d_cpu, p_cpu = op(long, n, n, 0.01, True)
        d, p = op(long.cuda(), n, n, 0.01, True)
        torch.testing.assert_close(d.cpu(), d_cpu, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(p.cpu(), p_cpu, rtol=1e-10, atol=1e-10)
    bad = costs.clone()
    bad[3] = 1e10
    with pytest.raises(ValueError, match="too large for temperature"):
        op(bad.cuda(), *index, 1e-10, False)


def test_torch_compile_on_cuda_matches_eager():
    """A user's loss over CUDA costs and a CUDA cost module, compiled: the values and gradients
    of eager mode."""
    x, y = _trees(2, 60)
    base = torch.rand(len(x) + 1, len(y) + 1, dtype=torch.float64, generator=torch.Generator().manual_seed(61))
    base = base.cuda()
    items = _trees(6, 62)
    cost = bedl_torch.EuclideanCost(list("abcd"), _embedding(63), device="cuda")

    def loss(weight):
        costs = (base * weight).exp()
        d = bedl_torch.edit_distance(x, y, costs) + bedl_torch.soft_edit_distance(x, y, costs, temperature=0.5)
        return d * weight.sum() + bedl_torch.pairwise_distances(items, cost=cost).square().sum()

    torch._dynamo.reset()
    results = []
    for run in (loss, torch.compile(loss, backend="aot_eager")):
        weight = torch.linspace(0.5, 1.5, len(y) + 1, dtype=torch.float64, device="cuda").requires_grad_(True)
        cost.zero_grad()
        value = run(weight)
        value.backward()
        results.append((value.detach().cpu(), weight.grad.cpu(), cost.embedding.grad.cpu()))
    for eager, compiled in zip(*results):
        torch.testing.assert_close(compiled, eager, rtol=1e-12, atol=0)
