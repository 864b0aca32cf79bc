// The AVX2 tree kernel shared by the distances (lanes_avx2.cpp) and P's
// inside pass (ted_coopt_lanes_avx2.cpp): y's wide layout, the lane helpers
// and ted_lanes itself. Included by those two files only.
#pragma once

#include "lanes.h"
#include "../../common/forest_wide.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#ifdef BEDL_X86_SIMD
namespace bedl {
namespace ted {
namespace lanes {

// ---- Four pairs at once: the distance with symbol-table costs, AVX2 ----
//
// The forest tables of 30-node random trees average 6 x 6 cells, so a sweep
// row by row spends about as much on starting rows and tables (and on the
// mispredicted exits of short loops) as on cells, and each cell waits for its
// left neighbour. Here up to four pairs that share x (and orientation) run in
// the four lanes of AVX2 vectors. For one keyroot K of x, all tables (K, H)
// over the non-leaf keyroots H of a lane's y stand side by side in one wide
// row, each with its first column (as a cell whose only finite alternative
// is the deletion), so a keyroot of x is one loop over long rows with four
// independent chains. The columns of lane l come from its own y: the jump
// and tdm reads, which follow y's structure, are gathers. Every cell uses the
// expressions of distance_table in the same order (including std::min's
// operand order), so lanes and the scalar kernel give the same bits
// (test_simd_lanes_equal_scalar_kernel).
inline bool lanes_fit(const TreeIndex& x, const TreeIndex& y) {
  // One-node trees take the scalar kernel's special cases. The wide rows of
  // large trees (comb-shaped ones have O(n^2) columns) outgrow the caches:
  // measured on random trees, lanes were 1.8x the scalar kernel at 100 nodes
  // ((n+1) W ~ 23k cells), 1.2x at 200 (~91k), 0.75x at 300 (~207k).
  return x.n >= 2 && y.n >= 2 && (x.n + 1) * y.wide_width <= (int64_t{1} << 17);
}

// P's inside pass on the lanes keeps the flags and counts of every
// non-leaf keyroot's rows (at most x.work of them), 17 bytes per lane and
// column: within kLaneCountBudget bytes per thread (comb-shaped x have
// O(n^2) such rows), else the pair takes the scalar kernel.
constexpr double kLaneCountBudget = double{1 << 26};  // 64 MB
inline bool coopt_lanes_fit(const TreeIndex& x, const TreeIndex& y) {
  return lanes_fit(x, y) && x.work * static_cast<double>(y.wide_width) * kLanes * 17.0 <= kLaneCountBudget;
}

// Bytes of one WideY (an upper bound) for a table of `rows` rows, and how
// many all of a call's may take.
inline size_t wide_bytes_of(int64_t width, int64_t rows) {
  const int64_t per_column = 7 + (rows <= WideY::kRepBySymbolLimit ? rows : 0);
  return static_cast<size_t>(width) * static_cast<size_t>(per_column) * sizeof(double) + 256;
}
constexpr size_t kWideBudget = size_t{1} << 28;  // 256 MB

template <typename scalar_t>
void build_wide(const TreeIndex& y, const int64_t* labels, const scalar_t* table, int64_t rows, int64_t cols,
                WideY& out) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const scalar_t* gap_row = table + (rows - 1) * cols;
  std::vector<int64_t> symbol(y.n + 1, 0);
  for (int64_t j = 1; j <= y.n; ++j) symbol[j] = labels[y.pre_of_post[j]];
  std::vector<double> below;
  sums_below(y, [&](int64_t j) { return static_cast<double>(gap_row[symbol[j]]); }, below);
  out = WideY{};
  for (auto* v : {&out.ins, &out.first_row, &out.below_ins}) v->reserve(y.wide_width);
  for (auto* v : {&out.jump_at, &out.def_at, &out.symbol}) v->reserve(y.wide_width);
  std::vector<int64_t> def_of(y.n + 1, -1);  // node -> def_at / kLanes, filled in keyroot order
  out.table_col.reserve(y.keyroots.size());
  double sum = 0.0;  // the table's first row so far
  wide_columns(
      y.keyroots.data(), static_cast<int64_t>(y.keyroots.size()), y.leftmost.data(), def_of.data(),
      [&](int64_t h, int64_t) {  // leaf keyroots: closed form
        out.leaf_symbol.push_back(symbol[h]);
        out.table_col.push_back(-1);
      },
      [&](int64_t c, int64_t node, int64_t jump, int64_t def) {
        double ins = inf, below_ins = inf;
        if (node == 0) {  // the first column: deletions only
          out.table_col.push_back(c);
          sum = 0.0;
        } else {
          ins = static_cast<double>(gap_row[symbol[node]]);
          sum = sum + ins;
          below_ins = below[node];
        }
        out.ins.push_back(ins);
        out.first_row.push_back(sum);
        out.below_ins.push_back(below_ins);
        out.jump_at.push_back(jump * kLanes);
        out.def_at.push_back(def * kLanes);
        out.symbol.push_back(symbol[node]);
      });
  out.width = static_cast<int64_t>(out.ins.size());
  out.final_col = out.width - 1;
  out.def_of_node = std::move(def_of);
  if (rows <= WideY::kRepBySymbolLimit) {
    out.rep_by_symbol.resize(rows * out.width);
    for (int64_t a = 0; a < rows; ++a) {
      for (int64_t c = 0; c < out.width; ++c)
        out.rep_by_symbol[a * out.width + c] = static_cast<double>(table[a * cols + out.symbol[c]]);
    }
  }
}

// v with at least n elements. Unlike resize, it never shrinks: a buffer
// reused by groups of varying sizes would otherwise be value-initialised
// again over the difference every time it grows back (every element read is
// written first in the group that reads it).
template <typename T>
inline void at_least(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// src[at[0..3]] as a vector. Four loads and two inserts: vgatherqpd took
// 1.6x as long on the AMD EPYC (Zen 3) this was measured on.
__attribute__((target("avx2"))) inline __m256d gather4(const double* src, const int64_t* at) {
  const __m128d lo = _mm_loadh_pd(_mm_load_sd(src + at[0]), src + at[1]);
  const __m128d hi = _mm_loadh_pd(_mm_load_sd(src + at[2]), src + at[3]);
  return _mm256_insertf128_pd(_mm256_castpd128_pd256(lo), hi, 1);
}
__attribute__((target("avx2"))) inline __m256d gather4(const float* src, const int64_t* at) {
  return _mm256_set_pd(src[at[3]], src[at[2]], src[at[1]], src[at[0]]);
}

// out[c * kLanes + l] = (c < len[l] ? src[l][c] : pad) (+ l for indices) for c < W:
// four columns at a time as a 4 x 4 transpose, the ragged end one by one.
template <typename T, bool kIndex>
__attribute__((target("avx2"))) void interleave_lanes(const T* const src[kLanes], const int64_t len[kLanes],
                                                      T pad, int64_t W, T* out) {
  static_assert(sizeof(T) == sizeof(double), "64-bit columns");
  int64_t common = W;
  for (int l = 0; l < kLanes; ++l) common = std::min(common, len[l]);
  common -= common % kLanes;
  const __m256i lane_index = _mm256_set_epi64x(3, 2, 1, 0);
  for (int64_t c = 0; c < common; c += kLanes) {
    const __m256d r0 = _mm256_loadu_pd(reinterpret_cast<const double*>(src[0] + c));
    const __m256d r1 = _mm256_loadu_pd(reinterpret_cast<const double*>(src[1] + c));
    const __m256d r2 = _mm256_loadu_pd(reinterpret_cast<const double*>(src[2] + c));
    const __m256d r3 = _mm256_loadu_pd(reinterpret_cast<const double*>(src[3] + c));
    const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    const __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    __m256d cols[kLanes] = {_mm256_permute2f128_pd(t0, t2, 0x20), _mm256_permute2f128_pd(t1, t3, 0x20),
                            _mm256_permute2f128_pd(t0, t2, 0x31), _mm256_permute2f128_pd(t1, t3, 0x31)};
    for (int k = 0; k < kLanes; ++k) {
      if (kIndex) cols[k] = _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(cols[k]), lane_index));
      _mm256_storeu_pd(reinterpret_cast<double*>(out + (c + k) * kLanes), cols[k]);
    }
  }
  for (int64_t c = common; c < W; ++c) {
    for (int l = 0; l < kLanes; ++l) {
      const T v = c < len[l] ? src[l][c] : pad;
      out[c * kLanes + l] = kIndex ? static_cast<T>(v + l) : v;
    }
  }
}

// Replacement costs of x_i against column block c: from its row by symbol
// (rep_w), else gathered from its row of the table.
template <typename scalar_t>
__attribute__((target("avx2"))) inline __m256d rep_block(const double* rep_w, const scalar_t* rep_row,
                                                         const int64_t* symbol_at, int64_t c) {
  return rep_w ? _mm256_loadu_pd(rep_w + c) : gather4(rep_row, symbol_at + c);
}

// tdm of column block c in a row of K's path (or K's own row): defined from
// the cell up-left (`diag`) where the column is its own definition, i.e. on
// a path of y's tables; elsewhere read where it was defined (before in this
// row, or a leaf keyroot's slot). Stored in the row's tdm and returned.
// `own` holds the block's own indices and advances to the next block.
// on_path: where the block's columns define it.
__attribute__((target("avx2"))) inline __m256d path_tdm_block(double* tdm_row, const int64_t* def_at,
                                                              int64_t c, __m256i& own, __m256d diag,
                                                              __m256d rep, __m256d& on_path) {
  on_path = _mm256_castsi256_pd(
      _mm256_cmpeq_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(def_at + c)), own));
  own = _mm256_add_epi64(own, _mm256_set1_epi64x(kLanes));
  const __m256d tv = _mm256_blendv_pd(gather4(tdm_row, def_at + c), _mm256_add_pd(diag, rep), on_path);
  _mm256_storeu_pd(tdm_row + c, tv);
  return tv;
}

