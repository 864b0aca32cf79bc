// Entry points of the tree kernels on CUDA (ted, ted_symbols): the CPU
// kernels' checks and tree indexing on the host, the trees as flat arrays
// (cpu/tree/flat.h) on the costs' GPU, the kernels on torch's current stream
// (tree/kernels.h), the per-pair statuses raised as the CPU kernels' errors.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <tuple>

#include "../cpu/inputs.h"
#include "../cpu/tree/flat.h"
#include "../cpu/tree/index.h"
#include "../cpu/tree/inputs.h"
#include "../edit_distance.h"
#include "edit_distance_cuda.h"
#include "launch.h"
#include "tree/kernels.h"
#include "tree/lanes_plan.h"

namespace bedl {
namespace {

// The flat trees of a batch on `device`, with the views the kernels read.
struct DeviceTrees {
  ted::FlatTreePairs host;
  ted::FlatSide x, y;
  at::Tensor x_entry, y_entry;

  DeviceTrees(const ted::IndexedTrees& trees, const at::Tensor& px, const at::Tensor& py, const at::Device& device)
      : host(ted::flat_tree_pairs(trees, px.data_ptr<int64_t>(), py.data_ptr<int64_t>(), px.size(0))) {
    x = to(host.x, device);
    y = trees.same ? x : to(host.y, device);
    x_entry = gpu::on_device(host.x_entry, device);
    y_entry = gpu::on_device(host.y_entry, device);
  }
  gpu::TreePairs pairs() const {
    return {view(x), view(y), x_entry.data_ptr<int64_t>(), y_entry.data_ptr<int64_t>()};
  }
  // The same trees on the host (the lane groups' plan reads them there).
  gpu::TreePairs host_pairs() const {
    return {view(host.x), view(host.y), host.x_entry.data_ptr<int64_t>(), host.y_entry.data_ptr<int64_t>()};
  }
  int64_t x_entries() const { return host.x.key_ptr.size(0) - 1; }
  int64_t y_entries() const { return host.y.key_ptr.size(0) - 1; }

