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
#include <type_traits>
#include <utility>
#include <vector>

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

// Two alternatives tie when they differ by at most rel_tol times the magnitude
// involved: the larger of both values and of the largest absolute cost of the
// pair (rounding in a sum of costs scales with the costs, not only with the sum).
struct Tie {
  double rel_tol;
  double cost_scale;
  inline bool operator()(double value, double best) const {
    const double scale = std::max({std::fabs(value), std::fabs(best), cost_scale});
    return value - best <= rel_tol * scale;
  }
  // The same test split in two, so a cell computes the part that depends on
  // best once: rel_tol * max(|v|, |b|, s) == max(rel_tol * |v|, rel_tol * max(|b|, s))
  // exactly, since rounding a product is monotone.
  inline double threshold(double best) const { return rel_tol * std::max(std::fabs(best), cost_scale); }
  inline bool within(double value, double best, double threshold) const {
    const double gap = value - best;
    return (gap <= threshold) | (gap <= rel_tol * std::fabs(value));
  }
};

inline void check_costs(const at::Tensor& costs) {
  TORCH_CHECK(costs.device().is_cpu(), "costs must be a CPU tensor in the CPU kernel, got ",
              costs.device());
  TORCH_CHECK(costs.dim() == 3, "costs must be 3-D (batch, |x|+1, |y|+1), got ", costs.dim(),
              "-D");
  TORCH_CHECK(costs.scalar_type() == at::kFloat || costs.scalar_type() == at::kDouble,
              "costs must be float32 or float64, got ", costs.scalar_type());
}

inline void check_index(const at::Tensor& t, const char* name, int64_t len) {
  TORCH_CHECK(t.device().is_cpu(), name, " must be a CPU tensor");
  TORCH_CHECK(t.scalar_type() == at::kLong, name, " must be int64, got ", t.scalar_type());
  TORCH_CHECK(t.dim() == 1, name, " must be 1-D, got ", t.dim(), "-D");
  if (len >= 0) {
    TORCH_CHECK(t.size(0) == len, name, " must have ", len, " entries, got ", t.size(0));
  }
}

// A (S, S) symbol cost table: rows and columns are symbols, the last one the gap.
inline void check_symbol_costs(const at::Tensor& table) {
  TORCH_CHECK(table.device().is_cpu(), "symbol_costs must be a CPU tensor in the CPU kernel, got ",
              table.device());
  TORCH_CHECK(table.dim() == 2 && table.size(0) == table.size(1) && table.size(0) >= 1,
              "symbol_costs must be a square 2-D (symbols + gap, symbols + gap) table, got shape ",
              table.sizes());
  TORCH_CHECK(table.scalar_type() == at::kFloat || table.scalar_type() == at::kDouble,
              "symbol_costs must be float32 or float64, got ", table.scalar_type());
  TORCH_CHECK(at::isfinite(table).all().item<bool>(), "symbol_costs contain NaN or inf");
}

// Node labels index rows and columns of a symbol table of size S.
inline void check_labels(const at::Tensor& labels, int64_t S, const char* name) {
  const int64_t* l = labels.data_ptr<int64_t>();
  for (int64_t k = 0; k < labels.size(0); ++k) {
    TORCH_CHECK(l[k] >= 0 && l[k] < S, name, "[", k, "] = ", l[k],
                " is not a row of the symbol cost table (size ", S, ")");
  }
}

// The arguments the symbol-table kernels share, checked and made contiguous.
struct SymbolInputs {
  at::Tensor table, x_labels, y_labels, x_ptr, y_ptr, pair_x, pair_y;
  int64_t symbols = 0, batch = 0;
};

