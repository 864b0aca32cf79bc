"""Each row's ``k`` best entries by (distance, index), and lists of entries ``(rows, cols,
distances)``: the merges that k-NN rounds, dense blocks, the matrix's tiles and ranks share.
"""
from __future__ import annotations

import math
from typing import Tuple

import torch

from .. import _ext

__all__ = ["NO_INDEX", "merge_into", "k_smallest", "merge_block", "merge_matrix", "merge_nearest", "with_partners",
           "concat_entries", "sorted_entries"]

#: The index of a missing entry (after every real one in a tie).
NO_INDEX = torch.iinfo(torch.int64).max


def merge_into(best_d, best_i, rl, c, v, k):
    """Row-wise merge of the entries ``(rl[q], c[q], v[q])`` into the ``k`` best lists by
    (distance, index); rows without entries stay as they are."""
    keep = v <= best_d[rl, -1]  # only these can enter a row's k best
    if not keep.all():
        rl, c, v = rl[keep], c[keep], v[keep]
    if len(rl) == 0:
        return
    touched, local = torch.unique(rl, return_inverse=True)
    counts = torch.bincount(local, minlength=len(touched))
    order = torch.argsort(local, stable=True)
    ls = local[order]
    start = torch.cumsum(counts, 0) - counts
    slot = torch.arange(len(ls)) - start[ls]
    width = int(counts.max())
    cd = torch.full((len(touched), width), math.inf, dtype=torch.float64)
    ci = torch.full((len(touched), width), NO_INDEX, dtype=torch.int64)
    cd[ls, slot] = v[order]
    ci[ls, slot] = c[order]
    d = torch.cat([best_d[touched], cd], 1)
    i = torch.cat([best_i[touched], ci], 1)
    o = torch.argsort(i, dim=1, stable=True)
    d, i = d.gather(1, o), i.gather(1, o)
    o = torch.argsort(d, dim=1, stable=True)[:, :k]
    best_d[touched], best_i[touched] = d.gather(1, o), i.gather(1, o)


def k_smallest(M: torch.Tensor, k: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Each row's ``k`` smallest entries of ``M`` by (value, column), as ``(values, columns)``;
    ``+inf`` entries count as missing (column ``NO_INDEX``). ``topk`` gives the values (their
    multiset is unique); only the columns of the ties at a row's ``k``-th value are chosen
    again, the first ones of the row, so no sort over a row's ties (integer distances tie by
    the thousand) and two passes over ``M`` besides ``topk``'s."""
    B, ny = M.shape
    kk = min(k, ny)
    if B == 0 or kk == 0:
        return (torch.full((B, kk), math.inf, dtype=torch.float64),
                torch.full((B, kk), NO_INDEX, dtype=torch.int64))
    d, i = torch.topk(M, kk, dim=1, largest=False, sorted=True)
    d = d.to(torch.float64)
    kth = d[:, -1:]
    below = (d < kth).sum(1)  # slots before the ties at the k-th value (d ascends)
    tr, tc = torch.nonzero(M == kth, as_tuple=True)  # row-major: columns ascending in a row
    counts = torch.bincount(tr, minlength=B)
    pos = torch.arange(len(tr)) - (torch.cumsum(counts, 0) - counts)[tr]
    slot = below[tr] + pos
    keep = slot < kk
    i[tr[keep], slot[keep]] = tc[keep]
    # equal values below the k-th: columns ascending (both sorts over k entries a row)
    o = torch.argsort(i, dim=1, stable=True)
    d, i = d.gather(1, o), i.gather(1, o)
    o = torch.argsort(d, dim=1, stable=True)
    d, i = d.gather(1, o), i.gather(1, o)
    i.masked_fill_(torch.isinf(d), NO_INDEX)
    return d, i


def merge_block(best_d, best_i, r, c, v, partners: bool, same: bool = False):
    """:func:`merge_matrix` of a block of entries ``(r, c)`` that lie in a rectangle of rows and
    columns (a tile, or consecutive rows against the columns from the first row on); with
    ``partners`` (entries ``r <= c`` only) also the entries ``(c, r)``; with ``same`` (rows and
    columns index one collection) without the diagonal's ``(i, i)``."""
    if len(r) == 0:
        return
    r0, c0 = int(r.min()), int(c.min())
    M = torch.full((int(r.max()) + 1 - r0, int(c.max()) + 1 - c0), math.inf, dtype=torch.float64)
    M[r - r0, c - c0] = v
    merge_matrix(best_d, best_i, M, r0, c0, partners, same)


def merge_matrix(best_d, best_i, M, r0: int, c0: int, partners: bool, same: bool = False):
    """Each row's ``k`` best by (distance, index) in ``best_d``, ``best_i`` (``(rows, k)``, in
    place) merged with the dense block ``M`` of other entries ``(r0 + i, c0 + j)`` (``+inf``: not
    an entry); with ``partners`` each of its entries at ``c >= r`` also stands for ``(c, r)`` and
    those below the diagonal are not read; with ``same`` without the diagonal's ``(i, i)``. One
    pass over ``M`` per direction in C++ (``knn_merge_dense``), a list of ``k`` per row instead
    of ``topk`` and a search for the ties at each row's ``k``-th value."""
    _ext.knn_merge_dense_cpu(best_d, best_i, M.to(torch.float64), r0, c0, partners, same)


def merge_nearest(parts, k: int):
    """The ``k`` best of every row over parts ``(distances, indices)`` of distinct entries (e.g.
    the shares of :func:`knn_all_pairs`), by (distance, index)."""
    best_d, best_i = parts[0][0].clone(), parts[0][1].clone()
    rows = torch.arange(len(best_d))[:, None].expand_as(best_i)
    for d, i in parts[1:]:
        have = i != NO_INDEX
        merge_into(best_d, best_i, rows[have], i[have], d[have], k)
    return best_d, best_i


def with_partners(symmetric: bool, r: torch.Tensor, c: torch.Tensor, v: torch.Tensor):
    """Entries ``(r, c, v)`` computed once for a symmetric problem (``r < c``) listed both ways;
    others as they are."""
    if symmetric:
        return torch.cat([r, c]), torch.cat([c, r]), torch.cat([v, v])
    return r, c, v


def concat_entries(found):
    """The concatenation of a list of ``(rows, cols, distances)`` (empty tensors for none)."""
    if found:
        return tuple(torch.cat([f[i] for f in found]) for i in range(3))
    return (torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long),
            torch.zeros(0, dtype=torch.float64))


def sorted_entries(r: torch.Tensor, c: torch.Tensor, v: torch.Tensor, ny: int):
    """Entries ``(r, c, v)`` sorted by row, then column (``ny`` columns)."""
    order = torch.argsort(r * max(ny, 1) + c)
    return r[order], c[order], v[order]

