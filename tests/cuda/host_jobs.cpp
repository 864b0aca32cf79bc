// Runs the GPU kernels' per-thread jobs (csrc/cuda/*/jobs.h) on the host, every
// thread index of a launch in turn, with the workspace slicing, status codes and
// Count fallback of the CUDA glue: what a GPU would compute, on any machine.
// tests/test_gpu_jobs.py writes the inputs as raw files and compares the outputs
// with the CPU operators bit for bit.
//
//   host_jobs DIR
//
// DIR/args.txt: kind (padded | symbols | symbols_short | symbols_warp |
// tree_padded | tree_symbols | tree_lanes | seq_soft | tree_soft; tree_lanes:
// the lane groups' distance kernel, the pairs left out on the per-pair one, and
// the plan's counts in `plan` (groups, pairs in groups, pairs left out,
// launches); symbols_short: the
// register-row distance kernel of the width that holds max_n; symbols_warp:
// the warp-per-pair distance kernel, `threads` warps), dtype (f32 | f64), need_coopt (0 | 1; soft: need_grad),
// rel_tol (soft: the temperature), threads, batch, rows,
// cols, max_m, max_n, S. Inputs as raw arrays: padded: costs
// (batch*rows*cols), x_len, y_len; symbols: table (S*S), x_labels, x_ptr,
// y_labels, y_ptr, pair_x, pair_y; trees: the flat trees (x_pre, x_left,
// x_node_ptr, x_keys, x_key_ptr, x_path_index, x_path_begin, x_path_nodes,
// the same for y, x_entry, y_entry) and costs
// (tree_padded) or table, x_labels, x_ptr, y_labels, y_ptr (tree_symbols).
// Outputs: d (batch), p (batch*rows*cols, with need_coopt), status (int32, batch).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "cuda/seq/jobs.h"
#include "cuda/tree/jobs.h"
#include "cuda/tree/lanes_plan.h"

namespace {

std::string dir;

template <typename T>
std::vector<T> load(const char* name) {
  std::ifstream in(dir + "/" + name, std::ios::binary | std::ios::ate);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", name);
    std::exit(2);
  }
  const std::streamsize bytes = in.tellg();
  in.seekg(0);
  std::vector<T> out(static_cast<size_t>(bytes) / sizeof(T));
  in.read(reinterpret_cast<char*>(out.data()), bytes);
  return out;
}

template <typename T>
void save(const char* name, const std::vector<T>& v) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}

struct Args {
  std::string kind, dtype;
  int need_coopt = 0;
  double rel_tol = 0.0;
  int64_t threads = 1, batch = 0, rows = 1, cols = 1, max_m = 0, max_n = 0, table_rows = 0, table_cols = 0;
};

// A P launch as the CUDA glue runs it: every thread with counts as doubles,
// then every thread over the pairs whose counts overflowed, with exponents.
// job(Count{}, order, count, thread, workspace); bytes(Count{}): per thread.
template <class Job, class Bytes>
void run_counted(const Args& a, const std::vector<int32_t>& status, const Job& job, const Bytes& bytes) {
  using namespace bedl;
  auto launch = [&](auto count_type, const int64_t* order, int64_t count) {
    const int64_t per = bytes(count_type);
    std::vector<char> ws(a.threads * per + 16);
    char* base = ws.data() + (16 - reinterpret_cast<uintptr_t>(ws.data()) % 16) % 16;
    for (int64_t t = 0; t < a.threads; ++t) job(count_type, order, count, t, base + t * per);
  };
  launch(dp::FastCount{}, nullptr, a.batch);
  std::vector<int64_t> again;
  for (int64_t b = 0; b < a.batch; ++b) {
    if (status[b] == gpu::kPairCountsOverflow) again.push_back(b);
  }
  launch(dp::Count{}, again.data(), static_cast<int64_t>(again.size()));
}

// Every thread of a launch, in turn (their pairs are disjoint, so the order is immaterial).
template <typename scalar_t, class Pairs>
void run(const Args& a, const Pairs& pairs) {
  using namespace bedl;
  std::vector<scalar_t> d(a.batch), p;
  std::vector<int32_t> status(a.batch, -1);
  if (!a.need_coopt) {
    const int64_t per = gpu::distance_workspace(a.max_n);
    std::vector<double> ws(a.threads * per);
    for (int64_t t = 0; t < a.threads; ++t) {
      gpu::sequence_distances_thread(pairs, a.batch, t, a.threads, ws.data() + t * per, a.max_n, d.data(),
                                     status.data());
    }
  } else {
    p.assign(a.batch * a.rows * a.cols, scalar_t(0));
    run_counted(a, status, [&](auto count_type, const int64_t* order, int64_t count, int64_t t, char* ws) {
      using Count = decltype(count_type);
      gpu::sequence_coopt_thread<Count>(pairs, order, count, t, a.threads, ws, a.max_m, a.max_n, a.rel_tol,
                                        d.data(), p.data(), a.rows, a.cols, status.data());
    }, [&](auto count_type) { return gpu::coopt_workspace_bytes<decltype(count_type)>(a.max_m, a.max_n); });
    save("p", p);
  }
  save("d", d);
  save("status", status);
}

