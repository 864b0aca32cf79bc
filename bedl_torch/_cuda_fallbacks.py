"""CUDA implementations, in Python, of the operators without a CUDA kernel, so that every
``torch.ops.bedl_torch`` operator accepts CUDA tensors and returns its results there.

- ``ted_symbols_grad``, ``sed_symbols_grad``: P of the pairs of nonzero weight from the CUDA
  kernels (``ted_symbols``, ``sed_symbols`` with ``need_coopt``) in chunks of at most
  ``limits.DEVICE_P_CELLS`` entries, scattered into the table's gradient by label pair on the
  GPU (``index_add_``: the CPU's sums in another order, equal to rounding). Host round trips:
  the index tensors (their extents) and the weights (which pairs are nonzero).
- ``*_symbols_sums``, ``weighted_pair_sums`` (and ``ted_soft``, ``sed_soft`` in a build without
  the CUDA kernels): the CPU kernels on copies, the results moved back to the GPU (the same
  bits as on the CPU). The per-pair lists have no CUDA kernel (a GPU's backward uses the
  gradient operator instead; docs/gpu.md).

The functions are written for any device, so the tests run their logic on the CPU too.
"""
from __future__ import annotations

import torch

_ops = torch.ops.bedl_torch


def _padded_labels(labels: torch.Tensor, ptr: torch.Tensor, items: torch.Tensor, width: int,
                   gap: int) -> torch.Tensor:
    """``(len(items), width)``: the labels of each item by position, the gap past its end."""
    lengths = ptr[items + 1] - ptr[items]
    pos = torch.arange(width)
    inside = pos[None, :] < lengths[:, None]
    if labels.numel() == 0:
        return torch.full((len(items), width), gap, dtype=torch.long)
    at = (ptr[items][:, None] + pos[None, :]).clamp(max=labels.numel() - 1)
    return torch.where(inside, labels[at], torch.full_like(at, gap))


def add_by_label_pairs(grad: torch.Tensor, p: torch.Tensor, x_idx: torch.Tensor, y_idx: torch.Tensor,
                       weights: torch.Tensor, table_cols: int) -> torch.Tensor:
    """``grad`` (a flat table of ``table_cols`` columns, P's device) plus
    ``sum_k weights[k] * p[k]`` added at the label pairs ``x_idx[k, i] * table_cols + y_idx[k, j]``
    (``p``: ``(K, rows, cols)``; past each pair's block P is zero and the labels are the gap's)."""
    # (the label indices move, not the (K, rows, cols) index formed from them: on a GPU
    # that was a host product and a copy of 8 bytes per entry of P)
    x_idx, y_idx = x_idx.to(p.device), y_idx.to(p.device)
    flat = (x_idx[:, :, None] * table_cols + y_idx[:, None, :]).reshape(-1)
    grad.index_add_(0, flat, (weights.to(p.device, p.dtype).reshape(-1, 1, 1) * p).reshape(-1))
    return grad


def _check_grad_inputs(table, pair_x, pair_y, pair_weights, x_count, y_count, what):
    for name, pairs in (("pair_x", pair_x), ("pair_y", pair_y)):
        if not isinstance(pairs, torch.Tensor) or pairs.dim() != 1 or pairs.dtype != torch.long:
            raise ValueError(f"{name} must be a 1-D int64 tensor")
    if pair_y.shape[0] != pair_x.shape[0]:
        raise ValueError(f"pair_y must have shape ({pair_x.shape[0]},) like pair_x, got {tuple(pair_y.shape)}")
    if not isinstance(pair_weights, torch.Tensor) or pair_weights.layout != torch.strided:
        raise ValueError("pair_weights must be a dense tensor")
    if pair_weights.dtype != table.dtype:
        raise TypeError(f"pair_weights must have the dtype of symbol_costs ({table.dtype}), got "
                        f"{pair_weights.dtype}")
    if pair_weights.dim() != 1 or pair_weights.shape[0] != pair_x.shape[0]:
        raise ValueError(f"pair_weights must have shape ({pair_x.shape[0]},) (one weight per pair), got "
                         f"{tuple(pair_weights.shape)}")
    for name, pairs, count in (("pair_x", pair_x, x_count), ("pair_y", pair_y, y_count)):
        bad = torch.nonzero((pairs < 0) | (pairs >= count)).reshape(-1)
        if len(bad):
            b = int(bad[0])
            raise ValueError(f"{name}[{b}] = {int(pairs[b])} is not a {what} index ({count} "
                             f"{name[-1]} {what}s)")


