"""The base class of cost modules and the rules for their symbol-table shortcuts.

A cost module is an ``nn.Module`` that knows an alphabet (the symbols it has parameters for)
and maps padded symbol-index tensors to edit costs; the ops turn those into distances. The gap
(the deletion / insertion partner) has index ``len(alphabet)``. :func:`table_of`,
:func:`subtable_of`, :func:`block_of` and :func:`pair_costs_of` decide when a module's shortcut
may stand in for its ``forward`` (only where the class that defines the shortcut also defines
the ``forward`` in use), so a subclass that changes ``forward`` alone is never bypassed.
"""
from __future__ import annotations

import itertools

from typing import Hashable, Iterable, Optional, Sequence

import torch
from torch import nn

from .._cache import lru_cache_outside_compile
from ..labels import long_tensor
from ..validation import check_cost_dtype, check_dense

__all__ = ["SymbolCost", "table_of", "subtable_of", "block_of", "pair_costs_of", "check_cost_module"]


def _owns_forward(cost: "SymbolCost", method: str) -> bool:
    """Whether the class that defines ``method`` (a table shortcut) also defines the
    ``forward`` in use; a subclass that changes ``forward`` alone must not be bypassed."""
    cls = type(cost)
    return _forward_owned(cls, method, cls.forward, getattr(cls, method))


@lru_cache_outside_compile(maxsize=256)
def _forward_owned(cls, method: str, forward, shortcut) -> bool:
    # (keyed by the class's current forward and shortcut too: patching either asks again)
    owner = next(k for k in cls.__mro__ if method in vars(k))
    return owner is not SymbolCost and forward is owner.forward


def _check_returned_tensor(cost: "SymbolCost", out, what: str) -> None:
    """TypeError unless the module's ``forward`` (or shortcut) gave a tensor for ``what``."""
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"the {what} of {type(cost).__name__} must be a torch.Tensor, got {type(out).__name__}")


def subtable_of(cost: "SymbolCost", symbols: torch.Tensor) -> torch.Tensor:
    """Costs ``(k, k)`` among the symbol indices ``symbols`` (``(k,)``, gap index allowed),
    differentiable in the module's parameters: the module's own :meth:`SymbolCost.symbol_subtable`
    where it is sure to agree with ``forward``, else one ``forward`` call on the symbols."""
    symbols = symbols.to(cost.device)
    if _owns_forward(cost, "symbol_subtable"):
        out = cost.symbol_subtable(symbols)
    else:
        out = cost(symbols[None], symbols[None])[0]
    k = len(symbols)
    _check_returned_tensor(cost, out, "symbol table")
    if tuple(out.shape) != (k, k):
        raise ValueError(
            f"{type(cost).__name__} returned a symbol table of shape {tuple(out.shape)} "
            f"for {k} symbols, expected ({k}, {k})"
        )
    return out


