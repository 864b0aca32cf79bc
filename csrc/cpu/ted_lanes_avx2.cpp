// Tree distances with symbol-table costs, four pairs at a time with AVX2.
#include "ted_lanes_avx2.h"

#include "ted_passes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

namespace bedl {
namespace ted {
namespace {

#ifdef BEDL_X86_SIMD
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

// Bytes of one WideY (an upper bound), and how many all of a call's may take.
inline size_t wide_bytes_of(int64_t width, int64_t S) {
  const int64_t per_column = 7 + (S <= WideY::kRepBySymbolLimit ? S : 0);
  return static_cast<size_t>(width) * static_cast<size_t>(per_column) * sizeof(double) + 256;
}
constexpr size_t kWideBudget = size_t{1} << 28;  // 256 MB

template <typename scalar_t>
void build_wide(const TreeIndex& y, const int64_t* labels, const scalar_t* table, int64_t S,
                WideY& out) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const scalar_t* gap_row = table + (S - 1) * S;
  std::vector<int64_t> symbol(y.n + 1, 0);
  for (int64_t j = 1; j <= y.n; ++j) symbol[j] = labels[y.pre_of_post[j]];
  std::vector<double> below;
  sums_below(y, [&](int64_t j) { return static_cast<double>(gap_row[symbol[j]]); }, below);
  out = WideY{};
  for (auto* v : {&out.ins, &out.first_row, &out.below_ins}) v->reserve(y.wide_width);
  for (auto* v : {&out.jump_at, &out.def_at, &out.symbol}) v->reserve(y.wide_width);
  std::vector<int64_t> def_of(y.n + 1, -1);  // node -> def_at / kLanes, filled in keyroot order
  auto column = [&](double ins, double first, double below_ins, int64_t jump, int64_t node, bool path) {
    if (path) def_of[node] = static_cast<int64_t>(out.ins.size());
    out.ins.push_back(ins);
    out.first_row.push_back(first);
    out.below_ins.push_back(below_ins);
    out.jump_at.push_back(jump * kLanes);
    out.def_at.push_back(node == 0 ? -kLanes : def_of[node] * kLanes);
    out.symbol.push_back(symbol[node]);
  };
  out.table_col.reserve(y.keyroots.size());
  for (int64_t h : y.keyroots) {
    const int64_t c0 = y.leftmost[h] - 1;
    if (c0 + 1 == h) {  // leaf keyroots: closed form
      def_of[h] = -2 - static_cast<int64_t>(out.leaf_symbol.size());
      out.leaf_symbol.push_back(symbol[h]);
      out.table_col.push_back(-1);
      continue;
    }
    const int64_t base = static_cast<int64_t>(out.ins.size());
    out.table_col.push_back(base);
    column(inf, 0.0, inf, base, 0, false);  // the first column: deletions only
    double sum = 0.0;
    for (int64_t j = c0 + 1; j <= h; ++j) {
      const double ins = static_cast<double>(gap_row[symbol[j]]);
      sum = sum + ins;
      column(ins, sum, below[j], base + y.leftmost[j] - 1 - c0, j, y.leftmost[j] == c0 + 1);
    }
  }
  out.width = static_cast<int64_t>(out.ins.size());
  out.final_col = out.width - 1;
  out.def_of_node = std::move(def_of);
  if (S <= WideY::kRepBySymbolLimit) {
    out.rep_by_symbol.resize(S * out.width);
    for (int64_t a = 0; a < S; ++a) {
      for (int64_t c = 0; c < out.width; ++c)
        out.rep_by_symbol[a * out.width + c] = static_cast<double>(table[a * S + out.symbol[c]]);
    }
  }
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

// Tie::within: gap <= threshold or gap <= rel_tol |value|, as one comparison
// with the larger bound (the same for values that are not NaN).
__attribute__((target("avx2"))) inline __m256d lane_within(const LaneTie& tie, __m256d value, __m256d best,
                                                           __m256d threshold, __m256d abs_mask) {
  const __m256d bound = _mm256_max_pd(threshold, _mm256_mul_pd(tie.rel_tol, _mm256_and_pd(value, abs_mask)));
  return _mm256_cmp_pd(_mm256_sub_pd(value, best), bound, _CMP_LE_OQ);
}

// FastCount's product: 0 where either factor is 0 (0 * inf stays 0).
__attribute__((target("avx2"))) inline __m256d count_product(__m256d a, __m256d b) {
  const __m256d zero = _mm256_setzero_pd();
  const __m256d either = _mm256_or_pd(_mm256_cmp_pd(a, zero, _CMP_EQ_OQ), _mm256_cmp_pd(b, zero, _CMP_EQ_OQ));
  return _mm256_andnot_pd(either, _mm256_mul_pd(a, b));
}

// Four cells' co-optimal flags (Tie::flags) and inside counts (count_entries
// on FastCount), one cell per lane, to the scalar kernel's bits. Only the
// deletion enters first and padding columns (insertion cost +inf), as the
// scalar tables set. Stores the counts and flags; returns the counts not
// entered by a deletion (the next cell's left_other). The flags are packed
// as the three alternatives' 4-bit lane masks (lane_flags unpacks them).
__attribute__((target("avx2"))) inline __m256d count_cells(const LaneTie& tie, __m256d del_alt, __m256d ins_alt,
                                                           __m256d match, __m256d best, __m256d ins_cost,
                                                           __m256d up_total, __m256d left_other,
                                                           __m256d match_count, double* total_out,
                                                           double* other_out, uint16_t* flags_out) {
  const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
  const __m256d threshold = _mm256_mul_pd(tie.rel_tol, _mm256_max_pd(_mm256_and_pd(best, abs_mask), tie.scale));
  const __m256d real = _mm256_cmp_pd(ins_cost, _mm256_set1_pd(std::numeric_limits<double>::infinity()), _CMP_LT_OQ);
  const __m256d by_del = lane_within(tie, del_alt, best, threshold, abs_mask);
  const __m256d by_ins = _mm256_and_pd(lane_within(tie, ins_alt, best, threshold, abs_mask), real);
  const __m256d by_match = _mm256_and_pd(lane_within(tie, match, best, threshold, abs_mask), real);
  const __m256d other = _mm256_add_pd(_mm256_and_pd(by_ins, left_other), _mm256_and_pd(by_match, match_count));
  _mm256_storeu_pd(total_out, _mm256_add_pd(_mm256_and_pd(by_del, up_total), other));
  _mm256_storeu_pd(other_out, other);
  *flags_out = static_cast<uint16_t>(_mm256_movemask_pd(by_del) | _mm256_movemask_pd(by_ins) << kLanes |
                                     _mm256_movemask_pd(by_match) << (2 * kLanes));
  return other;
}

// Lane l's flags (dp::kDel | kIns | kMatch) from four cells' packed bits.
inline uint8_t lane_flags(uint16_t packed, int l) {
  return static_cast<uint8_t>(((packed >> l) & dp::kDel) | ((packed >> (kLanes - 1 + l)) & dp::kIns) |
                              ((packed >> (2 * kLanes - 2 + l)) & dp::kMatch));
}

// Distances of the pairs (x, ys[l]) for l < lanes (2 <= lanes <= 4; unused
// lanes repeat the last pair) into out[l]; x_labels in preorder. With kCount
// also their co-optimal flags and inside counts (ws.counts), ties decided
// with rel_tol and the lanes' cost scales `scale`.
template <bool kCount, typename scalar_t>
__attribute__((target("avx2"))) void ted_lanes(const TreeIndex& x, const WideY* const* ys,
                                               int lanes, const scalar_t* table, int64_t S,
                                               const int64_t* x_labels, LaneWorkspace& ws,
                                               double* out, double rel_tol = 0.0,
                                               const double* scale = nullptr) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const int64_t m = x.n, gap = S - 1;
  const WideY* y_of[kLanes];
  int64_t W = 0, L = 0;
  for (int l = 0; l < kLanes; ++l) {
    y_of[l] = ys[std::min(l, lanes - 1)];
    W = std::max(W, y_of[l]->width);
    L = std::max(L, static_cast<int64_t>(y_of[l]->leaf_symbol.size()));
  }
  const int64_t row_len = W * kLanes, tdm_row = (L + 1 + W) * kLanes, tdm_start = (L + 1) * kLanes;

