// What the soft passes carry: Boltzmann weights exp(-v / T) as doubles
// (PlainWeight) or with a wide exponent (WideWeight), with one(), zero(), +
// and *: the log semiring's values kept as exponentials, so that a cell is a
// few products and sums, as in the counting passes.
#pragma once

#include <math.h>

#include "counts.h"
#include "macros.h"

namespace bedl {
namespace soft {

// A weight as a double, where the pair's weights stay in range
// (fast_range_holds): no product there meets an infinity, so none needs
// dp::FastCount's guard against 0 * inf.
struct PlainWeight {
  double m = 0.0;

  BEDL_HD static PlainWeight one() { return PlainWeight{1.0}; }
  BEDL_HD static PlainWeight zero() { return PlainWeight{}; }
  BEDL_HD bool is_zero() const { return m == 0.0; }
};

BEDL_HD PlainWeight operator*(const PlainWeight& a, const PlainWeight& b) { return PlainWeight{a.m * b.m}; }
BEDL_HD PlainWeight operator+(const PlainWeight& a, const PlainWeight& b) { return PlainWeight{a.m + b.m}; }

// A weight m * 2^(512 k) with m in [2^-256, 2^256), or zero (m == 0). Products
// of two mantissas stay normal doubles, and a sum of weights whose k differ
// by 2 or more drops the smaller one, at most 2^-512 of the larger: a double
// with an int64 exponent in steps of 2^512, exact to double precision, whose
// common case (equal k) is one double operation and a predictable branch
// (dp::Count, in steps of 2, renormalises every sum).
struct WideWeight {
  static constexpr int64_t kZeroStep = INT64_MIN / 4;  // below every nonzero weight's k
  double m = 0.0;
  int64_t k = kZeroStep;

  BEDL_HD static WideWeight one() { return WideWeight{1.0, 0}; }
  BEDL_HD static WideWeight zero() { return WideWeight{}; }
  BEDL_HD bool is_zero() const { return m == 0.0; }
};

constexpr double kStep = 0x1p512, kInvStep = 0x1p-512, kHigh = 0x1p256, kLow = 0x1p-256;

// m * 2^(512 k) with m in [2^-512, 2^513) brought back to [2^-256, 2^256) (exact).
BEDL_HD WideWeight normalized(double m, int64_t k) {
  if (__builtin_expect(m >= kHigh, 0)) {
    m *= kInvStep;
    ++k;
  } else if (__builtin_expect(m < kLow, 0)) {
    if (m == 0.0) return WideWeight{};
    m *= kStep;
    --k;
  }
  return WideWeight{m, k};
}

BEDL_HD WideWeight operator*(const WideWeight& a, const WideWeight& b) { return normalized(a.m * b.m, a.k + b.k); }

BEDL_HD WideWeight operator+(const WideWeight& a, const WideWeight& b) {
  if (__builtin_expect(a.k == b.k, 1)) return normalized(a.m + b.m, a.k);
  const WideWeight& hi = a.k > b.k ? a : b;
  const WideWeight& lo = a.k > b.k ? b : a;
  if (hi.k - lo.k == 1) return normalized(hi.m + lo.m * kInvStep, hi.k);
  return hi;  // lo is below 2^-512 of hi (or zero)
}

constexpr double kLog2e = 1.4426950408889634073599;
constexpr double kLn2 = 0.6931471805599453094172;

// A partial mapping of a + b nodes has at most C(a + b, a) <= 2^(a + b)
// derivations, so with weights <= 1 no inside or outside weight exceeds
// 2^(m + n), nor does the total or an edge's inside * weight * outside (at
// most the total): doubles hold them up to m + n = 1000. The total must also
// exceed 2^(m + n - 980) (below), which pairs of more than kFastNodes nodes
// rarely do: they start with wide weights.
constexpr int64_t kFastNodes = 500;

BEDL_HD bool fast_range_holds(const PlainWeight& total, int64_t nodes) {
  // Weights that underflowed are lost; with the total above 2^(nodes - 980)
  // what they could carry into it or into P (at most 2^-1074 per operation,
  // of which there are fewer than 2^40, times an outside weight <= 2^nodes)
  // is below 2^-54 of it.
  return nodes <= kFastNodes && is_finite(total.m) && total.m >= dp::pow2(nodes - 980);
}
BEDL_HD bool fast_range_holds(const WideWeight& total, int64_t) { return total.m > 0.0; }

// exp(-reduced / T) in a weight type.
BEDL_HD void boltzmann(double reduced, double temperature, PlainWeight& out) { out.m = ::exp(-reduced / temperature); }
BEDL_HD void boltzmann(double reduced, double temperature, WideWeight& out) {
  const double log2_weight = -reduced / temperature * kLog2e;
  const double k = ::nearbyint(log2_weight / 512.0);
  out = normalized(::exp2(log2_weight - 512.0 * k), static_cast<int64_t>(k));
}

BEDL_HD double log_of(const PlainWeight& w) { return ::log(w.m); }
BEDL_HD double log_of(const WideWeight& w) { return ::log(w.m) + static_cast<double>(w.k) * (512.0 * kLn2); }

// The shares num / total of weights num <= total (P's entries), with the
// total's reciprocal computed once.
class ShareOf {
 public:
  BEDL_HD explicit ShareOf(const PlainWeight& total) : inv_(1.0 / total.m), k_(0) {}
  BEDL_HD explicit ShareOf(const WideWeight& total) : inv_(1.0 / total.m), k_(total.k) {}
  BEDL_HD double operator()(const PlainWeight& num) const { return num.m * inv_; }
  BEDL_HD double operator()(const WideWeight& num) const {
    const double q = num.m * inv_;
    const int64_t dk = num.k - k_;  // <= 1, as num <= total
    if (dk == 0) return q;
    if (dk == 1) return q * kStep;
    if (dk == -1) return q * kInvStep;
    return 0.0;  // below 2^-512
  }

