// What every CUDA entry point does around its kernels, with torch: index
// tensors checked on the host (where the CPU kernels' checks run on them) and
// copied to the GPU, workspaces sized to what fits, CUDA errors and the jobs'
// per-pair statuses turned into the CPU kernels' errors.
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "../cpu/check.h"
#include "../cpu/inputs.h"
#include "../cpu/soft_weights.h"
#include "seq/jobs.h"

namespace bedl {
namespace gpu {

// A dense CUDA float32/float64 tensor of `dim` dimensions (`shape` names them in errors).
inline void check_cuda_costs(const at::Tensor& t, const char* name, int64_t dim, const char* shape) {
  BEDL_CHECK_VALUE(t.is_cuda(), name, " must be a CUDA tensor in the CUDA kernel, got ", t.device());
  BEDL_CHECK_VALUE(t.layout() == at::kStrided, name, " must be a dense (strided) tensor, got ", t.layout());
  BEDL_CHECK_VALUE(t.dim() == dim, name, " must be ", dim, "-D ", shape, ", got ", t.dim(), "-D");
  BEDL_CHECK_TYPE(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble, name,
                  " must be float32 or float64, got ", t.scalar_type());
}

// An index tensor on the host (copied from the GPU if it is there), for the checks and the extents.
inline at::Tensor on_host(const at::Tensor& t) { return t.is_cuda() ? t.cpu() : t; }

// An index tensor (checked on the host) on `device`, contiguous.
inline at::Tensor on_device(const at::Tensor& host, const at::Device& device) {
  return host.to(device, /*non_blocking=*/true).contiguous();
}

// How many threads a launch runs: one per pair (at most as many as the GPU
// holds at once), no more than a workspace budget of a quarter of the free
// memory (at most 4 GiB) allows at `bytes_per_thread`, at least one.
inline int64_t launch_threads(int64_t pairs, int64_t bytes_per_thread) {
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  const int64_t resident = static_cast<int64_t>(prop->multiProcessorCount) * prop->maxThreadsPerMultiProcessor;
  size_t free_bytes = 0, total_bytes = 0;
  C10_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // (the caching allocator may hold more that is free to it)
  const int64_t budget = std::min<int64_t>(static_cast<int64_t>(free_bytes / 4), int64_t{4} << 30);
  int64_t threads = std::min(pairs, resident);
  threads = std::min(threads, budget / std::max<int64_t>(1, bytes_per_thread));
  return std::max<int64_t>(1, threads);
}

// How many warps a launch of `groups` warp-wide jobs runs: at most as many as
// the GPU holds at once, within the same workspace budget as launch_threads
// at `bytes_per_warp`, at least one.
inline int64_t launch_warps(int64_t groups, int64_t bytes_per_warp) {
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  return std::min(groups, launch_threads(prop->multiProcessorCount * int64_t{prop->maxThreadsPerMultiProcessor} / 32,
                                         bytes_per_warp));
}

// A symbol cost table on the GPU: float32/float64, (x symbols + gap, y symbols + gap).
inline void check_cuda_symbol_table(const at::Tensor& table) {
  check_cuda_costs(table, "symbol_costs", 2, "(x symbols + gap, y symbols + gap)");
  BEDL_CHECK_VALUE(table.size(0) >= 1 && table.size(1) >= 1,
                   "symbol_costs must be a 2-D (x symbols + gap, y symbols + gap) table, got shape ", table.sizes());
}

// The table's largest absolute entry, which must be finite: the overflow rule
// for every pair (one read back from the GPU).
inline double symbol_table_max_abs(const at::Tensor& table) {
  const double max_abs = table.abs().max().item<double>();  // (NaN if an entry is NaN)
  BEDL_CHECK_VALUE(std::isfinite(max_abs), "symbol_costs contain NaN or inf");
  return max_abs;
}

// The index tensors of the symbol-table kernels on the host (copied from the
// GPU where they are there), checked as the CPU kernels check them and
// contiguous; `given` keeps the caller's tensors, in the same order.
struct SymbolIndices {
  at::Tensor x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y;
  std::array<at::Tensor, 6> given;

  // Checked tensor k (0: x_labels, ..., 5: pair_y) on `device`: the caller's
  // own where it is there already (no round trip through the host), else a copy.
  at::Tensor on(int k, const at::Device& device) const {
    const at::Tensor* checked[] = {&x_labels, &x_ptr, &y_labels, &y_ptr, &pair_x, &pair_y};
    return given[k].device() == device ? given[k].contiguous() : on_device(*checked[k], device);
  }