  // x's side.
  ws.x_symbol.resize(m + 1);
  ws.del.resize(m + 1);
  for (int64_t i = 1; i <= m; ++i) {
    ws.x_symbol[i] = x_labels[x.pre_of_post[i]];
    ws.del[i] = static_cast<double>(table[ws.x_symbol[i] * S + gap]);
  }
  sums_below(x, [&](int64_t i) { return ws.del[i]; }, ws.below_del);
  // Rows of leaves and of paths read a replacement cost per cell. With few
  // symbols in x (unit costs over a small alphabet), one row of them per
  // symbol costs less than gathering them in every such row.
  if (ws.slot_of.size() < static_cast<size_t>(S)) ws.slot_of.resize(S, -1);
  std::vector<int64_t>& symbols = ws.distinct_symbols;
  symbols.clear();
  ws.rep_slot.resize(m + 1);
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
  ws.fd.resize((m + 1) * row_len);
  ws.tdm.resize((m + 1) * tdm_row);
  for (auto* v : {&ws.ins, &ws.first_row, &ws.below_ins}) v->resize(row_len);
  for (auto* v : {&ws.jump_at, &ws.def_at}) v->resize(row_len);
  ws.leaf_symbol.assign(L * kLanes, 0);
  if (by_symbol) {
    ws.rep_w.resize(symbols.size() * row_len);
    ws.leaf_rep_w.resize(symbols.size() * L * kLanes);
  } else {
    ws.symbol_at.resize(row_len);
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
        const scalar_t* rep_row = table + symbols[s] * S;
        double* rep = ws.rep_w.data() + s * row_len + l;
        for (int64_t col = 0; col < w; ++col) rep[col * kLanes] = static_cast<double>(rep_row[y.symbol[col]]);
        for (int64_t col = w; col < W; ++col) rep[col * kLanes] = 0.0;
      }
    } else if (!by_symbol) {
      for (int64_t col = 0; col < W; ++col) ws.symbol_at[col * kLanes + l] = col < w ? y.symbol[col] : 0;
    }
  }
  if (by_symbol && !y_of[0]->rep_by_symbol.empty()) {  // (all lanes have them: same S)
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
      const scalar_t* rep_row = table + symbols[s] * S;
      double* rep = ws.leaf_rep_w.data() + s * L * kLanes;
      for (int64_t k = 0; k < L * kLanes; ++k) rep[k] = static_cast<double>(rep_row[ws.leaf_symbol[k]]);
    }
  }
  for (int64_t i = 0; i <= m; ++i) {
    for (int l = 0; l < kLanes; ++l) ws.tdm[i * tdm_row + tdm_start - kLanes + l] = inf;
  }
  ws.jump_first.resize(row_len);
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
    lc.tot.resize(block_rows * row_len);
    lc.other.resize(block_rows * row_len);
    lc.flags.resize(block_rows * W);
    lc.tdm_count.resize((m + 1) * tdm_row);
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
      const scalar_t* rep_row = table + x_symbol[i] * S;
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
      const scalar_t* rep_row = table + x_symbol[i] * S;
      const double* rep_w = rep_w_of(i);
      const __m256d del = _mm256_set1_pd(ws.del[i]);
      __m256d left = _mm256_set1_pd(inf);
      // Counting: the cells' counts and flags (count_cells) from the row
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
      // The cell is dp::best_of(delete, match, insert), as in distance_table.
      if (!x_on_path && li != i) {
        // i lies on a path below: its row of tdm is complete.
        for (int64_t c = 0; c < row_len; c += kLanes) {
          const __m256d del_alt = _mm256_add_pd(_mm256_loadu_pd(up + c), del);
          const __m256d match = _mm256_add_pd(gather4(jump, jump_at + c), _mm256_loadu_pd(tdm_i + c));
          const __m256d ins_cost = _mm256_loadu_pd(ins + c);
          const __m256d ins_alt = _mm256_add_pd(left, ins_cost);
          left = dp::best_of4(del_alt, match, ins_alt);
          _mm256_storeu_pd(cur + c, left);
          if constexpr (kCount) {
            const __m256d match_count = count_product(gather4(jump_total, jump_at + c), _mm256_loadu_pd(count_i + c));
            left_other = count_cells(tie, del_alt, ins_alt, match, left, ins_cost, _mm256_loadu_pd(up_total + c),
                                     left_other, match_count, cur_total + c, cur_other + c, cur_flags + c / kLanes);
          }
        }
      } else if (!x_on_path) {
        // A leaf: tdm(i, j) inserts y's subtree of j but j, matched to i
        // (the leaf keyroots' closed form; the same sums for leaves on paths),
        // one derivation.
        for (int64_t c = 0; c < row_len; c += kLanes) {
          const __m256d del_alt = _mm256_add_pd(_mm256_loadu_pd(up + c), del);
          const __m256d tv = _mm256_add_pd(_mm256_loadu_pd(below_ins + c), rep_block(rep_w, rep_row, symbol_at, c));
          const __m256d match = _mm256_add_pd(gather4(jump, jump_at + c), tv);
          const __m256d ins_cost = _mm256_loadu_pd(ins + c);
          const __m256d ins_alt = _mm256_add_pd(left, ins_cost);
          left = dp::best_of4(del_alt, match, ins_alt);
          _mm256_storeu_pd(cur + c, left);
          if constexpr (kCount) {
            left_other = count_cells(tie, del_alt, ins_alt, match, left, ins_cost, _mm256_loadu_pd(up_total + c),
                                     left_other, gather4(jump_total, jump_at + c), cur_total + c, cur_other + c,
                                     cur_flags + c / kLanes);
          }
        }
      } else {
        // Rows on K's path define their tdm as they go (path_tdm_block) and
        // jump to the first row (one derivation there).
        __m256d diag = _mm256_setzero_pd();  // column 0 is a first column, never on a path
        [[maybe_unused]] __m256d diag_count = _mm256_setzero_pd();
        __m256i own = lane_index;
        for (int64_t c = 0; c < row_len; c += kLanes) {
          const __m256d above = _mm256_loadu_pd(up + c);
          const __m256d del_alt = _mm256_add_pd(above, del);
          __m256d on_path;
          const __m256d tv =
              path_tdm_block(tdm_i, def_at, c, own, diag, rep_block(rep_w, rep_row, symbol_at, c), on_path);
          diag = above;
          const __m256d match = _mm256_add_pd(_mm256_loadu_pd(jump_first + c), tv);
          const __m256d ins_cost = _mm256_loadu_pd(ins + c);
          const __m256d ins_alt = _mm256_add_pd(left, ins_cost);
          left = dp::best_of4(del_alt, match, ins_alt);
          _mm256_storeu_pd(cur + c, left);
          if constexpr (kCount) {
            const __m256d up_count = _mm256_loadu_pd(up_total + c);
            const __m256d tv_count = _mm256_blendv_pd(gather4(count_i, def_at + c), diag_count, on_path);
            _mm256_storeu_pd(count_i + c, tv_count);
            diag_count = up_count;
            // (the first row's one times tv_count)
            left_other = count_cells(tie, del_alt, ins_alt, match, left, ins_cost, up_count, left_other,
                                     count_product(one, tv_count), cur_total + c, cur_other + c,
                                     cur_flags + c / kLanes);
          }
        }
      }
    }
    if (kx == m) break;  // the last keyroot
    // The row of tdm of kx, as a path row would leave it (from row kx - 1).
    const double* up = fd + (kx - 1) * row_len;
    const scalar_t* rep_row = table + x_symbol[kx] * S;
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

