"""Batches of pairs and the autograd functions over the kernels.

:class:`PairBatch` holds pairs drawn from two :class:`~.encoding.FlatTable` objects and runs
the kernels on padded costs or on a symbol table; :class:`SymbolTableKernels` calls the
symbol-table kernels on prebuilt arguments. The autograd functions (:class:`EditDistanceFn`,
:class:`SymbolEditDistanceFn`, :class:`SoftEditDistanceFn`) live here because they call the
batch's kernels and scatter into its views' tables.

Layer: ops (imports the kernels, the cost modules and :mod:`.encoding`).
"""
from __future__ import annotations

import math
import numbers
import weakref
from typing import Optional, Sequence, Tuple

import torch

from .. import _ext
from .._cuda_fallbacks import add_by_label_pairs
from ..costs import SymbolCost
from ..costs.base import check_cost_module
from ..validation import check_cost_tensor, check_sums_finite
from . import limits
from .encoding import FlatTable, SymbolView, check_costs, check_rel_tol, whole_table

__all__ = ["PairBatch", "SymbolTableKernels", "EditDistanceFn", "SymbolEditDistanceFn",
           "SoftEditDistanceFn", "soft_distances", "check_temperature", "dense_backward"]

dense_backward = weakref.WeakKeyDictionary()  # cost module -> its last backward's weights were dense


