// The tree kernels' inputs, checked once per input kind: padded cost blocks
// with the trees of both sides and the pair indices (PaddedTrees), or a symbol
// table with the nodes' labels (SymbolTrees).
#pragma once

#include <utility>
#include <vector>

#include "../inputs.h"
#include "../pair_sums.h"
#include "index.h"
#include "lanes.h"

namespace bedl {
namespace ted {

// The trees and pair indices of a batch with padded costs (batch, rows, cols),
// host tensors, checked (check_scalars: the operator's scalar arguments, where
// the kernels always checked them): the trees of both sides indexed, pair_x
// and pair_y made contiguous, every pair's trees fitting its block. Shared by
// the CPU kernels and the CUDA glue.
template <typename CheckScalars>
IndexedTrees check_padded_tree_pairs(const at::Tensor& costs, const at::Tensor& x_sizes, const at::Tensor& x_ptr,
                                     const at::Tensor& y_sizes, const at::Tensor& y_ptr, at::Tensor& pair_x,
                                     at::Tensor& pair_y, const CheckScalars& check_scalars) {
  const int64_t batch = costs.size(0), rows = costs.size(1), cols = costs.size(2);
  dp::check_index(x_sizes, "x_sizes", -1);
  dp::check_index(y_sizes, "y_sizes", -1);
  dp::check_index(x_ptr, "x_ptr", -1);
  dp::check_index(y_ptr, "y_ptr", -1);
  dp::check_index(pair_x, "pair_x", batch);
  dp::check_index(pair_y, "pair_y", batch);
  check_scalars();
  pair_x = pair_x.contiguous();
  pair_y = pair_y.contiguous();
  const int64_t* px = pair_x.data_ptr<int64_t>();
  const int64_t* py = pair_y.data_ptr<int64_t>();
  IndexedTrees trees = index_pairs(x_sizes, x_ptr, y_sizes, y_ptr, px, py, batch);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t m = trees.xs[px[b]].left.n, n = trees.ys()[py[b]].left.n;
    BEDL_CHECK_VALUE(m + 1 <= rows && n + 1 <= cols, "pair ", b, " has trees of ", m, " and ", n,
                     " nodes, which do not fit costs of shape ", costs.sizes());
  }
  return trees;
}

// A batch of tree pairs with padded costs (batch, rows, cols): the trees of
// both sides (preorder subtree sizes concatenated, offsets) indexed, the pair
// indices, every pair's trees fitting its block. check_scalars() checks the
// scalar arguments (rel_tol, temperature) where the kernels always did.
struct PaddedTrees : dp::PaddedCosts {
  IndexedTrees trees;
  at::Tensor pair_x, pair_y;
  const int64_t *px = nullptr, *py = nullptr;

  template <typename CheckScalars>
  PaddedTrees(const at::Tensor& costs_in, const at::Tensor& x_sizes, const at::Tensor& x_ptr,
              const at::Tensor& y_sizes, const at::Tensor& y_ptr, const at::Tensor& pair_x_in,
              const at::Tensor& pair_y_in, const CheckScalars& check_scalars)
      : dp::PaddedCosts(costs_in), pair_x(pair_x_in), pair_y(pair_y_in) {
    trees = check_padded_tree_pairs(costs, x_sizes, x_ptr, y_sizes, y_ptr, pair_x, pair_y, check_scalars);
    px = pair_x.data_ptr<int64_t>();
    py = pair_y.data_ptr<int64_t>();
  }
  // check_table_memory for the batch's largest pair (bytes per cell by what is computed).
  void check_memory(double bytes_per_cell, const char* what) const {
    const auto [b, m, n] = dp::largest_pair(batch, [&](int64_t k) { return sizes(k); });
    dp::check_table_memory(b, m, n, bytes_per_cell, what);
  }
  // Pair b's trees in the orientation it runs in.
  OrientedPair oriented(int64_t b) const { return orient(trees.xs[px[b]], trees.ys()[py[b]]); }
  std::pair<int64_t, int64_t> sizes(int64_t b) const {
    return {trees.xs[px[b]].left.n, trees.ys()[py[b]].left.n};
  }
};

// The checked inputs of the symbol-table tree kernels, their trees indexed,
// and the batch's extent.
struct SymbolTrees : dp::BatchExtent {
  dp::SymbolInputs in;
  IndexedTrees trees;

  SymbolTrees(const at::Tensor& symbol_costs, const at::Tensor& x_labels, const at::Tensor& x_sizes,
              const at::Tensor& x_ptr, const at::Tensor& y_labels, const at::Tensor& y_sizes,
              const at::Tensor& y_ptr, const at::Tensor& pair_x, const at::Tensor& pair_y, double rel_tol)
      : in(dp::check_symbol_inputs(symbol_costs, x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y, rel_tol)) {
    dp::check_index(x_sizes, "x_sizes", in.x_labels.size(0));
    dp::check_index(y_sizes, "y_sizes", in.y_labels.size(0));
    const int64_t* px_p = in.pair_x.data_ptr<int64_t>();
    const int64_t* py_p = in.pair_y.data_ptr<int64_t>();
    trees = index_pairs(x_sizes, x_ptr, y_sizes, y_ptr, px_p, py_p, in.batch);
    for (int64_t b = 0; b < in.batch; ++b) {
      const int64_t m = trees.xs[px_p[b]].left.n, n = trees.ys()[py_p[b]].left.n;
      add(b, m, n);
    }
  }
  // check_table_memory for the batch's largest pair (bytes per cell by what is computed).
  void check_memory(double bytes_per_cell, const char* what) const {
    const int64_t* px = in.pair_x.data_ptr<int64_t>();
    const int64_t* py = in.pair_y.data_ptr<int64_t>();
    const auto [b, m, n] = dp::largest_pair(in.batch, [&](int64_t k) {
      return std::make_pair(trees.xs[px[k]].left.n, trees.ys()[py[k]].left.n);
    });
    dp::check_table_memory(b, m, n, bytes_per_cell, what);
  }
  // Each pair's room for its list of P by label pair.
  std::vector<int64_t> list_bounds(const dp::PairLabels& labels) const {
    const int64_t* px = in.pair_x.data_ptr<int64_t>();
    const int64_t* py = in.pair_y.data_ptr<int64_t>();
    return labels.list_bounds(in, [&](int64_t b) {
      return std::make_pair(trees.xs[px[b]].left.n, trees.ys()[py[b]].left.n);
    });
  }
  template <typename scalar_t>
  SymbolBatch<scalar_t> lanes_input() const {
    return {&trees.xs, &trees.ys(), in.pair_x.data_ptr<int64_t>(), in.pair_y.data_ptr<int64_t>(), in.batch,
            in.table.data_ptr<scalar_t>(), in.rows, in.cols, in.x_labels.data_ptr<int64_t>(), in.x_ptr.data_ptr<int64_t>(),
            in.y_labels.data_ptr<int64_t>(), in.y_ptr.data_ptr<int64_t>()};
  }
};

}  // namespace ted
}  // namespace bedl
