// The tree kernels' work per GPU thread, backend-free: each thread runs whole
// pairs (b = thread, thread + threads, ...) through common/forest_passes.h with
// its own fd and tdm tables, as one CPU thread runs a pair: the same bits. The
// CUDA kernels (kernels.cu) take b from the thread index; the tests compile
// this header for the host and run every thread index (tests/cuda/).
#pragma once

#include "../../common/forest_passes.h"
#include "../seq/jobs.h"

namespace bedl {
namespace gpu {

// The trees of one side in both orientations, flat: entry e = 2 t + o is tree
// t as given (o = 0) or mirrored (o = 1); its pre_of_post and leftmost at
// node_ptr[e] .. node_ptr[e + 1] (n + 1 entries, index 0 unused), its keyroots
// at key_ptr[e] .. key_ptr[e + 1].
struct FlatTrees {
  const int64_t *pre_of_post, *leftmost, *node_ptr, *keyroots, *key_ptr;
  BEDL_HD ted::FlatTree tree(int64_t e) const {
    const int64_t base = node_ptr[e];
    return {node_ptr[e + 1] - base - 1, pre_of_post + base, leftmost + base, keyroots + key_ptr[e],
            key_ptr[e + 1] - key_ptr[e]};
  }
};

// Each pair's trees in the orientation it runs in (chosen on the host, as the
// CPU kernel chooses): entries x_entry[b] of xs and y_entry[b] of ys.
struct TreePairs {
  FlatTrees xs, ys;
  const int64_t *x_entry, *y_entry;
};

// Padded cost blocks (batch, rows, cols), preorder.
template <typename scalar_t>
struct PaddedTreePairs : TreePairs {
  const scalar_t* costs;
  int64_t rows, cols;
  BEDL_HD ted::PaddedTreeCosts<scalar_t> costs_of(int64_t b, const ted::FlatTree& x, const ted::FlatTree& y) const {
    return {costs + b * rows * cols, cols, x.pre_of_post, y.pre_of_post, x.n, y.n};
  }
  // The pair's largest absolute cost and whether its block (the unused corner too) is finite.
  BEDL_HD int32_t status(int64_t b, const ted::FlatTree& x, const ted::FlatTree& y) const {
    const scalar_t* block = costs + b * rows * cols;
    const sed::PaddedCostRows<scalar_t> rows_of{block, cols, x.n, y.n};
    const int32_t s = cost_status<scalar_t>(sed::sequence_cost_scale(rows_of, x.n, y.n), x.n, y.n);
    if (s == kPairOk && !is_finite(static_cast<double>(block[x.n * cols + y.n]))) return kPairNotFinite;
    return s;
  }
};

// Labels into an (S, S) symbol table (checked whole by the glue): tree t of x
// has its nodes' labels (preorder) at x_labels + x_ptr[t].
template <typename scalar_t>
struct SymbolTreePairs : TreePairs {
  const scalar_t* table;
  int64_t S;
  const int64_t *x_labels, *x_ptr, *y_labels, *y_ptr;
  BEDL_HD ted::SymbolTreeCosts<scalar_t> costs_of(int64_t b, const ted::FlatTree& x, const ted::FlatTree& y) const {
    return {table, S, x_labels + x_ptr[x_entry[b] / 2], y_labels + y_ptr[y_entry[b] / 2], x.pre_of_post,
            y.pre_of_post};
  }
  BEDL_HD int32_t status(int64_t, const ted::FlatTree&, const ted::FlatTree&) const { return kPairOk; }
};

// The doubles one thread needs for pairs up to (max_m, max_n): fd and tdm.
BEDL_HD int64_t tree_distance_workspace(int64_t max_m, int64_t max_n) { return 2 * (max_m + 1) * (max_n + 1); }

// Thread `thread` of `threads`: the distances of its pairs into d, a status
// per pair into status. ws: tree_distance_workspace(max_m, max_n) doubles.
template <typename scalar_t, class Pairs>
BEDL_HD void tree_distances_thread(const Pairs& pairs, int64_t batch, int64_t thread, int64_t threads, double* ws,
                                   int64_t max_m, int64_t max_n, scalar_t* d, int32_t* status) {
  for (int64_t b = thread; b < batch; b += threads) {
    const ted::FlatTree x = pairs.xs.tree(pairs.x_entry[b]);
    const ted::FlatTree y = pairs.ys.tree(pairs.y_entry[b]);
    const int32_t s = pairs.status(b, x, y);
    status[b] = s;
    if (s != kPairOk) {
      d[b] = static_cast<scalar_t>(0.0);
      continue;
    }
    double* fd = ws;
    double* tdm = ws + (max_m + 1) * (max_n + 1);
    d[b] = static_cast<scalar_t>(ted::tree_distance(x, y, pairs.costs_of(b, x, y), fd, tdm));
  }
}

}  // namespace gpu
}  // namespace bedl
