// The sequence kernels' work per GPU thread, backend-free: each thread runs
// whole pairs (b = thread, thread + threads, ...) through common/'s passes with
// its own slice of a workspace, exactly as one CPU thread runs a pair, so the
// bits are the CPU kernel's. The CUDA kernels (kernels.cu) are these loops
// with b taken from the thread index; the tests compile this header for the
// host and run the same loops over every thread index (tests/cuda/).
#pragma once

#include <cfloat>

#include "../../common/sequence_passes.h"

namespace bedl {
namespace gpu {

// What a pair's job reports (one int per pair; the glue raises on the first nonzero).
enum PairStatus : int32_t {
  kPairOk = 0,
  kPairNotFinite = 1,     // a cost the pair reads is NaN or infinite
  kPairTooLarge = 2,      // 2 (|x| + |y|) max|cost| overflows the dtype (the overflow rule)
  kPairCountsOverflow = 3,  // co-optimal counts overflow doubles: solve again with exponents
  kPairNoCoOptimal = 4,   // the tie test keeps no alignment (rel_tol too small for these costs)
};

template <typename scalar_t>
BEDL_HD double largest_finite() {
  return sizeof(scalar_t) == 8 ? DBL_MAX : static_cast<double>(FLT_MAX);
}

// The overflow rule and finiteness of a pair whose largest absolute cost is max_abs.
template <typename scalar_t>
BEDL_HD int32_t cost_status(double max_abs, int64_t m, int64_t n) {
  if (!is_finite(max_abs)) return kPairNotFinite;
  if (!(2.0 * static_cast<double>(m + n) * max_abs <= largest_finite<scalar_t>())) return kPairTooLarge;
  return kPairOk;
}

// Padded cost blocks (batch, rows, cols) with each pair's lengths.
template <typename scalar_t>
struct PaddedSequencePairs {
  const scalar_t* costs;
  int64_t rows, cols;
  const int64_t *x_len, *y_len;
  BEDL_HD int64_t m(int64_t b) const { return x_len[b]; }
  BEDL_HD int64_t n(int64_t b) const { return y_len[b]; }
  BEDL_HD sed::PaddedCostRows<scalar_t> costs_of(int64_t b) const {
    return {costs + b * rows * cols, cols, x_len[b], y_len[b]};
  }
  // The block's corner [m, n] is not read but must be finite (as on the CPU).
  BEDL_HD bool corner_finite(int64_t b) const {
    return is_finite(static_cast<double>(costs[b * rows * cols + x_len[b] * cols + y_len[b]]));
  }
};

// Sequences as labels into an (S, S) symbol table: sequence t of x is
// x_labels[x_ptr[t] .. x_ptr[t + 1]); pair b is (pair_x[b], pair_y[b]).
template <typename scalar_t>
struct SymbolSequencePairs {
  const scalar_t* table;
  int64_t S;
  const int64_t *x_labels, *x_ptr, *y_labels, *y_ptr, *pair_x, *pair_y;
  BEDL_HD int64_t m(int64_t b) const { return x_ptr[pair_x[b] + 1] - x_ptr[pair_x[b]]; }
  BEDL_HD int64_t n(int64_t b) const { return y_ptr[pair_y[b] + 1] - y_ptr[pair_y[b]]; }
  BEDL_HD sed::SymbolCostRows<scalar_t> costs_of(int64_t b) const {
    return {table, S, x_labels + x_ptr[pair_x[b]], y_labels + y_ptr[pair_y[b]]};
  }
  // (The table is checked whole by the glue.)
  BEDL_HD bool corner_finite(int64_t) const { return true; }
};

// The doubles one thread needs for distances of pairs up to |y| = max_n.
BEDL_HD int64_t distance_workspace(int64_t max_n) { return 2 * (max_n + 1); }

// Thread `thread` of `threads`: the distances of its pairs into d, a status
// per pair into status. ws: distance_workspace(max_n) doubles of its own.
template <typename scalar_t, class Pairs>
BEDL_HD void sequence_distances_thread(const Pairs& pairs, int64_t batch, int64_t thread, int64_t threads,
                                       double* ws, int64_t max_n, scalar_t* d, int32_t* status) {
  for (int64_t b = thread; b < batch; b += threads) {
    const int64_t m = pairs.m(b), n = pairs.n(b);
    const auto costs = pairs.costs_of(b);
    int32_t s = cost_status<scalar_t>(sed::sequence_cost_scale(costs, m, n), m, n);
    if (s == kPairOk && !pairs.corner_finite(b)) s = kPairNotFinite;
    status[b] = s;
    d[b] = static_cast<scalar_t>(s == kPairOk ? sed::sequence_distance(costs, m, n, ws, ws + max_n + 1) : 0.0);
  }
}

// One thread's buffers for the counting passes of pairs up to (max_m, max_n),
// carved from `bytes` (coopt_workspace_bytes of them, 16-byte aligned).
template <typename Count>
BEDL_HD sed::SequenceCounts<Count> coopt_buffers(char* bytes, int64_t max_m, int64_t max_n) {
  const int64_t w = max_n + 1, cells = (max_m + 1) * w;
  sed::SequenceCounts<Count> buf;
  char* at = bytes;
  auto take = [&](int64_t size) {
    char* out = at;
    at += (size + 15) / 16 * 16;
    return out;
  };
  buf.in_del = reinterpret_cast<Count*>(take(cells * static_cast<int64_t>(sizeof(Count))));
  buf.in_other = reinterpret_cast<Count*>(take(cells * static_cast<int64_t>(sizeof(Count))));
  buf.out_any = reinterpret_cast<Count*>(take(2 * w * static_cast<int64_t>(sizeof(Count))));
  buf.out_ins = reinterpret_cast<Count*>(take(2 * w * static_cast<int64_t>(sizeof(Count))));
  buf.p_acc = reinterpret_cast<double*>(take(cells * 8));
  buf.prev = reinterpret_cast<double*>(take(w * 8));
  buf.cur = reinterpret_cast<double*>(take(w * 8));
  buf.coopt = reinterpret_cast<uint8_t*>(take(cells));
  return buf;
}

template <typename Count>
BEDL_HD int64_t coopt_workspace_bytes(int64_t max_m, int64_t max_n) {
  const int64_t w = max_n + 1, cells = (max_m + 1) * w;
  auto round = [](int64_t size) { return (size + 15) / 16 * 16; };
  const int64_t count = static_cast<int64_t>(sizeof(Count));
  return 2 * round(cells * count) + 2 * round(2 * w * count) + round(cells * 8) + 2 * round(w * 8) + round(cells);
}

// Thread `thread` of `threads`: the distances and P of the pairs listed in
// order[0 .. count) (all pairs, or those whose counts overflowed doubles),
// counts of type Count. P goes to p (batch, rows, cols), zero on entry, in the
// cost layout; a pair whose counts overflow Count gets kPairCountsOverflow
// (FastCount: solve again with dp::Count) or kPairNoCoOptimal (dp::Count).
template <typename Count, typename scalar_t, class Pairs>
BEDL_HD void sequence_coopt_thread(const Pairs& pairs, const int64_t* order, int64_t count, int64_t thread,
                                   int64_t threads, char* ws, int64_t max_m, int64_t max_n, double rel_tol,
                                   scalar_t* d, scalar_t* p, int64_t rows, int64_t cols, int32_t* status) {
  const sed::SequenceCounts<Count> buf = coopt_buffers<Count>(ws, max_m, max_n);
  for (int64_t k = thread; k < count; k += threads) {
    const int64_t b = order == nullptr ? k : order[k];
    const int64_t m = pairs.m(b), n = pairs.n(b);
    const auto costs = pairs.costs_of(b);
    const double scale = sed::sequence_cost_scale(costs, m, n);
    int32_t s = cost_status<scalar_t>(scale, m, n);
    if (s == kPairOk && !pairs.corner_finite(b)) s = kPairNotFinite;
    if (s != kPairOk) {
      status[b] = s;
      d[b] = static_cast<scalar_t>(0.0);
      continue;
    }
    double distance;
    if (!sed::sequence_counted(costs, m, n, dp::Tie{rel_tol, scale}, buf, &distance)) {
      status[b] = sizeof(Count) == sizeof(dp::FastCount) ? kPairCountsOverflow : kPairNoCoOptimal;
      continue;
    }
    status[b] = kPairOk;
    d[b] = static_cast<scalar_t>(distance);
    scalar_t* pb = p + b * rows * cols;
    const int64_t w = n + 1;
    for (int64_t i = 0; i <= m; ++i) {
      for (int64_t j = 0; j <= n; ++j) {
        if (i == m && j == n) continue;
        pb[i * cols + j] = static_cast<scalar_t>(buf.p_acc[i * w + j]);
      }
    }
  }
}

}  // namespace gpu
}  // namespace bedl
