// Soft (temperature) sequence edit distance and its expected alignment on
// the CPU: the sequence recurrence's weights (common/sequence.h, dp::enter)
// with every alternative admitted and each derivation weighted by
// exp(-cost / T) (soft_weights.h). Two inside weights per cell (entered by a
// deletion, entered otherwise) make alignments and derivations one-to-one;
// the outside sweep's soft instance (outside.h) accumulates
// P[event] = inside(source) * weight(event) * outside(target) / total.
#pragma once

#include "../../common/sequence.h"
#include "../soft_weights.h"
#include "outside.h"

#include <vector>

namespace bedl {
namespace soft {

template <typename Weight>
struct SedSoftBuffers {
  std::vector<Weight> weight;             // exp(-c' / T), the kernel layout of soft_weights.h
  std::vector<Weight> in_del, in_other;   // inside weights, (m+1)(n+1)
  std::vector<Weight> out_any, out_ins;   // outside weights, two rows each
};

struct SedSoftWorkspace {
  std::vector<double> cost;               // the pair's costs in the kernel layout
  std::vector<double> reduced, column_min;
  SedSoftBuffers<PlainWeight> fast;       // weights as doubles: the usual case
  SedSoftBuffers<WideWeight> wide;        // weights with a wide exponent: where doubles under- or overflow
  std::vector<double> p_acc;              // P in the kernel layout
};

// A pair's padded costs (row stride `stride`: rows < m replace or delete x_i,
// row m inserts) into the kernel layout: [i][j] replaces x_i by y_j, [i][0]
// deletes x_i, [0][j] inserts y_j, 1-based.
template <typename scalar_t>
void fill_sequence_costs(const scalar_t* c, int64_t m, int64_t n, int64_t stride, std::vector<double>& cost) {
  const int64_t w = n + 1;
  cost.resize((m + 1) * w);
  cost[0] = 0.0;
  for (int64_t j = 1; j <= n; ++j) cost[j] = static_cast<double>(c[m * stride + j - 1]);
  for (int64_t i = 1; i <= m; ++i) {
    const scalar_t* row = c + (i - 1) * stride;
    double* out = cost.data() + i * w;
    out[0] = static_cast<double>(row[n]);
    for (int64_t j = 1; j <= n; ++j) out[j] = static_cast<double>(row[j - 1]);
  }
}

// sequence_outside's soft instance: every edge (column 0's are deletions, row
// 0's insertions), weighted; P into acc in the kernel layout ([i][j] replaces
// x_i by y_j, [i][0] deletes x_i, [0][j] inserts y_j), deletions summed per
// row first.
template <typename W>
struct SoftOutside {
  using Weight = W;
  W *any, *ins;
  const SedSoftBuffers<W>& buf;
  const ShareOf& share;
  double* acc;
  int64_t w;
  double row_deleted = 0.0;  // P of deleting x_i

  W total(int64_t cell) const { return buf.in_del[cell] + buf.in_other[cell]; }
  static uint8_t flags(int64_t i, int64_t j) {
    if (i == 0) return j == 0 ? 0 : sed::kIns;
    return j == 0 ? sed::kDel : static_cast<uint8_t>(sed::kDel | sed::kIns | sed::kMatch);
  }
  W after_deletion(const W& o, int64_t i) const { return o * buf.weight[i * w]; }
  W after_insertion(const W& o, int64_t j) const { return o * buf.weight[j]; }
  W after_replacement(const W& o, int64_t i, int64_t j) const { return o * buf.weight[i * w + j]; }
  void deleted(int64_t i, int64_t j, const W& o) { row_deleted += share(total((i - 1) * w + j) * buf.weight[i * w] * o); }
  void inserted(int64_t i, int64_t j, const W& o) { acc[j] += share(buf.in_other[i * w + j - 1] * buf.weight[j] * o); }
  void replaced(int64_t i, int64_t j, const W& o) {
    acc[i * w + j] += share(total((i - 1) * w + j - 1) * buf.weight[i * w + j] * o);
  }
  void row_done(int64_t i) {
    if (i > 0) acc[i * w] += row_deleted;
    row_deleted = 0.0;
  }
};

// Inside (and with need_grad outside, P in ws.p_acc) in one weight type for
// the costs reduced in ws.reduced; false where the total is out of its range.
template <typename Weight>
bool sed_soft_pass(int64_t m, int64_t n, double temperature, bool need_grad, SedSoftWorkspace& ws,
                   SedSoftBuffers<Weight>& buf, double* log_total) {
  const int64_t w = n + 1, cells = (m + 1) * w;
  weights_of(ws.reduced, temperature, buf.weight);
  buf.in_del.resize(cells);
  buf.in_other.resize(cells);
  const Weight* weight = buf.weight.data();  // row 0: insertions, column 0: deletions
  Weight* in_del = buf.in_del.data();
  Weight* in_other = buf.in_other.data();
  auto total = [&](int64_t cell) { return in_del[cell] + in_other[cell]; };

  in_del[0] = Weight::zero();
  in_other[0] = Weight::one();
  for (int64_t j = 1; j <= n; ++j) {
    in_del[j] = Weight::zero();
    in_other[j] = in_other[j - 1] * weight[j];
  }
  for (int64_t i = 1; i <= m; ++i) {
    const int64_t row = i * w;
    const Weight del = weight[row];
    in_del[row] = total(row - w) * del;
    in_other[row] = Weight::zero();
    Weight left_other = Weight::zero();
    for (int64_t j = 1; j <= n; ++j) {
      const int64_t cell = row + j;
      dp::enter(dp::AllAlternatives{}, total(cell - w) * del, left_other * weight[j],
                total(cell - w - 1) * weight[cell], in_del[cell], in_other[cell]);
      left_other = in_other[cell];
    }
  }
  const Weight all = total(cells - 1);
  if (!fast_range_holds(all, m + n)) return false;
  *log_total = log_of(all);
  if (!need_grad) return true;

  buf.out_any.assign(2 * w, Weight::zero());
  buf.out_ins.assign(2 * w, Weight::zero());
  ws.p_acc.assign(cells, 0.0);
  const ShareOf share(all);
  SoftOutside<Weight> out{buf.out_any.data(), buf.out_ins.data(), buf, share, ws.p_acc.data(), w};
  sed::sequence_outside(m, n, out);
  return true;
}

// The soft distance of a pair whose costs are in ws.cost (and with need_grad
// P in ws.p_acc): weights as doubles unless they leave their range.
inline double sed_soft_solve(int64_t m, int64_t n, double temperature, bool need_grad, SedSoftWorkspace& ws) {
  const double shift = reduce_costs(ws.cost.data(), m, n, ws.reduced, ws.column_min);
  double log_total = 0.0;
  if (m + n > kFastNodes || !sed_soft_pass(m, n, temperature, need_grad, ws, ws.fast, &log_total)) {
    // Cannot fail: the cheapest alignment's weight is a positive WideWeight.
    const bool done = sed_soft_pass(m, n, temperature, need_grad, ws, ws.wide, &log_total);
    BEDL_CHECK(done, "internal error: no alignment was weighed for sequences of ", m, " and ", n, " symbols");
  }
  return shift - temperature * log_total;
}

}  // namespace soft
}  // namespace bedl
