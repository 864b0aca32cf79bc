"""Checks of tensors and devices at the library's Python boundary (cost modules:
:func:`bedl_torch.costs.base.check_cost_module`).

The public entry points run these before any kernel or tensor operation, so an unsupported
input (sparse, quantized, nested or meta tensors, dtypes other than float32/float64, a device
that does not exist) gives a TypeError or ValueError naming the argument and the problem
instead of an error, or a crash, deep inside torch or the C++ kernels.

Layer: imports torch only (:mod:`bedl_torch.costs` imports this module).
"""
from __future__ import annotations

import weakref
from typing import Optional

import torch

__all__ = [
    "COST_DTYPES",
    "check_dense",
    "check_cost_dtype",
    "check_cost_tensor",
    "check_real_tensor",
    "check_device",
    "check_sums_finite",
]

#: The dtypes the kernels compute in.
COST_DTYPES = (torch.float32, torch.float64)


def check_dense(t, name: str) -> None:
    """``t`` is a ``torch.Tensor`` whose data can be read as an ordinary array: strided (not
    sparse), not nested, not quantized and not on the ``meta`` device (which holds no data).

    Raises:
        TypeError: not a tensor, or another layout or a quantized tensor.
        ValueError: a tensor on the meta device.
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.is_nested:
        raise TypeError(f"{name} must be a dense (strided) tensor, got a nested tensor")
    if t.layout != torch.strided:
        raise TypeError(
            f"{name} must be a dense (strided) tensor, got layout {t.layout} "
            "(convert with .to_dense())"
        )
    if t.is_quantized:
        raise TypeError(f"{name} must not be quantized, got dtype {t.dtype} (use .dequantize())")
    if t.device.type == "meta":
        raise ValueError(f"{name} is on the meta device, which holds no data")


def check_cost_dtype(dtype, name: str) -> None:
    """``dtype`` is float32 or float64 (TypeError otherwise: half precision, complex, integer
    and bool costs are not supported)."""
    if dtype not in COST_DTYPES:
        raise TypeError(f"{name} must be float32 or float64, got {dtype}")


def check_cost_tensor(t, name: str = "costs", *, finite: bool = True) -> None:
    """``t`` is a dense float32/float64 tensor with readable data (see :func:`check_dense`);
    with ``finite`` also free of NaN and inf (one pass over the data).

    Callers whose tensor goes straight to a kernel pass ``finite=False``: the kernels check
    every entry they read (NaN/inf and the overflow rule) and raise a ValueError naming the
    pair, so large cost tensors are not read twice.

    Raises:
        TypeError: not a tensor, another layout, quantized, or a dtype other than
            float32/float64.
        ValueError: on the meta device, or NaN/inf with ``finite``.
    """
    check_dense(t, name)
    check_cost_dtype(t.dtype, name)
    if not finite:
        return
    # A finite sum proves every entry finite and is cheap; only an overflowing
    # sum of huge finite costs needs the exact check.
    if _seen_finite(t):
        return
    c = t.detach()
    if c.numel() and not bool(torch.isfinite(c.sum())) and not bool(torch.isfinite(c).all()):
        raise ValueError(f"{name} must be finite, but contains NaN or inf")
    _mark_finite(t)


# Tensors found finite, by id: (weak reference, version counter then). A cost module's cached
# table (e.g. UnitCost's) is read once, not at every call; writing into a tensor advances its
# version counter, so it is read again. (The kernels check every cost they read regardless.)
_FINITE_SEEN_SIZE = 64
_finite_seen: dict = {}


def _seen_finite(t: torch.Tensor) -> bool:
    entry = _finite_seen.get(id(t))
    if entry is None or entry[0]() is not t:
        return False
    try:
        return entry[1] == t._version
    except RuntimeError:  # inference tensors have no version counter
        return False


def _mark_finite(t: torch.Tensor) -> None:
    try:
        version = t._version
        ref = weakref.ref(t)
    except (RuntimeError, TypeError):
        return
    if len(_finite_seen) >= _FINITE_SEEN_SIZE:
        _finite_seen.clear()
    _finite_seen[id(t)] = (ref, version)


def check_real_tensor(t, name: str) -> None:
    """``t`` is a dense tensor (see :func:`check_dense`) of real numbers: floating point,
    integer or bool, not complex (for inputs that a constructor converts to float)."""
    check_dense(t, name)
    if t.is_complex():
        raise TypeError(f"{name} must be real, got complex dtype {t.dtype}")


def check_device(device, name: str = "device") -> Optional[torch.device]:
    """``device`` (``None``, a string, an index or a ``torch.device``) as a ``torch.device``
    that can hold data here (``None`` stays ``None``).

    Raises:
        TypeError: not a device specification.
        ValueError: an unknown device string, the meta device, or a device this machine or
            this build of torch does not have (e.g. ``"cuda"`` without a GPU).
    """
    if device is None:
        return None
    if isinstance(device, bool) or not isinstance(device, (str, int, torch.device)):
        raise TypeError(f"{name} must be None, a str, an int or a torch.device, got "
                        f"{type(device).__name__}")
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError) as e:
        raise ValueError(f"{name} {device!r} is not a device: {e}") from None
    if dev.type == "meta":
        raise ValueError(f"{name} is the meta device, which holds no data")
    try:
        torch.empty(0, device=dev)
    except (RuntimeError, AssertionError) as e:  # a CPU-only build asserts on "cuda"
        raise ValueError(f"{name} {dev} is not available: {e}") from None
    return dev


def check_sums_finite(sums: torch.Tensor, what: str) -> None:
    """ValueError naming the entries of ``sums`` (sums of finite costs computed outside the
    kernels, e.g. pseudo distances) that overflowed their dtype, instead of returning inf."""
    bad = ~torch.isfinite(sums.detach())
    if bool(bad.any()):
        if sums.dim():
            what = f"{what} {torch.nonzero(bad.reshape(-1)).reshape(-1)[:10].tolist()}"
        raise ValueError(f"{what} overflowed {sums.dtype}: the costs are too large; scale them "
                         "down")
