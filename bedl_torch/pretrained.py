"""Pretrained word vectors (GloVe text format), PCA reduction and a cosine cost module.

Layer: costs (imports torch and :mod:`bedl_torch.costs` only; no scikit-learn).
"""
from __future__ import annotations

import io
import os
from typing import Iterable, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from .costs import SymbolCost

__all__ = ["load_glove", "to_embedding", "pca_reduce", "CosineCost"]


def _open_text(path_or_file):
    if isinstance(path_or_file, (str, os.PathLike)):
        return open(path_or_file, "r", encoding="utf-8"), True
    f = path_or_file
    if isinstance(f, (io.RawIOBase, io.BufferedIOBase)) or "b" in getattr(f, "mode", ""):
        return io.TextIOWrapper(f, encoding="utf-8"), False
    return f, False


def load_glove(
    path_or_file, vocab: Optional[Iterable[str]] = None
) -> Tuple[List[str], torch.Tensor]:
    """Read word vectors in the GloVe text format (one ``word v1 ... vd`` per line).

    ``path_or_file``: a path or an open (text or binary, UTF-8) file. ``vocab``: optional
    iterable of words; only those are kept (words of ``vocab`` missing from the file are
    simply absent from the result). A word2vec-style header line ``"<count> <dim>"`` is
    skipped, blank lines are ignored, and words that contain spaces are supported (the last
    ``d`` fields are the vector, ``d`` fixed by the first vector line). Repeated words keep
    their first vector.

    Returns ``(words, vectors)``: the words in file order and a ``float32`` tensor
    ``(len(words), d)``. Raises ``ValueError`` on a malformed line (naming its number).
    """
    keep = None if vocab is None else set(vocab)
    f, close = _open_text(path_or_file)
    words: List[str] = []
    rows: List[List[float]] = []
    seen = set()
    dim = None
    try:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.rstrip(" ").split(" ")
            if dim is None:
                if lineno == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                    continue  # word2vec header
                dim = len(parts) - 1
                if dim < 1:
                    raise ValueError(f"line {lineno}: no vector values")
            if len(parts) < dim + 1:
                raise ValueError(
                    f"line {lineno}: expected a word and {dim} values, got {len(parts)} fields"
                )
            word = " ".join(parts[: len(parts) - dim])
            if word in seen or (keep is not None and word not in keep):
                continue
            try:
                values = [float(v) for v in parts[len(parts) - dim:]]
            except ValueError:
                raise ValueError(f"line {lineno}: non-numeric vector value") from None
            seen.add(word)
            words.append(word)
            rows.append(values)
    finally:
        if close:
            f.close()
    if dim is None:
        return words, torch.zeros(0, 0, dtype=torch.float32)
    return words, torch.tensor(rows, dtype=torch.float32).reshape(len(rows), dim)


def to_embedding(words: Sequence[str], vectors: torch.Tensor, freeze: bool = True):
    """``(nn.Embedding.from_pretrained(vectors, freeze=freeze), {word: row})``."""
    if len(words) != vectors.shape[0]:
        raise ValueError(f"{len(words)} words but {vectors.shape[0]} vectors")
    index = {}
    for i, w in enumerate(words):
        index.setdefault(w, i)
    return nn.Embedding.from_pretrained(vectors, freeze=freeze), index


def pca_reduce(
    vectors: torch.Tensor, variance: Union[float, int] = 0.95, *, return_mean: bool = False
):
    """PCA of the rows of ``vectors`` via ``torch.linalg.svd`` of the centred matrix.

    ``variance``: a float in ``(0, 1]`` keeps the fewest leading components whose explained
    variance ratio sums to at least ``variance``; an ``int >= 1`` keeps that many components.

    Returns ``(reduced, components)``: ``reduced = (vectors - mean) @ components.T`` of shape
    ``(n, k)`` and ``components`` ``(k, d)`` (orthonormal rows, ordered by decreasing
    variance, each with its largest-magnitude entry positive so that the result is
    deterministic). ``mean = vectors.mean(0)``; map new vectors with
    ``(v - mean) @ components.T``. With ``return_mean=True`` returns
    ``(reduced, components, mean)``. The computation runs in float64 and the results have the
    input dtype.
    """
    if vectors.dim() != 2 or vectors.shape[0] < 1:
        raise ValueError(f"expected a non-empty (n, d) matrix, got {tuple(vectors.shape)}")
    X = vectors.detach().to(torch.float64)
    mean = X.mean(0)
    Xc = X - mean
    _, S, Vh = torch.linalg.svd(Xc, full_matrices=False)
    var = S * S
    total = var.sum()
    if isinstance(variance, bool):
        raise TypeError("variance must be a float in (0, 1] or an int >= 1")
    if isinstance(variance, int):
        if variance < 1:
            raise ValueError(f"number of components must be >= 1, got {variance}")
        k = min(variance, Vh.shape[0])
    else:
        if not 0.0 < variance <= 1.0:
            raise ValueError(f"variance must be in (0, 1], got {variance}")
        if total <= 0:
            k = 1
        else:
            ratio = torch.cumsum(var, 0) / total
            # fewest components reaching the threshold (tolerate rounding at 1.0)
            k = int(torch.searchsorted(ratio, torch.tensor(variance - 1e-12, dtype=ratio.dtype)))
            k = min(k + 1, Vh.shape[0])
    comps = Vh[:k]
    signs = torch.sign(comps.gather(1, comps.abs().argmax(1, keepdim=True)))
    signs[signs == 0] = 1
    comps = comps * signs
    reduced = (Xc @ comps.T).to(vectors.dtype)
    comps = comps.to(vectors.dtype)
    if return_mean:
        return reduced, comps, mean.to(vectors.dtype)
    return reduced, comps


