"""Cost modules: ``nn.Module``s that turn symbol indices into edit cost matrices.

A cost module knows an alphabet (the symbols it has parameters for) and maps
padded index tensors to costs; the ops layer turns those into distances. The
gap (deletion / insertion partner) has index ``len(alphabet)``.
"""
from __future__ import annotations

import array
from typing import Hashable, Iterable, Optional, Sequence

import torch
from torch import nn

from .validation import check_cost_dtype, check_cost_tensor, check_device, check_real_tensor

__all__ = ["SymbolCost", "EuclideanCost", "UnitCost", "simplex_embedding"]


def _long_tensor(values: Iterable[int]) -> torch.Tensor:
    """An int64 CPU tensor of Python ints, through a typed array: a third of the time of
    ``torch.tensor`` on a list (labels and tree sizes of whole collections go this way)."""
    buffer = array.array("q", values)
    if not len(buffer):
        return torch.zeros(0, dtype=torch.long)
    return torch.frombuffer(buffer, dtype=torch.long)


def _owns_forward(cost: "SymbolCost", method: str) -> bool:
    """Whether the class that defines ``method`` (a table shortcut) also defines the
    ``forward`` in use; a subclass that changes ``forward`` alone must not be bypassed."""
    cls = type(cost)
    owner = next(k for k in cls.__mro__ if method in vars(k))
    return owner is not SymbolCost and cls.forward is owner.forward


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
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (k, k):
        raise ValueError(
            f"{type(cost).__name__} returned a symbol table of shape "
            f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__} "
            f"for {k} symbols, expected ({k}, {k})"
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
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (len(a),):
        raise ValueError(
            f"{type(cost).__name__} returned pair costs of shape "
            f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}, "
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
        """
        if unknown not in ("error", "gap"):
            raise ValueError(f"unknown must be 'error' or 'gap', got {unknown!r}")
        index = self._index
        try:  # the usual case, every label known: one comprehension
            return _long_tensor(map(index.__getitem__, labels))
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
        for t in list(self.parameters()) + list(self.buffers()):
            if t.is_floating_point():
                return t
        return None

    @property
    def device(self) -> torch.device:
        t = self._param_like()
        return t.device if t is not None else torch.device("cpu")

    @property
    def dtype(self) -> torch.dtype:
        t = self._param_like()
        return t.dtype if t is not None else torch.get_default_dtype()

    def extra_repr(self) -> str:
        return f"alphabet of {len(self.alphabet)} symbols"


def simplex_embedding(num_symbols: int, dtype=None, device=None) -> torch.Tensor:
    """Vertices of a regular simplex with side 1 whose last vertex is the origin.

    Returns ``(num_symbols, num_symbols)`` coordinates: every row has norm 1 and
    every two rows have distance 1, so with the gap at the origin every
    replacement of distinct symbols, deletion and insertion costs exactly 1.
    """
    if num_symbols < 0:
        raise ValueError("num_symbols must be >= 0")
    dtype = dtype or torch.get_default_dtype()
    # The Gram matrix of (e_k - e_gap) / sqrt(2) is (I + 1 1^T) / 2; its Cholesky
    # factor gives coordinates in R^U.
    gram = (torch.eye(num_symbols, dtype=torch.float64) + 1.0) / 2.0
    if num_symbols == 0:
        return torch.zeros(0, 0, dtype=dtype, device=device)
    # The Cholesky factor is column-major; optimisers such as LBFGS view
    # parameters and gradients flat, so hand back a contiguous tensor.
    coords = torch.linalg.cholesky(gram)
    return coords.to(dtype=dtype, device=device).contiguous()


class EuclideanCost(SymbolCost):
    """Edit costs from a learnable symbol embedding: ``c(x, y) = ||a(x) - a(y)||``.

    The gap sits at the origin, so ``c(x, -) = c(-, x) = ||a(x)||``. Whatever the
    embedding, the costs are a pseudo-metric and so is the tree edit distance.

    Args:
        alphabet: the symbols; row ``k`` of ``embedding`` belongs to ``alphabet[k]``.
        embedding: initial ``(len(alphabet), dim)`` vectors; default the regular
            simplex with side 1 (every initial cost between different symbols or a
            symbol and the gap is 1), in ``dim = len(alphabet)`` dimensions.
        dtype, device: of the default embedding.

    Attributes:
        embedding (nn.Parameter): ``(len(alphabet), dim)``.

    Gradients are NaN-free: where two vectors coincide (or a vector sits at the
    origin) the zero subgradient of the norm is used.
    """

    symmetric = True
    # Alphabets up to this size use a (U+1) x (U+1) symbol cost table and gather
    # from it; larger ones compute per pair and never build that table.
    table_limit = 2048

    def __init__(self, alphabet, embedding: Optional[torch.Tensor] = None, dtype=None, device=None):
        super().__init__(alphabet)
        if dtype is not None:
            check_cost_dtype(dtype, "dtype")
        device = check_device(device)
        if embedding is None:
            embedding = simplex_embedding(len(self.alphabet), dtype=dtype, device=device)
        else:
            if not isinstance(embedding, torch.Tensor):
                embedding = torch.as_tensor(embedding)
            check_real_tensor(embedding, "embedding")
            if embedding.dim() != 2 or embedding.shape[0] != len(self.alphabet):
                raise ValueError(
                    f"embedding must be 2-D (len(alphabet), dim) = ({len(self.alphabet)}, dim), "
                    f"got shape {tuple(embedding.shape)}"
                )
            if not embedding.is_floating_point():
                raise TypeError(f"embedding must be floating point, got {embedding.dtype}")
            embedding = embedding.detach().clone().to(dtype=dtype or embedding.dtype, device=device)
        check_cost_tensor(embedding, "embedding")
        self.embedding = nn.Parameter(embedding)

    def vectors(self) -> torch.Tensor:
        """The embedding with the gap (origin) appended as the last row: ``(U + 1, dim)``."""
        e = self.embedding
        return torch.cat([e, e.new_zeros(1, e.shape[1])], dim=0)

    def symbol_costs(self) -> torch.Tensor:
        """The full ``(U + 1, U + 1)`` cost table (small alphabets only)."""
        v = self.vectors()
        return _euclidean(v[None], v[None])[0]

    def symbol_table(self) -> Optional[torch.Tensor]:
        if len(self.alphabet) + 1 <= self.table_limit:
            return self.symbol_costs()
        return None

    def forward(self, x_idx: torch.Tensor, y_idx: torch.Tensor) -> torch.Tensor:
        dev = self.embedding.device
        x_idx = x_idx.to(dev)
        y_idx = y_idx.to(dev)
        if len(self.alphabet) + 1 <= self.table_limit:
            table = self.symbol_costs()
            return table[x_idx[:, :, None], y_idx[:, None, :]]
        v = self.vectors()
        return _euclidean(v[x_idx], v[y_idx])


def _euclidean(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # The non-matmul path computes distances of equal vectors as exactly 0 (the
    # matmul path leaves rounding noise that breaks exact ties) and its backward
    # uses the zero subgradient at 0.
    return torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")


class UnitCost(SymbolCost):
    """The default costs: replacing a symbol by a different one, deleting and inserting cost 1.

    Args:
        alphabet: the symbols.
        dtype: of the costs (default float64, where ties are exact).
    """

    symmetric = True

    def __init__(self, alphabet, dtype=torch.float64, device=None):
        super().__init__(alphabet)
        check_cost_dtype(dtype, "dtype")
        device = check_device(device)
        self.register_buffer("_anchor", torch.zeros(0, dtype=dtype, device=device), persistent=False)

    @property
    def dtype(self) -> torch.dtype:
        return self._anchor.dtype

    @property
    def device(self) -> torch.device:
        return self._anchor.device

    #: largest alphabet (plus gap) for which symbol_table() returns the whole table; larger
    #: alphabets get tables over the symbols in use (never a U x U matrix)
    table_limit = 2048

    def symbol_table(self) -> Optional[torch.Tensor]:
        size = len(self.alphabet) + 1
        if size > self.table_limit:
            return None
        eye = torch.eye(size, dtype=self._anchor.dtype, device=self._anchor.device)
        return 1.0 - eye

    def forward(self, x_idx: torch.Tensor, y_idx: torch.Tensor) -> torch.Tensor:
        dev = self._anchor.device
        x_idx = x_idx.to(dev)
        y_idx = y_idx.to(dev)
        return (x_idx[:, :, None] != y_idx[:, None, :]).to(self._anchor.dtype)
