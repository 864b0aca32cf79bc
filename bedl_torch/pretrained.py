"""Pretrained word vectors: reading the GloVe text format, PCA reduction and
``nn.Embedding`` construction.

:class:`~bedl_torch.costs.CosineCost`, the cost module on such vectors, lives in
:mod:`bedl_torch.costs.cosine` and is re-exported here. Layer: costs (imports torch and
:mod:`bedl_torch.costs` only; no scikit-learn).
"""
from __future__ import annotations

import io
import os
from typing import Iterable, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from .costs.cosine import CosineCost

__all__ = ["load_glove", "to_embedding", "pca_reduce", "CosineCost"]


def _open_text(path_or_file):
    if isinstance(path_or_file, (str, os.PathLike)):
        return open(path_or_file, "r", encoding="utf-8"), True
    f = path_or_file
    if isinstance(f, (io.RawIOBase, io.BufferedIOBase)) or "b" in getattr(f, "mode", ""):
        return io.TextIOWrapper(f, encoding="utf-8"), False
    return f, False


# float32 rounds values from here on (its largest finite value plus half a step) to inf
_FLOAT32_OVERFLOW = 2.0 ** 128 - 2.0 ** 103


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
    ``(len(words), d)``. Raises ``ValueError`` on a malformed line (naming its number),
    also a value that is NaN, inf or too large for float32 (it would be inf there).
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
            if not all(abs(v) < _FLOAT32_OVERFLOW for v in values):  # NaN fails this too
                raise ValueError(f"line {lineno}: vector value that is NaN, inf or beyond float32's range "
                                 f"(word {word!r})")
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
    """``(nn.Embedding.from_pretrained(vectors, freeze=freeze), {word: row})``: the layer on
    ``vectors`` ``(len(words), d)`` (its dtype and device) and each word's first row.

    Raises:
        ValueError: ``len(words)`` differs from the number of vectors.
    """
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
    variance ratio sums to at least ``variance``; an ``int >= 1`` keeps that many components
    (at most ``min(n, d)``, the rank's bound).

    Returns ``(reduced, components)``: ``reduced = (vectors - mean) @ components.T`` of shape
    ``(n, k)`` and ``components`` ``(k, d)`` (orthonormal rows, ordered by decreasing
    variance, each with its largest-magnitude entry positive so that the result is
    deterministic). ``mean = vectors.mean(0)``; map new vectors with
    ``(v - mean) @ components.T``. With ``return_mean=True`` returns
    ``(reduced, components, mean)``. The computation runs in float64 and the results have the
    input dtype and device.

    Raises:
        ValueError: not a non-empty ``(n, d)`` matrix, NaN or inf in it, a ``variance`` outside
            ``(0, 1]`` or a component count below 1. TypeError: a bool ``variance``.
    """
    if vectors.dim() != 2 or vectors.shape[0] < 1:
        raise ValueError(f"expected a non-empty (n, d) matrix, got {tuple(vectors.shape)}")
    X = vectors.detach().to(torch.float64)
    if not bool(torch.isfinite(X).all()):
        raise ValueError("vectors must be finite, but contain NaN or inf")
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