 private:
  double inv_;
  int64_t k_;
};

// Node potentials: reduced[i * w + j] = cost - a_i - b_j for the kernel
// layout (w = n + 1; [i][j] replaces x_i by y_j, [i][0] deletes x_i, [0][j]
// inserts y_j, 1-based; [0][0] unused), with a_i the minimum of row i and b_j
// that of column j after it; each is a difference of ordered doubles, so >= 0
// exactly, and every weight <= 1. reduced: (m + 1)(n + 1) entries,
// column_min: n + 1. Returns sum(a) + sum(b), the cost every mapping lost.
BEDL_HD double reduce_costs(const double* cost, int64_t m, int64_t n, double* r, double* b) {
  const int64_t w = n + 1;
  for (int64_t j = 0; j <= n; ++j) b[j] = 0.0;
  for (int64_t j = 1; j <= n; ++j) b[j] = cost[j];
  double shift = 0.0;
  for (int64_t i = 1; i <= m; ++i) {
    const double* row = cost + i * w;
    double a = row[0];
    for (int64_t j = 1; j <= n; ++j) a = min_of(a, row[j]);
    shift += a;
    double* out = r + i * w;
    for (int64_t j = 0; j <= n; ++j) out[j] = row[j] - a;
    for (int64_t j = 1; j <= n; ++j) b[j] = min_of(b[j], out[j]);
  }
  r[0] = 0.0;
  for (int64_t j = 1; j <= n; ++j) {
    shift += b[j];
    r[j] = cost[j] - b[j];
  }
  for (int64_t i = 1; i <= m; ++i) {
    double* out = r + i * w;
    for (int64_t j = 1; j <= n; ++j) out[j] -= b[j];
  }
  return shift;
}

// The weights of `cells` reduced costs ([0], unused, gets one).
template <typename Weight>
BEDL_HD void weights_of(const double* reduced, int64_t cells, double temperature, Weight* out) {
  for (int64_t k = 1; k < cells; ++k) boltzmann(reduced[k], temperature, out[k]);
  if (cells > 0) out[0] = Weight::one();
}

}  // namespace soft
}  // namespace bedl
