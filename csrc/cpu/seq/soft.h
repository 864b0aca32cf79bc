// Soft (temperature) sequence edit distance and its expected alignment on
// the CPU: common/sequence_soft.h's passes on the workspace's vectors, weights
// as doubles unless they leave their range (soft_weights.h).
#pragma once

#include "../../common/sequence_soft.h"
#include "../soft_weights.h"

#include <vector>

namespace bedl {
namespace soft {

template <typename Weight>
struct SedSoftBuffers {
  std::vector<Weight> weight;             // exp(-c' / T), the kernel layout of common/weights.h
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
// row m inserts) into the kernel layout (common/sequence_soft.h).
template <typename scalar_t>
void fill_sequence_costs(const scalar_t* c, int64_t m, int64_t n, int64_t stride, std::vector<double>& cost) {
  cost.resize((m + 1) * (n + 1));
  kernel_layout_costs(sed::PaddedCostRows<scalar_t>{c, stride, m, n}, m, n, cost.data());
}

// Inside (and with need_grad outside, P in ws.p_acc) in one weight type for
// the costs reduced in ws.reduced (common/sequence_soft.h on the workspace's
// vectors); false where the total is out of its range.
template <typename Weight>
bool run_soft_pass(int64_t m, int64_t n, double temperature, bool need_grad, SedSoftWorkspace& ws,
                   SedSoftBuffers<Weight>& buf, double* log_total) {
  const int64_t w = n + 1, cells = (m + 1) * w;
  buf.weight.resize(cells);
  buf.in_del.resize(cells);
  buf.in_other.resize(cells);
  if (need_grad) {
    buf.out_any.resize(2 * w);
    buf.out_ins.resize(2 * w);
    ws.p_acc.resize(cells);
  }
  const SedSoftArrays<Weight> arrays{buf.weight.data(),  buf.in_del.data(),  buf.in_other.data(),
                                     buf.out_any.data(), buf.out_ins.data(), ws.p_acc.data()};
  return soft::sed_soft_pass(ws.reduced.data(), m, n, temperature, need_grad, arrays, log_total);
}

// The soft distance of a pair whose costs are in ws.cost (and with need_grad
// P in ws.p_acc): weights as doubles unless they leave their range.
inline double sed_soft_solve(int64_t m, int64_t n, double temperature, bool need_grad, SedSoftWorkspace& ws) {
  const double shift = reduce_costs(ws.cost.data(), m, n, ws.reduced, ws.column_min);
  double log_total = 0.0;
  if (m + n > kFastNodes || !run_soft_pass(m, n, temperature, need_grad, ws, ws.fast, &log_total)) {
    // Cannot fail: the cheapest alignment's weight is a positive WideWeight.
    const bool done = run_soft_pass(m, n, temperature, need_grad, ws, ws.wide, &log_total);
    BEDL_CHECK(done, "internal error: no alignment was weighed for sequences of ", m, " and ", n, " symbols");
  }
  return shift - temperature * log_total;
}

}  // namespace soft
}  // namespace bedl
