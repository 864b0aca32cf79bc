"""The costs among the symbols that occur in two collections (:class:`SymbolCosts`): what the
label bound's potentials read, and the rounding margin every bound is pruned with.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from ..costs import SymbolCost, UnitCost, block_of, pair_costs_of, subtable_of, table_of
from ..ops.encoding import check_symbol_table

__all__ = ["SymbolCosts"]

# Largest number of symbols in use (gap included) whose cost table among them is built
# whole (4M float64 entries, 32 MB); beyond it the costs are read in blocks of rows.
_TABLE_SYMBOLS = 2000
_ROW_BLOCK = 512


class SymbolCosts:
    """The costs among the symbols that occur in two collections, in float64 on the CPU.

    The symbols in use (and the gap) are renumbered ``0 .. k - 1``, the gap last. Where the
    cost module has a whole symbol table (:func:`bedl_torch.costs.table_of`) the costs are
    taken from it, the very numbers the kernels read; otherwise from
    :func:`~bedl_torch.costs.subtable_of` (up to ``_TABLE_SYMBOLS`` symbols) or in blocks of
    rows from :func:`~bedl_torch.costs.block_of`, which agree with what the kernels read up
    to the module's rounding (a module's ``symbol_block`` must agree with its ``forward``).

    Args:
        cost: the cost module. codes: symbol indices (alphabet numbering) of every node of
            every object of the collections (any number of 1-D tensors).
        row_codes: where the problem's pairs read only some symbols' rows (``X`` against
            another ``Y``: the rows of ``X``'s symbols, besides the gap's), those symbols'
            indices; :attr:`maxabs` then needs only those rows (a query against a vocabulary).

    Attributes:
        k (int): symbols in use plus the gap. used: int64 ``(k,)`` their alphabet indices.
        lookup: int64, alphabet index -> local index. delete, insert, diag: float64 ``(k,)``,
            ``C[a, gap]``, ``C[gap, a]`` and ``C[a, a]``. maxabs (float): the largest absolute
            cost among the symbols in use, the ``[gap, gap]`` entry included (in the rows of
            ``row_codes`` and the gap's, where given). rows: int64 local indices of the
            ``row_codes`` symbols (the gap among them where they hold it), sorted, or None
            (all). table: float64
            ``(k, k)`` or None (read in blocks). exact (bool): the numbers are the kernels'.
        eps (float): machine epsilon of the cost module's dtype (the kernels compute in it).
    """

    def __init__(self, cost: SymbolCost, codes: Sequence[torch.Tensor],
                 row_codes: Optional[Sequence[torch.Tensor]] = None):
        self.cost = cost
        gap = cost.gap_index
        parts = [c.reshape(-1).to(torch.long) for c in codes] + [torch.tensor([gap])]
        self.used = torch.unique(torch.cat(parts))  # sorted: the gap (largest index) last
        self.k = k = len(self.used)
        self.lookup = torch.full((gap + 1,), k - 1, dtype=torch.long)
        self.lookup[self.used] = torch.arange(k)
        self.rows = None  # (the rows the label bound's potentials read for X: the same set)
        if row_codes is not None:
            self.rows = torch.unique(self.lookup[torch.cat([c.reshape(-1).to(torch.long) for c in row_codes])])
        self.eps = float(torch.finfo(cost.dtype).eps)
        # UnitCost itself (not a subclass, which may change the costs): C = 1 - I among the
        # symbols in use and the gap, so nothing needs the table's rows read (large alphabets)
        self.unit = type(cost) is UnitCost
        with torch.no_grad():
            whole = table_of(cost)
            #: the largest absolute entry of the table the matrix's kernels read (the whole
            #: table, or the local one of the symbols in use), for their overflow rule; None
            #: where the matrix cuts its costs into tiles
            self.table_maxabs = None
            if whole is not None:
                check_symbol_table(cost, whole)  # (as the matrix: every symbol's costs finite)
                t = whole.detach().to("cpu", torch.float64)
                self.table_maxabs = float(t.abs().max())
                self.table, self.exact = t[self.used][:, self.used], True
            elif k <= _TABLE_SYMBOLS:  # (the matrix's local table: the same symbols)
                self.table = subtable_of(cost, self.used).detach().to("cpu", torch.float64)
                self.exact = False
            else:
                self.table, self.exact = None, False
            if self.table is not None:
                self.diag = self.table.diagonal().clone()
                self.delete = self.table[:, -1].clone()
                self.insert = self.table[-1, :].clone()
                self._maxabs = float(self.table.abs().max())
                if whole is None:
                    self.table_maxabs = self._maxabs
            else:
                g = torch.full((k,), gap, dtype=torch.long)
                self.diag = _cpu64(pair_costs_of(cost, self.used, self.used))
                self.delete = _cpu64(pair_costs_of(cost, self.used, g))
                self.insert = _cpu64(pair_costs_of(cost, g, self.used))
                if self.unit:  # the kernels read these very 0s and 1s
                    self.exact, self._maxabs = True, 1.0 if k > 1 else 0.0
                else:  # (a pass over every block: taken when first needed, or by the label bound's)
                    self._maxabs = None
        if not all(torch.isfinite(t).all() for t in (self.diag, self.delete, self.insert)):
            raise ValueError(f"{type(self.cost).__name__} costs must be finite (NaN or inf found)")
        if self._maxabs is not None:
            self._check_maxabs()
        self.exact_arithmetic = False
        self._table_symmetric = None

    @property
    def table_symmetric(self) -> bool:
        """Whether the costs the bounds read form a table equal to its transpose, bit for bit
        (then a bound of ``d(x, y)`` bounds ``d(y, x)`` as well, to the rounding the margin
        allows); False without a table."""
        if self._table_symmetric is None:
            self._table_symmetric = self.table is not None and torch.equal(self.table, self.table.T)
        return self._table_symmetric

    @property
    def maxabs(self) -> float:
        """The largest absolute cost among the symbols in use (the gap's included)."""
        if self._maxabs is None:
            maxabs = 0.0
            for _, block in self.row_blocks(rows=self.rows):
                maxabs = max(maxabs, float(block.abs().max()))
            self.note_block_maxabs(maxabs, self.rows)
        return self._maxabs

    def note_block_maxabs(self, maxabs: float, rows: Optional[torch.Tensor] = None) -> None:
        """Takes the largest absolute cost found by a pass over the row blocks of ``rows`` (all
        where None; the label bound's potentials make one), so that :attr:`maxabs` needs no
        pass of its own; a pass over fewer rows than :attr:`rows` is not enough."""
        covers = rows is None or (self.rows is not None and torch.equal(rows, self.rows))
        if self._maxabs is None and covers:
            if self.rows is not None:  # (the gap's row: the insertions)
                maxabs = max(maxabs, float(self.insert.abs().max()))
            self._maxabs = maxabs
            self._check_maxabs()

    def _check_maxabs(self) -> None:
        if not (self._maxabs < float("inf")):
            raise ValueError(f"{type(self.cost).__name__} costs must be finite (NaN or inf found)")

    def check_overflow(self, m: int, n: int) -> None:
        """The kernels' overflow rule for the longest pair a matrix of these collections computes
        (``m`` and ``n`` nodes): ``2 (m + n) max|cost|`` within the dtype, ``max|cost|`` over the
        table the matrix reads (:attr:`table_maxabs`), so that a search raises where
        :func:`bedl_torch.pairwise_distances` does, even if its bounds decide every pair. Costs
        in tiles are checked by the kernels, per call."""
        if self.table_maxabs is None:
            return
        largest = float(torch.finfo(self.cost.dtype).max)
        if 2.0 * (m + n) * self.table_maxabs > largest:
            raise ValueError(
                f"{type(self.cost).__name__} costs are too large: the longest pair has |x| = {m} and "
                f"|y| = {n}, a mapping sums up to {m + n} costs of magnitude up to {self.table_maxabs:g}, "
                f"and 2 (|x| + |y|) max|cost| must stay below the largest {str(self.cost.dtype)[6:]} "
                f"({largest:g}); scale the costs down")

    def check_exact_arithmetic(self, longest_pair: int) -> bool:
        """Whether every value the kernels and the bounds form is exact, for pairs of at most
        ``longest_pair`` nodes together: the costs are the kernels' numbers (a whole table),
        all integers, and ``4 (longest_pair + 1) maxabs`` stays below ``2^(p - 1)`` for the
        dtype's ``p`` mantissa bits. Then sums of costs, their halves and quarters (the label
        bound's potentials) and minima are exact, the margin is 0 and a bound equal to a
        distance can be told apart from one above it (unit and integer costs). Sets and
        returns :attr:`exact_arithmetic`."""
        bits = 53 if self.eps < 1e-10 else 24
        integers = self.unit or (self.table is not None and bool((self.table == torch.round(self.table)).all()))
        self.exact_arithmetic = bool(
            self.exact and integers and 4.0 * (longest_pair + 1) * self.maxabs < 2.0 ** (bits - 1))
        return self.exact_arithmetic

    def local(self, codes: torch.Tensor) -> torch.Tensor:
        """Alphabet indices -> local indices."""
        return self.lookup[codes]

    def row_blocks(self, block: int = _ROW_BLOCK, rows: Optional[torch.Tensor] = None):
        """``(idx, C[idx, :])`` over all local rows (or the local rows ``rows``, ascending),
        ``idx`` their local indices, float64 blocks."""
        if rows is not None and len(rows) == 0:
            return
        if self.table is not None:
            yield (torch.arange(self.k), self.table) if rows is None else (rows, self.table[rows])
            return
        with torch.no_grad():
            for s in range(0, self.k if rows is None else len(rows), block):
                idx = torch.arange(s, min(s + block, self.k)) if rows is None else rows[s:s + block]
                yield idx, _cpu64(block_of(self.cost, self.used[idx], self.used))

    def entries(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """``C[a, b]`` for local index tensors of one shape."""
        if self.table is not None:
            return self.table[a, b]
        ua, ia = torch.unique(a, return_inverse=True)
        ub, ib = torch.unique(b, return_inverse=True)
        with torch.no_grad():
            sub = _cpu64(block_of(self.cost, self.used[ua], self.used[ub]))
        return sub[ia, ib]

    def margin(self, m: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        """How far a computed bound of a pair of sizes ``m``, ``n`` may exceed the kernel's
        computed distance through rounding alone (float64, broadcast).

        A mapping has at most ``L - 1 = m + n`` operations, so the kernel's value of a pair is
        a sum of at most ``L - 1`` costs of magnitude at most ``maxabs``, formed in the
        module's dtype; recursive summation of ``L`` terms errs by at most
        ``(L - 1) u sum|terms| <= L eps L maxabs``, and the minimum over alternatives keeps
        that (rounding is monotone). A bound computed by the same kernel (the traversal
        bound) or in float64 from the same costs (the label bound, upper bounds) errs by no
        more, so two such errors are allowed: ``2 L^2 eps maxabs``. With
        :attr:`exact_arithmetic` (integer costs read from a whole table) the margin is 0. Where the bound's costs
        are not the kernels' numbers (a module without a whole symbol table, whose
        ``symbol_subtable`` / ``symbol_block`` agree with what the kernels read only to the
        module's rounding), a further ``L tau maxabs`` with ``tau = 1e-9`` (float64) or
        ``1e-4`` (float32) allows each cost of the sum to differ by that much relative to
        ``maxabs``.
        """
        if self.exact_arithmetic:
            return torch.zeros((m + n).shape, dtype=torch.float64)  # (torch.broadcast_shapes imports sympy: seconds)
        tau = 0.0 if self.exact else (1e-9 if self.eps < 1e-10 else 1e-4)
        total = None
        if m.is_floating_point() or n.is_floating_point():
            L = m.to(torch.float64) + n.to(torch.float64) + 1.0
        else:  # integer sizes: the margin of every length once, then looked up (the same
            # numbers, one gather instead of six passes over a block of pairs)
            total = m + n
            L = torch.arange(int(total.max()) + 1 if total.numel() else 1, dtype=torch.float64) + 1.0
        margins = self.maxabs * (2.0 * L * L * self.eps + L * tau) + 1e-300
        return margins if total is None else margins[total]


def _cpu64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", torch.float64)

