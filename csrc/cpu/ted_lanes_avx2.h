// Tree distances with symbol-table costs, four pairs at a time in the lanes
// of AVX2 vectors (same bits as the scalar kernel; see ted_lanes_avx2.cpp).
#pragma once

#include <functional>
#include <vector>

#include "dp_common.h"
#include "tree_index.h"
#include "ted_workspace.h"

namespace bedl {
namespace ted {

// The pairs (xs[pair_x[b]], ys[pair_y[b]]) of a symbol-table call.
template <typename scalar_t>
struct SymbolBatch {
  const std::vector<OrientedTree>* xs;
  const std::vector<OrientedTree>* ys;
  const int64_t *pair_x, *pair_y;
  int64_t batch;
  const scalar_t* table;  // (S, S), gap last
  int64_t symbols;
  const int64_t *x_labels, *x_ptr, *y_labels, *y_ptr;  // labels in preorder, per tree from ptr
};

// Distances of all pairs into d: lane groups here, the pairs that do not fit
// the lanes through scalar_pair(b, workspace). False (nothing done) where the
// AVX2 paths are off or the processor lacks AVX2.
template <typename scalar_t>
bool symbol_distances_lanes(const SymbolBatch<scalar_t>& in, int64_t cells_per_pair, scalar_t* d,
                            const std::function<void(int64_t, TedWorkspace&)>& scalar_pair);

}  // namespace ted
}  // namespace bedl
