// What the tree and the sequence kernels really share: tie handling,
// counts in log space, cost checks and the batch loop.
#pragma once

#include <ATen/Parallel.h>
#include <torch/extension.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "check.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define BEDL_X86_SIMD 1
#endif

namespace bedl {
namespace dp {

// Whether the AVX2 kernels run: the processor has AVX2 and set_simd_enabled
// has not turned them off (benchmarks and tests compare both paths; they give
// the same bits).
inline std::atomic<bool>& simd_switch() {
  static std::atomic<bool> on{true};
  return on;
}
inline bool simd_avx2() {
#ifdef BEDL_X86_SIMD
  static const bool cpu = __builtin_cpu_supports("avx2");
  return cpu && simd_switch().load(std::memory_order_relaxed);
#else
  return false;
#endif
}

// Which alternatives of a cell are co-optimal: deleting x_i (from the cell
// above), inserting y_j (from the left), matching (a replacement, or in a
// forest the jump over a matched subtree pair).
enum : uint8_t { kDel = 1, kIns = 2, kMatch = 4 };

// A count of co-optimal mappings, m * 2^e with m in [0.5, 1) (or m == 0).
// Counts grow exponentially with the size of the inputs when costs tie, past
// any floating point range; an explicit exponent keeps them exact to double
// precision without the transcendental functions of log space.
struct Count {
  double m = 0.0;
  int64_t e = 0;

