// The kernels' input checks, once per input kind: padded cost blocks, symbol
// tables with labels, index tensors, the overflow rule; each error names the
// argument, pair or entry. Run serially before the parallel work, so that
// errors carry their pair index.
#pragma once

#include <ATen/ATen.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/resource.h>
#include <unistd.h>
#define BEDL_HAS_RLIMIT 1
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <tuple>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "check.h"
#include "parallel.h"

namespace bedl {
namespace dp {

// Whether no entry of v[0 .. count) is below zero (-0.0 is not).
template <typename T>
inline bool all_nonnegative(const T* v, int64_t count) {
  bool all = true;
  for (int64_t k = 0; k < count; ++k) all &= !(v[k] < T(0));
  return all;
}

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

// A (rows, cols) symbol cost table: rows are x's symbols and columns y's, the
// last row and the last column the gap (a whole alphabet's table is square; a
// block between two sets of objects need not be). Returns its largest absolute
// entry, the bound for check_pair_costs.
inline double check_symbol_costs(const at::Tensor& table) {
  BEDL_CHECK_VALUE(table.device().is_cpu(), "symbol_costs must be a CPU tensor in the CPU kernel, got ",
                   table.device());
  BEDL_CHECK_VALUE(table.layout() == at::kStrided, "symbol_costs must be a dense (strided) tensor, got ",
                   table.layout());
  BEDL_CHECK_VALUE(table.dim() == 2 && table.size(0) >= 1 && table.size(1) >= 1,
                   "symbol_costs must be a 2-D (x symbols + gap, y symbols + gap) table, got shape ",
                   table.sizes());
  BEDL_CHECK_TYPE(table.scalar_type() == at::kFloat || table.scalar_type() == at::kDouble,
                  "symbol_costs must be float32 or float64, got ", table.scalar_type());
  const at::Tensor t = table.contiguous();
  const int64_t rows = t.size(0), cols = t.size(1);
  double max_abs = 0.0;
  AT_DISPATCH_FLOATING_TYPES(t.scalar_type(), "check_symbol_costs", [&] {
    const scalar_t* c = t.data_ptr<scalar_t>();
    // labels may be the gap index (unknown symbols), so the [gap, gap] corner is a cost too
    const double corner = static_cast<double>(c[rows * cols - 1]);
    max_abs = std::isnan(corner) ? corner
                                 : std::max(block_max_abs(c, rows - 1, cols - 1, cols), std::fabs(corner));
  });
  BEDL_CHECK_VALUE(std::isfinite(max_abs), "symbol_costs contain NaN or inf");
  return max_abs;
}

// Labels index the `size` rows (x's labels, `what` "row") or columns (y's,
// "column") of a symbol table.
inline void check_labels(const at::Tensor& labels, int64_t size, const char* name, const char* what) {
  const int64_t* l = labels.data_ptr<int64_t>();
  for (int64_t k = 0; k < labels.size(0); ++k) {
    BEDL_CHECK_VALUE(l[k] >= 0 && l[k] < size, name, "[", k, "] = ", l[k], " is not a ", what,
                     " of the symbol cost table (", size, " ", what, "s)");
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

// The label and pair index tensors of a labels-and-pairs call (symbol-table
// kernels, the table-free unit op, the CUDA glue): int64, 1-D, pair_y as long
// as pair_x.
inline void check_label_indices(const at::Tensor& x_labels, const at::Tensor& x_ptr, const at::Tensor& y_labels,
                                const at::Tensor& y_ptr, const at::Tensor& pair_x, const at::Tensor& pair_y) {
  check_index(x_labels, "x_labels", -1);
  check_index(y_labels, "y_labels", -1);
  check_index(x_ptr, "x_ptr", -1);
  check_index(y_ptr, "y_ptr", -1);
  check_index(pair_x, "pair_x", -1);
  check_index(pair_y, "pair_y", pair_x.size(0));
}

// The arguments the symbol-table kernels share, checked and made contiguous.
struct SymbolInputs {
  at::Tensor table, x_labels, y_labels, x_ptr, y_ptr, pair_x, pair_y;
  int64_t rows = 0, cols = 0, batch = 0;  // the table's shape: x's symbols + gap, y's symbols + gap
  double max_abs = 0.0;  // largest absolute cost of the table
};

inline SymbolInputs check_symbol_inputs(const at::Tensor& table, const at::Tensor& x_labels,
                                        const at::Tensor& x_ptr, const at::Tensor& y_labels,
                                        const at::Tensor& y_ptr, const at::Tensor& pair_x,
                                        const at::Tensor& pair_y, double rel_tol) {
  const double max_abs = check_symbol_costs(table);
  check_label_indices(x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y);
  check_rel_tol(rel_tol);
  SymbolInputs in{table.contiguous(),  x_labels.contiguous(), y_labels.contiguous(),
                  x_ptr.contiguous(),  y_ptr.contiguous(),    pair_x.contiguous(),
                  pair_y.contiguous(), table.size(0),         table.size(1),  pair_x.size(0), max_abs};
  check_labels(in.x_labels, in.rows, "x_labels", "row");
  check_labels(in.y_labels, in.cols, "y_labels", "column");
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

// The memory a kernel may take for one pair's tables: the machine's physical
// memory, the process's address-space limit (RLIMIT_AS) if lower, and
// BEDL_TORCH_MEMORY_LIMIT (bytes) if set and lower.
inline double memory_limit_bytes() {
  double limit = std::numeric_limits<double>::infinity();
#ifdef BEDL_HAS_RLIMIT
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) limit = static_cast<double>(pages) * static_cast<double>(page);
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    limit = std::min(limit, static_cast<double>(rl.rlim_cur));
  }
#endif
  if (const char* env = std::getenv("BEDL_TORCH_MEMORY_LIMIT")) {
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    BEDL_CHECK_VALUE(end != env && *end == '\0' && v > 0, "BEDL_TORCH_MEMORY_LIMIT must be a number of bytes > 0, got '",
                     env, "'");
    limit = std::min(limit, v);
  }
  return limit;
}

// ValueError, before anything is allocated, where the largest pair of a batch
// (pair b, |x| = m, |y| = n) needs more memory than memory_limit_bytes():
// `what` (e.g. "P") needs its whole (m+1) x (n+1) table, bytes_per_cell each.
inline void check_table_memory(int64_t b, int64_t m, int64_t n, double bytes_per_cell, const char* what) {
  if (b < 0) return;
  const double bytes = static_cast<double>(m + 1) * static_cast<double>(n + 1) * bytes_per_cell;
  const double limit = memory_limit_bytes();
  BEDL_CHECK_VALUE(bytes <= limit, "pair ", b, " (|x| = ", m, ", |y| = ", n, "): ", what, " needs its whole (",
                   m + 1, " x ", n + 1, ") table, about ", bytes / 1e9, " GB, more than the ", limit / 1e9,
                   " GB this process may use (physical memory, RLIMIT_AS or BEDL_TORCH_MEMORY_LIMIT); "
                   "compute the distance alone, without P or gradient, or split the pair");
}

// Bytes per cell of a pair's whole tables, by what a kernel computes (the
// arrays of its passes; the kept flags and counts are bounded apart).
constexpr double kSequencePBytes = 48.0;   // counts (two states), flags, P, gathered costs
constexpr double kSequenceSoftBytes = 56.0;
constexpr double kTreeDistanceBytes = 24.0;  // forest distances, tdm, costs
constexpr double kTreePBytes = 104.0;        // + flags, counts (tdm, two states), outside weights, P
constexpr double kTreeSoftBytes = 96.0;

// The pair of most cells among `batch` pairs of sizes sizes(b) = (m, n): (b, m, n), b = -1 if none.
template <typename SizeFn>
inline std::tuple<int64_t, int64_t, int64_t> largest_pair(int64_t batch, const SizeFn& sizes) {
  int64_t best = -1, bm = 0, bn = 0;
  double cells = -1.0;
  for (int64_t b = 0; b < batch; ++b) {
    const auto mn = sizes(b);
    const double c = static_cast<double>(mn.first + 1) * static_cast<double>(mn.second + 1);
    if (c > cells) {
      cells = c;
      best = b;
      bm = mn.first;
      bn = mn.second;
    }
  }
  return {best, bm, bn};
}

// The per-pair thresholds of a distances-only symbol-table call
// (max_distance): a pair whose distance is above its threshold comes back as
// +inf, and the passes may stop it as soon as no completion can end at or
// below it. A threshold of +inf keeps the pair's distance.
struct DistanceCutoffs {
  at::Tensor thresholds;  // float64 (batch,)
  const double* t = nullptr;
  std::vector<double> row_min;  // each table row's least entry: what deleting or replacing that symbol costs at least
  double max_abs = 0.0;
  bool float32 = false;

  // with_row_min: the passes read row_min (the bit-vector sequence path does not).
  static std::optional<DistanceCutoffs> of(const std::optional<at::Tensor>& max_distance, const SymbolInputs& in,
                                           bool need_coopt, bool with_row_min = true) {
    if (!max_distance.has_value()) return std::nullopt;
    const at::Tensor& md = *max_distance;
    BEDL_CHECK_VALUE(!need_coopt, "max_distance needs need_coopt=False: P needs every cell of a pair");
    BEDL_CHECK_VALUE(md.device().is_cpu() && md.layout() == at::kStrided, "max_distance must be a dense CPU tensor");
    BEDL_CHECK_TYPE(md.scalar_type() == at::kFloat || md.scalar_type() == at::kDouble,
                    "max_distance must be float32 or float64, got ", md.scalar_type());
    BEDL_CHECK_VALUE(md.dim() == 1 && md.size(0) == in.batch, "max_distance must have one entry per pair (",
                     in.batch, "), got shape ", md.sizes());
    DistanceCutoffs out;
    out.thresholds = md.to(at::kDouble).contiguous();
    out.t = out.thresholds.data_ptr<double>();
    for (int64_t b = 0; b < in.batch; ++b) {
      BEDL_CHECK_VALUE(!std::isnan(out.t[b]), "max_distance[", b, "] is NaN");
    }
    out.max_abs = in.max_abs;
    out.float32 = in.table.scalar_type() == at::kFloat;
    if (!with_row_min) return out;
    const int64_t rows = in.rows, cols = in.cols;
    out.row_min.assign(rows, 0.0);
    AT_DISPATCH_FLOATING_TYPES(in.table.scalar_type(), "row_min", [&] {
      const scalar_t* c = in.table.data_ptr<scalar_t>();
      for (int64_t a = 0; a < rows; ++a) {
        double low = static_cast<double>(c[a * cols]);
        for (int64_t k = 1; k < cols; ++k) low = std::min(low, static_cast<double>(c[a * cols + k]));
        out.row_min[a] = low;
      }
    });
    return out;
  }
  bool applies(int64_t b) const { return std::isfinite(t[b]); }
  // Pair b's threshold with a margin for rounding: bounds and distances sum up
  // to |x| + |y| costs in other orders, and float32 distances are rounded once more.
  double limit(int64_t b, int64_t m, int64_t n) const {
    const double nodes = static_cast<double>(m + n);
    const double size = std::fabs(t[b]) + nodes * max_abs;
    return t[b] + size * ((nodes + 2.0) * 2.3e-16 + (float32 ? 1.2e-7 : 0.0));
  }
  // Every distance above its threshold becomes +inf.
  template <typename scalar_t>
  void mark_beyond(scalar_t* d) const {
    for (int64_t b = 0; b < thresholds.size(0); ++b) {
      if (static_cast<double>(d[b]) > t[b]) d[b] = std::numeric_limits<scalar_t>::infinity();
    }
  }
};

// A batch's padded cost blocks, (batch, rows, cols): checked and contiguous.
struct PaddedCosts {
  at::Tensor costs;
  int64_t batch = 0, rows = 0, cols = 0;

  explicit PaddedCosts(const at::Tensor& costs_in) {
    check_costs(costs_in);
    costs = costs_in.contiguous();
    batch = costs.size(0);
    rows = costs.size(1);
    cols = costs.size(2);
  }
  // The blocks' tie scales (largest absolute costs) over each pair's (m+1, n+1)
  // entries, every pair checked for NaN, inf and the overflow rule.
  template <typename scalar_t, typename SizeFn>
  std::vector<double> scales(const SizeFn& sizes) const {
    return cost_scales(costs.data_ptr<scalar_t>(), batch, rows, cols, sizes);
  }
};

}  // namespace dp
}  // namespace bedl
