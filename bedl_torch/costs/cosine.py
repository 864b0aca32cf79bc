"""Cosine edit costs on fixed word vectors with a learned linear map (BEDL on words)."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import torch
from torch import nn

from ..validation import check_cost_tensor, check_real_tensor
from .base import SymbolCost

__all__ = ["CosineCost"]


#: The constant costs of state dicts saved before the ``special`` buffer existed (gap and
#: unlabeled nodes at 1/2 against everything); read by ``_load_from_state_dict``.
_LEGACY_SPECIAL = ((0.0, 0.5, 0.5), (0.5, 0.0, 0.5), (0.5, 0.5, 0.0))


class CosineCost(SymbolCost):
    """Cosine edit costs on fixed word vectors with a learned linear map ``Omega``.

    ``c(x, y) = 1/2 - 1/2 * cos(Omega v(x), Omega v(y))`` for two words ``x``, ``y`` (values in
    ``[0, 1]``). ``vectors`` ``(U, d)`` are fixed (a buffer, e.g. PCA-reduced GloVe vectors);
    ``Omega`` ``(d, d)`` is an ``nn.Parameter`` initialised to the identity.

    The paper leaves the gap and unlabeled nodes undefined under this cost. The defaults read
    them the way BEDL's Euclidean cost reads the gap, as the **origin**: for unit vectors
    ``u = Omega v / ||Omega v||`` the cosine cost is ``||u(x) - u(y)||^2 / 4``, so a word against
    the origin costs ``||u - 0||^2 / 4 = 1/4``, and an unlabeled node (no word, no vector) sits
    at the origin like the gap:

    ==========================  ===================================  ====================
    pair                        default (``unlabeled="gap"``)        ``unlabeled=(w, g)``
    ==========================  ===================================  ====================
    word  - word                ``1/2 - 1/2 cos``                    same
    word  - gap (del./ins.)     ``gap_cost`` = 1/4                   ``gap_cost``
    None  - None                0                                    0
    None  - word                ``gap_cost`` = 1/4                   ``w``
    None  - gap (del./ins.)     0                                    ``g``
    gap   - gap                 0                                    0
    ==========================  ===================================  ====================

    ``None`` is the label of unlabeled (inner) nodes; it is always part of the alphabet (the
    index right after the words, ``gap_index = len(words) + 1``).

    Consequences of the defaults: inserting or deleting an unlabeled node is free, so the tree
    edit distance between two trees whose inner nodes are all unlabeled equals the sequence
    edit distance between their leaf sequences (a tree mapping restricted to the leaves is an
    order-preserving alignment, and every inner node can be deleted for free); only the words
    count. A replacement is used only when it is cheaper than deleting one word and inserting
    the other (``1/2 - 1/2 cos < 1/2``, i.e. ``cos > 0``), so unrelated and opposite words are
    deleted/inserted instead of aligned.

    Why the origin: with the gap and unlabeled nodes at 1/2 against everything, unlabeled inner
    nodes and tree sizes dominate the distance between parse trees and the words hardly count
    (``docs/notes-learning.md``). Pass ``gap_cost=0.5, unlabeled=(0.5, 0.5)`` for those costs.

    The constant costs live in the buffer ``special`` (3 x 3: word, None, gap; its word-word
    entry is unused), so they travel with ``state_dict()``; a state dict without it (saved by an
    older version) loads that version's costs (1/2). They are constants (no gradient) and make
    no division, so they are NaN-free.

    Zero vectors: the norm is clamped at ``eps`` (``torch.clamp``, whose gradient below the
    bound is 0), so a word whose mapped vector is 0 (e.g. a word missing from GloVe) has
    ``cos = 0`` against every other word (cost 1/2, which is never cheaper than deleting it and
    inserting the other word at ``gap_cost <= 1/4``) and every gradient stays finite.

    Args:
        words: the words (any hashable values but ``None``), in the order of ``vectors``.
        vectors: ``(U, d)`` word vectors (copied into a buffer; its dtype and device are the
            module's; integer vectors become torch's default dtype).
        omega: initial map (``(k, d)``); default the identity.
        eps: norm clamp.
        gap_cost: cost of deleting or inserting a word (default 1/4, see above).
        unlabeled: ``"gap"`` (default: unlabeled nodes cost like the gap) or a pair
            ``(to_word, to_gap)`` of constant costs of an unlabeled node against a word and
            against the gap (None - None is always 0).

    Raises:
        ValueError: ``None`` among the words, mismatched shapes, a negative or non-finite
            constant cost, or an ``unlabeled`` that is neither ``"gap"`` nor a pair.
    """

    symmetric = True

    def __init__(
        self,
        words: Sequence[str],
        vectors: torch.Tensor,
        omega: Optional[torch.Tensor] = None,
        eps: float = 1e-8,
        *,
        gap_cost: float = 0.25,
        unlabeled: Union[str, Tuple[float, float]] = "gap",
    ):
        words = list(words)
        if None in words:
            raise ValueError("None is reserved for unlabeled nodes; it cannot be a word")
        vectors = torch.as_tensor(vectors)
        check_real_tensor(vectors, "vectors")
        if vectors.dim() != 2 or vectors.shape[0] != len(words):
            raise ValueError(
                f"vectors must be ({len(words)}, d) for {len(words)} words, got "
                f"{tuple(vectors.shape)}"
            )
        if not vectors.is_floating_point():
            vectors = vectors.to(torch.get_default_dtype())
        check_cost_tensor(vectors, "vectors")
        gap_cost = float(gap_cost)
        if isinstance(unlabeled, str):
            if unlabeled != "gap":
                raise ValueError(f"unlabeled must be 'gap' or a pair of costs, got {unlabeled!r}")
            none_word, none_gap = gap_cost, 0.0
        else:
            try:
                none_word, none_gap = (float(v) for v in unlabeled)
            except (TypeError, ValueError):
                raise ValueError(
                    f"unlabeled must be 'gap' or a pair (to_word, to_gap), got {unlabeled!r}"
                ) from None
        for name, v in (("gap_cost", gap_cost), ("unlabeled to_word", none_word),
                        ("unlabeled to_gap", none_gap)):
            if not (v >= 0.0 and v < float("inf")):
                raise ValueError(f"{name} must be a finite cost >= 0, got {v}")
        eps = float(eps)
        if not (0.0 < eps < float("inf")):
            raise ValueError(f"eps (the clamp of zero vectors' norms) must be finite and > 0, got {eps}")
        super().__init__(words + [None])
        self.n_words = len(words)
        self.eps = eps
        self.register_buffer("vectors", vectors.detach().clone())
        self.register_buffer("special", torch.tensor(
            [[0.0, none_word, gap_cost], [none_word, 0.0, none_gap], [gap_cost, none_gap, 0.0]],
            dtype=vectors.dtype, device=vectors.device))
        d = vectors.shape[1]
        if omega is None:
            omega = torch.eye(d, dtype=vectors.dtype, device=vectors.device)
        if isinstance(omega, torch.Tensor):
            check_real_tensor(omega, "omega")
        omega = torch.as_tensor(omega, dtype=vectors.dtype, device=vectors.device)
        check_cost_tensor(omega, "omega")
        if omega.dim() != 2 or omega.shape[1] != d:
            raise ValueError(f"Omega must be (k, {d}), got {tuple(omega.shape)}")
        self.Omega = nn.Parameter(omega.detach().clone())

    @property
    def gap_cost(self) -> float:
        """Cost of deleting or inserting a word."""
        return float(self.special[0, 2])

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        key = prefix + "special"
        if key not in state_dict and prefix + "Omega" in state_dict:
            # saved before the constant costs were configurable: the costs of that version
            state_dict[key] = torch.tensor(_LEGACY_SPECIAL, dtype=self.special.dtype)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self) -> str:
        sp = self.special.tolist()
        return (f"{super().extra_repr()}, gap_cost={sp[0][2]:g}, unlabeled: to_word={sp[1][0]:g} "
                f"to_gap={sp[1][2]:g}")

    def regularization_matrix(self) -> torch.Tensor:
        """The matrix the BEDL regularisers act on: ``Omega``."""
        return self.Omega

    def mapped_vectors(self) -> torch.Tensor:
        """``vectors @ Omega.T`` normalised to unit length (zero rows stay zero): ``(U, k)``."""
        return self._normalised(self.vectors @ self.Omega.T)

    def _normalised(self, W: torch.Tensor) -> torch.Tensor:
        norm = torch.sqrt(torch.clamp((W * W).sum(-1, keepdim=True), min=self.eps ** 2))
        return W / norm

    def _factors(self, symbols: Optional[torch.Tensor] = None):
        """Row factors ``(L, R)`` of every symbol (words, None, gap), or of the symbol indices
        ``symbols`` only, with ``c(a, b) = <L[a], R[b]>`` before the clamp and the exact zeros
        of equal symbols: a word's rows are ``(-u/2, e_word S)`` and ``(u, e_word)``, None's
        and the gap's carry no vector, ``S`` being the 3 x 3 constant table with ``1/2`` for
        word - word, so one matrix product gives ``1/2 - 1/2 cos`` between words and the
        constants elsewhere."""
        if symbols is None:
            U = self.mapped_vectors()
            U = torch.cat([U, U.new_zeros(2, U.shape[1])], 0)  # rows for None and the gap
            kind = torch.zeros(len(U), dtype=torch.long, device=U.device)
            kind[self.n_words] = 1
            kind[self.n_words + 1] = 2
        else:  # map only the vectors of the words among the symbols
            is_word = symbols < self.n_words
            words = symbols[is_word]
            Uw = self._normalised(self.vectors[words] @ self.Omega.T)
            U = Uw.new_zeros(len(symbols), Uw.shape[1]).index_put(
                (torch.nonzero(is_word).reshape(-1),), Uw)
            kind = torch.where(is_word, 0, symbols - self.n_words + 1)
        S = self.special.to(dtype=U.dtype).clone()
        S[0, 0] = 0.5
        onehot = torch.eye(3, dtype=U.dtype, device=U.device)[kind]
        return torch.cat([-0.5 * U, onehot @ S], 1), torch.cat([U, onehot], 1)

    def symbol_subtable(self, symbols: torch.Tensor) -> torch.Tensor:
        """Costs ``(k, k)`` among distinct symbol indices (as :meth:`forward`)."""
        symbols = symbols.to(self.Omega.device)
        L, R = self._factors()
        cost = _clamp_at_zero(L[symbols] @ R[symbols].T)
        return cost.fill_diagonal_(0.0) if not cost.requires_grad else cost.masked_fill(
            torch.eye(len(symbols), dtype=torch.bool, device=symbols.device), 0.0)

    def symbol_block(self, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """Costs ``(len(rows), len(cols))`` between two vectors of symbol indices (as
        :meth:`forward`): one matrix product of the factors of only those symbols."""
        rows, cols = rows.to(self.Omega.device), cols.to(self.Omega.device)
        L, _ = self._factors(rows)
        _, R = self._factors(cols)
        cost = _clamp_at_zero(L @ R.T)
        return cost.masked_fill_(rows[:, None] == cols[None, :], 0.0)

    def symbol_pair_costs(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Costs ``(Q,)`` of the symbol pairs ``(a[q], b[q])`` (as :meth:`forward`)."""
        a, b = a.to(self.Omega.device), b.to(self.Omega.device)
        L, R = self._factors()
        cost = torch.clamp((L[a] * R[b]).sum(-1), min=0.0)
        return cost.masked_fill(a == b, 0.0)

    def forward(self, x_idx: torch.Tensor, y_idx: torch.Tensor) -> torch.Tensor:
        """Costs ``(B, M, N)`` on ``Omega``'s device and dtype for int64 indices ``x_idx (B, M)``
        and ``y_idx (B, N)`` (words, then None at ``n_words``, then the gap)."""
        assert self.n_words + 1 == self.gap_index
        x_idx = x_idx.to(self.Omega.device)
        y_idx = y_idx.to(self.Omega.device)
        L, R = self._factors()
        cost = torch.bmm(L[x_idx], R[y_idx].transpose(1, 2))  # (B, M, N)
        # rounding can push cos(u, u) slightly above 1: clamp, and make equal symbols exact 0
        cost = torch.clamp(cost, min=0.0)
        return cost.masked_fill(x_idx.unsqueeze(-1) == y_idx.unsqueeze(-2), 0.0)


def _clamp_at_zero(cost: torch.Tensor) -> torch.Tensor:
    """``max(cost, 0)``; in place where no gradient is recorded (a large table is not copied)."""
    return torch.clamp(cost, min=0.0) if cost.requires_grad else cost.clamp_(min=0.0)
