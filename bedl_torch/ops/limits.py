"""Memory bounds and switches of the ops, in one place.

Module attributes read at call time (``limits.CHUNK_CELLS``), so that a test or a benchmark
can change one (``monkeypatch.setattr(bedl_torch.ops.limits, "CHUNK_CELLS", ...)``) for every
module of the ops at once.
"""
from __future__ import annotations

from typing import Optional

# Cells of one chunk's padded cost tensor in pairwise_distances (about 32 MB in float64).
CHUNK_CELLS = 1 << 22
# Kernel pairs per block of rows where pairwise_distances computes a large matrix without a
# gradient (exact mode, one symbol view): memory for one block's pair lists and the kernels'
# per-pair data (about 100 bytes a pair) instead of the whole matrix's.
MATRIX_BLOCK_PAIRS = 1 << 21
# Largest local symbol table (S x S entries over the symbols in use) built for a cost module
# without a whole table: 4M entries, 30.5 MiB in float64. The kernels' time per cell hardly
# depends on the table's size (they gather each pair's costs once); the bound is on memory,
# and it keeps a table below glibc's 32 MiB ceiling for mmap, so the tables of successive
# tiles reuse freed heap memory instead of faulting in fresh pages (about as slow as the
# table's matrix product).
LOCAL_TABLE_CELLS = 2000 * 2000
# Most entries (16 bytes each: 128 MiB) of the per-pair lists of P by label pair that the
# forward of a symbol table requiring grad keeps for its backward; the bound counts each
# pair's (distinct x labels + 1)(distinct y labels + 1) - 1. Beyond it, backward recomputes P.
PAIR_SUM_ENTRIES = 1 << 23
# Whether forward keeps those lists: where most pairs got a nonzero gradient in the last
# backward through the same cost module (at least this fraction of them: below it, computing
# P for every pair in forward costs more than a distance pass plus P of the few pairs that
# backward needs, as with a GLVQ loss that reads two distances per row). True or False
# decides for every call instead.
LISTS_MIN_NONZERO = 0.75
BACKWARD_LISTS: Optional[bool] = None
# P entries (8 bytes each in float64: 256 MiB) of one chunk of pairs whose co-optimal matrices
# the symbol-table gradient computes on a GPU (ops.batch.coopt_grad).
DEVICE_P_CELLS = 1 << 25