inline SymbolInputs check_symbol_inputs(const at::Tensor& table, const at::Tensor& x_labels,
                                        const at::Tensor& x_ptr, const at::Tensor& y_labels,
                                        const at::Tensor& y_ptr, const at::Tensor& pair_x,
                                        const at::Tensor& pair_y, double rel_tol) {
  check_symbol_costs(table);
  check_index(x_labels, "x_labels", -1);
  check_index(y_labels, "y_labels", -1);
  check_index(x_ptr, "x_ptr", -1);
  check_index(y_ptr, "y_ptr", -1);
  check_index(pair_x, "pair_x", -1);
  check_index(pair_y, "pair_y", pair_x.size(0));
  TORCH_CHECK(rel_tol >= 0.0 && std::isfinite(rel_tol), "rel_tol must be finite and >= 0");
  SymbolInputs in{table.contiguous(),  x_labels.contiguous(), y_labels.contiguous(),
                  x_ptr.contiguous(),  y_ptr.contiguous(),    pair_x.contiguous(),
                  pair_y.contiguous(), table.size(0),         pair_x.size(0)};
  check_labels(in.x_labels, in.symbols, "x_labels");
  check_labels(in.y_labels, in.symbols, "y_labels");
  return in;
}

// Largest absolute cost of one pair's (m+1, n+1) block, the tie scale; NaN
// if the block holds a NaN or an infinity.
template <typename scalar_t>
double cost_scale(const scalar_t* c, int64_t m, int64_t n, int64_t row_stride) {
  double s = 0.0;
  bool finite = true;
  for (int64_t i = 0; i <= m; ++i) {
    const scalar_t* row = c + i * row_stride;
    const int64_t len = i == m ? n : n + 1;  // [m, n] is unused
    for (int64_t j = 0; j < len; ++j) {
      const double v = static_cast<double>(row[j]);
      finite &= std::isfinite(v);
      s = std::max(s, std::fabs(v));
    }
  }
  // [m, n] is unused, but a NaN there is still a caller's mistake worth naming.
  finite &= std::isfinite(static_cast<double>(c[m * row_stride + n]));
  return finite ? s : std::numeric_limits<double>::quiet_NaN();
}

// True iff the (m+1, n+1) block holds no NaN or infinity: for those the
// exponent bits are all ones, and adding one unit of the exponent carries
// into the sign bit. Integer operations only, so the loop vectorizes: 3x the
// speed of cost_scale, whose maximum and isfinite tests run one element at a
// time and took longer than the DP of long sequences (the distance alone has
// no ties to scale).
template <typename scalar_t>
bool block_finite(const scalar_t* c, int64_t m, int64_t n, int64_t row_stride) {
  using bits_t = std::conditional_t<sizeof(scalar_t) == 8, uint64_t, uint32_t>;
  constexpr int mantissa = std::numeric_limits<scalar_t>::digits - 1;
  constexpr bits_t exponent = (~bits_t{0} >> 1) & ~((bits_t{1} << mantissa) - 1);
  constexpr bits_t sign = ~(~bits_t{0} >> 1);
  bits_t seen = 0;
  for (int64_t i = 0; i <= m; ++i) {
    const scalar_t* row = c + i * row_stride;
    for (int64_t j = 0; j <= n; ++j) {
      bits_t bits;
      std::memcpy(&bits, row + j, sizeof(bits));
      seen |= (bits & exponent) + (bits_t{1} << mantissa);
    }
  }
  return (seen & sign) == 0;
}

// Checks every pair's block serially (before the parallel region, so errors
// carry their pair index) and returns the tie scales (with need_scale; else
// zeros, for the distance alone).
template <typename scalar_t, typename SizeFn>
std::vector<double> cost_scales(const scalar_t* c, int64_t batch, int64_t rows, int64_t cols,
                                const SizeFn& sizes, bool need_scale = true) {
  std::vector<double> scales(batch, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    const auto mn = sizes(b);
    const scalar_t* block = c + b * rows * cols;
    const bool finite = need_scale ? !std::isnan(scales[b] = cost_scale(block, mn.first, mn.second, cols))
                                   : block_finite(block, mn.first, mn.second, cols);
    TORCH_CHECK(finite, "costs of pair ", b, " contain NaN or inf");
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
