// Soft (temperature) tree edit distance and its gradient, the expected
// alignment, on the CPU.
//
// soft(x, y) = -T log sum_M exp(-cost(M) / T) over all valid mappings M: the
// forest recurrence's weights (common/forest.h) with every alternative
// admitted and each derivation weighted by exp(-cost / T) (soft_weights.h)
// instead of counted once where co-optimal. The same canonical derivations (tdm with the roots
// matched; no insertion right after a deletion) count each mapping once.
// The inside pass fills the keyroot tables in order (leaf keyroots by their
// closed forms); the outside pass recomputes them in reverse order and sweeps
// them (outside_sweep's soft instance), accumulating
//   P[event] = inside(source) * weight(event) * outside(target) / total,
// the probability of the event under p(M) ~ exp(-cost(M) / T), exactly where
// the counting sweep accumulates inside * outside / all. As T -> 0 the soft
// distance tends to the distance and P to the co-optimal matrix.
// Memory: (m+1)(n+1) weights per array, no table is kept.
#pragma once

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

// One pair's soft passes in one weight type.
template <typename Weight>
struct SoftPair {
  const TreeIndex& x;
  const TreeIndex& y;
  SoftBuffers<Weight>& buf;
  int64_t w;  // row stride of all (m+1)(n+1) arrays

  const Weight& del(int64_t i) const { return buf.weight[i * w]; }
  const Weight& ins(int64_t j) const { return buf.weight[j]; }
  const Weight& rep(int64_t i, int64_t j) const { return buf.weight[i * w + j]; }
};

// below[v]: the weight of inserting (deleting) v's subtree but its root,
// multiplied up each leftmost path as a table's first row (column) does.
template <typename Weight, typename WeightOf>
void products_below(const TreeIndex& t, const WeightOf& weight_of, std::vector<Weight>& below) {
  below.resize(t.n + 1);
  accumulate_below(t.keyroots.data(), static_cast<int64_t>(t.keyroots.size()), t.leftmost.data(), Weight::one(),
                   [&](const Weight& acc, int64_t v) { return acc * weight_of(v); }, below.data());
}

// The forest table of keyroots (kx, ky): inside weights (tot, and in_other for
// the outside sweep), and the tdm of its path pairs: the counting tables'
// recurrence with every alternative admitted and Boltzmann weights.
template <typename Weight>
void soft_table(SoftPair<Weight>& p, int64_t kx, int64_t ky) {
  const int64_t w = p.w;
  SoftBuffers<Weight>& buf = p.buf;
  Weight* tot = buf.tot.data();
  Weight* other = buf.in_other.data();
  Weight* tdm = buf.tdm.data();
  const Weight* weight = buf.weight.data();  // row 0: insertions
  const ForestTable t(p.x.leftmost.data(), p.y.leftmost.data(), kx, ky);
  const int64_t r0 = t.r0, c0 = t.c0;
  const int64_t corner = r0 * w + c0;
  tot[corner] = Weight::one();
  other[corner] = Weight::one();
  // First column and row: deletions (insertions) only.
  for (int64_t i = r0 + 1; i <= kx; ++i) {
    tot[i * w + c0] = tot[(i - 1) * w + c0] * p.del(i);
    other[i * w + c0] = Weight::zero();
  }
  for (int64_t j = c0 + 1; j <= ky; ++j) {
    tot[r0 * w + j] = tot[r0 * w + j - 1] * weight[j];
    other[r0 * w + j] = tot[r0 * w + j];
  }
  const int64_t* ly = p.y.leftmost.data();
  for (int64_t i = r0 + 1; i <= kx; ++i) {
    const ForestRow g(t, i, w);
    const Weight del_i = p.del(i);
    const int64_t row = i * w;
    Weight left_other = Weight::zero();  // the first column is entered by deletions
    for (int64_t j = c0 + 1; j <= ky; ++j) {
      const int64_t cell = row + j;
      const bool defines = g.defines_tdm(ly[j]);
      if (defines) tdm[cell] = tot[cell - w - 1] * weight[cell];
      const int64_t source = g.source(ly[j], defines, corner);
      Weight in_d, in_o;
      forest_weights(dp::AllAlternatives{}, tot[cell - w] * del_i, left_other * weight[j], tot[source], tdm[cell],
                     in_d, in_o);
      tot[cell] = in_d + in_o;
      other[cell] = in_o;
      left_other = in_o;
    }
  }
}

// Every table of the inside pass, in keyroot order (leaf keyroots by their
// closed forms); the final one's last cell holds the total weight.
template <typename Weight>
void soft_inside(SoftPair<Weight>& p) {
  const TreeIndex &x = p.x, &y = p.y;
  SoftBuffers<Weight>& buf = p.buf;
  const int64_t w = p.w;
  products_below(y, [&p](int64_t j) { return p.ins(j); }, buf.below_ins);
  products_below(x, [&p](int64_t i) { return p.del(i); }, buf.below_del);
  const size_t ky_count = y.keyroots.size();
  for (size_t a = 0; a < x.keyroots.size(); ++a) {
    const int64_t kx = x.keyroots[a];
    if (x.leftmost[kx] == kx) {
      for (int64_t j = 1; j <= y.n; ++j) buf.tdm[kx * w + j] = leaf_tdm_weight(buf.below_ins[j], p.rep(kx, j));
      if (kx == x.n) soft_table(p, kx, y.keyroots[ky_count - 1]);  // a one-node x: the final table
      continue;
    }
    for (size_t b = 0; b < ky_count; ++b) {
      const int64_t ky = y.keyroots[b];
      if (y.leftmost[ky] == ky && !(kx == x.n && ky == y.n)) {
        int64_t len;
        const int64_t* path = path_of(x, a, &len);
        for (int64_t k = 0; k < len; ++k) {
          buf.tdm[path[k] * w + ky] = leaf_tdm_weight(buf.below_del[path[k]], p.rep(path[k], ky));
        }
      } else {
        soft_table(p, kx, ky);
      }
    }
  }
}


