// The tree edit distance's co-optimal matrix P over one pair, backend-free, on
// raw buffers the caller sizes: the GPU kernel runs it per thread. It counts
// co-optimal mappings as the CPU kernel does (docs/edit-distances.md), with the
// same cells and sums, so P is the CPU's to the bit:
//  * inside, every keyroot pair's forest table in ascending order with
//    distances, co-optimal flags and inside counts (the CPU's table_with), tdm
//    and its counts kept for the larger tables;
//  * outside, the tables in descending order, each that outside weight
//    reaches recomputed and swept (common/forest_outside.h's counting
//    instance), P[event] += inside * outside / all.
// The CPU computes counts only in the tables some co-optimal mapping passes,
// which are the tables the sweep reaches: the cells whose counts reach P are
// the same, and so is the order of every sum into P.
#pragma once

#include "forest_outside.h"
#include "forest_passes.h"

namespace bedl {
namespace ted {

// The largest absolute cost the pair reads (the tie test's scale): every
// replacement, deletion and insertion, by postorder.
template <class Costs>
BEDL_HD double tree_cost_scale(const Costs& c, int64_t m, int64_t n) {
  double scale = 0.0;
  for (int64_t i = 1; i <= m; ++i) {
    for (int64_t j = 1; j <= n; ++j) scale = max_abs_step(scale, c.rep(i, j));
    scale = max_abs_step(scale, c.del(i));
  }
  for (int64_t j = 1; j <= n; ++j) scale = max_abs_step(scale, c.ins(j));
  return scale;
}

// One pair's arrays, (m + 1)(n + 1) entries each at row stride n + 1
// (postorder; P's row 0 holds insertions, column 0 deletions), and m + 1
// entries of reach_end.
template <typename Count>
struct TreeCooptBuffers {
  double *fd, *tdm;
  uint8_t* flags;
  Count *total, *other, *tdm_count;     // inside counts: all, not entered by a deletion, of tdm
  Count *out_any, *out_ins, *out_tdm;  // outside counts
  double* p_acc;
  int64_t* reach_end;
};

// The forest table of keyroots (kx, ky): distances, co-optimal flags and
// inside counts (total, other), and tdm with its counts where a cell defines
// it (the CPU's table_with<true, true>, the same values, flags and counts).
template <typename Count, class Costs>
BEDL_HD void forest_count_table(const ForestTable& t, const Costs& c, const dp::Tie& tie,
                                const TreeCooptBuffers<Count>& buf, int64_t w) {
  double* fd = buf.fd;
  double* tdm = buf.tdm;
  Count* tot = buf.total;
  Count* other = buf.other;
  const int64_t r0 = t.r0, c0 = t.c0, corner = r0 * w + c0;
  fd[corner] = 0.0;
  tot[corner] = Count::one();
  other[corner] = Count::one();
  buf.flags[corner] = 0;
  // First column and row: deletions (insertions) only, one derivation each.
  double sum = 0.0;
  for (int64_t i = r0 + 1; i <= t.kx; ++i) {
    const int64_t cell = i * w + c0;
    sum = sum + c.del(i);
    fd[cell] = sum;
    tot[cell] = Count::one();
    other[cell] = Count::zero();
    buf.flags[cell] = dp::kDel;
  }
  sum = 0.0;
  for (int64_t j = c0 + 1; j <= t.ky; ++j) {
    const int64_t cell = r0 * w + j;
    sum = sum + c.ins(j);
    fd[cell] = sum;
    tot[cell] = Count::one();
    other[cell] = Count::one();
    buf.flags[cell] = dp::kIns;
  }
  for (int64_t i = r0 + 1; i <= t.kx; ++i) {
    const ForestRow g(t, i, w);
    const double del_i = c.del(i);
    const int64_t row = i * w;
    double left = fd[row + c0];
    Count left_other = Count::zero();  // the first column is entered by deletions
    for (int64_t j = c0 + 1; j <= t.ky; ++j) {
      const int64_t cell = row + j;
      const int64_t lj = t.ly[j];
      const bool defines = g.defines_tdm(lj);
      if (defines) {
        tdm[cell] = fd[cell - w - 1] + c.rep(i, j);
        buf.tdm_count[cell] = tot[cell - w - 1];
      }
      const int64_t source = g.source(lj, defines, corner);
      uint8_t flags;
      left = forest_value_flags<false>(tie, fd[cell - w], del_i, fd[source], tdm[cell], left, c.ins(j), flags);
      fd[cell] = left;
      buf.flags[cell] = flags;
      Count in_d, in_o;
      forest_weights(dp::CoOptimal{flags}, tot[cell - w], left_other, tot[source], buf.tdm_count[cell], in_d, in_o);
      tot[cell] = in_d + in_o;
      other[cell] = in_o;
      left_other = in_o;
    }
  }
}

// What the counting sweep reads of the table just counted: flags and counts by flat cell.
template <typename Count>
struct FlatCountSource {
  const TreeCooptBuffers<Count>& buf;
  BEDL_HD uint8_t flags(int64_t, int64_t, int64_t cell) const { return buf.flags[cell]; }
  BEDL_HD Count total(int64_t, int64_t, int64_t cell) const { return buf.total[cell]; }
  BEDL_HD Count in_other(int64_t, int64_t, int64_t cell) const { return buf.other[cell]; }
  BEDL_HD Count tdm(int64_t, int64_t, int64_t cell) const { return buf.tdm_count[cell]; }
};

BEDL_HD TreePaths paths_of(const FlatTree& t) {
  return {t.n, t.leftmost, t.path_index, t.path_begin, t.path_nodes};
}

// The distance of trees x and y (with their paths) and their P in buf.p_acc,
// counts of type Count; false (P not computed) where the number of co-optimal
// mappings is not representable in that type.
template <typename Count, class Costs>
BEDL_HD bool tree_coopt(const FlatTree& x, const FlatTree& y, const Costs& c, const dp::Tie& tie,
                        const TreeCooptBuffers<Count>& buf, double* distance) {
  const TreePaths xp = paths_of(x), yp = paths_of(y);
  const int64_t w = y.n + 1, cells = (x.n + 1) * w;
  for (int64_t a = 0; a < x.keyroot_count; ++a) {
    for (int64_t b = 0; b < y.keyroot_count; ++b) {
      forest_count_table(ForestTable(x.leftmost, y.leftmost, x.keyroots[a], y.keyroots[b]), c, tie, buf, w);
    }
  }
  *distance = buf.fd[x.n * w + y.n];
  const Count all = buf.total[x.n * w + y.n];
  if (!all.usable_total()) return false;
  for (int64_t k = 0; k < cells; ++k) {
    buf.out_any[k] = buf.out_ins[k] = buf.out_tdm[k] = Count::zero();
    buf.p_acc[k] = 0.0;
  }
  const FlatCountSource<Count> src{buf};
  for (int64_t a = x.keyroot_count; a-- > 0;) {
    for (int64_t b = y.keyroot_count; b-- > 0;) {
      const int64_t kx = x.keyroots[a], ky = y.keyroots[b];
      if (!has_outside(xp, yp, w, kx, ky, buf.out_tdm)) continue;
      forest_count_table(ForestTable(x.leftmost, y.leftmost, kx, ky), c, tie, buf, w);
      CountOutside<FlatCountSource<Count>, Count> out{{}, buf.out_any, buf.out_ins, buf.out_tdm, src, all,
                                                      buf.p_acc, w};
      outside_sweep(xp, yp, w, kx, ky, buf.reach_end, out);
    }
  }
  return true;
}

// P (or an expected alignment) from the postorder layout acc (row stride
// n + 1; row 0 insertions, column 0 deletions) into the costs' preorder
// layout p (row stride `stride`; column n deletions, row m insertions).
template <typename scalar_t>
BEDL_HD void store_tree_p(const int64_t* x_pre, const int64_t* y_pre, int64_t m, int64_t n, const double* acc,
                          scalar_t* p, int64_t stride) {
  const int64_t w = n + 1;
  for (int64_t i = 1; i <= m; ++i) {
    scalar_t* row = p + x_pre[i] * stride;
    row[n] = static_cast<scalar_t>(acc[i * w]);
    for (int64_t j = 1; j <= n; ++j) row[y_pre[j]] = static_cast<scalar_t>(acc[i * w + j]);
  }
  for (int64_t j = 1; j <= n; ++j) p[m * stride + y_pre[j]] = static_cast<scalar_t>(acc[j]);
}

}  // namespace ted
}  // namespace bedl