  static Count one() { return Count{0.5, 1}; }
  static Count zero() { return Count{}; }
  bool is_zero() const { return m == 0.0; }
  bool usable_total() const { return m > 0.0; }
};

// 2^e as a double by writing the exponent bits (std::ldexp is a libm call and
// was the hot spot of the counting passes); 0 below the normal range.
inline double pow2(int64_t e) {
  if (e < -1022) return 0.0;
  const uint64_t bits = static_cast<uint64_t>(e + 1023) << 52;
  double out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

inline Count operator*(const Count& a, const Count& b) {
  if (a.m == 0.0 || b.m == 0.0) return Count{};
  double m = a.m * b.m;  // in [0.25, 1)
  int64_t e = a.e + b.e;
  if (m < 0.5) {
    m *= 2.0;
    e -= 1;
  }
  return Count{m, e};
}

inline Count operator+(const Count& a, const Count& b) {
  if (a.m == 0.0) return b;
  if (b.m == 0.0) return a;
  const Count& hi = a.e >= b.e ? a : b;
  const Count& lo = a.e >= b.e ? b : a;
  const int64_t shift = hi.e - lo.e;
  if (shift > 60) return hi;  // below double precision
  double m = hi.m + lo.m * pow2(-shift);
  int64_t e = hi.e;
  if (m >= 1.0) {
    m *= 0.5;
    e += 1;
  }
  return Count{m, e};
}

// num / den as a double (the fraction of all co-optimal mappings).
inline double ratio(const Count& num, const Count& den) {
  if (num.m == 0.0) return 0.0;
  // P entries are fractions <= 1, so e <= 2 and only underflow needs care.
  const int64_t e = num.e - den.e;
  if (e < -1022) return 0.0;
  return (num.m / den.m) * pow2(e);
}

// A count as a plain double: the fast path. Where no count reaches 2^1024 it
// gives bit-identical results to Count (same 53-bit mantissa, and scaling by
// powers of two is exact); the kernels check the total and fall back to
// Count where it overflowed.
struct FastCount {
  double m = 0.0;

  static FastCount one() { return FastCount{1.0}; }
  static FastCount zero() { return FastCount{}; }
  bool is_zero() const { return m == 0.0; }
  bool usable_total() const { return std::isfinite(m) && m > 0.0; }
};

inline FastCount operator*(const FastCount& a, const FastCount& b) {
  // 0 * inf stays 0, as for Count (an overflowed count off every optimal path
  // must not poison others with NaN).
  const double product = a.m * b.m;
  return FastCount{(a.m == 0.0) | (b.m == 0.0) ? 0.0 : product};
}
inline FastCount operator+(const FastCount& a, const FastCount& b) { return FastCount{a.m + b.m}; }
inline double ratio(const FastCount& num, const FastCount& den) { return num.m / den.m; }

// The one recurrence of both algorithms. A cell's value is the cheapest of
// three alternatives; which of them are co-optimal (within the tie
// tolerance) are its flags; its counts sum the counts the co-optimal
// alternatives bring. Every pass instantiates these (distance alone: best_of;
// flags: Tie::flags; inside counts: count_entries with FastCount or Count;
// the outside sweeps with Count or Reach), and the AVX2 paths mirror best_of
// as best_of4, so that all give the same bits.

// The cheapest alternative. std::min's operand order is part of the bits
// (it matters for signed zeros): trees call best_of(delete, match, insert),
// sequences best_of(replace, delete, insert).
inline double best_of(double first, double second, double third) {
  return std::min(std::min(first, second), third);
}

#ifdef BEDL_X86_SIMD
// best_of for four cells: std::min(a, b) is (b < a) ? b : a, and _mm256_min_pd(p, q) is (p < q) ? p : q.
__attribute__((target("avx2"))) inline __m256d best_of4(__m256d first, __m256d second, __m256d third) {
  return _mm256_min_pd(third, _mm256_min_pd(second, first));
}
#endif

// Two alternatives tie when they differ by at most rel_tol times the magnitude
// involved: the larger of both values and of the largest absolute cost of the
// pair (rounding in a sum of costs scales with the costs, not only with the sum).
struct Tie {
  double rel_tol;
  double cost_scale;
  bool nonnegative = false;  // every cost of the pair is >= 0: flags_nonnegative may be used
  // rel_tol * max(|v|, |b|, s) == max(rel_tol * |v|, rel_tol * max(|b|, s))
  // exactly (rounding a product is monotone), so a cell computes the part
  // that depends on its best value once.
  inline double threshold(double best) const { return rel_tol * std::max(std::fabs(best), cost_scale); }
  inline bool within(double value, double best, double threshold) const {
    const double gap = value - best;
    return (gap <= threshold) | (gap <= rel_tol * std::fabs(value));
  }
  // The co-optimal alternatives of a cell whose value is `best`. Selects
  // rather than branches: which alternatives tie varies from cell to cell.
  inline uint8_t flags(double del_alt, double ins_alt, double match_alt, double best) const {
    const double t = threshold(best);
    return static_cast<uint8_t>((within(del_alt, best, t) ? kDel : 0) | (within(ins_alt, best, t) ? kIns : 0) |
                                (within(match_alt, best, t) ? kMatch : 0));
  }
  // `flags` where every cost is >= 0: then 0 <= best <= value, so the bound
  // max(threshold(best), rel_tol |value|) is rel_tol * max(cost_scale, value)
  // exactly (docs/edit-distances.md): the same flags, fewer operations.
  inline bool within_nonnegative(double value, double best) const {
    return value - best <= rel_tol * std::max(cost_scale, value);
  }
  inline uint8_t flags_nonnegative(double del_alt, double ins_alt, double match_alt, double best) const {
    return static_cast<uint8_t>((within_nonnegative(del_alt, best) ? kDel : 0) |
                                (within_nonnegative(ins_alt, best) ? kIns : 0) |
                                (within_nonnegative(match_alt, best) ? kMatch : 0));
  }
};

#ifdef BEDL_X86_SIMD
// Tie::within_nonnegative of four cells, as a 4-bit mask.
__attribute__((target("avx2"))) inline int within_nonnegative4(__m256d rel_tol, __m256d scale, __m256d value,
                                                               __m256d best) {
  const __m256d bound = _mm256_mul_pd(rel_tol, _mm256_max_pd(scale, value));
  return _mm256_movemask_pd(_mm256_cmp_pd(_mm256_sub_pd(value, best), bound, _CMP_LE_OQ));
}

// Tie::flags_nonnegative of cells 1..count of one table row, four at a time:
// cell j's deletion is up[j] + del, its insertion row[j - 1] + ins[j], its
// match match[j], its value row[j]; the flags go to flags[j]. The same
// expressions as the scalar test (max(scale, value) may differ from
// std::max only in the sign of a zero, which a comparison ignores).
__attribute__((target("avx2"))) inline void row_flags_nonnegative(const Tie& tie, const double* up, double del,
                                                                  const double* row, const double* ins,
                                                                  const double* match, int64_t count,
                                                                  uint8_t* flags) {
  // spread[m]: bit k of m as byte k (0 or 1), so that spread[m] * kDel sets the flag in those bytes.
  static constexpr uint32_t spread[16] = {0x00000000, 0x00000001, 0x00000100, 0x00000101, 0x00010000, 0x00010001,
                                          0x00010100, 0x00010101, 0x01000000, 0x01000001, 0x01000100, 0x01000101,
                                          0x01010000, 0x01010001, 0x01010100, 0x01010101};
  const __m256d rel_tol = _mm256_set1_pd(tie.rel_tol), scale = _mm256_set1_pd(tie.cost_scale);
  const __m256d del4 = _mm256_set1_pd(del);
  int64_t j = 1;
  for (; j + 3 <= count; j += 4) {
    const __m256d best = _mm256_loadu_pd(row + j);
    const int by_del = within_nonnegative4(rel_tol, scale, _mm256_add_pd(_mm256_loadu_pd(up + j), del4), best);
    const int by_ins = within_nonnegative4(rel_tol, scale,
                                           _mm256_add_pd(_mm256_loadu_pd(row + j - 1), _mm256_loadu_pd(ins + j)), best);
    const int by_match = within_nonnegative4(rel_tol, scale, _mm256_loadu_pd(match + j), best);
    const uint32_t packed = spread[by_del] * kDel | spread[by_ins] * kIns | spread[by_match] * kMatch;
    std::memcpy(flags + j, &packed, sizeof(packed));  // (x86: byte k is cell j + k)
  }
  for (; j <= count; ++j) flags[j] = tie.flags_nonnegative(up[j] + del, row[j - 1] + ins[j], match[j], row[j]);
}
#endif

// Whether no entry of v[0 .. count) is below zero (-0.0 is not).
template <typename T>
inline bool all_nonnegative(const T* v, int64_t count) {
  bool all = true;
  for (int64_t k = 0; k < count; ++k) all &= !(v[k] < T(0));
  return all;
}

// Inside counts entering a cell through its co-optimal alternatives `flags`:
// by a deletion (from the cell above, in either state), and otherwise (an
// insertion only from a left cell not entered by a deletion, so that each
// mapping is one derivation; or a match, whose count `match()` is evaluated
// only where it is co-optimal).
template <typename Count, typename MatchCount>
inline void count_entries(uint8_t flags, const Count& above_total, const Count& left_other,
                          const MatchCount& match, Count& by_del, Count& other) {
  by_del = (flags & kDel) ? above_total : Count::zero();
  const Count via_ins = (flags & kIns) ? left_other : Count::zero();
  const Count via_match = (flags & kMatch) ? match() : Count::zero();
  other = via_ins + via_match;
}

// v where `on`, else +0.0 (what `on ? v : FastCount::zero()` gives), by a mask
// rather than a branch.
inline double keep_if(bool on, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  bits &= -static_cast<uint64_t>(on);
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

// count_entries on doubles, the usual case: the same values without a branch.
// Which alternatives tie varies from cell to cell, so branches on the flags
// mispredicted and were most of the inside passes' time. All three entries
// are read and masked, so `match()` must be safe to evaluate in every cell.
template <typename MatchCount>
inline void count_entries(uint8_t flags, const FastCount& above_total, const FastCount& left_other,
                          const MatchCount& match, FastCount& by_del, FastCount& other) {
  by_del = FastCount{keep_if(flags & kDel, above_total.m)};
  other = FastCount{keep_if(flags & kIns, left_other.m) + keep_if(flags & kMatch, match().m)};
}

// count_entries' soft (Boltzmann) instance: every alternative enters, each
// derivation weighted by exp(-cost / T) instead of counted once where
// co-optimal, so that the weights are the log semiring's values exp(-v / T).
// Same states: an insertion only from a left cell not entered by a deletion.
template <typename Weight>
inline void soft_entries(const Weight& above_total, const Weight& del_weight, const Weight& left_other,
                         const Weight& ins_weight, const Weight& via_match, Weight& by_del, Weight& other) {
  by_del = above_total * del_weight;
  other = left_other * ins_weight + via_match;
}

// Whether some co-optimal mapping passes a cell: the outside sweep's counts
// as booleans (sum = or, product = and), for finding the tables P needs.
struct Reach {
  uint8_t v = 0;
  static Reach one() { return Reach{1}; }
  static Reach zero() { return Reach{}; }
  bool is_zero() const { return v == 0; }
};
inline Reach operator+(Reach a, Reach b) { return Reach{static_cast<uint8_t>(a.v | b.v)}; }
inline Reach operator*(Reach a, Reach b) { return Reach{static_cast<uint8_t>(a.v & b.v)}; }

inline void check_costs(const at::Tensor& costs) {
  BEDL_CHECK_VALUE(costs.device().is_cpu(), "costs must be a CPU tensor in the CPU kernel, got ",
                   costs.device());
  BEDL_CHECK_VALUE(costs.layout() == at::kStrided, "costs must be a dense (strided) tensor, got ",
                   costs.layout());
  BEDL_CHECK_VALUE(costs.dim() == 3, "costs must be 3-D (batch, |x|+1, |y|+1), got ", costs.dim(),
                   "-D");
  BEDL_CHECK_TYPE(costs.scalar_type() == at::kFloat || costs.scalar_type() == at::kDouble,
                  "costs must be float32 or float64, got ", costs.scalar_type());
}

inline void check_index(const at::Tensor& t, const char* name, int64_t len) {
  BEDL_CHECK_VALUE(t.device().is_cpu() && t.layout() == at::kStrided, name,
                   " must be a dense CPU tensor");
  BEDL_CHECK_TYPE(t.scalar_type() == at::kLong, name, " must be int64, got ", t.scalar_type());
  BEDL_CHECK_VALUE(t.dim() == 1, name, " must be 1-D, got ", t.dim(), "-D");
  if (len >= 0) {
    BEDL_CHECK_VALUE(t.size(0) == len, name, " must have ", len, " entries, got ", t.size(0));
  }
}

inline void check_rel_tol(double rel_tol) {
  BEDL_CHECK_VALUE(rel_tol >= 0.0 && std::isfinite(rel_tol), "rel_tol must be finite and >= 0, got ",
                   rel_tol);
}

// An offset tensor `name` (count + 1 entries) over `entries` concatenated
// nodes or labels (`what`): starts at 0, ends at `entries`, non-decreasing.
// Returns count. Trees and sequences share it.
inline int64_t check_ptr(const at::Tensor& ptr, const std::string& name, int64_t entries, const char* what) {
  const int64_t count = ptr.size(0) - 1;
  BEDL_CHECK_VALUE(count >= 0, name, " must have at least one entry");
  const int64_t* p = ptr.data_ptr<int64_t>();
  BEDL_CHECK_VALUE(p[0] == 0 && p[count] == entries, name, " must start at 0 and end at the number of ",
                   what, " (", entries, "), got ", p[0], " and ", p[count]);
  for (int64_t t = 0; t < count; ++t) BEDL_CHECK_VALUE(p[t + 1] >= p[t], name, " must be non-decreasing");
  return count;
}

// Pair b is (x number pair_x[b], y number pair_y[b]) of nx and ny `what`s
// ("tree" or "sequence"); checked serially so that errors name the pair.
inline void check_pair_indices(const int64_t* pair_x, const int64_t* pair_y, int64_t batch, int64_t nx,
                               int64_t ny, const char* what) {
  for (int64_t b = 0; b < batch; ++b) {
    BEDL_CHECK_VALUE(pair_x[b] >= 0 && pair_x[b] < nx, "pair_x[", b, "] = ", pair_x[b], " is not a ", what,
                     " index (", nx, " x ", what, "s)");
    BEDL_CHECK_VALUE(pair_y[b] >= 0 && pair_y[b] < ny, "pair_y[", b, "] = ", pair_y[b], " is not a ", what,
                     " index (", ny, " y ", what, "s)");
  }
}

// Largest absolute cost of one pair's (m+1, n+1) block (the tie scale, and
// the bound of `check_sums_fit`), over the entries the DP reads: [m, n] is
// unused. +inf if any entry, [m, n] included, is NaN or infinite. SSE2 (every
// x86-64) keeps it well below the DP's time even for the distance alone of
// long sequences; the maximum is exact, so the scale does not depend on the path.
template <typename scalar_t>
double block_max_abs(const scalar_t* c, int64_t m, int64_t n, int64_t row_stride) {
  double tail_max = 0.0;
  bool tail_nan = false;
  auto scalar_run = [&](const scalar_t* row, int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      const double v = static_cast<double>(row[j]);
      tail_nan |= std::isnan(v);
      tail_max = std::max(tail_max, std::fabs(v));
    }
  };
#ifdef BEDL_X86_SIMD
  constexpr bool kDouble = sizeof(scalar_t) == 8;
  using vec_t = std::conditional_t<kDouble, __m128d, __m128>;
  constexpr int64_t kWidth = 16 / sizeof(scalar_t);
  vec_t vmax, vnan, sign;
  if constexpr (kDouble) {
    vmax = vnan = _mm_setzero_pd();
    sign = _mm_set1_pd(-0.0);
  } else {
    vmax = vnan = _mm_setzero_ps();
    sign = _mm_set1_ps(-0.0f);
  }
  for (int64_t i = 0; i <= m; ++i) {
    const scalar_t* row = c + i * row_stride;
    const int64_t len = i == m ? n : n + 1;
    int64_t j = 0;
    for (; j + kWidth <= len; j += kWidth) {
      if constexpr (kDouble) {
        const __m128d v = _mm_loadu_pd(row + j);
        vmax = _mm_max_pd(vmax, _mm_andnot_pd(sign, v));
        vnan = _mm_or_pd(vnan, _mm_cmpunord_pd(v, v));
      } else {
        const __m128 v = _mm_loadu_ps(row + j);
        vmax = _mm_max_ps(vmax, _mm_andnot_ps(sign, v));
        vnan = _mm_or_ps(vnan, _mm_cmpunord_ps(v, v));
      }
    }
    scalar_run(row, j, len);
  }
  alignas(16) scalar_t lanes_max[kWidth];
  int nan_bits;
  if constexpr (kDouble) {
    _mm_store_pd(lanes_max, vmax);
    nan_bits = _mm_movemask_pd(vnan);
  } else {
    _mm_store_ps(lanes_max, vmax);
    nan_bits = _mm_movemask_ps(vnan);
  }
  tail_nan |= nan_bits != 0;
  for (int64_t k = 0; k < kWidth; ++k) tail_max = std::max(tail_max, static_cast<double>(lanes_max[k]));
#else
  for (int64_t i = 0; i <= m; ++i) scalar_run(c + i * row_stride, 0, i == m ? n : n + 1);
#endif
  tail_nan |= !std::isfinite(static_cast<double>(c[m * row_stride + n]));  // [m, n]: checked only
  if (tail_nan || !std::isfinite(tail_max)) return std::numeric_limits<double>::infinity();
  return tail_max;
}

// The overflow rule. A mapping of m and n nodes has at most m + n edit
// operations, so every value the DP forms is a sum of at most m + n costs,
// and a tie test subtracts two such sums. Costs are accepted where
// 2 (m + n) max|c| is finite in their dtype: no sum, difference or tie
// threshold overflows, and the distance fits the dtype it is returned in.
template <typename scalar_t>
inline bool sums_fit(double max_abs, int64_t m, int64_t n) {
  return 2.0 * static_cast<double>(m + n) * max_abs <=
         static_cast<double>(std::numeric_limits<scalar_t>::max());
}

// ValueError unless the costs of pair `b` (|x| = m, |y| = n, largest absolute
// cost max_abs, +inf for NaN/inf) are finite and satisfy the overflow rule.
template <typename scalar_t>
inline void check_pair_costs(double max_abs, int64_t m, int64_t n, int64_t b, const char* what) {
  BEDL_CHECK_VALUE(std::isfinite(max_abs), what, " of pair ", b, " contain NaN or inf");
  BEDL_CHECK_VALUE(sums_fit<scalar_t>(max_abs, m, n), what, " of pair ", b, " are too large: with |x| = ",
                   m, " and |y| = ", n, " a mapping sums up to ", m + n, " costs of magnitude up to ",
                   max_abs, ", and 2 (|x| + |y|) max|cost| must stay below the largest ",
                   sizeof(scalar_t) == 8 ? "float64" : "float32", " (", std::numeric_limits<scalar_t>::max(),
                   "); scale the costs down");
}

// A (S, S) symbol cost table: rows and columns are symbols, the last one the gap.
// Returns its largest absolute entry ([gap, gap] is unused), the bound for check_pair_costs.
inline double check_symbol_costs(const at::Tensor& table) {
  BEDL_CHECK_VALUE(table.device().is_cpu(), "symbol_costs must be a CPU tensor in the CPU kernel, got ",
                   table.device());
  BEDL_CHECK_VALUE(table.layout() == at::kStrided, "symbol_costs must be a dense (strided) tensor, got ",
                   table.layout());
  BEDL_CHECK_VALUE(table.dim() == 2 && table.size(0) == table.size(1) && table.size(0) >= 1,
                   "symbol_costs must be a square 2-D (symbols + gap, symbols + gap) table, got shape ",
                   table.sizes());
  BEDL_CHECK_TYPE(table.scalar_type() == at::kFloat || table.scalar_type() == at::kDouble,
                  "symbol_costs must be float32 or float64, got ", table.scalar_type());
  const at::Tensor t = table.contiguous();
  const int64_t S = t.size(0);
  double max_abs = 0.0;
  AT_DISPATCH_FLOATING_TYPES(t.scalar_type(), "check_symbol_costs", [&] {
    const scalar_t* c = t.data_ptr<scalar_t>();
    // labels may be the gap index (unknown symbols), so the [gap, gap] corner is a cost too
    const double corner = static_cast<double>(c[S * S - 1]);
    max_abs = std::isnan(corner) ? corner
                                 : std::max(block_max_abs(c, S - 1, S - 1, S), std::fabs(corner));
  });
  BEDL_CHECK_VALUE(std::isfinite(max_abs), "symbol_costs contain NaN or inf");
  return max_abs;
}

// Node labels index rows and columns of a symbol table of size S.
inline void check_labels(const at::Tensor& labels, int64_t S, const char* name) {
  const int64_t* l = labels.data_ptr<int64_t>();
  for (int64_t k = 0; k < labels.size(0); ++k) {
    BEDL_CHECK_VALUE(l[k] >= 0 && l[k] < S, name, "[", k, "] = ", l[k],
                     " is not a row of the symbol cost table (size ", S, ")");
  }
}

// The padded size (rows, cols) of a batch of symbol-table pairs and its pair of
// most nodes, on which the overflow rule is checked (the table's largest cost
// bounds every pair's).
struct BatchExtent {
  int64_t rows = 1, cols = 1, longest = -1, longest_m = 0, longest_n = 0;

  void add(int64_t b, int64_t m, int64_t n) {
    rows = std::max(rows, m + 1);
    cols = std::max(cols, n + 1);
    if (longest < 0 || m + n > longest_m + longest_n) {
      longest = b;
      longest_m = m;
      longest_n = n;
    }
  }
  template <typename scalar_t>
  void check_overflow(double max_abs) const {
    if (longest >= 0) check_pair_costs<scalar_t>(max_abs, longest_m, longest_n, longest, "symbol costs");
  }
};

// The arguments the symbol-table kernels share, checked and made contiguous.
struct SymbolInputs {
  at::Tensor table, x_labels, y_labels, x_ptr, y_ptr, pair_x, pair_y;
  int64_t symbols = 0, batch = 0;
  double max_abs = 0.0;  // largest absolute cost of the table
};

inline SymbolInputs check_symbol_inputs(const at::Tensor& table, const at::Tensor& x_labels,
                                        const at::Tensor& x_ptr, const at::Tensor& y_labels,
                                        const at::Tensor& y_ptr, const at::Tensor& pair_x,
                                        const at::Tensor& pair_y, double rel_tol) {
  const double max_abs = check_symbol_costs(table);
  check_index(x_labels, "x_labels", -1);
  check_index(y_labels, "y_labels", -1);
  check_index(x_ptr, "x_ptr", -1);
  check_index(y_ptr, "y_ptr", -1);
  check_index(pair_x, "pair_x", -1);
  check_index(pair_y, "pair_y", pair_x.size(0));
  check_rel_tol(rel_tol);
  SymbolInputs in{table.contiguous(),  x_labels.contiguous(), y_labels.contiguous(),
                  x_ptr.contiguous(),  y_ptr.contiguous(),    pair_x.contiguous(),
                  pair_y.contiguous(), table.size(0),         pair_x.size(0), max_abs};
  check_labels(in.x_labels, in.symbols, "x_labels");
  check_labels(in.y_labels, in.symbols, "y_labels");
  return in;
}

// Checks every pair's block serially (before the parallel region, so errors
// carry their pair index) and returns the tie scales, its largest absolute costs.
template <typename scalar_t, typename SizeFn>
std::vector<double> cost_scales(const scalar_t* c, int64_t batch, int64_t rows, int64_t cols,
                                const SizeFn& sizes) {
  std::vector<double> scales(batch, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    const auto mn = sizes(b);
    scales[b] = block_max_abs(c + b * rows * cols, mn.first, mn.second, cols);
    check_pair_costs<scalar_t>(scales[b], mn.first, mn.second, b, "costs");
  }
  return scales;
}

// Runs fn(b, workspace) for every pair, in parallel over pairs. Threads take
// pieces of consecutive pairs (about 16k DP cells each) from a shared counter:
// pairwise_distances sorts its pairs by size, and a fixed split into one range
// per thread gave one thread the large pairs (2 threads were 1.2-1.4x one on
// trees of 5-60 nodes). One workspace per thread, reused across its pairs. Each
// pair is computed by one thread from start to end, so results depend neither
// on the thread count nor on the schedule. Fewer threads below ~64k DP cells
// each: waking a thread for a few hundred cells costs more than it saves.
template <typename Workspace, typename Fn>
void for_each_pair(int64_t batch, int64_t cells_per_pair, const Fn& fn) {
  if (batch <= 0) return;
  const int64_t cells = std::max<int64_t>(1, cells_per_pair);
  const int64_t piece = std::max<int64_t>(1, (int64_t{1} << 14) / cells);  // pairs per piece
  const int64_t pieces = (batch + piece - 1) / piece;
  const double total_cells = static_cast<double>(batch) * static_cast<double>(cells);
  const int64_t by_work = static_cast<int64_t>(std::min(1e6, std::max(1.0, total_cells / 65536.0)));
  const int64_t threads = std::min<int64_t>({static_cast<int64_t>(at::get_num_threads()), pieces, by_work});
  if (threads <= 1) {
    Workspace ws;
    for (int64_t b = 0; b < batch; ++b) fn(b, ws);
    return;
  }
  std::atomic<int64_t> next{0};
  at::parallel_for(0, threads, 1, [&](int64_t slot_begin, int64_t slot_end) {
    Workspace ws;
    for (int64_t slot = slot_begin; slot < slot_end; ++slot) {  // one slot per thread, usually
      for (int64_t k = next.fetch_add(1); k < pieces; k = next.fetch_add(1)) {
        const int64_t end = std::min(batch, (k + 1) * piece);
        for (int64_t b = k * piece; b < end; ++b) fn(b, ws);
      }
    }
  });
}

}  // namespace dp
}  // namespace bedl