def _moved(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``t`` on ``device``; ``t`` itself where it is there (inside the autograd functions'
    forward: torch.compile of torch 2.11 made the alias a no-op ``.to()`` returns a further
    output of the function and dropped the gradient through it)."""
    return t if t.device == device else t.to(device)


class PairBatch:
    """A batch of pairs ``(xs[k], ys[k])``, flattened once for repeated evaluation.

    Both sides hold trees (:class:`bedl_torch.Tree`) or both hold sequences. Use
    it where the same pairs are evaluated many times (an optimiser's loop): the
    structure and the symbol indices are computed once.

    Args:
        xs, ys: equally long sequences of trees or of sequences.

    Attributes:
        x_table, y_table (FlatTable): the two sides, flattened. pair_x, pair_y: int64 ``(B,)``
            indices of each pair's objects in the tables. m, n: int64 ``(B,)`` their lengths.
        kind (str): ``"tree"`` or ``"sequence"``. All on the CPU.

    Raises:
        ValueError: sides of different lengths. TypeError: objects that are neither trees nor
            sequences, or trees mixed with sequences.

    Results (distances, co-optimal matrices) come back on the costs' device and dtype.
    """

    def __init__(self, xs: Sequence, ys: Sequence):
        xs, ys = list(xs), list(ys)
        if len(xs) != len(ys):
            raise ValueError(f"xs and ys must have the same length, got {len(xs)} and {len(ys)}")
        self._init(FlatTable(xs, "xs"), FlatTable(ys, "ys"), torch.arange(len(xs)), torch.arange(len(ys)))

    @classmethod
    def from_tables(cls, x_table: FlatTable, y_table: FlatTable, pair_x, pair_y) -> "PairBatch":
        """Pairs ``(x_table.objects[pair_x[k]], y_table.objects[pair_y[k]])`` over tables
        flattened once.

        Args:
            x_table, y_table: :class:`FlatTable` objects, e.g. the ``x_table``/``y_table``
                attributes of another ``PairBatch``; their structure and symbol indices are
                shared, so sub-batches (chunks, data-to-prototype pairs) cost no re-flattening.
            pair_x, pair_y: equally long int64 index vectors (CPU) into the two tables.

        Raises:
            TypeError: one table holds trees and the other sequences.
        """
        self = cls.__new__(cls)
        self._init(x_table, y_table, torch.as_tensor(pair_x, dtype=torch.long),
                   torch.as_tensor(pair_y, dtype=torch.long))
        return self

    def _init(self, x_table, y_table, pair_x, pair_y):
        if x_table.kind and y_table.kind and x_table.kind != y_table.kind:
            raise TypeError(
                f"both sides must be trees or both sequences, got {x_table.kind}s and {y_table.kind}s"
            )
        self.x_table, self.y_table = x_table, y_table
        self.kind = x_table.kind or y_table.kind or "sequence"
        self.pair_x, self.pair_y = pair_x, pair_y
        self.m = x_table.lengths[pair_x] if len(pair_x) else torch.zeros(0, dtype=torch.long)
        self.n = y_table.lengths[pair_y] if len(pair_y) else torch.zeros(0, dtype=torch.long)
        self.rows = int(self.m.max()) + 1 if len(self) else 1
        self.cols = int(self.n.max()) + 1 if len(self) else 1
        self._view_plan = None  # (cost module (weak), key, SymbolView.plan()) of the last local view

    def __len__(self) -> int:
        return len(self.pair_x)

    @property
    def shape(self) -> Tuple[int, int, int]:
        """Shape ``(B, M+1, N+1)`` of the padded cost tensor."""
        return (len(self), self.rows, self.cols)

    # -- costs ---------------------------------------------------------------

    def costs(self, cost: SymbolCost, unknown: str = "error") -> torch.Tensor:
        """Padded costs ``(B, M+1, N+1)`` of every pair under a cost module (its device and
        dtype; the padding holds gap costs).

        Raises:
            ValueError: labels missing from ``cost.alphabet`` (named) unless
                ``unknown="gap"``, or a module that returns the wrong shape.
            TypeError: ``cost`` is not a :class:`SymbolCost`.
        """
        check_cost_module(cost)
        x_idx = self.x_table.encoded(cost, unknown)[self.pair_x, : self.rows]
        y_idx = self.y_table.encoded(cost, unknown)[self.pair_y, : self.cols]
        out = cost(x_idx, y_idx)
        check_cost_tensor(out, f"the costs of {type(cost).__name__}", finite=False)
        if out.shape != self.shape:
            raise ValueError(
                f"{type(cost).__name__} returned costs of shape {tuple(out.shape)}, expected {self.shape}"
            )
        return out

    def as_costs(self, cost_or_costs, unknown="error", finite: bool = True) -> torch.Tensor:
        """The padded costs of a cost module (:meth:`costs`), or a given cost tensor checked
        against the batch's shape."""
        if isinstance(cost_or_costs, SymbolCost):
            costs = self.costs(cost_or_costs, unknown)
        else:
            costs = cost_or_costs
        check_costs(costs, finite=finite)
        if costs.dim() != 3 or costs.shape[0] != len(self) or costs.shape[1] < self.rows or costs.shape[2] < self.cols:
            raise ValueError(
                f"costs must be 3-D (batch, |x|+1, |y|+1) of at least {self.shape}, got {tuple(costs.shape)}"
            )
        return costs

    # -- kernels -------------------------------------------------------------

    def run_padded(self, costs: torch.Tensor, need_coopt: bool, rel_tol: float):
        """The kernels on padded costs (any device): distances and (with ``need_coopt``) P,
        on the costs' device (computed there where the build has that kernel)."""
        device = costs.device
        c = costs.detach()
        operator = "ted" if self.kind == "tree" else "sed"
        if not _ext.runs_on_device(operator, device):
            c = c.cpu()
        # The kernels check finiteness and the overflow rule on the data they read and raise
        # ValueError naming the pair (see _check_costs).
        if self.kind == "tree":
            d, p = _ext.ted_cpu(c, self.x_table.sizes, self.x_table.ptr, self.y_table.sizes,
                                self.y_table.ptr, self.pair_x, self.pair_y, need_coopt, rel_tol)
        else:
            d, p = _ext.sed_cpu(c, self.m, self.n, need_coopt, rel_tol)
        return _moved(d, device), _moved(p, device)

    @property
    def symbol_operator(self) -> str:
        """The operator of this batch's kind on a symbol table."""
        return "ted_symbols" if self.kind == "tree" else "sed_symbols"

    def symbol_args(self, view: SymbolView, table: torch.Tensor, operator: Optional[str] = None) -> tuple:
        """The symbol-table kernels' leading arguments: ``table`` (the view's, or a saved copy
        of it) on the CPU, or on its GPU where ``operator`` runs there; the labels in the
        view's numbering, the layout and the pairs (on the CPU)."""
        t = table.detach()
        if operator is None or not _ext.runs_on_device(operator, t.device):
            t = t.cpu()
        xl = view.flat_labels(self.x_table)
        yl = view.flat_labels(self.y_table)
        if self.kind == "tree":
            return (t, xl, self.x_table.sizes, self.x_table.ptr, yl, self.y_table.sizes, self.y_table.ptr,
                    self.pair_x, self.pair_y)
        return t, xl, self.x_table.ptr, yl, self.y_table.ptr, self.pair_x, self.pair_y

    def run_symbols(self, view: SymbolView, need_coopt: bool, rel_tol: float,
                    max_distance: Optional[torch.Tensor] = None):
        """Kernels on a symbol view's table: on its GPU where the build has that kernel (results
        stay there), else on the CPU (P padded). ``max_distance`` (float64 ``(B,)``, distances
        only): pairs above their thresholds come back as inf."""
        op = _ext.ted_symbols_cpu if self.kind == "tree" else _ext.sed_symbols_cpu
        args = self.symbol_args(view, view.table, self.symbol_operator)
        if max_distance is None:
            return op(*args, need_coopt, rel_tol)
        return op(*args, need_coopt, rel_tol, max_distance)

    def run_symbol_sums(self, view: SymbolView, rel_tol: float):
        """Distances with each pair's P listed by label pair (for the backward), or only the
        distances (and None) where the lists could exceed ``limits.PAIR_SUM_ENTRIES``."""
        op = _ext.ted_symbols_sums_cpu if self.kind == "tree" else _ext.sed_symbols_sums_cpu
        return _distances_and_sums(op(*self.symbol_args(view, view.table), rel_tol, limits.PAIR_SUM_ENTRIES))

    def symbol_view(self, cost, unknown: str = "error") -> Optional[SymbolView]:
        """How the kernels can gather this batch's costs from a symbol table: the module's
        whole table, or a local one over the batch's symbols where that is smaller than the
        padded cost tensor; None: the padded path (``cost.forward`` per pair). A local view's
        symbols are found once per module (and alphabet, and class ``forward``): later calls
        (an optimiser's evaluations) only compute its table again."""
        if not isinstance(cost, SymbolCost):
            return None
        check_cost_module(cost)
        # (the key keeps the alphabet list, so its id is not reused while cached)
        key = (cost.alphabet, id(cost.alphabet), len(cost.alphabet), unknown, type(cost), type(cost).forward,
               limits.LOCAL_TABLE_CELLS)
        cached = self._view_plan
        if cached is not None and cached[0]() is cost and cached[1][1:] == key[1:]:
            return cached[2].renewed(cost)
        view = self._new_symbol_view(cost, unknown)
        plan = view.plan() if view is not None else None
        self._view_plan = (weakref.ref(cost), key, plan) if plan is not None else None
        return view

    def _new_symbol_view(self, cost: SymbolCost, unknown: str) -> Optional[SymbolView]:
        table = whole_table(cost, self.x_table, self.y_table, unknown)
        if table is not None:
            return SymbolView(table, cost, unknown)
        if not len(self):
            return None
        x_enc = self.x_table.encoded(cost, unknown)  # (also names unknown labels)
        y_enc = self.y_table.encoded(cost, unknown)
        labels = [x_enc[torch.unique(self.pair_x), : self.rows],
                  y_enc[torch.unique(self.pair_y), : self.cols]]
        # worth it only where symbols repeat: the table well below the padded costs
        padded_cells = len(self) * self.rows * self.cols
        view = SymbolView.local(cost, unknown, labels, min(padded_cells // 4, limits.LOCAL_TABLE_CELLS))
        if view is None and self.y_table is not self.x_table:
            # rows over the x side's symbols, columns over the y side's: no more costs than
            # the padded path computes
            view = SymbolView.between(cost, unknown, labels[0], labels[1], self.y_table,
                                       limits.LOCAL_TABLE_CELLS, max_block=padded_cells)
        return view

    def distances(self, cost_or_costs, mode: str = "exact", reference=None, *,
                  rel_tol: Optional[float] = None, unknown: str = "error",
                  temperature: Optional[float] = None) -> torch.Tensor:
        """Distances ``(B,)`` of all pairs, differentiable in the costs.

        Args:
            cost_or_costs: a cost module or a padded float32/float64 cost tensor
                ``(B, >= M+1, >= N+1)`` on any device.
            mode: ``"exact"`` (gradient P(C)) or ``"pseudo"`` (``sum(P0 * C)`` with
                P0 at ``reference``: a cost module or padded reference costs, default the
                current costs, detached; a P0 already computed goes to
                :meth:`pseudo_distances`, as a tensor here is read as costs) or ``"soft"``
                (:func:`soft_edit_distance` at ``temperature``; gradient the expected
                alignment).

        Raises:
            ValueError: an unknown mode, costs of the wrong shape, NaN or inf costs, labels
                missing from the alphabet, ``mode="soft"`` without a temperature (or one that
                is not finite and > 0), a temperature with another mode. TypeError: non-float
                costs.
        """
        if mode == "soft":
            return soft_distances(self, cost_or_costs, temperature, unknown)
        if temperature is not None:
            raise ValueError(f"temperature is used only with mode='soft', got mode={mode!r}")
        if isinstance(reference, torch.Tensor):
            check_cost_tensor(reference, "reference", finite=False)
        return self.run_distances(cost_or_costs, mode, reference, rel_tol, unknown)

    def run_distances(self, cost_or_costs, mode="exact", reference=None, rel_tol=None,
                      unknown="error", view=None, max_distance=None):
        """:meth:`distances` without the argument checks, on a given symbol ``view`` (None:
        this batch's own), for callers that evaluate many batches under one table.
        ``max_distance`` (float64 ``(B,)``; exact mode, no gradient): on the symbol-table
        path, pairs above their thresholds may come back as inf (the kernels stop them
        early); elsewhere every distance is exact."""
        if mode == "exact":
            if view is None:
                view = self.symbol_view(cost_or_costs, unknown)
            if view is not None:
                tol = check_rel_tol(rel_tol, view.table.dtype)
                if max_distance is not None or not (view.table.requires_grad and torch.is_grad_enabled()):
                    # what the function's forward runs without a gradient, minus its overhead
                    return self.run_symbols(view, False, tol, max_distance)[0].to(view.table.device)
                d, _ = SymbolEditDistanceFn.apply(view.table, self, view, tol, False)
                return d
            costs = self.as_costs(cost_or_costs, unknown, finite=False)
            tol = check_rel_tol(rel_tol, costs.dtype)
            d, _ = EditDistanceFn.apply(costs, self, tol, False)
            return d
        if mode == "pseudo":
            if reference is None:
                reference = cost_or_costs
                if isinstance(reference, torch.Tensor):
                    reference = reference.detach()
            if isinstance(reference, SymbolCost):
                p0 = self.run_coopt(reference, rel_tol, unknown)[1]
            else:
                p0 = self.run_coopt(reference, rel_tol)[1]
            return self.run_pseudo(cost_or_costs, p0, unknown, view)
        raise ValueError(f"mode must be 'exact', 'pseudo' or 'soft', got {mode!r}")

    def coopt(self, cost_or_costs, *, rel_tol: Optional[float] = None,
              unknown: str = "error") -> Tuple[torch.Tensor, torch.Tensor]:
        """Distances ``(B,)`` and co-optimal matrices ``(B, M+1, N+1)`` (zero outside each
        pair's block), without gradient, on the costs' device. Raises as :meth:`distances`."""
        return self.run_coopt(cost_or_costs, rel_tol, unknown)

    def run_coopt(self, cost_or_costs, rel_tol=None, unknown="error", view=None):
        """:meth:`coopt` on a given symbol ``view`` (None: this batch's own)."""
        with torch.no_grad():
            if view is None:
                view = self.symbol_view(cost_or_costs, unknown)
            if view is not None:
                tol = check_rel_tol(rel_tol, view.table.dtype)
                d, p = self.run_symbols(view, True, tol)
                return d.to(view.table.device), p.to(view.table.device)
            costs = self.as_costs(cost_or_costs, unknown, finite=False)
            tol = check_rel_tol(rel_tol, costs.dtype)
            return self.run_padded(costs, True, tol)

    def pseudo_distances(self, cost_or_costs, coopt: torch.Tensor, *, unknown: str = "error") -> torch.Tensor:
        """Pseudo edit distances ``sum(P0 * C)`` ``(B,)`` for frozen co-optimal matrices ``P0``
        (from :meth:`coopt`), differentiable in the costs.

        Raises:
            TypeError: ``coopt`` not a dense float32/float64 tensor.
            ValueError: ``coopt`` not a ``(B, M+1, N+1)`` tensor, or on the meta device; as
                :meth:`costs`; sums that overflow the dtype.
        """
        check_cost_tensor(coopt, "coopt", finite=False)
        return self.run_pseudo(cost_or_costs, coopt, unknown)

    def run_pseudo(self, cost_or_costs, coopt, unknown="error", view=None):
        """:meth:`pseudo_distances` without the check of ``coopt``'s type, on a given symbol
        ``view`` (None: this batch's own)."""
        if not isinstance(coopt, torch.Tensor) or coopt.shape[0] != len(self) or coopt.dim() != 3:
            raise ValueError("coopt must be a (B, M+1, N+1) tensor from PairBatch.coopt")
        if view is None and isinstance(cost_or_costs, SymbolCost):
            view = self.symbol_view(cost_or_costs, unknown)
        if view is not None:  # gather the padded costs from the table (differentiable)
            xi = view.padded_labels(self.x_table, self.pair_x, self.rows).to(view.table.device)
            yi = view.padded_labels(self.y_table, self.pair_y, self.cols).to(view.table.device)
            costs = view.table[xi[:, :, None], yi[:, None, :]]
        else:
            costs = self.as_costs(cost_or_costs, unknown)
        rows, cols = min(costs.shape[1], coopt.shape[1]), min(costs.shape[2], coopt.shape[2])
        p0 = coopt[:, :rows, :cols].to(device=costs.device, dtype=costs.dtype)
        out = (p0 * costs[:, :rows, :cols]).sum(dim=(1, 2))
        check_sums_finite(out, "pseudo distances of pairs")
        return out


def _distances_and_sums(result) -> tuple:
    """A sums op's ``(distances, ptr, entry, value)`` as ``(distances, (ptr, entry, value))``,
    or ``(distances, None)`` where it listed nothing (the lists would not fit)."""
    d, *sums = result
    return d, (tuple(sums) if sums[0].numel() else None)


class SymbolTableKernels:
    """The symbol-table kernels on one batch's pairs with their arguments built once, for
    callers that evaluate the same pairs under many tables (BEDL's exact metric step).

    Skips :meth:`PairBatch.distances`' per-call work (module checks, views, autograd): the
    table passed must be the whole ``(U+1, U+1)`` table of the module the labels were encoded
    with, a CPU tensor; the kernels still check it (NaN/inf, overflow rule).

    Args:
        batch: the pairs. cost: the module whose alphabet encodes the labels.
        unknown: ``"error"`` or ``"gap"``, as for the ops.
    """

    def __init__(self, batch: PairBatch, cost: SymbolCost, unknown: str):
        xt, yt = batch.x_table, batch.y_table
        xl, yl = xt.flat_labels(cost, unknown), yt.flat_labels(cost, unknown)
        if batch.kind == "tree":
            self._args = (xl, xt.sizes, xt.ptr, yl, yt.sizes, yt.ptr, batch.pair_x, batch.pair_y)
            self._distances, self._grad = _ext.ted_symbols_cpu, _ext.ted_symbols_grad_cpu
            self._sums = _ext.ted_symbols_sums_cpu
        else:
            self._args = (xl, xt.ptr, yl, yt.ptr, batch.pair_x, batch.pair_y)
            self._distances, self._grad = _ext.sed_symbols_cpu, _ext.sed_symbols_grad_cpu
            self._sums = _ext.sed_symbols_sums_cpu

    def distances(self, table: torch.Tensor, rel_tol: float) -> torch.Tensor:
        """The exact distances ``(B,)`` under ``table`` (no gradient)."""
        return self._distances(table, *self._args, False, rel_tol)[0]

    def weighted_grad(self, table: torch.Tensor, weights: torch.Tensor, rel_tol: float) -> torch.Tensor:
        """The gradient (the table's shape) of ``sum_k weights[k] * distance_k`` in the table's
        entries (``weights``: ``(B,)`` of the table's dtype), as the distances' backward."""
        return self._grad(table, *self._args, weights, rel_tol)

    def distances_with_sums(self, table: torch.Tensor, rel_tol: float):
        """The exact distances ``(B,)`` and each pair's P summed by label pair (one pass), for
        :meth:`grad_from_sums` once the weights are known; the sums are None where they could
        exceed ``limits.PAIR_SUM_ENTRIES`` entries (use :meth:`weighted_grad` then)."""
        return _distances_and_sums(self._sums(table, *self._args, rel_tol, limits.PAIR_SUM_ENTRIES))

    @staticmethod
    def grad_from_sums(sums, weights: torch.Tensor, shape) -> torch.Tensor:
        """:meth:`weighted_grad` from :meth:`distances_with_sums`' sums, for a table of ``shape``
        (rows, cols): the same bits."""
        return _ext.weighted_pair_sums_cpu(*sums, weights, *shape)


class EditDistanceFn(torch.autograd.Function):
    """Forward returns the distances and (when needed) P; backward only scales P."""

    @staticmethod
    def forward(ctx, costs, batch: PairBatch, rel_tol: float, want_coopt: bool):
        need = bool(ctx.needs_input_grad[0]) or want_coopt
        d, p = batch.run_padded(costs, need, rel_tol)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(p)
        if need:
            ctx.mark_non_differentiable(p)
        return d, p

    @staticmethod
    def backward(ctx, grad_d, grad_p):
        (p,) = ctx.saved_tensors
        return grad_d.reshape(-1, 1, 1).to(p.dtype) * p, None, None, None


class SymbolEditDistanceFn(torch.autograd.Function):
    """Distances from a symbol cost table. Where the table requires grad and the last backward
    through the same cost module weighted most pairs (``limits.LISTS_MIN_NONZERO``), forward computes
    each pair's co-optimal matrix P with its distance and keeps only P summed by label pair
    (a few entries per pair), so that backward merely weights and adds them (as torchaudio's
    RNN-T loss computes its gradient in forward). Otherwise (few weighted pairs, or lists that
    could grow past ``limits.PAIR_SUM_ENTRIES``), forward computes the distances alone and backward
    runs the gradient kernel, which computes the lists of the pairs of nonzero weight: the
    same bits either way. Where P is requested too (``want_coopt``), backward scatters that P."""

    @staticmethod
    def forward(ctx, table, batch: PairBatch, view: SymbolView, rel_tol: float, want_coopt: bool):
        sums = None
        lists = limits.BACKWARD_LISTS if limits.BACKWARD_LISTS is not None else dense_backward.get(view.cost, False)
        on_device = table.device.type != "cpu" and _ext.runs_on_device(batch.symbol_operator, table.device)
        if ctx.needs_input_grad[0] and not want_coopt and lists and not on_device:
            d, sums = batch.run_symbol_sums(view, rel_tol)
            p = d.new_empty((0,))
        else:
            d, p = batch.run_symbols(view, want_coopt, rel_tol)
        if ctx.needs_input_grad[0]:
            ctx.batch, ctx.view, ctx.rel_tol, ctx.want_coopt = batch, view, rel_tol, want_coopt
            ctx.table_shape, ctx.table_dtype = table.shape, table.dtype
            ctx.from_sums = sums is not None
            # P, the sums, or the table as of forward (autograd refuses backward if it
            # changed in place since)
            ctx.save_for_backward(*(sums if sums is not None else [p if want_coopt else table]))
        d = _moved(d, table.device)
        p = _moved(p, table.device)
        if want_coopt:
            ctx.mark_non_differentiable(p)
        return d, p

    @staticmethod
    def backward(ctx, grad_d, grad_p):
        saved = ctx.saved_tensors
        batch, view = ctx.batch, ctx.view
        # create_graph through weights that depend on the parameters: the scatter of P keeps them
        # in the graph (P is piecewise constant in the costs: that is the whole second derivative)
        second_order = torch.is_grad_enabled() and grad_d.requires_grad
        if not ctx.want_coopt and not second_order:
            nonzero = int(torch.count_nonzero(grad_d))
            dense_backward[view.cost] = nonzero >= limits.LISTS_MIN_NONZERO * grad_d.numel()
        if ctx.want_coopt or second_order:
            p = saved[0].cpu() if ctx.want_coopt else batch.run_symbols(view, True, ctx.rel_tol)[1]
            grad = _scatter_coopt(p, grad_d, batch, view, ctx.table_shape)
        elif ctx.from_sums:
            weights = grad_d.detach().to("cpu", ctx.table_dtype).reshape(-1)
            grad = _ext.weighted_pair_sums_cpu(*saved, weights, *ctx.table_shape)
        elif saved[0].device.type != "cpu" and _ext.runs_on_device(batch.symbol_operator, saved[0].device):
            grad = coopt_grad(batch, view, saved[0], grad_d, ctx.rel_tol)
        else:
            weights = grad_d.detach().to("cpu", ctx.table_dtype).reshape(-1)
            op = _ext.ted_symbols_grad_cpu if batch.kind == "tree" else _ext.sed_symbols_grad_cpu
            grad = op(*batch.symbol_args(view, saved[0]), weights, ctx.rel_tol)
        return grad.to(grad_d.device), None, None, None, None


def _scatter_coopt(p, grad_d, batch, view, shape):
    """sum_k grad_d[k] * P_k scattered into a table of ``shape`` (rows, cols) by the pairs'
    labels, on P's device; differentiable in ``grad_d`` where a graph is recorded."""
    x_idx = view.padded_labels(batch.x_table, batch.pair_x, p.shape[1])
    y_idx = view.padded_labels(batch.y_table, batch.pair_y, p.shape[2])
    grad = torch.zeros(shape[0] * shape[1], dtype=p.dtype, device=p.device)
    return add_by_label_pairs(grad, p, x_idx, y_idx, grad_d.reshape(-1), shape[1]).view(*shape)


def coopt_grad(batch: PairBatch, view: SymbolView, table: torch.Tensor, grad_d: torch.Tensor,
               rel_tol: float) -> torch.Tensor:
    """The symbol table's gradient of the distances, sum_k grad_d[k] P_k by label pair, on the
    table's GPU: the gradient operator's CUDA implementation (``_cuda_fallbacks``: P of the
    pairs of nonzero weight from the CUDA kernels in chunks, summed there). Sums in another
    order than the CPU's lists: equal to within rounding, not bit for bit."""
    op = _ext.ted_symbols_grad_cpu if batch.kind == "tree" else _ext.sed_symbols_grad_cpu
    weights = grad_d.detach().to(table.device, table.dtype).reshape(-1)
    return op(*batch.symbol_args(view, table, batch.symbol_operator), weights, rel_tol)


def check_temperature(temperature) -> float:
    """The temperature as a float; TypeError unless a real number, ValueError unless finite
    and > 0."""
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"temperature must be a real number, got {type(temperature).__name__}")
    temperature = float(temperature)
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be finite and > 0, got {temperature}")
    return temperature


def _run_soft(batch: PairBatch, costs: torch.Tensor, temperature: float, need_grad: bool):
    """The soft kernels on padded costs (any device: on a GPU where the build has their CUDA
    kernels); results on the costs' device."""
    c = costs.detach()
    if not _ext.runs_on_device("ted_soft" if batch.kind == "tree" else "sed_soft", c.device):
        c = c.cpu()
    if batch.kind == "tree":
        d, p = _ext.ted_soft_cpu(c, batch.x_table.sizes, batch.x_table.ptr, batch.y_table.sizes,
                                 batch.y_table.ptr, batch.pair_x, batch.pair_y, temperature, need_grad)
    else:
        d, p = _ext.sed_soft_cpu(c, batch.m, batch.n, temperature, need_grad)
    return _moved(d, costs.device), _moved(p, costs.device)


class SoftEditDistanceFn(torch.autograd.Function):
    """Soft distances; the gradient is the expected alignment, which forward computes when
    the costs need a gradient."""

    @staticmethod
    def forward(ctx, costs, batch: PairBatch, temperature: float):
        need = bool(ctx.needs_input_grad[0])
        d, p = _run_soft(batch, costs, temperature, need)
        if need:
            ctx.save_for_backward(p)
        return d

    @staticmethod
    def backward(ctx, grad_d):
        if torch.is_grad_enabled():
            # the expected alignment depends on the costs and its derivative is not computed:
            # a graph of this backward would give second derivatives without that term
            raise RuntimeError("second derivatives of soft edit distances are not implemented: run "
                               "backward (or torch.autograd.grad) without create_graph=True")
        (p,) = ctx.saved_tensors
        return grad_d.reshape(-1, 1, 1).to(p.dtype) * p, None, None


def soft_distances(batch: PairBatch, cost_or_costs, temperature, unknown="error") -> torch.Tensor:
    """Soft distances ``(B,)`` of a batch under a cost module (its padded costs) or padded costs."""
    if temperature is None:
        raise ValueError("mode='soft' needs a temperature")
    temperature = check_temperature(temperature)
    costs = batch.as_costs(cost_or_costs, unknown, finite=False)
    return SoftEditDistanceFn.apply(costs, batch, temperature)

