// TreeLanes: which pairs of a call run four at a time with AVX2 (pairs that
// share x), y's wide layouts, and the groups' distances (the kernel is
// lanes_kernel.h; P's passes are in coopt_lanes_avx2.cpp).
#include "lanes.h"
#include "lanes_kernel.h"

#include <algorithm>
#include <tuple>

namespace bedl {
namespace ted {
namespace {

#ifdef BEDL_X86_SIMD
using namespace lanes;

#endif  // BEDL_X86_SIMD

}  // namespace

template <typename scalar_t>
TreeLanes<scalar_t>::TreeLanes(const SymbolBatch<scalar_t>& in, Use use, double rel_tol, const scalar_t* weights)
    : in_(in), use_(use), rel_tol_(rel_tol) {
  if (use == Use::kCoopt) nonnegative_ = dp::all_nonnegative(in.table, in.rows * in.cols);
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
    if (!(use == Use::kCoopt ? coopt_lanes_fit(o.x, o.y) : lanes_fit(o.x, o.y))) continue;
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
    const size_t more = wide_bytes_of((k % 2 ? yo.right : yo.left).wide_width, in.rows);
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
      build_wide(k % 2 ? yo.right : yo.left, in.y_labels + in.y_ptr[tree], in.table, in.rows, in.cols, wide_[k]);
    }
  });
  on_ = true;
#else
  (void)use, (void)weights;
#endif
}

template <typename scalar_t>
void TreeLanes<scalar_t>::group(const std::vector<int64_t>& pairs, std::vector<std::vector<int64_t>>& groups) const {
  groups.clear();
  // By key, then by y's width (lanes of similar width pad less).
  struct Entry {
    int64_t key, width, pair;
  };
  // Whole batches by key with a counting sort (their keys are few and dense),
  // then by width within each key's short run; a gradient's blocks of a few
  // pairs with one sort.
  const size_t key_count = in_.xs->size() * 2;
  std::vector<Entry> entries;
  auto by_width = [](const Entry& p, const Entry& q) { return std::tie(p.width, p.pair) < std::tie(q.width, q.pair); };
  if (pairs.size() * 4 < key_count) {
    for (int64_t b : pairs) {
      if (fits(b)) entries.push_back({key_[b], wide_[in_.pair_y[b] * 2 + key_[b] % 2].width, b});
    }
    std::sort(entries.begin(), entries.end(), [&](const Entry& p, const Entry& q) {
      return p.key < q.key || (p.key == q.key && by_width(p, q));
    });
  } else {
    std::vector<int64_t> bucket_end(key_count + 1, 0);  // keys counted, then bucket ends
    for (int64_t b : pairs) {
      if (fits(b)) ++bucket_end[key_[b] + 1];
    }
    for (size_t k = 1; k < bucket_end.size(); ++k) bucket_end[k] += bucket_end[k - 1];
    entries.resize(bucket_end.back());
    for (int64_t b : pairs) {
      if (fits(b)) entries[bucket_end[key_[b]]++] = {key_[b], wide_[in_.pair_y[b] * 2 + key_[b] % 2].width, b};
    }
    for (size_t key = 0, begin = 0; key < key_count; begin = bucket_end[key++]) {
      std::sort(entries.begin() + begin, entries.begin() + bucket_end[key], by_width);
    }
  }
  groups.reserve(entries.size() / 2);
  for (size_t k = 0; k < entries.size();) {
    size_t end = k;
    while (end < entries.size() && entries[end].key == entries[k].key) ++end;
    // Groups of four. A pair alone takes the scalar kernel: for P (several
    // times the cost of a lane group's share) 4 + 1 run as 3 + 2 instead.
    for (size_t left = end - k; left >= 2;) {
      const size_t size = left == 5 && use_ == Use::kCoopt ? 3 : std::min<size_t>(left, kLanes);
      groups.emplace_back(size);
      for (size_t n = 0; n < size; ++n) groups.back()[n] = entries[k + n].pair;
      k += size;
      left -= size;
    }
    k = end;
  }
}

template <typename scalar_t>
void TreeLanes<scalar_t>::distances(const int64_t* pairs, int count, LaneWorkspace& lanes, double* out) const {
#ifdef BEDL_X86_SIMD
  const int64_t x_tree = in_.pair_x[pairs[0]];
  const int side = static_cast<int>(key_[pairs[0]] % 2);
  const OrientedTree& xo = (*in_.xs)[x_tree];
  const WideY* y_wide[kLanes];
  for (int l = 0; l < count; ++l) y_wide[l] = &wide_[in_.pair_y[pairs[l]] * 2 + side];
  ted_lanes<false>(side ? xo.right : xo.left, y_wide, count, in_.table, in_.rows, in_.cols, in_.x_labels + in_.x_ptr[x_tree],
                   lanes, out);
#else
  (void)pairs, (void)count, (void)lanes, (void)out;
#endif
}

template class TreeLanes<float>;
template class TreeLanes<double>;

}  // namespace ted
}  // namespace bedl