// Groups of pairs for ted_lanes: same x tree and orientation, in order of y's
// width within a group so that lanes do similar work. Pairs left alone (or
// that do not fit) run on the scalar kernel.
struct LaneGroup {
  int64_t pair[kLanes];
  int count;
};

inline void plan_lanes(const std::vector<OrientedTree>& xs, const std::vector<OrientedTree>& ys,
                       const int64_t* px, const int64_t* py, int64_t batch,
                       std::vector<LaneGroup>& groups, std::vector<int64_t>& singles) {
  struct Entry {
    int64_t key, width, pair;
  };
  std::vector<Entry> unsorted;
  unsorted.reserve(batch);
  std::vector<int64_t> bucket_end(xs.size() * 2 + 1, 0);  // keys counted, then bucket ends
  for (int64_t b = 0; b < batch; ++b) {
    const OrientedPair o = orient(xs[px[b]], ys[py[b]]);
    if (!lanes_fit(o.x, o.y)) {
      singles.push_back(b);
      continue;
    }
    const bool mirrored = &o.x == &xs[px[b]].right;
    unsorted.push_back({px[b] * 2 + (mirrored ? 1 : 0), o.y.wide_width, b});
    ++bucket_end[unsorted.back().key + 1];
  }
  // By key (a counting sort: the keys are few and dense), then by width
  // within each key's (short) run.
  for (size_t k = 1; k < bucket_end.size(); ++k) bucket_end[k] += bucket_end[k - 1];
  std::vector<Entry> entries(unsorted.size());
  for (const Entry& e : unsorted) entries[bucket_end[e.key]++] = e;  // now bucket_end[key] = end of key
  for (size_t key = 0, begin = 0; key + 1 < bucket_end.size(); begin = bucket_end[key++]) {
    std::sort(entries.begin() + begin, entries.begin() + bucket_end[key], [](const Entry& p, const Entry& q) {
      return std::tie(p.width, p.pair) < std::tie(q.width, q.pair);
    });
  }
  for (size_t k = 0; k < entries.size();) {
    size_t end = k;
    while (end < entries.size() && entries[end].key == entries[k].key) ++end;
    for (; k < end; k += kLanes) {
      const int count = static_cast<int>(std::min<size_t>(kLanes, end - k));
      if (count == 1) {
        singles.push_back(entries[k].pair);
        continue;
      }
      LaneGroup g{};
      g.count = count;
      for (int l = 0; l < count; ++l) g.pair[l] = entries[k + l].pair;
      groups.push_back(g);
    }
    k = end;
  }
}
#endif  // BEDL_X86_SIMD

}  // namespace

