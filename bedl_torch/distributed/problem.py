"""The matrix that :mod:`bedl_torch.distributed` computes: its arguments checked and its pairs
planned by the ops' :class:`~bedl_torch.ops.pairwise.PairwisePlan` (as
:func:`bedl_torch.pairwise_distances` does), its symbol tables built once for the whole
matrix, and the values of one tile at a time."""
from __future__ import annotations

import hashlib
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from ..ops.encoding import FlatTable
from ..ops.pairwise import PairwisePlan, assemble, pair_indices
from ..tree import Tree
from .group import ProcessGroup, Progress
from .tiles import Tile, plan_tiles

__all__ = ["MatrixProblem", "tile_values", "compute_share"]


class MatrixProblem:
    """The checked arguments of a matrix (see :class:`~bedl_torch.ops.pairwise.PairwisePlan`;
    exact and pseudo mode), its whole-matrix symbol views and its tiles' tables."""

    def __init__(self, X, Y, cost, mode="exact", reference_cost=None, chunk_size=None,
                 rel_tol=None, unknown="error", symmetric=None):
        # Fails early (on every rank alike), naming unknown labels, before any collective.
        self.plan = plan = PairwisePlan(X, Y, cost, mode=mode, reference_cost=reference_cost,
                                        chunk_size=chunk_size, rel_tol=rel_tol, unknown=unknown,
                                        symmetric=symmetric, modes=("exact", "pseudo"))
        self.X, self.Y, self.same = plan.X, plan.Y, plan.same
        self.cost, self.symmetric = plan.cost, plan.symmetric
        self.dtype, self.device = plan.dtype, plan.device
        self.kw = dict(mode=mode, reference_cost=reference_cost, rel_tol=rel_tol,
                       unknown=unknown, chunk_size=chunk_size)
        # The symbol tables of the whole matrix, built once: every tile gathers its costs from
        # the same table as bedl_torch.pairwise_distances would for the whole matrix.
        self.view, self.reference_view = plan.matrix_views()
        self._blocks: Dict[Tuple[str, int, int], FlatTable] = {}

    def block(self, side: str, start: int, stop: int) -> FlatTable:
        """The objects ``[start, stop)`` of X (``side="x"``) or Y, flattened once: the kernels
        index every tree of the tables they get, so a tile gets tables of its own objects."""
        if self.same:
            side = "x"  # a diagonal tile of X x X passes one table twice, as the whole matrix does
        key = (side, start, stop)
        if key not in self._blocks:
            objects = (self.X if side == "x" else self.Y)[start:stop]
            self._blocks[key] = FlatTable(objects, side.upper())
        return self._blocks[key]

    @property
    def shape(self) -> Tuple[int, int]:
        return self.plan.shape

    def tiles(self, tile_size: int) -> List[Tile]:
        return plan_tiles(self.plan.x_table.lengths.tolist(), self.plan.y_table.lengths.tolist(),
                          tile_size, self.symmetric)

    def fingerprint(self) -> str:
        """A digest of the objects, the cost modules and the options (for ``resume``)."""
        h = hashlib.sha256()

        def add(text: str) -> None:
            h.update(text.encode("utf-8", "backslashreplace"))
            h.update(b"\0")

        for side in ((self.X,) if self.same else (self.X, self.Y)):
            add(f"side {len(side)}")
            for o in side:
                add(repr((o.labels, o.children)) if isinstance(o, Tree) else repr(tuple(o)))
        for name, module in (("cost", self.cost), ("reference", self.kw["reference_cost"])):
            if module is None:
                continue
            add(f"{name} {type(module).__module__}.{type(module).__qualname__}")
            add(repr(module.alphabet))
            for key, value in module.state_dict().items():
                add(key)
                if isinstance(value, torch.Tensor):
                    add(f"{value.dtype} {tuple(value.shape)}")
                    h.update(value.detach().cpu().contiguous().numpy().tobytes())
                else:
                    add(repr(value))
        add(repr({k: v for k, v in self.kw.items() if k != "reference_cost"}))
        add(f"symmetric {self.symmetric}")
        return h.hexdigest()


def tile_values(problem: MatrixProblem, tile: Tile) -> torch.Tensor:
    """The tile's distances ``(r1 - r0, c1 - c0)`` on the CPU (a triangle tile mirrored):
    chunks of similar sizes, as ``bedl_torch.pairwise_distances`` computes them, from the
    whole matrix's symbol tables."""
    rows, cols = tile.shape
    x_table = problem.block("x", tile.r0, tile.r1)
    y_table = problem.block("y", tile.c0, tile.c1)
    dense = problem.plan.unit_matrix(x_table, y_table, tile.triangle)  # (unit-cost sequences)
    if dense is not None:  # (on the CPU, in the cost's dtype)
        return dense
    ii, jj = pair_indices(rows, cols, tile.triangle)
    with torch.no_grad():
        ii, jj, vals = problem.plan.chunk_values(x_table, y_table, ii, jj, problem.view,
                                                 problem.reference_view)
    vals = vals.detach().to("cpu", problem.dtype)
    return assemble(ii, jj, vals, (rows, cols), tile.triangle)


def compute_share(problem: MatrixProblem, share: Sequence[Tile], grp: ProcessGroup,
                  progress: bool, label: str, on_tile) -> Optional[Exception]:
    """Compute this rank's tiles, handing each to ``on_tile(tile, values)``; returns the error
    that stopped it (an Exception; KeyboardInterrupt and other BaseExceptions propagate)."""
    bar = Progress(progress and grp.rank == 0, sum(t.cells for t in share),
                   label if grp.size == 1 else f"{label} (rank 0's share of {grp.size})")
    try:
        for tile in share:
            on_tile(tile, tile_values(problem, tile))
            bar.update(tile.cells)
    except Exception as error:  # the other ranks must learn of it, not wait for this one
        return error
    finally:
        bar.close()
    return None

