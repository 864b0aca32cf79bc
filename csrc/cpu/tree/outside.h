// The tree kernel's outside sweeps on the CPU: common/forest_outside.h's sweep
// over indexed trees, where the counting sweep reads its counts (TableSource),
// and the boolean instance that finds the tables P needs (ReachOutside). The
// soft instance is in soft.h.
#pragma once

#include <cstdint>

#include "../../common/forest_outside.h"
#include "pair.h"

namespace bedl {
namespace ted {

// A TreeIndex as the sweep reads it.
inline TreePaths paths_of(const TreeIndex& t) {
  return {t.n, t.leftmost.data(), t.path_index.data(), t.path_begin.data(), t.path_nodes.data()};
}

// common/forest_outside.h's sweep over the CPU's indexed trees.
template <class Out>
void outside_sweep(const TreeIndex& x, const TreeIndex& y, int64_t w, int64_t kx, int64_t ky, int64_t* reach_end,
                   Out& out) {
  outside_sweep(paths_of(x), paths_of(y), w, kx, ky, reach_end, out);
}

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
