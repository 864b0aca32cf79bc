// The sequence edit distance alone on the CPU: the classic (m+1) x (n+1)
// table, two rows at a time, or four rows at a time in the lanes of AVX2
// vectors (sed_strips_avx2); every cell through common/sequence.h, the same
// bits on both paths. Memory: three rows of distances; the costs come from a
// row source, a padded block (PaddedRows) or rows gathered from a symbol table
// four at a time (SymbolRows), so a long pair never holds its (m+1)(n+1) costs.
// A cutoff (RowCutoff) stops a pair as soon as no completion can end at or
// below its threshold.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "../../common/sequence.h"
#include "../parallel.h"
#include "../row_minimum.h"
#include "workspace.h"

namespace bedl {
namespace sed {

// A padded cost block as rows: row(i) (i < m) replaces x_i by y_0 .. y_{n-1}
// and deletes x_i at [n]; ins() inserts y_0 .. y_{n-1}.
template <typename scalar_t>
struct PaddedRows {
  using value_type = scalar_t;
  const scalar_t* c;
  int64_t stride, m;
  void need(int64_t, int) const {}
  const scalar_t* row(int64_t i) const { return c + i * stride; }
  const scalar_t* ins() const { return c + m * stride; }
};

// At most this many doubles of rows by symbol (512 KB): a long pair keeps the
// four-row ring, so memory stays linear in |y|.
constexpr int64_t kRowsBySymbolMax = int64_t{1} << 16;

// The same rows gathered from a (R, C) symbol table (x's labels index rows, y's
// columns, the gap last in both), in slots of n + 1 doubles. Where at most half
// of x's symbols are distinct (node types, small alphabets) and their rows fit
// in kRowsBySymbolMax, each distinct symbol's row is gathered once; otherwise
// need(first, count) gathers rows first .. first + count - 1 (count <= 4,
// ascending calls) into a ring of four, so memory stays linear in |y|. The
// same costs either way.
template <typename scalar_t, typename Buffer = std::vector<double>>
struct SymbolRows {
  using value_type = double;
  const scalar_t* table;
  int64_t R, C;
  const int64_t *x, *y;
  int64_t m, n;
  Buffer& buf;  // 4 rows (or one per distinct symbol) + the insertions
  const int64_t* of_row = nullptr;  // by symbol: x's row -> its slot
  int64_t ins_at = 0;
  int64_t held[4] = {-1, -1, -1, -1};

  SymbolRows(const scalar_t* table_, int64_t R_, int64_t C_, const int64_t* x_, int64_t m_, const int64_t* y_,
             int64_t n_, Buffer& buf_, SymbolRowSlots& slots)
      : table(table_), R(R_), C(C_), x(x_), y(y_), m(m_), n(n_), buf(buf_) {
    const int64_t distinct = symbol_slots(slots);
    if (distinct >= 0) {
      of_row = slots.of_row.data();
      buf.resize((distinct + 1) * (n + 1));
      ins_at = distinct * (n + 1);
      // Slots are numbered in order of first use: row i opens slot `next`.
      for (int64_t i = 0, next = 0; i < m; ++i) {
        if (of_row[i] != next) continue;
        gather_row(x[i], buf.data() + next * (n + 1));
        ++next;
      }
    } else {
      buf.resize(5 * (n + 1));
      ins_at = 4 * (n + 1);
    }
    const scalar_t* gap_row = table + (R - 1) * C;
    double* ins_out = buf.data() + ins_at;
    for (int64_t j = 0; j < n; ++j) ins_out[j] = static_cast<double>(gap_row[y[j]]);
  }
  void need(int64_t first, int count) {
    if (of_row != nullptr) return;
    for (int64_t i = first; i < first + count; ++i) {
      double* out = buf.data() + (i & 3) * (n + 1);
      if (held[i & 3] == i) continue;
      gather_row(x[i], out);
      held[i & 3] = i;
    }
  }
  const double* row(int64_t i) const {
    return buf.data() + (of_row != nullptr ? of_row[i] : (i & 3)) * (n + 1);
  }
  const double* ins() const { return buf.data() + ins_at; }