// Distances with symbol-table costs: pairs that share x (and orientation)
// four at a time, y's wide layouts built once per tree within a memory budget,
// the rest through scalar_pair.
template <typename scalar_t>
bool symbol_distances_lanes(const SymbolBatch<scalar_t>& in, int64_t cells_per_pair, scalar_t* d,
                            const std::function<void(int64_t, TedWorkspace&)>& scalar_pair) {
#ifdef BEDL_X86_SIMD
  if (!dp::simd_avx2()) return false;
  const std::vector<OrientedTree>& xs = *in.xs;
  const std::vector<OrientedTree>& ys = *in.ys;
  const int64_t *px_p = in.pair_x, *py_p = in.pair_y, *xl_p = in.x_labels, *yl_p = in.y_labels;
  const int64_t *xptr_p = in.x_ptr, *yptr_p = in.y_ptr;
  const int64_t batch = in.batch, S = in.symbols;
  const scalar_t* t = in.table;
    std::vector<LaneGroup> groups;
    std::vector<int64_t> singles;
    plan_lanes(xs, ys, px_p, py_p, batch, groups, singles);
    // y's side of the wide layout, per tree and orientation used by a group,
    // within a memory budget (comb-shaped trees have O(n^2) columns); the
    // groups past it run on the scalar kernel.
    std::vector<WideY> wide(ys.size() * 2);
    std::vector<uint8_t> built(ys.size() * 2, 0);
    std::vector<int64_t> to_build;  // (tree * 2 + side), built below in parallel
    size_t wide_bytes = 0;
    size_t kept_groups = 0;
    for (const LaneGroup& g : groups) {
      const OrientedTree& xo = xs[px_p[g.pair[0]]];
      const int side = &orient(xo, ys[py_p[g.pair[0]]]).x == &xo.right ? 1 : 0;
      size_t more = 0;
      for (int l = 0; l < g.count; ++l) {
        const OrientedTree& yo = ys[py_p[g.pair[l]]];
        if (!built[py_p[g.pair[l]] * 2 + side]) more += wide_bytes_of((side ? yo.right : yo.left).wide_width, S);
      }
      if (wide_bytes + more > kWideBudget) {
        for (int l = 0; l < g.count; ++l) singles.push_back(g.pair[l]);
        continue;
      }
      wide_bytes += more;
      for (int l = 0; l < g.count; ++l) {
        const int64_t k = py_p[g.pair[l]] * 2 + side;
        if (built[k]) continue;
        built[k] = 1;
        to_build.push_back(k);
      }
      groups[kept_groups++] = g;
    }
    groups.resize(kept_groups);
    at::parallel_for(0, static_cast<int64_t>(to_build.size()), 16, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        const int64_t k = to_build[n], tree = k / 2;
        const OrientedTree& yo = ys[tree];
        build_wide(k % 2 ? yo.right : yo.left, yl_p + yptr_p[tree], t, S, wide[k]);
      }
    });
    const int64_t g_count = static_cast<int64_t>(groups.size());
    struct Workspaces {
      TedWorkspace ted;
      LaneWorkspace lanes;
    };
    dp::for_each_pair<Workspaces>(
        g_count + static_cast<int64_t>(singles.size()), cells_per_pair * 2, [&](int64_t k, Workspaces& ws) {
          if (k >= g_count) return scalar_pair(singles[k - g_count], ws.ted);
          const LaneGroup& g = groups[k];
          const OrientedTree& xo = xs[px_p[g.pair[0]]];
          const OrientedPair first = orient(xo, ys[py_p[g.pair[0]]]);
          const int side = &first.x == &xo.right ? 1 : 0;
          const WideY* y_wide[kLanes];
          for (int l = 0; l < g.count; ++l) y_wide[l] = &wide[py_p[g.pair[l]] * 2 + side];
          double out[kLanes];
          ted_lanes<false>(first.x, y_wide, g.count, t, S, xl_p + xptr_p[px_p[g.pair[0]]], ws.lanes, out);
          for (int l = 0; l < g.count; ++l) d[g.pair[l]] = static_cast<scalar_t>(out[l]);
        });
  return true;