// Every thread of the register-row distance kernel of width N, in turn, each
// with its own N label slots (stride `threads`, as a block's shared memory).
template <int N, typename scalar_t>
void run_short_width(const Args& a, const bedl::gpu::SymbolSequencePairs<scalar_t>& pairs) {
  std::vector<scalar_t> d(a.batch);
  std::vector<int32_t> labels(N * a.threads, -1);
  for (int64_t t = 0; t < a.threads; ++t) {
    bedl::gpu::sequence_short_distances_thread<N>(pairs, pairs.table, a.batch, t, a.threads, labels.data() + t,
                                                  a.threads, d.data());
  }
  save("d", d);
}

// The register-row kernel of the width that holds max_n (symbols_short).
template <typename scalar_t>
void run_short(const Args& a, const bedl::gpu::SymbolSequencePairs<scalar_t>& pairs) {
  switch (bedl::gpu::short_sequence_width(a.max_n)) {
    case 8: return run_short_width<8>(a, pairs);
    case 16: return run_short_width<16>(a, pairs);
    case 32: return run_short_width<32>(a, pairs);
    case 48: return run_short_width<48>(a, pairs);
    case 64: return run_short_width<64>(a, pairs);
    default:
      std::fprintf(stderr, "max_n %lld has no register-row width\n", static_cast<long long>(a.max_n));
      std::exit(2);
  }
}

// Every warp of the warp-per-pair distance kernel (symbols_warp), in turn, its
// lanes in lockstep; the strip width that covers max_n, `threads` warps.
template <typename scalar_t>
void run_warp(const Args& a, const bedl::gpu::SymbolSequencePairs<scalar_t>& pairs) {
  std::vector<scalar_t> d(a.batch);
  std::vector<double> boundary(a.max_m + 1);
  const auto each_warp = [&](auto width) {
    for (int64_t w = 0; w < a.threads; ++w) {
      bedl::gpu::sequence_warp_distances_host<decltype(width)::value>(pairs, a.batch, w, a.threads,
                                                                      boundary.data(), d.data());
    }
  };
  switch (bedl::gpu::warp_strip_width(a.max_n)) {
    case 4: each_warp(std::integral_constant<int, 4>{}); break;
    case 8: each_warp(std::integral_constant<int, 8>{}); break;
    default: each_warp(std::integral_constant<int, 16>{}); break;
  }
  save("d", d);
}

// The flat trees of both sides (kept alive by `keep`).
bedl::gpu::TreePairs load_trees(std::vector<std::vector<int64_t>>& keep) {
  const char* names[] = {"x_pre",       "x_left",       "x_node_ptr", "x_keys",       "x_key_ptr",    "x_path_index",
                         "x_path_begin", "x_path_nodes", "y_pre",      "y_left",       "y_node_ptr",   "y_keys",
                         "y_key_ptr",    "y_path_index", "y_path_begin", "y_path_nodes", "x_entry",    "y_entry"};
  keep.clear();
  for (const char* name : names) keep.push_back(load<int64_t>(name));
  const auto side = [&](int k) {
    return bedl::gpu::FlatTrees{keep[k].data(),     keep[k + 1].data(), keep[k + 2].data(), keep[k + 3].data(),
                                keep[k + 4].data(), keep[k + 5].data(), keep[k + 6].data(), keep[k + 7].data()};
  };
  return {side(0), side(8), keep[16].data(), keep[17].data()};
}

// Every thread of a tree launch, in turn: distances, or distances and P with
// counts as doubles, then the pairs whose counts overflowed with exponents.
template <typename scalar_t, class Pairs>
void run_trees(const Args& a, const Pairs& pairs) {
  using namespace bedl;
  std::vector<scalar_t> d(a.batch), p;
  std::vector<int32_t> status(a.batch, -1);
  if (!a.need_coopt) {
    const int64_t per = gpu::tree_distance_workspace(a.max_m, a.max_n);
    std::vector<double> ws(a.threads * per);
    for (int64_t t = 0; t < a.threads; ++t) {
      gpu::tree_distances_thread(pairs, nullptr, a.batch, t, a.threads, ws.data() + t * per, a.max_m, a.max_n,
                                 d.data(), status.data());
    }
  } else {
    p.assign(a.batch * a.rows * a.cols, scalar_t(0));
    run_counted(a, status, [&](auto count_type, const int64_t* order, int64_t count, int64_t t, char* ws) {
      using Count = decltype(count_type);
      gpu::tree_coopt_thread<Count>(pairs, order, count, t, a.threads, ws, a.max_m, a.max_n, a.rel_tol, d.data(),
                                    p.data(), a.rows, a.cols, status.data());
    }, [&](auto count_type) { return gpu::tree_coopt_workspace_bytes<decltype(count_type)>(a.max_m, a.max_n); });
    save("p", p);
  }
  save("d", d);
  save("status", status);
}

