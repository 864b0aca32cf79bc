// sed's inside counting pass on four pairs at once (see lanes.h).
#include "lanes.h"

#include "../../common/sequence.h"

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

// Four cells' flags from their alternatives' lane masks, one byte per cell.
template <class Mask>
__attribute__((target("avx2"))) inline void store_flags(uint8_t* out, Mask del, Mask ins, Mask match) {
  const uint32_t bytes = kSpread[_mm256_movemask_pd((__m256d)del)] | (kSpread[_mm256_movemask_pd((__m256d)ins)] << 1) |
                         (kSpread[_mm256_movemask_pd((__m256d)match)] << 2);
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
// lanes: one loop for both passes, every cell the sequence cell of
// common/sequence.h (and the tie test and dp::enter) instantiated with four
// lanes of doubles, as the scalar passes instantiate it with one.
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
      const SequenceAlternatives<__m256d> alt =
          sequence_alternatives(_mm256_loadu_pd(dprev + (j - 1) * K), _mm256_loadu_pd(rep_row + (j - 1) * K),
                                _mm256_loadu_pd(dprev + j * K), del, left, _mm256_loadu_pd(ins_cost + (j - 1) * K));
      const __m256d best = alt.best();
      _mm256_storeu_pd(dcur + j * K, best);
      left = best;
      if (!kCount) continue;
      const __m256d t = dp::tie_threshold(best, scale, rt);
      const auto is_del = dp::ties(alt.del, best, t, rt);
      const auto is_ins = dp::ties(alt.ins, best, t, rt);
      const auto is_match = dp::ties(alt.rep, best, t, rt);
      __m256d by_del, other;
      dp::enter(dp::lane_gate(is_del, is_ins, is_match), _mm256_loadu_pd(tprev + j * K), left_other,
                _mm256_loadu_pd(tprev + (j - 1) * K), by_del, other);
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
