// The soft (temperature) tree edit distance and its expected alignment over
// one pair, backend-free, on raw buffers the caller sizes:
// soft(x, y) = -T log sum_M exp(-cost(M) / T) over all valid mappings M, the
// forest recurrence's weights (common/forest.h) with every alternative
// admitted and each derivation weighted by exp(-cost / T) (common/weights.h)
// instead of counted once where co-optimal; the same canonical derivations
// (tdm with the roots matched; no insertion right after a deletion) count
// each mapping once. The inside pass fills the keyroot tables in order (leaf
// keyroots by their closed forms); the outside pass recomputes them in reverse
// order and sweeps them (common/forest_outside.h's sweep, soft policy),
// accumulating P[event] = inside(source) * weight(event) * outside(target) /
// total. The CPU kernel (cpu/tree/soft.h) and the GPU's threads run it.
#pragma once

#include "forest_coopt.h"
#include "weights.h"

namespace bedl {
namespace soft {

// One pair's arrays in one weight type, the postorder kernel layout (row 0
// insertions, column 0 deletions): weight, tdm, tot, other, out_any, out_ins,
// out_tdm, p_acc ((m+1)(n+1) each), below_ins (n + 1), below_del and
// reach_end (m + 1).
template <typename W>
struct TedSoftArrays {
  W *weight, *tdm, *tot, *other, *out_any, *out_ins, *out_tdm, *below_ins, *below_del;
  double* p_acc;
  int64_t* reach_end;
};

// The forest table of keyroots (kx, ky): inside weights (tot, and other for
// the outside sweep), and the tdm of its path pairs: the counting tables'
// recurrence with every alternative admitted and Boltzmann weights.
template <typename W>
BEDL_HD void soft_table(const ted::FlatTree& x, const ted::FlatTree& y, const TedSoftArrays<W>& a, int64_t w,
                        int64_t kx, int64_t ky) {
  W* tot = a.tot;
  W* other = a.other;
  W* tdm = a.tdm;
  const W* weight = a.weight;  // row 0: insertions, column 0: deletions
  const ted::ForestTable t(x.leftmost, y.leftmost, kx, ky);
  const int64_t r0 = t.r0, c0 = t.c0;
  const int64_t corner = r0 * w + c0;
  tot[corner] = W::one();
  other[corner] = W::one();
  // First column and row: deletions (insertions) only.
  for (int64_t i = r0 + 1; i <= kx; ++i) {
    tot[i * w + c0] = tot[(i - 1) * w + c0] * weight[i * w];
    other[i * w + c0] = W::zero();
  }
  for (int64_t j = c0 + 1; j <= ky; ++j) {
    tot[r0 * w + j] = tot[r0 * w + j - 1] * weight[j];
    other[r0 * w + j] = tot[r0 * w + j];
  }
  const int64_t* ly = y.leftmost;
  for (int64_t i = r0 + 1; i <= kx; ++i) {
    const ted::ForestRow g(t, i, w);
    const W del_i = weight[i * w];
    const int64_t row = i * w;
    W left_other = W::zero();  // the first column is entered by deletions
    for (int64_t j = c0 + 1; j <= ky; ++j) {
      const int64_t cell = row + j;
      const bool defines = g.defines_tdm(ly[j]);
      if (defines) tdm[cell] = tot[cell - w - 1] * weight[cell];
      const int64_t source = g.source(ly[j], defines, corner);
      W in_d, in_o;
      ted::forest_weights(dp::AllAlternatives{}, tot[cell - w] * del_i, left_other * weight[j], tot[source], tdm[cell],
                          in_d, in_o);
      tot[cell] = in_d + in_o;
      other[cell] = in_o;
      left_other = in_o;
    }
  }
}

// Every table of the inside pass, in keyroot order (leaf keyroots by their
// closed forms); the final one's last cell holds the total weight.
template <typename W>
BEDL_HD void soft_inside(const ted::FlatTree& x, const ted::FlatTree& y, const TedSoftArrays<W>& a, int64_t w) {
  ted::accumulate_below(y.keyroots, y.keyroot_count, y.leftmost, W::one(),
                        [&](const W& acc, int64_t v) { return acc * a.weight[v]; }, a.below_ins);
  ted::accumulate_below(x.keyroots, x.keyroot_count, x.leftmost, W::one(),
                        [&](const W& acc, int64_t v) { return acc * a.weight[v * w]; }, a.below_del);
  const ted::TreePaths xp = ted::paths_of(x);
  const int64_t ky_count = y.keyroot_count;
  for (int64_t ka = 0; ka < x.keyroot_count; ++ka) {
    const int64_t kx = x.keyroots[ka];
    if (x.leftmost[kx] == kx) {
      for (int64_t j = 1; j <= y.n; ++j) a.tdm[kx * w + j] = ted::leaf_tdm_weight(a.below_ins[j], a.weight[kx * w + j]);
      if (kx == x.n) soft_table(x, y, a, w, kx, y.keyroots[ky_count - 1]);  // a one-node x: the final table
      continue;
    }
    for (int64_t kb = 0; kb < ky_count; ++kb) {
      const int64_t ky = y.keyroots[kb];
      if (y.leftmost[ky] == ky && !(kx == x.n && ky == y.n)) {
        int64_t len;
        const int64_t* path = xp.path(ka, &len);
        for (int64_t k = 0; k < len; ++k) {
          a.tdm[path[k] * w + ky] = ted::leaf_tdm_weight(a.below_del[path[k]], a.weight[path[k] * w + ky]);
        }
      } else {
        soft_table(x, y, a, w, kx, ky);
      }
    }
  }
}

// The outside sweep's soft policy over a table just recomputed by soft_table:
// every edge (the first column's are deletions, the first row's insertions),
// weighted; P[event] += inside * weight * outside / total into acc (the
// postorder kernel layout), deletions summed per row first.
template <typename W>
struct TedSoftOutside {
  using Weight = W;
  W *any, *ins, *tdm;
  const TedSoftArrays<W>& a;
  const ShareOf& share;
  double* acc;
  int64_t w, r0, c0;
  double row_deleted = 0.0;  // P of deleting x_i, this table's share

