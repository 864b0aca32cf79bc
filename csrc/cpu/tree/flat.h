// Indexed trees as flat int64 tensors for kernels that take raw arrays (the
// GPU's, gpu::FlatTrees): every tree in both orientations, entry 2 t + o, and
// each pair's entries in the orientation the CPU kernel runs it in.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "index.h"

namespace bedl {
namespace ted {

// One side's trees: pre_of_post, leftmost, path_index and path_nodes (n + 1
// entries per tree and orientation, at node_ptr; path_nodes' first unused),
// keyroots (at key_ptr), path_begin (one more per entry: entry e's at
// key_ptr[e] + e). TreeIndex's arrays, concatenated.
struct FlatSide {
  at::Tensor pre_of_post, leftmost, node_ptr, keyroots, key_ptr, path_index, path_begin, path_nodes;
};

struct FlatTreePairs {
  FlatSide x, y;
  at::Tensor x_entry, y_entry;  // (batch,): each pair's entries, oriented as orient() does
  int64_t max_m = 0, max_n = 0;
};

FlatSide flatten(const std::vector<OrientedTree>& trees);

// The pairs (px[b], py[b]) of `trees` (checked by check_pairs), flat.
FlatTreePairs flat_tree_pairs(const IndexedTrees& trees, const int64_t* px, const int64_t* py, int64_t batch);

}  // namespace ted
}  // namespace bedl