#else
  (void)in, (void)cells_per_pair, (void)d, (void)scalar_pair;
  return false;
#endif
}

template bool symbol_distances_lanes<float>(const SymbolBatch<float>&, int64_t, float*,
                                           const std::function<void(int64_t, TedWorkspace&)>&);
template bool symbol_distances_lanes<double>(const SymbolBatch<double>&, int64_t, double*,
                                            const std::function<void(int64_t, TedWorkspace&)>&);


namespace {

// The distinct labels of a tree of n nodes, in order of first appearance
// (`seen`: S flags, left cleared).
inline void distinct_labels(const int64_t* labels, int64_t n, std::vector<uint8_t>& seen, std::vector<int64_t>& out) {
  out.clear();
  for (int64_t p = 0; p < n; ++p) {
    if (!seen[labels[p]]) {
      seen[labels[p]] = 1;
      out.push_back(labels[p]);
    }
  }
  for (int64_t a : out) seen[a] = 0;
}

// A pair's tie scale as fill_symbols<true> takes it, the largest absolute
// cost its padded block would hold: a maximum, so over distinct labels alone.
template <typename scalar_t>
double tie_scale(const scalar_t* table, int64_t S, const std::vector<int64_t>& x_symbols,
                 const std::vector<int64_t>& y_symbols) {
  const int64_t gap = S - 1;
  double scale = 0.0;
  for (int64_t b : y_symbols) scale = std::max(scale, std::fabs(static_cast<double>(table[gap * S + b])));
  for (int64_t a : x_symbols) {
    const scalar_t* row = table + a * S;
    scale = std::max(scale, std::fabs(static_cast<double>(row[gap])));
    for (int64_t b : y_symbols) scale = std::max(scale, std::fabs(static_cast<double>(row[b])));
  }
  return scale;
}

// Lane l's view of one table's flags and inside counts, and of all tdm
// counts, for TedPair's outside sweep: rows r0 .. kx of the table as
// pointers into the counting ted_lanes' blocks (column j of lane l at
// [(j - c0) * kLanes], flags at [j - c0]), with constant rows where the
// blocks have none: the first row (insertions, one derivation each), and
// zeros in rows nothing reaches (the last row of tables other than the
// final one: its tdm is read, not its cells). Leaf keyroots' tables (closed
// forms in the inside pass) have their first row and column only.
struct LaneSource {
  using Count = dp::FastCount;
  const uint16_t* const* flag_rows;
  const double* const* total_rows;
  const double* const* other_rows;
  int64_t r0, c0;
  int l;
  const double* const* tdm_rows;  // per node i of x: lane l's tdm counts, nullptr: one derivation
  const int64_t* def_of_node;     // y's node -> its tdm position (WideY::def_of_node)
  uint8_t flags(int64_t i, int64_t j, int64_t) const { return lane_flags(flag_rows[i - r0][j - c0], l); }
  Count total(int64_t i, int64_t j, int64_t) const { return Count{total_rows[i - r0][(j - c0) * kLanes]}; }
  Count in_other(int64_t i, int64_t j, int64_t) const { return Count{other_rows[i - r0][(j - c0) * kLanes]}; }
  Count tdm(int64_t i, int64_t j, int64_t) const {
    const double* row = tdm_rows[i];
    return row == nullptr ? Count::one() : Count{row[def_of_node[j] * kLanes]};
  }
};

// Constant rows of two columns for the tables of y's leaf keyroots (first
// column and the keyroot's own): the first row, the rows below it.
constexpr uint16_t kLeafFirstFlags[2] = {0, 0x0F << kLanes};  // (lane_flags: insertions)
constexpr uint16_t kLeafBelowFlags[2] = {0x0F, 0};              // deletions
constexpr double kLeafFirstCounts[2 * kLanes] = {1, 1, 1, 1, 1, 1, 1, 1};
constexpr double kLeafBelowTotal[2 * kLanes] = {1, 1, 1, 1, 0, 0, 0, 0};
constexpr double kLeafBelowOther[2 * kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};

// Table (a, b)'s LaneSource for lane l (its row pointers in `rows`).
inline LaneSource lane_source(const TreeIndex& x, const TreeIndex& y, const WideY& wide, const LaneCounts& lc,
                              const LaneWorkspace& lanes, int64_t row_len, int64_t W, int l, size_t a, size_t b,
                              const std::vector<const double*>& tdm_rows, LaneWorkspace::SourceRows& rows) {
  const int64_t kx = x.keyroots[a], ky = y.keyroots[b];
  const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
  const int64_t col = wide.table_col[b];
  const int64_t block = lc.block_row[a];
  const size_t count = static_cast<size_t>(kx - r0 + 1);
  rows.flags.resize(count);
  rows.total.resize(count);
  rows.other.resize(count);
  if (col < 0) {  // a leaf keyroot of y
    rows.flags[0] = kLeafFirstFlags;
    rows.total[0] = rows.other[0] = kLeafFirstCounts + l;
    for (size_t k = 1; k < count; ++k) {
      rows.flags[k] = kLeafBelowFlags;
      rows.total[k] = kLeafBelowTotal + l;
      rows.other[k] = kLeafBelowOther + l;
    }
  } else {
    const int64_t lanes_end = block < 0 ? r0 : (kx == x.n && ky == y.n ? kx : kx - 1);
    const int64_t at = col * kLanes + l;
    rows.flags[0] = lanes.first_row_flags.data() + col;
    rows.total[0] = rows.other[0] = lc.ones.data() + at;
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      const size_t k = static_cast<size_t>(i - r0);
      if (i > lanes_end) {
        rows.flags[k] = lanes.zero_flags.data() + col;
        rows.total[k] = rows.other[k] = lanes.zero_counts.data() + at;
        continue;
      }
      const int64_t block_row = block + i - r0 - 1;
      rows.flags[k] = lc.flags.data() + block_row * W + col;
      rows.total[k] = lc.tot.data() + block_row * row_len + at;
      rows.other[k] = lc.other.data() + block_row * row_len + at;
    }
  }
  return LaneSource{rows.flags.data(), rows.total.data(), rows.other.data(), r0, c0, l,
                    tdm_rows.data(), wide.def_of_node.data()};
}

}  // namespace