def block_of(cost: "SymbolCost", rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """Costs ``(len(rows), len(cols))`` of replacing the symbols ``rows`` by ``cols`` (index
    vectors, gap index allowed), differentiable in the module's parameters: the module's own
    :meth:`SymbolCost.symbol_block` where it is sure to agree with ``forward``, else one
    ``forward`` call on the two index vectors."""
    rows, cols = rows.to(cost.device), cols.to(cost.device)
    if _owns_forward(cost, "symbol_block"):
        out = cost.symbol_block(rows, cols)
    else:
        out = cost(rows[None], cols[None])[0]
    shape = (len(rows), len(cols))
    _check_returned_tensor(cost, out, "symbol block")
    if tuple(out.shape) != shape:
        raise ValueError(
            f"{type(cost).__name__} returned a symbol block of shape {tuple(out.shape)}, "
            f"expected {shape}"
        )
    return out


def pair_costs_of(cost: "SymbolCost", a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Costs ``c(a[q], b[q])`` ``(Q,)`` of index pairs, differentiable: the module's own
    :meth:`SymbolCost.symbol_pair_costs` where it is sure to agree with ``forward``, else one
    ``forward`` call on ``(Q, 1)`` indices."""
    a, b = a.to(cost.device), b.to(cost.device)
    if _owns_forward(cost, "symbol_pair_costs"):
        out = cost.symbol_pair_costs(a, b)
    else:
        out = cost(a[:, None], b[:, None]).reshape(-1)
    _check_returned_tensor(cost, out, "pair costs")
    if tuple(out.shape) != (len(a),):
        raise ValueError(
            f"{type(cost).__name__} returned pair costs of shape {tuple(out.shape)}, "
            f"expected ({len(a)},)"
        )
    return out


def table_of(cost: "SymbolCost") -> Optional[torch.Tensor]:
    """``cost.symbol_table()`` where it is sure to agree with ``cost.forward``, else ``None``.

    A table counts only if the class that defines ``symbol_table`` also provides the
    ``forward`` in use, so a subclass that changes ``forward`` alone is never bypassed.
    """
    if not _owns_forward(cost, "symbol_table"):
        return None
    return cost.symbol_table()


class SymbolCost(nn.Module):
    """Base class of cost modules over a finite alphabet.

    Subclasses implement :meth:`forward`. ``symmetric = True`` declares that
    ``c(a, b) == c(b, a)`` (and deletion equals insertion), which lets
    :func:`bedl_torch.pairwise_distances` compute only half of a symmetric matrix.

    Args:
        alphabet: the symbols, in the order of the module's parameters. Any
            hashable values (``None`` may stand for unlabeled nodes); no duplicates.

    Raises:
        ValueError: a symbol listed twice. TypeError: an unhashable symbol.
    """

    symmetric = False

    def __init__(self, alphabet: Iterable[Hashable]):
        super().__init__()
        alphabet = list(alphabet)
        index = {}
        for i, symbol in enumerate(alphabet):
            try:
                if symbol in index:
                    raise ValueError(f"alphabet lists the symbol {symbol!r} twice")
            except TypeError:
                raise TypeError(f"alphabet symbols must be hashable, got {symbol!r}") from None
            index[symbol] = i
        self.alphabet = alphabet
        self._index = index

    @property
    def gap_index(self) -> int:
        """Index of the gap symbol: ``len(alphabet)``."""
        return len(self.alphabet)

    def encode(self, labels: Sequence[Hashable], unknown: str = "error") -> torch.Tensor:
        """Indices of ``labels`` in the alphabet as an int64 CPU tensor of shape ``(len(labels),)``.

        Args:
            unknown: ``"error"`` raises a ValueError naming labels missing from the
                alphabet; ``"gap"`` maps them to the gap (for Euclidean costs: the origin).

        Raises:
            ValueError: labels missing from the alphabet (``unknown="error"``, naming up to
                ten of them) or an unknown ``unknown``. TypeError: an unhashable label.
        """
        if unknown not in ("error", "gap"):
            raise ValueError(f"unknown must be 'error' or 'gap', got {unknown!r}")
        index = self._index
        try:  # the usual case, every label known: one comprehension
            return long_tensor(map(index.__getitem__, labels))
        except (KeyError, TypeError):
            pass  # unknown or unhashable labels: the loop below says which
        gap = self.gap_index
        out = []
        missing = []
        for label in labels:
            try:
                k = index.get(label)
            except TypeError:
                raise TypeError(f"labels must be hashable, got {label!r}") from None
            if k is None:
                if unknown == "error":
                    missing.append(label)
                k = gap
            out.append(k)
        if missing:
            shown = ", ".join(repr(s) for s in list(dict.fromkeys(missing))[:10])
            raise ValueError(
                f"labels missing from the cost's alphabet: {shown}"
                + (" ..." if len(set(missing)) > 10 else "")
                + " (pass unknown='gap' to map them to the gap)"
            )
        return torch.tensor(out, dtype=torch.long)

    def symbol_table(self) -> Optional[torch.Tensor]:
        """The ``(U + 1, U + 1)`` table of all symbol costs (gap last), or ``None``.

        Where a module returns its table (differentiable in its parameters), the
        kernels gather each pair's costs from it themselves, so a batch never
        materialises a ``(B, M+1, N+1)`` cost tensor and the gradient arrives as
        one ``(U + 1, U + 1)`` tensor. It must agree with :meth:`forward`: a
        subclass that overrides ``forward`` and not this method is treated as
        having no table. The default, ``None``, means: always call ``forward``.
        """
        return None

    def symbol_subtable(self, symbols: torch.Tensor) -> torch.Tensor:
        """Costs ``(k, k)`` among the distinct symbol indices ``symbols`` (``(k,)``, int64,
        gap index allowed), differentiable in the parameters.

        When a module has no whole table (a large alphabet), the ops build a table over only
        the symbols that occur in the objects at hand and hand the kernels that. The default
        is one :meth:`forward` call; override it where a direct computation is leaner (it
        must agree with ``forward``; an override is used only by the class that also
        defines the ``forward`` in use, as for :meth:`symbol_table`).
        """
        return self(symbols[None], symbols[None])[0]

    def symbol_block(self, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """Costs ``(len(rows), len(cols))`` of replacing each symbol of ``rows`` by each of
        ``cols`` (int64 index vectors, gap index allowed), differentiable in the parameters.

        The ops build one such block per tile of pairs between two sets of objects whose
        symbols are too many for one local table (the rows over one side's symbols, the
        columns over the other's). Default: one :meth:`forward` call; override where a direct
        computation is leaner (same rule as :meth:`symbol_table`).
        """
        return self(rows[None], cols[None])[0]

    def symbol_pair_costs(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Costs ``(Q,)`` of the symbol pairs ``(a[q], b[q])`` (int64 index vectors), as
        :meth:`forward` gives them; used where only scattered pairs are needed (BEDL's
        pseudo-mode metric step on large alphabets). Default: one ``forward`` call on
        ``(Q, 1)`` indices; override where an elementwise computation is leaner (same rule
        as :meth:`symbol_table`)."""
        return self(a[:, None], b[:, None]).reshape(-1)

    def forward(self, x_idx: torch.Tensor, y_idx: torch.Tensor) -> torch.Tensor:
        """Costs ``(B, M, N)`` between the symbols ``x_idx (B, M)`` and ``y_idx (B, N)``.

        Indices are int64 in ``[0, len(alphabet)]``, ``len(alphabet)`` being the gap.
        The result lies on the module's device.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement forward(x_idx, y_idx)")

    def _param_like(self) -> Optional[torch.Tensor]:
        """The first floating-point parameter or buffer: it fixes the device and dtype."""
        for t in itertools.chain(self.parameters(), self.buffers()):
            if t.is_floating_point():
                return t
        return None

    @property
    def device(self) -> torch.device:
        """Device of the costs (of the first floating-point parameter or buffer; CPU if none)."""
        t = self._param_like()
        return t.device if t is not None else torch.device("cpu")

    @property
    def dtype(self) -> torch.dtype:
        """Dtype of the costs (of the first floating-point parameter or buffer; torch's default
        dtype if none)."""
        t = self._param_like()
        return t.dtype if t is not None else torch.get_default_dtype()

    def extra_repr(self) -> str:
        return f"alphabet of {len(self.alphabet)} symbols"


def check_cost_module(cost, name: str = "cost") -> None:
    """``cost`` is a :class:`bedl_torch.SymbolCost` whose tensors the ops can use: every
    parameter a dense float32/float64 tensor, every buffer dense (floating-point buffers
    float32/float64; integer and bool buffers, e.g. index maps, are allowed), all on one
    device that holds data. Values are not read here (the kernels check the costs' values).

    Raises:
        TypeError: not a cost module, or a parameter or buffer of another layout or dtype
            (the message names it, e.g. ``cost.embedding``).
        ValueError: a parameter or buffer on the meta device, or on several devices.
    """
    if not isinstance(cost, SymbolCost):
        raise TypeError(f"{name} must be a bedl_torch.SymbolCost module, got {type(cost).__name__}")
    devices = set()
    for is_param, (key, t) in itertools.chain(
            ((True, item) for item in cost.named_parameters()),
            ((False, item) for item in cost.named_buffers())):
        label = f"{name}.{key}"
        check_dense(t, label)
        if is_param or t.is_floating_point() or t.is_complex():
            check_cost_dtype(t.dtype, label)
        devices.add(t.device)
    if len(devices) > 1:
        raise ValueError(f"{name}'s parameters and buffers must be on one device, got "
                         f"{sorted(map(str, devices))}")
    check_cost_dtype(cost.dtype, f"{name}.dtype")
