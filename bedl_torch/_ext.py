"""Loads the compiled kernels ``bedl_torch._C`` with a readable error and names its operators.

The kernels are torch operators (``torch.ops.bedl_torch.ted`` etc., CPU implementations in
C++); the fake (meta) implementations below give their output shapes to ``torch.compile``
and ``torch.library.opcheck`` without running them.
"""
import torch

try:
    from . import _C  # noqa: F401  (registers torch.ops.bedl_torch)
except ImportError as exc:  # pragma: no cover - depends on the build
    raise ImportError(
        "bedl_torch's C++ extension (bedl_torch._C) could not be loaded: "
        f"{exc}. Build it against the installed torch {torch.__version__} with "
        "`pip install --no-build-isolation -e .` (or `make install`)."
    ) from exc

_built = _C.torch_version
_running = torch.__version__.split("+")[0]
if _built.split(".")[:2] != _running.split(".")[:2]:  # pragma: no cover
    raise ImportError(
        f"bedl_torch._C was built against torch {_built} but torch {torch.__version__} is "
        "installed; rebuild with `pip install --no-build-isolation -e .`."
    )

_ops = torch.ops.bedl_torch
# (distances (B,), P (B, M1, N1) or an empty tensor) for B pairs; see csrc/edit_distance.h
ted_cpu = _ops.ted
sed_cpu = _ops.sed
ted_symbols_cpu = _ops.ted_symbols
sed_symbols_cpu = _ops.sed_symbols
# int64 distances (B,) of sequences under unit costs between the labels themselves (no table)
sed_unit_cpu = _ops.sed_unit
# their matrix's rows in a dtype, without pair lists (triangle: the columns from the first row
# on, i <= j computed, mirrored)
sed_unit_matrix_cpu = _ops.sed_unit_matrix
# each row's k nearest (distance, index) lists merged in place with a dense block of the matrix
knn_merge_dense_cpu = _ops.knn_merge_dense
# the (S, S) gradient of sum_b pair_weights[b] * distance_b in the symbol table
ted_symbols_grad_cpu = _ops.ted_symbols_grad
sed_symbols_grad_cpu = _ops.sed_symbols_grad
# (distances (B,), ptr (B+1,), entry (E,), value (E,)): each pair's P summed by label pair,
# and the (S, S) sum of those lists weighted per pair (the backward of the former)
ted_symbols_sums_cpu = _ops.ted_symbols_sums
sed_symbols_sums_cpu = _ops.sed_symbols_sums
weighted_pair_sums_cpu = _ops.weighted_pair_sums
# (soft distances (B,), expected alignments (B, M1, N1) or an empty tensor) at a temperature
ted_soft_cpu = _ops.ted_soft
sed_soft_cpu = _ops.sed_soft
# the operators with CUDA kernels in this build: called with CUDA costs they run on that GPU
cuda_operators = frozenset(_C.cuda_operators)


def runs_on_device(operator: str, device: torch.device) -> bool:
    """Whether ``torch.ops.bedl_torch.<operator>`` runs on ``device`` itself (the CPU, or a GPU
    where this build has that operator's CUDA kernel); otherwise its inputs go to the CPU."""
    return device.type == "cpu" or (device.type == "cuda" and operator in cuda_operators)


# AVX2 kernels on or off (same bits either way; tests and benchmarks compare both)
set_simd_enabled = _C.set_simd_enabled
simd_enabled = _C.simd_enabled


def _padded_outputs(costs, batch, need_coopt):
    distances = costs.new_empty((batch,))
    coopt = costs.new_empty(costs.shape) if need_coopt else costs.new_empty((0,))
    return distances, coopt


def _symbol_outputs(table, batch, need_coopt):
    distances = table.new_empty((batch,))
    if not need_coopt:
        return distances, table.new_empty((0,))
    # P is padded to the largest pair of the batch: a size known only from the data
    ctx = torch.library.get_ctx()
    return distances, table.new_empty((batch, ctx.new_dynamic_size(), ctx.new_dynamic_size()))