  SymbolIndices(const at::Tensor& x_labels_in, const at::Tensor& x_ptr_in, const at::Tensor& y_labels_in,
                const at::Tensor& y_ptr_in, const at::Tensor& pair_x_in, const at::Tensor& pair_y_in, int64_t rows,
                int64_t cols, double rel_tol)
      : given{x_labels_in, x_ptr_in, y_labels_in, y_ptr_in, pair_x_in, pair_y_in} {
    const at::Tensor xl = on_host(x_labels_in), yl = on_host(y_labels_in), xp = on_host(x_ptr_in),
                     yp = on_host(y_ptr_in), px = on_host(pair_x_in), py = on_host(pair_y_in);
    dp::check_label_indices(xl, xp, yl, yp, px, py);
    dp::check_rel_tol(rel_tol);
    x_labels = xl.contiguous();
    y_labels = yl.contiguous();
    x_ptr = xp.contiguous();
    y_ptr = yp.contiguous();
    pair_x = px.contiguous();
    pair_y = py.contiguous();
    dp::check_labels(x_labels, rows, "x_labels", "row");
    dp::check_labels(y_labels, cols, "y_labels", "column");
  }
  int64_t batch() const { return pair_x.size(0); }
};

// A batch's largest extents, and pair b's (m, n) on demand for the error
// messages (m(b), n(b), set by the batch's maker): no per-pair vectors, which
// took 150 ms of host time for 8M pairs.
struct Extents {
  int64_t max_m = 0, max_n = 0;
  std::function<int64_t(int64_t)> m, n;
  void add(int64_t mb, int64_t nb) {
    max_m = std::max(max_m, mb);
    max_n = std::max(max_n, nb);
  }
};

// Raises the CPU kernels' error for the first pair whose status is not ok;
// largest(b) gives pair b's largest absolute cost (for "too large"); `what`:
// "sequences" or "trees".
template <typename scalar_t, typename Largest>
void raise_statuses(const at::Tensor& status, const Extents& ext, const char* what, double rel_tol,
                    const Largest& largest) {
  const at::Tensor host = status.cpu();
  const int32_t* s = host.data_ptr<int32_t>();
  for (int64_t b = 0; b < host.size(0); ++b) {
    if (s[b] == kPairOk) continue;
    const int64_t m = ext.m(b), n = ext.n(b);
    BEDL_CHECK_VALUE(s[b] != kPairNotFinite, "costs of pair ", b, " contain NaN or inf");
    if (s[b] == kPairTooLarge) dp::check_pair_costs<scalar_t>(largest(b), m, n, b, "costs");
    BEDL_CHECK_VALUE(s[b] != kPairNoCoOptimal, what, " of ", m, " and ", n,
                     " symbols: no co-optimal alignment survives the tie test at rel_tol=", rel_tol,
                     " (rounding in sums of these costs tells equal-cost orders of edits apart); "
                     "use a larger rel_tol, e.g. the default (1e-9 for float64, 1e-5 for float32)");
    TORCH_CHECK(false, what, " kernel on CUDA: pair ", b, " ended with status ", s[b]);
  }
}

// The soft kernels' statuses as the CPU's soft kernels raise them: NaN, inf
// and the overflow rule for every pair first, then the soft range (the costs
// too large for the temperature).
template <typename scalar_t, typename Largest>
void raise_soft_statuses(const at::Tensor& status, const Extents& ext, double temperature, const Largest& largest) {
  const at::Tensor host = status.cpu();
  const int32_t* s = host.data_ptr<int32_t>();
  for (int64_t b = 0; b < host.size(0); ++b) {
    BEDL_CHECK_VALUE(s[b] != kPairNotFinite, "costs of pair ", b, " contain NaN or inf");
    if (s[b] == kPairTooLarge) dp::check_pair_costs<scalar_t>(largest(b), ext.m(b), ext.n(b), b, "costs");
  }
  for (int64_t b = 0; b < host.size(0); ++b) {
    if (s[b] == kPairSoftRange) soft::check_soft_range<scalar_t>(largest(b), temperature, ext.m(b), ext.n(b), b);
    TORCH_CHECK(s[b] == kPairOk, "soft kernel on CUDA: pair ", b, " ended with status ", s[b]);
  }
}

// The largest absolute cost of pair b's padded block (m, n): the region the
// kernels read (rows 0..m-1 with the deletion column, row m without the corner).
inline double padded_block_max_abs(const at::Tensor& costs, int64_t b, int64_t m, int64_t n) {
  const at::Tensor block = costs[b].abs();
  double largest = 0.0;
  if (m > 0) largest = block.narrow(0, 0, m).narrow(1, 0, n + 1).max().item<double>();
  if (n > 0) largest = std::max(largest, block[m].narrow(0, 0, n).max().item<double>());
  return largest;
}

// max_distance as float64 on the device: checked like the CPU kernels' (on either device).
inline at::Tensor thresholds_on(const std::optional<at::Tensor>& max_distance, int64_t batch, bool need_coopt,
                                const at::Device& device) {
  const at::Tensor& md = *max_distance;
  BEDL_CHECK_VALUE(!need_coopt, "max_distance needs need_coopt=False: P needs every cell of a pair");
  BEDL_CHECK_VALUE(md.layout() == at::kStrided, "max_distance must be a dense tensor");
  BEDL_CHECK_TYPE(md.scalar_type() == at::kFloat || md.scalar_type() == at::kDouble,
                  "max_distance must be float32 or float64, got ", md.scalar_type());
  BEDL_CHECK_VALUE(md.dim() == 1 && md.size(0) == batch, "max_distance must have one entry per pair (", batch,
                   "), got shape ", md.sizes());
  const at::Tensor t = md.to(device, at::kDouble).contiguous();
  BEDL_CHECK_VALUE(!at::isnan(t).any().item<bool>(), "max_distance has a NaN entry");
  return t;
}

// The distances above their thresholds set to inf, as the CPU kernels mark them.
inline at::Tensor mark_beyond(const at::Tensor& d, const at::Tensor& thresholds) {
  const at::Tensor inf = at::full({}, std::numeric_limits<double>::infinity(), d.options().dtype(at::kDouble));
  return at::where(d.to(at::kDouble) > thresholds, inf, d.to(at::kDouble)).to(d.scalar_type());
}

}  // namespace gpu
}  // namespace bedl
