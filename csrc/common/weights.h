// What the soft passes carry: Boltzmann weights exp(-v / T) as doubles
// (PlainWeight) or with a wide exponent (WideWeight), with one(), zero(), +
// and *: the log semiring's values kept as exponentials, so that a cell is a
// few products and sums, as in the counting passes.
#pragma once

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

}  // namespace soft
}  // namespace bedl
