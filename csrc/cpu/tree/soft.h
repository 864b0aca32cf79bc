// Soft (temperature) tree edit distance and its gradient, the expected
// alignment, on the CPU: common/forest_soft.h's passes on the workspace's
// vectors, weights as doubles unless they leave their range. P[event] is the
// probability of the event under p(M) ~ exp(-cost(M) / T), accumulated exactly
// where the counting sweep accumulates inside * outside / all; as T -> 0 the
// soft distance tends to the distance and P to the co-optimal matrix.
// Memory: (m+1)(n+1) weights per array, no table is kept.
#pragma once

#include "../../common/forest_soft.h"
#include "../soft_weights.h"
#include "outside.h"

#include <vector>

namespace bedl {
namespace ted {

// The soft passes' arrays in one weight type, (m+1)(n+1) each, postorder.
template <typename Weight>
struct SoftBuffers {
  std::vector<Weight> weight;             // exp(-c' / T) of the reduced costs, the cost layout
  std::vector<Weight> tdm;                // weights of the root-matched subtree pairs, all tables
  std::vector<Weight> tot, in_other;      // inside weights of the current table: all, not entered by a deletion
  std::vector<Weight> out_any, out_ins, out_tdm;  // outside weights
  std::vector<Weight> below_ins, below_del;       // the leaf keyroots' closed forms
};

struct SoftWorkspace {
  TedWorkspace ted;                   // the pair's costs in postorder (fill_padded) and P (p_acc)
  std::vector<double> reduced, column_min;  // soft::reduce_costs
  SoftBuffers<soft::PlainWeight> fast;  // weights as doubles: the usual case
  SoftBuffers<soft::WideWeight> wide; // weights with a wide exponent: where doubles under- or overflow
};

// A TreeIndex as common/'s passes read it.
inline FlatTree flat_of(const TreeIndex& t) {
  return {t.n,
          t.pre_of_post.data(),
          t.leftmost.data(),
          t.keyroots.data(),
          static_cast<int64_t>(t.keyroots.size()),
          t.path_index.data(),
          t.path_begin.data(),
          t.path_nodes.data()};
}

// The inside pass (and with need_grad the outside pass, P in ws.ted.p_acc) in
// one weight type for the costs reduced in ws.reduced: common/forest_soft.h's
// passes on the workspace's vectors; false (nothing accumulated) where the
// total is out of that type's range.
template <typename Weight>
bool run_soft_pass(const TreeIndex& x, const TreeIndex& y, double temperature, bool need_grad, SoftWorkspace& ws,
                   SoftBuffers<Weight>& buf, double* log_total) {
  const int64_t m = x.n, n = y.n, cells = (m + 1) * (n + 1);
  for (auto* v : {&buf.weight, &buf.tdm, &buf.tot, &buf.in_other}) v->resize(cells);
  buf.below_ins.resize(n + 1);
  buf.below_del.resize(m + 1);
  if (need_grad) {
    for (auto* v : {&buf.out_any, &buf.out_ins, &buf.out_tdm}) v->resize(cells);
    ws.ted.p_acc.resize(cells);
    ws.ted.reach_end.resize(m + 1);
  }
  const soft::TedSoftArrays<Weight> arrays{buf.weight.data(),    buf.tdm.data(),       buf.tot.data(),
                                           buf.in_other.data(),  buf.out_any.data(),   buf.out_ins.data(),
                                           buf.out_tdm.data(),   buf.below_ins.data(), buf.below_del.data(),
                                           ws.ted.p_acc.data(),  ws.ted.reach_end.data()};
  return soft::ted_soft_pass(flat_of(x), flat_of(y), ws.reduced.data(), temperature, need_grad, arrays, log_total);
}

// The soft distance of the pair whose costs are in ws.ted.cost (and with
// need_grad its expected alignment in ws.ted.p_acc): weights as doubles
// unless they leave their range, then with a wide exponent.
inline double ted_soft_solve(const TreeIndex& x, const TreeIndex& y, double temperature, bool need_grad,
                             SoftWorkspace& ws) {
  const double shift = soft::reduce_costs(ws.ted.cost.data(), x.n, y.n, ws.reduced, ws.column_min);
  double log_total = 0.0;
  if (x.n + y.n > soft::kFastNodes || !run_soft_pass(x, y, temperature, need_grad, ws, ws.fast, &log_total)) {
    // Cannot fail: the cheapest mapping's weight is a positive WideWeight.
    const bool done = run_soft_pass(x, y, temperature, need_grad, ws, ws.wide, &log_total);
    BEDL_CHECK(done, "internal error: no mapping was weighed for a pair of ", x.n, " and ", y.n, " nodes");
  }
  return shift - temperature * log_total;
}

}  // namespace ted
}  // namespace bedl
