// sed's inside counting pass on four pairs at once (see sed_lanes.h).
#include "sed_lanes.h"

#include <cstring>
#include <utility>

namespace bedl {
namespace sed {

#ifdef BEDL_X86_SIMD
namespace {

// Byte l set to bit l of a 4-bit lane mask: the four cells' flags in one store.
constexpr uint32_t spread(int k) {
  return (k & 1) | ((k >> 1 & 1) << 8) | ((k >> 2 & 1) << 16) | ((k >> 3 & 1) << 24);
}
constexpr uint32_t kSpread[16] = {spread(0),  spread(1),  spread(2),  spread(3), spread(4),  spread(5),
                                  spread(6),  spread(7),  spread(8),  spread(9), spread(10), spread(11),
                                  spread(12), spread(13), spread(14), spread(15)};

// Tie::within on four cells: (v - best <= t) | (v - best <= rel_tol |v|).
__attribute__((target("avx2"))) inline __m256d within4(__m256d v, __m256d best, __m256d t, __m256d rel_tol,
                                                       __m256d abs_mask) {
  const __m256d gap = _mm256_sub_pd(v, best);
  return _mm256_or_pd(_mm256_cmp_pd(gap, t, _CMP_LE_OQ),
                      _mm256_cmp_pd(gap, _mm256_mul_pd(rel_tol, _mm256_and_pd(v, abs_mask)), _CMP_LE_OQ));
}

__attribute__((target("avx2"))) inline void store_flags(uint8_t* out, __m256d del, __m256d ins, __m256d match) {
  const uint32_t bytes = kSpread[_mm256_movemask_pd(del)] | (kSpread[_mm256_movemask_pd(ins)] << 1) |
                         (kSpread[_mm256_movemask_pd(match)] << 2);
  std::memcpy(out, &bytes, sizeof(bytes));
}

// Lanes whose pair ends in this row: their distance (and with kCount total count).
template <bool kCount>
inline void take_results(SedLanes& L, int64_t i, const double* dist, const double* tot) {
  for (int l = 0; l < kLanes; ++l) {
    if (L.m[l] == i) {
      L.distance[l] = dist[L.n[l] * kLanes + l];
      if (kCount) L.total[l] = tot[L.n[l] * kLanes + l];
    }
  }
}

// The distances, and with kCount the flags and inside counts, on all four
// lanes: one loop for both passes, as the scalar kernel's passes share their
// expressions.
template <bool kCount>
__attribute__((target("avx2"))) void lanes_pass(SedLanes& L, double rel_tol) {
  constexpr int K = kLanes;
  const int64_t M = L.M, N = L.N, W = N + 1;
  L.dist.resize(2 * W * K);
  if (kCount) {
    L.tot.resize(2 * W * K);
    L.in_del.resize((M + 1) * W * K);
    L.in_other.resize((M + 1) * W * K);
    L.coopt.resize((M + 1) * W * K);
  }
  double* dprev = L.dist.data();
  double* dcur = dprev + W * K;
  double* tprev = kCount ? L.tot.data() : nullptr;
  double* tcur = kCount ? tprev + W * K : nullptr;
  double* in_del = L.in_del.data();
  double* in_other = L.in_other.data();
  uint8_t* coopt = L.coopt.data();
  const double* rep_cost = L.rep.data();
  const double* ins_cost = L.ins.data();
  const __m256d zero = _mm256_setzero_pd(), one = _mm256_set1_pd(1.0);
  const __m256d rt = _mm256_set1_pd(rel_tol), scale = _mm256_loadu_pd(L.scale);
  const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
  const uint32_t ins_flags = kSpread[15] * dp::kIns, del_flags = kSpread[15] * dp::kDel;

  // Row 0: insertions only; every cell is entered once ("other"), the corner by nothing.
  _mm256_storeu_pd(dprev, zero);
  if (kCount) {
    _mm256_storeu_pd(in_del, zero);
    _mm256_storeu_pd(in_other, one);
    _mm256_storeu_pd(tprev, _mm256_add_pd(zero, one));
    std::memset(coopt, 0, K);
  }
  __m256d left = zero;
  for (int64_t j = 1; j <= N; ++j) {
    left = _mm256_add_pd(left, _mm256_loadu_pd(ins_cost + (j - 1) * K));
    _mm256_storeu_pd(dprev + j * K, left);
    if (kCount) {
      _mm256_storeu_pd(in_del + j * K, zero);
      _mm256_storeu_pd(in_other + j * K, one);
      _mm256_storeu_pd(tprev + j * K, _mm256_add_pd(zero, one));
      std::memcpy(coopt + j * K, &ins_flags, K);
    }
  }
  take_results<kCount>(L, 0, dprev, tprev);

  for (int64_t i = 1; i <= M; ++i) {
    const __m256d del = _mm256_loadu_pd(L.del.data() + (i - 1) * K);
    const int64_t base = i * W;
    left = _mm256_add_pd(_mm256_loadu_pd(dprev), del);
    _mm256_storeu_pd(dcur, left);
    if (kCount) {
      _mm256_storeu_pd(in_del + base * K, one);
      _mm256_storeu_pd(in_other + base * K, zero);
      _mm256_storeu_pd(tcur, _mm256_add_pd(one, zero));
      std::memcpy(coopt + base * K, &del_flags, K);
    }
    __m256d left_other = zero;
    const double* rep_row = rep_cost + (i - 1) * N * K;
    for (int64_t j = 1; j <= N; ++j) {
      const __m256d rep = _mm256_add_pd(_mm256_loadu_pd(dprev + (j - 1) * K), _mm256_loadu_pd(rep_row + (j - 1) * K));
      const __m256d d = _mm256_add_pd(_mm256_loadu_pd(dprev + j * K), del);
      const __m256d in = _mm256_add_pd(left, _mm256_loadu_pd(ins_cost + (j - 1) * K));
      const __m256d best = dp::best_of4(rep, d, in);
      _mm256_storeu_pd(dcur + j * K, best);
      left = best;
      if (!kCount) continue;
      // Tie::threshold: std::max(|best|, scale) is (|best| < scale) ? scale : |best|.
      const __m256d t = _mm256_mul_pd(rt, _mm256_max_pd(scale, _mm256_and_pd(best, abs_mask)));
      const __m256d is_del = within4(d, best, t, rt, abs_mask);
      const __m256d is_ins = within4(in, best, t, rt, abs_mask);
      const __m256d is_match = within4(rep, best, t, rt, abs_mask);
      const __m256d by_del = _mm256_and_pd(is_del, _mm256_loadu_pd(tprev + j * K));
      const __m256d other = _mm256_add_pd(_mm256_and_pd(is_ins, left_other),
                                          _mm256_and_pd(is_match, _mm256_loadu_pd(tprev + (j - 1) * K)));
      const int64_t cell = (base + j) * K;
      _mm256_storeu_pd(in_del + cell, by_del);
      _mm256_storeu_pd(in_other + cell, other);
      _mm256_storeu_pd(tcur + j * K, _mm256_add_pd(by_del, other));
      left_other = other;
      store_flags(coopt + cell, is_del, is_ins, is_match);
    }
    take_results<kCount>(L, i, dcur, tcur);
    std::swap(dprev, dcur);
    if (kCount) std::swap(tprev, tcur);
  }
}

}  // namespace

void sed_inside_lanes_avx2(SedLanes& lanes, double rel_tol) { lanes_pass<true>(lanes, rel_tol); }
void sed_distance_lanes_avx2(SedLanes& lanes) { lanes_pass<false>(lanes, 0.0); }
#else
void sed_distance_lanes_avx2(SedLanes&) {
  BEDL_CHECK(false, "internal error: the AVX2 sequence lanes were called on a build without x86 SIMD");
}
void sed_inside_lanes_avx2(SedLanes&, double) {
  BEDL_CHECK(false, "internal error: the AVX2 sequence lanes were called on a build without x86 SIMD");
}
#endif

}  // namespace sed
}  // namespace bedl
