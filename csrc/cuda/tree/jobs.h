// The tree kernels' work per GPU thread, backend-free: each thread runs whole
// pairs (b = thread, thread + threads, ...) through common/forest_passes.h
// (distances) or common/forest_coopt.h (P) with its own slice of a workspace,
// as one CPU thread runs a pair: the same bits. The CUDA kernels (kernels.cu)
// take b from the thread index; the tests compile this header for the host and
// run every thread index (tests/cuda/).
#pragma once

#include <type_traits>

#include "../../common/forest_coopt.h"
#include "../../common/forest_soft.h"
#include "../../common/forest_wide.h"
#include "../seq/jobs.h"

namespace bedl {
namespace gpu {

// The trees of one side in both orientations, flat (cpu/tree/flat.h): entry
// e = 2 t + o is tree t as given (o = 0) or mirrored (o = 1); its pre_of_post,
// leftmost, path_index and path_nodes at node_ptr[e] .. node_ptr[e + 1] (n + 1
// entries, index 0 unused), its keyroots at key_ptr[e] .. key_ptr[e + 1] and
// their paths' bounds at path_begin + key_ptr[e] + e (one more entry).
struct FlatTrees {
  const int64_t *pre_of_post, *leftmost, *node_ptr, *keyroots, *key_ptr, *path_index, *path_begin, *path_nodes;
  BEDL_HD ted::FlatTree tree(int64_t e) const {
    const int64_t base = node_ptr[e];
    return {node_ptr[e + 1] - base - 1,   pre_of_post + base,         leftmost + base,
            keyroots + key_ptr[e],        key_ptr[e + 1] - key_ptr[e], path_index + base,
            path_begin + key_ptr[e] + e, path_nodes + base + 1};
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

// Labels into a (rows, cols) symbol table (checked whole by the glue; x's
// labels index rows, y's columns): tree t of x has its nodes' labels
// (preorder) at x_labels + x_ptr[t].
template <typename scalar_t>
struct SymbolTreePairs : TreePairs {
  const scalar_t* table;
  int64_t rows, cols;
  const int64_t *x_labels, *x_ptr, *y_labels, *y_ptr;
  BEDL_HD ted::SymbolTreeCosts<scalar_t> costs_of(int64_t b, const ted::FlatTree& x, const ted::FlatTree& y) const {
    return {table, rows, cols, x_labels + x_ptr[x_entry[b] / 2], y_labels + y_ptr[y_entry[b] / 2], x.pre_of_post,
            y.pre_of_post};
  }
  BEDL_HD int32_t status(int64_t, const ted::FlatTree&, const ted::FlatTree&) const { return kPairOk; }
};

// The doubles one thread needs for pairs up to (max_m, max_n): fd and tdm.
BEDL_HD int64_t tree_distance_workspace(int64_t max_m, int64_t max_n) { return 2 * (max_m + 1) * (max_n + 1); }

// Thread `thread` of `threads`: the distances of its pairs among order[0 ..
// count) (nullptr: 0 .. count) into d, a status per pair into status. ws:
// tree_distance_workspace(max_m, max_n) doubles.
template <typename scalar_t, class Pairs>
BEDL_HD void tree_distances_thread(const Pairs& pairs, const int64_t* order, int64_t count, int64_t thread,
                                   int64_t threads, double* ws, int64_t max_m, int64_t max_n, scalar_t* d,
                                   int32_t* status) {
  for (int64_t k = thread; k < count; k += threads) {
    const int64_t b = order == nullptr ? k : order[k];
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

// ---- Lane groups: up to 32 pairs that share x on the 32 lanes of a warp ----
//
// Each lane runs its pair on y's wide layout (common/forest_wide.h), as the
// CPU's AVX2 lanes run four: every lane of a group is at the same row and
// column at once, and the group's arrays are interleaved by lane (element k of
// lane l at 32 k + l), so a warp's loads and stores of a row are one
// contiguous run. The lanes read and write only their own elements, so any
// schedule of them gives what the warp gives (tests/cuda/host_jobs.cpp runs
// them on host threads).

// Where y entry e's wide layout lies (cuda/tree/lanes_plan.h builds them):
// columns wide_ptr[e] .. wide_ptr[e + 1], leaf keyroots leaf_ptr[e] .. leaf_ptr[e + 1].
struct WideTrees {
  const int64_t *wide_ptr, *col_node, *col_jump, *col_def, *leaf_ptr, *leaf_node;
  BEDL_HD ted::WideColumns columns(int64_t e) const {
    const int64_t c = wide_ptr[e], k = leaf_ptr[e];
    return {wide_ptr[e + 1] - c, col_node + c, col_jump + c, col_def + c, leaf_ptr[e + 1] - k, leaf_node + k};
  }
};

// Group g: the pairs pairs[begin[g] .. begin[g + 1]) (1 to ted::kLaneStride
// of them, one x entry), the widest of their y's layouts (width) and the most leaf
// keyroots (leaves).
struct LaneGroups {
  const int64_t *begin, *pairs, *width, *leaves;
};

// The bytes of one group's arrays, all lanes (x of m nodes, width W, L leaf keyroots).
BEDL_HD int64_t wide_group_bytes(int64_t m, int64_t W, int64_t L) {
  const int64_t rows = m + 1, lanes = ted::kLaneStride;
  return lanes * (Carver::bytes(rows * W, 8) + Carver::bytes(rows * (L + 1 + W), 8) + 4 * Carver::bytes(W, 8) +
                  3 * Carver::bytes(W, 4) + 2 * Carver::bytes(rows, 8) + Carver::bytes(L + 1, 4) +
                  Carver::bytes(rows, 4));
}

// Lane `lane`'s slices of a group's arrays (wide_group_bytes of them at ws).
BEDL_HD ted::WideLaneArrays wide_lane_arrays(char* ws, int64_t m, int64_t W, int64_t L, int64_t lane) {
  const int64_t rows = m + 1, lanes = ted::kLaneStride;
  Carver c{ws};
  auto slice = [&](auto* array, int64_t n) {
    using T = std::remove_pointer_t<decltype(array)>;
#ifdef BEDL_LANE_BOUNDS
    return ted::LaneSlice<T>{array + lane, array, array + n * lanes, lane};
#else
    (void)n;
    return ted::LaneSlice<T>{array + lane};
#endif
  };
  auto doubles = [&](int64_t n) { return slice(c.take<double>(n * lanes), n); };
  auto indices = [&](int64_t n) { return slice(c.take<int32_t>(n * lanes), n); };
  ted::WideLaneArrays a;
  a.fd = doubles(rows * W);
  a.tdm = doubles(rows * (L + 1 + W));
  a.ins = doubles(W);
  a.first_row = doubles(W);
  a.below_ins = doubles(W);
  a.jump_first = doubles(W);
  a.jump_at = indices(W);
  a.def_at = indices(W);
  a.symbol_at = indices(W);
  a.del = doubles(rows);
  a.below_del = doubles(rows);
  a.leaf_symbol = indices(L + 1);
  a.x_symbol = indices(rows);
  return a;
}

// Lane `lane` of group g (of ted::kLaneStride, the group's arrays at ws): its
// pair's distance into d (lanes past the group's pairs repeat its last pair
// and write nothing).
template <typename scalar_t>
BEDL_HD void tree_lane_job(const SymbolTreePairs<scalar_t>& pairs, const WideTrees& wide, const LaneGroups& groups,
                           int64_t g, int64_t lane, char* ws, scalar_t* d, int32_t* status) {
  const int64_t begin = groups.begin[g], count = groups.begin[g + 1] - begin;
  const int64_t b = groups.pairs[begin + (lane < count ? lane : count - 1)];
  const int64_t xe = pairs.x_entry[b], ye = pairs.y_entry[b];
  const ted::FlatTree x = pairs.xs.tree(xe);
  const ted::FlatTree y = pairs.ys.tree(ye);
  const int64_t W = groups.width[g], L = groups.leaves[g];
  const double dist = ted::wide_tree_distance(x, pairs.x_labels + pairs.x_ptr[xe / 2], y,
                                              pairs.y_labels + pairs.y_ptr[ye / 2], wide.columns(ye), W, L,
                                              pairs.table, pairs.rows, pairs.cols,
                                              wide_lane_arrays(ws, x.n, W, L, lane));
  if (lane < count) {
    d[b] = static_cast<scalar_t>(dist);
    status[b] = kPairOk;
  }
}

// One thread's buffers for P of pairs up to (max_m, max_n), carved from
// `bytes` (tree_coopt_workspace_bytes of them, 16-byte aligned).
template <typename Count>
BEDL_HD ted::TreeCooptBuffers<Count> tree_coopt_buffers(char* bytes, int64_t max_m, int64_t max_n) {
  const int64_t cells = (max_m + 1) * (max_n + 1);
  Carver c{bytes};
  ted::TreeCooptBuffers<Count> buf;
  buf.fd = c.take<double>(cells);
  buf.tdm = c.take<double>(cells);
  buf.p_acc = c.take<double>(cells);
  buf.total = c.take<Count>(cells);
  buf.other = c.take<Count>(cells);
  buf.tdm_count = c.take<Count>(cells);
  buf.out_any = c.take<Count>(cells);
  buf.out_ins = c.take<Count>(cells);
  buf.out_tdm = c.take<Count>(cells);
  buf.reach_end = c.take<int64_t>(max_m + 1);
  buf.flags = c.take<uint8_t>(cells);
  return buf;
}

template <typename Count>
BEDL_HD int64_t tree_coopt_workspace_bytes(int64_t max_m, int64_t max_n) {
  const int64_t cells = (max_m + 1) * (max_n + 1);
  return 3 * Carver::bytes(cells, 8) + 6 * Carver::bytes(cells, sizeof(Count)) + Carver::bytes(max_m + 1, 8) +
         Carver::bytes(cells, 1);
}

// Thread `thread` of `threads`: the distances and P of the pairs listed in
// order[0 .. count) (all pairs, or those whose counts overflowed doubles),
// counts of type Count. P goes to p (batch, rows, cols), zero on entry, in the
// cost layout (preorder; column n deletions, row m insertions); a pair whose
// counts overflow Count gets kPairCountsOverflow (FastCount: solve again with
// dp::Count) or kPairNoCoOptimal (dp::Count).
template <typename Count, typename scalar_t, class Pairs>
BEDL_HD void tree_coopt_thread(const Pairs& pairs, const int64_t* order, int64_t count, int64_t thread,
                               int64_t threads, char* ws, int64_t max_m, int64_t max_n, double rel_tol, scalar_t* d,
                               scalar_t* p, int64_t rows, int64_t cols, int32_t* status) {
  const ted::TreeCooptBuffers<Count> buf = tree_coopt_buffers<Count>(ws, max_m, max_n);
  for (int64_t k = thread; k < count; k += threads) {
    const int64_t b = order == nullptr ? k : order[k];
    const ted::FlatTree x = pairs.xs.tree(pairs.x_entry[b]);
    const ted::FlatTree y = pairs.ys.tree(pairs.y_entry[b]);
    const int32_t s = pairs.status(b, x, y);
    if (s != kPairOk) {
      status[b] = s;
      d[b] = static_cast<scalar_t>(0.0);
      continue;
    }
    const auto costs = pairs.costs_of(b, x, y);
    const dp::Tie tie{rel_tol, ted::tree_cost_scale(costs, x.n, y.n)};
    double distance;
    if (!ted::tree_coopt<Count>(x, y, costs, tie, buf, &distance)) {
      status[b] = sizeof(Count) == sizeof(dp::FastCount) ? kPairCountsOverflow : kPairNoCoOptimal;
      continue;
    }
    status[b] = kPairOk;
    d[b] = static_cast<scalar_t>(distance);
    ted::store_tree_p(x.pre_of_post, y.pre_of_post, x.n, y.n, buf.p_acc, p + b * rows * cols, cols);
  }
}

// The bytes one thread needs for the soft passes of tree pairs up to
// (max_m, max_n): costs, reduced costs, column minima, P, reach_end, and the
// weight arrays in the wider weight type (the doubles' pass uses the same bytes).
BEDL_HD int64_t tree_soft_workspace_bytes(int64_t max_m, int64_t max_n) {
  const int64_t w = max_n + 1, cells = (max_m + 1) * w, wide = sizeof(soft::WideWeight);
  return SoftScratch::bytes(max_m, max_n) + Carver::bytes(max_m + 1, 8) + 7 * Carver::bytes(cells, wide) +
         Carver::bytes(w, wide) + Carver::bytes(max_m + 1, wide);
}

// The soft passes of one pair in weight type W on the thread's weight bytes.
template <typename W>
BEDL_HD bool tree_soft_in(char* bytes, const ted::FlatTree& x, const ted::FlatTree& y, const double* reduced,
                          double temperature, bool need_grad, double* p_acc, int64_t* reach_end, double* log_total) {
  const int64_t cells = (x.n + 1) * (y.n + 1);
  Carver c{bytes};
  soft::TedSoftArrays<W> a;
  a.weight = c.take<W>(cells);
  a.tdm = c.take<W>(cells);
  a.tot = c.take<W>(cells);
  a.other = c.take<W>(cells);
  a.out_any = c.take<W>(cells);
  a.out_ins = c.take<W>(cells);
  a.out_tdm = c.take<W>(cells);
  a.below_ins = c.take<W>(y.n + 1);
  a.below_del = c.take<W>(x.n + 1);
  a.p_acc = p_acc;
  a.reach_end = reach_end;
  return soft::ted_soft_pass(x, y, reduced, temperature, need_grad, a, log_total);
}

// Thread `thread` of `threads`: the soft distances (and with need_grad the
// expected alignments into p, zero on entry, the padded preorder layout) of its
// padded pairs, weights as doubles unless they leave their range (as the CPU's
// ted_soft_solve); a status per pair.
template <typename scalar_t>
BEDL_HD void tree_soft_thread(const PaddedTreePairs<scalar_t>& pairs, int64_t batch, int64_t thread, int64_t threads,
                              char* ws, int64_t max_m, int64_t max_n, double temperature, bool need_grad, scalar_t* d,
                              scalar_t* p, int32_t* status) {
  Carver c{ws};
  const SoftScratch scratch = SoftScratch::carve(c, max_m, max_n);
  double *cost = scratch.cost, *reduced = scratch.reduced, *p_acc = scratch.p_acc;
  int64_t* reach_end = c.take<int64_t>(max_m + 1);
  char* weights = c.at;
  for (int64_t b = thread; b < batch; b += threads) {
    const ted::FlatTree x = pairs.xs.tree(pairs.x_entry[b]);
    const ted::FlatTree y = pairs.ys.tree(pairs.y_entry[b]);
    int32_t s = pairs.status(b, x, y);
    const auto costs = pairs.costs_of(b, x, y);
    if (s == kPairOk && !soft_range_ok<scalar_t>(ted::tree_cost_scale(costs, x.n, y.n), temperature, x.n + y.n)) {
      s = kPairSoftRange;
    }
    status[b] = s;
    if (s != kPairOk) {
      d[b] = static_cast<scalar_t>(0.0);
      continue;
    }
    const int64_t m = x.n, n = y.n, w = n + 1;
    // the postorder kernel layout: [i][j] replaces x_i by y_j, [i][0] deletes x_i, [0][j] inserts y_j
    cost[0] = 0.0;
    for (int64_t j = 1; j <= n; ++j) cost[j] = costs.ins(j);
    for (int64_t i = 1; i <= m; ++i) {
      cost[i * w] = costs.del(i);
      for (int64_t j = 1; j <= n; ++j) cost[i * w + j] = costs.rep(i, j);
    }
    const double shift = soft::reduce_costs(cost, m, n, reduced, scratch.column_min);
    double log_total = 0.0;
    if (m + n > soft::kFastNodes || !tree_soft_in<soft::PlainWeight>(weights, x, y, reduced, temperature, need_grad,
                                                                      p_acc, reach_end, &log_total)) {
      // (cannot fail: the cheapest mapping's weight is a positive WideWeight)
      tree_soft_in<soft::WideWeight>(weights, x, y, reduced, temperature, need_grad, p_acc, reach_end, &log_total);
    }
    d[b] = static_cast<scalar_t>(shift - temperature * log_total);
    if (!need_grad) continue;
    ted::store_tree_p(x.pre_of_post, y.pre_of_post, m, n, p_acc, p + b * pairs.rows * pairs.cols, pairs.cols);
  }
}

}  // namespace gpu
}  // namespace bedl