// The lane groups' launches as the CUDA glue runs them (one group's arrays at a
// time), then the pairs left out on the per-pair kernel's threads.
template <typename scalar_t>
void run_tree_lanes(const Args& a, const bedl::gpu::SymbolTreePairs<scalar_t>& pairs, int64_t x_entries,
                    int64_t y_entries) {
  using namespace bedl;
  const gpu::TreeLanePlan plan =
      gpu::plan_tree_lanes(pairs.xs, pairs.ys, x_entries, y_entries, pairs.x_entry, pairs.y_entry, a.batch);
  const gpu::WideTrees wide{plan.wide_ptr.data(), plan.col_node.data(), plan.col_jump.data(),
                            plan.col_def.data(),  plan.leaf_ptr.data(), plan.leaf_node.data()};
  const gpu::LaneGroups groups{plan.group_begin.data(), plan.group_pairs.data(), plan.group_width.data(),
                               plan.group_leaves.data()};
  std::vector<scalar_t> d(a.batch);
  std::vector<int32_t> status(a.batch, -1);
  for (size_t t = 0; t + 1 < plan.tier_begin.size(); ++t) {
    std::vector<char> ws(plan.tier_bytes[t] + 16);
    char* base = ws.data() + (16 - reinterpret_cast<uintptr_t>(ws.data()) % 16) % 16;
    for (int64_t g = plan.tier_begin[t]; g < plan.tier_begin[t + 1]; ++g) {
      // The lanes at once on one host thread each, as a warp runs them: lanes
      // that touched each other's arrays would race.
      std::vector<std::thread> lanes;
      for (int64_t lane = 0; lane < ted::kLaneStride; ++lane) {
        lanes.emplace_back([&, lane] {
          gpu::tree_lane_job(pairs, wide, groups, g, lane, base, d.data(), status.data());
        });
      }
      for (std::thread& lane : lanes) lane.join();
    }
  }
  const int64_t per = gpu::tree_distance_workspace(a.max_m, a.max_n);
  std::vector<double> ws(a.threads * per);
  for (int64_t t = 0; t < a.threads; ++t) {
    gpu::tree_distances_thread(pairs, plan.singles.data(), static_cast<int64_t>(plan.singles.size()), t, a.threads,
                               ws.data() + t * per, a.max_m, a.max_n, d.data(), status.data());
  }
  save("d", d);
  save("status", status);
  save("plan", std::vector<int64_t>{static_cast<int64_t>(plan.group_width.size()),
                                    static_cast<int64_t>(plan.group_pairs.size()),
                                    static_cast<int64_t>(plan.singles.size()),
                                    static_cast<int64_t>(plan.tier_bytes.size())});
}

// Every thread of a soft launch (padded costs; rel_tol is the temperature,
// need_coopt need_grad), in turn.
template <typename scalar_t, class Pairs, class Job, class Bytes>
void run_soft(const Args& a, const Pairs& pairs, const Job& job, const Bytes& bytes) {
  std::vector<scalar_t> d(a.batch), p(a.need_coopt ? a.batch * a.rows * a.cols : 0, scalar_t(0));
  std::vector<int32_t> status(a.batch, -1);
  const int64_t per = bytes(a.max_m, a.max_n);
  std::vector<char> ws(a.threads * per + 16);
  char* base = ws.data() + (16 - reinterpret_cast<uintptr_t>(ws.data()) % 16) % 16;
  for (int64_t t = 0; t < a.threads; ++t) {
    job(pairs, a.batch, t, a.threads, base + t * per, a.max_m, a.max_n, a.rel_tol, a.need_coopt != 0, d.data(),
        p.data(), status.data());
  }
  if (a.need_coopt) save("p", p);
  save("d", d);
  save("status", status);
}

