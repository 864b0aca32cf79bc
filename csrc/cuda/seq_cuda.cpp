// Entry points of the sequence kernels on CUDA (sed, sed_symbols): the CPU
// kernels' checks on the index tensors (on the host), outputs and workspaces on
// the costs' GPU, the launches on torch's current stream (seq/kernels.h), and
// the per-pair statuses raised as the CPU kernels' errors. Host round trips:
// the index tensors' extents (they size P; copied once if they are on the GPU),
// a symbol table's largest cost (the overflow rule), and with P or padded costs
// the statuses (errors name their pair).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "../cpu/inputs.h"
#include "edit_distance_cuda.h"
#include "launch.h"
#include "seq/kernels.h"

namespace bedl {
namespace {

using gpu::Extents;
using gpu::kPairCountsOverflow;

// The distances (and with need_coopt P into p, zero on entry) of `pairs`;
// statuses into status. Counts as doubles first; pairs whose counts overflow
// them again with exponents.
template <typename scalar_t, class Pairs>
void run_sequences(const Pairs& pairs, const Extents& ext, bool need_coopt, double rel_tol, at::Tensor& d,
                   at::Tensor& p, at::Tensor& status) {
  const int64_t batch = d.size(0);
  const int64_t rows = ext.max_m + 1, cols = ext.max_n + 1;
  const at::TensorOptions bytes = d.options().dtype(at::kByte);
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  scalar_t* dp_ = d.data_ptr<scalar_t>();
  int32_t* sp = status.data_ptr<int32_t>();
  if (!need_coopt) {
    const int64_t per = gpu::distance_workspace(ext.max_n);
    const int64_t threads = gpu::launch_threads(batch, per * 8);
    at::Tensor ws = at::empty({threads * per}, d.options().dtype(at::kDouble));
    C10_CUDA_CHECK(gpu::launch_sequence_distances(pairs, batch, threads, ws.data_ptr<double>(), ext.max_n, dp_, sp,
                                                  stream));
    return;
  }
  scalar_t* pp = p.data_ptr<scalar_t>();
  const int64_t fast = gpu::coopt_workspace_bytes<dp::FastCount>(ext.max_m, ext.max_n);
  int64_t threads = gpu::launch_threads(batch, fast);
  at::Tensor ws = at::empty({threads * fast}, bytes);
  C10_CUDA_CHECK(gpu::launch_sequence_coopt<dp::FastCount>(pairs, nullptr, batch, threads,
                                                           static_cast<char*>(ws.data_ptr()), ext.max_m, ext.max_n,
                                                           rel_tol, dp_, pp, rows, cols, sp, stream));
  // Pairs whose counts overflowed doubles (massive ties in long sequences): rare.
  const at::Tensor again = at::nonzero(status == kPairCountsOverflow).reshape({-1}).contiguous();
  const int64_t count = again.size(0);
  if (count == 0) return;
  ws = at::Tensor();
  const int64_t exact = gpu::coopt_workspace_bytes<dp::Count>(ext.max_m, ext.max_n);
  threads = gpu::launch_threads(count, exact);
  ws = at::empty({threads * exact}, bytes);
  C10_CUDA_CHECK(gpu::launch_sequence_coopt<dp::Count>(pairs, again.data_ptr<int64_t>(), count, threads,
                                                       static_cast<char*>(ws.data_ptr()), ext.max_m, ext.max_n,
                                                       rel_tol, dp_, pp, rows, cols, sp, stream));
}

// Symbol-table distances, the rows in registers: a thread per pair where every
// y has at most 64 symbols, else a warp per pair.
template <typename scalar_t>
void run_symbol_distances(const gpu::SymbolSequencePairs<scalar_t>& pairs, const Extents& ext, at::Tensor& d) {
  const int64_t batch = d.size(0);
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  const int64_t resident_blocks = static_cast<int64_t>(prop->multiProcessorCount) *
                                  (prop->maxThreadsPerMultiProcessor / gpu::kSequenceBlock);
  const int width = gpu::short_sequence_width(ext.max_n);
  if (width > 0) {
    const int64_t blocks = std::min(resident_blocks, (batch + gpu::kSequenceBlock - 1) / gpu::kSequenceBlock);
    C10_CUDA_CHECK(gpu::launch_sequence_short_distances(pairs, batch, width, blocks, d.data_ptr<scalar_t>(), stream));
    return;
  }
  // a boundary column per warp where a y spans several passes (32 strips of 16 columns)
  const int64_t stride = ext.max_n > gpu::kWarpLanes * 16 ? ext.max_m + 1 : 0;
  const int64_t warps = gpu::launch_threads(batch, std::max<int64_t>(1, stride * 8));
  const int64_t blocks = std::min(resident_blocks, (warps * gpu::kWarpLanes + gpu::kSequenceBlock - 1) /
                                                       gpu::kSequenceBlock);
  at::Tensor boundaries = at::empty({blocks * (gpu::kSequenceBlock / gpu::kWarpLanes) * stride},
                                    d.options().dtype(at::kDouble));
  C10_CUDA_CHECK(gpu::launch_sequence_warp_distances(pairs, batch, blocks, boundaries.data_ptr<double>(), stride,
                                                     d.data_ptr<scalar_t>(), ext.max_n, stream));
}

// A padded batch of sequence pairs on CUDA, checked as the CPU kernels check
// it (check_param: the operator's own parameter, after the index tensors): the
// costs, the lengths on the host and on the GPU, the extents.
struct PaddedSequenceBatch {
  at::Tensor costs, xl, yl, xl_d, yl_d;
  int64_t batch, rows, cols;
  Extents ext;

