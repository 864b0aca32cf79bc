// y's wide layout, backend-free: for a keyroot K of x, the forest tables
// (K, H) over every non-leaf keyroot H of y stand side by side in one wide row,
// each with its first column, so a row of K's tables is one loop over W
// columns whatever y's shape. Pairs that share x then run the same loops in
// lockstep, one pair per lane (the CPU's AVX2 lanes, cpu/tree/lanes_kernel.h).
//
// The layout of y (wide_columns): the columns of its non-leaf keyroots' tables
// in keyroot order. Column c holds node(c) (1-based postorder; 0 in a table's
// first column), the column its match jumps from (l(j) - 1 in its table), and
// where its node's tdm is defined: its own column on the table's leftmost
// path, the column of an earlier table elsewhere, -2 - k for the k-th leaf
// keyroot (tdm in closed form) and -1 in first columns (+inf: no match).
#pragma once

#include "forest.h"


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

}  // namespace ted
}  // namespace bedl
