// The tree kernel's outside sweep: one loop over a forest table, from its
// final cell (or the tdm cells larger tables used) to the corner, pushing
// outside weights down the edges its policy admits. Three instances:
//  * CountOutside: completion counts over co-optimal edges; accumulates
//    P[event] += inside * outside / all (the co-optimal matrix);
//  * ReachOutside: the same with booleans (which cells and tdm some
//    co-optimal mapping uses, and whether it is unique);
//  * SoftOutside (soft.h): Boltzmann weights over every edge; accumulates
//    P[event] += inside * weight * outside / total (the expected alignment).
#pragma once

#include <algorithm>
#include <cstdint>

#include "pair.h"

namespace bedl {
namespace ted {

// The outside sweep of table (kx, ky) of the pair (x, y) in a flat layout of
// row stride w. `out` gives the admitted edges of each cell (flags), the edge
// weights and inside weights they multiply by, the arrays of outside weights
// (any, ins, tdm; any and ins are zero on entry and left so: every cell is
// cleared as it is read, and weight reaches only cells the sweep visits) and
// what to accumulate. reach_end: (m + 1) entries of scratch.
template <class Out>
void outside_sweep(const TreeIndex& x, const TreeIndex& y, int64_t w, int64_t kx, int64_t ky, int64_t* reach_end,
                   Out& out) {
  using W = typename Out::Weight;
  const ForestTable t(x.leftmost.data(), y.leftmost.data(), kx, ky);
  const int64_t r0 = t.r0, c0 = t.c0;
  W* out_any = out.any;
  W* out_ins = out.ins;
  W* out_tdm = out.tdm;
  // Each row's rightmost cell that outside weight can have reached (or whose
  // tdm larger tables used); the cells right of it have none, so each row is
  // swept from there. Weight enters a row only through the pushes below, each
  // of which moves its end.
  for (int64_t i = r0; i <= kx; ++i) reach_end[i] = c0 - 1;
  if (kx == x.n && ky == y.n) {
    out_any[kx * w + ky] = W::one();
    reach_end[kx] = ky;
  }
  {
    int64_t len_x, len_y;
    const int64_t* px = path_of(x, x.path_index[kx], &len_x);
    const int64_t* py = path_of(y, y.path_index[ky], &len_y);
    for (int64_t s = 0; s < len_x; ++s) {
      for (int64_t q = len_y; q-- > 0;) {
        if (!out_tdm[px[s] * w + py[q]].is_zero()) {
          reach_end[px[s]] = std::max(reach_end[px[s]], py[q]);
          break;
        }
      }
    }
  }
  const int64_t* ly = y.leftmost.data();
  for (int64_t i = kx; i >= r0; --i) {
    // Row i's part of the geometry, once per row: whether its cells of whole subtrees of y
    // define tdm, and where its matches come from.
    const bool row_defines = i > r0 && t.whole_x(i);
    const int64_t jump_row = x.leftmost[i] - 1;
    for (int64_t j = reach_end[i]; j >= c0; --j) {
      const int64_t cell = i * w + j;
      const bool defines = row_defines && j > c0 && ly[j] == c0 + 1;  // t.defines_tdm(i, j)
      const W out_d = out_any[cell];  // a deletion may follow anything
      const W out_o = out_any[cell] + out_ins[cell];
      out_any[cell] = out_ins[cell] = W::zero();  // (pushes below go to other cells)
      if (!out_o.is_zero()) {
        const uint8_t flags = out.flags(i, j, cell);
        out.visited(flags, out_d);
        if (flags & kDel) {
          out_any[cell - w] = out_any[cell - w] + out.after_deletion(out_d, i);
          reach_end[i - 1] = std::max(reach_end[i - 1], j);
          out.deleted(i, j, cell, out_d);
        }
        if (flags & kIns) {
          out_ins[cell - 1] = out_ins[cell - 1] + out.after_insertion(out_o, j);
          out.inserted(i, j, cell, out_o);
        }
        if (flags & kMatch) {
          out.used_tdm(i, j);
          const int64_t si = defines ? r0 : jump_row, sj = t.source_col(j, defines);
          const int64_t source = si * w + sj;
          out_any[source] = out_any[source] + out_o * out.tdm_inside(i, j, cell);
          reach_end[si] = std::max(reach_end[si], sj);
          out_tdm[cell] = out_tdm[cell] + out_o * out.inside(si, sj, source);
        }
      }
      // tdm(i, j) is used nowhere after this cell: all its outside weight is
      // in, so the replacement i -> j is final and its inside lies in this
      // table at (i - 1, j - 1).
      if (defines && !out_tdm[cell].is_zero()) {
        out.replaced(i, j, cell, out_tdm[cell]);
        out_any[cell - w - 1] = out_any[cell - w - 1] + out.after_replacement(out_tdm[cell], i, j);
        out_tdm[cell] = W::zero();  // (every used tdm ends here: the array is all zero after a pass)
        reach_end[i - 1] = std::max(reach_end[i - 1], j - 1);
      }
    }
    out.row_done(i);
  }
}

// The edge weights of the counting instances: every edge counts once (tdm's
// own count comes through tdm_inside).
struct UnitEdges {
  template <class W>
  static W after_deletion(const W& o, int64_t) {
    return o;
  }
  template <class W>
  static W after_insertion(const W& o, int64_t) {
    return o;
  }
  template <class W>
  static W after_replacement(const W& o, int64_t, int64_t) {
    return o;
  }
  static void row_done(int64_t) {}
};

// A table's flags and inside counts where the scalar passes leave them (kept
// or in the current table's arrays), and all tdm counts (by cell). (The AVX2
// lanes read theirs by (i, j) from their own layout: coopt_lanes_avx2.cpp.)
template <typename Count>
struct TableSource {
  Cells<const uint8_t> f;
  Cells<const Count> tot, other;
  const Count* tdm_count;
  uint8_t flags(int64_t i, int64_t j, int64_t) const { return f.at(i, j); }
  Count total(int64_t i, int64_t j, int64_t) const { return tot.at(i, j); }
  Count in_other(int64_t i, int64_t j, int64_t) const { return other.at(i, j); }
  Count tdm(int64_t, int64_t, int64_t cell) const { return tdm_count[cell]; }
};

// Completion counts; P[event] += inside * outside / all, the counts read from
// `src`. With `needed`, also marks the table defining each tdm it uses, as
// ReachOutside does.
template <class Source, typename Count>
struct CountOutside : UnitEdges {
  using Weight = Count;
  Count *any, *ins, *tdm;
  const TreeIndex& x;
  const TreeIndex& y;
  int64_t w;
  const Source& src;
  const Count& all;
  double* acc;
  uint8_t* needed;
  uint8_t flags(int64_t i, int64_t j, int64_t cell) const { return src.flags(i, j, cell); }
  Count inside(int64_t i, int64_t j, int64_t cell) const { return src.total(i, j, cell); }
  Count tdm_inside(int64_t i, int64_t j, int64_t cell) const { return src.tdm(i, j, cell); }
  void deleted(int64_t i, int64_t j, int64_t cell, const Count& o) const {
    acc[i * w] += dp::ratio(src.total(i - 1, j, cell - w) * o, all);
  }
  void inserted(int64_t i, int64_t j, int64_t cell, const Count& o) const {
    acc[j] += dp::ratio(src.in_other(i, j - 1, cell - 1) * o, all);
  }
  void replaced(int64_t i, int64_t j, int64_t cell, const Count& o) const {
    acc[cell] += dp::ratio(src.tdm(i, j, cell) * o, all);
  }
  static void visited(uint8_t, const Count&) {}
  void used_tdm(int64_t i, int64_t j) const {
    if (needed != nullptr) needed[x.path_index[i] * y.keyroots.size() + y.path_index[j]] = 1;
  }
};

// Reachability: every co-optimal alternative has a positive count. Marks the
// table defining each reached tdm in `needed`, the reached events in acc (P
// where the mapping is unique), and sets `branched` where a reached cell other
// than a corner (flags 0) has no or several alternatives its reach can take
// (a deletion needs reach that may follow one: out_d).
struct ReachOutside : UnitEdges {
  using Weight = dp::Reach;
  dp::Reach *any, *ins, *tdm;
  double* acc;
  int64_t w;
  bool branched;
  uint8_t* needed;                 // keyroot pairs, row-major
  const int64_t *x_path, *y_path;  // a node's keyroot index (TreeIndex::path_index)
  size_t ky_count;
  Cells<const uint8_t> at;  // the swept table's flags
  uint8_t flags(int64_t i, int64_t j, int64_t) const { return at.at(i, j); }
  static dp::Reach inside(int64_t, int64_t, int64_t) { return dp::Reach::one(); }
  static dp::Reach tdm_inside(int64_t, int64_t, int64_t) { return dp::Reach::one(); }
  void deleted(int64_t i, int64_t, int64_t, dp::Reach o) {
    if (!o.is_zero()) acc[i * w] += 1.0;
  }
  void inserted(int64_t, int64_t j, int64_t, dp::Reach) { acc[j] += 1.0; }
  void replaced(int64_t, int64_t, int64_t cell, dp::Reach) { acc[cell] += 1.0; }
  void visited(uint8_t flags, dp::Reach out_d) {
    const int ways = ((flags & kDel) && !out_d.is_zero()) + ((flags & kIns) != 0) + ((flags & kMatch) != 0);
    branched |= flags != 0 && ways != 1;
  }
  void used_tdm(int64_t i, int64_t j) { needed[x_path[i] * ky_count + y_path[j]] = 1; }
};

}  // namespace ted
}  // namespace bedl
