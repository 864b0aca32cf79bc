// One tree pair as the CPU passes see it: both trees' index, the costs in the
// workspace, the count buffers of one count type, the tie test; and Cells,
// a table's region in the current arrays or in a store.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "../../common/forest.h"
#include "index.h"
#include "workspace.h"

namespace bedl {
namespace ted {

using dp::kDel;
using dp::kIns;
using dp::kMatch;

template <typename Count>
struct TreePair {
  const TreeIndex& x;
  const TreeIndex& y;
  TedWorkspace& ws;
  CountBuffers<Count>& cnt;
  int64_t w;  // row stride of all (m+1)(n+1) arrays
  dp::Tie tie;
  // A distance-only pair's cutoff (none: nullptr): the final table stops at a
  // row i where min_j fd(i, j) + cut_below[i] > cut_limit, and sets `beyond`.
  const double* cut_below = nullptr;
  double cut_limit = 0.0;
  bool beyond = false;

  double del(int64_t i) const { return ws.dels[i]; }
  double ins(int64_t j) const { return ws.cost[j]; }
  double rep(int64_t i, int64_t j) const { return ws.rep_row[i][ws.rep_col[j]]; }
  // The forest table of keyroots (kx, ky).
  ForestTable table(int64_t kx, int64_t ky) const { return ForestTable(x.leftmost.data(), y.leftmost.data(), kx, ky); }
  bool is_final(int64_t kx, int64_t ky) const { return kx == x.n && ky == y.n; }
};

// The leftmost path of keyroot number k of t: its nodes, ascending.
inline const int64_t* path_of(const TreeIndex& t, size_t k, int64_t* len) {
  *len = t.path_begin[k + 1] - t.path_begin[k];
  return t.path_nodes.data() + t.path_begin[k];
}

// A forest table's cells (i, j), i >= r0 and j >= c0, at
// data[(i - r0) * stride + (j - c0)]: the current table's arrays (stride w)
// or its region of a store (its own width), which the passes keep for later
// passes and read in place.
template <typename T>
struct Cells {
  T* data = nullptr;
  int64_t stride = 0;
  int64_t r0 = 0, c0 = 0;
  T& at(int64_t i, int64_t j) const { return data[(i - r0) * stride + (j - c0)]; }
  operator Cells<const T>() const
    requires(!std::is_const_v<T>)
  {
    return {data, stride, r0, c0};
  }
};

// A table's inside counts: all, and not entered by a deletion.
template <typename Count>
struct CountCells {
  Cells<Count> total, other;
};

// The outside sweeps' weights (any, ins, tdm) at `cells` or more entries,
// all zero: each pass leaves them so (outside_sweep clears every entry it
// consumes), so they are cleared only where they grow.
template <typename Weights>
inline void zero_filled(Weights& weights, int64_t cells) {
  using W = typename Weights::value_type;
  if (static_cast<int64_t>(weights.size()) < cells) weights.resize(cells, W::zero());
}

}  // namespace ted
}  // namespace bedl
