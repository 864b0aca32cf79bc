"""Rectangular symbol tables (x's symbols by y's, each side's gap last) against the whole square
table they are cut from. The kernels read the same entries through either numbering, so the
distances, P, the cutoffs, the per-pair lists and the gradient must be the same bits, and the
gradient of the cut table must be the square table's gradient at the same symbols (zero
elsewhere). Both sides numbered in a shuffled order; x alphabets below and above the tree lanes'
per-symbol rows (``WideY::kRepBySymbolLimit``, 32 rows); integer costs (many ties) and signed ones."""
import numpy as np
import pytest
import torch

from bedl_torch import _ext
from oracles import random_tree

U = 60  # symbols of the whole table; its gap is U


def _trees(rng, count, symbols):
    sizes, labels, ptr = [], [], [0]
    for _ in range(count):
        lab, children = random_tree(int(rng.integers(1, 14)), symbols, rng)
        size = [1] * len(lab)
        for k in reversed(range(len(lab))):
            size[k] += sum(size[c] for c in children[k])
        sizes += size
        labels += [int(a) for a in lab]
        ptr.append(len(sizes))
    return torch.tensor(labels), torch.tensor(sizes), torch.tensor(ptr)


def _sequences(rng, count, symbols):
    seqs = [rng.choice(symbols, int(rng.integers(0, 14))) for _ in range(count)]
    ptr = torch.tensor(np.concatenate([[0], np.cumsum([len(s) for s in seqs])]))
    return torch.tensor(np.concatenate(seqs).astype(np.int64)), ptr


def _cut(table, x_labels, y_labels, rng):
    """The block of ``table`` whose rows are x's symbols and columns y's (shuffled, the gap
    last), the labels renumbered into it, and the square table's rows and columns it holds."""
    gap = table.shape[0] - 1
    held, renumbered = [], []
    for labels in (x_labels, y_labels):
        symbols = torch.unique(labels)
        symbols = symbols[torch.from_numpy(rng.permutation(len(symbols)))]
        lookup = torch.full((gap + 1,), len(symbols), dtype=torch.long)
        lookup[symbols] = torch.arange(len(symbols))
        held.append(torch.cat([symbols, torch.tensor([gap])]))
        renumbered.append(lookup[labels])
    return table[held[0]][:, held[1]].contiguous(), renumbered[0], renumbered[1], held[0], held[1]


def _tables(rng):
    yield torch.as_tensor(rng.integers(0, 3, (U + 1, U + 1)), dtype=torch.float64)
    yield torch.as_tensor(rng.normal(size=(U + 1, U + 1)) + 1.0, dtype=torch.float32)
    yield torch.as_tensor(rng.random((U + 1, U + 1)), dtype=torch.float64)


def _problem(kind, x_symbols, rng):
    """(the arguments before the pairs for the square table, the index of the table and of the
    labels among them, pair_x, pair_y): every x against every y, so that trees share x in lanes."""
    xs_alphabet = rng.choice(U, x_symbols, replace=False)
    ys_alphabet = rng.choice(U, 3, replace=False)
    if kind == "tree":
        xl, xs, xp = _trees(rng, 7, xs_alphabet)
        yl, ys, yp = _trees(rng, 6, ys_alphabet)
        args, nx, ny = [None, xl, xs, xp, yl, ys, yp], 7, 6
        where = (1, 4)
    else:
        xl, xp = _sequences(rng, 7, xs_alphabet)
        yl, yp = _sequences(rng, 6, ys_alphabet)
        args, nx, ny = [None, xl, xp, yl, yp], 7, 6
        where = (1, 3)
    px = torch.arange(nx).repeat_interleave(ny)
    py = torch.arange(ny).repeat(nx)
    return args, where, px, py


def _ops(kind):
    if kind == "tree":
        return _ext.ted_symbols_cpu, _ext.ted_symbols_grad_cpu, _ext.ted_symbols_sums_cpu
    return _ext.sed_symbols_cpu, _ext.sed_symbols_grad_cpu, _ext.sed_symbols_sums_cpu


@pytest.mark.parametrize("kind", ["tree", "sequence"])
@pytest.mark.parametrize("x_symbols", [4, 40])
def test_a_cut_table_gives_the_square_tables_bits(kind, x_symbols):
    rng = np.random.default_rng(11 + x_symbols)
    distances, grad_op, sums_op = _ops(kind)
    args, (ix, iy), px, py = _problem(kind, x_symbols, rng)
    for table in _tables(rng):
        block, xl, yl, rows, cols = _cut(table, args[ix], args[iy], rng)
        assert block.shape[0] != block.shape[1]
        square = list(args)
        square[0] = table
        cut = list(args)
        cut[0], cut[ix], cut[iy] = block, xl, yl
        for need_coopt in (False, True):
            d_sq, p_sq = distances(*square, px, py, need_coopt, 1e-9)
            d_cut, p_cut = distances(*cut, px, py, need_coopt, 1e-9)
            assert torch.equal(d_cut, d_sq)
            assert torch.equal(p_cut, p_sq)
        # the cutoff: half the pairs at their distance (kept), half just below it (beyond)
        limit = d_sq.double() - 0.25 * (torch.arange(len(px)) % 2)
        d_sq_cut = distances(*square, px, py, False, 1e-9, limit)[0]
        assert torch.equal(distances(*cut, px, py, False, 1e-9, limit)[0], d_sq_cut)
        assert torch.isinf(d_sq_cut[1::2]).all() and torch.equal(d_sq_cut[::2], d_sq[::2])
        weights = torch.as_tensor(rng.normal(size=len(px)), dtype=table.dtype)
        weights[::5] = 0
        g_sq = grad_op(*square, px, py, weights, 1e-9)
        g_cut = grad_op(*cut, px, py, weights, 1e-9)
        assert g_cut.shape == block.shape
        assert torch.equal(g_cut, g_sq[rows][:, cols])
        outside = g_sq.clone()
        outside[rows[:, None], cols[None, :]] = 0
        assert not outside.any()
        sums = sums_op(*cut, px, py, 1e-9, 1 << 30)
        assert torch.equal(sums[0], d_sq)
        assert torch.equal(_ext.weighted_pair_sums_cpu(*sums[1:], weights, *block.shape), g_cut)
