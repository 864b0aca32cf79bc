// Entry points of the sequence kernel (distances and co-optimal matrices):
// checks, dispatch over dtypes, the batch loop, the symbol-table forms. The
// recurrence is in common/sequence.h, the passes in distance.h and coopt.h
// (outside.h), the AVX2 lanes in lanes*, distances under 0/1 costs as bit
// vectors in unit_bits.h.
#include "../../edit_distance.h"
#include "../pair_sums.h"
#include "coopt.h"
#include "distance.h"
#include "inputs.h"
#include "unit_bits.h"

#include <tuple>
#include <vector>

namespace bedl {

std::tuple<at::Tensor, at::Tensor> sed_cpu(const at::Tensor& costs_in, const at::Tensor& x_len,
                                           const at::Tensor& y_len, bool need_coopt,
                                           double rel_tol) {
  using namespace sed;
  const PaddedSequences in(costs_in, x_len, y_len, [&] { dp::check_rel_tol(rel_tol); });
  if (need_coopt) {
    const auto [b, m, n] = dp::largest_pair(in.batch, [&](int64_t k) { return in.sizes(k); });
    dp::check_table_memory(b, m, n, dp::kSequencePBytes, "P");
  }
  const at::Tensor& costs = in.costs;
  const int64_t batch = in.batch, rows = in.rows, cols = in.cols;
  const int64_t* xl_p = in.xl;
  const int64_t* yl_p = in.yl;
  at::Tensor dist = at::empty({batch}, costs.options());
  at::Tensor coopt = need_coopt ? at::zeros_like(costs) : at::empty({0}, costs.options());
  AT_DISPATCH_FLOATING_TYPES(costs.scalar_type(), "sed_cpu", [&] {
    const scalar_t* c = costs.data_ptr<scalar_t>();
    scalar_t* d = dist.data_ptr<scalar_t>();
    scalar_t* p = need_coopt ? coopt.data_ptr<scalar_t>() : nullptr;
    const std::vector<double> scales = in.scales<scalar_t>([&](int64_t b) { return in.sizes(b); });
    auto pair = [&](int64_t b, SedWorkspace& ws) {
      const scalar_t* cb = c + b * rows * cols;
      const int64_t m = xl_p[b], n = yl_p[b];
      d[b] = static_cast<scalar_t>(
          need_coopt ? sed_coopt(cb, m, n, cols, dp::Tie{rel_tol, scales[b]}, p + b * rows * cols, cols, ws)
                     : sed_distance(cb, m, n, cols, ws));
    };
    auto group = [&](int64_t b0, int count, SedWorkspace& ws) {
      if (!lanes_pay(count, xl_p + b0, yl_p + b0)) {
        for (int l = 0; l < count; ++l) pair(b0 + l, ws);
        return;
      }
      if (!need_coopt) {
        sed_distance_lanes(count, xl_p + b0, yl_p + b0, ws,
                           [&](int l) { ws.lanes.load(l, c + (b0 + l) * rows * cols, cols, 0.0); },
                           [&](int l, double distance) { d[b0 + l] = static_cast<scalar_t>(distance); });
        return;
      }
      sed_coopt_lanes(
          count, xl_p + b0, yl_p + b0, rel_tol, ws,
          [&](int l) { ws.lanes.load(l, c + (b0 + l) * rows * cols, cols, scales[b0 + l]); },
          [&](int l) {
            const int64_t b = b0 + l;
            return sed_solve_coopt(c + b * rows * cols, xl_p[b], yl_p[b], cols, dp::Tie{rel_tol, scales[b]}, ws);
          },
          [&](int l, double distance) {
            const int64_t b = b0 + l;
            d[b] = static_cast<scalar_t>(distance);
            write_p(ws, xl_p[b], yl_p[b], p + b * rows * cols, cols);
          });
    };
    for_each_pair_or_group(batch, rows * cols, dp::simd_avx2(), pair, group);
  });
  return {dist, coopt};
}

namespace {

using namespace sed;

// Up to four pairs of a symbol-table call, for the lanes: their extents and labels.
struct SymbolGroup {
  int64_t m[kLanes] = {}, n[kLanes] = {};
  const int64_t* x[kLanes] = {};
  const int64_t* y[kLanes] = {};