@torch.library.register_fake("bedl_torch::ted")
def _ted_fake(costs, x_sizes, x_ptr, y_sizes, y_ptr, pair_x, pair_y, need_coopt, rel_tol):
    return _padded_outputs(costs, costs.shape[0], need_coopt)


@torch.library.register_fake("bedl_torch::sed")
def _sed_fake(costs, x_len, y_len, need_coopt, rel_tol):
    return _padded_outputs(costs, costs.shape[0], need_coopt)


@torch.library.register_fake("bedl_torch::ted_symbols")
def _ted_symbols_fake(table, x_labels, x_sizes, x_ptr, y_labels, y_sizes, y_ptr, pair_x, pair_y,
                      need_coopt, rel_tol, max_distance=None):
    return _symbol_outputs(table, pair_x.shape[0], need_coopt)


@torch.library.register_fake("bedl_torch::sed_symbols")
def _sed_symbols_fake(table, x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y, need_coopt, rel_tol,
                      max_distance=None):
    return _symbol_outputs(table, pair_x.shape[0], need_coopt)


@torch.library.register_fake("bedl_torch::sed_unit")
def _sed_unit_fake(x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y):
    return x_labels.new_empty((pair_x.shape[0],))


@torch.library.register_fake("bedl_torch::sed_unit_matrix")
def _sed_unit_matrix_fake(x_labels, x_ptr, y_labels, y_ptr, row_begin, row_end, triangle, dtype):
    return x_labels.new_empty((row_end - row_begin, y_ptr.shape[0] - 1 - (row_begin if triangle else 0)),
                              dtype=dtype)


@torch.library.register_fake("bedl_torch::knn_merge_dense")
def _knn_merge_dense_fake(best_d, best_i, block, row0, col0, partners, drop_diagonal):
    return None


@torch.library.register_fake("bedl_torch::ted_symbols_grad")
def _ted_symbols_grad_fake(table, x_labels, x_sizes, x_ptr, y_labels, y_sizes, y_ptr, pair_x, pair_y,
                           pair_weights, rel_tol):
    return table.new_empty(table.shape)


@torch.library.register_fake("bedl_torch::sed_symbols_grad")
def _sed_symbols_grad_fake(table, x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y, pair_weights, rel_tol):
    return table.new_empty(table.shape)


def _sums_outputs(table, batch):
    # how many entries the lists hold (or none, past the bound) is known only from the data
    ctx = torch.library.get_ctx()
    entries = ctx.new_dynamic_size()
    return (table.new_empty((batch,)), table.new_empty((ctx.new_dynamic_size(),), dtype=torch.long),
            table.new_empty((entries,), dtype=torch.long), table.new_empty((entries,), dtype=torch.float64))


@torch.library.register_fake("bedl_torch::ted_symbols_sums")
def _ted_symbols_sums_fake(table, x_labels, x_sizes, x_ptr, y_labels, y_sizes, y_ptr, pair_x, pair_y,
                           rel_tol, max_entries):
    return _sums_outputs(table, pair_x.shape[0])


@torch.library.register_fake("bedl_torch::sed_symbols_sums")
def _sed_symbols_sums_fake(table, x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y, rel_tol, max_entries):
    return _sums_outputs(table, pair_x.shape[0])


@torch.library.register_fake("bedl_torch::weighted_pair_sums")
def _weighted_pair_sums_fake(sum_ptr, sum_entry, sum_value, pair_weights, rows, cols):
    return pair_weights.new_empty((rows, cols))


@torch.library.register_fake("bedl_torch::ted_soft")
def _ted_soft_fake(costs, x_sizes, x_ptr, y_sizes, y_ptr, pair_x, pair_y, temperature, need_grad):
    return _padded_outputs(costs, costs.shape[0], need_grad)


@torch.library.register_fake("bedl_torch::sed_soft")
def _sed_soft_fake(costs, x_len, y_len, temperature, need_grad):
    return _padded_outputs(costs, costs.shape[0], need_grad)


# every other operator's CUDA implementation (in Python: P chunks from the CUDA kernels, or
# the CPU kernel on copies); registered on import
from . import _cuda_fallbacks  # noqa: E402

_cuda_fallbacks.register(cuda_operators)
