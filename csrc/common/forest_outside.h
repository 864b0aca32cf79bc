// The tree edit distance's outside sweep, backend-free: one loop over a forest
// table, from its final cell (or the tdm cells larger tables used) to the
// corner, pushing outside weights down the edges its policy admits. Every
// outside pass of both backends is an instance:
//  * CountOutside (below): completion counts over co-optimal edges;
//    accumulates P[event] += inside * outside / all (the co-optimal matrix);
//  * the CPU's ReachOutside (the same with booleans: which tables some
//    co-optimal mapping uses, and whether it is unique) and SoftOutside
//    (Boltzmann weights over every edge: the expected alignment).
#pragma once

#include "forest.h"

namespace bedl {
namespace ted {

// A tree as the sweep reads it: n nodes in 1-based postorder, their leftmost
// leaves, and the partition of the nodes into the keyroots' leftmost paths.
struct TreePaths {
  int64_t n;
  const int64_t* leftmost;    // 1-based postorder, entries 1..n
  const int64_t* path_index;  // node -> index of the keyroot whose leftmost path holds it
  const int64_t* path_begin;  // keyroot index k: its path is path_nodes[path_begin[k] .. path_begin[k + 1])
  const int64_t* path_nodes;  // ascending within each path
  // The leftmost path of keyroot number k: its nodes, ascending.
  BEDL_HD const int64_t* path(int64_t k, int64_t* len) const {
    *len = path_begin[k + 1] - path_begin[k];
    return path_nodes + path_begin[k];
  }
};

// Whether outside weight reaches table (kx, ky): the final table always;
// every other only through the tdm of its path pairs that larger tables used
// (where none did, its sweep would add nothing).
template <class W>
BEDL_HD bool has_outside(const TreePaths& x, const TreePaths& y, int64_t w, int64_t kx, int64_t ky,
                         const W* out_tdm) {
  if (kx == x.n && ky == y.n) return true;
  int64_t len_x, len_y;
  const int64_t* px = x.path(x.path_index[kx], &len_x);
  const int64_t* py = y.path(y.path_index[ky], &len_y);
  for (int64_t s = 0; s < len_x; ++s) {
    for (int64_t q = 0; q < len_y; ++q) {
      if (!out_tdm[px[s] * w + py[q]].is_zero()) return true;
    }
  }
  return false;
}

// The outside sweep of table (kx, ky) of the pair (x, y) in a flat layout of
// row stride w. `out` gives the admitted edges of each cell (flags), the edge
// weights and inside weights they multiply by, the arrays of outside weights
// (any, ins, tdm; any and ins are zero on entry and left so: every cell is
// cleared as it is read, and weight reaches only cells the sweep visits) and
// what to accumulate. reach_end: (m + 1) entries of scratch.
template <class Out>
BEDL_HD void outside_sweep(const TreePaths& x, const TreePaths& y, int64_t w, int64_t kx, int64_t ky,
                           int64_t* reach_end, Out& out) {
  using W = typename Out::Weight;
  const ForestTable t(x.leftmost, y.leftmost, kx, ky);
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
    const int64_t* px = x.path(x.path_index[kx], &len_x);
    const int64_t* py = y.path(y.path_index[ky], &len_y);
    for (int64_t s = 0; s < len_x; ++s) {
      for (int64_t q = len_y; q-- > 0;) {
        if (!out_tdm[px[s] * w + py[q]].is_zero()) {
          reach_end[px[s]] = max_of(reach_end[px[s]], py[q]);
          break;
        }
      }
    }
  }
  const int64_t* ly = y.leftmost;
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
        if (flags & dp::kDel) {
          out_any[cell - w] = out_any[cell - w] + out.after_deletion(out_d, i);
          reach_end[i - 1] = max_of(reach_end[i - 1], j);
          out.deleted(i, j, cell, out_d);
        }
        if (flags & dp::kIns) {
          out_ins[cell - 1] = out_ins[cell - 1] + out.after_insertion(out_o, j);
          out.inserted(i, j, cell, out_o);
        }
        if (flags & dp::kMatch) {
          out.used_tdm(i, j);
          const int64_t si = defines ? r0 : jump_row, sj = t.source_col(j, defines);
          const int64_t source = si * w + sj;
          out_any[source] = out_any[source] + out_o * out.tdm_inside(i, j, cell);
          reach_end[si] = max_of(reach_end[si], sj);
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
        reach_end[i - 1] = max_of(reach_end[i - 1], j - 1);
      }
    }
    out.row_done(i);
  }
}

// The edge weights of the counting instances: every edge counts once (tdm's
// own count comes through tdm_inside).
struct UnitEdges {
  template <class W>
  BEDL_HD static W after_deletion(const W& o, int64_t) {
    return o;
  }
  template <class W>
  BEDL_HD static W after_insertion(const W& o, int64_t) {
    return o;
  }
  template <class W>
  BEDL_HD static W after_replacement(const W& o, int64_t, int64_t) {
    return o;
  }
  BEDL_HD static void row_done(int64_t) {}
};

// Completion counts; P[event] += inside * outside / all into acc (the
// postorder layout of row stride w: row 0 insertions, column 0 deletions),
// the counts read from `src` (flags, total, in_other, tdm by (i, j) and flat
// cell). With `needed` (keyroot pairs, row-major, ky_count per row), also
// marks the table defining each tdm it uses.
template <class Source, typename Count>
struct CountOutside : UnitEdges {
  using Weight = Count;
  Count *any, *ins, *tdm;
  const Source& src;
  const Count& all;
  double* acc;
  int64_t w;
  uint8_t* needed = nullptr;
  const int64_t *x_path = nullptr, *y_path = nullptr;  // TreePaths::path_index of both trees
  int64_t ky_count = 0;
  BEDL_HD uint8_t flags(int64_t i, int64_t j, int64_t cell) const { return src.flags(i, j, cell); }
  BEDL_HD Count inside(int64_t i, int64_t j, int64_t cell) const { return src.total(i, j, cell); }
  BEDL_HD Count tdm_inside(int64_t i, int64_t j, int64_t cell) const { return src.tdm(i, j, cell); }
  BEDL_HD void deleted(int64_t i, int64_t j, int64_t cell, const Count& o) const {
    acc[i * w] += dp::ratio(src.total(i - 1, j, cell - w) * o, all);
  }
  BEDL_HD void inserted(int64_t i, int64_t j, int64_t cell, const Count& o) const {
    acc[j] += dp::ratio(src.in_other(i, j - 1, cell - 1) * o, all);
  }
  BEDL_HD void replaced(int64_t i, int64_t j, int64_t cell, const Count& o) const {
    acc[cell] += dp::ratio(src.tdm(i, j, cell) * o, all);
  }
  BEDL_HD static void visited(uint8_t, const Count&) {}
  BEDL_HD void used_tdm(int64_t i, int64_t j) const {
    if (needed != nullptr) needed[x_path[i] * ky_count + y_path[j]] = 1;
  }
};

}  // namespace ted
}  // namespace bedl
