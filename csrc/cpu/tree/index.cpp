#include "index.h"

#include "../../common/forest_wide.h"
#include "../inputs.h"

namespace bedl {
namespace ted {
namespace {

void finish_index(TreeIndex& t) {
  const int64_t n = t.n;
  std::vector<int64_t> top_of_path(n + 1, 0);
  for (int64_t i = 1; i <= n; ++i) top_of_path[t.leftmost[i]] = i;
  t.keyroot_of.assign(n + 1, 0);
  for (int64_t i = 1; i <= n; ++i) t.keyroot_of[i] = top_of_path[t.leftmost[i]];
  for (int64_t i = 1; i <= n; ++i) {
    if (top_of_path[t.leftmost[i]] == i) {
      t.keyroots.push_back(i);
      t.work += static_cast<double>(i - t.leftmost[i] + 1);
    }
  }
  t.wide_width = wide_width(t.keyroots.data(), static_cast<int64_t>(t.keyroots.size()), t.leftmost.data());
  std::vector<int64_t> index_of(n + 1, 0);
  for (size_t k = 0; k < t.keyroots.size(); ++k) index_of[t.keyroots[k]] = static_cast<int64_t>(k);
  t.path_index.assign(n + 1, 0);
  for (int64_t i = 1; i <= n; ++i) t.path_index[i] = index_of[t.keyroot_of[i]];
  // Every node lies on exactly one keyroot's leftmost path: the nodes that
  // share its leftmost leaf.
  std::vector<int64_t> slot(n + 1, 0);  // leftmost leaf -> path length, then write position
  for (int64_t i = 1; i <= n; ++i) ++slot[t.leftmost[i]];
  t.path_begin.assign(t.keyroots.size() + 1, 0);
  for (size_t k = 0; k < t.keyroots.size(); ++k) {
    const int64_t leaf = t.leftmost[t.keyroots[k]];
    t.path_begin[k + 1] = t.path_begin[k] + slot[leaf];
    slot[leaf] = t.path_begin[k];
  }
  t.path_nodes.assign(n, 0);
  for (int64_t i = 1; i <= n; ++i) t.path_nodes[slot[t.leftmost[i]]++] = i;
}

// Walks the n preorder subtree sizes of tree `tree_id`, checking that they
// describe a tree (ValueError naming the tree and node), and calls
// visit(i, size, depth) for every node i; open_ends: scratch.
template <class Visit>
void walk_sizes(const int64_t* size, int64_t n, int64_t tree_id, const char* side, std::vector<int64_t>& open_ends,
                const Visit& visit) {
  BEDL_CHECK_VALUE(n >= 1, side, " tree ", tree_id, " is empty; a tree has at least one node");
  BEDL_CHECK_VALUE(size[0] == n, side, " tree ", tree_id, ": the root's subtree size is ", size[0],
              " but the tree has ", n, " nodes");
  open_ends.clear();  // ends of the subtrees that contain the current node
  for (int64_t i = 0; i < n; ++i) {
    while (!open_ends.empty() && open_ends.back() <= i) open_ends.pop_back();
    const int64_t s = size[i];
    BEDL_CHECK_VALUE(s >= 1 && i + s <= n, side, " tree ", tree_id, ": subtree size ", s,
                " of node ", i, " is out of range");
    BEDL_CHECK_VALUE(i == 0 || (!open_ends.empty() && i + s <= open_ends.back()), side, " tree ",
                tree_id, ": subtree of node ", i, " is not nested in its parent's (not preorder)");
    visit(i, s, static_cast<int64_t>(open_ends.size()));
    open_ends.push_back(i + s);
  }
}

}  // namespace

OrientedTree index_tree(const int64_t* size, int64_t n, int64_t tree_id, const char* side) {
  OrientedTree o;
  TreeIndex& t = o.left;
  TreeIndex& r = o.right;
  t.n = r.n = n;
  t.pre_of_post.assign(n + 1, 0);
  t.leftmost.assign(n + 1, 0);
  r.pre_of_post.assign(n + 1, 0);
  r.leftmost.assign(n + 1, 0);
  std::vector<int64_t> open_ends;
  open_ends.reserve(64);
  walk_sizes(size, n, tree_id, side, open_ends, [&](int64_t i, int64_t s, int64_t depth) {
    // Nodes before i in postorder: the non-ancestors before it in preorder and
    // its own descendants.
    const int64_t post = i - depth + s;  // 1-based
    t.pre_of_post[post] = i;
    t.leftmost[post] = post - s + 1;
    // The mirrored tree's postorder is the reversed preorder.
    const int64_t mpost = n - i;
    r.pre_of_post[mpost] = i;
    r.leftmost[mpost] = mpost - s + 1;
  });
  finish_index(t);
  finish_index(r);
  return o;
}

std::vector<OrientedTree> index_trees(const at::Tensor& sizes, const at::Tensor& ptr, const char* side,
                                      const uint8_t* used) {
  const int64_t count = dp::check_ptr(ptr, std::string(side) + "_ptr", sizes.size(0), "nodes");
  const int64_t* ptr_p = ptr.data_ptr<int64_t>();
  const int64_t* size_p = sizes.data_ptr<int64_t>();
  std::vector<OrientedTree> trees(count);
  std::vector<int64_t> open_ends;
  for (int64_t t = 0; t < count; ++t) {
    const int64_t* size = size_p + ptr_p[t];
    const int64_t n = ptr_p[t + 1] - ptr_p[t];
    if (used == nullptr || used[t]) {
      trees[t] = index_tree(size, n, t, side);
    } else {
      walk_sizes(size, n, t, side, open_ends, [](int64_t, int64_t, int64_t) {});
    }
  }
  return trees;
}

IndexedTrees index_both(const at::Tensor& x_sizes, const at::Tensor& x_ptr,
                        const at::Tensor& y_sizes, const at::Tensor& y_ptr) {
  IndexedTrees t;
  t.xs = index_trees(x_sizes.contiguous(), x_ptr.contiguous(), "x");
  t.same = x_sizes.is_same(y_sizes) && x_ptr.is_same(y_ptr);
  if (!t.same) t.ys_own = index_trees(y_sizes.contiguous(), y_ptr.contiguous(), "y");
  return t;
}

IndexedTrees index_pairs(const at::Tensor& x_sizes, const at::Tensor& x_ptr, const at::Tensor& y_sizes,
                         const at::Tensor& y_ptr, const int64_t* px, const int64_t* py, int64_t batch) {
  const at::Tensor xp = x_ptr.contiguous(), yp = y_ptr.contiguous();
  const int64_t nx = dp::check_ptr(xp, "x_ptr", x_sizes.size(0), "nodes");
  const int64_t ny = dp::check_ptr(yp, "y_ptr", y_sizes.size(0), "nodes");
  dp::check_pair_indices(px, py, batch, nx, ny, "tree");
  IndexedTrees t;
  t.same = x_sizes.is_same(y_sizes) && x_ptr.is_same(y_ptr);
  std::vector<uint8_t> x_used(nx, 0), y_used(t.same ? 0 : ny, 0);
  for (int64_t b = 0; b < batch; ++b) {
    x_used[px[b]] = 1;
    (t.same ? x_used : y_used)[py[b]] = 1;
  }
  t.xs = index_trees(x_sizes.contiguous(), xp, "x", x_used.data());
  if (!t.same) t.ys_own = index_trees(y_sizes.contiguous(), yp, "y", y_used.data());
  return t;
}

void check_pairs(const std::vector<OrientedTree>& xs, const std::vector<OrientedTree>& ys,
                 const int64_t* px, const int64_t* py, int64_t batch) {
  dp::check_pair_indices(px, py, batch, static_cast<int64_t>(xs.size()), static_cast<int64_t>(ys.size()), "tree");
}

}  // namespace ted
}  // namespace bedl