 private:
  // x's rows' slots, by first use; -1 (and no slots kept) where too many are distinct.
  int64_t symbol_slots(SymbolRowSlots& slots) const {
    if (slots.slot_of.size() < static_cast<size_t>(R)) slots.slot_of.resize(R, -1);
    slots.of_row.resize(m);
    int64_t distinct = 0, i = 0;
    for (; i < m; ++i) {
      int64_t& slot = slots.slot_of[x[i]];
      if (slot < 0) {
        if (2 * (distinct + 1) > m || (distinct + 2) * (n + 1) > kRowsBySymbolMax) break;
        slot = distinct++;
      }
      slots.of_row[i] = slot;
    }
    for (int64_t k = 0; k < i; ++k) slots.slot_of[x[k]] = -1;
    return i == m ? distinct : -1;
  }
  void gather_row(int64_t symbol, double* out) const {
    const scalar_t* src = table + symbol * C;
    for (int64_t j = 0; j < n; ++j) out[j] = static_cast<double>(src[y[j]]);
    out[n] = static_cast<double>(src[C - 1]);
  }
};

// No cutoff: every pair to its end.
struct NoCutoff {
  static constexpr bool kActive = false;
  static bool beyond(int64_t, const double*) { return false; }
};

// Stops a pair once row i of its table shows that every completion ends above
// `limit`: min_j D(i, j) + below[i] > limit, where below[i] is a lower bound of
// what consuming x_i .. x_{m-1} and inserting any of y can still add
// (RowCutoff::lower_bounds). Valid for any costs.
struct RowCutoff {
  static constexpr bool kActive = true;
  double limit;         // the threshold plus a margin for rounding
  const double* below;  // m + 1 entries
  int64_t n;
  bool beyond(int64_t i, const double* row) const { return dp::row_minimum(row, 0, n) + below[i] > limit; }
};

#ifdef BEDL_X86_SIMD

// Four consecutive costs as doubles.
__attribute__((target("avx2"))) inline __m256d load4(const double* p) { return _mm256_loadu_pd(p); }
__attribute__((target("avx2"))) inline __m256d load4(const float* p) {
  return _mm256_cvtps_pd(_mm_loadu_ps(p));
}

// The distance table four rows at a time with AVX2, one row per lane, lane r
// at column s - 2r in step s. A row by row sweep is bound by the latency of
// its chain (each cell waits for its left neighbour); here the four cells of
// a step are independent, and a lane reads the row above from its
// neighbour's results of two and three steps back, so moving them between
// lanes stays off the chain (on a skew of one column it was the chain).
// Every cell is computed by the same expressions in the same order as
// row by row, so the same bits. Advances `prev` (row 0 on entry) by the rows
// done, a multiple of four, which it returns; the caller finishes the rest.
// With an active cutoff, sets `stopped` and returns where a strip's last row
// shows the pair beyond it.
template <typename Rows, typename Cutoff>
__attribute__((target("avx2"))) int64_t sed_strips_avx2(Rows& rows, int64_t m, int64_t n, SedWorkspace& ws,
                                                        double*& prev, double*& next, const Cutoff& cut,
                                                        bool& stopped) {
  using scalar_t = typename Rows::value_type;
  constexpr int R = 4, K = 2;
  constexpr int64_t lag = K * (R - 1);  // the last lane's columns trail the first's by this
  if (n <= lag || m < R) return 0;
  const scalar_t* ins = rows.ins();
  // ins_skew[4 s + r]: the insertion lane r adds in step s.
  ws.ins_skew.resize(4 * (n + 1));
  double* ins_skew = ws.ins_skew.data();
  for (int64_t s = lag + 1; s <= n; ++s) {
    for (int r = 0; r < R; ++r) ins_skew[4 * s + r] = static_cast<double>(ins[s - K * r - 1]);
  }
  int64_t done = 0;
  for (; done + R <= m; done += R) {
    const scalar_t* row[R];
    double del[R], first[R];  // deletion costs; column 0 of each row
    double sum = prev[0];
    rows.need(done, R);
    for (int r = 0; r < R; ++r) {
      row[r] = rows.row(done + r);
      del[r] = static_cast<double>(row[r][n]);
      sum = sum + del[r];
      first[r] = sum;
    }
    // Each lane's values of the last three steps; before a lane starts, its column 0.
    double v1[R], v2[R], v3[R];
    for (int r = 0; r < R; ++r) v1[r] = v2[r] = v3[r] = first[r];
    next[0] = first[R - 1];
    // The first and last `lag` steps, where some lanes are off the table, cell by cell.
    auto scalar_step = [&](int64_t s) {
      double v[R];
      for (int r = 0; r < R; ++r) {
        const int64_t j = s - K * r;
        if (j < 1 || j > n) {
          v[r] = v1[r];
          continue;
        }
        const double up = r == 0 ? prev[j] : v2[r - 1];
        const double diag = r == 0 ? prev[j - 1] : v3[r - 1];
        v[r] = sequence_value(diag, static_cast<double>(row[r][j - 1]), up, del[r], v1[r],
                              static_cast<double>(ins[j - 1]));
        if (r == R - 1) next[j] = v[r];
      }
      for (int r = 0; r < R; ++r) {
        v3[r] = v2[r];
        v2[r] = v1[r];
        v1[r] = v[r];
      }
    };
    int64_t s = 1;
    for (; s <= lag; ++s) scalar_step(s);
    __m256d V1 = _mm256_loadu_pd(v1), V2 = _mm256_loadu_pd(v2), V3 = _mm256_loadu_pd(v3);
    const __m256d DEL = _mm256_loadu_pd(del);
    // One step: up (lane r - 1, two steps back; lane 0 reads the row above),
    // diagonal (three steps back), left (the lane's last value).
#define BEDL_SED_STEP(st, rep_expr)                                                              \
  do {                                                                                           \
    const __m256d rep = (rep_expr);                                                              \
    const __m256d up =                                                                           \
        _mm256_blend_pd(_mm256_permute4x64_pd(V2, 0x90), _mm256_broadcast_sd(prev + (st)), 1);   \
    const __m256d diag = _mm256_blend_pd(_mm256_permute4x64_pd(V3, 0x90),                        \
                                         _mm256_broadcast_sd(prev + (st) - 1), 1);               \
    const __m256d v = sequence_value(diag, rep, up, DEL, V1, _mm256_loadu_pd(ins_skew + 4 * (st)));  \
    _mm_storeh_pd(next + (st) - lag, _mm256_extractf128_pd(v, 1));                               \
    V3 = V2;                                                                                     \
    V2 = V1;                                                                                     \
    V1 = v;                                                                                      \
  } while (0)
    for (; s + 3 <= n; s += 4) {
      // Four columns of each row, transposed: step s + k gets column k.
      const __m256d a0 = load4(row[0] + s - 1), a1 = load4(row[1] + s - 3);
      const __m256d a2 = load4(row[2] + s - 5), a3 = load4(row[3] + s - 7);
      const __m256d t0 = _mm256_unpacklo_pd(a0, a1), t1 = _mm256_unpackhi_pd(a0, a1);
      const __m256d t2 = _mm256_unpacklo_pd(a2, a3), t3 = _mm256_unpackhi_pd(a2, a3);
      BEDL_SED_STEP(s, _mm256_permute2f128_pd(t0, t2, 0x20));
      BEDL_SED_STEP(s + 1, _mm256_permute2f128_pd(t1, t3, 0x20));
      BEDL_SED_STEP(s + 2, _mm256_permute2f128_pd(t0, t2, 0x31));
      BEDL_SED_STEP(s + 3, _mm256_permute2f128_pd(t1, t3, 0x31));
    }
    for (; s <= n; ++s) {
      BEDL_SED_STEP(s, _mm256_set_pd(static_cast<double>(row[3][s - 7]), static_cast<double>(row[2][s - 5]),
                                     static_cast<double>(row[1][s - 3]), static_cast<double>(row[0][s - 1])));
    }
#undef BEDL_SED_STEP
    _mm256_storeu_pd(v1, V1);
    _mm256_storeu_pd(v2, V2);
    _mm256_storeu_pd(v3, V3);
    for (; s <= n + lag; ++s) scalar_step(s);
    std::swap(prev, next);
    if (Cutoff::kActive && cut.beyond(done + R, prev)) {
      stopped = true;
      return done + R;
    }
  }
  return done;
}
#endif

// The distance of an (m, n) pair whose costs `rows` gives; +inf where `cut`
// stops it.
template <typename Rows, typename Cutoff = NoCutoff>
double sed_distance_rows(Rows& rows, int64_t m, int64_t n, SedWorkspace& ws, const Cutoff& cut = {}) {
  using scalar_t = typename Rows::value_type;
  constexpr double kBeyond = std::numeric_limits<double>::infinity();
  ws.row_prev.resize(n + 1);
  ws.row_cur.resize(n + 1);
  ws.row_next.resize(n + 1);
  double* prev = ws.row_prev.data();
  double* cur = ws.row_cur.data();
  double* next = ws.row_next.data();
  const scalar_t* ins = rows.ins();
  prev[0] = 0.0;
  for (int64_t j = 1; j <= n; ++j) prev[j] = prev[j - 1] + static_cast<double>(ins[j - 1]);
  if (Cutoff::kActive && cut.beyond(0, prev)) return kBeyond;
  // One cell of a row from the row above; the left neighbour stays in a
  // register: only the insertion waits on it.
  auto cell = [&](const double* above, const scalar_t* row, double del, double left, int64_t j) {
    return sequence_value(above[j - 1], static_cast<double>(row[j - 1]), above[j], del, left,
                          static_cast<double>(ins[j - 1]));
  };
  int64_t i = 1;
#ifdef BEDL_X86_SIMD
  if (dp::simd_avx2()) {
    bool stopped = false;
    i += sed_strips_avx2(rows, m, n, ws, prev, next, cut, stopped);
    if (stopped) return kBeyond;
  }
#endif
  if (n >= 1) {
    // Two rows at once, the second one cell behind: two independent chains
    // for the processor to overlap. Same operations in the same order as row
    // by row, so the same bits.
    for (; i + 1 <= m; i += 2) {
      rows.need(i - 1, 2);
      const scalar_t* row_a = rows.row(i - 1);
      const scalar_t* row_b = rows.row(i);
      const double del_a = static_cast<double>(row_a[n]), del_b = static_cast<double>(row_b[n]);
      double left_a = prev[0] + del_a;
      cur[0] = left_a;
      double left_b = left_a + del_b;
      next[0] = left_b;
      left_a = cell(prev, row_a, del_a, left_a, 1);
      cur[1] = left_a;
      for (int64_t j = 2; j <= n; ++j) {
        left_a = cell(prev, row_a, del_a, left_a, j);
        cur[j] = left_a;
        left_b = cell(cur, row_b, del_b, left_b, j - 1);
        next[j - 1] = left_b;
      }
      left_b = cell(cur, row_b, del_b, left_b, n);
      next[n] = left_b;
      std::swap(prev, next);
      if (Cutoff::kActive && cut.beyond(i + 1, prev)) return kBeyond;
    }
  }
  for (; i <= m; ++i) {
    rows.need(i - 1, 1);
    const scalar_t* row = rows.row(i - 1);
    const double del = static_cast<double>(row[n]);
    double left = prev[0] + del;
    cur[0] = left;
    for (int64_t j = 1; j <= n; ++j) {
      left = cell(prev, row, del, left, j);
      cur[j] = left;
    }
    std::swap(prev, cur);
    if (Cutoff::kActive && cut.beyond(i, prev)) return kBeyond;
  }
  return prev[n];
}

// The distance of an (m, n) pair with padded costs (row stride `stride`).
template <typename scalar_t>
double sed_distance(const scalar_t* c, int64_t m, int64_t n, int64_t stride, SedWorkspace& ws) {
  PaddedRows<scalar_t> rows{c, stride, m};
  return sed_distance_rows(rows, m, n, ws);
}

}  // namespace sed
}  // namespace bedl