  template <class CheckParam>
  PaddedSequenceBatch(const at::Tensor& costs_in, const at::Tensor& x_len_in, const at::Tensor& y_len_in,
                      const CheckParam& check_param) {
    gpu::check_cuda_costs(costs_in, "costs", 3, "(batch, |x|+1, |y|+1)");
    costs = costs_in.contiguous();
    batch = costs.size(0);
    rows = costs.size(1);
    cols = costs.size(2);
    const at::Tensor x_len = gpu::on_host(x_len_in), y_len = gpu::on_host(y_len_in);
    dp::check_index(x_len, "x_len", batch);
    dp::check_index(y_len, "y_len", batch);
    check_param();
    xl = x_len.contiguous();
    yl = y_len.contiguous();
    const int64_t *x_lengths = xl.data_ptr<int64_t>(), *y_lengths = yl.data_ptr<int64_t>();
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t m = x_lengths[b], n = y_lengths[b];
      BEDL_CHECK_VALUE(m >= 0 && m + 1 <= rows, "x_len[", b, "] = ", m, " does not fit costs of shape ",
                       costs.sizes());
      BEDL_CHECK_VALUE(n >= 0 && n + 1 <= cols, "y_len[", b, "] = ", n, " does not fit costs of shape ",
                       costs.sizes());
      ext.add(m, n);
    }
    ext.m = [lengths = xl, at = x_lengths](int64_t b) { return at[b]; };
    ext.n = [lengths = yl, at = y_lengths](int64_t b) { return at[b]; };
    xl_d = gpu::on_device(xl, costs.device());
    yl_d = gpu::on_device(yl, costs.device());
  }
  template <typename scalar_t>
  gpu::PaddedSequencePairs<scalar_t> pairs() const {
    return {costs.data_ptr<scalar_t>(), rows, cols, xl_d.data_ptr<int64_t>(), yl_d.data_ptr<int64_t>()};
  }
};

}  // namespace

std::tuple<at::Tensor, at::Tensor> sed_cuda(const at::Tensor& costs_in, const at::Tensor& x_len_in,
                                            const at::Tensor& y_len_in, bool need_coopt, double rel_tol) {
  const PaddedSequenceBatch in(costs_in, x_len_in, y_len_in, [&] { dp::check_rel_tol(rel_tol); });
  const c10::cuda::CUDAGuard guard(in.costs.device());
  const at::Tensor& costs = in.costs;
  const Extents& ext = in.ext;
  at::Tensor d = at::empty({in.batch}, costs.options());
  at::Tensor p = need_coopt ? at::zeros_like(costs) : at::empty({0}, costs.options());
  at::Tensor status = at::empty({in.batch}, costs.options().dtype(at::kInt));
  // (P comes back in the costs' layout, as on the CPU: the jobs write it with the costs' row stride.)
  Extents layout = ext;
  layout.max_m = in.rows - 1;
  layout.max_n = in.cols - 1;
  AT_DISPATCH_FLOATING_TYPES(costs.scalar_type(), "sed_cuda", [&] {
    run_sequences<scalar_t>(in.pairs<scalar_t>(), layout, need_coopt, rel_tol, d, p, status);
    gpu::raise_statuses<scalar_t>(status, ext, "sequences", rel_tol, [&](int64_t b) {
      return gpu::padded_block_max_abs(costs, b, ext.m(b), ext.n(b));
    });
  });
  return {d, p};
}