template <typename scalar_t>
CooptLanes<scalar_t>::CooptLanes(const SymbolBatch<scalar_t>& in, double rel_tol, const scalar_t* weights)
    : in_(in), rel_tol_(rel_tol) {
#ifdef BEDL_X86_SIMD
  if (!dp::simd_avx2()) return;
  const std::vector<OrientedTree>& xs = *in.xs;
  const std::vector<OrientedTree>& ys = *in.ys;
  key_.assign(in.batch, -1);
  std::vector<int8_t> side_of(in.batch, 0);
  std::vector<uint8_t> wanted(ys.size() * 2, 0);
  for (int64_t b = 0; b < in.batch; ++b) {
    if (weights != nullptr && weights[b] == scalar_t(0)) continue;
    const OrientedTree& xo = xs[in.pair_x[b]];
    const OrientedPair o = orient(xo, ys[in.pair_y[b]]);
    if (!coopt_lanes_fit(o.x, o.y)) continue;
    side_of[b] = &o.x == &xo.right ? 1 : 0;
    key_[b] = in.pair_x[b] * 2 + side_of[b];
  }
  // A key of one pair forms no group.
  std::vector<int64_t> pairs_of(xs.size() * 2, 0);
  for (int64_t b = 0; b < in.batch; ++b) {
    if (key_[b] >= 0) ++pairs_of[key_[b]];
  }
  for (int64_t b = 0; b < in.batch; ++b) {
    if (key_[b] < 0) continue;
    if (pairs_of[key_[b]] < 2) {
      key_[b] = -1;
    } else {
      wanted[in.pair_y[b] * 2 + side_of[b]] = 1;
    }
  }
  // y's wide layouts within the memory budget; pairs past it stay scalar.
  std::vector<int64_t> to_build;
  size_t bytes = 0;
  for (size_t k = 0; k < wanted.size(); ++k) {
    if (!wanted[k]) continue;
    const OrientedTree& yo = ys[k / 2];
    const size_t more = wide_bytes_of((k % 2 ? yo.right : yo.left).wide_width, in.symbols);
    if (bytes + more > kWideBudget) {
      wanted[k] = 0;
      continue;
    }
    bytes += more;
    to_build.push_back(static_cast<int64_t>(k));
  }
  for (int64_t b = 0; b < in.batch; ++b) {
    if (key_[b] >= 0 && !wanted[in.pair_y[b] * 2 + side_of[b]]) key_[b] = -1;
  }
  wide_.resize(ys.size() * 2);
  at::parallel_for(0, static_cast<int64_t>(to_build.size()), 16, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const int64_t k = to_build[n], tree = k / 2;
      const OrientedTree& yo = ys[tree];
      build_wide(k % 2 ? yo.right : yo.left, in.y_labels + in.y_ptr[tree], in.table, in.symbols, wide_[k]);
    }
  });
  on_ = true;
