// The tree edit distance over one pair, backend-free: every keyroot pair's
// forest table in turn (common/forest.h's geometry and cell), on raw buffers
// the caller sizes. The GPU kernel runs it per thread; the CPU kernel's
// distance pass computes the same cells (it skips the rows and columns no
// later table reads and uses closed forms for leaf keyroots, with the same
// sums in the same order), so the bits agree.
//
// A cost source `Costs` gives doubles by 1-based postorder: rep(i, j)
// replacing x_i by y_j, del(i) deleting x_i, ins(j) inserting y_j.
#pragma once

#include "forest.h"

namespace bedl {
namespace ted {

// One orientation of a tree in flat arrays: n nodes; pre_of_post and leftmost
// indexed 1..n (1-based postorder; pre_of_post gives the 0-based preorder
// node, leftmost the leftmost leaf); its keyroots ascending (the root last);
// and for P (common/forest_coopt.h) the keyroots' leftmost paths: each node's
// keyroot index (1..n), and keyroot k's path at path_nodes[path_begin[k] ..
// path_begin[k + 1]) (null where only distances are computed).
struct FlatTree {
  int64_t n;
  const int64_t* pre_of_post;
  const int64_t* leftmost;
  const int64_t* keyroots;
  int64_t keyroot_count;
  const int64_t* path_index = nullptr;
  const int64_t* path_begin = nullptr;
  const int64_t* path_nodes = nullptr;
};

// A pair's costs from its padded block (row stride `stride`, preorder rows
// and columns; row m the insertions, column n the deletions), by postorder.
template <typename scalar_t>
struct PaddedTreeCosts {
  const scalar_t* c;
  int64_t stride;
  const int64_t *x_pre, *y_pre;  // pre_of_post of both trees
  int64_t m, n;
  BEDL_HD double rep(int64_t i, int64_t j) const { return static_cast<double>(c[x_pre[i] * stride + y_pre[j]]); }
  BEDL_HD double del(int64_t i) const { return static_cast<double>(c[x_pre[i] * stride + n]); }
  BEDL_HD double ins(int64_t j) const { return static_cast<double>(c[m * stride + y_pre[j]]); }
};

// A pair's costs from a (rows, cols) symbol table through the nodes' labels
// (preorder), by postorder: x's labels index rows, y's columns, and the last
// row and the last column are the gap.
template <typename scalar_t>
struct SymbolTreeCosts {
  const scalar_t* table;
  int64_t rows, cols;
  const int64_t *x_labels, *y_labels;  // preorder
  const int64_t *x_pre, *y_pre;
  BEDL_HD double rep(int64_t i, int64_t j) const {
    return static_cast<double>(table[x_labels[x_pre[i]] * cols + y_labels[y_pre[j]]]);
  }
  BEDL_HD double del(int64_t i) const { return static_cast<double>(table[x_labels[x_pre[i]] * cols + cols - 1]); }
  BEDL_HD double ins(int64_t j) const { return static_cast<double>(table[(rows - 1) * cols + y_labels[y_pre[j]]]); }
};

// The forest table of keyroots (kx, ky): fd (row stride w) for its cells and
// tdm for the subtree pairs it defines.
template <class Costs>
BEDL_HD void forest_distance_table(const ForestTable& t, const Costs& c, double* fd, double* tdm, int64_t w) {
  const int64_t r0 = t.r0, c0 = t.c0, corner = r0 * w + c0;
  fd[corner] = 0.0;
  double sum = 0.0;
  for (int64_t i = r0 + 1; i <= t.kx; ++i) {
    sum = sum + c.del(i);
    fd[i * w + c0] = sum;
  }
  sum = 0.0;
  for (int64_t j = c0 + 1; j <= t.ky; ++j) {
    sum = sum + c.ins(j);
    fd[r0 * w + j] = sum;
  }
  for (int64_t i = r0 + 1; i <= t.kx; ++i) {
    const ForestRow g(t, i, w);
    const double del_i = c.del(i);
    const int64_t row = i * w;
    double left = fd[row + c0];
    for (int64_t j = c0 + 1; j <= t.ky; ++j) {
      const int64_t cell = row + j;
      const int64_t lj = t.ly[j];
      const bool defines = g.defines_tdm(lj);
      if (defines) tdm[cell] = fd[cell - w - 1] + c.rep(i, j);
      left = forest_value(fd[cell - w], del_i, fd[g.source(lj, defines, corner)], tdm[cell], left, c.ins(j));
      fd[cell] = left;
    }
  }
}

// The distance of trees x and y: every keyroot pair's table in ascending
// order (each reads the tdm of smaller ones). fd and tdm: (x.n + 1)(y.n + 1) doubles each.
template <class Costs>
BEDL_HD double tree_distance(const FlatTree& x, const FlatTree& y, const Costs& c, double* fd, double* tdm) {
  const int64_t w = y.n + 1;
  for (int64_t a = 0; a < x.keyroot_count; ++a) {
    for (int64_t b = 0; b < y.keyroot_count; ++b) {
      forest_distance_table(ForestTable(x.leftmost, y.leftmost, x.keyroots[a], y.keyroots[b]), c, fd, tdm, w);
    }
  }
  return fd[x.n * w + y.n];
}

}  // namespace ted
}  // namespace bedl
