// What the AVX2 paths add to the common recurrence (whose templates they
// instantiate with four lanes of doubles): the lanes' gate for dp::enter, and
// a row's co-optimal flags four cells at a time (costs >= 0).
#pragma once

#include <cstring>

#include "../common/states.h"
#include "parallel.h"

namespace bedl {
namespace dp {

#ifdef BEDL_X86_SIMD
// The gate of four lanes' cells (dp::enter): each alternative's lane mask
// (a comparison's all-ones lanes where it is co-optimal).
template <class Mask>
struct LaneGate {
  Mask by_del, by_ins, by_match;
  __m256d del(__m256d w) const { return keep_lanes(by_del, w); }
  __m256d ins(__m256d w) const { return keep_lanes(by_ins, w); }
  __m256d match(__m256d w) const { return keep_lanes(by_match, w); }
};
template <class Mask>
LaneGate<Mask> lane_gate(Mask by_del, Mask by_ins, Mask by_match) {
  return {by_del, by_ins, by_match};
}

// dp::ties_nonnegative of four cells, as a 4-bit mask.
__attribute__((target("avx2"))) inline int within_nonnegative4(__m256d rel_tol, __m256d scale, __m256d value,
                                                               __m256d best) {
  return _mm256_movemask_pd((__m256d)ties_nonnegative(value, best, scale, rel_tol));
}

// Tie::flags_nonnegative of cells 1..count of one table row, four at a time:
// cell j's deletion is up[j] + del, its insertion row[j - 1] + ins[j], its
// match match[j], its value row[j]; the flags go to flags[j]. The tie test of
// common/tie.h on four lanes: the same flags.
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

}  // namespace dp
}  // namespace bedl
