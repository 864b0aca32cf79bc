// The sequence kernel's co-optimal matrix on the CPU. An inside pass counts
// co-optimal alignments per cell (as doubles, dp::FastCount, and again with an
// exponent, dp::Count, where those overflow) in two states -- entered by a
// deletion, entered otherwise -- because an insertion may never directly
// follow a deletion: that makes alignments and DP paths one-to-one (a run of
// indels is always read as its insertions first). The outside sweep
// (outside.h) then pushes completion counts back along the co-optimal edges;
// P[event] = inside * outside / total. Short pairs run the inside pass four at
// a time on AVX2 lanes (lanes.h) with the same expressions per lane: the same
// bits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "../../common/sequence_passes.h"
#include "../check.h"
#include "outside.h"
#include "workspace.h"

namespace bedl {
namespace sed {

// The distance (in *distance) and P (in ws.p_acc, the cost layout with row
// stride n + 1) with counts of type Count (common/sequence_passes.h); false (P
// incomplete) if the total count is not representable in that type.
template <typename Count, typename scalar_t>
bool sed_counted(const scalar_t* c, int64_t m, int64_t n, int64_t stride, const dp::Tie& tie,
                 SedCounts<Count>& cnt, SedWorkspace& ws, double* distance) {
  const int64_t w = n + 1;
  const int64_t cells = (m + 1) * w;
  cnt.in_del.resize(cells);
  cnt.in_other.resize(cells);
  cnt.out_any.resize(2 * w);
  cnt.out_ins.resize(2 * w);
  ws.coopt.resize(cells);
  ws.row_prev.resize(w);
  ws.row_cur.resize(w);
  ws.p_acc.resize(cells);
  const SequenceCounts<Count> buf{cnt.in_del.data(), cnt.in_other.data(), ws.coopt.data(),  ws.row_prev.data(),
                                ws.row_cur.data(), cnt.out_any.data(),  cnt.out_ins.data(), ws.p_acc.data()};
  return sequence_counted(PaddedCostRows<scalar_t>{c, stride, m, n}, m, n, tie, buf, distance);
}

// The distance, and P in ws.p_acc (row stride n + 1): counts as doubles unless
// they overflow (massive ties in long sequences).
template <typename scalar_t>
double sed_solve_coopt(const scalar_t* c, int64_t m, int64_t n, int64_t stride, const dp::Tie& tie,
                       SedWorkspace& ws) {
  double distance;
  if (!sed_counted(c, m, n, stride, tie, ws.fast, ws, &distance)) {
    // Counts with exponents do not overflow, so none means that the tie test
    // kept no alignment (as for trees: ted_solve).
    const bool counted = sed_counted(c, m, n, stride, tie, ws.exact, ws, &distance);
    BEDL_CHECK_VALUE(counted, "sequences of ", m, " and ", n, " symbols: no co-optimal alignment survives the tie test at rel_tol=",
                     tie.rel_tol, " (rounding in sums of these costs tells equal-cost orders of edits apart); "
                     "use a larger rel_tol, e.g. the default (1e-9 for float64, 1e-5 for float32)");
  }
  return distance;
}

// Up to four pairs' distances and P through the AVX2 lanes: lane l < count
// holds the pair of extent (ms[l], ns[l]) whose costs load_lane(l) puts into
// ws.lanes. Lane by lane in order, pair_done(l, distance) then finds that
// pair's P in ws.p_acc. A pair whose counts overflow doubles is solved again
// by solve_scalar(l), which returns its distance (and leaves P in ws.p_acc).
template <typename LoadLane, typename SolveScalar, typename PairDone>
void sed_coopt_lanes(int count, const int64_t* ms, const int64_t* ns, double rel_tol, SedWorkspace& ws,
                     const LoadLane& load_lane, const SolveScalar& solve_scalar, const PairDone& pair_done) {
  SedLanes& lanes = ws.lanes;
  lanes.begin(count, ms, ns);
  for (int l = 0; l < count; ++l) load_lane(l);
  sed_inside_lanes_avx2(lanes, rel_tol);
  for (int l = 0; l < count; ++l) {
    const dp::FastCount all{lanes.total[l]};
    double distance = lanes.distance[l];
    if (all.usable_total()) {
      const InsideGrid<dp::FastCount, double> grid{lanes.in_del.data() + l, lanes.in_other.data() + l,
                                                   lanes.coopt.data() + l, lanes.N + 1, kLanes};
      count_outside(grid, lanes.m[l], lanes.n[l], all, ws.fast, ws.p_acc);
    } else {
      distance = solve_scalar(l);
    }
    pair_done(l, distance);
  }
}

// Up to four pairs' distances through the AVX2 lanes: lane l < count holds
// the pair of extent (ms[l], ns[l]) whose costs load_lane(l) puts into
// ws.lanes; pair_done(l, distance) for each.
template <typename LoadLane, typename PairDone>
void sed_distance_lanes(int count, const int64_t* ms, const int64_t* ns, SedWorkspace& ws,
                        const LoadLane& load_lane, const PairDone& pair_done) {
  ws.lanes.begin(count, ms, ns);
  for (int l = 0; l < count; ++l) load_lane(l);
  sed_distance_lanes_avx2(ws.lanes);
  for (int l = 0; l < count; ++l) pair_done(l, ws.lanes.distance[l]);
}

// P of an (m, n) pair from ws.p_acc into p (row stride p_stride).
template <typename out_t>
void write_p(const SedWorkspace& ws, int64_t m, int64_t n, out_t* p, int64_t p_stride) {
  const int64_t w = n + 1;
  const double* acc = ws.p_acc.data();
  for (int64_t i = 0; i <= m; ++i) {
    for (int64_t j = 0; j <= n; ++j) {
      if (i == m && j == n) continue;
      p[i * p_stride + j] = static_cast<out_t>(acc[i * w + j]);
    }
  }
}

template <typename scalar_t, typename out_t>
double sed_coopt(const scalar_t* c, int64_t m, int64_t n, int64_t stride, const dp::Tie& tie,
                 out_t* p, int64_t p_stride, SedWorkspace& ws) {
  const double distance = sed_solve_coopt(c, m, n, stride, tie, ws);
  write_p(ws, m, n, p, p_stride);
  return distance;
}

// Runs pair(b, ws) for b in [0, batch), and with the AVX2 lanes on, group(b0,
// count, ws) for groups of up to four consecutive pairs instead.
template <typename Pair, typename Group>
void for_each_pair_or_group(int64_t batch, int64_t cells_per_pair, bool lanes, const Pair& pair,
                            const Group& group) {
  if (!lanes) {
    dp::for_each_pair<SedWorkspace>(batch, cells_per_pair, pair);
    return;
  }
  const int64_t groups = (batch + kLanes - 1) / kLanes;
  dp::for_each_pair<SedWorkspace>(groups, kLanes * cells_per_pair, [&](int64_t g, SedWorkspace& ws) {
    const int64_t b0 = g * kLanes;
    group(b0, static_cast<int>(std::min<int64_t>(kLanes, batch - b0)), ws);
  });
}

// A pair's costs gathered from a (rows, cols) symbol table (gap last in both
// directions) into ws.cost, in the padded layout with row stride n + 1; with
// kScale returns the tie scale (largest absolute cost over the entries the
// layout uses), which only P needs.
template <bool kScale, typename scalar_t>
double fill_symbols(const scalar_t* table, int64_t rows, int64_t cols, const int64_t* x, int64_t m,
                    const int64_t* y, int64_t n, SedWorkspace& ws) {
  const int64_t w = n + 1, gap = cols - 1;
  ws.cost.resize((m + 1) * w);
  double* cost = ws.cost.data();
  double scale = 0.0;
  for (int64_t i = 0; i <= m; ++i) {
    const scalar_t* row = table + (i < m ? x[i] : rows - 1) * cols;
    double* out = cost + i * w;
    for (int64_t j = 0; j < n; ++j) out[j] = static_cast<double>(row[y[j]]);
    if (i < m) out[n] = static_cast<double>(row[gap]);
    if (kScale) {
      for (int64_t j = 0; j < (i < m ? n + 1 : n); ++j) scale = std::max(scale, std::fabs(out[j]));
    }
  }
  return scale;
}

}  // namespace sed
}  // namespace bedl
