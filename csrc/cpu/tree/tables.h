// The tree kernel's forest tables on the CPU, one keyroot pair at a time: the
// row orders and layouts of each pass, every cell through the forest cell and
// table geometry of common/forest.h.
//  * distance_table: distances only, two ordinary rows at a time;
//  * table_with: distances, and co-optimal flags and/or inside counts;
//  * flag_table_by_rows: distances, then each row's flags four cells at a
//    time (AVX2, costs >= 0);
//  * count_table: inside counts from kept flags, without distances or ties.
// All give the same values, flags and counts to the bit.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../avx2.h"
#include "../row_minimum.h"
#include "pair.h"

namespace bedl {
namespace ted {

// below_ins / below_del: each node's subtree but its root inserted (deleted),
// summed as a table's first row (column) does; the leaf keyroots' closed forms.
template <typename Count>
void prepare_leaf_sums(TreePair<Count>& p) {
  sums_below(p.y, [&p](int64_t j) { return p.ins(j); }, p.ws.below_ins);
  sums_below(p.x, [&p](int64_t i) { return p.del(i); }, p.ws.below_del);
}

// A keyroot that is a leaf has a one-row (one-column) table whose only
// lasting output, tdm, has a closed form (leaf_tdm_value). One derivation each.
template <bool kCount, typename Count>
void leaf_x(TreePair<Count>& p, int64_t kx) {
  const int64_t row = kx * p.w;
  for (int64_t j = 1; j <= p.y.n; ++j) {
    p.ws.tdm[row + j] = leaf_tdm_value(p.ws.below_ins[j], p.rep(kx, j));
    if (kCount) p.cnt.tdm_count[row + j] = Count::one();
  }
}

template <bool kCount, typename Count>
void leaf_y(TreePair<Count>& p, size_t kx_index, int64_t ky) {
  int64_t len;
  const int64_t* path = path_of(p.x, kx_index, &len);
  for (int64_t k = 0; k < len; ++k) {
    const int64_t cell = path[k] * p.w + ky;
    p.ws.tdm[cell] = leaf_tdm_value(p.ws.below_del[path[k]], p.rep(path[k], ky));
    if (kCount) p.cnt.tdm_count[cell] = Count::one();
  }
}

// Whether the final table's row i (columns c0 .. cols_end) puts the pair
// beyond its cutoff: every mapping restricted to the postorder prefixes
// x[1..i] and y[1..j*] (j* the last y node mapped into x[1..i]) is a forest
// mapping of those prefixes, so it costs at least min_j fd(i, j), and the
// rest at least cut_below[i] (any costs).
template <typename Count>
bool final_row_beyond(TreePair<Count>& p, const double* row, int64_t c0, int64_t cols_end, int64_t i) {
  if (dp::row_minimum(row, c0, cols_end) + p.cut_below[i] <= p.cut_limit) return false;
  p.beyond = true;
  return true;
}

// The forest table of keyroots a, b (indices), distances only, for what later
// tables read of it: the tdm of its path pairs (i, j), each the forest
// distance at (i - 1, j - 1) plus the replacement. So the last row and column
// are left out (but in the final table, whose corner is the answer): 12% of
// the cells of 30-node random trees. The final table stops early where the
// pair has a cutoff (p.cut_below) and a row shows it beyond.
template <typename Count>
void distance_table(TreePair<Count>& p, size_t a, size_t b) {
  const TreeIndex &x = p.x, &y = p.y;
  const int64_t w = p.w;
  double* fd = p.ws.fd.data();
  const int64_t kx = x.keyroots[a], ky = y.keyroots[b];
  const ForestTable t = p.table(kx, ky);
  const int64_t r0 = t.r0, c0 = t.c0;
  const bool last = p.is_final(kx, ky);
  const bool cut = last && p.cut_below != nullptr;
  const int64_t rows_end = last ? kx : kx - 1, cols_end = last ? ky : ky - 1;
  fd[r0 * w + c0] = 0.0;
  // The first column and row. The sums stay in a register; reading them back
  // from the strided column made a store-to-load chain that cost as much as
  // small tables themselves.
  double sum = 0.0;
  for (int64_t i = r0 + 1; i <= rows_end; ++i) {
    sum = sum + p.del(i);
    fd[i * w + c0] = sum;
  }
  sum = 0.0;
  for (int64_t j = c0 + 1; j <= cols_end; ++j) {
    sum = sum + p.ins(j);
    fd[r0 * w + j] = sum;
  }
  double* tdm = p.ws.tdm.data();
  const double* cost = p.ws.cost.data();  // row 0: insertions
  const int64_t corner = r0 * w + c0;
  const int64_t* ly = y.leftmost.data();
  for (int64_t i = r0 + 1; i <= rows_end; ++i) {
    const ForestRow g(t, i, w);
    const double del_i = p.del(i);
    const int64_t row = i * w;
    // The left neighbour stays in a register: the insertion alternative is
    // the only chain from cell to cell.
    if (!g.whole_x && i < rows_end && !t.whole_x(i + 1)) {
      // Two ordinary rows at once, the second one cell behind: two
      // independent chains for the processor to overlap.
      const ForestRow g2(t, i + 1, w);
      const int64_t row2 = row + w;
      const double del2 = p.del(i + 1);
      double left1 = fd[row + c0], left2 = fd[row2 + c0];
      int64_t j = c0 + 1;
      left1 = forest_value(fd[row - w + j], del_i, fd[g.jump_base + ly[j]], tdm[row + j], left1, cost[j]);
      fd[row + j] = left1;
      for (j = c0 + 2; j <= cols_end; ++j) {
        left1 = forest_value(fd[row - w + j], del_i, fd[g.jump_base + ly[j]], tdm[row + j], left1, cost[j]);
        fd[row + j] = left1;
        const int64_t k = j - 1;
        left2 = forest_value(fd[row + k], del2, fd[g2.jump_base + ly[k]], tdm[row2 + k], left2, cost[k]);
        fd[row2 + k] = left2;
      }
      left2 = forest_value(fd[row + cols_end], del2, fd[g2.jump_base + ly[cols_end]], tdm[row2 + cols_end], left2,
                           cost[cols_end]);
      fd[row2 + cols_end] = left2;
      ++i;
      if (cut && final_row_beyond(p, fd + row2, c0, cols_end, i)) return;
      continue;
    }
    double left = fd[row + c0];
    if (!g.whole_x) {
      for (int64_t j = c0 + 1; j <= cols_end; ++j) {
        const int64_t cell = row + j;
        left = forest_value(fd[cell - w], del_i, fd[g.jump_base + ly[j]], tdm[cell], left, cost[j]);
        fd[cell] = left;
      }
    } else {
      // Cells of whole subtrees of y define tdm.
      for (int64_t j = c0 + 1; j <= cols_end; ++j) {
        const int64_t cell = row + j;
        const bool defines = g.defines_tdm(ly[j]);
        if (defines) tdm[cell] = fd[cell - w - 1] + p.rep(i, j);
        left = forest_value(fd[cell - w], del_i, fd[g.source(ly[j], defines, corner)], tdm[cell], left, cost[j]);
        fd[cell] = left;
      }
    }
    if (cut && final_row_beyond(p, fd + row, c0, cols_end, i)) return;
  }
  if (last) return;
  // The path pairs in the left-out row and column.
  int64_t len_x, len_y;
  const int64_t* px = path_of(x, a, &len_x);
  const int64_t* py = path_of(y, b, &len_y);
  for (int64_t s = 0; s < len_x; ++s) {
    const int64_t cell = px[s] * w + ky;
    tdm[cell] = fd[cell - w - 1] + p.rep(px[s], ky);
  }
  for (int64_t q = 0; q + 1 < len_y; ++q) {
    const int64_t cell = kx * w + py[q];
    tdm[cell] = fd[cell - w - 1] + p.rep(kx, py[q]);
  }
}

// The forest table of keyroots (kx, ky) with distances and, with kCount,
// inside counts (the counting pass where no flags were kept; distance_table
// is the distance pass), and with kFlags what the outside sweeps read:
// co-optimal flags (into flags_out) and counts not entered by a deletion.
// table_with<false, true> is the boolean outside pass's table: flags only.
// kNonnegative: every cost is >= 0 (the shorter tie test, the same flags).
template <bool kCount, bool kFlags, bool kNonnegative, typename Count>
void table_with(TreePair<Count>& p, int64_t kx, int64_t ky, const Cells<uint8_t>& flags_out) {
  const int64_t w = p.w;
  double* fd = p.ws.fd.data();
  double* tdm = p.ws.tdm.data();
  const double* cost = p.ws.cost.data();
  Count* tot = p.cnt.tot.data();
  Count* other = p.cnt.in_other.data();
  Count* tdm_count = p.cnt.tdm_count.data();
  uint8_t* flags0 = flags_out.data;  // cell (r0, c0)
  const int64_t fs = flags_out.stride;
  const ForestTable t = p.table(kx, ky);
  const int64_t r0 = t.r0, c0 = t.c0;
  const int64_t corner = r0 * w + c0;
  fd[corner] = 0.0;
  if (kCount) tot[corner] = Count::one();
  if (kCount && kFlags) other[corner] = Count::one();
  if (kFlags) flags0[0] = 0;
  // First column and row: deletions (insertions) only, one derivation each.
  double sum = 0.0;
  for (int64_t i = r0 + 1; i <= kx; ++i) {
    const int64_t cell = i * w + c0;
    sum = sum + p.del(i);
    fd[cell] = sum;
    if (kCount) tot[cell] = Count::one();
    if (kCount && kFlags) other[cell] = Count::zero();
    if (kFlags) flags0[(i - r0) * fs] = kDel;
  }
  sum = 0.0;
  for (int64_t j = c0 + 1; j <= ky; ++j) {
    const int64_t cell = r0 * w + j;
    sum = sum + p.ins(j);
    fd[cell] = sum;
    if (kCount) tot[cell] = Count::one();
    if (kCount && kFlags) other[cell] = Count::one();
    if (kFlags) flags0[j - c0] = kIns;
  }
  const int64_t* ly = p.y.leftmost.data();
  for (int64_t i = r0 + 1; i <= kx; ++i) {
    const ForestRow g(t, i, w);
    const double del_i = p.del(i);
    const int64_t row = i * w;
    uint8_t* frow = kFlags ? flags0 + (i - r0) * fs - c0 : nullptr;  // frow[j]: cell (i, j)
    double left = fd[row + c0];
    Count left_other = Count::zero();  // the first column is entered by deletions
    for (int64_t j = c0 + 1; j <= ky; ++j) {
      const int64_t cell = row + j;
      const int64_t lj = ly[j];
      const bool defines = g.defines_tdm(lj);
      if (defines) {
        tdm[cell] = fd[cell - w - 1] + cost[cell];
        if (kCount) tdm_count[cell] = tot[cell - w - 1];
      }
      const int64_t source = g.source(lj, defines, corner);
      uint8_t flags;
      left = forest_value_flags<kNonnegative>(p.tie, fd[cell - w], del_i, fd[source], tdm[cell], left, cost[j], flags);
      fd[cell] = left;
      if (kFlags) frow[j] = flags;
      if (kCount) {
        Count in_d, in_o;
        forest_weights(dp::CoOptimal{flags}, tot[cell - w], left_other, tot[source], tdm_count[cell], in_d, in_o);
        tot[cell] = in_d + in_o;
        left_other = in_o;
        if (kFlags) other[cell] = in_o;
      }
    }
  }
}

// table_with with the tie test for the pair's costs.
template <bool kCount, bool kFlags, typename Count>
void table(TreePair<Count>& p, int64_t kx, int64_t ky, const Cells<uint8_t>& flags_out = {}) {
  if (p.tie.nonnegative) {
    table_with<kCount, kFlags, true>(p, kx, ky, flags_out);
  } else {
    table_with<kCount, kFlags, false>(p, kx, ky, flags_out);
  }
}

#ifdef BEDL_X86_SIMD
// table_with<false, true> where every cost is >= 0 on AVX2: each row's values
// first (the insertion chain alone), then its flags four cells at a time
// (dp::row_flags_nonnegative, the same flags).
template <typename Count>
void flag_table_by_rows(TreePair<Count>& p, int64_t kx, int64_t ky, const Cells<uint8_t>& f) {
  const int64_t w = p.w;
  double* fd = p.ws.fd.data();
  double* tdm = p.ws.tdm.data();
  const double* cost = p.ws.cost.data();
  const ForestTable t = p.table(kx, ky);
  const int64_t r0 = t.r0, c0 = t.c0;
  const int64_t corner = r0 * w + c0, count = ky - c0;
  p.ws.match_row.resize(count + 1);
  double* match = p.ws.match_row.data();  // match[j]: the match alternative of column c0 + j
  fd[corner] = 0.0;
  f.data[0] = 0;
  double sum = 0.0;
  for (int64_t i = r0 + 1; i <= kx; ++i) {
    sum = sum + p.del(i);
    fd[i * w + c0] = sum;
    f.data[(i - r0) * f.stride] = kDel;
  }
  sum = 0.0;
  for (int64_t j = c0 + 1; j <= ky; ++j) {
    sum = sum + p.ins(j);
    fd[r0 * w + j] = sum;
    f.data[j - c0] = kIns;
  }
  const int64_t* ly = p.y.leftmost.data();
  for (int64_t i = r0 + 1; i <= kx; ++i) {
    const ForestRow g(t, i, w);
    const double del_i = p.del(i);
    const int64_t row = i * w;
    double left = fd[row + c0];
    for (int64_t j = c0 + 1; j <= ky; ++j) {
      const int64_t cell = row + j;
      const int64_t lj = ly[j];
      const bool defines = g.defines_tdm(lj);
      if (defines) tdm[cell] = fd[cell - w - 1] + cost[cell];
      const ForestAlternatives<double> alt =
          forest_alternatives(fd[cell - w], del_i, fd[g.source(lj, defines, corner)], tdm[cell], left, cost[j]);
      left = alt.best();
      fd[cell] = left;
      match[j - c0] = alt.match;
    }
    dp::row_flags_nonnegative(p.tie, fd + row - w + c0, del_i, fd + row + c0, cost + c0, match, count,
                              f.data + (i - r0) * f.stride);
  }
}
#endif

// mark_needed's table (kx, ky): distances, and co-optimal flags into f.
// Where every cost is >= 0 and the processor has AVX2 flag_table_by_rows,
// otherwise table<false, true>: the same values and flags either way.
template <typename Count>
void flag_table(TreePair<Count>& p, int64_t kx, int64_t ky, const Cells<uint8_t>& f) {
#ifdef BEDL_X86_SIMD
  if (p.tie.nonnegative && dp::simd_avx2()) {
    flag_table_by_rows(p, kx, ky, f);
    return;
  }
#endif
  table<false, true>(p, kx, ky, f);
}

// Inside counts of the forest table (kx, ky) from its kept co-optimal flags
// `f` into `out` (a region with its own row stride): table_with's counts
// without distances or ties.
template <typename Count>
void count_table(TreePair<Count>& p, int64_t kx, int64_t ky, const Cells<const uint8_t>& f,
                 const CountCells<Count>& out) {
  Count* tdm_count = p.cnt.tdm_count.data();
  const ForestTable t = p.table(kx, ky);
  const int64_t r0 = t.r0, c0 = t.c0;
  const int64_t cs = out.total.stride;
  Count* tot0 = out.total.data;  // cell (r0, c0); columns relative to c0
  Count* other0 = out.other.data;
  tot0[0] = Count::one();
  other0[0] = Count::one();
  for (int64_t i = 1; i <= kx - r0; ++i) {
    tot0[i * cs] = Count::one();
    other0[i * cs] = Count::zero();
  }
  for (int64_t j = 1; j <= ky - c0; ++j) {
    tot0[j] = Count::one();
    other0[j] = Count::one();
  }
  const int64_t* ly = p.y.leftmost.data() + c0;  // ly[j]: the leftmost leaf of column c0 + j
  for (int64_t i = r0 + 1; i <= kx; ++i) {
    const ForestRow g(t, i, cs, -r0 * cs - c0);  // (the region's cells relative to (r0, c0))
    const int64_t row = i * p.w + c0;            // tdm_count[row + j]: cell (i, c0 + j)
    Count* tot = tot0 + (i - r0) * cs;
    Count* other = other0 + (i - r0) * cs;
    const uint8_t* frow = f.data + (i - r0) * f.stride;
    Count left_other = Count::zero();  // the first column is entered by deletions
    for (int64_t j = 1; j <= ky - c0; ++j) {
      const bool defines = g.defines_tdm(ly[j]);
      if (defines) tdm_count[row + j] = tot[j - cs - 1];
      const Count& source = tot0[g.source(ly[j], defines, 0)];
      Count in_d, in_o;
      forest_weights(dp::CoOptimal{frow[j]}, tot[j - cs], left_other, source, tdm_count[row + j], in_d, in_o);
      tot[j] = in_d + in_o;
      other[j] = in_o;
      left_other = in_o;
    }
  }
}

}  // namespace ted
}  // namespace bedl