std::tuple<at::Tensor, at::Tensor> sed_symbols_cuda(const at::Tensor& table_in, const at::Tensor& x_labels_in,
                                                    const at::Tensor& x_ptr_in, const at::Tensor& y_labels_in,
                                                    const at::Tensor& y_ptr_in, const at::Tensor& pair_x_in,
                                                    const at::Tensor& pair_y_in, bool need_coopt, double rel_tol,
                                                    const std::optional<at::Tensor>& max_distance) {
  gpu::check_cuda_symbol_table(table_in);
  const c10::cuda::CUDAGuard guard(table_in.device());
  const at::Tensor table = table_in.contiguous();
  const int64_t rows = table.size(0), cols = table.size(1);
  const gpu::SymbolIndices in(x_labels_in, x_ptr_in, y_labels_in, y_ptr_in, pair_x_in, pair_y_in, rows, cols,
                              rel_tol);
  const at::Tensor &xl = in.x_labels, &yl = in.y_labels, &xp = in.x_ptr, &yp = in.y_ptr, &px = in.pair_x,
                   &py = in.pair_y;
  const int64_t nx = dp::check_ptr(xp, "x_ptr", xl.size(0), "labels");
  const int64_t ny = dp::check_ptr(yp, "y_ptr", yl.size(0), "labels");
  const int64_t batch = in.batch();
  dp::check_pair_indices(px.data_ptr<int64_t>(), py.data_ptr<int64_t>(), batch, nx, ny, "sequence");
  // Pair b's length on one side. The raw pointers are taken once: data_ptr<T>() per pair
  // in this loop cost 290 ms of host time for 8M pairs (10 ms without; measured here).
  // The tensors ride along so that Extents can keep the functions for error messages.
  const auto extent_of = [](const at::Tensor& ptr, const at::Tensor& pair) {
    return [ptr, pair, p = ptr.data_ptr<int64_t>(), q = pair.data_ptr<int64_t>()](int64_t b) {
      return p[q[b] + 1] - p[q[b]];
    };
  };
  const auto m_of = extent_of(xp, px);
  const auto n_of = extent_of(yp, py);
  Extents ext;
  dp::BatchExtent extent;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t m = m_of(b), n = n_of(b);
    ext.add(m, n);
    extent.add(b, m, n);
  }
  ext.m = m_of;
  ext.n = n_of;
  const double max_abs = gpu::symbol_table_max_abs(table);
  const at::Device device = table.device();
  const std::optional<at::Tensor> thresholds =
      max_distance.has_value() ? std::optional<at::Tensor>(gpu::thresholds_on(max_distance, batch, need_coopt, device))
                               : std::nullopt;
  at::Tensor d = at::empty({batch}, table.options());
  at::Tensor p = need_coopt ? at::zeros({batch, extent.rows, extent.cols}, table.options())
                            : at::empty({0}, table.options());
  at::Tensor status = at::empty({batch}, table.options().dtype(at::kInt));
  const at::Tensor xl_d = in.on(0, device), xp_d = in.on(1, device), yl_d = in.on(2, device);
  const at::Tensor yp_d = in.on(3, device), px_d = in.on(4, device), py_d = in.on(5, device);
  AT_DISPATCH_FLOATING_TYPES(table.scalar_type(), "sed_symbols_cuda", [&] {
    extent.check_overflow<scalar_t>(max_abs);
    const gpu::SymbolSequencePairs<scalar_t> pairs{table.data_ptr<scalar_t>(), rows, cols,
                                                   xl_d.data_ptr<int64_t>(), xp_d.data_ptr<int64_t>(),
                                                   yl_d.data_ptr<int64_t>(), yp_d.data_ptr<int64_t>(),
                                                   px_d.data_ptr<int64_t>(), py_d.data_ptr<int64_t>()};
    if (!need_coopt && cols <= std::numeric_limits<int32_t>::max()) {
      run_symbol_distances(pairs, ext, d);
      return;
    }
    run_sequences<scalar_t>(pairs, ext, need_coopt, rel_tol, d, p, status);
    // (The table passed the checks above, so only P's counts can fail a pair.)
    if (need_coopt) gpu::raise_statuses<scalar_t>(status, ext, "sequences", rel_tol, [&](int64_t) { return max_abs; });
  });
  if (thresholds) d = gpu::mark_beyond(d, *thresholds);
  return {d, p};
}

std::tuple<at::Tensor, at::Tensor> sed_soft_cuda(const at::Tensor& costs_in, const at::Tensor& x_len_in,
                                                 const at::Tensor& y_len_in, double temperature, bool need_grad) {
  const PaddedSequenceBatch in(costs_in, x_len_in, y_len_in, [&] { soft::check_temperature(temperature); });
  const c10::cuda::CUDAGuard guard(in.costs.device());
  const at::Tensor& costs = in.costs;
  const Extents& ext = in.ext;
  at::Tensor d = at::empty({in.batch}, costs.options());
  at::Tensor p = need_grad ? at::zeros_like(costs) : at::empty({0}, costs.options());
  at::Tensor status = at::empty({in.batch}, costs.options().dtype(at::kInt));
  const int64_t per = gpu::sequence_soft_workspace_bytes(ext.max_m, ext.max_n);
  const int64_t threads = gpu::launch_threads(in.batch, per);
  const at::Tensor ws = at::empty({threads * per}, costs.options().dtype(at::kByte));
  AT_DISPATCH_FLOATING_TYPES(costs.scalar_type(), "sed_soft_cuda", [&] {
    C10_CUDA_CHECK(gpu::launch_sequence_soft(in.pairs<scalar_t>(), in.batch, threads,
                                             static_cast<char*>(ws.data_ptr()), ext.max_m, ext.max_n, temperature,
                                             need_grad, d.data_ptr<scalar_t>(),
                                             need_grad ? p.data_ptr<scalar_t>() : nullptr,
                                             status.data_ptr<int32_t>(), at::cuda::getCurrentCUDAStream()));
    gpu::raise_soft_statuses<scalar_t>(status, ext, temperature, [&](int64_t b) {
      return gpu::padded_block_max_abs(costs, b, ext.m(b), ext.n(b));
    });
  });
  return {d, p};
}

}  // namespace bedl
