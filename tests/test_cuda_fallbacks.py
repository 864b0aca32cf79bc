"""The Python CUDA implementations of the operators without a CUDA kernel
(``bedl_torch._cuda_fallbacks``), run on the CPU: they are written for any device, so their
logic (P in chunks scattered by label pair; the CPU kernels on copies) is checked here against
the CPU operators on every machine; tests/test_cuda.py runs them on a GPU."""
import numpy as np
import pytest
import torch

from bedl_torch import _cuda_fallbacks as fallbacks
from bedl_torch import _ext
from bedl_torch.ops import limits
from test_cuda import _label_sequences, _label_trees, _symbol_tables


def _inputs(kind, rng):
    if kind == "tree":
        xl, xs, xp = _label_trees(rng, 9, 14, 5)
        yl, ys, yp = _label_trees(rng, 7, 14, 5)
        return (xl, xs, xp, yl, ys, yp), _ext.ted_symbols_grad_cpu, fallbacks._ted_symbols_grad, 9, 7
    xl, xp = _label_sequences(rng, 9, 20, 5)
    yl, yp = _label_sequences(rng, 7, 20, 5)
    return (xl, xp, yl, yp), _ext.sed_symbols_grad_cpu, fallbacks._sed_symbols_grad, 9, 7


@pytest.mark.parametrize("kind", ["tree", "sequence"])
@pytest.mark.parametrize("chunk_cells", [1, 1 << 25])
def test_gradient_from_p_chunks_matches_the_gradient_kernel(kind, chunk_cells, monkeypatch):
    """sum_b w_b P_b by label pair, from P of the weighted pairs (one pair per chunk, or all
    in one), against the CPU gradient kernel's lists: equal to rounding (another order of
    the same sums). Zero weights skip their pairs; empty sequences and one-node trees take part."""
    monkeypatch.setattr(limits, "DEVICE_P_CELLS", chunk_cells)
    rng = np.random.default_rng(40)
    labels, kernel, from_p, nx, ny = _inputs(kind, rng)
    px, py = torch.as_tensor(rng.integers(0, nx, 60)), torch.as_tensor(rng.integers(0, ny, 60))
    for table in _symbol_tables(rng, 6):
        weights = torch.as_tensor(rng.normal(size=60), dtype=table.dtype)
        weights[::4] = 0
        expected = kernel(table, *labels, px, py, weights, 1e-9)
        got = from_p(table, *labels, px, py, weights, 1e-9)
        assert got.shape == expected.shape and got.dtype == expected.dtype
        tol = 1e-12 if table.dtype == torch.float64 else 1e-5
        torch.testing.assert_close(got, expected, rtol=tol, atol=tol * float(expected.abs().max()))
        assert torch.equal(from_p(table, *labels, px, py, torch.zeros_like(weights), 1e-9),
                           torch.zeros_like(expected))
    # P of the weighted pairs alone, in chunks of the size asked for
    op = _ext.ted_symbols_cpu if kind == "tree" else _ext.sed_symbols_cpu
    chunks = []

    def counting(*args):
        if args[-2]:  # need_coopt
            chunks.append(len(args[-4]))
        return op(*args)

    xl, x_ptr, yl, y_ptr = (labels[0], labels[2], labels[3], labels[5]) if kind == "tree" else labels
    fallbacks.symbols_grad(counting, (table, *labels), xl, x_ptr, yl, y_ptr, px, py, weights, 1e-9, kind)
    assert sum(chunks) == int(torch.count_nonzero(weights))
    assert len(chunks) == (1 if chunk_cells > 1 else sum(chunks))


@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_gradient_from_p_rejects_what_the_kernel_rejects(kind):
    rng = np.random.default_rng(41)
    labels, kernel, from_p, nx, ny = _inputs(kind, rng)
    table = torch.rand(6, 6, dtype=torch.float64)
    px, py = torch.tensor([0, 1]), torch.tensor([1, 0])
    good = torch.ones(2, dtype=torch.float64)
    cases = [
        ((px, py, good.float()), TypeError, "dtype of symbol_costs"),
        ((px, py, good[:1]), ValueError, "pair_weights must have shape"),
        ((torch.tensor([0, nx]), py, good), ValueError, "is not a"),
        ((px, torch.tensor([-1, 0]), good), ValueError, "is not a"),
    ]
    for (a, b, w), error, message in cases:
        with pytest.raises(error, match=message):
            kernel(table, *labels, a, b, w, 1e-9)
        with pytest.raises(error, match=message):
            from_p(table, *labels, a, b, w, 1e-9)
    bad_labels = list(labels)
    bad_labels[0] = bad_labels[0].clone()
    bad_labels[0][0] = 9  # beyond the table
    with pytest.raises(ValueError):
        from_p(table, *bad_labels, px, py, good, 1e-9)


def test_operators_on_host_copies_return_the_cpu_results():
    """The soft and list operators' CUDA implementations run the CPU kernels on copies: on CPU
    tensors, the same call."""
    rng = np.random.default_rng(42)
    costs = torch.as_tensor(rng.random((5, 7, 6)))
    x_len, y_len = torch.tensor([6, 3, 0, 2, 6]), torch.tensor([5, 5, 1, 0, 2])
    run = fallbacks.on_host(_ext.sed_soft_cpu, 0)
    for got, expected in zip(run(costs, x_len, y_len, 0.5, True), _ext.sed_soft_cpu(costs, x_len, y_len, 0.5, True)):
        assert torch.equal(got, expected)
    xl, xp = _label_sequences(rng, 4, 8, 5)
    table = torch.as_tensor(rng.random((6, 6)))
    px, py = torch.tensor([0, 1, 2, 3]), torch.tensor([3, 2, 1, 0])
    sums = fallbacks.on_host(_ext.sed_symbols_sums_cpu, 0)(table, xl, xp, xl, xp, px, py, 1e-9, 1 << 20)
    for got, expected in zip(sums, _ext.sed_symbols_sums_cpu(table, xl, xp, xl, xp, px, py, 1e-9, 1 << 20)):
        assert torch.equal(got, expected)
    w = torch.tensor([1.0, -2.0, 0.5, 0.0], dtype=torch.float64)
    got = fallbacks.on_host(_ext.weighted_pair_sums_cpu, 3)(*sums[1:], w, 6, 6)
    assert torch.equal(got, _ext.weighted_pair_sums_cpu(*sums[1:], w, 6, 6))
