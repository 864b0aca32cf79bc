// P of trees with symbol-table costs where pairs share x: the inside pass
// four pairs at a time with AVX2 (ted_lanes<true>, lanes_kernel.h), then
// each pair's outside pass (outside_from_kept, coopt.h) on the lanes' kept
// rows through a LaneSource. (TreeLanes' planning is in lanes_avx2.cpp.)
#include "lanes.h"
#include "lanes_kernel.h"
#include "coopt.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

namespace bedl {
namespace ted {
namespace {

#ifdef BEDL_X86_SIMD
using namespace lanes;

// The distinct labels of a tree of n nodes, in order of first appearance
// (`seen`: S flags, left cleared).
inline void distinct_labels(const int64_t* labels, int64_t n, std::vector<uint8_t>& seen, std::vector<int64_t>& out) {
  out.clear();
  for (int64_t p = 0; p < n; ++p) {
    if (!seen[labels[p]]) {
      seen[labels[p]] = 1;
      out.push_back(labels[p]);
    }
  }
  for (int64_t a : out) seen[a] = 0;
}

// A pair's tie scale as fill_symbols<true> takes it, the largest absolute
// cost its padded block would hold: a maximum, so over distinct labels alone.
template <typename scalar_t>
double tie_scale(const scalar_t* table, int64_t rows, int64_t cols, const std::vector<int64_t>& x_symbols,
                 const std::vector<int64_t>& y_symbols) {
  const int64_t gap = cols - 1;
  const scalar_t* gap_row = table + (rows - 1) * cols;
  double scale = 0.0;
  for (int64_t b : y_symbols) scale = std::max(scale, std::fabs(static_cast<double>(gap_row[b])));
  for (int64_t a : x_symbols) {
    const scalar_t* row = table + a * cols;
    scale = std::max(scale, std::fabs(static_cast<double>(row[gap])));
    for (int64_t b : y_symbols) scale = std::max(scale, std::fabs(static_cast<double>(row[b])));
  }
  return scale;
}

// Lane l's view of one table's flags and inside counts, and of all tdm
// counts, for the outside sweep (outside.h): rows r0 .. kx of the table as
// pointers into the counting ted_lanes' blocks (column j of lane l at
// [(j - c0) * kLanes], flags at [j - c0]), with constant rows where the
// blocks have none: the first row (insertions, one derivation each), and
// zeros in rows nothing reaches (the last row of tables other than the
// final one: its tdm is read, not its cells). Leaf keyroots' tables (closed
// forms in the inside pass) have their first row and column only.
struct LaneSource {
  using Count = dp::FastCount;
  const uint16_t* const* flag_rows;
  const double* const* total_rows;
  const double* const* other_rows;
  int64_t r0, c0;
  int l;
  const double* const* tdm_rows;  // per node i of x: lane l's tdm counts, nullptr: one derivation
  const int64_t* def_of_node;     // y's node -> its tdm position (WideY::def_of_node)
  uint8_t flags(int64_t i, int64_t j, int64_t) const { return lane_flags(flag_rows[i - r0][j - c0], l); }
  Count total(int64_t i, int64_t j, int64_t) const { return Count{total_rows[i - r0][(j - c0) * kLanes]}; }
  Count in_other(int64_t i, int64_t j, int64_t) const { return Count{other_rows[i - r0][(j - c0) * kLanes]}; }
  Count tdm(int64_t i, int64_t j, int64_t) const {
    const double* row = tdm_rows[i];
    return row == nullptr ? Count::one() : Count{row[def_of_node[j] * kLanes]};
  }
};

// Constant rows of two columns for the tables of y's leaf keyroots (first
// column and the keyroot's own): the first row, the rows below it.
constexpr uint16_t kLeafFirstFlags[2] = {0, 0x0F << kLanes};  // (lane_flags: insertions)
constexpr uint16_t kLeafBelowFlags[2] = {0x0F, 0};              // deletions
constexpr double kLeafFirstCounts[2 * kLanes] = {1, 1, 1, 1, 1, 1, 1, 1};
constexpr double kLeafBelowTotal[2 * kLanes] = {1, 1, 1, 1, 0, 0, 0, 0};
constexpr double kLeafBelowOther[2 * kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};

// Table (a, b)'s LaneSource for lane l (its row pointers in `rows`).
inline LaneSource lane_source(const TreeIndex& x, const TreeIndex& y, const WideY& wide, const LaneCounts& lc,
                              const LaneWorkspace& lanes, int64_t row_len, int64_t W, int l, size_t a, size_t b,
                              const std::vector<const double*>& tdm_rows, LaneWorkspace::SourceRows& rows) {
  const int64_t kx = x.keyroots[a], ky = y.keyroots[b];
  const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
  const int64_t col = wide.table_col[b];
  const int64_t block = lc.block_row[a];
  const size_t count = static_cast<size_t>(kx - r0 + 1);
  rows.flags.resize(count);
  rows.total.resize(count);
  rows.other.resize(count);
  if (col < 0) {  // a leaf keyroot of y
    rows.flags[0] = kLeafFirstFlags;
    rows.total[0] = rows.other[0] = kLeafFirstCounts + l;
    for (size_t k = 1; k < count; ++k) {
      rows.flags[k] = kLeafBelowFlags;
      rows.total[k] = kLeafBelowTotal + l;
      rows.other[k] = kLeafBelowOther + l;
    }
  } else {
    const int64_t lanes_end = block < 0 ? r0 : (kx == x.n && ky == y.n ? kx : kx - 1);
    const int64_t at = col * kLanes + l;
    rows.flags[0] = lanes.first_row_flags.data() + col;
    rows.total[0] = rows.other[0] = lc.ones.data() + at;
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      const size_t k = static_cast<size_t>(i - r0);
      if (i > lanes_end) {
        rows.flags[k] = lanes.zero_flags.data() + col;
        rows.total[k] = rows.other[k] = lanes.zero_counts.data() + at;
        continue;
      }
      const int64_t block_row = block + i - r0 - 1;
      rows.flags[k] = lc.flags.data() + block_row * W + col;
      rows.total[k] = lc.tot.data() + block_row * row_len + at;
      rows.other[k] = lc.other.data() + block_row * row_len + at;
    }
  }
  return LaneSource{rows.flags.data(), rows.total.data(), rows.other.data(), r0, c0, l,
                    tdm_rows.data(), wide.def_of_node.data()};
}
#endif  // BEDL_X86_SIMD

}  // namespace

template <typename scalar_t>
void TreeLanes<scalar_t>::coopt(const int64_t* pairs, int count, LaneWorkspace& lanes, TedWorkspace& ws,
                                const std::function<void(int, bool, double, TedWorkspace&)>& done) const {
#ifdef BEDL_X86_SIMD
  using dp::FastCount;
  const std::vector<OrientedTree>& xs = *in_.xs;
  const std::vector<OrientedTree>& ys = *in_.ys;
  const int64_t R = in_.rows, C = in_.cols;
  const int64_t x_tree = in_.pair_x[pairs[0]];
  const int side = static_cast<int>(key_[pairs[0]] % 2);
  const TreeIndex& x = side ? xs[x_tree].right : xs[x_tree].left;
  const int64_t* x_labels = in_.x_labels + in_.x_ptr[x_tree];
  const WideY* y_wide[kLanes];
  const TreeIndex* y_of[kLanes];
  double scale[kLanes];
  lanes.seen.resize(std::max(R, C), 0);
  distinct_labels(x_labels, x.n, lanes.seen, lanes.x_labels_distinct);
  for (int l = 0; l < kLanes; ++l) {
    const int64_t y_tree = in_.pair_y[pairs[std::min(l, count - 1)]];
    y_wide[l] = &wide_[y_tree * 2 + side];
    y_of[l] = side ? &ys[y_tree].right : &ys[y_tree].left;
    if (l >= count) {
      scale[l] = scale[count - 1];
      continue;
    }
    distinct_labels(in_.y_labels + in_.y_ptr[y_tree], y_of[l]->n, lanes.seen, lanes.y_labels_distinct);
    scale[l] = tie_scale(in_.table, R, C, lanes.x_labels_distinct, lanes.y_labels_distinct);
  }
  double distance[kLanes];
  if (nonnegative_) {
    ted_lanes<true, true>(x, y_wide, count, in_.table, R, C, x_labels, lanes, distance, rel_tol_, scale);
  } else {
    ted_lanes<true, false>(x, y_wide, count, in_.table, R, C, x_labels, lanes, distance, rel_tol_, scale);
  }
  const LaneCounts& lc = lanes.counts;
  int64_t W = 0, L = 0;
  for (int l = 0; l < kLanes; ++l) {
    W = std::max(W, y_wide[l]->width);
    L = std::max(L, static_cast<int64_t>(y_wide[l]->leaf_symbol.size()));
  }
  const int64_t row_len = W * kLanes, tdm_row = (L + 1 + W) * kLanes, tdm_start = (L + 1) * kLanes;
  const int64_t m = x.n;
  // Constant rows: the first row's flags (insertions but in first columns), zeros.
  lanes.first_row_flags.resize(W);
  for (int64_t c = 0; c < W; ++c) {
    int real = 0;
    for (int k = 0; k < kLanes; ++k) real |= (lanes.ins[c * kLanes + k] < std::numeric_limits<double>::infinity()) << k;
    lanes.first_row_flags[c] = static_cast<uint16_t>(real << kLanes);
  }
  if (static_cast<int64_t>(lanes.zero_flags.size()) < W) lanes.zero_flags.assign(W, 0);  // (never written)
  if (static_cast<int64_t>(lanes.zero_counts.size()) < row_len) lanes.zero_counts.assign(row_len, 0.0);
  const size_t root = x.keyroots.size() - 1;
  for (int l = 0; l < count; ++l) {
    const TreeIndex& y = *y_of[l];
    const WideY& wide = *y_wide[l];
    const int64_t n = y.n, w = n + 1;
    const double all = lc.tot[(lc.block_row[root] + m - 1) * row_len + wide.final_col * kLanes + l];
    if (!FastCount{all}.usable_total()) {
      done(l, false, 0.0, ws);
      continue;
    }
    // Every tdm's count: the lanes' rows of x's paths; x's leaf keyroots have one derivation.
    std::vector<const double*>& tdm_rows = lanes.tdm_rows;
    tdm_rows.assign(m + 1, nullptr);
    for (int64_t i = 1; i <= m; ++i) {
      const int64_t k = x.keyroots[x.path_index[i]];
      if (x.leftmost[k] != k) tdm_rows[i] = lc.tdm_count.data() + i * tdm_row + tdm_start + l;
    }
    TreePair<FastCount> pair{x, y, ws, ws.fast, w, dp::Tie{rel_tol_, scale[l]}};
    outside_from_kept(pair, FastCount{all}, [&](size_t a, size_t b) {
      return lane_source(x, y, wide, lc, lanes, row_len, W, l, a, b, tdm_rows, lanes.source_rows);
    });
    ws.y_symbol.resize(w);
    const int64_t* y_labels = in_.y_labels + in_.y_ptr[in_.pair_y[pairs[l]]];
    for (int64_t j = 1; j <= n; ++j) ws.y_symbol[j] = y_labels[y.pre_of_post[j]];
    done(l, true, distance[l], ws);
  }
#else
  (void)pairs, (void)count, (void)lanes, (void)ws, (void)done;
#endif
}

template void TreeLanes<float>::coopt(const int64_t*, int, LaneWorkspace&, TedWorkspace&,
                                      const std::function<void(int, bool, double, TedWorkspace&)>&) const;
template void TreeLanes<double>::coopt(const int64_t*, int, LaneWorkspace&, TedWorkspace&,
                                       const std::function<void(int, bool, double, TedWorkspace&)>&) const;

}  // namespace ted
}  // namespace bedl
