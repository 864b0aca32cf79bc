// The inside pass of P for sequences, four pairs at a time in the lanes of
// AVX2 vectors (see sed_lanes_avx2.cpp). The scalar pass spends most of its
// time in tie tests and count selects per cell; here a step does four cells.
#pragma once

#include "../avx2.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace bedl {
namespace sed {

constexpr int kLanes = 4;

// Four pairs on the grid of their largest m and n, pair l in lane l: a lane's
// cells (i <= m_l, j <= n_l) read only cells above and left of them, so the
// padding never reaches them. Arrays are lane-interleaved: entry k
// of lane l at k * kLanes + l.
struct SedLanes {
  int64_t m[kLanes] = {}, n[kLanes] = {};
  double scale[kLanes] = {};  // each pair's tie scale
  int64_t M = 0, N = 0;
  std::vector<double> rep, del, ins;        // costs: rep (M x N), del (M), ins (N)
  std::vector<double> dist, tot;            // two rows each of distances and total counts
  std::vector<double> in_del, in_other;     // inside counts of the (M + 1) x (N + 1) grid
  std::vector<uint8_t> coopt;               // co-optimal incoming edges, same grid
  double distance[kLanes] = {}, total[kLanes] = {};

  // Sizes the grid for `count` pairs of extents ms, ns (lanes past them:
  // empty pairs). Padding keeps whatever finite costs it held: no cell of a
  // pair reads it.
  void begin(int count, const int64_t* ms, const int64_t* ns) {
    M = N = 0;
    for (int l = 0; l < kLanes; ++l) {
      m[l] = l < count ? ms[l] : 0;
      n[l] = l < count ? ns[l] : 0;
      M = std::max(M, m[l]);
      N = std::max(N, n[l]);
    }
    rep.resize(M * N * kLanes);
    del.resize(M * kLanes);
    ins.resize(N * kLanes);
  }
  // Lane l's costs from sed's padded layout (rows < m: replacements, column n:
  // deletions, row m: insertions; row stride `stride`).
  template <typename scalar_t>
  void load(int l, const scalar_t* c, int64_t stride, double tie_scale) {
    scale[l] = tie_scale;
    for (int64_t i = 0; i < m[l]; ++i) {
      for (int64_t j = 0; j < n[l]; ++j) rep[(i * N + j) * kLanes + l] = static_cast<double>(c[i * stride + j]);
      del[i * kLanes + l] = static_cast<double>(c[i * stride + n[l]]);
    }
    for (int64_t j = 0; j < n[l]; ++j) ins[j * kLanes + l] = static_cast<double>(c[m[l] * stride + j]);
  }
  // Lane l's costs gathered from a (rows, cols) symbol table (gap last in both
  // directions) for labels x (m[l]) and y (n[l]); with kScale also its tie
  // scale, the largest absolute cost among them (what sed's fill_symbols computes).
  template <bool kScale, typename scalar_t>
  void gather(int l, const scalar_t* table, int64_t rows, int64_t cols, const int64_t* x, const int64_t* y) {
    const int64_t gap = cols - 1;
    double s = 0.0;
    for (int64_t i = 0; i < m[l]; ++i) {
      const scalar_t* row = table + x[i] * cols;
      double* out = rep.data() + i * N * kLanes + l;
      for (int64_t j = 0; j < n[l]; ++j) {
        out[j * kLanes] = static_cast<double>(row[y[j]]);
        if (kScale) s = std::max(s, std::fabs(out[j * kLanes]));
      }
      del[i * kLanes + l] = static_cast<double>(row[gap]);
      if (kScale) s = std::max(s, std::fabs(del[i * kLanes + l]));
    }
    const scalar_t* row = table + (rows - 1) * cols;
    for (int64_t j = 0; j < n[l]; ++j) {
      ins[j * kLanes + l] = static_cast<double>(row[y[j]]);
      if (kScale) s = std::max(s, std::fabs(ins[j * kLanes + l]));
    }
    scale[l] = s;
  }
};

// Whether the lanes pay for `count` pairs of extents ms, ns: their grid is
// small enough to stay in cache (long pairs run faster one at a time on the
// distance kernel's row strips, and pad nothing), and at least half of the
// lanes' cells are some pair's.
constexpr int64_t kLanesMaxCells = int64_t{1} << 13;
inline bool lanes_pay(int count, const int64_t* ms, const int64_t* ns) {
  int64_t M = 0, N = 0, cells = 0;
  for (int l = 0; l < count; ++l) {
    M = std::max(M, ms[l]);
    N = std::max(N, ns[l]);
    cells += (ms[l] + 1) * (ns[l] + 1);
  }
  const int64_t grid = (M + 1) * (N + 1);
  return grid <= kLanesMaxCells && 2 * cells >= kLanes * grid;
}

// The inside pass of sed's counting (distances, co-optimal flags, counts as
// doubles) on all four lanes, each lane with the scalar pass's expressions in
// the same order: the same bits. Fills distance and total per lane.
void sed_inside_lanes_avx2(SedLanes& lanes, double rel_tol);

// The distances alone on all four lanes (sed_distance's expressions per lane,
// so the same bits) into lanes.distance.
void sed_distance_lanes_avx2(SedLanes& lanes);

}  // namespace sed
}  // namespace bedl
