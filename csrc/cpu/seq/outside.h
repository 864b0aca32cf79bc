// The sequence kernel's outside sweep: one loop over the grid from its last
// cell to the first, two rows of outside weights at a time, pushing them down
// the edges its policy admits. Two instances: CountOutside (completion counts
// over co-optimal edges; P[event] += inside * outside / all) and SoftOutside
// (soft.h: Boltzmann weights over every edge; P[event] += inside * weight *
// outside / total).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../../common/states.h"

namespace bedl {
namespace sed {

using dp::kDel;
using dp::kIns;
using dp::kMatch;

// The outside sweep of an (m, n) pair. out.any and out.ins hold two rows of
// n + 1 weights each, zero on entry and left so. Row i pushes into rows i and
// i - 1; a row visits only the columns that can hold outside weight: those the
// row below reached (and one to their left), then leftwards while insertions
// carry weight.
template <class Out>
void sequence_outside(int64_t m, int64_t n, Out& out) {
  using W = typename Out::Weight;
  const int64_t w = n + 1;
  // Columns with outside weight in the row below (row m: its last cell, set below).
  int64_t lo_below = n + 1, hi_below = n;
  for (int64_t i = m; i >= 0; --i) {
    W* any_cur = out.any + (i & 1) * w;
    W* ins_cur = out.ins + (i & 1) * w;
    W* any_up = out.any + ((i + 1) & 1) * w;
    if (i == m) any_cur[n] = W::one();
    int64_t lo = n + 1, hi = -1;
    for (int64_t j = hi_below; j >= 0; --j) {
      const W out_d = any_cur[j];
      const W out_o = any_cur[j] + ins_cur[j];
      if (out_o.is_zero()) {
        if (j < lo_below - 1) break;  // nothing from below here, and no insertion goes on
        continue;
      }
      lo = j;
      hi = std::max(hi, j);
      const uint8_t flags = out.flags(i, j);
      if (flags & kDel) {  // delete x_i; the source may be in either state
        any_up[j] = any_up[j] + out.after_deletion(out_d, i);
        out.deleted(i, j, out_d);
      }
      if (flags & kIns) {  // insert y_j; only from a cell not entered by a deletion
        ins_cur[j - 1] = ins_cur[j - 1] + out.after_insertion(out_o, j);
        out.inserted(i, j, out_o);
      }
      if (flags & kMatch) {  // replace x_i by y_j
        any_up[j - 1] = any_up[j - 1] + out.after_replacement(out_o, i, j);
        out.replaced(i, j, out_o);
      }
    }
    out.row_done(i);
    // Row i is done; row i - 2 reuses its storage, which holds weights only
    // where the row below pushed and where this row's insertions went.
    const int64_t clear_from = std::max<int64_t>(0, std::min(lo_below, lo) - 1);
    std::fill(any_cur + clear_from, any_cur + hi_below + 1, W::zero());
    std::fill(ins_cur + clear_from, ins_cur + hi_below + 1, W::zero());
    lo_below = lo;
    hi_below = hi;
  }
}

// One pair's inside counts and flags for the outside pass: cell (i, j) at
// (i * w + j) * stride of arrays of E (Count; doubles in the lanes, lane-offset).
template <typename Count, typename E>
struct InsideGrid {
  const E* in_del;
  const E* in_other;
  const uint8_t* coopt;
  int64_t w, stride;
  int64_t at(int64_t i, int64_t j) const { return (i * w + j) * stride; }
  Count other(int64_t i, int64_t j) const { return Count{in_other[at(i, j)]}; }
  Count total(int64_t i, int64_t j) const {
    const int64_t c = at(i, j);
    return Count{in_del[c]} + Count{in_other[c]};
  }
};

// Completion counts over the co-optimal edges of `g`; P into acc in the cost
// layout (row stride n + 1: rows < m nodes of x, row m insertions, column n
// deletions).
template <typename Count, typename E>
struct CountOutside {
  using Weight = Count;
  Count *any, *ins;
  const InsideGrid<Count, E>& g;
  const Count& all;
  double* acc;
  int64_t m, n;
  uint8_t flags(int64_t i, int64_t j) const { return g.coopt[g.at(i, j)]; }
  static Count after_deletion(const Count& o, int64_t) { return o; }
  static Count after_insertion(const Count& o, int64_t) { return o; }
  static Count after_replacement(const Count& o, int64_t, int64_t) { return o; }
  void deleted(int64_t i, int64_t j, const Count& o) const {
    acc[(i - 1) * (n + 1) + n] += dp::ratio(g.total(i - 1, j) * o, all);
  }
  void inserted(int64_t i, int64_t j, const Count& o) const {
    acc[m * (n + 1) + j - 1] += dp::ratio(g.other(i, j - 1) * o, all);
  }
  void replaced(int64_t i, int64_t j, const Count& o) const {
    acc[(i - 1) * (n + 1) + j - 1] += dp::ratio(g.total(i - 1, j - 1) * o, all);
  }
  static void row_done(int64_t) {}
};

// P of an (m, n) pair into p_acc (the cost layout), from inside counts `g`
// and their total `all`; cnt's two-row buffers as scratch.
template <typename Count, typename E, typename Buffers, typename Acc>
void count_outside(const InsideGrid<Count, E>& g, int64_t m, int64_t n, const Count& all, Buffers& cnt,
                   Acc& p_acc) {
  const int64_t w = n + 1;
  cnt.out_any.assign(2 * w, Count::zero());
  cnt.out_ins.assign(2 * w, Count::zero());
  p_acc.assign((m + 1) * w, 0.0);
  CountOutside<Count, E> out{cnt.out_any.data(), cnt.out_ins.data(), g, all, p_acc.data(), m, n};
  sequence_outside(m, n, out);
}

}  // namespace sed
}  // namespace bedl