def symbols_grad(op, leading: tuple, x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y, pair_weights,
                 rel_tol: float, what: str) -> torch.Tensor:
    """The ``(rows, cols)`` gradient of ``sum_b pair_weights[b] * distance_b`` in the symbol table
    ``leading[0]``, on its device: P of the weighted pairs from ``op`` (``leading`` are its
    arguments before the pairs), summed by label pair."""
    from .ops import limits

    table = leading[0]
    px, py = (t.detach().cpu() if isinstance(t, torch.Tensor) else t for t in (pair_x, pair_y))
    for name, pairs in (("pair_x", px), ("pair_y", py)):
        if not isinstance(pairs, torch.Tensor) or pairs.dim() != 1:
            raise ValueError(f"{name} must be a 1-D int64 tensor")
    # the operator's checks of the table, the labels and their layout (no pair runs)
    op(*leading, pair_x[:0], pair_y[:0], False, rel_tol)
    xl, xp, yl, yp = (t.detach().cpu() for t in (x_labels, x_ptr, y_labels, y_ptr))
    _check_grad_inputs(table, px, py, pair_weights, len(xp) - 1, len(yp) - 1, what)
    R, C = table.shape
    weights = pair_weights.detach().to(table.device)
    grad = torch.zeros(R * C, dtype=table.dtype, device=table.device)
    pairs = torch.nonzero(weights.cpu()).reshape(-1)
    if not len(pairs):
        return grad.view(R, C)
    m = xp[px + 1] - xp[px]
    n = yp[py + 1] - yp[py]
    per_pair = (int(m[pairs].max()) + 1) * (int(n[pairs].max()) + 1)
    step = max(1, limits.DEVICE_P_CELLS // per_pair)
    for start in range(0, len(pairs), step):
        chunk = pairs[start:start + step]
        _, p = op(*leading, px[chunk], py[chunk], True, rel_tol)
        rows, cols = p.shape[1], p.shape[2]
        x_idx = _padded_labels(xl, xp, px[chunk], rows, R - 1)
        y_idx = _padded_labels(yl, yp, py[chunk], cols, C - 1)
        add_by_label_pairs(grad, p, x_idx, y_idx, weights[chunk.to(table.device)], C)
    return grad.view(R, C)


def _ted_symbols_grad(table, x_labels, x_sizes, x_ptr, y_labels, y_sizes, y_ptr, pair_x, pair_y,
                      pair_weights, rel_tol):
    return symbols_grad(_ops.ted_symbols, (table, x_labels, x_sizes, x_ptr, y_labels, y_sizes, y_ptr),
                        x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y, pair_weights, rel_tol, "tree")


def _sed_symbols_grad(table, x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y, pair_weights, rel_tol):
    return symbols_grad(_ops.sed_symbols, (table, x_labels, x_ptr, y_labels, y_ptr), x_labels, x_ptr,
                        y_labels, y_ptr, pair_x, pair_y, pair_weights, rel_tol, "sequence")


def on_host(op, device_of: int):
    """``op`` run on CPU copies of its tensor arguments, its results moved to the device of
    argument ``device_of``."""
    def run(*args):
        device = args[device_of].device
        out = op(*[a.detach().cpu() if isinstance(a, torch.Tensor) else a for a in args])
        if isinstance(out, torch.Tensor):
            return out.to(device)
        return tuple(t.to(device) for t in out)
    return run


def register(cuda_kernels) -> None:
    """Registers these implementations for the CUDA dispatch key, for every operator that
    ``cuda_kernels`` (the build's C++ CUDA operators) does not hold."""
    for name, fn in (("ted_symbols_grad", _ted_symbols_grad), ("sed_symbols_grad", _sed_symbols_grad),
                     ("ted_symbols_sums", on_host(_ops.ted_symbols_sums, 0)),
                     ("sed_symbols_sums", on_host(_ops.sed_symbols_sums, 0)),
                     ("weighted_pair_sums", on_host(_ops.weighted_pair_sums, 3)),
                     ("ted_soft", on_host(_ops.ted_soft, 0)), ("sed_soft", on_host(_ops.sed_soft, 0))):
        if name not in cuda_kernels:
            _lib.impl(name, fn, "CUDA")


_lib = torch.library.Library("bedl_torch", "IMPL")
