// Entry points of the tree kernel (Zhang-Shasha distances and co-optimal
// matrices): checks, dispatch over dtypes, the batch loop. The recurrence is
// in common/forest.h, the passes in coopt.h (tables.h, stores.h, outside.h),
// the trees' index in index.h, cost layouts in costs.h, the AVX2 lanes in
// lanes*.
#include "../../edit_distance.h"
#include "coopt.h"
#include "costs.h"
#include "inputs.h"

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
  const PaddedTrees in(costs_in, x_sizes, x_ptr, y_sizes, y_ptr, pair_x, pair_y,
                       [&] { dp::check_rel_tol(rel_tol); });
  in.check_memory(need_coopt ? dp::kTreePBytes : dp::kTreeDistanceBytes, need_coopt ? "P" : "the distance");
  const at::Tensor& costs = in.costs;
  const int64_t batch = in.batch, rows = in.rows, cols = in.cols;
  at::Tensor dist = at::empty({batch}, costs.options());
  at::Tensor coopt = need_coopt ? at::zeros_like(costs) : at::empty({0}, costs.options());
  AT_DISPATCH_FLOATING_TYPES(costs.scalar_type(), "ted_cpu", [&] {
    const scalar_t* c = costs.data_ptr<scalar_t>();
    scalar_t* d = dist.data_ptr<scalar_t>();
    scalar_t* p = need_coopt ? coopt.data_ptr<scalar_t>() : nullptr;
    const std::vector<double> scales = in.scales<scalar_t>([&](int64_t b) { return in.sizes(b); });
    dp::for_each_pair<TedWorkspace>(batch, rows * cols, [&](int64_t b, TedWorkspace& ws) {
      const OrientedPair pair = in.oriented(b);
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

// The pairs `order` of st: their distances into d and, with need_coopt,
// their P, left in ws.p_acc for on_p(b, x, y, ws); lanes: st's TreeLanes
// (Use::kCoopt where need_coopt).
template <typename scalar_t, class OnP>
void run_symbol_trees(const SymbolTrees& st, const TreeLanes<scalar_t>& lanes, const std::vector<int64_t>& order,
                      double rel_tol, bool need_coopt, scalar_t* d, const OnP& on_p,
                      const dp::DistanceCutoffs* cutoff = nullptr) {
  const dp::SymbolInputs& in = st.in;
  const int64_t R = in.rows, C = in.cols;
  const std::vector<OrientedTree>& xs = st.trees.xs;
  const std::vector<OrientedTree>& ys = st.trees.ys();
  const int64_t* px_p = in.pair_x.data_ptr<int64_t>();
  const int64_t* py_p = in.pair_y.data_ptr<int64_t>();
  const int64_t* xptr_p = in.x_ptr.data_ptr<int64_t>();
  const int64_t* yptr_p = in.y_ptr.data_ptr<int64_t>();
  const scalar_t* t = in.table.data_ptr<scalar_t>();
  const int64_t* xl_p = in.x_labels.data_ptr<int64_t>();
  const int64_t* yl_p = in.y_labels.data_ptr<int64_t>();
  const bool nonnegative = lanes.nonnegative();  // (P's shorter tie test)
  auto one_pair = [&](int64_t b, TedWorkspace& ws) {
    const OrientedPair pair = orient(xs[px_p[b]], ys[py_p[b]]);
    const TreeIndex &x = pair.x, &y = pair.y;
    const int64_t* x_labels = xl_p + xptr_p[px_p[b]];
    const int64_t* y_labels = yl_p + yptr_p[py_p[b]];
    double scale = 0.0;
    if (need_coopt || !point_in_place(x, y, [&](int64_t p) { return t + x_labels[p] * C; },
                                      [&](int64_t q) { return y_labels[q]; }, t + (R - 1) * C, C - 1, ws)) {
      scale = need_coopt ? fill_symbols<true>(t, R, C, x, x_labels, y, y_labels, ws)
                         : fill_symbols<false>(t, R, C, x, x_labels, y, y_labels, ws);
      point_at_cost(x.n, y.n, ws);
    }
    const double* cut_below = nullptr;
    double cut_limit = 0.0;
    if (cutoff != nullptr && cutoff->applies(b)) {
      // cut_below[i]: x's nodes after i (postorder) deleted or replaced at their rows' least
      // costs, and every insertion that could lower the sum
      const scalar_t* gap_row = t + (R - 1) * C;
      std::vector<double>& below = ws.cut_below;
      below.resize(x.n + 1);
      double lowest_ins = 0.0;
      for (int64_t q = 0; q < y.n; ++q) lowest_ins += std::min(0.0, static_cast<double>(gap_row[y_labels[q]]));
      below[x.n] = lowest_ins;
      for (int64_t i = x.n; i >= 1; --i) below[i - 1] = below[i] + cutoff->row_min[x_labels[x.pre_of_post[i]]];
      cut_below = below.data();
      cut_limit = cutoff->limit(b, x.n, y.n);
    }
    d[b] = static_cast<scalar_t>(
        ted_solve(x, y, need_coopt, dp::Tie{rel_tol, scale, nonnegative}, ws, cut_below, cut_limit));
    if (need_coopt) on_p(b, x, y, ws);
  };
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
      on_p(g[l], pair.x, pair.y, pair_ws);
    });
  };
  const int64_t cells = st.rows * st.cols;
  if (order.empty() || for_each_lane_group(lanes, order, cells, group_fn, one_pair)) return;
  dp::for_each_pair<TedWorkspace>(static_cast<int64_t>(order.size()), cells,
                                  [&](int64_t k, TedWorkspace& ws) { one_pair(order[k], ws); });
}

// Pair b's P (ws.p_acc) by label pair into out: insertions, then x's rows,
// cell by cell; labels: st's label slots.
inline void list_tree_pair(const SymbolTrees& st, const dp::PairLabels& labels, int64_t b, const TreeIndex& x,
                           const TreeIndex& y, TedWorkspace& ws, dp::PairSumsOut& out) {
  const dp::SymbolInputs& in = st.in;
  const int64_t tx = in.pair_x.data_ptr<int64_t>()[b], ty = in.pair_y.data_ptr<int64_t>()[b];
  const int64_t* x_slot = labels.x.slot.data() + in.x_ptr.data_ptr<int64_t>()[tx];
  const int64_t* y_slot = labels.y.slot.data() + in.y_ptr.data_ptr<int64_t>()[ty];
  const int64_t m = x.n, n = y.n, w = n + 1;
  double* acc = ws.p_acc.data();
  dp::PairLabelSums& sums = ws.label_sums;
  sums.start(in.rows, in.cols, labels.x, tx, labels.y, ty);
  std::vector<int64_t>& col = ws.label_col;  // y's column slots in postorder
  col.resize(w);
  col[0] = sums.gap_col();
  for (int64_t j = 1; j <= n; ++j) col[j] = y_slot[y.pre_of_post[j]];
  double* sum = sums.sums();
  acc[0] = 0.0;  // (P's unused corner)
  dp::take_p_row(sum + sums.gap_row(), col.data() + 1, acc + 1, n);
  for (int64_t i = 1; i <= m; ++i) dp::take_p_row(sum + sums.x_row(x_slot[x.pre_of_post[i]]), col.data(), acc + i * w, w);
  ws.p_acc_zero = true;
  out.take(b, sums);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> ted_symbols_cpu(
    const at::Tensor& symbol_costs_in, const at::Tensor& x_labels, const at::Tensor& x_sizes,
    const at::Tensor& x_ptr, const at::Tensor& y_labels, const at::Tensor& y_sizes,
    const at::Tensor& y_ptr, const at::Tensor& pair_x, const at::Tensor& pair_y, bool need_coopt,
    double rel_tol, const std::optional<at::Tensor>& max_distance) {
  const SymbolTrees st(symbol_costs_in, x_labels, x_sizes, x_ptr, y_labels, y_sizes, y_ptr, pair_x, pair_y,
                       rel_tol);
  const std::optional<dp::DistanceCutoffs> cutoff = dp::DistanceCutoffs::of(max_distance, st.in, need_coopt);
  st.check_memory(need_coopt ? dp::kTreePBytes : dp::kTreeDistanceBytes, need_coopt ? "P" : "the distance");
  const at::Tensor& table = st.in.table;
  const int64_t batch = st.in.batch, rows = st.rows, cols = st.cols;
  at::Tensor dist = at::empty({batch}, table.options());
  at::Tensor coopt = need_coopt ? at::zeros({batch, rows, cols}, table.options())
                                : at::empty({0}, table.options());
  AT_DISPATCH_FLOATING_TYPES(table.scalar_type(), "ted_symbols_cpu", [&] {
    st.check_overflow<scalar_t>(st.in.max_abs);
    scalar_t* p = need_coopt ? coopt.data_ptr<scalar_t>() : nullptr;
    const SymbolBatch<scalar_t> lanes_in = st.lanes_input<scalar_t>();
    const TreeLanes<scalar_t> lanes(lanes_in, need_coopt ? TreeLanes<scalar_t>::Use::kCoopt
                                                         : TreeLanes<scalar_t>::Use::kDistances, rel_tol);
    run_symbol_trees(st, lanes, dp::all_pairs(st.in.batch), rel_tol, need_coopt, dist.data_ptr<scalar_t>(),
                     [&](int64_t b, const TreeIndex& x, const TreeIndex& y, TedWorkspace& ws) {
                       write_coopt(x, y, ws, p + b * rows * cols, cols);
                     },
                     cutoff ? &*cutoff : nullptr);
    if (cutoff) cutoff->mark_beyond(dist.data_ptr<scalar_t>());
  });
  return {dist, coopt};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> ted_symbols_sums_cpu(
    const at::Tensor& symbol_costs_in, const at::Tensor& x_labels, const at::Tensor& x_sizes,
    const at::Tensor& x_ptr, const at::Tensor& y_labels, const at::Tensor& y_sizes, const at::Tensor& y_ptr,
    const at::Tensor& pair_x, const at::Tensor& pair_y, double rel_tol, int64_t max_entries) {
  const SymbolTrees st(symbol_costs_in, x_labels, x_sizes, x_ptr, y_labels, y_sizes, y_ptr, pair_x, pair_y,
                       rel_tol);
  const dp::SymbolInputs& in = st.in;
  const std::vector<int64_t> order = dp::all_pairs(st.in.batch);
  const dp::PairLabels labels(in);
  dp::PairSumsOut out;
  const bool with_sums = out.plan(order, st.list_bounds(labels), max_entries);
  st.check_memory(with_sums ? dp::kTreePBytes : dp::kTreeDistanceBytes,
                  with_sums ? "P (for the gradient's lists)" : "the distance");
  at::Tensor dist = at::empty({in.batch}, in.table.options());
  AT_DISPATCH_FLOATING_TYPES(in.table.scalar_type(), "ted_symbols_sums_cpu", [&] {
    st.check_overflow<scalar_t>(in.max_abs);
    const SymbolBatch<scalar_t> lanes_in = st.lanes_input<scalar_t>();
    const TreeLanes<scalar_t> lanes(lanes_in, with_sums ? TreeLanes<scalar_t>::Use::kCoopt
                                                        : TreeLanes<scalar_t>::Use::kDistances, rel_tol);
    run_symbol_trees(st, lanes, order, rel_tol, with_sums, dist.data_ptr<scalar_t>(),
                     [&](int64_t b, const TreeIndex& x, const TreeIndex& y, TedWorkspace& ws) {
                       list_tree_pair(st, labels, b, x, y, ws, out);
                     });
  });
  return out.with_distances(dist, with_sums);
}

at::Tensor ted_symbols_grad_cpu(const at::Tensor& symbol_costs_in, const at::Tensor& x_labels,
                                const at::Tensor& x_sizes, const at::Tensor& x_ptr, const at::Tensor& y_labels,
                                const at::Tensor& y_sizes, const at::Tensor& y_ptr, const at::Tensor& pair_x,
                                const at::Tensor& pair_y, const at::Tensor& pair_weights, double rel_tol) {
  const SymbolTrees st(symbol_costs_in, x_labels, x_sizes, x_ptr, y_labels, y_sizes, y_ptr, pair_x, pair_y,
                       rel_tol);
  const dp::SymbolInputs& in = st.in;
  const at::Tensor weights = dp::check_pair_weights(pair_weights, in.table, in.batch);
  st.check_memory(dp::kTreePBytes, "the gradient (P)");
  at::Tensor grad;
  AT_DISPATCH_FLOATING_TYPES(in.table.scalar_type(), "ted_symbols_grad_cpu", [&] {
    st.check_overflow<scalar_t>(in.max_abs);
    const scalar_t* weight = weights.data_ptr<scalar_t>();
    const SymbolBatch<scalar_t> lanes_in = st.lanes_input<scalar_t>();
    const TreeLanes<scalar_t> lanes(lanes_in, TreeLanes<scalar_t>::Use::kCoopt, rel_tol, weight);
    std::vector<scalar_t> unused(in.batch);  // (the distances)
    const dp::PairLabels labels(in);
    grad = dp::weighted_lists_grad<scalar_t>(
        in.rows, in.cols, st.list_bounds(labels), weight, in.table.options(),
        [&](const std::vector<int64_t>& order, dp::PairSumsOut& out) {
          run_symbol_trees(st, lanes, order, rel_tol, true, unused.data(),
                           [&](int64_t b, const TreeIndex& x, const TreeIndex& y, TedWorkspace& ws) {
                             list_tree_pair(st, labels, b, x, y, ws, out);
                           });
        });
  });
  return grad;
}

}  // namespace bedl
