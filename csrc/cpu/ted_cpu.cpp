// Entry points of the tree kernel (Zhang-Shasha distances and co-optimal
// matrices): checks, dispatch over dtypes, the batch loop. The algorithm is in
// ted_passes.h, the trees' index in tree_index.h, cost layouts in ted_costs.h,
// the AVX2 lanes in ted_lanes_avx2.cpp.
#include "../edit_distance.h"
#include "dp_common.h"
#include "ted_costs.h"
#include "ted_lanes_avx2.h"
#include "ted_passes.h"
#include "symbol_grad.h"
#include "tree_index.h"

#include <tuple>
#include <vector>

namespace bedl {

using namespace ted;

void set_simd_enabled(bool on) { dp::simd_switch().store(on); }
bool simd_enabled() { return dp::simd_avx2(); }

std::tuple<at::Tensor, at::Tensor> ted_cpu(const at::Tensor& costs_in, const at::Tensor& x_sizes,
                                           const at::Tensor& x_ptr, const at::Tensor& y_sizes,
                                           const at::Tensor& y_ptr, const at::Tensor& pair_x,
                                           const at::Tensor& pair_y, bool need_coopt,
                                           double rel_tol) {
  dp::check_costs(costs_in);
  const int64_t batch = costs_in.size(0);
  dp::check_index(x_sizes, "x_sizes", -1);
  dp::check_index(y_sizes, "y_sizes", -1);
  dp::check_index(x_ptr, "x_ptr", -1);
  dp::check_index(y_ptr, "y_ptr", -1);
  dp::check_index(pair_x, "pair_x", batch);
  dp::check_index(pair_y, "pair_y", batch);
  dp::check_rel_tol(rel_tol);
  const at::Tensor costs = costs_in.contiguous();
  const IndexedTrees trees = index_both(x_sizes, x_ptr, y_sizes, y_ptr);
  const std::vector<OrientedTree>& xs = trees.xs;
  const std::vector<OrientedTree>& ys = trees.ys();
  const at::Tensor px = pair_x.contiguous(), py = pair_y.contiguous();
  const int64_t* px_p = px.data_ptr<int64_t>();
  const int64_t* py_p = py.data_ptr<int64_t>();
  const int64_t rows = costs.size(1), cols = costs.size(2);
  check_pairs(xs, ys, px_p, py_p, batch);
  for (int64_t b = 0; b < batch; ++b) {
    TORCH_CHECK_VALUE(xs[px_p[b]].left.n + 1 <= rows && ys[py_p[b]].left.n + 1 <= cols, "pair ", b,
                " has trees of ", xs[px_p[b]].left.n, " and ", ys[py_p[b]].left.n,
                " nodes, which do not fit costs of shape ", costs.sizes());
  }
  at::Tensor dist = at::empty({batch}, costs.options());
  at::Tensor coopt = need_coopt ? at::zeros_like(costs) : at::empty({0}, costs.options());
  AT_DISPATCH_FLOATING_TYPES(costs.scalar_type(), "ted_cpu", [&] {
    const scalar_t* c = costs.data_ptr<scalar_t>();
    scalar_t* d = dist.data_ptr<scalar_t>();
    scalar_t* p = need_coopt ? coopt.data_ptr<scalar_t>() : nullptr;
    const std::vector<double> scales = dp::cost_scales(
        c, batch, rows, cols,
        [&](int64_t b) { return std::make_pair(xs[px_p[b]].left.n, ys[py_p[b]].left.n); });
    dp::for_each_pair<TedWorkspace>(batch, rows * cols, [&](int64_t b, TedWorkspace& ws) {
      const OrientedPair pair = orient(xs[px_p[b]], ys[py_p[b]]);
      const TreeIndex &x = pair.x, &y = pair.y;
      const int64_t off = b * rows * cols;
      const scalar_t* block = c + off;
      if (need_coopt || !point_in_place(x, y, [&](int64_t p) { return block + p * cols; },
                                        [](int64_t q) { return q; }, block + x.n * cols, y.n, ws)) {
        fill_padded(x, y, block, cols, ws);
        point_at_cost(x.n, y.n, ws);
      }
      d[b] = static_cast<scalar_t>(ted_solve(x, y, need_coopt, dp::Tie{rel_tol, scales[b]}, ws));
      if (need_coopt) write_coopt(x, y, ws, p + off, cols);
    });
  });
  return {dist, coopt};
}

namespace {

// Per thread, for the gradient's blocks of pairs: the lane groups of a block
// (pairs of nonzero weight that share x and orientation, up to four) and the
// P each lane pair leaves, kept until the block's pairs are summed in order.
struct TreeGradWorkspace {
  struct Kept {
    bool valid = false;
    std::vector<double> acc;
    std::vector<int64_t> y_symbol;
  };
  TedWorkspace ted;
  LaneWorkspace lanes;
  std::vector<std::vector<int64_t>> groups;
  std::vector<Kept> kept;  // by position in the block

