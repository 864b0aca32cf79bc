// Tree distances and P's inside pass with symbol-table costs, four pairs that
// share x at a time in the lanes of AVX2 vectors (same bits as the scalar
// kernel; see lanes_kernel.h, lanes_avx2.cpp, coopt_lanes_avx2.cpp).
#pragma once

#include <functional>
#include <algorithm>
#include <vector>

#include "../avx2.h"
#include "../inputs.h"
#include "index.h"
#include "workspace.h"

namespace bedl {
namespace ted {

constexpr int kLanes = 4;

// y's side of the wide layout, which does not depend on x: built once per
// tree (and orientation) of a call. Table H's columns are l(H) - 1 .. H.
// Indices are in doubles of lane 0 (times kLanes); each lane adds its number.
struct WideY {
  int64_t width = 0, final_col = 0;  // final_col: the root's table is the last
  std::vector<double> ins;           // +inf in first columns: no insertion enters them
  std::vector<double> first_row;     // the tables' first rows (insertion sums)
  std::vector<double> below_ins;     // inserting l(j) .. j - 1 (leaf rows' tdm); +inf in first columns
  std::vector<int64_t> jump_at;      // the column the jump (match) alternative comes from
  // Where a row's tdm of the column's node lies, relative to the row's start:
  // the node's column in its own keyroot's table (itself on paths), leaf
  // keyroot k's slot (-2 - k), or the +inf slot (-1) in first columns.
  std::vector<int64_t> def_at;
  std::vector<int64_t> symbol;       // the column's symbol (0 in first columns)
  std::vector<int64_t> leaf_symbol;  // the leaf keyroots' symbols, slot by slot
  // Small tables (at most kRepBySymbolLimit rows): the replacement cost of
  // every column for each symbol s of x, at [s * width + c], for ted_lanes' rep_w.
  std::vector<double> rep_by_symbol;
  static constexpr int64_t kRepBySymbolLimit = 32;
  // For P: each keyroot's table's first column (-1: leaf keyroots, which
  // have none), and each node's tdm position as def_at has it (/ kLanes).
  std::vector<int64_t> table_col, def_of_node;
};

// What the counting instance of ted_lanes leaves for P's outside pass: the
// co-optimal flags and inside counts of the rows it computes of each
// non-leaf keyroot K of x (r0 + 1 to kx - 1, to m for the root), and the
// counts of tdm laid out as LaneWorkspace::tdm.
struct LaneCounts {
  std::vector<int64_t> block_row;   // per keyroot index of x: where its row r0 + 1 is in the blocks; -1: none
  std::vector<double> tot, other;   // block rows x W x kLanes: all derivations, those not entered by a deletion
  std::vector<uint16_t> flags;      // block rows x W: the four lanes' flags, packed (lane_flags)
  std::vector<double> tdm_count;    // (m+1) x (L+1+W) x kLanes
  std::vector<double> ones;         // W x kLanes: the first row's counts
};

struct LaneWorkspace {
  std::vector<double> fd;         // (m+1) wide rows x W columns x kLanes
  // Per row i of x: the +inf slot, one slot per leaf keyroot of y (L, the
  // most of the lanes; slot k at -2 - k), then tdm(i, node of column c) for
  // every column, as the rows of x's paths define or read it, so that other
  // rows read it contiguously: (m+1) x (L+1+W) x kLanes.
  std::vector<double> tdm;
  std::vector<double> ins, first_row, below_ins;     // W x kLanes
  std::vector<int64_t> jump_at, def_at, symbol_at;   // W x kLanes gather indices
  // What the rows on a path of x jump to: always the first row (so, the
  // same for every keyroot of x), gathered once.
  std::vector<double> jump_first;                    // W x kLanes
  std::vector<int64_t> leaf_symbol;                  // L x kLanes
  std::vector<int64_t> x_symbol;                     // x's labels in postorder
  std::vector<double> del, below_del;                // x's deletions, sums below (postorder)
  // Replacement costs by wide column (and by leaf keyroot slot) for each
  // distinct symbol of x, where x has few: contiguous loads in the rows
  // instead of a gather per step.
  std::vector<double> rep_w, leaf_rep_w;
  std::vector<int64_t> slot_of;                      // symbol -> row of rep_w, -1: none
  std::vector<int64_t> distinct_symbols;
  std::vector<int64_t> rep_slot;                     // x node -> its row of rep_w
  LaneCounts counts;                                 // the counting instance's
  // P's outside pass: constant rows (the first row's flags, zeros) and the
  // row pointers of the table it sweeps (ted_coopt_lanes_avx2.cpp's LaneSource).
  std::vector<uint16_t> first_row_flags, zero_flags;
  std::vector<double> zero_counts;
  std::vector<const double*> tdm_rows;
  struct SourceRows {
    std::vector<const uint16_t*> flags;
    std::vector<const double*> total, other;
  } source_rows;
  std::vector<uint8_t> seen;                         // a flag per table row or column (tie scales)
  std::vector<int64_t> x_labels_distinct, y_labels_distinct;
};

// The pairs (xs[pair_x[b]], ys[pair_y[b]]) of a symbol-table call.
template <typename scalar_t>
struct SymbolBatch {
  const std::vector<OrientedTree>* xs;
  const std::vector<OrientedTree>* ys;
  const int64_t *pair_x, *pair_y;
  int64_t batch;
  const scalar_t* table;  // (rows, cols): x's symbols by y's, the gap last in both
  int64_t rows, cols;
  const int64_t *x_labels, *x_ptr, *y_labels, *y_ptr;  // labels in preorder, per tree from ptr
};

// Pairs of a symbol-table call that share x (and orientation), four at a time
// on the AVX2 lanes. Built once per call: which pairs may run in groups, and
// y's wide layouts within a memory budget. Then per group its distances, or
// its co-optimal matrices P: the inside pass on the lanes, then per pair the
// scalar kernel's outside pass over the tables its co-optimal mappings pass,
// read from the lanes' rows. Same bits as the scalar kernel.
template <typename scalar_t>
class TreeLanes {
 public:
  // What the groups compute: P also keeps the rows of every keyroot of x
  // (within a memory bound: coopt_lanes_fit).
  enum class Use { kDistances, kCoopt };
  // Pairs of weight 0, where `weights` are given, never run.
  TreeLanes(const SymbolBatch<scalar_t>& in, Use use, double rel_tol = 0.0, const scalar_t* weights = nullptr);
  // Use::kCoopt: whether every cost of the table is >= 0 (P's shorter tie
  // test, in the lanes and in the scalar passes alike).
  bool nonnegative() const { return nonnegative_; }
  // Whether pair b may run in a lane group (false everywhere where the AVX2 paths are off).
  bool fits(int64_t b) const { return on_ && key_[b] >= 0; }
  // Lane groups of `pairs`: those that fit, by key and y's width, two to
  // four per group; pairs left alone are in none (scalar kernel). For P, 4 + 1
  // pairs of a key run as 3 + 2.
  void group(const std::vector<int64_t>& pairs, std::vector<std::vector<int64_t>>& groups) const;
  // Distances of pairs[0 .. count) (2 <= count <= 4, one key) into out.
  void distances(const int64_t* pairs, int count, LaneWorkspace& lanes, double* out) const;
  // P of pairs[0 .. count) (Use::kCoopt): for each lane in
  // turn, done(l, ok, distance, ws) with P in ws.p_acc and y's labels in
  // ws.y_symbol (postorder of the oriented pair, as the scalar kernel leaves
  // them); ok is false where the pair's counts overflow doubles (nothing
  // computed: the scalar kernel counts it exactly).
  void coopt(const int64_t* pairs, int count, LaneWorkspace& lanes, TedWorkspace& ws,
             const std::function<void(int, bool, double, TedWorkspace&)>& done) const;