 private:
  static ted::FlatSide to(const ted::FlatSide& s, const at::Device& device) {
    return {gpu::on_device(s.pre_of_post, device), gpu::on_device(s.leftmost, device),
            gpu::on_device(s.node_ptr, device),    gpu::on_device(s.keyroots, device),
            gpu::on_device(s.key_ptr, device),     gpu::on_device(s.path_index, device),
            gpu::on_device(s.path_begin, device),  gpu::on_device(s.path_nodes, device)};
  }
  static gpu::FlatTrees view(const ted::FlatSide& s) {
    return {s.pre_of_post.data_ptr<int64_t>(), s.leftmost.data_ptr<int64_t>(),   s.node_ptr.data_ptr<int64_t>(),
            s.keyroots.data_ptr<int64_t>(),    s.key_ptr.data_ptr<int64_t>(),    s.path_index.data_ptr<int64_t>(),
            s.path_begin.data_ptr<int64_t>(),  s.path_nodes.data_ptr<int64_t>()};
  }
};

// The pairs' largest node counts, and each pair's (m, n) on demand; with
// `extent` also the symbol kernels' batch extent, in the same pass.
gpu::Extents tree_extents(const ted::IndexedTrees& trees, const at::Tensor& px, const at::Tensor& py,
                          dp::BatchExtent* extent = nullptr) {
  const auto node_counts = [](const auto& side) {
    std::vector<int64_t> out(side.size());
    for (size_t t = 0; t < side.size(); ++t) out[t] = side[t].left.n;
    return out;
  };
  const std::vector<int64_t> xn = node_counts(trees.xs), yn = node_counts(trees.ys());
  const int64_t* pxp = px.data_ptr<int64_t>();
  const int64_t* pyp = py.data_ptr<int64_t>();
  gpu::Extents ext;
  for (int64_t b = 0; b < px.size(0); ++b) {
    const int64_t m = xn[pxp[b]], n = yn[pyp[b]];
    ext.add(m, n);
    if (extent != nullptr) extent->add(b, m, n);
  }
  ext.m = [xn, px, at = pxp](int64_t b) { return xn[at[b]]; };
  ext.n = [yn, py, at = pyp](int64_t b) { return yn[at[b]]; };
  return ext;
}

// The per-pair kernel's distances of order[0 .. count) (nullptr: every pair).
template <typename scalar_t, class Pairs>
void run_tree_distances(const Pairs& pairs, const int64_t* order, int64_t count, const gpu::Extents& ext,
                        at::Tensor& d, at::Tensor& status) {
  const int64_t per = gpu::tree_distance_workspace(ext.max_m, ext.max_n);
  const int64_t threads = gpu::launch_threads(count, per * 8);
  const at::Tensor ws = at::empty({threads * per}, d.options().dtype(at::kDouble));
  C10_CUDA_CHECK(gpu::launch_tree_distances(pairs, order, count, threads, ws.data_ptr<double>(), ext.max_m,
                                            ext.max_n, d.data_ptr<scalar_t>(), status.data_ptr<int32_t>(),
                                            at::cuda::getCurrentCUDAStream()));
}

// Whether symbol-table distances run in lane groups: unless
// BEDL_TORCH_CUDA_TREE_LANES=0 (every pair on the per-pair kernel, to compare them).
bool tree_lanes_on() {
  const char* v = std::getenv("BEDL_TORCH_CUDA_TREE_LANES");
  return v == nullptr || std::string(v) != "0";
}

// A host vector of int64 on `device`.
at::Tensor to_device(const std::vector<int64_t>& v, const at::Device& device) {
  at::Tensor host = at::empty({static_cast<int64_t>(v.size())}, at::kLong);
  std::copy(v.begin(), v.end(), host.data_ptr<int64_t>());
  return host.to(device);
}

// Symbol-table distances: the pairs that fit in lane groups there
// (cuda/tree/lanes_plan.h, one launch per size of the groups' arrays), the
// others on the per-pair kernel.
template <typename scalar_t>
void run_symbol_tree_distances(const gpu::SymbolTreePairs<scalar_t>& pairs, const DeviceTrees& flat,
                               const gpu::Extents& ext, at::Tensor& d, at::Tensor& status) {
  const int64_t batch = d.size(0);
  if (!tree_lanes_on()) return run_tree_distances<scalar_t>(pairs, nullptr, batch, ext, d, status);
  const gpu::TreePairs host = flat.host_pairs();
  const gpu::TreeLanePlan plan = gpu::plan_tree_lanes(host.xs, host.ys, flat.x_entries(), flat.y_entries(),
                                                      host.x_entry, host.y_entry, batch);
  const at::Device device = d.device();
  const at::Tensor begin = to_device(plan.group_begin, device), members = to_device(plan.group_pairs, device),
                   width = to_device(plan.group_width, device), leaves = to_device(plan.group_leaves, device);
  const at::Tensor wide_ptr = to_device(plan.wide_ptr, device), col_node = to_device(plan.col_node, device),
                   col_jump = to_device(plan.col_jump, device), col_def = to_device(plan.col_def, device),
                   leaf_ptr = to_device(plan.leaf_ptr, device), leaf_node = to_device(plan.leaf_node, device);
  const gpu::WideTrees wide{wide_ptr.data_ptr<int64_t>(), col_node.data_ptr<int64_t>(), col_jump.data_ptr<int64_t>(),
                            col_def.data_ptr<int64_t>(),  leaf_ptr.data_ptr<int64_t>(), leaf_node.data_ptr<int64_t>()};
  const gpu::LaneGroups groups{begin.data_ptr<int64_t>(), members.data_ptr<int64_t>(), width.data_ptr<int64_t>(),
                               leaves.data_ptr<int64_t>()};
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  for (size_t t = 0; t + 1 < plan.tier_begin.size(); ++t) {
    const int64_t first = plan.tier_begin[t], count = plan.tier_begin[t + 1] - first, bytes = plan.tier_bytes[t];
    const int64_t warps = gpu::launch_warps(count, bytes);
    const at::Tensor ws = at::empty({warps * bytes}, d.options().dtype(at::kByte));
    C10_CUDA_CHECK(gpu::launch_tree_lanes(pairs, wide, groups, first, count, warps, static_cast<char*>(ws.data_ptr()),
                                          bytes, d.data_ptr<scalar_t>(), status.data_ptr<int32_t>(), stream));
  }
  if (plan.singles.empty()) return;
  const at::Tensor singles = to_device(plan.singles, device);
  run_tree_distances<scalar_t>(pairs, singles.data_ptr<int64_t>(), singles.size(0), ext, d, status);
}

// The distances (and with need_coopt P into p, zero on entry) of `pairs`;
// a status per pair into status. Counts as doubles first; pairs whose counts
// overflow them again with exponents.
template <typename scalar_t, class Pairs>
void run_trees(const Pairs& pairs, const gpu::Extents& ext, bool need_coopt, double rel_tol, at::Tensor& d,
               at::Tensor& p, at::Tensor& status) {
  const int64_t batch = d.size(0);
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (!need_coopt) {
    run_tree_distances<scalar_t>(pairs, nullptr, batch, ext, d, status);
    return;
  }
  const at::TensorOptions bytes = d.options().dtype(at::kByte);
  const int64_t rows = p.size(1), cols = p.size(2);
  const int64_t fast = gpu::tree_coopt_workspace_bytes<dp::FastCount>(ext.max_m, ext.max_n);
  int64_t threads = gpu::launch_threads(batch, fast);
  at::Tensor ws = at::empty({threads * fast}, bytes);
  C10_CUDA_CHECK(gpu::launch_tree_coopt<dp::FastCount>(
      pairs, nullptr, batch, threads, static_cast<char*>(ws.data_ptr()), ext.max_m, ext.max_n, rel_tol,
      d.data_ptr<scalar_t>(), p.data_ptr<scalar_t>(), rows, cols, status.data_ptr<int32_t>(), stream));
  // Pairs whose counts overflowed doubles (massive ties in large trees): rare.
  const at::Tensor again = at::nonzero(status == gpu::kPairCountsOverflow).reshape({-1}).contiguous();
  const int64_t count = again.size(0);
  if (count == 0) return;
  ws = at::Tensor();
  const int64_t exact = gpu::tree_coopt_workspace_bytes<dp::Count>(ext.max_m, ext.max_n);
  threads = gpu::launch_threads(count, exact);
  ws = at::empty({threads * exact}, bytes);
  C10_CUDA_CHECK(gpu::launch_tree_coopt<dp::Count>(
      pairs, again.data_ptr<int64_t>(), count, threads, static_cast<char*>(ws.data_ptr()), ext.max_m, ext.max_n,
      rel_tol, d.data_ptr<scalar_t>(), p.data_ptr<scalar_t>(), rows, cols, status.data_ptr<int32_t>(), stream));
}

// A padded batch of tree pairs on CUDA, checked as the CPU kernels check it
// (check_param: the operator's own parameter, after the index tensors): the
// costs, the indexed trees, the pairs, their extents and flat trees on the GPU.
struct PaddedTreeBatch {
  at::Tensor costs, px, py;
  int64_t batch, rows, cols;
  ted::IndexedTrees trees;
  gpu::Extents ext;
  std::unique_ptr<DeviceTrees> flat;