#else
  (void)rel_tol_;
#endif
}

template <typename scalar_t>
void CooptLanes<scalar_t>::group(const std::vector<int64_t>& pairs, std::vector<std::vector<int64_t>>& groups) const {
  groups.clear();
  // By key, then by y's width (lanes of similar width pad less).
  struct Entry {
    int64_t key, width, pair;
  };
  std::vector<Entry> entries;
  for (int64_t b : pairs) {
    if (fits(b)) entries.push_back({key_[b], wide_[in_.pair_y[b] * 2 + key_[b] % 2].width, b});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& p, const Entry& q) {
    return std::tie(p.key, p.width, p.pair) < std::tie(q.key, q.width, q.pair);
  });
  for (size_t k = 0; k < entries.size();) {
    size_t end = k;
    while (end < entries.size() && entries[end].key == entries[k].key) ++end;
    // Groups of four, but 4 + 1 as 3 + 2 (a pair alone takes the scalar kernel).
    for (size_t left = end - k; left >= 2;) {
      const size_t size = left == 5 ? 3 : std::min<size_t>(left, kLanes);
      std::vector<int64_t> g;
      for (size_t n = 0; n < size; ++n) g.push_back(entries[k + n].pair);
      groups.push_back(std::move(g));
      k += size;
      left -= size;
    }
    k = end;
  }
}

