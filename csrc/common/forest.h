// The tree edit distance's recurrence (Zhang-Shasha), backend-free: the
// geometry of a keyroot pair's forest table and the forest cell.
//
// Nodes are numbered 1..n in postorder; l(i) is the leftmost leaf of i's
// subtree. The table of keyroots (kx, ky) has the cells (i, j) for
// r0 <= i <= kx and c0 <= j <= ky, r0 = l(kx) - 1 and c0 = l(ky) - 1: cell
// (i, j) is the forest x[r0+1 .. i] against y[c0+1 .. j], row r0 and column
// c0 the empty forests. Where both forests are whole subtrees (l(i) = r0 + 1
// and l(j) = c0 + 1) the cell defines tdm(i, j), the distance of the two
// subtrees with their roots matched; elsewhere the match alternative jumps
// over the subtrees of i and j from cell (l(i) - 1, l(j) - 1) and adds the
// tdm that an earlier table defined. Counting through tdm (roots matched)
// rather than the subtree distance keeps every mapping one derivation
// (docs/edit-distances.md).
//
// The forest cell: its value is the cheapest of deleting x_i (after the cell
// above), matching (after the source cell, plus tdm) and inserting y_j (after
// the cell to the left), in that operand order (std::min's order decides
// between equal values, and so the sign of a zero); its co-optimal flags come
// from dp::Tie; its counts and soft weights from dp::enter.
#pragma once

#include "macros.h"
#include "states.h"

namespace bedl {
namespace ted {

// A keyroot pair's forest table: which cells define tdm and where a match
// comes from. lx and ly are the trees' leftmost leaves (1-based postorder).
struct ForestTable {
  const int64_t* lx;
  const int64_t* ly;
  int64_t kx, ky, r0, c0;

  BEDL_HD ForestTable(const int64_t* lx_, const int64_t* ly_, int64_t kx_, int64_t ky_)
      : lx(lx_), ly(ly_), kx(kx_), ky(ky_), r0(lx_[kx_] - 1), c0(ly_[ky_] - 1) {}

  // x[r0+1 .. i] is the whole subtree of i (i lies on kx's leftmost path).
  BEDL_HD bool whole_x(int64_t i) const { return lx[i] == r0 + 1; }
  // y[c0+1 .. j] is the whole subtree of j.
  BEDL_HD bool whole_y(int64_t j) const { return ly[j] == c0 + 1; }
  // Cell (i, j) defines tdm(i, j): both forests are whole subtrees (and the cell is not in the first row or column).
  BEDL_HD bool defines_tdm(int64_t i, int64_t j) const { return i > r0 && j > c0 && whole_x(i) && whole_y(j); }
  // The cell a match of (i, j) comes from: the corner where (i, j) defines
  // tdm, else the cell before both subtrees.
  BEDL_HD int64_t source_row(int64_t i, bool defines) const { return defines ? r0 : lx[i] - 1; }
  BEDL_HD int64_t source_col(int64_t j, bool defines) const { return defines ? c0 : ly[j] - 1; }
  // A one-row (one-column) table: its keyroot is a leaf, and its only lasting
  // output, tdm, has a closed form (leaf_tdm).
  BEDL_HD bool x_leaf() const { return r0 + 1 == kx; }
  BEDL_HD bool y_leaf() const { return c0 + 1 == ky; }
};

// Row i of a forest table in a flat layout (cell (i, j) at origin + i * stride
// + j): where its match alternatives come from.
struct ForestRow {
  bool whole_x;       // x[r0+1 .. i] is i's whole subtree: cells of whole y define tdm
  int64_t jump_base;  // cell (l(i) - 1, l(j) - 1) is at jump_base + l(j)
  int64_t c0;

  BEDL_HD ForestRow(const ForestTable& t, int64_t i, int64_t stride, int64_t origin = 0)
      : whole_x(t.whole_x(i)), jump_base(origin + (t.lx[i] - 1) * stride - 1), c0(t.c0) {}
  // Cell (i, j) (j > c0) defines tdm(i, j); lj = l(j).
  BEDL_HD bool defines_tdm(int64_t lj) const { return whole_x && lj == c0 + 1; }
  // The flat index of the cell a match of (i, j) comes from (corner: the table's (r0, c0)).
  BEDL_HD int64_t source(int64_t lj, bool defines, int64_t corner) const { return defines ? corner : jump_base + lj; }
};

// The three alternatives of a forest cell and its value.
template <class V>
struct ForestAlternatives {
  V del, match, ins;
  BEDL_HD V best() const { return min_of(min_of(del, match), ins); }
};

// Cell (i, j)'s alternatives: up + del(i), source + tdm(i, j), left + ins(j).
template <class V>
BEDL_HD ForestAlternatives<V> forest_alternatives(V up, V del_i, V source, V tdm, V left, V ins_j) {
  return {up + del_i, source + tdm, left + ins_j};
}

// Cell (i, j)'s value alone.
template <class V>
BEDL_HD V forest_value(V up, V del_i, V source, V tdm, V left, V ins_j) {
  return forest_alternatives(up, del_i, source, tdm, left, ins_j).best();
}

// Cell (i, j)'s value and co-optimal flags (kNonnegative: every cost is >= 0,
// the shorter tie test with the same flags).
template <bool kNonnegative>
BEDL_HD double forest_value_flags(const dp::Tie& tie, double up, double del_i, double source, double tdm,
                                  double left, double ins_j, uint8_t& flags) {
  const ForestAlternatives<double> a = forest_alternatives(up, del_i, source, tdm, left, ins_j);
  const double best = a.best();
  flags = tie.flags_of<kNonnegative>(a.del, a.ins, a.match, best);
  return best;
}

// Cell (i, j)'s inside weights (dp::enter): deleting after the cell above
// (up_total, either state, times the deletion's weight), inserting after the
// left cell's `other` state, matching after the source cell's total times
// tdm's weight. Counting passes give unit edge weights (pass the predecessor
// as it is) and the co-optimal gate; soft passes weights and every edge.
template <class W, class Gate>
BEDL_HD void forest_weights(const Gate& gate, const W& by_deletion, const W& by_insertion, const W& source_total,
                            const W& tdm_weight, W& by_del, W& other) {
  dp::enter(gate, by_deletion, by_insertion, source_total * tdm_weight, by_del, other);
}

// A leaf keyroot's tdm in closed form: the other subtree but its root
// inserted (deleted), `below`, times the roots' replacement (values: +; weights: *).
template <class V>
BEDL_HD V leaf_tdm_value(V below, V rep) {
  return below + rep;
}
template <class W>
BEDL_HD W leaf_tdm_weight(const W& below, const W& rep) {
  return below * rep;
}

// below[v] for every node of a tree: v's subtree but its root (nodes l(v) ..
// v - 1) inserted or deleted, accumulated from the path's leaf up exactly as
// a forest table's first row or column does (`step(acc, v)` adds node v).
// keyroots: count of them, ascending; leftmost: 1-based postorder; below: a
// pointer or anything indexed like one.
template <class V, class Step, class Out>
BEDL_HD void accumulate_below(const int64_t* keyroots, int64_t count, const int64_t* leftmost, V start,
                              const Step& step, Out below) {
  for (int64_t k = 0; k < count; ++k) {
    const int64_t leaf = leftmost[keyroots[k]];
    V acc = start;
    for (int64_t v = leaf; v <= keyroots[k]; ++v) {
      if (leftmost[v] == leaf) below[v] = acc;
      acc = step(acc, v);
    }
  }
}

}  // namespace ted
}  // namespace bedl
