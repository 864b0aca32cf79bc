// Which pairs of a symbol-table distance call run in lane groups on a GPU
// (jobs.h: up to 32 pairs that share x on the lanes of a warp), the wide
// layouts of their y's, and the launches by workspace size. Host code without
// torch or CUDA: the CUDA glue builds the plan and copies it to the GPU, and
// tests/cuda/host_jobs.cpp runs the same plan on the host.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "jobs.h"

namespace bedl {
namespace gpu {

// A pair runs in a lane group where both trees have two nodes or more (one-node
// trees have no non-leaf keyroot) and x's rows of y's wide layout, (x.n + 1) W,
// hold at most this many cells (each lane keeps fd and tdm of that size).
constexpr int64_t kLaneMaxCells = int64_t{1} << 15;

struct TreeLanePlan {
  // Groups in launch order: group g's pairs at group_pairs[group_begin[g] .. group_begin[g + 1]).
  std::vector<int64_t> group_begin{0}, group_pairs, group_width, group_leaves;
  // Launch t runs groups tier_begin[t] .. tier_begin[t + 1), tier_bytes[t] bytes of arrays a group.
  std::vector<int64_t> tier_begin{0}, tier_bytes;
  std::vector<int64_t> singles;  // pairs for the per-pair kernel
  // The y entries' wide layouts (empty for entries no group reads), as WideTrees reads them.
  std::vector<int64_t> wide_ptr, col_node, col_jump, col_def, leaf_ptr, leaf_node;
};

// The plan for the pairs (x_entry[b], y_entry[b]) of entries of xs and ys
// (y_entries of them): pairs of one x entry by the width of y's layout, in
// groups of up to ted::kLaneStride; the groups by their arrays' bytes, one launch per
// power of two.
inline TreeLanePlan plan_tree_lanes(const FlatTrees& xs, const FlatTrees& ys, int64_t x_entries, int64_t y_entries,
                                    const int64_t* x_entry, const int64_t* y_entry, int64_t batch) {
  const int64_t lanes = ted::kLaneStride;
  TreeLanePlan plan;
  auto nodes = [](const FlatTrees& t, int64_t e) { return t.node_ptr[e + 1] - t.node_ptr[e] - 1; };
  std::vector<int64_t> width(y_entries, -1);
  auto width_of = [&](int64_t e) {
    if (width[e] < 0) {
      const ted::FlatTree y = ys.tree(e);
      width[e] = ted::wide_width(y.keyroots, y.keyroot_count, y.leftmost);
    }
    return width[e];
  };
  // The pairs that fit, sorted by (x entry, width, index): two stable counting
  // sorts, by width and then by x entry (a comparison sort took 0.2 s for 2M pairs).
  std::vector<int64_t> by_width;
  by_width.reserve(batch);
  int64_t widest = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t m = nodes(xs, x_entry[b]), n = nodes(ys, y_entry[b]);
    if (m >= 2 && n >= 2 && (m + 1) * width_of(y_entry[b]) <= kLaneMaxCells) {
      by_width.push_back(b);
      widest = std::max(widest, width[y_entry[b]]);
    } else {
      plan.singles.push_back(b);
    }
  }
  // `in` sorted stably by key_of (keys 0 .. keys - 1); bucket[k] .. bucket[k + 1] holds key k.
  auto counting_sort = [](const std::vector<int64_t>& in, int64_t keys, const auto& key_of,
                          std::vector<int64_t>& bucket) {
    bucket.assign(keys + 1, 0);
    for (int64_t b : in) ++bucket[key_of(b) + 1];
    for (int64_t k = 1; k <= keys; ++k) bucket[k] += bucket[k - 1];
    std::vector<int64_t> at(bucket.begin(), bucket.end() - 1), out(in.size());
    for (int64_t b : in) out[at[key_of(b)]++] = b;
    return out;
  };
  std::vector<int64_t> bucket;
  by_width = counting_sort(by_width, widest + 1, [&](int64_t b) { return width[y_entry[b]]; }, bucket);
  const std::vector<int64_t> sorted = counting_sort(by_width, x_entries, [&](int64_t b) { return x_entry[b]; }, bucket);
  // The y entries' layouts.
  std::vector<uint8_t> used(y_entries, 0);
  for (int64_t b : sorted) used[y_entry[b]] = 1;
  plan.wide_ptr.assign(y_entries + 1, 0);
  plan.leaf_ptr.assign(y_entries + 1, 0);
  std::vector<int64_t> leaves(y_entries, 0), def_of;
  for (int64_t e = 0; e < y_entries; ++e) {
    plan.wide_ptr[e + 1] = plan.wide_ptr[e];
    plan.leaf_ptr[e + 1] = plan.leaf_ptr[e];
    if (!used[e]) continue;
    const ted::FlatTree y = ys.tree(e);
    def_of.assign(y.n + 1, -1);
    const int64_t w = ted::wide_columns(
        y.keyroots, y.keyroot_count, y.leftmost, def_of.data(),
        [&](int64_t h, int64_t) { plan.leaf_node.push_back(h); },
        [&](int64_t, int64_t node, int64_t jump, int64_t def) {
          plan.col_node.push_back(node);
          plan.col_jump.push_back(jump);
          plan.col_def.push_back(def);
        });
    plan.wide_ptr[e + 1] += w;
    plan.leaf_ptr[e + 1] = static_cast<int64_t>(plan.leaf_node.size());
    leaves[e] = plan.leaf_ptr[e + 1] - plan.leaf_ptr[e];
  }
  // Groups of up to `lanes` pairs of similar widths within each x entry's pairs.
  struct Group {
    int64_t begin, count, width, leaves, bytes, tier;
  };
  std::vector<Group> groups;
  groups.reserve(sorted.size() / lanes + x_entries);
  for (int64_t e = 0; e < x_entries; ++e) {
    const int64_t m = nodes(xs, e);
    for (int64_t k = bucket[e]; k < bucket[e + 1]; k += lanes) {
      Group g{k, std::min(lanes, bucket[e + 1] - k), 0, 0, 0, 0};
      for (int64_t q = g.begin; q < g.begin + g.count; ++q) {
        g.width = std::max(g.width, width[y_entry[sorted[q]]]);
        g.leaves = std::max(g.leaves, leaves[y_entry[sorted[q]]]);
      }
      g.bytes = wide_group_bytes(m, g.width, g.leaves);
      groups.push_back(g);
    }
  }
  // Launches by power of two of the groups' bytes (each sized for its largest).
  for (Group& g : groups) {
    while ((int64_t{1} << g.tier) < g.bytes) ++g.tier;
  }
  std::stable_sort(groups.begin(), groups.end(), [](const Group& p, const Group& q) { return p.tier < q.tier; });
  plan.group_pairs.resize(sorted.size());
  plan.group_begin.reserve(groups.size() + 1);
  for (auto* v : {&plan.group_width, &plan.group_leaves}) v->reserve(groups.size());
  int64_t most = 0, at = 0;
  for (size_t k = 0; k < groups.size(); ++k) {
    const Group& g = groups[k];
    std::copy(sorted.begin() + g.begin, sorted.begin() + g.begin + g.count, plan.group_pairs.begin() + at);
    at += g.count;
    plan.group_begin.push_back(at);
    plan.group_width.push_back(g.width);
    plan.group_leaves.push_back(g.leaves);
    most = std::max(most, g.bytes);
    if (k + 1 == groups.size() || groups[k + 1].tier != g.tier) {
      plan.tier_begin.push_back(static_cast<int64_t>(k) + 1);
      plan.tier_bytes.push_back(most);
      most = 0;
    }
  }
  return plan;
}

}  // namespace gpu
}  // namespace bedl