template <typename scalar_t>
void CooptLanes<scalar_t>::run(const int64_t* pairs, int count, LaneWorkspace& lanes, TedWorkspace& ws,
                               const std::function<void(int, bool, double, TedWorkspace&)>& done) const {
#ifdef BEDL_X86_SIMD
  using dp::FastCount;
  const std::vector<OrientedTree>& xs = *in_.xs;
  const std::vector<OrientedTree>& ys = *in_.ys;
  const int64_t S = in_.symbols;
  const int64_t x_tree = in_.pair_x[pairs[0]];
  const int side = static_cast<int>(key_[pairs[0]] % 2);
  const TreeIndex& x = side ? xs[x_tree].right : xs[x_tree].left;
  const int64_t* x_labels = in_.x_labels + in_.x_ptr[x_tree];
  const WideY* y_wide[kLanes];
  const TreeIndex* y_of[kLanes];
  double scale[kLanes];
  lanes.seen.resize(S, 0);
  distinct_labels(x_labels, x.n, lanes.seen, lanes.x_labels_distinct);
  for (int l = 0; l < kLanes; ++l) {
    const int64_t y_tree = in_.pair_y[pairs[std::min(l, count - 1)]];
    y_wide[l] = &wide_[y_tree * 2 + side];
    y_of[l] = side ? &ys[y_tree].right : &ys[y_tree].left;
    if (l >= count) {
      scale[l] = scale[count - 1];
      continue;
    }
    distinct_labels(in_.y_labels + in_.y_ptr[y_tree], y_of[l]->n, lanes.seen, lanes.y_labels_distinct);
    scale[l] = tie_scale(in_.table, S, lanes.x_labels_distinct, lanes.y_labels_distinct);
  }
  double distance[kLanes];
  ted_lanes<true>(x, y_wide, count, in_.table, S, x_labels, lanes, distance, rel_tol_, scale);
  const LaneCounts& lc = lanes.counts;
  int64_t W = 0, L = 0;
  for (int l = 0; l < kLanes; ++l) {
    W = std::max(W, y_wide[l]->width);
    L = std::max(L, static_cast<int64_t>(y_wide[l]->leaf_symbol.size()));
  }
  const int64_t row_len = W * kLanes, tdm_row = (L + 1 + W) * kLanes, tdm_start = (L + 1) * kLanes;
  const int64_t m = x.n;
  // Constant rows: the first row's flags (insertions but in first columns), zeros.
  lanes.first_row_flags.resize(W);
  for (int64_t c = 0; c < W; ++c) {
    int real = 0;
    for (int k = 0; k < kLanes; ++k) real |= (lanes.ins[c * kLanes + k] < std::numeric_limits<double>::infinity()) << k;
    lanes.first_row_flags[c] = static_cast<uint16_t>(real << kLanes);
  }
  lanes.zero_flags.assign(W, 0);
  lanes.zero_counts.assign(row_len, 0.0);
  const size_t root = x.keyroots.size() - 1;
  for (int l = 0; l < count; ++l) {
    const TreeIndex& y = *y_of[l];
    const WideY& wide = *y_wide[l];
    const int64_t n = y.n, w = n + 1;
    const double all = lc.tot[(lc.block_row[root] + m - 1) * row_len + wide.final_col * kLanes + l];
    if (!FastCount{all}.usable_total()) {
      done(l, false, 0.0, ws);
      continue;
    }
    // Every tdm's count: the lanes' rows of x's paths; x's leaf keyroots have one derivation.
    std::vector<const double*>& tdm_rows = lanes.tdm_rows;
    tdm_rows.assign(m + 1, nullptr);
    for (int64_t i = 1; i <= m; ++i) {
      const int64_t k = x.keyroots[x.path_index[i]];
      if (x.leftmost[k] != k) tdm_rows[i] = lc.tdm_count.data() + i * tdm_row + tdm_start + l;
    }
    TedPair<FastCount> pair{x, y, ws, ws.fast, w, dp::Tie{rel_tol_, scale[l]}};
    pair.outside_from_kept(FastCount{all}, [&](size_t a, size_t b) {
      return lane_source(x, y, wide, lc, lanes, row_len, W, l, a, b, tdm_rows, lanes.source_rows);
    });
    ws.y_symbol.resize(w);
    const int64_t* y_labels = in_.y_labels + in_.y_ptr[in_.pair_y[pairs[l]]];
    for (int64_t j = 1; j <= n; ++j) ws.y_symbol[j] = y_labels[y.pre_of_post[j]];
    done(l, true, distance[l], ws);
  }
#else
  (void)pairs, (void)count, (void)lanes, (void)ws, (void)done;
#endif
}

template class CooptLanes<float>;
template class CooptLanes<double>;

}  // namespace ted
}  // namespace bedl