  SymbolGroup(const SymbolSequences& ss, const int64_t* pairs, int count) {
    for (int l = 0; l < count; ++l) {
      const SymbolPair sp = ss.pair(pairs[l]);
      x[l] = sp.x;
      y[l] = sp.y;
      m[l] = sp.m;
      n[l] = sp.n;
    }
  }
  // Lane l's pair into the lanes' costs (kScale: and its tie scale).
  template <bool kScale, typename scalar_t>
  void gather(const scalar_t* table, int64_t rows, int64_t cols, int l, SedWorkspace& ws) const {
    ws.lanes.gather<kScale>(l, table, rows, cols, x[l], y[l]);
  }
  // Lane l's pair gathered into ws.cost (row stride n + 1); returns its tie scale.
  template <typename scalar_t>
  double fill(const scalar_t* table, int64_t rows, int64_t cols, int l, SedWorkspace& ws) const {
    return fill_symbols<true>(table, rows, cols, x[l], m[l], y[l], n[l], ws);
  }
};

// The distance of pair sp alone, its costs gathered from the table a few rows
// at a time (memory linear in |y|); with `cutoff` (its thresholds), +inf where
// no completion can end at or below its threshold.
template <typename scalar_t>
double symbol_distance(const scalar_t* t, int64_t R, int64_t C, const SymbolPair& sp, int64_t b,
                       const dp::DistanceCutoffs* cutoff, SedWorkspace& ws) {
  SymbolRows<scalar_t, decltype(ws.cost)> rows(t, R, C, sp.x, sp.m, sp.y, sp.n, ws.cost, ws.row_slots);
  if (cutoff == nullptr || !cutoff->applies(b)) return sed_distance_rows(rows, sp.m, sp.n, ws);
  // below[i]: each of x_i .. x_{m-1} deleted or replaced at its row's least cost, and
  // every insertion that could lower the sum.
  ws.below.resize(sp.m + 1);
  double lowest_ins = 0.0;
  for (int64_t j = 0; j < sp.n; ++j) lowest_ins += std::min(0.0, static_cast<double>(t[(R - 1) * C + sp.y[j]]));
  ws.below[sp.m] = lowest_ins;
  for (int64_t i = sp.m - 1; i >= 0; --i) ws.below[i] = ws.below[i + 1] + cutoff->row_min[sp.x[i]];
  const RowCutoff cut{cutoff->limit(b, sp.m, sp.n), ws.below.data(), sp.n};
  return sed_distance_rows(rows, sp.m, sp.n, ws, cut);
}

// The pairs `order` of ss: their distances into d and, with need_coopt,
// their P, left in ws.p_acc for on_p(b, pair, ws). The lanes take four
// pairs of `order` at a time. cutoff (distances only): stop pairs beyond
// their thresholds (the caller marks every pair above its threshold). unit
// (distances only): the call's table where it qualifies for bit vectors.
template <typename scalar_t, class OnP>
void run_symbol_sequences(const SymbolSequences& ss, const std::vector<int64_t>& order, double rel_tol,
                          bool need_coopt, scalar_t* d, const OnP& on_p,
                          const dp::DistanceCutoffs* cutoff = nullptr, const UnitTable* unit = nullptr) {
  const int64_t R = ss.in.rows, C = ss.in.cols;
  const scalar_t* t = ss.in.table.data_ptr<scalar_t>();
  if (!need_coopt && unit != nullptr && unit->applies) {
    // 0/1 replacements and unit gaps: bit vectors, 64 cells a step (the same integers;
    // the scheduler's cells per pair scaled to match)
    dp::for_each_piece<UnitWorkspace>(
        static_cast<int64_t>(order.size()), unit_piece_cells(ss.rows - 1, ss.cols - 1),
        [&](int64_t begin, int64_t end, UnitWorkspace& ws) {
          unit_distances(
              *unit, R, C, begin, end,
              [&](int64_t k) {
                const SymbolPair sp = ss.pair(order[k]);
                return UnitPair{sp.x, sp.m, sp.y, sp.n};
              },
              [&](int64_t k, int64_t v) { d[order[k]] = static_cast<scalar_t>(v); }, ws);
        });
    return;
  }
  auto pair = [&](int64_t k, SedWorkspace& ws) {
    const int64_t b = order[k];
    const SymbolPair sp = ss.pair(b);
    const int64_t m = sp.m, n = sp.n;
    if (!need_coopt) {
      d[b] = static_cast<scalar_t>(symbol_distance(t, R, C, sp, b, cutoff, ws));
      return;
    }
    const double scale = fill_symbols<true>(t, R, C, sp.x, m, sp.y, n, ws);
    d[b] = static_cast<scalar_t>(sed_solve_coopt(ws.cost.data(), m, n, n + 1, dp::Tie{rel_tol, scale}, ws));
    on_p(b, sp, ws);
  };
  auto group = [&](int64_t k0, int count, SedWorkspace& ws) {
    const int64_t* pairs = order.data() + k0;
    const SymbolGroup grp(ss, pairs, count);
    if (!lanes_pay(count, grp.m, grp.n)) {
      for (int l = 0; l < count; ++l) pair(k0 + l, ws);
      return;
    }
    if (!need_coopt) {
      sed_distance_lanes(count, grp.m, grp.n, ws, [&](int l) { grp.gather<false>(t, R, C, l, ws); },
                         [&](int l, double distance) { d[pairs[l]] = static_cast<scalar_t>(distance); });
      return;
    }
    sed_coopt_lanes(
        count, grp.m, grp.n, rel_tol, ws, [&](int l) { grp.gather<true>(t, R, C, l, ws); },
        [&](int l) {
          const double scale = grp.fill(t, R, C, l, ws);
          return sed_solve_coopt(ws.cost.data(), grp.m[l], grp.n[l], grp.n[l] + 1, dp::Tie{rel_tol, scale}, ws);
        },
        [&](int l, double distance) {
          d[pairs[l]] = static_cast<scalar_t>(distance);
          on_p(pairs[l], ss.pair(pairs[l]), ws);
        });
  };
  for_each_pair_or_group(static_cast<int64_t>(order.size()), ss.rows * ss.cols, dp::simd_avx2(), pair, group);
}

// Pair b's P (ws.p_acc: row i < m is x[i], row m insertions; column n
// deletions) by label pair into out, cell by cell.
inline void list_sequence_pair(const SymbolSequences& ss, const dp::PairLabels& labels, int64_t b,
                               const SymbolPair& sp, SedWorkspace& ws, dp::PairSumsOut& out) {
  const int64_t tx = ss.pair_x[b], ty = ss.pair_y[b];
  const int64_t* x_slot = labels.x.slot.data() + ss.x_ptr[tx];
  const int64_t* y_slot = labels.y.slot.data() + ss.y_ptr[ty];
  const int64_t m = sp.m, n = sp.n, w = n + 1;
  double* acc = ws.p_acc.data();
  dp::PairLabelSums& sums = ws.label_sums;
  sums.start(ss.in.rows, ss.in.cols, labels.x, tx, labels.y, ty);
  std::vector<int64_t>& col = ws.label_col;
  col.assign(y_slot, y_slot + n);
  col.push_back(sums.gap_col());
  double* sum = sums.sums();
  for (int64_t i = 0; i < m; ++i) dp::take_p_row(sum + sums.x_row(x_slot[i]), col.data(), acc + i * w, w);
  dp::take_p_row(sum + sums.gap_row(), col.data(), acc + m * w, n);  // (no gap against gap)
  out.take(b, sums);
}

std::vector<int64_t> list_bounds(const SymbolSequences& ss, const dp::PairLabels& labels) {
  return labels.list_bounds(ss.in, [&](int64_t b) {
    const SymbolPair sp = ss.pair(b);
    return std::make_pair(sp.m, sp.n);
  });
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> sed_symbols_cpu(const at::Tensor& symbol_costs_in,
                                                   const at::Tensor& x_labels,
                                                   const at::Tensor& x_ptr,
                                                   const at::Tensor& y_labels,
                                                   const at::Tensor& y_ptr,
                                                   const at::Tensor& pair_x,
                                                   const at::Tensor& pair_y, bool need_coopt,
                                                   double rel_tol, const std::optional<at::Tensor>& max_distance) {
  const SymbolSequences ss(symbol_costs_in, x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y, rel_tol);
  const dp::SymbolInputs& in = ss.in;
  const int64_t batch = in.batch, rows = ss.rows, cols = ss.cols;
  const at::Tensor& table = in.table;
  const UnitTable unit = need_coopt ? UnitTable{} : UnitTable::of(in);
  const std::optional<dp::DistanceCutoffs> cutoff = dp::DistanceCutoffs::of(max_distance, in, need_coopt, !unit.applies);
  if (need_coopt) ss.check_memory("P");
  at::Tensor dist = at::empty({batch}, table.options());
  at::Tensor coopt = need_coopt ? at::zeros({batch, rows, cols}, table.options())
                                : at::empty({0}, table.options());
  AT_DISPATCH_FLOATING_TYPES(table.scalar_type(), "sed_symbols_cpu", [&] {
    ss.check_overflow<scalar_t>(in.max_abs);
    scalar_t* p = need_coopt ? coopt.data_ptr<scalar_t>() : nullptr;
    run_symbol_sequences(ss, dp::all_pairs(batch), rel_tol, need_coopt, dist.data_ptr<scalar_t>(),
                         [&](int64_t b, const SymbolPair& sp, SedWorkspace& ws) {
                           write_p(ws, sp.m, sp.n, p + b * rows * cols, cols);
                         },
                         cutoff ? &*cutoff : nullptr, &unit);
    if (cutoff) cutoff->mark_beyond(dist.data_ptr<scalar_t>());
  });
  return {dist, coopt};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> sed_symbols_sums_cpu(
    const at::Tensor& symbol_costs_in, const at::Tensor& x_labels, const at::Tensor& x_ptr,
    const at::Tensor& y_labels, const at::Tensor& y_ptr, const at::Tensor& pair_x, const at::Tensor& pair_y,
    double rel_tol, int64_t max_entries) {
  const SymbolSequences ss(symbol_costs_in, x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y, rel_tol);
  const dp::SymbolInputs& in = ss.in;
  const std::vector<int64_t> order = dp::all_pairs(in.batch);
  const dp::PairLabels labels(in);
  dp::PairSumsOut out;
  const bool with_sums = out.plan(order, list_bounds(ss, labels), max_entries);
  if (with_sums) ss.check_memory("P (for the gradient's lists)");
  at::Tensor dist = at::empty({in.batch}, in.table.options());
  const UnitTable unit = with_sums ? UnitTable{} : UnitTable::of(in);
  AT_DISPATCH_FLOATING_TYPES(in.table.scalar_type(), "sed_symbols_sums_cpu", [&] {
    ss.check_overflow<scalar_t>(in.max_abs);
    run_symbol_sequences(ss, order, rel_tol, with_sums, dist.data_ptr<scalar_t>(),
                         [&](int64_t b, const SymbolPair& sp, SedWorkspace& ws) {
                           list_sequence_pair(ss, labels, b, sp, ws, out);
                         },
                         nullptr, &unit);
  });
  return out.with_distances(dist, with_sums);
}

at::Tensor sed_symbols_grad_cpu(const at::Tensor& symbol_costs_in, const at::Tensor& x_labels,
                                const at::Tensor& x_ptr, const at::Tensor& y_labels, const at::Tensor& y_ptr,
                                const at::Tensor& pair_x, const at::Tensor& pair_y,
                                const at::Tensor& pair_weights, double rel_tol) {
  const SymbolSequences ss(symbol_costs_in, x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y, rel_tol);
  const dp::SymbolInputs& in = ss.in;
  const at::Tensor weights = dp::check_pair_weights(pair_weights, in.table, in.batch);
  ss.check_memory("the gradient (P)");
  at::Tensor grad;
  AT_DISPATCH_FLOATING_TYPES(in.table.scalar_type(), "sed_symbols_grad_cpu", [&] {
    ss.check_overflow<scalar_t>(in.max_abs);
    std::vector<scalar_t> unused(in.batch);  // (the distances)
    const dp::PairLabels labels(in);
    grad = dp::weighted_lists_grad<scalar_t>(
        in.rows, in.cols, list_bounds(ss, labels), weights.data_ptr<scalar_t>(), in.table.options(),
        [&](const std::vector<int64_t>& order, dp::PairSumsOut& out) {
          run_symbol_sequences(ss, order, rel_tol, true, unused.data(),
                               [&](int64_t b, const SymbolPair& sp, SedWorkspace& ws) {
                                 list_sequence_pair(ss, labels, b, sp, ws, out);
                               });
        });
  });
  return grad;
}

}  // namespace bedl