 private:
  const SymbolBatch<scalar_t>& in_;
  Use use_;
  double rel_tol_;
  bool on_ = false;
  bool nonnegative_ = false;  // every cost of the table >= 0 (P's shorter tie test)
  std::vector<int64_t> key_;    // x tree * 2 + side (a group's pairs share it), -1: scalar
  std::vector<WideY> wide_;     // y tree * 2 + side
};

// A thread's workspaces for lane groups and the pairs beside them.
struct LanesAndScalar {
  TedWorkspace ted;
  LaneWorkspace lanes;
};

// The pairs `pairs` of a batch: their lane groups through group_fn(group,
// workspaces), the other pairs through scalar_pair(b, ted workspace); false
// (nothing done) where no group forms.
template <typename scalar_t, class GroupFn, class ScalarPair>
bool for_each_lane_group(const TreeLanes<scalar_t>& lanes, const std::vector<int64_t>& pairs,
                         int64_t cells_per_pair, const GroupFn& group_fn, const ScalarPair& scalar_pair) {
  std::vector<std::vector<int64_t>> groups;
  lanes.group(pairs, groups);
  if (groups.empty()) return false;
  std::vector<uint8_t> in_group(*std::max_element(pairs.begin(), pairs.end()) + 1, 0);
  for (const auto& g : groups) {
    for (int64_t b : g) in_group[b] = 1;
  }
  std::vector<int64_t> singles;
  for (int64_t b : pairs) {
    if (!in_group[b]) singles.push_back(b);
  }
  const int64_t g_count = static_cast<int64_t>(groups.size());
  dp::for_each_pair<LanesAndScalar>(g_count + static_cast<int64_t>(singles.size()), cells_per_pair * 2,
                                    [&](int64_t k, LanesAndScalar& ws) {
                                      if (k >= g_count) return scalar_pair(singles[k - g_count], ws.ted);
                                      group_fn(groups[k], ws);
                                    });
  return true;
}

}  // namespace ted
}  // namespace bedl