// The tie test's parameters per lane: Tie's rel_tol and each pair's cost scale.
struct LaneTie {
  __m256d rel_tol, scale;
};

// The forest cell on four lanes, one pair per lane: common/forest.h's cell
// (its alternatives and value, the tie test, dp::enter) instantiated with four
// lanes of doubles, to the scalar kernel's bits. Returns the cells' values.
// With kCount also their co-optimal flags and inside counts: only the deletion
// enters first and padding columns (insertion cost +inf), as the scalar tables
// set; the counts go to total_out and other_out, the flags (the three
// alternatives' 4-bit lane masks; lane_flags unpacks them) to flags_out, and
// left_other becomes the counts not entered by a deletion. match_count is the
// match's count (the source cell's count times tdm's). A match count's
// product needs no zero guard (0 * inf stays 0): both factors are >= 1 in
// every column of a pair; only padding and first columns hold zeros, and
// there the match is masked out (`real`). kNonnegative: every cost is >= 0
// (ties_nonnegative, the same flags).
template <bool kCount, bool kNonnegative>
__attribute__((target("avx2"))) inline __m256d lane_cell(const LaneTie& tie, __m256d up, __m256d del,
                                                         __m256d source, __m256d tdm, __m256d left, __m256d ins_cost,
                                                         [[maybe_unused]] __m256d up_total,
                                                         [[maybe_unused]] __m256d& left_other,
                                                         [[maybe_unused]] __m256d match_count,
                                                         [[maybe_unused]] double* total_out,
                                                         [[maybe_unused]] double* other_out,
                                                         [[maybe_unused]] uint16_t* flags_out) {
  const ForestAlternatives<__m256d> alt = forest_alternatives(up, del, source, tdm, left, ins_cost);
  const __m256d best = alt.best();
  if constexpr (kCount) {
    const auto real = ins_cost < _mm256_set1_pd(std::numeric_limits<double>::infinity());
    std::remove_const_t<decltype(real)> by_del, by_ins, by_match;
    if constexpr (kNonnegative) {
      by_del = dp::ties_nonnegative(alt.del, best, tie.scale, tie.rel_tol);
      by_ins = dp::ties_nonnegative(alt.ins, best, tie.scale, tie.rel_tol) & real;
      by_match = dp::ties_nonnegative(alt.match, best, tie.scale, tie.rel_tol) & real;
    } else {
      const __m256d threshold = dp::tie_threshold(best, tie.scale, tie.rel_tol);
      by_del = dp::ties(alt.del, best, threshold, tie.rel_tol);
      by_ins = dp::ties(alt.ins, best, threshold, tie.rel_tol) & real;
      by_match = dp::ties(alt.match, best, threshold, tie.rel_tol) & real;
    }
    __m256d in_del, in_other;
    dp::enter(dp::lane_gate(by_del, by_ins, by_match), up_total, left_other, match_count, in_del, in_other);
    _mm256_storeu_pd(total_out, _mm256_add_pd(in_del, in_other));
    _mm256_storeu_pd(other_out, in_other);
    *flags_out = static_cast<uint16_t>(_mm256_movemask_pd((__m256d)by_del) |
                                       _mm256_movemask_pd((__m256d)by_ins) << kLanes |
                                       _mm256_movemask_pd((__m256d)by_match) << (2 * kLanes));
    left_other = in_other;
  }
  return best;
}

