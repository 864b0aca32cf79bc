// Sequence edit distance and its co-optimal alignment matrix on the CPU.
//
// Distance: the classic (m+1) x (n+1) table, two rows at a time.
// P: an inside pass that counts co-optimal alignments per cell (as doubles,
// dp::FastCount, and again with an exponent, dp::Count, where those overflow),
// with two counts per cell -- "entered by a deletion" (D) and "entered
// otherwise" (O) -- because an insertion may never directly follow a deletion:
// that makes alignments and DP paths one-to-one (a run of indels is always
// read as its insertions first). An outside pass then pushes completion counts
// back along the co-optimal edges; P[event] = inside * outside / total.
// Short pairs run the distances, or P's inside pass, four at a time on AVX2
// lanes (sed_lanes.h) with the same expressions per lane: the same bits.
#include "../edit_distance.h"
#include "dp_common.h"
#include "pair_sums.h"
#include "sed_lanes.h"

#include <vector>


namespace bedl {
namespace {

using dp::kDel;
using dp::kIns;
using dp::kMatch;

// Counts in one count type.
template <typename C>
struct SedCounts {
  std::vector<C> in_del, in_other;  // inside counts, (m+1)(n+1)
  std::vector<C> out_any, out_ins;  // outside counts, two rows each
};

struct SedWorkspace {
  std::vector<double> row_prev, row_cur, row_next;  // distance rows
  SedCounts<dp::FastCount> fast;            // counts as doubles: the usual case
  SedCounts<dp::Count> exact;               // counts with an exponent: where doubles overflow
  std::vector<uint8_t> coopt;               // co-optimal incoming edges per cell
  std::vector<double> p_acc;                // P accumulator, (m+1)(n+1)
  std::vector<double> cost;                 // a pair's costs gathered from a symbol table
  std::vector<double> ins_skew;             // insertion costs as the AVX2 strips read them
  sed::SedLanes lanes;                      // four pairs' inside passes at once (AVX2)
  dp::PairLabelSums label_sums;             // a pair's P by label pair (the symbol-table gradient's lists)
  std::vector<int64_t> label_col;           // y's label slots in label_sums
};

// One pair's inside counts and flags for the outside pass: cell (i, j) at
// (i * w + j) * stride of arrays of E (Count; doubles in the lanes, lane-offset).
template <typename Count, typename E>
struct InsideGrid {
  const E* in_del;
  const E* in_other;
  const uint8_t* coopt;
  int64_t w, stride;
  int64_t at(int64_t i, int64_t j) const { return (i * w + j) * stride; }
  Count other(int64_t i, int64_t j) const { return Count{in_other[at(i, j)]}; }
  Count total(int64_t i, int64_t j) const {
    const int64_t c = at(i, j);
    return Count{in_del[c]} + Count{in_other[c]};
  }
};

// Outside pass, two rows at a time: row i pushes into rows i and i - 1; P of
// the (m, n) pair into ws.p_acc, in the cost layout (row stride n + 1: rows
// < m nodes of x, row m insertions, column n deletions). A row visits only
// the columns that can hold outside counts: those the row below reached
// (and one to their left), then leftwards while insertions carry counts.
template <typename Count, typename E>
void sed_outside(const InsideGrid<Count, E>& g, int64_t m, int64_t n, const Count& all, SedCounts<Count>& cnt,
                 SedWorkspace& ws) {
  const int64_t w = n + 1;
  cnt.out_any.assign(2 * w, Count::zero());
  cnt.out_ins.assign(2 * w, Count::zero());
  ws.p_acc.assign((m + 1) * w, 0.0);
  double* acc = ws.p_acc.data();
  // Columns with outside counts in the row below (row m: its last cell, set below).
  int64_t lo_below = n + 1, hi_below = n;
  for (int64_t i = m; i >= 0; --i) {
    Count* any_cur = cnt.out_any.data() + (i & 1) * w;
    Count* ins_cur = cnt.out_ins.data() + (i & 1) * w;
    Count* any_up = cnt.out_any.data() + ((i + 1) & 1) * w;
    if (i == m) any_cur[n] = Count::one();
    int64_t lo = n + 1, hi = -1;
    for (int64_t j = hi_below; j >= 0; --j) {
      const Count out_d = any_cur[j];
      const Count out_o = any_cur[j] + ins_cur[j];
      if (out_o.is_zero()) {
        if (j < lo_below - 1) break;  // nothing from below here, and no insertion goes on
        continue;
      }
      lo = j;
      hi = std::max(hi, j);
      const uint8_t flags = g.coopt[g.at(i, j)];
      if (flags == 0) continue;
      if (flags & kDel) {  // delete x_{i-1}; the source may be in either state
        any_up[j] = any_up[j] + out_d;
        acc[(i - 1) * w + n] += dp::ratio(g.total(i - 1, j) * out_d, all);
      }
      if (flags & kIns) {  // insert y_{j-1}; only from a cell not entered by a deletion
        ins_cur[j - 1] = ins_cur[j - 1] + out_o;
        acc[m * w + j - 1] += dp::ratio(g.other(i, j - 1) * out_o, all);
      }
      if (flags & kMatch) {
        any_up[j - 1] = any_up[j - 1] + out_o;
        acc[(i - 1) * w + j - 1] += dp::ratio(g.total(i - 1, j - 1) * out_o, all);
      }
    }
    // Row i is done; row i - 2 reuses its storage, which holds counts only
    // where the row below pushed and where this row's insertions went.
    const int64_t clear_from = std::max<int64_t>(0, std::min(lo_below, lo) - 1);
    std::fill(any_cur + clear_from, any_cur + hi_below + 1, Count::zero());
    std::fill(ins_cur + clear_from, ins_cur + hi_below + 1, Count::zero());
    lo_below = lo;
    hi_below = hi;
  }
}

#ifdef BEDL_X86_SIMD

// Four consecutive costs as doubles.
__attribute__((target("avx2"))) inline __m256d load4(const double* p) { return _mm256_loadu_pd(p); }
__attribute__((target("avx2"))) inline __m256d load4(const float* p) {
  return _mm256_cvtps_pd(_mm_loadu_ps(p));
}

// The distance table four rows at a time with AVX2, one row per lane, lane r
// at column s - 2r in step s. A row by row sweep is bound by the latency of
// its chain (each cell waits for its left neighbour); here the four cells of
// a step are independent, and a lane reads the row above from its
// neighbour's results of two and three steps back, so moving them between
// lanes stays off the chain (on a skew of one column it was the chain).
// Every cell is computed by the same expressions in the same order as
// row by row, so the same bits. Advances `prev` (row 0 on entry) by the rows
// done, a multiple of four, which it returns; the caller finishes the rest.
template <typename scalar_t>
__attribute__((target("avx2"))) int64_t sed_strips_avx2(const scalar_t* c, int64_t m, int64_t n,
                                                        int64_t stride, SedWorkspace& ws,
                                                        double*& prev, double*& next) {
  constexpr int R = 4, K = 2;
  constexpr int64_t lag = K * (R - 1);  // the last lane's columns trail the first's by this
  if (n <= lag || m < R) return 0;
  const scalar_t* ins = c + m * stride;
  // ins_skew[4 s + r]: the insertion lane r adds in step s.
  ws.ins_skew.resize(4 * (n + 1));
  double* ins_skew = ws.ins_skew.data();
  for (int64_t s = lag + 1; s <= n; ++s) {
    for (int r = 0; r < R; ++r) ins_skew[4 * s + r] = static_cast<double>(ins[s - K * r - 1]);
  }
  auto cell = [](double diag, double rep, double up, double del, double left, double ins_j) {
    return dp::best_of(diag + rep, up + del, left + ins_j);
  };
  int64_t done = 0;
  for (; done + R <= m; done += R) {
    const scalar_t* row[R];
    double del[R], first[R];  // deletion costs; column 0 of each row
    double sum = prev[0];
    for (int r = 0; r < R; ++r) {
      row[r] = c + (done + r) * stride;
      del[r] = static_cast<double>(row[r][n]);
      sum = sum + del[r];
      first[r] = sum;
    }
    // Each lane's values of the last three steps; before a lane starts, its column 0.
    double v1[R], v2[R], v3[R];
    for (int r = 0; r < R; ++r) v1[r] = v2[r] = v3[r] = first[r];
    next[0] = first[R - 1];
    // The first and last `lag` steps, where some lanes are off the table, cell by cell.
    auto scalar_step = [&](int64_t s) {
      double v[R];
      for (int r = 0; r < R; ++r) {
        const int64_t j = s - K * r;
        if (j < 1 || j > n) {
          v[r] = v1[r];
          continue;
        }
        const double up = r == 0 ? prev[j] : v2[r - 1];
        const double diag = r == 0 ? prev[j - 1] : v3[r - 1];
        v[r] = cell(diag, static_cast<double>(row[r][j - 1]), up, del[r], v1[r],
                    static_cast<double>(ins[j - 1]));
        if (r == R - 1) next[j] = v[r];
      }
      for (int r = 0; r < R; ++r) {
        v3[r] = v2[r];
        v2[r] = v1[r];
        v1[r] = v[r];
      }
    };
    int64_t s = 1;
    for (; s <= lag; ++s) scalar_step(s);
    __m256d V1 = _mm256_loadu_pd(v1), V2 = _mm256_loadu_pd(v2), V3 = _mm256_loadu_pd(v3);
    const __m256d DEL = _mm256_loadu_pd(del);
    // One step: up (lane r - 1, two steps back; lane 0 reads the row above),
    // diagonal (three steps back), left (the lane's last value).
#define BEDL_SED_STEP(st, rep_expr)                                                              \
  do {                                                                                           \
    const __m256d rep = (rep_expr);                                                              \
    const __m256d up =                                                                           \
        _mm256_blend_pd(_mm256_permute4x64_pd(V2, 0x90), _mm256_broadcast_sd(prev + (st)), 1);   \
    const __m256d diag = _mm256_blend_pd(_mm256_permute4x64_pd(V3, 0x90),                        \
                                         _mm256_broadcast_sd(prev + (st) - 1), 1);               \
    const __m256d v = dp::best_of4(_mm256_add_pd(diag, rep), _mm256_add_pd(up, DEL),             \
                                   _mm256_add_pd(V1, _mm256_loadu_pd(ins_skew + 4 * (st))));      \
    _mm_storeh_pd(next + (st) - lag, _mm256_extractf128_pd(v, 1));                               \
    V3 = V2;                                                                                     \
    V2 = V1;                                                                                     \
    V1 = v;                                                                                      \
  } while (0)
    for (; s + 3 <= n; s += 4) {
      // Four columns of each row, transposed: step s + k gets column k.
      const __m256d a0 = load4(row[0] + s - 1), a1 = load4(row[1] + s - 3);
      const __m256d a2 = load4(row[2] + s - 5), a3 = load4(row[3] + s - 7);
      const __m256d t0 = _mm256_unpacklo_pd(a0, a1), t1 = _mm256_unpackhi_pd(a0, a1);
      const __m256d t2 = _mm256_unpacklo_pd(a2, a3), t3 = _mm256_unpackhi_pd(a2, a3);
      BEDL_SED_STEP(s, _mm256_permute2f128_pd(t0, t2, 0x20));
      BEDL_SED_STEP(s + 1, _mm256_permute2f128_pd(t1, t3, 0x20));
      BEDL_SED_STEP(s + 2, _mm256_permute2f128_pd(t0, t2, 0x31));
      BEDL_SED_STEP(s + 3, _mm256_permute2f128_pd(t1, t3, 0x31));
    }
    for (; s <= n; ++s) {
      BEDL_SED_STEP(s, _mm256_set_pd(static_cast<double>(row[3][s - 7]), static_cast<double>(row[2][s - 5]),
                                     static_cast<double>(row[1][s - 3]), static_cast<double>(row[0][s - 1])));
    }
#undef BEDL_SED_STEP
    _mm256_storeu_pd(v1, V1);
    _mm256_storeu_pd(v2, V2);
    _mm256_storeu_pd(v3, V3);
    for (; s <= n + lag; ++s) scalar_step(s);
    std::swap(prev, next);
  }
  return done;
}
#endif

template <typename scalar_t>
double sed_distance(const scalar_t* c, int64_t m, int64_t n, int64_t stride, SedWorkspace& ws) {
  ws.row_prev.resize(n + 1);
  ws.row_cur.resize(n + 1);
  ws.row_next.resize(n + 1);
  double* prev = ws.row_prev.data();
  double* cur = ws.row_cur.data();
  double* next = ws.row_next.data();
  const scalar_t* ins = c + m * stride;
  prev[0] = 0.0;
  for (int64_t j = 1; j <= n; ++j) prev[j] = prev[j - 1] + static_cast<double>(ins[j - 1]);
  // One cell of row `out` from the row above; the left neighbour stays in a
  // register: only the insertion waits on it.
  auto cell = [&](const double* above, const scalar_t* row, double del, double left, int64_t j) {
    return dp::best_of(above[j - 1] + static_cast<double>(row[j - 1]), above[j] + del,
                       left + static_cast<double>(ins[j - 1]));
  };
  int64_t i = 1;
#ifdef BEDL_X86_SIMD
  if (dp::simd_avx2()) i += sed_strips_avx2(c, m, n, stride, ws, prev, next);
#endif
  if (n >= 1) {
    // Two rows at once, the second one cell behind: two independent chains
    // for the processor to overlap. Same operations in the same order as row
    // by row, so the same bits.
    for (; i + 1 <= m; i += 2) {
      const scalar_t* row_a = c + (i - 1) * stride;
      const scalar_t* row_b = c + i * stride;
      const double del_a = static_cast<double>(row_a[n]), del_b = static_cast<double>(row_b[n]);
      double left_a = prev[0] + del_a;
      cur[0] = left_a;
      double left_b = left_a + del_b;
      next[0] = left_b;
      left_a = cell(prev, row_a, del_a, left_a, 1);
      cur[1] = left_a;
      for (int64_t j = 2; j <= n; ++j) {
        left_a = cell(prev, row_a, del_a, left_a, j);
        cur[j] = left_a;
        left_b = cell(cur, row_b, del_b, left_b, j - 1);
        next[j - 1] = left_b;
      }
      left_b = cell(cur, row_b, del_b, left_b, n);
      next[n] = left_b;
      std::swap(prev, next);
    }
  }
  for (; i <= m; ++i) {
    const scalar_t* row = c + (i - 1) * stride;
    const double del = static_cast<double>(row[n]);
    double left = prev[0] + del;
    cur[0] = left;
    for (int64_t j = 1; j <= n; ++j) {
      left = cell(prev, row, del, left, j);
      cur[j] = left;
    }
    std::swap(prev, cur);
  }
  return prev[n];
}

// The distance (in *distance) and P (in ws.p_acc, the cost layout with row
// stride n + 1) with counts of type Count; false (P incomplete) if the total
// count is not representable in that type.
template <typename Count, typename scalar_t>
bool sed_counted(const scalar_t* c, int64_t m, int64_t n, int64_t stride, const dp::Tie& tie,
                 SedCounts<Count>& cnt, SedWorkspace& ws, double* distance) {
  const int64_t w = n + 1;
  const int64_t cells = (m + 1) * w;
  cnt.in_del.assign(cells, Count::zero());
  cnt.in_other.assign(cells, Count::zero());
  ws.coopt.assign(cells, 0);
  ws.row_prev.resize(w);
  ws.row_cur.resize(w);
  Count* in_del = cnt.in_del.data();
  Count* in_other = cnt.in_other.data();
  uint8_t* coopt = ws.coopt.data();
  const scalar_t* ins = c + m * stride;
  auto total = [&](int64_t cell) { return in_del[cell] + in_other[cell]; };

  // Inside pass.
  double* prev = ws.row_prev.data();
  double* cur = ws.row_cur.data();
  prev[0] = 0.0;
  in_other[0] = Count::one();
  for (int64_t j = 1; j <= n; ++j) {
    prev[j] = prev[j - 1] + static_cast<double>(ins[j - 1]);
    in_other[j] = Count::one();
    coopt[j] = kIns;
  }
  for (int64_t i = 1; i <= m; ++i) {
    const scalar_t* row = c + (i - 1) * stride;
    const double del = static_cast<double>(row[n]);
    const int64_t base = i * w;
    double left = prev[0] + del;
    cur[0] = left;
    in_del[base] = Count::one();
    coopt[base] = kDel;
    // The left neighbour's value and count stay in registers: the chain
    // from cell to cell does not go through memory.
    Count left_other = Count::zero();
    for (int64_t j = 1; j <= n; ++j) {
      const double rep = prev[j - 1] + static_cast<double>(row[j - 1]);
      const double d = prev[j] + del;
      const double in = left + static_cast<double>(ins[j - 1]);
      const double best = dp::best_of(rep, d, in);  // only `in` waits on the previous cell
      cur[j] = best;
      left = best;
      const int64_t cell = base + j;
      const uint8_t flags = tie.flags(d, in, rep, best);
      Count by_del, other;
      dp::count_entries(flags, total(cell - w), left_other, [&] { return total(cell - w - 1); }, by_del,
                        other);
      in_del[cell] = by_del;
      in_other[cell] = other;
      left_other = other;
      coopt[cell] = flags;
    }
    std::swap(prev, cur);
  }
  *distance = prev[n];
  const Count all = total(cells - 1);
  if (!all.usable_total()) return false;

  sed_outside(InsideGrid<Count, Count>{in_del, in_other, coopt, w, 1}, m, n, all, cnt, ws);
  return true;
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
  sed::SedLanes& lanes = ws.lanes;
  lanes.begin(count, ms, ns);
  for (int l = 0; l < count; ++l) load_lane(l);
  sed::sed_inside_lanes_avx2(lanes, rel_tol);
  for (int l = 0; l < count; ++l) {
    const dp::FastCount all{lanes.total[l]};
    double distance = lanes.distance[l];
    if (all.usable_total()) {
      const InsideGrid<dp::FastCount, double> grid{lanes.in_del.data() + l, lanes.in_other.data() + l,
                                                   lanes.coopt.data() + l, lanes.N + 1, sed::kLanes};
      sed_outside(grid, lanes.m[l], lanes.n[l], all, ws.fast, ws);
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
  sed::sed_distance_lanes_avx2(ws.lanes);
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
  const int64_t groups = (batch + sed::kLanes - 1) / sed::kLanes;
  dp::for_each_pair<SedWorkspace>(groups, sed::kLanes * cells_per_pair, [&](int64_t g, SedWorkspace& ws) {
    const int64_t b0 = g * sed::kLanes;
    group(b0, static_cast<int>(std::min<int64_t>(sed::kLanes, batch - b0)), ws);
  });
}

// A pair's costs gathered from a (S, S) symbol table into ws.cost, in the
// padded layout with row stride n + 1; with kScale returns the tie scale
// (largest absolute cost over the entries the layout uses), which only P needs.
template <bool kScale, typename scalar_t>
double fill_symbols(const scalar_t* table, int64_t S, const int64_t* x, int64_t m,
                    const int64_t* y, int64_t n, SedWorkspace& ws) {
  const int64_t w = n + 1, gap = S - 1;
  ws.cost.resize((m + 1) * w);
  double* cost = ws.cost.data();
  double scale = 0.0;
  for (int64_t i = 0; i <= m; ++i) {
    const scalar_t* row = table + (i < m ? x[i] : gap) * S;
    double* out = cost + i * w;
    for (int64_t j = 0; j < n; ++j) out[j] = static_cast<double>(row[y[j]]);
    if (i < m) out[n] = static_cast<double>(row[gap]);
    if (kScale) {
      for (int64_t j = 0; j < (i < m ? n + 1 : n); ++j) scale = std::max(scale, std::fabs(out[j]));
    }
  }
  return scale;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> sed_cpu(const at::Tensor& costs_in, const at::Tensor& x_len,
                                           const at::Tensor& y_len, bool need_coopt,
                                           double rel_tol) {
  dp::check_costs(costs_in);
  const int64_t batch = costs_in.size(0);
  dp::check_index(x_len, "x_len", batch);
  dp::check_index(y_len, "y_len", batch);
  dp::check_rel_tol(rel_tol);
  const at::Tensor costs = costs_in.contiguous();
  const at::Tensor xl = x_len.contiguous();
  const at::Tensor yl = y_len.contiguous();
  const int64_t rows = costs.size(1), cols = costs.size(2);
  const int64_t* xl_p = xl.data_ptr<int64_t>();
  const int64_t* yl_p = yl.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    BEDL_CHECK_VALUE(xl_p[b] >= 0 && xl_p[b] + 1 <= rows, "x_len[", b, "] = ", xl_p[b],
                " does not fit costs of shape ", costs.sizes());
    BEDL_CHECK_VALUE(yl_p[b] >= 0 && yl_p[b] + 1 <= cols, "y_len[", b, "] = ", yl_p[b],
                " does not fit costs of shape ", costs.sizes());
  }
  at::Tensor dist = at::empty({batch}, costs.options());
  at::Tensor coopt = need_coopt ? at::zeros_like(costs) : at::empty({0}, costs.options());
  AT_DISPATCH_FLOATING_TYPES(costs.scalar_type(), "sed_cpu", [&] {
    const scalar_t* c = costs.data_ptr<scalar_t>();
    scalar_t* d = dist.data_ptr<scalar_t>();
    scalar_t* p = need_coopt ? coopt.data_ptr<scalar_t>() : nullptr;
    const std::vector<double> scales = dp::cost_scales(
        c, batch, rows, cols, [&](int64_t b) { return std::make_pair(xl_p[b], yl_p[b]); });
    auto pair = [&](int64_t b, SedWorkspace& ws) {
      const scalar_t* cb = c + b * rows * cols;
      const int64_t m = xl_p[b], n = yl_p[b];
      d[b] = static_cast<scalar_t>(
          need_coopt ? sed_coopt(cb, m, n, cols, dp::Tie{rel_tol, scales[b]}, p + b * rows * cols, cols, ws)
                     : sed_distance(cb, m, n, cols, ws));
    };
    auto group = [&](int64_t b0, int count, SedWorkspace& ws) {
      if (!sed::lanes_pay(count, xl_p + b0, yl_p + b0)) {
        for (int l = 0; l < count; ++l) pair(b0 + l, ws);
        return;
      }
      if (!need_coopt) {
        sed_distance_lanes(count, xl_p + b0, yl_p + b0, ws,
                           [&](int l) { ws.lanes.load(l, c + (b0 + l) * rows * cols, cols, 0.0); },
                           [&](int l, double distance) { d[b0 + l] = static_cast<scalar_t>(distance); });
        return;
      }
      sed_coopt_lanes(
          count, xl_p + b0, yl_p + b0, rel_tol, ws,
          [&](int l) { ws.lanes.load(l, c + (b0 + l) * rows * cols, cols, scales[b0 + l]); },
          [&](int l) {
            const int64_t b = b0 + l;
            return sed_solve_coopt(c + b * rows * cols, xl_p[b], yl_p[b], cols, dp::Tie{rel_tol, scales[b]}, ws);
          },
          [&](int l, double distance) {
            const int64_t b = b0 + l;
            d[b] = static_cast<scalar_t>(distance);
            write_p(ws, xl_p[b], yl_p[b], p + b * rows * cols, cols);
          });
    };
    for_each_pair_or_group(batch, rows * cols, dp::simd_avx2(), pair, group);
  });
  return {dist, coopt};
}

namespace {

// A pair of a symbol-table call: its sequences' labels and lengths.
struct SymbolPair {
  const int64_t *x, *y;
  int64_t m, n;
};

// The checked inputs of the symbol-table sequence kernels and the batch's extent.
struct SymbolSequences : dp::BatchExtent {
  dp::SymbolInputs in;
  const int64_t *x_labels, *y_labels, *x_ptr, *y_ptr, *pair_x, *pair_y;

  SymbolSequences(const at::Tensor& symbol_costs, const at::Tensor& x_labels_in, const at::Tensor& x_ptr_in,
                  const at::Tensor& y_labels_in, const at::Tensor& y_ptr_in, const at::Tensor& pair_x_in,
                  const at::Tensor& pair_y_in, double rel_tol)
      : in(dp::check_symbol_inputs(symbol_costs, x_labels_in, x_ptr_in, y_labels_in, y_ptr_in, pair_x_in,
                                   pair_y_in, rel_tol)),
        x_labels(in.x_labels.data_ptr<int64_t>()),
        y_labels(in.y_labels.data_ptr<int64_t>()),
        x_ptr(in.x_ptr.data_ptr<int64_t>()),
        y_ptr(in.y_ptr.data_ptr<int64_t>()),
        pair_x(in.pair_x.data_ptr<int64_t>()),
        pair_y(in.pair_y.data_ptr<int64_t>()) {
    const int64_t nx = dp::check_ptr(in.x_ptr, "x_ptr", in.x_labels.size(0), "labels");
    const int64_t ny = dp::check_ptr(in.y_ptr, "y_ptr", in.y_labels.size(0), "labels");
    dp::check_pair_indices(pair_x, pair_y, in.batch, nx, ny, "sequence");
    for (int64_t b = 0; b < in.batch; ++b) {
      const SymbolPair sp = pair(b);
      add(b, sp.m, sp.n);
    }
  }
  SymbolPair pair(int64_t b) const {
    const int64_t px = pair_x[b], py = pair_y[b];
    return {x_labels + x_ptr[px], y_labels + y_ptr[py], x_ptr[px + 1] - x_ptr[px], y_ptr[py + 1] - y_ptr[py]};
  }
};

// Up to four pairs of a symbol-table call, for the lanes: their extents and labels.
struct SymbolGroup {
  int64_t m[sed::kLanes] = {}, n[sed::kLanes] = {};
  const int64_t* x[sed::kLanes] = {};
  const int64_t* y[sed::kLanes] = {};

  SymbolGroup(const SymbolSequences& ss, const int64_t* pairs, int count) {
    for (int l = 0; l < count; ++l) {
      const SymbolPair sp = ss.pair(pairs[l]);
      x[l] = sp.x;
      y[l] = sp.y;
      m[l] = sp.m;
      n[l] = sp.n;
    }
  }
  // Lane l's pair into the lanes' costs (kScale: and its tie scale).
  template <bool kScale, typename scalar_t>
  void gather(const scalar_t* table, int64_t S, int l, SedWorkspace& ws) const {
    ws.lanes.gather<kScale>(l, table, S, x[l], y[l]);
  }
  // Lane l's pair gathered into ws.cost (row stride n + 1); returns its tie scale.
  template <typename scalar_t>
  double fill(const scalar_t* table, int64_t S, int l, SedWorkspace& ws) const {
    return fill_symbols<true>(table, S, x[l], m[l], y[l], n[l], ws);
  }
};

}  // namespace

namespace {

// The pairs `order` of ss: their distances into d and, with need_coopt,
// their P, left in ws.p_acc for on_p(b, pair, ws). The lanes take four
// pairs of `order` at a time.
template <typename scalar_t, class OnP>
void run_symbol_sequences(const SymbolSequences& ss, const std::vector<int64_t>& order, double rel_tol,
                          bool need_coopt, scalar_t* d, const OnP& on_p) {
  const int64_t S = ss.in.symbols;
  const scalar_t* t = ss.in.table.data_ptr<scalar_t>();
  auto pair = [&](int64_t k, SedWorkspace& ws) {
    const int64_t b = order[k];
    const SymbolPair sp = ss.pair(b);
    const int64_t m = sp.m, n = sp.n;
    const double scale = need_coopt ? fill_symbols<true>(t, S, sp.x, m, sp.y, n, ws)
                                    : fill_symbols<false>(t, S, sp.x, m, sp.y, n, ws);
    const double* cb = ws.cost.data();
    if (!need_coopt) {
      d[b] = static_cast<scalar_t>(sed_distance(cb, m, n, n + 1, ws));
      return;
    }
    d[b] = static_cast<scalar_t>(sed_solve_coopt(cb, m, n, n + 1, dp::Tie{rel_tol, scale}, ws));
    on_p(b, sp, ws);
  };
  auto group = [&](int64_t k0, int count, SedWorkspace& ws) {
    const int64_t* pairs = order.data() + k0;
    const SymbolGroup grp(ss, pairs, count);
    if (!sed::lanes_pay(count, grp.m, grp.n)) {
      for (int l = 0; l < count; ++l) pair(k0 + l, ws);
      return;
    }
    if (!need_coopt) {
      sed_distance_lanes(count, grp.m, grp.n, ws, [&](int l) { grp.gather<false>(t, S, l, ws); },
                         [&](int l, double distance) { d[pairs[l]] = static_cast<scalar_t>(distance); });
      return;
    }
    sed_coopt_lanes(
        count, grp.m, grp.n, rel_tol, ws, [&](int l) { grp.gather<true>(t, S, l, ws); },
        [&](int l) {
          const double scale = grp.fill(t, S, l, ws);
          return sed_solve_coopt(ws.cost.data(), grp.m[l], grp.n[l], grp.n[l] + 1, dp::Tie{rel_tol, scale}, ws);
        },
        [&](int l, double distance) {
          d[pairs[l]] = static_cast<scalar_t>(distance);
          on_p(pairs[l], ss.pair(pairs[l]), ws);
        });
  };
  for_each_pair_or_group(static_cast<int64_t>(order.size()), ss.rows * ss.cols, dp::simd_avx2(), pair, group);
}

// Pair b's P (ws.p_acc: row i < m is x[i], row m insertions; column n
// deletions) by label pair into out, cell by cell.
inline void list_sequence_pair(const SymbolSequences& ss, const dp::PairLabels& labels, int64_t b,
                               const SymbolPair& sp, SedWorkspace& ws, dp::PairSumsOut& out) {
  const int64_t tx = ss.pair_x[b], ty = ss.pair_y[b];
  const int64_t* x_slot = labels.x.slot.data() + ss.x_ptr[tx];
  const int64_t* y_slot = labels.y.slot.data() + ss.y_ptr[ty];
  const int64_t m = sp.m, n = sp.n, w = n + 1;
  double* acc = ws.p_acc.data();
  dp::PairLabelSums& sums = ws.label_sums;
  sums.start(ss.in.symbols, labels.x, tx, labels.y, ty);
  std::vector<int64_t>& col = ws.label_col;
  col.assign(y_slot, y_slot + n);
  col.push_back(sums.gap_col());
  double* sum = sums.sums();
  for (int64_t i = 0; i < m; ++i) dp::take_p_row(sum + sums.x_row(x_slot[i]), col.data(), acc + i * w, w);
  dp::take_p_row(sum + sums.gap_row(), col.data(), acc + m * w, n);  // (no gap against gap)
  out.take(b, sums);
}

std::vector<int64_t> list_bounds(const SymbolSequences& ss, const dp::PairLabels& labels) {
  return labels.list_bounds(ss.in, [&](int64_t b) {
    const SymbolPair sp = ss.pair(b);
    return std::make_pair(sp.m, sp.n);
  });
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> sed_symbols_cpu(const at::Tensor& symbol_costs_in,
                                                   const at::Tensor& x_labels,
                                                   const at::Tensor& x_ptr,
                                                   const at::Tensor& y_labels,
                                                   const at::Tensor& y_ptr,
                                                   const at::Tensor& pair_x,
                                                   const at::Tensor& pair_y, bool need_coopt,
                                                   double rel_tol) {
  const SymbolSequences ss(symbol_costs_in, x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y, rel_tol);
  const dp::SymbolInputs& in = ss.in;
  const int64_t batch = in.batch, rows = ss.rows, cols = ss.cols;
  const at::Tensor& table = in.table;
  at::Tensor dist = at::empty({batch}, table.options());
  at::Tensor coopt = need_coopt ? at::zeros({batch, rows, cols}, table.options())
                                : at::empty({0}, table.options());
  AT_DISPATCH_FLOATING_TYPES(table.scalar_type(), "sed_symbols_cpu", [&] {
    ss.check_overflow<scalar_t>(in.max_abs);
    scalar_t* p = need_coopt ? coopt.data_ptr<scalar_t>() : nullptr;
    run_symbol_sequences(ss, dp::all_pairs(batch), rel_tol, need_coopt, dist.data_ptr<scalar_t>(),
                         [&](int64_t b, const SymbolPair& sp, SedWorkspace& ws) {
                           write_p(ws, sp.m, sp.n, p + b * rows * cols, cols);
                         });
  });
  return {dist, coopt};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> sed_symbols_sums_cpu(
    const at::Tensor& symbol_costs_in, const at::Tensor& x_labels, const at::Tensor& x_ptr,
    const at::Tensor& y_labels, const at::Tensor& y_ptr, const at::Tensor& pair_x, const at::Tensor& pair_y,
    double rel_tol, int64_t max_entries) {
  const SymbolSequences ss(symbol_costs_in, x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y, rel_tol);
  const dp::SymbolInputs& in = ss.in;
  const std::vector<int64_t> order = dp::all_pairs(in.batch);
  const dp::PairLabels labels(in);
  dp::PairSumsOut out;
  const bool with_sums = out.plan(order, list_bounds(ss, labels), max_entries);
  at::Tensor dist = at::empty({in.batch}, in.table.options());
  AT_DISPATCH_FLOATING_TYPES(in.table.scalar_type(), "sed_symbols_sums_cpu", [&] {
    ss.check_overflow<scalar_t>(in.max_abs);
    run_symbol_sequences(ss, order, rel_tol, with_sums, dist.data_ptr<scalar_t>(),
                         [&](int64_t b, const SymbolPair& sp, SedWorkspace& ws) {
                           list_sequence_pair(ss, labels, b, sp, ws, out);
                         });
  });
  return out.with_distances(dist, with_sums);
}

at::Tensor sed_symbols_grad_cpu(const at::Tensor& symbol_costs_in, const at::Tensor& x_labels,
                                const at::Tensor& x_ptr, const at::Tensor& y_labels, const at::Tensor& y_ptr,
                                const at::Tensor& pair_x, const at::Tensor& pair_y,
                                const at::Tensor& pair_weights, double rel_tol) {
  const SymbolSequences ss(symbol_costs_in, x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y, rel_tol);
  const dp::SymbolInputs& in = ss.in;
  const at::Tensor weights = dp::check_pair_weights(pair_weights, in.table, in.batch);
  at::Tensor grad;
  AT_DISPATCH_FLOATING_TYPES(in.table.scalar_type(), "sed_symbols_grad_cpu", [&] {
    ss.check_overflow<scalar_t>(in.max_abs);
    std::vector<scalar_t> unused(in.batch);  // (the distances)
    const dp::PairLabels labels(in);
    grad = dp::weighted_lists_grad<scalar_t>(
        in.symbols, list_bounds(ss, labels), weights.data_ptr<scalar_t>(), in.table.options(),
        [&](const std::vector<int64_t>& order, dp::PairSumsOut& out) {
          run_symbol_sequences(ss, order, rel_tol, true, unused.data(),
                               [&](int64_t b, const SymbolPair& sp, SedWorkspace& ws) {
                                 list_sequence_pair(ss, labels, b, sp, ws, out);
                               });
        });
  });
  return grad;
}

}  // namespace bedl