class CosineCost(SymbolCost):
    """Cosine edit costs on fixed word vectors with a learned linear map ``Omega``.

    ``c(x, y) = 1/2 - 1/2 * cos(Omega v(x), Omega v(y))`` for two words ``x``, ``y`` (values in
    ``[0, 1]``). ``vectors`` ``(U, d)`` are fixed (a buffer, e.g. PCA-reduced GloVe vectors);
    ``Omega`` ``(d, d)`` is an ``nn.Parameter`` initialised to the identity.

    The paper leaves the gap and unlabeled nodes undefined under this cost; here:

    ========================  =====
    pair                      cost
    ========================  =====
    word  - word              ``1/2 - 1/2 cos``
    word  - gap (del./ins.)   1/2
    None  - None              0
    None  - word              1/2
    None  - gap (del./ins.)   1/2
    gap   - gap               0
    ========================  =====

    ``None`` is the label of unlabeled (inner) nodes; it is always part of the alphabet (the
    index right after the words, ``gap_index = len(words) + 1``).

    Why: 1/2 is the cost of replacing a word by an unrelated (orthogonal) word, so deleting a
    word costs as much as replacing it by an unrelated one, and replacement never costs more
    than deletion plus insertion (``<= 1``), which keeps the edit distance meaningful (a
    replacement is used whenever the words are at least somewhat similar). Unlabeled nodes
    carry no meaning, so two of them match for free, while turning one into a word, or
    deleting/inserting it, costs the same 1/2 as an unrelated word; tree structure therefore
    counts as much as a word. These costs are constants (no gradient) and make no division, so
    they are NaN-free.

    Zero vectors: the norm is clamped at ``eps`` (``torch.clamp``, whose gradient below the
    bound is 0), so a word whose mapped vector is 0 has ``cos = 0`` (cost 1/2 to every word)
    and every gradient stays finite.
    """

    symmetric = True

    def __init__(
        self,
        words: Sequence[str],
        vectors: torch.Tensor,
        omega: Optional[torch.Tensor] = None,
        eps: float = 1e-8,
    ):
        words = list(words)
        if None in words:
            raise ValueError("None is reserved for unlabeled nodes; it cannot be a word")
        vectors = torch.as_tensor(vectors)
        if vectors.dim() != 2 or vectors.shape[0] != len(words):
            raise ValueError(
                f"vectors must be ({len(words)}, d) for {len(words)} words, got "
                f"{tuple(vectors.shape)}"
            )
        if not vectors.is_floating_point():
            vectors = vectors.to(torch.get_default_dtype())
        super().__init__(words + [None])
        self.n_words = len(words)
        self.eps = float(eps)
        self.register_buffer("vectors", vectors.detach().clone())
        d = vectors.shape[1]
        if omega is None:
            omega = torch.eye(d, dtype=vectors.dtype, device=vectors.device)
        omega = torch.as_tensor(omega, dtype=vectors.dtype, device=vectors.device)
        if omega.dim() != 2 or omega.shape[1] != d:
            raise ValueError(f"Omega must be (k, {d}), got {tuple(omega.shape)}")
        self.Omega = nn.Parameter(omega.detach().clone())

    def regularization_matrix(self) -> torch.Tensor:
        """The matrix the BEDL regularisers act on: ``Omega``."""
        return self.Omega

    def mapped_vectors(self) -> torch.Tensor:
        """``vectors @ Omega.T`` normalised to unit length (zero rows stay zero)."""
        W = self.vectors @ self.Omega.T
        norm = torch.sqrt(torch.clamp((W * W).sum(-1, keepdim=True), min=self.eps ** 2))
        return W / norm

    def forward(self, x_idx: torch.Tensor, y_idx: torch.Tensor) -> torch.Tensor:
        nw = self.n_words
        none_idx, gap = nw, nw + 1
        x_idx = x_idx.to(self.Omega.device)
        y_idx = y_idx.to(self.Omega.device)
        U = self.mapped_vectors()
        U = torch.cat([U, U.new_zeros(2, U.shape[1])], 0)  # rows for None and the gap
        cos = torch.bmm(U[x_idx], U[y_idx].transpose(1, 2))  # (B, M, N)
        # rounding can push cos(u, u) slightly above 1: clamp, and make equal words exact 0
        word_cost = torch.clamp(0.5 - 0.5 * cos, min=0.0)
        equal = x_idx.unsqueeze(-1) == y_idx.unsqueeze(-2)
        word_cost = torch.where(equal, torch.zeros_like(word_cost), word_cost)
        # kind: 0 word, 1 None, 2 gap
        kx = torch.clamp(x_idx - nw + 1, min=0)
        ky = torch.clamp(y_idx - nw + 1, min=0)
        table = torch.tensor(
            [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]],
            dtype=word_cost.dtype,
            device=word_cost.device,
        )
        special = table[kx.unsqueeze(-1), ky.unsqueeze(-2)]
        both_words = (kx == 0).unsqueeze(-1) & (ky == 0).unsqueeze(-2)
        assert none_idx + 1 == gap == self.gap_index
        return torch.where(both_words, word_cost, special)
