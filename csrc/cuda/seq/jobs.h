// The sequence kernels' work per GPU thread, backend-free: each thread runs
// whole pairs (b = thread, thread + threads, ...) through common/'s passes with
// its own slice of a workspace, exactly as one CPU thread runs a pair, so the
// bits are the CPU kernel's. The CUDA kernels (kernels.cu) are these loops
// with b taken from the thread index; the tests compile this header for the
// host and run the same loops over every thread index (tests/cuda/).
#pragma once

#include <cfloat>

#include "../../common/sequence_passes.h"
#include "../../common/sequence_soft.h"

namespace bedl {
namespace gpu {

// What a pair's job reports (one int per pair; the glue raises on the first nonzero).
enum PairStatus : int32_t {
  kPairOk = 0,
  kPairNotFinite = 1,     // a cost the pair reads is NaN or infinite
  kPairTooLarge = 2,      // 2 (|x| + |y|) max|cost| overflows the dtype (the overflow rule)
  kPairCountsOverflow = 3,  // co-optimal counts overflow doubles: solve again with exponents
  kPairNoCoOptimal = 4,   // the tie test keeps no alignment (rel_tol too small for these costs)
  kPairSoftRange = 5,     // costs and temperature beyond the soft passes' range (soft::soft_range_ok)
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

// Sequences as labels into a (rows, cols) symbol table (x's labels index
// rows, y's columns): sequence t of x is
// x_labels[x_ptr[t] .. x_ptr[t + 1]); pair b is (pair_x[b], pair_y[b]).
template <typename scalar_t>
struct SymbolSequencePairs {
  const scalar_t* table;
  int64_t rows, cols;
  const int64_t *x_labels, *x_ptr, *y_labels, *y_ptr, *pair_x, *pair_y;
  BEDL_HD int64_t m(int64_t b) const { return x_ptr[pair_x[b] + 1] - x_ptr[pair_x[b]]; }
  BEDL_HD int64_t n(int64_t b) const { return y_ptr[pair_y[b] + 1] - y_ptr[pair_y[b]]; }
  BEDL_HD sed::SymbolCostRows<scalar_t> costs_of(int64_t b) const {
    return {table, rows, cols, x_labels + x_ptr[pair_x[b]], y_labels + y_ptr[pair_y[b]]};
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

// A thread's copy of its pair's y labels: label j at p[j * stride] (on a GPU in
// shared memory, one column per thread of the block, so no bank conflicts).
struct StridedLabels {
  const int32_t* p;
  int64_t stride;
  BEDL_HD int64_t operator[](int64_t j) const { return p[j * stride]; }
};

// The row widths of the register-row distance kernel (kernels.cu instantiates
// each): the smallest that holds sequences y of up to max_n symbols, 0 where
// none does (the warp kernel below takes those).
BEDL_HD int short_sequence_width(int64_t max_n) {
  if (max_n <= 8) return 8;
  if (max_n <= 16) return 16;
  if (max_n <= 32) return 32;
  if (max_n <= 48) return 48;
  if (max_n <= 64) return 64;
  return 0;
}

// Thread `thread` of `threads`: the distances of its symbol-table pairs, each
// |y| <= N, into d, the row in N + 1 registers (sequence_distance_fixed), the
// costs read from `table` (pairs.table or a copy in shared memory). labels: N
// int32 slots at labels[j * stride], this thread's copy of its pair's y. No
// statuses: the glue checks a symbol table whole.
template <int N, typename scalar_t>
BEDL_HD void sequence_short_distances_thread(const SymbolSequencePairs<scalar_t>& pairs, const scalar_t* table,
                                             int64_t batch, int64_t thread, int64_t threads, int32_t* labels,
                                             int64_t stride, scalar_t* d) {
  for (int64_t b = thread; b < batch; b += threads) {
    const int64_t m = pairs.m(b), n = pairs.n(b);
    const int64_t* y = pairs.y_labels + pairs.y_ptr[pairs.pair_y[b]];
    for (int64_t j = 0; j < n; ++j) labels[j * stride] = static_cast<int32_t>(y[j]);
    const sed::SymbolCostRows<scalar_t, StridedLabels> costs{table, pairs.rows, pairs.cols,
                                                             pairs.x_labels + pairs.x_ptr[pairs.pair_x[b]],
                                                             StridedLabels{labels, stride}};
    d[b] = static_cast<scalar_t>(sed::sequence_distance_fixed<N>(costs, m, n));
  }
}

// The warp-per-pair distance kernel's lanes: the 32 lanes of a warp share one
// symbol-table pair, lane t owning the columns c0 + 1 .. c0 + N (c0 = pass * 32N
// + t N) of a pass in registers. Rows stream through the lanes one step apart:
// at step s lane t computes row i = s - t, its left boundary D[i][c0] being
// what lane t - 1 sent at step s - 1 (its last column of row i; lane 0: column
// 0, or in later passes the boundary column lane 31 wrote in the previous one).
// Row 0's sums and column 0's run along the row (column) in the CPU's order,
// and every cell is sed::sequence_value of the same operands: the CPU's bits.
constexpr int kWarpLanes = 32;

// The strip width of the warp kernel for y of up to max_n symbols: the
// narrowest of 4, 8, 16 whose 32 lanes span max_n, else 16 (several passes).
BEDL_HD int warp_strip_width(int64_t max_n) {
  if (max_n <= kWarpLanes * 4) return 4;
  if (max_n <= kWarpLanes * 8) return 8;
  return 16;
}

template <int N, typename scalar_t>
struct SequenceStrip {
  const scalar_t* table = nullptr;
  int64_t rows = 0, cols = 0;
  const int64_t *x = nullptr, *y_labels = nullptr;
  int64_t m = 0, n = 0;
  int lane = 0;
  // this pass
  int64_t c0 = 0;
  int width = 0;  // this lane's columns within y (0 .. N)
  bool first_pass = true, has_next = false, owns_result = false;
  int32_t y[N] = {};
  double ins[N] = {}, row[N] = {};
  double diag = 0.0, result = 0.0;

  // Lane `lane_in` of pair b, costs read from `table_in` (pairs.table or a copy).
  BEDL_HD void start(const SymbolSequencePairs<scalar_t>& pairs, const scalar_t* table_in, int64_t b, int lane_in) {
    table = table_in;
    rows = pairs.rows;
    cols = pairs.cols;
    x = pairs.x_labels + pairs.x_ptr[pairs.pair_x[b]];
    y_labels = pairs.y_labels + pairs.y_ptr[pairs.pair_y[b]];
    m = pairs.m(b);
    n = pairs.n(b);
    lane = lane_in;
  }

  BEDL_HD int64_t passes() const { return n == 0 ? 1 : (n + kWarpLanes * N - 1) / (kWarpLanes * N); }
  // The lane that ends with D[m][n] in the last pass.
  BEDL_HD int owner() const { return n == 0 ? 0 : static_cast<int>(((n - 1) % (kWarpLanes * N)) / N); }

  BEDL_HD void begin_pass(int64_t pass) {
    c0 = pass * kWarpLanes * N + lane * N;
    const int64_t rest = n - c0;
    width = rest <= 0 ? 0 : (rest >= N ? N : static_cast<int>(rest));
    first_pass = pass == 0;
    has_next = (pass + 1) * kWarpLanes * N < n;
    owns_result = !has_next && lane == owner();
    BEDL_UNROLL
    for (int k = 0; k < N; ++k) {
      if (k >= width) break;
      y[k] = static_cast<int32_t>(y_labels[c0 + k]);
      ins[k] = static_cast<double>(table[(rows - 1) * cols + y[k]]);
    }
  }

  // Step s of the pass: row s - lane (if it is one), with `left` from lane - 1;
  // returns what this lane sends on (its last column of that row). boundary:
  // the pair's m + 1 doubles, written by lane 31 for the next pass.
  BEDL_HD double lane_step(int64_t s, double recv, double* boundary) {
    const int64_t i = s - lane;
    if (i < 0 || i > m) return 0.0;  // (its receiver is idle at the next step too)
    double out;
    double left = recv;
    if (i == 0) {
      if (lane == 0) left = first_pass ? 0.0 : boundary[0];
      double sum = left;
      BEDL_UNROLL
      for (int k = 0; k < N; ++k) {
        if (k >= width) break;
        sum = sum + ins[k];
        row[k] = sum;
      }
      out = sum;
    } else {
      const scalar_t* x_row = table + x[i - 1] * cols;
      const double del = static_cast<double>(x_row[cols - 1]);
      if (lane == 0) left = first_pass ? diag + del : boundary[i];
      double d = diag, l = left;
      BEDL_UNROLL
      for (int k = 0; k < N; ++k) {
        if (k >= width) break;
        const double up = row[k];
        l = sed::sequence_value(d, static_cast<double>(x_row[y[k]]), up, del, l, ins[k]);
        d = up;
        row[k] = l;
      }
      out = l;
    }
    diag = left;
    if (lane == kWarpLanes - 1 && has_next) boundary[i] = out;
    if (i == m && owns_result) result = out;
    return out;
  }
};

// The warp kernel on the host (the tests): warp `warp` of `warps` runs its
// pairs with the 32 lanes in lockstep, step by step, each lane receiving what
// its left neighbour sent at the step before (a GPU's __shfl_up_sync).
// boundary: max_m + 1 doubles.
template <int N, typename scalar_t>
void sequence_warp_distances_host(const SymbolSequencePairs<scalar_t>& pairs, int64_t batch, int64_t warp,
                                  int64_t warps, double* boundary, scalar_t* d) {
  for (int64_t b = warp; b < batch; b += warps) {
    SequenceStrip<N, scalar_t> lanes[kWarpLanes];
    for (int t = 0; t < kWarpLanes; ++t) lanes[t].start(pairs, pairs.table, b, t);
    const int64_t m = lanes[0].m;
    for (int64_t pass = 0; pass < lanes[0].passes(); ++pass) {
      double sent[kWarpLanes] = {}, recv[kWarpLanes] = {};
      for (auto& lane : lanes) lane.begin_pass(pass);
      for (int64_t s = 0; s <= m + kWarpLanes - 1; ++s) {
        for (int t = 1; t < kWarpLanes; ++t) recv[t] = sent[t - 1];
        for (int t = 0; t < kWarpLanes; ++t) sent[t] = lanes[t].lane_step(s, recv[t], boundary);
      }
    }
    d[b] = static_cast<scalar_t>(lanes[lanes[0].owner()].result);
  }
}

// Carves a workspace into 16-byte aligned arrays.
struct Carver {
  char* at;
  template <typename T>
  BEDL_HD T* take(int64_t count) {
    T* out = reinterpret_cast<T*>(at);
    at += (count * static_cast<int64_t>(sizeof(T)) + 15) / 16 * 16;
    return out;
  }
  BEDL_HD static int64_t bytes(int64_t count, int64_t size) { return (count * size + 15) / 16 * 16; }
};

// The soft jobs' scratch ahead of their weights, for pairs up to (max_m, max_n):
// a pair's costs in the kernel layout, its reduced costs, the expected
// alignment's accumulator and the column minima (carve and bytes agree).
struct SoftScratch {
  double *cost, *reduced, *p_acc, *column_min;
  BEDL_HD static int64_t bytes(int64_t max_m, int64_t max_n) {
    const int64_t w = max_n + 1;
    return 3 * Carver::bytes((max_m + 1) * w, 8) + Carver::bytes(w, 8);
  }
  BEDL_HD static SoftScratch carve(Carver& c, int64_t max_m, int64_t max_n) {
    const int64_t w = max_n + 1, cells = (max_m + 1) * w;
    SoftScratch s;
    s.cost = c.take<double>(cells);
    s.reduced = c.take<double>(cells);
    s.p_acc = c.take<double>(cells);
    s.column_min = c.take<double>(w);
    return s;
  }
};

// One thread's buffers for the counting passes of pairs up to (max_m, max_n),
// carved from `bytes` (coopt_workspace_bytes of them, 16-byte aligned).
template <typename Count>
BEDL_HD sed::SequenceCounts<Count> coopt_buffers(char* bytes, int64_t max_m, int64_t max_n) {
  const int64_t w = max_n + 1, cells = (max_m + 1) * w;
  Carver c{bytes};
  sed::SequenceCounts<Count> buf;
  buf.in_del = c.take<Count>(cells);
  buf.in_other = c.take<Count>(cells);
  buf.out_any = c.take<Count>(2 * w);
  buf.out_ins = c.take<Count>(2 * w);
  buf.p_acc = c.take<double>(cells);
  buf.prev = c.take<double>(w);
  buf.cur = c.take<double>(w);
  buf.coopt = c.take<uint8_t>(cells);
  return buf;
}

template <typename Count>
BEDL_HD int64_t coopt_workspace_bytes(int64_t max_m, int64_t max_n) {
  const int64_t w = max_n + 1, cells = (max_m + 1) * w, count = sizeof(Count);
  return 2 * Carver::bytes(cells, count) + 2 * Carver::bytes(2 * w, count) + Carver::bytes(cells, 8) +
         2 * Carver::bytes(w, 8) + Carver::bytes(cells, 1);
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

// Whether the soft passes take a pair of `nodes` nodes whose largest absolute
// cost is max_abs at this temperature (the CPU's soft::check_soft_range).
template <typename scalar_t>
BEDL_HD bool soft_range_ok(double max_abs, double temperature, int64_t nodes) {
  const double k = static_cast<double>(nodes);
  const double step_bound = (2.0 * k + 2.0) * (4.0 * soft::kLog2e / 512.0) * (max_abs / temperature);
  return step_bound < 1.0e18 && 2.0 * k * (max_abs + temperature) <= largest_finite<scalar_t>();
}

// The bytes one thread needs for the soft passes of sequence pairs up to
// (max_m, max_n): costs, reduced costs, column minima, P, and the weight
// arrays in the wider weight type (the doubles' pass uses the same bytes).
BEDL_HD int64_t sequence_soft_workspace_bytes(int64_t max_m, int64_t max_n) {
  const int64_t w = max_n + 1, cells = (max_m + 1) * w, wide = sizeof(soft::WideWeight);
  return SoftScratch::bytes(max_m, max_n) + 3 * Carver::bytes(cells, wide) + 2 * Carver::bytes(2 * w, wide);
}

// The soft passes of one pair in weight type W on the thread's weight bytes.
template <typename W>
BEDL_HD bool sequence_soft_in(char* bytes, const double* reduced, int64_t m, int64_t n, double temperature,
                              bool need_grad, double* p_acc, double* log_total) {
  const int64_t w = n + 1, cells = (m + 1) * w;
  Carver c{bytes};
  soft::SedSoftArrays<W> a;
  a.weight = c.take<W>(cells);
  a.in_del = c.take<W>(cells);
  a.in_other = c.take<W>(cells);
  a.out_any = c.take<W>(2 * w);
  a.out_ins = c.take<W>(2 * w);
  a.p_acc = p_acc;
  return soft::sed_soft_pass(reduced, m, n, temperature, need_grad, a, log_total);
}

// Thread `thread` of `threads`: the soft distances (and with need_grad the
// expected alignments into p, zero on entry, the padded layout) of its padded
// pairs, weights as doubles unless they leave their range (as the CPU's
// sed_soft_solve); a status per pair.
template <typename scalar_t>
BEDL_HD void sequence_soft_thread(const PaddedSequencePairs<scalar_t>& pairs, int64_t batch, int64_t thread,
                                  int64_t threads, char* ws, int64_t max_m, int64_t max_n, double temperature,
                                  bool need_grad, scalar_t* d, scalar_t* p, int32_t* status) {
  Carver c{ws};
  const SoftScratch scratch = SoftScratch::carve(c, max_m, max_n);
  double *cost = scratch.cost, *reduced = scratch.reduced, *p_acc = scratch.p_acc;
  char* weights = c.at;
  for (int64_t b = thread; b < batch; b += threads) {
    const int64_t m = pairs.m(b), n = pairs.n(b);
    const auto costs = pairs.costs_of(b);
    const double scale = sed::sequence_cost_scale(costs, m, n);
    int32_t s = cost_status<scalar_t>(scale, m, n);
    if (s == kPairOk && !pairs.corner_finite(b)) s = kPairNotFinite;
    if (s == kPairOk && !soft_range_ok<scalar_t>(scale, temperature, m + n)) s = kPairSoftRange;
    status[b] = s;
    if (s != kPairOk) {
      d[b] = static_cast<scalar_t>(0.0);
      continue;
    }
    soft::kernel_layout_costs(costs, m, n, cost);
    const double shift = soft::reduce_costs(cost, m, n, reduced, scratch.column_min);
    double log_total = 0.0;
    if (m + n > soft::kFastNodes ||
        !sequence_soft_in<soft::PlainWeight>(weights, reduced, m, n, temperature, need_grad, p_acc, &log_total)) {
      // (cannot fail: the cheapest alignment's weight is a positive WideWeight)
      sequence_soft_in<soft::WideWeight>(weights, reduced, m, n, temperature, need_grad, p_acc, &log_total);
    }
    d[b] = static_cast<scalar_t>(shift - temperature * log_total);
    if (need_grad) soft::store_sequence_p(p_acc, m, n, p + b * pairs.rows * pairs.cols, pairs.cols);
  }
}

}  // namespace gpu
}  // namespace bedl