  BEDL_HD uint8_t flags(int64_t i, int64_t j, int64_t) const {
    if (i == r0) return j == c0 ? 0 : static_cast<uint8_t>(dp::kIns);
    return j == c0 ? static_cast<uint8_t>(dp::kDel) : static_cast<uint8_t>(dp::kDel | dp::kIns | dp::kMatch);
  }
  BEDL_HD W after_deletion(const W& o, int64_t i) const { return o * a.weight[i * w]; }
  BEDL_HD W after_insertion(const W& o, int64_t j) const { return o * a.weight[j]; }
  BEDL_HD W after_replacement(const W& o, int64_t i, int64_t j) const { return o * a.weight[i * w + j]; }
  BEDL_HD W tdm_inside(int64_t, int64_t, int64_t cell) const { return a.tdm[cell]; }
  BEDL_HD W inside(int64_t, int64_t, int64_t source) const { return a.tot[source]; }
  BEDL_HD void deleted(int64_t i, int64_t, int64_t cell, const W& o) {
    row_deleted += share(a.tot[cell - w] * a.weight[i * w] * o);
  }
  BEDL_HD void inserted(int64_t, int64_t j, int64_t cell, const W& o) {
    acc[j] += share(a.other[cell - 1] * a.weight[j] * o);
  }
  BEDL_HD void replaced(int64_t, int64_t, int64_t cell, const W& o) { acc[cell] += share(a.tdm[cell] * o); }
  BEDL_HD static void visited(uint8_t, const W&) {}
  BEDL_HD static void used_tdm(int64_t, int64_t) {}
  BEDL_HD void row_done(int64_t i) {
    if (i > r0) acc[i * w] += row_deleted;
    row_deleted = 0.0;
  }
};

// The inside pass (and with need_grad the outside pass, P into a.p_acc) in one
// weight type for reduced costs `reduced` (the postorder kernel layout); false
// (nothing accumulated) where the total is out of that type's range.
template <typename W>
BEDL_HD bool ted_soft_pass(const ted::FlatTree& x, const ted::FlatTree& y, const double* reduced, double temperature,
                           bool need_grad, const TedSoftArrays<W>& a, double* log_total) {
  const int64_t m = x.n, n = y.n, w = n + 1, cells = (m + 1) * w;
  weights_of(reduced, cells, temperature, a.weight);
  soft_inside(x, y, a, w);
  const W all = a.tot[m * w + n];
  if (!fast_range_holds(all, m + n)) return false;
  *log_total = log_of(all);
  if (!need_grad) return true;
  for (int64_t k = 0; k < cells; ++k) {
    a.out_any[k] = a.out_ins[k] = a.out_tdm[k] = W::zero();
    a.p_acc[k] = 0.0;
  }
  const ShareOf share(all);
  const ted::TreePaths xp = ted::paths_of(x), yp = ted::paths_of(y);
  for (int64_t ka = x.keyroot_count; ka-- > 0;) {
    for (int64_t kb = y.keyroot_count; kb-- > 0;) {
      const int64_t kx = x.keyroots[ka], ky = y.keyroots[kb];
      if (!ted::has_outside(xp, yp, w, kx, ky, a.out_tdm)) continue;
      soft_table(x, y, a, w, kx, ky);
      const ted::ForestTable t(x.leftmost, y.leftmost, kx, ky);
      TedSoftOutside<W> out{a.out_any, a.out_ins, a.out_tdm, a, share, a.p_acc, w, t.r0, t.c0};
      ted::outside_sweep(xp, yp, w, kx, ky, a.reach_end, out);
    }
  }
  return true;
}

}  // namespace soft
}  // namespace bedl
