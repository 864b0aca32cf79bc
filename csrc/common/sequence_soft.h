// The soft (temperature) sequence edit distance and its expected alignment
// over one pair, backend-free, on raw buffers the caller sizes: the sequence
// recurrence's weights (common/sequence.h's two states, dp::enter) with every
// alternative admitted and each derivation weighted by exp(-cost / T)
// (common/weights.h); the outside sweep of common/sequence_passes.h with the
// soft policy accumulates P[event] = inside(source) * weight(event) *
// outside(target) / total. The CPU kernel (cpu/seq/soft.h) and the GPU's
// threads run it.
#pragma once

#include "sequence_passes.h"
#include "weights.h"

namespace bedl {
namespace soft {

// A pair's costs (sed::PaddedCostRows or sed::SymbolCostRows, 0-based) in the
// soft passes' kernel layout ((m+1)(n+1), row stride n + 1): [i][j] replaces
// x_i by y_j, [i][0] deletes x_i, [0][j] inserts y_j, 1-based.
template <class Costs>
BEDL_HD void kernel_layout_costs(const Costs& c, int64_t m, int64_t n, double* cost) {
  const int64_t w = n + 1;
  cost[0] = 0.0;
  for (int64_t j = 1; j <= n; ++j) cost[j] = c.ins(j - 1);
  for (int64_t i = 1; i <= m; ++i) {
    const auto row = c.row(i - 1);
    double* out = cost + i * w;
    out[0] = row.del();
    for (int64_t j = 1; j <= n; ++j) out[j] = row.rep(j - 1);
  }
}

// An expected alignment from the kernel layout acc back to the costs' padded
// layout p (row stride `stride`; column n deletions, row m insertions).
template <typename scalar_t>
BEDL_HD void store_sequence_p(const double* acc, int64_t m, int64_t n, scalar_t* p, int64_t stride) {
  const int64_t w = n + 1;
  for (int64_t j = 1; j <= n; ++j) p[m * stride + j - 1] = static_cast<scalar_t>(acc[j]);
  for (int64_t i = 1; i <= m; ++i) {
    scalar_t* row = p + (i - 1) * stride;
    row[n] = static_cast<scalar_t>(acc[i * w]);
    for (int64_t j = 1; j <= n; ++j) row[j - 1] = static_cast<scalar_t>(acc[i * w + j]);
  }
}

// One pair's arrays in one weight type: weight, in_del, in_other ((m+1)(n+1)
// each, the kernel layout: row 0 insertions, column 0 deletions), out_any and
// out_ins (two rows of n + 1 each, zero on entry and left so), p_acc ((m+1)(n+1)).
template <typename W>
struct SedSoftArrays {
  W *weight, *in_del, *in_other, *out_any, *out_ins;
  double* p_acc;
};

// sequence_outside's soft instance: every edge (column 0's are deletions, row
// 0's insertions), weighted; P into acc in the kernel layout, deletions summed
// per row first.
template <typename W>
struct SedSoftOutside {
  using Weight = W;
  W *any, *ins;
  const SedSoftArrays<W>& a;
  const ShareOf& share;
  double* acc;
  int64_t w;
  double row_deleted = 0.0;  // P of deleting x_i

  BEDL_HD W total(int64_t cell) const { return a.in_del[cell] + a.in_other[cell]; }
  BEDL_HD static uint8_t flags(int64_t i, int64_t j) {
    if (i == 0) return j == 0 ? 0 : static_cast<uint8_t>(sed::kIns);
    return j == 0 ? static_cast<uint8_t>(sed::kDel) : static_cast<uint8_t>(sed::kDel | sed::kIns | sed::kMatch);
  }
  BEDL_HD W after_deletion(const W& o, int64_t i) const { return o * a.weight[i * w]; }
  BEDL_HD W after_insertion(const W& o, int64_t j) const { return o * a.weight[j]; }
  BEDL_HD W after_replacement(const W& o, int64_t i, int64_t j) const { return o * a.weight[i * w + j]; }
  BEDL_HD void deleted(int64_t i, int64_t j, const W& o) {
    row_deleted += share(total((i - 1) * w + j) * a.weight[i * w] * o);
  }
  BEDL_HD void inserted(int64_t i, int64_t j, const W& o) {
    acc[j] += share(a.in_other[i * w + j - 1] * a.weight[j] * o);
  }
  BEDL_HD void replaced(int64_t i, int64_t j, const W& o) {
    acc[i * w + j] += share(total((i - 1) * w + j - 1) * a.weight[i * w + j] * o);
  }
  BEDL_HD void row_done(int64_t i) {
    if (i > 0) acc[i * w] += row_deleted;
    row_deleted = 0.0;
  }
};

// Inside (and with need_grad outside, P into a.p_acc) in one weight type for
// reduced costs `reduced` (the kernel layout); false where the total is out of
// that type's range.
template <typename W>
BEDL_HD bool sed_soft_pass(const double* reduced, int64_t m, int64_t n, double temperature, bool need_grad,
                           const SedSoftArrays<W>& a, double* log_total) {
  const int64_t w = n + 1, cells = (m + 1) * w;
  weights_of(reduced, cells, temperature, a.weight);
  const W* weight = a.weight;
  W* in_del = a.in_del;
  W* in_other = a.in_other;
  auto total = [&](int64_t cell) { return in_del[cell] + in_other[cell]; };

  in_del[0] = W::zero();
  in_other[0] = W::one();
  for (int64_t j = 1; j <= n; ++j) {
    in_del[j] = W::zero();
    in_other[j] = in_other[j - 1] * weight[j];
  }
  for (int64_t i = 1; i <= m; ++i) {
    const int64_t row = i * w;
    const W del = weight[row];
    in_del[row] = total(row - w) * del;
    in_other[row] = W::zero();
    W left_other = W::zero();
    for (int64_t j = 1; j <= n; ++j) {
      const int64_t cell = row + j;
      dp::enter(dp::AllAlternatives{}, total(cell - w) * del, left_other * weight[j],
                total(cell - w - 1) * weight[cell], in_del[cell], in_other[cell]);
      left_other = in_other[cell];
    }
  }
  const W all = total(cells - 1);
  if (!fast_range_holds(all, m + n)) return false;
  *log_total = log_of(all);
  if (!need_grad) return true;

  for (int64_t k = 0; k < 2 * w; ++k) a.out_any[k] = a.out_ins[k] = W::zero();
  for (int64_t k = 0; k < cells; ++k) a.p_acc[k] = 0.0;
  const ShareOf share(all);
  SedSoftOutside<W> out{a.out_any, a.out_ins, a, share, a.p_acc, w};
  sed::sequence_outside(m, n, out);
  return true;
}

}  // namespace soft
}  // namespace bedl