  template <typename scalar_t>
  void plan(int64_t begin, int64_t end, const scalar_t* weight, const TreeLanes<scalar_t>& lanes_of) {
    kept.resize(end - begin);
    for (Kept& k : kept) k.valid = false;
    std::vector<int64_t> pairs;
    for (int64_t b = begin; b < end; ++b) {
      if (weight[b] != scalar_t(0)) pairs.push_back(b);
    }
    lanes_of.group(pairs, groups);
  }
  void keep(int64_t position, TedWorkspace& ws) {
    Kept& k = kept[position];
    k.valid = true;
    std::swap(k.acc, ws.p_acc);
    std::swap(k.y_symbol, ws.y_symbol);
  }
  const Kept* kept_of(int64_t position) const { return kept[position].valid ? &kept[position] : nullptr; }
};

// The checked inputs of the symbol-table tree kernels, their trees indexed,
// and the batch's extent.
struct SymbolTrees : dp::BatchExtent {
  dp::SymbolInputs in;
  IndexedTrees trees;

  SymbolTrees(const at::Tensor& symbol_costs, const at::Tensor& x_labels, const at::Tensor& x_sizes,
              const at::Tensor& x_ptr, const at::Tensor& y_labels, const at::Tensor& y_sizes,
              const at::Tensor& y_ptr, const at::Tensor& pair_x, const at::Tensor& pair_y, double rel_tol)
      : in(dp::check_symbol_inputs(symbol_costs, x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y, rel_tol)) {
    dp::check_index(x_sizes, "x_sizes", in.x_labels.size(0));
    dp::check_index(y_sizes, "y_sizes", in.y_labels.size(0));
    trees = index_both(x_sizes, x_ptr, y_sizes, y_ptr);
    const int64_t* px_p = in.pair_x.data_ptr<int64_t>();
    const int64_t* py_p = in.pair_y.data_ptr<int64_t>();
    check_pairs(trees.xs, trees.ys(), px_p, py_p, in.batch);
    for (int64_t b = 0; b < in.batch; ++b) {
      const int64_t m = trees.xs[px_p[b]].left.n, n = trees.ys()[py_p[b]].left.n;
      add(b, m, n);
    }
  }
};

}  // namespace

std::tuple<at::Tensor, at::Tensor> ted_symbols_cpu(
    const at::Tensor& symbol_costs_in, const at::Tensor& x_labels, const at::Tensor& x_sizes,
    const at::Tensor& x_ptr, const at::Tensor& y_labels, const at::Tensor& y_sizes,
    const at::Tensor& y_ptr, const at::Tensor& pair_x, const at::Tensor& pair_y, bool need_coopt,
    double rel_tol) {
  const SymbolTrees st(symbol_costs_in, x_labels, x_sizes, x_ptr, y_labels, y_sizes, y_ptr, pair_x, pair_y,
                       rel_tol);
  const dp::SymbolInputs& in = st.in;
  const int64_t S = in.symbols, batch = in.batch, rows = st.rows, cols = st.cols;
  const at::Tensor &table = in.table, &xl = in.x_labels, &yl = in.y_labels;
  const std::vector<OrientedTree>& xs = st.trees.xs;
  const std::vector<OrientedTree>& ys = st.trees.ys();
  const int64_t* px_p = in.pair_x.data_ptr<int64_t>();
  const int64_t* py_p = in.pair_y.data_ptr<int64_t>();
  const int64_t* xptr_p = in.x_ptr.data_ptr<int64_t>();
  const int64_t* yptr_p = in.y_ptr.data_ptr<int64_t>();
  at::Tensor dist = at::empty({batch}, table.options());
  at::Tensor coopt = need_coopt ? at::zeros({batch, rows, cols}, table.options())
                                : at::empty({0}, table.options());
  AT_DISPATCH_FLOATING_TYPES(table.scalar_type(), "ted_symbols_cpu", [&] {
    st.check_overflow<scalar_t>(in.max_abs);
    const scalar_t* t = table.data_ptr<scalar_t>();
    const int64_t* xl_p = xl.data_ptr<int64_t>();
    const int64_t* yl_p = yl.data_ptr<int64_t>();
    scalar_t* d = dist.data_ptr<scalar_t>();
    scalar_t* p = need_coopt ? coopt.data_ptr<scalar_t>() : nullptr;
    auto one_pair = [&](int64_t b, TedWorkspace& ws) {
      const OrientedPair pair = orient(xs[px_p[b]], ys[py_p[b]]);
      const TreeIndex &x = pair.x, &y = pair.y;
      const int64_t* x_labels = xl_p + xptr_p[px_p[b]];
      const int64_t* y_labels = yl_p + yptr_p[py_p[b]];
      double scale = 0.0;
      if (need_coopt || !point_in_place(x, y, [&](int64_t p) { return t + x_labels[p] * S; },
                                        [&](int64_t q) { return y_labels[q]; }, t + (S - 1) * S,
                                        S - 1, ws)) {
        scale = need_coopt ? fill_symbols<true>(t, S, x, x_labels, y, y_labels, ws)
                           : fill_symbols<false>(t, S, x, x_labels, y, y_labels, ws);
        point_at_cost(x.n, y.n, ws);
      }
      d[b] = static_cast<scalar_t>(ted_solve(x, y, need_coopt, dp::Tie{rel_tol, scale}, ws));
      if (need_coopt) write_coopt(x, y, ws, p + b * rows * cols, cols);
    };
    const SymbolBatch<scalar_t> lanes_in{&xs, &ys, px_p, py_p, batch, t, S, xl_p, xptr_p, yl_p, yptr_p};
    using Lanes = TreeLanes<scalar_t>;
    const Lanes lanes(lanes_in, need_coopt ? Lanes::Use::kCoopt : Lanes::Use::kDistances, rel_tol);
    auto group_fn = [&](const std::vector<int64_t>& g, LanesAndScalar& ws) {
      const int count = static_cast<int>(g.size());
      if (!need_coopt) {
        double out[kLanes];
        lanes.distances(g.data(), count, ws.lanes, out);
        for (int l = 0; l < count; ++l) d[g[l]] = static_cast<scalar_t>(out[l]);
        return;
      }
      lanes.coopt(g.data(), count, ws.lanes, ws.ted, [&](int l, bool ok, double distance, TedWorkspace& pair_ws) {
        if (!ok) return one_pair(g[l], pair_ws);
        const OrientedPair pair = orient(xs[px_p[g[l]]], ys[py_p[g[l]]]);
        d[g[l]] = static_cast<scalar_t>(distance);
        write_coopt(pair.x, pair.y, pair_ws, p + g[l] * rows * cols, cols);
      });
    };
    if (for_each_lane_group(lanes, batch, rows * cols, group_fn, one_pair)) return;
    dp::for_each_pair<TedWorkspace>(batch, rows * cols, one_pair);
  });
  return {dist, coopt};
}

at::Tensor ted_symbols_grad_cpu(const at::Tensor& symbol_costs_in, const at::Tensor& x_labels,
                                const at::Tensor& x_sizes, const at::Tensor& x_ptr, const at::Tensor& y_labels,
                                const at::Tensor& y_sizes, const at::Tensor& y_ptr, const at::Tensor& pair_x,
                                const at::Tensor& pair_y, const at::Tensor& pair_weights, double rel_tol) {
  const SymbolTrees st(symbol_costs_in, x_labels, x_sizes, x_ptr, y_labels, y_sizes, y_ptr, pair_x, pair_y,
                       rel_tol);
  const dp::SymbolInputs& in = st.in;
  const int64_t S = in.symbols, batch = in.batch, gap = S - 1;
  const at::Tensor weights = dp::check_pair_weights(pair_weights, in.table, batch);
  const std::vector<OrientedTree>& xs = st.trees.xs;
  const std::vector<OrientedTree>& ys = st.trees.ys();
  const int64_t* px_p = in.pair_x.data_ptr<int64_t>();
  const int64_t* py_p = in.pair_y.data_ptr<int64_t>();
  const int64_t* xptr_p = in.x_ptr.data_ptr<int64_t>();
  const int64_t* yptr_p = in.y_ptr.data_ptr<int64_t>();
  const int64_t* xl_p = in.x_labels.data_ptr<int64_t>();
  const int64_t* yl_p = in.y_labels.data_ptr<int64_t>();
  at::Tensor grad;
  AT_DISPATCH_FLOATING_TYPES(in.table.scalar_type(), "ted_symbols_grad_cpu", [&] {
    st.check_overflow<scalar_t>(in.max_abs);
    const scalar_t* t = in.table.data_ptr<scalar_t>();
    const scalar_t* pair_weight = weights.data_ptr<scalar_t>();
    // Pair b's P, as ted_symbols with need_coopt computes it (the same tie
    // scale and costs): into ws.p_acc, y's labels into ws.y_symbol.
    auto solve_pair = [&](int64_t b, TedWorkspace& ws) {
      const OrientedPair pair = orient(xs[px_p[b]], ys[py_p[b]]);
      const int64_t* x_labels = xl_p + xptr_p[px_p[b]];
      const int64_t* y_labels = yl_p + yptr_p[py_p[b]];
      const double scale = fill_symbols<true>(t, S, pair.x, x_labels, pair.y, y_labels, ws);
      point_at_cost(pair.x.n, pair.y.n, ws);
      ted_solve(pair.x, pair.y, true, dp::Tie{rel_tol, scale}, ws);
    };
    // weight * P of pair b, from its accumulator `acc` and y's labels in postorder.
    auto add_sums = [&](int64_t b, const double* acc, const int64_t* y_symbol, dp::LabelSums& sums) {
      const double weight = static_cast<double>(pair_weight[b]);
      const OrientedPair pair = orient(xs[px_p[b]], ys[py_p[b]]);
      const TreeIndex &x = pair.x, &y = pair.y;
      const int64_t* x_labels = xl_p + xptr_p[px_p[b]];
      const int64_t m = x.n, n = y.n, w = n + 1;
      for (int64_t j = 1; j <= n; ++j) {
        if (acc[j] != 0.0) sums.add(gap * S + y_symbol[j], weight * acc[j]);
      }
      for (int64_t i = 1; i <= m; ++i) {
        const int64_t row = x_labels[x.pre_of_post[i]] * S;
        const double* a = acc + i * w;
        if (a[0] != 0.0) sums.add(row + gap, weight * a[0]);
        for (int64_t j = 1; j <= n; ++j) {
          if (a[j] != 0.0) sums.add(row + y_symbol[j], weight * a[j]);
        }
      }
    };
    const SymbolBatch<scalar_t> batch_in{&xs, &ys, px_p, py_p, batch, t, S, xl_p, xptr_p, yl_p, yptr_p};
    const TreeLanes<scalar_t> lanes(batch_in, TreeLanes<scalar_t>::Use::kCoopt, rel_tol, pair_weight);
    // A block's pairs that share x go through the lanes first (their P kept
    // per pair); then all its pairs are summed in order, the others solved
    // as they come: the same sums in the same order as the scalar kernel's.
    grad = dp::weighted_label_sums_by_block<scalar_t, TreeGradWorkspace>(
        S, batch, st.rows * st.cols, in.table.options(),
        [&](int64_t begin, int64_t end, dp::GradWorkspace<TreeGradWorkspace>& gws) {
          TreeGradWorkspace& g = gws.pair;
          g.plan(begin, end, pair_weight, lanes);
          for (const auto& group : g.groups) {
            lanes.coopt(group.data(), static_cast<int>(group.size()), g.lanes, g.ted,
                        [&](int l, bool ok, double, TedWorkspace& ws) {
                          if (ok) g.keep(group[l] - begin, ws);
                        });
          }
          for (int64_t b = begin; b < end; ++b) {
            if (pair_weight[b] == scalar_t(0)) continue;
            const TreeGradWorkspace::Kept* kept = g.kept_of(b - begin);
            if (kept != nullptr) {
              add_sums(b, kept->acc.data(), kept->y_symbol.data(), gws.sums);
            } else {
              solve_pair(b, g.ted);
              add_sums(b, g.ted.p_acc.data(), g.ted.y_symbol.data(), gws.sums);
            }
          }
        });
  });
  return grad;
}

}  // namespace bedl