template <typename scalar_t>
void run_kind(const Args& a) {
  if (a.kind == "seq_soft") {
    const std::vector<scalar_t> costs = load<scalar_t>("costs");
    const std::vector<int64_t> xl = load<int64_t>("x_len"), yl = load<int64_t>("y_len");
    run_soft<scalar_t>(a, bedl::gpu::PaddedSequencePairs<scalar_t>{costs.data(), a.rows, a.cols, xl.data(), yl.data()},
                       bedl::gpu::sequence_soft_thread<scalar_t>, bedl::gpu::sequence_soft_workspace_bytes);
    return;
  }
  if (a.kind == "tree_soft") {
    std::vector<std::vector<int64_t>> keep;
    const std::vector<scalar_t> costs = load<scalar_t>("costs");
    bedl::gpu::PaddedTreePairs<scalar_t> pairs;
    static_cast<bedl::gpu::TreePairs&>(pairs) = load_trees(keep);
    pairs.costs = costs.data();
    pairs.rows = a.rows;
    pairs.cols = a.cols;
    run_soft<scalar_t>(a, pairs, bedl::gpu::tree_soft_thread<scalar_t>, bedl::gpu::tree_soft_workspace_bytes);
    return;
  }
  if (a.kind == "tree_padded" || a.kind == "tree_symbols" || a.kind == "tree_lanes") {
    std::vector<std::vector<int64_t>> keep;
    const bedl::gpu::TreePairs trees = load_trees(keep);
    if (a.kind == "tree_padded") {
      const std::vector<scalar_t> costs = load<scalar_t>("costs");
      bedl::gpu::PaddedTreePairs<scalar_t> pairs;
      static_cast<bedl::gpu::TreePairs&>(pairs) = trees;
      pairs.costs = costs.data();
      pairs.rows = a.rows;
      pairs.cols = a.cols;
      run_trees<scalar_t>(a, pairs);
    } else {
      const std::vector<scalar_t> table = load<scalar_t>("table");
      const std::vector<int64_t> xl = load<int64_t>("x_labels"), xp = load<int64_t>("x_ptr");
      const std::vector<int64_t> yl = load<int64_t>("y_labels"), yp = load<int64_t>("y_ptr");
      bedl::gpu::SymbolTreePairs<scalar_t> pairs;
      static_cast<bedl::gpu::TreePairs&>(pairs) = trees;
      pairs.table = table.data();
      pairs.rows = a.table_rows;
      pairs.cols = a.table_cols;
      pairs.x_labels = xl.data();
      pairs.x_ptr = xp.data();
      pairs.y_labels = yl.data();
      pairs.y_ptr = yp.data();
      if (a.kind == "tree_lanes") {
        run_tree_lanes<scalar_t>(a, pairs, static_cast<int64_t>(keep[2].size()) - 1,
                                 static_cast<int64_t>(keep[10].size()) - 1);
      } else {
        run_trees<scalar_t>(a, pairs);
      }
    }
  } else if (a.kind == "padded") {
    const std::vector<scalar_t> costs = load<scalar_t>("costs");
    const std::vector<int64_t> xl = load<int64_t>("x_len"), yl = load<int64_t>("y_len");
    run<scalar_t>(a, bedl::gpu::PaddedSequencePairs<scalar_t>{costs.data(), a.rows, a.cols, xl.data(), yl.data()});
  } else {
    const std::vector<scalar_t> table = load<scalar_t>("table");
    const std::vector<int64_t> xl = load<int64_t>("x_labels"), xp = load<int64_t>("x_ptr");
    const std::vector<int64_t> yl = load<int64_t>("y_labels"), yp = load<int64_t>("y_ptr");
    const std::vector<int64_t> px = load<int64_t>("pair_x"), py = load<int64_t>("pair_y");
    const bedl::gpu::SymbolSequencePairs<scalar_t> pairs{table.data(), a.table_rows, a.table_cols, xl.data(),
                                                         xp.data(),    yl.data(),    yp.data(),    px.data(),
                                                         py.data()};
    if (a.kind == "symbols_short") {
      run_short<scalar_t>(a, pairs);
    } else if (a.kind == "symbols_warp") {
      run_warp<scalar_t>(a, pairs);
    } else {
      run<scalar_t>(a, pairs);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: host_jobs DIR\n");
    return 2;
  }
  dir = argv[1];
  Args a;
  std::ifstream in(dir + "/args.txt");
  in >> a.kind >> a.dtype >> a.need_coopt >> a.rel_tol >> a.threads >> a.batch >> a.rows >> a.cols >> a.max_m >>
      a.max_n >> a.table_rows >> a.table_cols;
  if (!in) {
    std::fprintf(stderr, "bad args.txt\n");
    return 2;
  }
  if (a.dtype == "f64") {
    run_kind<double>(a);
  } else {
    run_kind<float>(a);
  }
  return 0;
}
