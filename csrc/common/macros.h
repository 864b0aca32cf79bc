// What lets one header serve every backend: BEDL_HD marks functions that run on
// the host and, compiled by nvcc, on the device; small helpers with the exact
// semantics the kernels' bits depend on (std::min's operand order, bit casts).
// Nothing here allocates, throws or uses a standard container.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if !defined(__CUDACC__) && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>  // (the __m256d type only; no AVX instruction is used here)
#endif

#if defined(__CUDACC__)
#define BEDL_HD __host__ __device__ inline
#else
#define BEDL_HD inline
#endif

#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
// The cells are templates over the value type, instantiated with __m256d by
// the AVX2 lanes (GCC's vector arithmetic); they are always inlined into the
// lanes' AVX2 functions, so the ABI note about passing such vectors to a
// function compiled without AVX does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// Unrolls the next loop (a fixed trip count): nvcc keeps an array indexed by
// its counter in registers; gcc's pragma for the host build of the same code.
#if defined(__CUDACC__)
#define BEDL_UNROLL _Pragma("unroll")
#elif defined(__GNUC__) && !defined(__clang__)
#define BEDL_UNROLL _Pragma("GCC unroll 64")
#else
#define BEDL_UNROLL
#endif

namespace bedl {

// std::min's and std::max's semantics without <algorithm> (device code): the
// operand order decides between equal values, which matters for signed zeros.
template <class T>
BEDL_HD T min_of(T a, T b) {
  return b < a ? b : a;
}
template <class T>
BEDL_HD T max_of(T a, T b) {
  return a < b ? b : a;
}

BEDL_HD double double_of_bits(uint64_t bits) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(bits));
#else
  double out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
#endif
}

BEDL_HD uint64_t bits_of_double(double v) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(v));
#else
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
#endif
}

BEDL_HD double abs_of(double v) { return fabs(v); }

BEDL_HD bool is_finite(double v) {
#if defined(__CUDA_ARCH__)
  return isfinite(v);
#else
  return std::isfinite(v);
#endif
}

// The larger of a running maximum and |v|; NaN once any v was NaN.
BEDL_HD double max_abs_step(double running, double v) {
  const double a = abs_of(v);
  return (a > running || a != a) ? a : running;
}

#if !defined(__CUDACC__) && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
// Four lanes of doubles (the AVX2 lanes' value type): GCC's vector arithmetic
// (+, *, <, ?:) instantiates the cells' templates; these are the helpers that
// need bit operations. Inlined into the lanes' AVX2 functions.
typedef uint64_t lanes_bits4 __attribute__((vector_size(32)));
inline __m256d abs_of(__m256d v) {
  return (__m256d)((lanes_bits4)v & (lanes_bits4){~(uint64_t{1} << 63), ~(uint64_t{1} << 63), ~(uint64_t{1} << 63),
                                                   ~(uint64_t{1} << 63)});
}
// v where `mask` (a comparison's all-ones lanes), else +0.0.
template <class Mask>
inline __m256d keep_lanes(Mask mask, __m256d v) {
  return (__m256d)((lanes_bits4)mask & (lanes_bits4)v);
}
#endif

}  // namespace bedl
