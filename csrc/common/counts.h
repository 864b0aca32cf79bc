// What the counting passes carry: numbers of co-optimal derivations as doubles
// (FastCount, the usual case) or with an explicit exponent (Count, where
// doubles overflow), and booleans (Reach: whether a co-optimal mapping passes).
// All three have one() and zero(), + (alternatives) and * (a derivation
// continued), so one recurrence serves each.
#pragma once

#include "macros.h"

namespace bedl {
namespace dp {

// 2^e as a double by writing the exponent bits (std::ldexp is a libm call and
// was the hot spot of the counting passes); 0 below the normal range.
BEDL_HD double pow2(int64_t e) {
  if (e < -1022) return 0.0;
  return double_of_bits(static_cast<uint64_t>(e + 1023) << 52);
}

// A count of co-optimal mappings, m * 2^e with m in [0.5, 1) (or m == 0).
// Counts grow exponentially with the size of the inputs when costs tie, past
// any floating point range; an explicit exponent keeps them exact to double
// precision without the transcendental functions of log space.
struct Count {
  double m = 0.0;
  int64_t e = 0;

  BEDL_HD static Count one() { return Count{0.5, 1}; }
  BEDL_HD static Count zero() { return Count{}; }
  BEDL_HD bool is_zero() const { return m == 0.0; }
  BEDL_HD bool usable_total() const { return m > 0.0; }
};

BEDL_HD Count operator*(const Count& a, const Count& b) {
  if (a.m == 0.0 || b.m == 0.0) return Count{};
  double m = a.m * b.m;  // in [0.25, 1)
  int64_t e = a.e + b.e;
  if (m < 0.5) {
    m *= 2.0;
    e -= 1;
  }
  return Count{m, e};
}

BEDL_HD Count operator+(const Count& a, const Count& b) {
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
BEDL_HD double ratio(const Count& num, const Count& den) {
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

  BEDL_HD static FastCount one() { return FastCount{1.0}; }
  BEDL_HD static FastCount zero() { return FastCount{}; }
  BEDL_HD bool is_zero() const { return m == 0.0; }
  BEDL_HD bool usable_total() const { return is_finite(m) && m > 0.0; }
};

BEDL_HD FastCount operator*(const FastCount& a, const FastCount& b) {
  // 0 * inf stays 0, as for Count (an overflowed count off every optimal path
  // must not poison others with NaN).
  const double product = a.m * b.m;
  return FastCount{(a.m == 0.0) | (b.m == 0.0) ? 0.0 : product};
}
BEDL_HD FastCount operator+(const FastCount& a, const FastCount& b) { return FastCount{a.m + b.m}; }
BEDL_HD double ratio(const FastCount& num, const FastCount& den) { return num.m / den.m; }

// Whether some co-optimal mapping passes a cell: the outside sweep's counts
// as booleans (sum = or, product = and), for finding the tables P needs.
struct Reach {
  uint8_t v = 0;
  BEDL_HD static Reach one() { return Reach{1}; }
  BEDL_HD static Reach zero() { return Reach{}; }
  BEDL_HD bool is_zero() const { return v == 0; }
};
BEDL_HD Reach operator+(Reach a, Reach b) { return Reach{static_cast<uint8_t>(a.v | b.v)}; }
BEDL_HD Reach operator*(Reach a, Reach b) { return Reach{static_cast<uint8_t>(a.v & b.v)}; }

// v where `on`, else +0.0 (what `on ? v : FastCount::zero()` gives), by a mask
// rather than a branch.
BEDL_HD double keep_if(bool on, double v) {
  return double_of_bits(bits_of_double(v) & -static_cast<uint64_t>(on));
}

}  // namespace dp
}  // namespace bedl
