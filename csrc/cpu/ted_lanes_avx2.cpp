// Tree distances with symbol-table costs, four pairs that share x at a time
// with AVX2 (the kernel is ted_lanes_kernel.h).
#include "ted_lanes_avx2.h"
#include "ted_lanes_kernel.h"

#include <algorithm>
#include <tuple>

namespace bedl {
namespace ted {
namespace {

#ifdef BEDL_X86_SIMD
using namespace lanes;

// Groups of pairs for ted_lanes: same x tree and orientation, in order of y's
// width within a group so that lanes do similar work. Pairs left alone (or
// that do not fit) run on the scalar kernel.
struct LaneGroup {
  int64_t pair[kLanes];
  int count;
};

inline void plan_lanes(const std::vector<OrientedTree>& xs, const std::vector<OrientedTree>& ys,
                       const int64_t* px, const int64_t* py, int64_t batch,
                       std::vector<LaneGroup>& groups, std::vector<int64_t>& singles) {
  struct Entry {
    int64_t key, width, pair;
  };
  std::vector<Entry> unsorted;
  unsorted.reserve(batch);
  std::vector<int64_t> bucket_end(xs.size() * 2 + 1, 0);  // keys counted, then bucket ends
  for (int64_t b = 0; b < batch; ++b) {
    const OrientedPair o = orient(xs[px[b]], ys[py[b]]);
    if (!lanes_fit(o.x, o.y)) {
      singles.push_back(b);
      continue;
    }
    const bool mirrored = &o.x == &xs[px[b]].right;
    unsorted.push_back({px[b] * 2 + (mirrored ? 1 : 0), o.y.wide_width, b});
    ++bucket_end[unsorted.back().key + 1];
  }
  // By key (a counting sort: the keys are few and dense), then by width
  // within each key's (short) run.
  for (size_t k = 1; k < bucket_end.size(); ++k) bucket_end[k] += bucket_end[k - 1];
  std::vector<Entry> entries(unsorted.size());
  for (const Entry& e : unsorted) entries[bucket_end[e.key]++] = e;  // now bucket_end[key] = end of key
  for (size_t key = 0, begin = 0; key + 1 < bucket_end.size(); begin = bucket_end[key++]) {
    std::sort(entries.begin() + begin, entries.begin() + bucket_end[key], [](const Entry& p, const Entry& q) {
      return std::tie(p.width, p.pair) < std::tie(q.width, q.pair);
    });
  }
  for (size_t k = 0; k < entries.size();) {
    size_t end = k;
    while (end < entries.size() && entries[end].key == entries[k].key) ++end;
    for (; k < end; k += kLanes) {
      const int count = static_cast<int>(std::min<size_t>(kLanes, end - k));
      if (count == 1) {
        singles.push_back(entries[k].pair);
        continue;
      }
      LaneGroup g{};
      g.count = count;
      for (int l = 0; l < count; ++l) g.pair[l] = entries[k + l].pair;
      groups.push_back(g);
    }
    k = end;
  }
}
#endif  // BEDL_X86_SIMD

}  // namespace

// Distances with symbol-table costs: pairs that share x (and orientation)
// four at a time, y's wide layouts built once per tree within a memory budget,
// the rest through scalar_pair.
template <typename scalar_t>
bool symbol_distances_lanes(const SymbolBatch<scalar_t>& in, int64_t cells_per_pair, scalar_t* d,
                            const std::function<void(int64_t, TedWorkspace&)>& scalar_pair) {
#ifdef BEDL_X86_SIMD
  if (!dp::simd_avx2()) return false;
  const std::vector<OrientedTree>& xs = *in.xs;
  const std::vector<OrientedTree>& ys = *in.ys;
  const int64_t *px_p = in.pair_x, *py_p = in.pair_y, *xl_p = in.x_labels, *yl_p = in.y_labels;
  const int64_t *xptr_p = in.x_ptr, *yptr_p = in.y_ptr;
  const int64_t batch = in.batch, S = in.symbols;
  const scalar_t* t = in.table;
    std::vector<LaneGroup> groups;
    std::vector<int64_t> singles;
    plan_lanes(xs, ys, px_p, py_p, batch, groups, singles);
    // y's side of the wide layout, per tree and orientation used by a group,
    // within a memory budget (comb-shaped trees have O(n^2) columns); the
    // groups past it run on the scalar kernel.
    std::vector<WideY> wide(ys.size() * 2);
    std::vector<uint8_t> built(ys.size() * 2, 0);
    std::vector<int64_t> to_build;  // (tree * 2 + side), built below in parallel
    size_t wide_bytes = 0;
    size_t kept_groups = 0;
    for (const LaneGroup& g : groups) {
      const OrientedTree& xo = xs[px_p[g.pair[0]]];
      const int side = &orient(xo, ys[py_p[g.pair[0]]]).x == &xo.right ? 1 : 0;
      size_t more = 0;
      for (int l = 0; l < g.count; ++l) {
        const OrientedTree& yo = ys[py_p[g.pair[l]]];
        if (!built[py_p[g.pair[l]] * 2 + side]) more += wide_bytes_of((side ? yo.right : yo.left).wide_width, S);
      }
      if (wide_bytes + more > kWideBudget) {
        for (int l = 0; l < g.count; ++l) singles.push_back(g.pair[l]);
        continue;
      }
      wide_bytes += more;
      for (int l = 0; l < g.count; ++l) {
        const int64_t k = py_p[g.pair[l]] * 2 + side;
        if (built[k]) continue;
        built[k] = 1;
        to_build.push_back(k);
      }
      groups[kept_groups++] = g;
    }
    groups.resize(kept_groups);
    at::parallel_for(0, static_cast<int64_t>(to_build.size()), 16, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        const int64_t k = to_build[n], tree = k / 2;
        const OrientedTree& yo = ys[tree];
        build_wide(k % 2 ? yo.right : yo.left, yl_p + yptr_p[tree], t, S, wide[k]);
      }
    });
    const int64_t g_count = static_cast<int64_t>(groups.size());
    struct Workspaces {
      TedWorkspace ted;
      LaneWorkspace lanes;
    };
    dp::for_each_pair<Workspaces>(
        g_count + static_cast<int64_t>(singles.size()), cells_per_pair * 2, [&](int64_t k, Workspaces& ws) {
          if (k >= g_count) return scalar_pair(singles[k - g_count], ws.ted);
          const LaneGroup& g = groups[k];
          const OrientedTree& xo = xs[px_p[g.pair[0]]];
          const OrientedPair first = orient(xo, ys[py_p[g.pair[0]]]);
          const int side = &first.x == &xo.right ? 1 : 0;
          const WideY* y_wide[kLanes];
          for (int l = 0; l < g.count; ++l) y_wide[l] = &wide[py_p[g.pair[l]] * 2 + side];
          double out[kLanes];
          ted_lanes<false>(first.x, y_wide, g.count, t, S, xl_p + xptr_p[px_p[g.pair[0]]], ws.lanes, out);
          for (int l = 0; l < g.count; ++l) d[g.pair[l]] = static_cast<scalar_t>(out[l]);
        });
  return true;
#else
  (void)in, (void)cells_per_pair, (void)d, (void)scalar_pair;
  return false;
#endif
}

template bool symbol_distances_lanes<float>(const SymbolBatch<float>&, int64_t, float*,
                                           const std::function<void(int64_t, TedWorkspace&)>&);
template bool symbol_distances_lanes<double>(const SymbolBatch<double>&, int64_t, double*,
                                            const std::function<void(int64_t, TedWorkspace&)>&);

}  // namespace ted
}  // namespace bedl