// outside_sweep's soft instance over a table just recomputed by soft_table:
// every edge (the first column's are deletions, the first row's insertions),
// weighted; P[event] += inside * weight * outside / total into acc (the
// postorder cost layout), deletions summed per row first.
template <typename W>
struct SoftOutside {
  using Weight = W;
  Weight *any, *ins, *tdm;
  const SoftPair<W>& p;
  const soft::ShareOf& share;
  double* acc;
  int64_t r0, c0;
  double row_deleted = 0.0;  // P of deleting x_i, this table's share

  uint8_t flags(int64_t i, int64_t j, int64_t) const {
    if (i == r0) return j == c0 ? 0 : kIns;
    return j == c0 ? kDel : static_cast<uint8_t>(kDel | kIns | kMatch);
  }
  Weight after_deletion(const Weight& o, int64_t i) const { return o * p.del(i); }
  Weight after_insertion(const Weight& o, int64_t j) const { return o * p.ins(j); }
  Weight after_replacement(const Weight& o, int64_t i, int64_t j) const { return o * p.rep(i, j); }
  Weight tdm_inside(int64_t, int64_t, int64_t cell) const { return p.buf.tdm[cell]; }
  Weight inside(int64_t, int64_t, int64_t source) const { return p.buf.tot[source]; }
  void deleted(int64_t i, int64_t, int64_t cell, const Weight& o) {
    row_deleted += share(p.buf.tot[cell - p.w] * p.del(i) * o);
  }
  void inserted(int64_t, int64_t j, int64_t cell, const Weight& o) {
    acc[j] += share(p.buf.in_other[cell - 1] * p.ins(j) * o);
  }
  void replaced(int64_t, int64_t, int64_t cell, const Weight& o) { acc[cell] += share(p.buf.tdm[cell] * o); }
  static void visited(uint8_t, const Weight&) {}
  static void used_tdm(int64_t, int64_t) {}
  void row_done(int64_t i) {
    if (i > r0) acc[i * p.w] += row_deleted;
    row_deleted = 0.0;
  }
};

// The inside pass (and with need_grad the outside pass, P in ws.ted.p_acc) in
// one weight type for the costs reduced in ws.reduced; false (nothing
// accumulated) where the total is out of that type's range.
template <typename Weight>
bool ted_soft_pass(const TreeIndex& x, const TreeIndex& y, double temperature, bool need_grad,
                   SoftWorkspace& ws, SoftBuffers<Weight>& buf, double* log_total) {
  const int64_t m = x.n, n = y.n, w = n + 1, cells = (m + 1) * w;
  soft::weights_of(ws.reduced, temperature, buf.weight);
  buf.tdm.resize(cells);
  buf.tot.resize(cells);
  buf.in_other.resize(cells);
  SoftPair<Weight> pair{x, y, buf, w};
  soft_inside(pair);
  const Weight all = buf.tot[m * w + n];
  if (!soft::fast_range_holds(all, m + n)) return false;
  *log_total = soft::log_of(all);
  if (!need_grad) return true;
  zero_filled(buf.out_any, cells);  // (each sweep leaves them zero)
  zero_filled(buf.out_ins, cells);
  buf.out_tdm.assign(cells, Weight::zero());
  ws.ted.clear_p_acc(cells);
  ws.ted.reach_end.resize(m + 1);
  const soft::ShareOf share(all);
  for (size_t a = x.keyroots.size(); a-- > 0;) {
    for (size_t b = y.keyroots.size(); b-- > 0;) {
      const int64_t kx = x.keyroots[a], ky = y.keyroots[b];
      if (!has_outside(paths_of(x), paths_of(y), w, kx, ky, buf.out_tdm.data())) continue;
      soft_table(pair, kx, ky);
      const ForestTable t(x.leftmost.data(), y.leftmost.data(), kx, ky);
      SoftOutside<Weight> out{buf.out_any.data(), buf.out_ins.data(), buf.out_tdm.data(), pair, share,
                              ws.ted.p_acc.data(), t.r0, t.c0};
      outside_sweep(x, y, w, kx, ky, ws.ted.reach_end.data(), out);
    }
  }
  return true;
}

// The soft distance of the pair whose costs are in ws.ted.cost (and with
// need_grad its expected alignment in ws.ted.p_acc): weights as doubles
// unless they leave their range, then with a wide exponent.
inline double ted_soft_solve(const TreeIndex& x, const TreeIndex& y, double temperature, bool need_grad,
                             SoftWorkspace& ws) {
  const double shift = soft::reduce_costs(ws.ted.cost.data(), x.n, y.n, ws.reduced, ws.column_min);
  double log_total = 0.0;
  if (x.n + y.n > soft::kFastNodes || !ted_soft_pass(x, y, temperature, need_grad, ws, ws.fast, &log_total)) {
    // Cannot fail: the cheapest mapping's weight is a positive WideWeight.
    const bool done = ted_soft_pass(x, y, temperature, need_grad, ws, ws.wide, &log_total);
    BEDL_CHECK(done, "internal error: no mapping was weighed for a pair of ", x.n, " and ", y.n, " nodes");
  }
  return shift - temperature * log_total;
}

}  // namespace ted
}  // namespace bedl
