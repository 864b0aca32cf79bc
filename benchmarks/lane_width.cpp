// Whether eight lanes (AVX-512) would make the tree kernel's lane cells cheaper
// than four (AVX2), without the library: the wide-row step of lanes_kernel.h on
// a synthetic table, L pairs interleaved, each step
//   fd[i][c] = min(min(fd[i-1][c] + del[i], fd[jump row][jump[c]] + tdm[def[c]] + rep[c]), fd[i][c-1] + ins[c])
// with the jump and tdm reads gathered lane by lane (scalar loads, as the
// kernel's gather4 does), or read contiguously (what the step costs without
// gathers). Prints ns per lane cell (one pair's cell).
//
// Build and run (no torch needed; the eight-lane columns need AVX-512F):
//   g++ -O3 -o /tmp/lane_width benchmarks/lane_width.cpp && /tmp/lane_width
// Results in benchmarks/HISTORY.md (session 38).
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

namespace {

template <int L>
struct Lanes;

template <>
struct Lanes<4> {
  using V = __m256d;
  static __attribute__((target("avx2"))) V load(const double* p) { return _mm256_loadu_pd(p); }
  static __attribute__((target("avx2"))) void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static __attribute__((target("avx2"))) V add(V a, V b) { return _mm256_add_pd(a, b); }
  static __attribute__((target("avx2"))) V min(V a, V b) { return _mm256_min_pd(a, b); }
  static __attribute__((target("avx2"))) V gather(const double* s, const long* at) {
    const __m128d lo = _mm_loadh_pd(_mm_load_sd(s + at[0]), s + at[1]);
    const __m128d hi = _mm_loadh_pd(_mm_load_sd(s + at[2]), s + at[3]);
    return _mm256_insertf128_pd(_mm256_castpd128_pd256(lo), hi, 1);
  }
};

template <>
struct Lanes<8> {
  using V = __m512d;
  static __attribute__((target("avx512f"))) V load(const double* p) { return _mm512_loadu_pd(p); }
  static __attribute__((target("avx512f"))) void store(double* p, V v) { _mm512_storeu_pd(p, v); }
  static __attribute__((target("avx512f"))) V add(V a, V b) { return _mm512_add_pd(a, b); }
  static __attribute__((target("avx512f"))) V min(V a, V b) { return _mm512_min_pd(a, b); }
  static __attribute__((target("avx512f"))) V gather(const double* s, const long* at) {
    // (two four-lane gathers, as the AVX2 kernel's)
    return _mm512_insertf64x4(_mm512_castpd256_pd512(Lanes<4>::gather(s, at)), Lanes<4>::gather(s, at + 4), 1);
  }
};

struct Table {
  int H, W, L;
  std::vector<double> fd, tdm, rep, ins, del;
  std::vector<long> jump, def;  // per column and lane: positions in doubles
  Table(int h, int w, int lanes) : H(h), W(w), L(lanes) {
    fd.assign(static_cast<size_t>(H + 1) * (W + 1) * L, 0.0);
    tdm.assign(static_cast<size_t>(W + 1) * L, 1.0);
    rep.assign(static_cast<size_t>(W + 1) * L, 1.0);
    ins.assign(static_cast<size_t>(W + 1) * L, 1.0);
    del.assign(static_cast<size_t>(H + 1) * L, 1.0);
    jump.resize(static_cast<size_t>(W + 1) * L);
    def.resize(static_cast<size_t>(W + 1) * L);
    std::mt19937 gen(1);
    for (int c = 0; c <= W; ++c) {
      for (int l = 0; l < L; ++l) {
        jump[c * L + l] = std::max(0, c - static_cast<int>(gen() % 8)) * L + l;
        def[c * L + l] = static_cast<long>(gen() % (W + 1)) * L + l;
      }
    }
  }
};

template <int L, bool kGather>
__attribute__((target("avx2,avx512f"), noinline)) void sweep(Table& t) {
  using X = Lanes<L>;
  const long w = static_cast<long>(t.W + 1) * L;
  for (int i = 1; i <= t.H; ++i) {
    const double* up = t.fd.data() + (i - 1) * w;
    const double* jump_row = t.fd.data() + (i > 2 ? i - 2 : 0) * w;
    double* row = t.fd.data() + i * w;
    const auto d = X::load(t.del.data() + i * L);
    auto left = X::load(row);
    for (int c = 1; c <= t.W; ++c) {
      const long at = static_cast<long>(c) * L;
      const auto jumped = kGather ? X::gather(jump_row, t.jump.data() + at) : X::load(jump_row + at - L);
      const auto defined = kGather ? X::gather(t.tdm.data(), t.def.data() + at) : X::load(t.tdm.data() + at);
      const auto match = X::add(X::add(jumped, defined), X::load(t.rep.data() + at));
      left = X::min(X::min(X::add(X::load(up + at), d), match), X::add(left, X::load(t.ins.data() + at)));
      X::store(row + at, left);
    }
  }
}

template <int L, bool kGather>
double ns_per_lane_cell(int H, int W) {
  Table t(H, W, L);
  const long reps = std::max(1L, 20000000L / (static_cast<long>(H) * W * L));
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (long k = 0; k < reps; ++k) {
      sweep<L, kGather>(t);
      t.fd[0] = t.fd.back() * 1e-300;  // a dependency between repetitions
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, s / reps / (static_cast<double>(H) * W * L) * 1e9);
  }
  return best;
}

}  // namespace

int main() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2")) {
    std::printf("no AVX2 on this processor: nothing to compare\n");
    return 0;
  }
  const bool wide = __builtin_cpu_supports("avx512f");
  std::printf("| rows x columns | 4 lanes, gathers | 8 lanes, gathers | 4 lanes, contiguous | 8 lanes, contiguous |\n");
  std::printf("|---|---|---|---|---|\n");
  const int sizes[][2] = {{30, 64}, {100, 256}, {100, 1024}};
  for (const auto& hw : sizes) {
    const int H = hw[0], W = hw[1];
    if (wide) {
      std::printf("| %dx%d | %.2f ns | %.2f ns | %.2f ns | %.2f ns |\n", H, W, ns_per_lane_cell<4, true>(H, W),
                  ns_per_lane_cell<8, true>(H, W), ns_per_lane_cell<4, false>(H, W), ns_per_lane_cell<8, false>(H, W));
    } else {
      std::printf("| %dx%d | %.2f ns | (no AVX-512F) | %.2f ns | (no AVX-512F) |\n", H, W,
                  ns_per_lane_cell<4, true>(H, W), ns_per_lane_cell<4, false>(H, W));
    }
  }
  return 0;
}
