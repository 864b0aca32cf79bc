// The tree edit distance on y's wide layout, backend-free: for a keyroot K of
// x, the forest tables (K, H) over every non-leaf keyroot H of y stand side
// by side in one wide row, each with its first column, so a row of K's tables
// is one loop over W columns whatever y's shape. Pairs that share x then run
// the same loops in lockstep, one pair per lane: four lanes of AVX2 vectors on
// the CPU (cpu/tree/lanes_kernel.h, the same layout and cells), 32 lanes of a
// warp on a GPU (cuda/tree/jobs.h). Every cell is common/forest.h's, in the
// order of the scalar kernel, so every lane gives the scalar kernel's bits.
//
// The layout of y (wide_columns): the columns of its non-leaf keyroots' tables
// in keyroot order. Column c holds node(c) (1-based postorder; 0 in a table's
// first column), the column its match jumps from (l(j) - 1 in its table), and
// where its node's tdm is defined: its own column on the table's leftmost
// path, the column of an earlier table elsewhere, -2 - k for the k-th leaf
// keyroot (tdm in closed form) and -1 in first columns (+inf: no match).
#pragma once

#include "forest.h"
#include "forest_passes.h"

#ifdef BEDL_LANE_BOUNDS
#include <cstdio>
#include <cstdlib>
#endif

