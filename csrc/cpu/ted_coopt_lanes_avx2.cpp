// P of trees with symbol-table costs where pairs share x: the inside pass
// four pairs at a time with AVX2 (ted_lanes<true>, ted_lanes_kernel.h), then
// each pair's outside pass (TedPair::outside_from_kept) on the lanes' kept
// rows through a LaneSource.
#include "ted_lanes_avx2.h"
#include "ted_lanes_kernel.h"
#include "ted_passes.h"

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
double tie_scale(const scalar_t* table, int64_t S, const std::vector<int64_t>& x_symbols,
                 const std::vector<int64_t>& y_symbols) {
  const int64_t gap = S - 1;
  double scale = 0.0;
  for (int64_t b : y_symbols) scale = std::max(scale, std::fabs(static_cast<double>(table[gap * S + b])));
  for (int64_t a : x_symbols) {
    const scalar_t* row = table + a * S;
    scale = std::max(scale, std::fabs(static_cast<double>(row[gap])));
    for (int64_t b : y_symbols) scale = std::max(scale, std::fabs(static_cast<double>(row[b])));
  }
  return scale;
}

// Lane l's view of one table's flags and inside counts, and of all tdm
// counts, for TedPair's outside sweep: rows r0 .. kx of the table as
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
CooptLanes<scalar_t>::CooptLanes(const SymbolBatch<scalar_t>& in, double rel_tol, const scalar_t* weights)
    : in_(in), rel_tol_(rel_tol) {
#ifdef BEDL_X86_SIMD
  if (!dp::simd_avx2()) return;
  const std::vector<OrientedTree>& xs = *in.xs;
  const std::vector<OrientedTree>& ys = *in.ys;
  key_.assign(in.batch, -1);
  std::vector<int8_t> side_of(in.batch, 0);
  std::vector<uint8_t> wanted(ys.size() * 2, 0);
  for (int64_t b = 0; b < in.batch; ++b) {
    if (weights != nullptr && weights[b] == scalar_t(0)) continue;
    const OrientedTree& xo = xs[in.pair_x[b]];
    const OrientedPair o = orient(xo, ys[in.pair_y[b]]);
    if (!coopt_lanes_fit(o.x, o.y)) continue;
    side_of[b] = &o.x == &xo.right ? 1 : 0;
    key_[b] = in.pair_x[b] * 2 + side_of[b];
  }
  // A key of one pair forms no group.
  std::vector<int64_t> pairs_of(xs.size() * 2, 0);
  for (int64_t b = 0; b < in.batch; ++b) {
    if (key_[b] >= 0) ++pairs_of[key_[b]];
  }
  for (int64_t b = 0; b < in.batch; ++b) {
    if (key_[b] < 0) continue;
    if (pairs_of[key_[b]] < 2) {
      key_[b] = -1;
    } else {
      wanted[in.pair_y[b] * 2 + side_of[b]] = 1;
    }
  }
  // y's wide layouts within the memory budget; pairs past it stay scalar.
  std::vector<int64_t> to_build;
  size_t bytes = 0;
  for (size_t k = 0; k < wanted.size(); ++k) {
    if (!wanted[k]) continue;
    const OrientedTree& yo = ys[k / 2];
    const size_t more = wide_bytes_of((k % 2 ? yo.right : yo.left).wide_width, in.symbols);
    if (bytes + more > kWideBudget) {
      wanted[k] = 0;
      continue;
    }
    bytes += more;
    to_build.push_back(static_cast<int64_t>(k));
  }
  for (int64_t b = 0; b < in.batch; ++b) {
    if (key_[b] >= 0 && !wanted[in.pair_y[b] * 2 + side_of[b]]) key_[b] = -1;
  }
  wide_.resize(ys.size() * 2);
  at::parallel_for(0, static_cast<int64_t>(to_build.size()), 16, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const int64_t k = to_build[n], tree = k / 2;
      const OrientedTree& yo = ys[tree];
      build_wide(k % 2 ? yo.right : yo.left, in.y_labels + in.y_ptr[tree], in.table, in.symbols, wide_[k]);
    }
  });
  on_ = true;
#else
  (void)rel_tol_;
#endif
}

template <typename scalar_t>
void CooptLanes<scalar_t>::group(const std::vector<int64_t>& pairs, std::vector<std::vector<int64_t>>& groups) const {
  groups.clear();
  // By key, then by y's width (lanes of similar width pad less).
  struct Entry {
    int64_t key, width, pair;
  };
  std::vector<Entry> entries;
  for (int64_t b : pairs) {
    if (fits(b)) entries.push_back({key_[b], wide_[in_.pair_y[b] * 2 + key_[b] % 2].width, b});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& p, const Entry& q) {
    return std::tie(p.key, p.width, p.pair) < std::tie(q.key, q.width, q.pair);
  });
  for (size_t k = 0; k < entries.size();) {
    size_t end = k;
    while (end < entries.size() && entries[end].key == entries[k].key) ++end;
    // Groups of four, but 4 + 1 as 3 + 2 (a pair alone takes the scalar kernel).
    for (size_t left = end - k; left >= 2;) {
      const size_t size = left == 5 ? 3 : std::min<size_t>(left, kLanes);
      std::vector<int64_t> g;
      for (size_t n = 0; n < size; ++n) g.push_back(entries[k + n].pair);
      groups.push_back(std::move(g));
      k += size;
      left -= size;
    }
    k = end;
  }
}

template <typename scalar_t>
void CooptLanes<scalar_t>::run(const int64_t* pairs, int count, LaneWorkspace& lanes, TedWorkspace& ws,
                               const std::function<void(int, bool, double, TedWorkspace&)>& done) const {
#ifdef BEDL_X86_SIMD
  using dp::FastCount;
  const std::vector<OrientedTree>& xs = *in_.xs;
  const std::vector<OrientedTree>& ys = *in_.ys;
  const int64_t S = in_.symbols;
  const int64_t x_tree = in_.pair_x[pairs[0]];
  const int side = static_cast<int>(key_[pairs[0]] % 2);
  const TreeIndex& x = side ? xs[x_tree].right : xs[x_tree].left;
  const int64_t* x_labels = in_.x_labels + in_.x_ptr[x_tree];
  const WideY* y_wide[kLanes];
  const TreeIndex* y_of[kLanes];
  double scale[kLanes];
  lanes.seen.resize(S, 0);
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
    scale[l] = tie_scale(in_.table, S, lanes.x_labels_distinct, lanes.y_labels_distinct);
  }
  double distance[kLanes];
  ted_lanes<true>(x, y_wide, count, in_.table, S, x_labels, lanes, distance, rel_tol_, scale);
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
    TedPair<FastCount> pair{x, y, ws, ws.fast, w, dp::Tie{rel_tol_, scale[l]}};
    pair.outside_from_kept(FastCount{all}, [&](size_t a, size_t b) {
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

template class CooptLanes<float>;
template class CooptLanes<double>;

}  // namespace ted
}  // namespace bedl