  template <class CheckParam>
  PaddedTreeBatch(const at::Tensor& costs_in, const at::Tensor& x_sizes_in, const at::Tensor& x_ptr_in,
                  const at::Tensor& y_sizes_in, const at::Tensor& y_ptr_in, const at::Tensor& pair_x_in,
                  const at::Tensor& pair_y_in, const CheckParam& check_param) {
    gpu::check_cuda_costs(costs_in, "costs", 3, "(batch, max nodes of x + 1, max nodes of y + 1)");
    const at::Tensor x_sizes = gpu::on_host(x_sizes_in), x_ptr = gpu::on_host(x_ptr_in);
    const at::Tensor y_sizes = gpu::on_host(y_sizes_in), y_ptr = gpu::on_host(y_ptr_in);
    px = gpu::on_host(pair_x_in);
    py = gpu::on_host(pair_y_in);
    costs = costs_in.contiguous();
    batch = costs.size(0);
    rows = costs.size(1);
    cols = costs.size(2);
    trees = ted::check_padded_tree_pairs(costs, x_sizes, x_ptr, y_sizes, y_ptr, px, py, check_param);
    ext = tree_extents(trees, px, py);
    flat = std::make_unique<DeviceTrees>(trees, px, py, costs.device());
  }
  template <typename scalar_t>
  gpu::PaddedTreePairs<scalar_t> pairs() const {
    gpu::PaddedTreePairs<scalar_t> out;
    static_cast<gpu::TreePairs&>(out) = flat->pairs();
    out.costs = costs.data_ptr<scalar_t>();
    out.rows = rows;
    out.cols = cols;
    return out;
  }
};

}  // namespace

std::tuple<at::Tensor, at::Tensor> ted_cuda(const at::Tensor& costs_in, const at::Tensor& x_sizes_in,
                                            const at::Tensor& x_ptr_in, const at::Tensor& y_sizes_in,
                                            const at::Tensor& y_ptr_in, const at::Tensor& pair_x_in,
                                            const at::Tensor& pair_y_in, bool need_coopt, double rel_tol) {
  const PaddedTreeBatch in(costs_in, x_sizes_in, x_ptr_in, y_sizes_in, y_ptr_in, pair_x_in, pair_y_in,
                           [&] { dp::check_rel_tol(rel_tol); });
  const c10::cuda::CUDAGuard guard(in.costs.device());
  const at::Tensor& costs = in.costs;
  const gpu::Extents& ext = in.ext;
  at::Tensor d = at::empty({in.batch}, costs.options());
  at::Tensor p = need_coopt ? at::zeros_like(costs) : at::empty({0}, costs.options());
  at::Tensor status = at::empty({in.batch}, costs.options().dtype(at::kInt));
  AT_DISPATCH_FLOATING_TYPES(costs.scalar_type(), "ted_cuda", [&] {
    run_trees<scalar_t>(in.pairs<scalar_t>(), ext, need_coopt, rel_tol, d, p, status);
    gpu::raise_statuses<scalar_t>(status, ext, "trees", rel_tol, [&](int64_t b) {
      return gpu::padded_block_max_abs(costs, b, ext.m(b), ext.n(b));
    });
  });
  return {d, p};
}

std::tuple<at::Tensor, at::Tensor> ted_symbols_cuda(const at::Tensor& table_in, const at::Tensor& x_labels_in,
                                                    const at::Tensor& x_sizes_in, const at::Tensor& x_ptr_in,
                                                    const at::Tensor& y_labels_in, const at::Tensor& y_sizes_in,
                                                    const at::Tensor& y_ptr_in, const at::Tensor& pair_x_in,
                                                    const at::Tensor& pair_y_in, bool need_coopt, double rel_tol,
                                                    const std::optional<at::Tensor>& max_distance) {
  gpu::check_cuda_symbol_table(table_in);
  const c10::cuda::CUDAGuard guard(table_in.device());
  const at::Device device = table_in.device();
  const at::Tensor x_sizes = gpu::on_host(x_sizes_in), y_sizes = gpu::on_host(y_sizes_in);
  const at::Tensor table = table_in.contiguous();
  const int64_t rows = table.size(0), cols = table.size(1);
  const gpu::SymbolIndices in(x_labels_in, x_ptr_in, y_labels_in, y_ptr_in, pair_x_in, pair_y_in, rows, cols,
                              rel_tol);
  dp::check_index(x_sizes, "x_sizes", in.x_labels.size(0));
  dp::check_index(y_sizes, "y_sizes", in.y_labels.size(0));
  const ted::IndexedTrees trees = ted::index_both(x_sizes, in.x_ptr, y_sizes, in.y_ptr);
  const at::Tensor &px = in.pair_x, &py = in.pair_y;
  const int64_t batch = in.batch();
  ted::check_pairs(trees.xs, trees.ys(), px.data_ptr<int64_t>(), py.data_ptr<int64_t>(), batch);
  dp::BatchExtent extent;
  const gpu::Extents ext = tree_extents(trees, px, py, &extent);
  const double max_abs = gpu::symbol_table_max_abs(table);
  const std::optional<at::Tensor> thresholds =
      max_distance.has_value() ? std::optional<at::Tensor>(gpu::thresholds_on(max_distance, batch, need_coopt, device))
                               : std::nullopt;
  const DeviceTrees flat(trees, px, py, device);
  const at::Tensor xl_d = in.on(0, device), xp_d = in.on(1, device), yl_d = in.on(2, device), yp_d = in.on(3, device);
  at::Tensor d = at::empty({batch}, table.options());
  at::Tensor p = need_coopt ? at::zeros({batch, ext.max_m + 1, ext.max_n + 1}, table.options())
                            : at::empty({0}, table.options());
  at::Tensor status = at::empty({batch}, table.options().dtype(at::kInt));
  AT_DISPATCH_FLOATING_TYPES(table.scalar_type(), "ted_symbols_cuda", [&] {
    extent.check_overflow<scalar_t>(max_abs);
    gpu::SymbolTreePairs<scalar_t> pairs;
    static_cast<gpu::TreePairs&>(pairs) = flat.pairs();
    pairs.table = table.data_ptr<scalar_t>();
    pairs.rows = rows;
    pairs.cols = cols;
    pairs.x_labels = xl_d.data_ptr<int64_t>();
    pairs.x_ptr = xp_d.data_ptr<int64_t>();
    pairs.y_labels = yl_d.data_ptr<int64_t>();
    pairs.y_ptr = yp_d.data_ptr<int64_t>();
    if (need_coopt) {
      run_trees<scalar_t>(pairs, ext, true, rel_tol, d, p, status);
    } else {
      run_symbol_tree_distances<scalar_t>(pairs, flat, ext, d, status);
    }
    // (The table passed the checks above; with P a pair can end without a co-optimal mapping.)
    if (need_coopt) gpu::raise_statuses<scalar_t>(status, ext, "trees", rel_tol, [&](int64_t) { return max_abs; });
  });
  if (thresholds) d = gpu::mark_beyond(d, *thresholds);
  return {d, p};
}

std::tuple<at::Tensor, at::Tensor> ted_soft_cuda(const at::Tensor& costs_in, const at::Tensor& x_sizes_in,
                                                 const at::Tensor& x_ptr_in, const at::Tensor& y_sizes_in,
                                                 const at::Tensor& y_ptr_in, const at::Tensor& pair_x_in,
                                                 const at::Tensor& pair_y_in, double temperature, bool need_grad) {
  const PaddedTreeBatch in(costs_in, x_sizes_in, x_ptr_in, y_sizes_in, y_ptr_in, pair_x_in, pair_y_in,
                           [&] { soft::check_temperature(temperature); });
  const c10::cuda::CUDAGuard guard(in.costs.device());
  const at::Tensor& costs = in.costs;
  const gpu::Extents& ext = in.ext;
  at::Tensor d = at::empty({in.batch}, costs.options());
  at::Tensor p = need_grad ? at::zeros_like(costs) : at::empty({0}, costs.options());
  at::Tensor status = at::empty({in.batch}, costs.options().dtype(at::kInt));
  const int64_t per = gpu::tree_soft_workspace_bytes(ext.max_m, ext.max_n);
  const int64_t threads = gpu::launch_threads(in.batch, per);
  const at::Tensor ws = at::empty({threads * per}, costs.options().dtype(at::kByte));
  AT_DISPATCH_FLOATING_TYPES(costs.scalar_type(), "ted_soft_cuda", [&] {
    C10_CUDA_CHECK(gpu::launch_tree_soft(in.pairs<scalar_t>(), in.batch, threads, static_cast<char*>(ws.data_ptr()),
                                         ext.max_m, ext.max_n, temperature, need_grad, d.data_ptr<scalar_t>(),
                                         need_grad ? p.data_ptr<scalar_t>() : nullptr, status.data_ptr<int32_t>(),
                                         at::cuda::getCurrentCUDAStream()));
    gpu::raise_soft_statuses<scalar_t>(status, ext, temperature, [&](int64_t b) {
      return gpu::padded_block_max_abs(costs, b, ext.m(b), ext.n(b));
    });
  });
  return {d, p};
}

}  // namespace bedl