namespace bedl {
namespace ted {

// The wide layout of a tree's keyroot tables: leaf(h, k) for the k-th leaf
// keyroot h, column(c, node, jump, def) for every column in turn; def_of: n + 1
// entries of scratch. Returns the width.
template <class Leaf, class Column>
BEDL_HD int64_t wide_columns(const int64_t* keyroots, int64_t keyroot_count, const int64_t* leftmost,
                             int64_t* def_of, const Leaf& leaf, const Column& column) {
  int64_t width = 0, leaves = 0;
  for (int64_t k = 0; k < keyroot_count; ++k) {
    const int64_t h = keyroots[k], c0 = leftmost[h] - 1;
    if (c0 + 1 == h) {
      def_of[h] = -2 - leaves;
      leaf(h, leaves++);
      continue;
    }
    const int64_t base = width;
    column(width++, int64_t{0}, base, int64_t{-1});
    for (int64_t j = c0 + 1; j <= h; ++j) {
      if (leftmost[j] == c0 + 1) def_of[j] = width;  // on the table's leftmost path: defined here
      column(width, j, base + leftmost[j] - 1 - c0, def_of[j]);
      ++width;
    }
  }
  return width;
}

// The width of that layout alone: the columns of the non-leaf keyroots' tables.
BEDL_HD int64_t wide_width(const int64_t* keyroots, int64_t keyroot_count, const int64_t* leftmost) {
  int64_t width = 0;
  for (int64_t k = 0; k < keyroot_count; ++k) {
    const int64_t h = keyroots[k];
    if (leftmost[h] != h) width += h - leftmost[h] + 2;
  }
  return width;
}

// One tree's wide layout, as wide_columns lays it out (arrays of `width` columns).
struct WideColumns {
  int64_t width;
  const int64_t *node, *jump, *def;
  int64_t leaves;
  const int64_t* leaf_node;  // the leaf keyroots' nodes, in order
};

// The lanes that share a group's arrays interleaved (a warp's).
constexpr int64_t kLaneStride = 32;

// A lane's elements of an array that kLaneStride lanes share interleaved:
// element k at base[k * kLaneStride] (base already at the lane's first
// element). Built with BEDL_LANE_BOUNDS (the host tests), every access checks
// that it lies in its array (begin .. end) and among its own lane's elements.
template <typename T>
struct LaneSlice {
  T* base;
#ifdef BEDL_LANE_BOUNDS
  const T* begin;
  const T* end;
  int64_t lane;
  T& operator[](int64_t k) const {
    const T* p = base + k * kLaneStride;
    if (p < begin || p >= end || (p - begin) % kLaneStride != lane) {
      std::fprintf(stderr, "lane %lld reads element %lld outside its slice\n", static_cast<long long>(lane),
                   static_cast<long long>(k));
      std::abort();
    }
    return *const_cast<T*>(p);
  }
  LaneSlice at(int64_t k) const { return {base + k * kLaneStride, begin, end, lane}; }
#else
  BEDL_HD T& operator[](int64_t k) const { return base[k * kLaneStride]; }
  BEDL_HD LaneSlice at(int64_t k) const { return {base + k * kLaneStride}; }
#endif
};

// One lane's arrays for a pair of the group (x of m nodes, the group's width
// W and leaf keyroots L, wide_lane_arrays carves them): fd, (m + 1) rows of W;
// tdm, (m + 1) rows of L + 1 + W (+inf slot, leaf slots, columns); y's columns
// padded to W; x's labels and deletions.
struct WideLaneArrays {
  LaneSlice<double> fd, tdm, ins, first_row, below_ins, jump_first, del, below_del;
  LaneSlice<int32_t> jump_at, def_at, symbol_at, leaf_symbol, x_symbol;  // (int32: fewer bytes a cell)
};

// The distance of x and y (y.n >= 2 and x.n >= 2, yw y's wide layout, W and
// L at least its width and leaf keyroots) with symbol-table costs, on one
// lane's arrays: ted_lanes' cells in ted_lanes' order (the CPU's four lanes),
// so the scalar kernel's bits. Labels in preorder.
template <typename scalar_t>
BEDL_HD double wide_tree_distance(const FlatTree& x, const int64_t* x_labels, const FlatTree& y,
                                  const int64_t* y_labels, const WideColumns& yw, int64_t W, int64_t L,
                                  const scalar_t* table, int64_t R, int64_t C, const WideLaneArrays& a) {
  const double inf = double_of_bits(uint64_t{0x7ff0000000000000});  // +inf
  const int64_t m = x.n, gap = C - 1;
  const scalar_t* gap_row = table + (R - 1) * C;
  // x's side.
  for (int64_t i = 1; i <= m; ++i) {
    a.x_symbol[i] = static_cast<int32_t>(x_labels[x.pre_of_post[i]]);
    a.del[i] = static_cast<double>(table[a.x_symbol[i] * C + gap]);
  }
  accumulate_below(x.keyroots, x.keyroot_count, x.leftmost, 0.0,
                   [&](double sum, int64_t v) { return sum + a.del[v]; }, a.below_del);
  // y's columns, padded to W (padding: a first column that jumps to column 0);
  // its insertions below each node in fd's first elements until the rows start.
  auto y_symbol = [&](int64_t j) { return y_labels[y.pre_of_post[j]]; };
  auto ins_of = [&](int64_t j) { return static_cast<double>(gap_row[y_symbol(j)]); };
  const LaneSlice<double> below = a.fd;
  accumulate_below(y.keyroots, y.keyroot_count, y.leftmost, 0.0,
                   [&](double sum, int64_t v) { return sum + ins_of(v); }, below);
  double sum = 0.0;
  for (int64_t c = 0; c < W; ++c) {
    const int64_t j = c < yw.width ? yw.node[c] : 0;
    const double ins = j == 0 ? inf : ins_of(j);
    sum = j == 0 ? 0.0 : sum + ins;
    a.ins[c] = ins;
    a.first_row[c] = sum;
    a.below_ins[c] = j == 0 ? inf : below[j];
    a.jump_at[c] = static_cast<int32_t>(c < yw.width ? yw.jump[c] : 0);
    a.def_at[c] = static_cast<int32_t>(c < yw.width ? yw.def[c] : -1);
    a.symbol_at[c] = static_cast<int32_t>(j == 0 ? 0 : y_symbol(j));
  }
  for (int64_t c = 0; c < W; ++c) a.jump_first[c] = a.first_row[a.jump_at[c]];
  for (int64_t k = 0; k < L; ++k) a.leaf_symbol[k] = static_cast<int32_t>(k < yw.leaves ? y_symbol(yw.leaf_node[k]) : 0);
  const int64_t tdm_len = L + 1 + W;
  auto fd_row = [&](int64_t i) { return a.fd.at(i * W); };
  auto tdm_row = [&](int64_t i) { return a.tdm.at(i * tdm_len + L + 1); };  // [-1]: +inf, [-2 - k]: leaf k
  for (int64_t i = 0; i <= m; ++i) tdm_row(i)[-1] = inf;
  auto rep = [&](int64_t i, int64_t symbol) { return static_cast<double>(table[a.x_symbol[i] * C + symbol]); };

  for (int64_t k = 0; k < x.keyroot_count; ++k) {
    const int64_t kx = x.keyroots[k], r0 = x.leftmost[kx] - 1;
    if (r0 + 1 == kx) continue;  // leaf keyroots: read in closed form by the rows of leaves
    // y's leaf keyroots against the nodes on K's path: x deleted but for the root.
    for (int64_t s = x.path_begin[k]; s < x.path_begin[k + 1]; ++s) {
      const int64_t i = x.path_nodes[s];
      const LaneSlice<double> slots = tdm_row(i);
      for (int64_t q = 0; q < L; ++q) slots[-2 - q] = leaf_tdm_value(a.below_del[i], rep(i, a.leaf_symbol[q]));
    }
    const int64_t rows_end = kx == m ? m : kx - 1;
    for (int64_t i = r0 + 1; i <= rows_end; ++i) {
      const int64_t li = x.leftmost[i];
      const LaneSlice<double> up = i - 1 == r0 ? a.first_row : fd_row(i - 1);
      const LaneSlice<double> cur = fd_row(i), jump = fd_row(li - 1), tdm_i = tdm_row(i);
      const double del = a.del[i];
      double left = inf;
      if (li != r0 + 1 && li != i) {
        // i lies on a path below: its row of tdm is complete.
        for (int64_t c = 0; c < W; ++c) {
          left = forest_value(up[c], del, jump[a.jump_at[c]], tdm_i[c], left, a.ins[c]);
          cur[c] = left;
        }
      } else if (li != r0 + 1) {
        // A leaf: tdm(i, j) inserts y's subtree of j but j, matched to i.
        for (int64_t c = 0; c < W; ++c) {
          const double tv = leaf_tdm_value(a.below_ins[c], rep(i, a.symbol_at[c]));
          left = forest_value(up[c], del, jump[a.jump_at[c]], tv, left, a.ins[c]);
          cur[c] = left;
        }
      } else {
        // Rows on K's path define their tdm as they go and jump to the first row.
        double diag = 0.0;
        for (int64_t c = 0; c < W; ++c) {
          const double above = up[c];
          const int64_t def = a.def_at[c];
          const double tv = def == c ? diag + rep(i, a.symbol_at[c]) : tdm_i[def];
          tdm_i[c] = tv;
          diag = above;
          left = forest_value(above, del, a.jump_first[c], tv, left, a.ins[c]);
          cur[c] = left;
        }
      }
    }
    if (kx == m) break;  // the root: the last keyroot
    // The row of tdm of kx, as a path row would leave it (from row kx - 1).
    const LaneSlice<double> up = fd_row(kx - 1), tdm_k = tdm_row(kx);
    double diag = 0.0;
    for (int64_t c = 0; c < W; ++c) {
      const int64_t def = a.def_at[c];
      tdm_k[c] = def == c ? diag + rep(kx, a.symbol_at[c]) : tdm_k[def];
      diag = up[c];
    }
  }
  return fd_row(m)[yw.width - 1];
}

}  // namespace ted
}  // namespace bedl
