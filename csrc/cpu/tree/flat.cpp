#include "flat.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace bedl {
namespace ted {
namespace {

at::Tensor as_tensor(const std::vector<int64_t>& v) {
  at::Tensor t = at::empty({static_cast<int64_t>(v.size())}, at::kLong);
  std::copy(v.begin(), v.end(), t.data_ptr<int64_t>());
  return t;
}

}  // namespace

FlatSide flatten(const std::vector<OrientedTree>& trees) {
  std::vector<int64_t> pre, left, node_ptr{0}, keys, key_ptr{0}, path_index, path_begin, path_nodes;
  for (const OrientedTree& o : trees) {
    for (const TreeIndex* t : {&o.left, &o.right}) {
      pre.insert(pre.end(), t->pre_of_post.begin(), t->pre_of_post.end());
      left.insert(left.end(), t->leftmost.begin(), t->leftmost.end());
      keys.insert(keys.end(), t->keyroots.begin(), t->keyroots.end());
      path_index.insert(path_index.end(), t->path_index.begin(), t->path_index.end());
      path_begin.insert(path_begin.end(), t->path_begin.begin(), t->path_begin.end());
      path_nodes.push_back(0);
      path_nodes.insert(path_nodes.end(), t->path_nodes.begin(), t->path_nodes.end());
      node_ptr.push_back(static_cast<int64_t>(pre.size()));
      key_ptr.push_back(static_cast<int64_t>(keys.size()));
    }
  }
  return {as_tensor(pre),      as_tensor(left),       as_tensor(node_ptr),   as_tensor(keys),
          as_tensor(key_ptr),  as_tensor(path_index), as_tensor(path_begin), as_tensor(path_nodes)};
}

FlatTreePairs flat_tree_pairs(const IndexedTrees& trees, const int64_t* px, const int64_t* py, int64_t batch) {
  FlatTreePairs out;
  out.x = flatten(trees.xs);
  out.y = trees.same ? out.x : flatten(trees.ys());
  std::vector<int64_t> xe(batch), ye(batch);
  for (int64_t b = 0; b < batch; ++b) {
    const OrientedTree& xo = trees.xs[px[b]];
    const OrientedTree& yo = trees.ys()[py[b]];
    const bool mirror = &orient(xo, yo).x == &xo.right;
    xe[b] = 2 * px[b] + (mirror ? 1 : 0);
    ye[b] = 2 * py[b] + (mirror ? 1 : 0);
    out.max_m = std::max(out.max_m, xo.left.n);
    out.max_n = std::max(out.max_n, yo.left.n);
  }
  out.x_entry = as_tensor(xe);
  out.y_entry = as_tensor(ye);
  return out;
}

}  // namespace ted
}  // namespace bedl