// Lane l's flags (dp::kDel | kIns | kMatch) from four cells' packed bits.
inline uint8_t lane_flags(uint16_t packed, int l) {
  return static_cast<uint8_t>(((packed >> l) & dp::kDel) | ((packed >> (kLanes - 1 + l)) & dp::kIns) |
                              ((packed >> (2 * kLanes - 2 + l)) & dp::kMatch));
}

// Distances of the pairs (x, ys[l]) for l < lanes (2 <= lanes <= 4; unused
// lanes repeat the last pair) into out[l]; x_labels in preorder. With kCount
// also their co-optimal flags and inside counts (ws.counts), ties decided
// with rel_tol and the lanes' cost scales `scale` (kNonnegative: where every
// cost of the table is >= 0, a shorter tie test with the same flags).
template <bool kCount, bool kNonnegative = false, typename scalar_t>
__attribute__((target("avx2"))) void ted_lanes(const TreeIndex& x, const WideY* const* ys,
                                               int lanes, const scalar_t* table, int64_t R, int64_t C,
                                               const int64_t* x_labels, LaneWorkspace& ws,
                                               double* out, double rel_tol = 0.0,
                                               const double* scale = nullptr) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const int64_t m = x.n, gap = C - 1;
  const WideY* y_of[kLanes];
  int64_t W = 0, L = 0;
  for (int l = 0; l < kLanes; ++l) {
    y_of[l] = ys[std::min(l, lanes - 1)];
    W = std::max(W, y_of[l]->width);
    L = std::max(L, static_cast<int64_t>(y_of[l]->leaf_symbol.size()));
  }
  const int64_t row_len = W * kLanes, tdm_row = (L + 1 + W) * kLanes, tdm_start = (L + 1) * kLanes;

  // x's side.
  at_least(ws.x_symbol, m + 1);
  at_least(ws.del, m + 1);
  for (int64_t i = 1; i <= m; ++i) {
    ws.x_symbol[i] = x_labels[x.pre_of_post[i]];
    ws.del[i] = static_cast<double>(table[ws.x_symbol[i] * C + gap]);
  }
  sums_below(x, [&](int64_t i) { return ws.del[i]; }, ws.below_del);
  // Rows of leaves and of paths read a replacement cost per cell. With few
  // symbols in x (unit costs over a small alphabet), one row of them per
  // symbol costs less than gathering them in every such row.
  if (ws.slot_of.size() < static_cast<size_t>(R)) ws.slot_of.resize(R, -1);
  std::vector<int64_t>& symbols = ws.distinct_symbols;
  symbols.clear();
  at_least(ws.rep_slot, m + 1);
  for (int64_t i = 1; i <= m; ++i) {
    int64_t& slot = ws.slot_of[ws.x_symbol[i]];
    if (slot < 0) {
      slot = static_cast<int64_t>(symbols.size());
      symbols.push_back(ws.x_symbol[i]);
    }
    ws.rep_slot[i] = slot;
  }
  for (int64_t s : symbols) ws.slot_of[s] = -1;
  const bool by_symbol = 2 * static_cast<int64_t>(symbols.size()) <= m;

  // The lanes' columns, interleaved and padded to W.
  at_least(ws.fd, (m + 1) * row_len);
  at_least(ws.tdm, (m + 1) * tdm_row);
  for (auto* v : {&ws.ins, &ws.first_row, &ws.below_ins}) at_least(*v, row_len);
  for (auto* v : {&ws.jump_at, &ws.def_at}) at_least(*v, row_len);
  ws.leaf_symbol.assign(L * kLanes, 0);
  if (by_symbol) {
    at_least(ws.rep_w, symbols.size() * row_len);
    at_least(ws.leaf_rep_w, symbols.size() * L * kLanes);
  } else {
    at_least(ws.symbol_at, row_len);
  }
  {
    // Padding columns are like first columns (deletions only, no tdm); they
    // jump to column 0.
    int64_t len[kLanes];
    const double *ins_src[kLanes], *first_src[kLanes], *below_src[kLanes];
    const int64_t *jump_src[kLanes], *def_src[kLanes];
    for (int l = 0; l < kLanes; ++l) {
      const WideY& y = *y_of[l];
      len[l] = y.width;
      ins_src[l] = y.ins.data();
      first_src[l] = y.first_row.data();
      below_src[l] = y.below_ins.data();
      jump_src[l] = y.jump_at.data();
      def_src[l] = y.def_at.data();
    }
    interleave_lanes<double, false>(ins_src, len, inf, W, ws.ins.data());
    interleave_lanes<double, false>(first_src, len, 0.0, W, ws.first_row.data());
    interleave_lanes<double, false>(below_src, len, inf, W, ws.below_ins.data());
    interleave_lanes<int64_t, true>(jump_src, len, 0, W, ws.jump_at.data());
    interleave_lanes<int64_t, true>(def_src, len, -kLanes, W, ws.def_at.data());
  }
  for (int l = 0; l < kLanes; ++l) {
    const WideY& y = *y_of[l];
    const int64_t w = y.width;
    for (size_t k = 0; k < y.leaf_symbol.size(); ++k) ws.leaf_symbol[k * kLanes + l] = y.leaf_symbol[k];
    if (by_symbol && y.rep_by_symbol.empty()) {
      for (size_t s = 0; s < symbols.size(); ++s) {
        const scalar_t* rep_row = table + symbols[s] * C;
        double* rep = ws.rep_w.data() + s * row_len + l;
        for (int64_t col = 0; col < w; ++col) rep[col * kLanes] = static_cast<double>(rep_row[y.symbol[col]]);
        for (int64_t col = w; col < W; ++col) rep[col * kLanes] = 0.0;
      }
    } else if (!by_symbol) {
      for (int64_t col = 0; col < W; ++col) ws.symbol_at[col * kLanes + l] = col < w ? y.symbol[col] : 0;
    }
  }
  if (by_symbol && !y_of[0]->rep_by_symbol.empty()) {  // (all lanes have them: same table)
    const double* src[kLanes];
    int64_t len[kLanes];
    for (size_t s = 0; s < symbols.size(); ++s) {
      for (int l = 0; l < kLanes; ++l) {
        src[l] = y_of[l]->rep_by_symbol.data() + symbols[s] * y_of[l]->width;
        len[l] = y_of[l]->width;
      }
      interleave_lanes<double, false>(src, len, 0.0, W, ws.rep_w.data() + s * row_len);
    }
  }
  if (by_symbol) {
    for (size_t s = 0; s < symbols.size(); ++s) {
      const scalar_t* rep_row = table + symbols[s] * C;
      double* rep = ws.leaf_rep_w.data() + s * L * kLanes;
      for (int64_t k = 0; k < L * kLanes; ++k) rep[k] = static_cast<double>(rep_row[ws.leaf_symbol[k]]);
    }
  }
  for (int64_t i = 0; i <= m; ++i) {
    for (int l = 0; l < kLanes; ++l) ws.tdm[i * tdm_row + tdm_start - kLanes + l] = inf;
  }
  at_least(ws.jump_first, row_len);
  for (int64_t at = 0; at < row_len; ++at) ws.jump_first[at] = ws.first_row[ws.jump_at[at]];

  double* fd = ws.fd.data();
  [[maybe_unused]] const LaneTie tie{_mm256_set1_pd(rel_tol), kCount ? _mm256_loadu_pd(scale) : _mm256_setzero_pd()};
  // Local pointers: through the vectors the compiler reloads them after every store.
  const double *ins = ws.ins.data(), *below_ins = ws.below_ins.data();
  const int64_t *jump_at = ws.jump_at.data(), *def_at = ws.def_at.data();
  const int64_t* symbol_at = ws.symbol_at.data();
  const double* jump_first = ws.jump_first.data();
  const int64_t* x_symbol = ws.x_symbol.data();
  const double* below_del = ws.below_del.data();
  auto tdm_of = [&](int64_t i) { return ws.tdm.data() + i * tdm_row + tdm_start; };
  auto rep_w_of = [&](int64_t i) -> const double* {
    return by_symbol ? ws.rep_w.data() + ws.rep_slot[i] * row_len : nullptr;
  };
  const __m256i lane_index = _mm256_set_epi64x(3, 2, 1, 0);
  // The counting instance's blocks: every non-leaf keyroot's rows r0 + 1 ..
  // rows_end kept; the first row's counts are ones.
  LaneCounts& lc = ws.counts;
  const __m256d one = _mm256_set1_pd(1.0);
  if constexpr (kCount) {
    lc.block_row.assign(x.keyroots.size(), -1);
    int64_t block_rows = 0;
    for (size_t a = 0; a < x.keyroots.size(); ++a) {
      const int64_t kx = x.keyroots[a], r0 = x.leftmost[kx] - 1;
      if (r0 + 1 == kx) continue;
      lc.block_row[a] = block_rows;
      block_rows += (kx == m ? m : kx - 1) - r0;
    }
    at_least(lc.tot, block_rows * row_len);
    at_least(lc.other, block_rows * row_len);
    at_least(lc.flags, block_rows * W);
    at_least(lc.tdm_count, (m + 1) * tdm_row);
    for (int64_t i = 0; i <= m; ++i) _mm256_storeu_pd(lc.tdm_count.data() + i * tdm_row + tdm_start - kLanes, _mm256_setzero_pd());
    lc.ones.assign(row_len, 1.0);
  }
  auto count_of = [&](int64_t i) { return lc.tdm_count.data() + i * tdm_row + tdm_start; };
  for (size_t a = 0; a < x.keyroots.size(); ++a) {
    const int64_t kx = x.keyroots[a], r0 = x.leftmost[kx] - 1;
    // A leaf keyroot's tdm (y inserted but for its root, which is matched)
    // is computed where it is read: rows of leaves below.
    if (r0 + 1 == kx) continue;
    // y's leaf keyroots: x deleted but for the root, for the nodes on K's path.
    const int64_t path_len = x.path_begin[a + 1] - x.path_begin[a];
    const int64_t* path = x.path_nodes.data() + x.path_begin[a];
    for (int64_t s = 0; s < path_len; ++s) {
      const int64_t i = path[s];
      const __m256d below = _mm256_set1_pd(below_del[i]);
      double* slots = tdm_of(i);
      const double* rep_w = by_symbol ? ws.leaf_rep_w.data() + ws.rep_slot[i] * L * kLanes : nullptr;
      const scalar_t* rep_row = table + x_symbol[i] * C;
      for (int64_t k = 0; k < L; ++k) {
        const __m256d rep = rep_w ? _mm256_loadu_pd(rep_w + k * kLanes)
                                  : gather4(rep_row, ws.leaf_symbol.data() + k * kLanes);
        _mm256_storeu_pd(slots - (2 + k) * kLanes, _mm256_add_pd(below, rep));
        if constexpr (kCount) _mm256_storeu_pd(count_of(i) - (2 + k) * kLanes, one);  // one derivation
      }
    }
    // Row r0 is the first row, read only as the row above r0 + 1 (rows on
    // K's path jump to it through jump_first).
    // Only the tdm cells of row kx are read later (but in the final tables).
    const int64_t rows_end = kx == m ? m : kx - 1;
    // Counts of row i (i > r0) in this keyroot's block; the first row's are ones.
    auto total_of = [&](int64_t i) {
      return i == r0 ? lc.ones.data() : lc.tot.data() + (lc.block_row[a] + i - r0 - 1) * row_len;
    };
    for (int64_t i = r0 + 1; i <= rows_end; ++i) {
      const int64_t li = x.leftmost[i];
      const bool x_on_path = li == r0 + 1;
      const double* up = i - 1 == r0 ? ws.first_row.data() : fd + (i - 1) * row_len;
      double* cur = fd + i * row_len;
      const double* jump = fd + (li - 1) * row_len;  // (rows on K's path: jump_first)
      double* tdm_i = tdm_of(i);
      const scalar_t* rep_row = table + x_symbol[i] * C;
      const double* rep_w = rep_w_of(i);
      const __m256d del = _mm256_set1_pd(ws.del[i]);
      __m256d left = _mm256_set1_pd(inf);
      // Counting: the cells' counts and flags (lane_cell) from the row
      // above's and the jump row's counts.
      [[maybe_unused]] const double* up_total = nullptr;
      [[maybe_unused]] const double* jump_total = nullptr;
      [[maybe_unused]] double* cur_total = nullptr;
      [[maybe_unused]] double* cur_other = nullptr;
      [[maybe_unused]] uint16_t* cur_flags = nullptr;
      [[maybe_unused]] double* count_i = count_of(i);
      [[maybe_unused]] __m256d left_other = _mm256_setzero_pd();
      if constexpr (kCount) {
        up_total = total_of(i - 1);
        jump_total = x_on_path ? nullptr : total_of(li - 1);
        cur_total = lc.tot.data() + (lc.block_row[a] + i - r0 - 1) * row_len;
        cur_other = lc.other.data() + (lc.block_row[a] + i - r0 - 1) * row_len;
        cur_flags = lc.flags.data() + (lc.block_row[a] + i - r0 - 1) * W;
      }
      // Every cell is lane_cell: the forest cell of common/forest.h.
      if (!x_on_path && li != i) {
        // i lies on a path below: its row of tdm is complete.
        for (int64_t c = 0; c < row_len; c += kLanes) {
          __m256d match_count = left;  // (unused without counts)
          if constexpr (kCount) match_count = gather4(jump_total, jump_at + c) * _mm256_loadu_pd(count_i + c);
          left = lane_cell<kCount, kNonnegative>(tie, _mm256_loadu_pd(up + c), del, gather4(jump, jump_at + c),
                                                 _mm256_loadu_pd(tdm_i + c), left, _mm256_loadu_pd(ins + c),
                                                 kCount ? _mm256_loadu_pd(up_total + c) : left, left_other,
                                                 match_count, cur_total + c, cur_other + c, cur_flags + c / kLanes);
          _mm256_storeu_pd(cur + c, left);
        }
      } else if (!x_on_path) {
        // A leaf: tdm(i, j) inserts y's subtree of j but j, matched to i
        // (the leaf keyroots' closed form; the same sums for leaves on paths),
        // one derivation.
        for (int64_t c = 0; c < row_len; c += kLanes) {
          const __m256d tv = leaf_tdm_value(_mm256_loadu_pd(below_ins + c), rep_block(rep_w, rep_row, symbol_at, c));
          left = lane_cell<kCount, kNonnegative>(tie, _mm256_loadu_pd(up + c), del, gather4(jump, jump_at + c), tv,
                                                 left, _mm256_loadu_pd(ins + c),
                                                 kCount ? _mm256_loadu_pd(up_total + c) : left, left_other,
                                                 kCount ? gather4(jump_total, jump_at + c) : left, cur_total + c,
                                                 cur_other + c, cur_flags + c / kLanes);
          _mm256_storeu_pd(cur + c, left);
        }
      } else {
        // Rows on K's path define their tdm as they go (path_tdm_block) and
        // jump to the first row (one derivation there).
        __m256d diag = _mm256_setzero_pd();  // column 0 is a first column, never on a path
        [[maybe_unused]] __m256d diag_count = _mm256_setzero_pd();
        __m256i own = lane_index;
        for (int64_t c = 0; c < row_len; c += kLanes) {
          const __m256d above = _mm256_loadu_pd(up + c);
          __m256d on_path;
          const __m256d tv =
              path_tdm_block(tdm_i, def_at, c, own, diag, rep_block(rep_w, rep_row, symbol_at, c), on_path);
          diag = above;
          __m256d up_count = left, tv_count = left;  // (unused without counts)
          if constexpr (kCount) {
            up_count = _mm256_loadu_pd(up_total + c);
            tv_count = _mm256_blendv_pd(gather4(count_i, def_at + c), diag_count, on_path);
            _mm256_storeu_pd(count_i + c, tv_count);
            diag_count = up_count;
          }
          // (the match's count: the first row's one times tv_count)
          left = lane_cell<kCount, kNonnegative>(tie, above, del, _mm256_loadu_pd(jump_first + c), tv, left,
                                                 _mm256_loadu_pd(ins + c), up_count, left_other, tv_count,
                                                 cur_total + c, cur_other + c, cur_flags + c / kLanes);
          _mm256_storeu_pd(cur + c, left);
        }
      }
    }
    if (kx == m) break;  // the last keyroot
    // The row of tdm of kx, as a path row would leave it (from row kx - 1).
    const double* up = fd + (kx - 1) * row_len;
    const scalar_t* rep_row = table + x_symbol[kx] * C;
    const double* rep_w = rep_w_of(kx);
    double* tdm_k = tdm_of(kx);
    [[maybe_unused]] const double* up_total = kCount ? total_of(kx - 1) : nullptr;
    [[maybe_unused]] double* count_k = count_of(kx);
    __m256d diag = _mm256_setzero_pd();
    [[maybe_unused]] __m256d diag_count = _mm256_setzero_pd();
    __m256i own = lane_index;
    for (int64_t c = 0; c < row_len; c += kLanes) {
      __m256d on_path;
      path_tdm_block(tdm_k, def_at, c, own, diag, rep_block(rep_w, rep_row, symbol_at, c), on_path);
      diag = _mm256_loadu_pd(up + c);
      if constexpr (kCount) {
        _mm256_storeu_pd(count_k + c, _mm256_blendv_pd(gather4(count_k, def_at + c), diag_count, on_path));
        diag_count = _mm256_loadu_pd(up_total + c);
      }
    }
  }
  for (int l = 0; l < lanes; ++l) out[l] = fd[m * row_len + y_of[l]->final_col * kLanes + l];
}

}  // namespace lanes
}  // namespace ted
}  // namespace bedl
#endif  // BEDL_X86_SIMD
