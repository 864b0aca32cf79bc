// Trees as the kernels see them: postorder, leftmost leaves, keyroots and
// their leftmost paths, in both orientations, derived from preorder subtree
// sizes (node i's subtree is nodes i .. i + size[i] - 1) concatenated over a
// table of trees with offsets ("ptr"), and checked on the way.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "../../common/forest.h"

namespace bedl {
namespace ted {

// Postorder view of one tree, derived from its preorder subtree sizes.
struct TreeIndex {
  int64_t n = 0;
  std::vector<int64_t> pre_of_post;  // 1-based postorder -> 0-based preorder (index 0 unused)
  std::vector<int64_t> leftmost;     // 1-based postorder -> 1-based postorder leftmost leaf
  std::vector<int64_t> keyroots;     // 1-based, ascending
  // Leftmost path of keyroots[k]: path_nodes[path_begin[k] .. path_begin[k + 1]), ascending.
  std::vector<int64_t> path_begin, path_nodes;
  std::vector<int64_t> keyroot_of;   // 1-based: the keyroot whose leftmost path holds the node
  std::vector<int64_t> path_index;   // 1-based: that keyroot's index in keyroots
  double work = 0.0;                 // sum of the keyroots' subtree sizes
  int64_t wide_width = 0;            // columns of all non-leaf keyroots' tables side by side (ted_lanes)
};

// Both orientations of one tree: as given, and mirrored.
struct OrientedTree {
  TreeIndex left, right;
};

// Tree `tree_id` of `side` ("x" or "y") from its n preorder subtree sizes;
// ValueError naming the tree and node if they do not describe a tree.
OrientedTree index_tree(const int64_t* size, int64_t n, int64_t tree_id, const char* side);

// The trees of a (sizes, ptr) table, every one checked. used (optional, one
// flag per tree): only the flagged trees are indexed, the others left empty
// (n = 0), so a call of a few pairs from a large table does not index it all.
std::vector<OrientedTree> index_trees(const at::Tensor& sizes, const at::Tensor& ptr, const char* side,
                                      const uint8_t* used = nullptr);

// The trees of both sides. A pairwise matrix of one collection passes the
// same tree tensors as x and y: they are indexed once.
struct IndexedTrees {
  std::vector<OrientedTree> xs, ys_own;
  bool same = false;
  const std::vector<OrientedTree>& ys() const { return same ? xs : ys_own; }
};

// Every tree of both sides indexed (the GPU's flat arrays lay out every tree;
// the CPU kernels take index_pairs).
IndexedTrees index_both(const at::Tensor& x_sizes, const at::Tensor& x_ptr, const at::Tensor& y_sizes,
                        const at::Tensor& y_ptr);

// The trees that the pairs (px[b], py[b]) use indexed, every tree checked;
// the pair indices are checked first (ValueError naming the pair).
IndexedTrees index_pairs(const at::Tensor& x_sizes, const at::Tensor& x_ptr, const at::Tensor& y_sizes,
                         const at::Tensor& y_ptr, const int64_t* px, const int64_t* py, int64_t batch);

// Checks the pair indices against the tree tables (serially, so errors name the pair).
void check_pairs(const std::vector<OrientedTree>& xs, const std::vector<OrientedTree>& ys,
                 const int64_t* px, const int64_t* py, int64_t batch);

// Each pair runs in the orientation whose keyroot tables are smaller.
struct OrientedPair {
  const TreeIndex& x;
  const TreeIndex& y;
};

inline OrientedPair orient(const OrientedTree& xo, const OrientedTree& yo) {
  const bool mirror = xo.right.work * yo.right.work < xo.left.work * yo.left.work;
  return mirror ? OrientedPair{xo.right, yo.right} : OrientedPair{xo.left, yo.left};
}

// below[j] = cost of the nodes l(j) .. j-1 (j's subtree but its root), summed
// from the leaf up along each leftmost path as a table's first row does.
template <typename CostOf>
void sums_below(const TreeIndex& t, const CostOf& cost_of, std::vector<double>& below) {
  below.resize(t.n + 1);
  accumulate_below(t.keyroots.data(), static_cast<int64_t>(t.keyroots.size()), t.leftmost.data(), 0.0,
                   [&](double sum, int64_t v) { return sum + cost_of(v); }, below.data());
}

}  // namespace ted
}  // namespace bedl
