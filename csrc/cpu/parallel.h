// The batch loop of the CPU kernels and the switch of their AVX2 paths.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define BEDL_X86_SIMD 1
#endif

namespace bedl {
namespace dp {

// Whether the AVX2 kernels run: the processor has AVX2 and set_simd_enabled
// has not turned them off (benchmarks and tests compare both paths; they give
// the same bits). The switch alone also gates the bit-vector sequence
// distances (seq/unit_bits.h), which need no AVX2.
inline std::atomic<bool>& simd_switch() {
  static std::atomic<bool> on{true};
  return on;
}
inline bool simd_avx2() {
#ifdef BEDL_X86_SIMD
  static const bool cpu = __builtin_cpu_supports("avx2");
  return cpu && simd_switch().load(std::memory_order_relaxed);
#else
  return false;
#endif
}

// Runs fn(begin, end, workspace) over pieces of the pairs, in parallel. Threads take
// pieces of consecutive pairs (about 16k DP cells each) from a shared counter:
// pairwise_distances sorts its pairs by size, and a fixed split into one range
// per thread gave one thread the large pairs (2 threads were 1.2-1.4x one on
// trees of 5-60 nodes). One workspace per thread, reused across its pairs. Each
// pair is computed by one thread from start to end, so results depend neither
// on the thread count nor on the schedule. Fewer threads below ~64k DP cells
// each: waking a thread for a few hundred cells costs more than it saves.
template <typename Workspace, typename Fn>
void for_each_piece(int64_t batch, int64_t cells_per_pair, const Fn& fn) {
  if (batch <= 0) return;
  const int64_t cells = std::max<int64_t>(1, cells_per_pair);
  const int64_t piece = std::max<int64_t>(1, (int64_t{1} << 14) / cells);  // pairs per piece
  const int64_t pieces = (batch + piece - 1) / piece;
  const double total_cells = static_cast<double>(batch) * static_cast<double>(cells);
  const int64_t by_work = static_cast<int64_t>(std::min(1e6, std::max(1.0, total_cells / 65536.0)));
  const int64_t threads = std::min<int64_t>({static_cast<int64_t>(at::get_num_threads()), pieces, by_work});
  if (threads <= 1) {
    Workspace ws;
    fn(int64_t{0}, batch, ws);
    return;
  }
  std::atomic<int64_t> next{0};
  at::parallel_for(0, threads, 1, [&](int64_t slot_begin, int64_t slot_end) {
    Workspace ws;
    for (int64_t slot = slot_begin; slot < slot_end; ++slot) {  // one slot per thread, usually
      for (int64_t k = next.fetch_add(1); k < pieces; k = next.fetch_add(1)) {
        fn(k * piece, std::min(batch, (k + 1) * piece), ws);
      }
    }
  });
}

// for_each_piece one pair at a time: fn(b, workspace).
template <typename Workspace, typename Fn>
void for_each_pair(int64_t batch, int64_t cells_per_pair, const Fn& fn) {
  for_each_piece<Workspace>(batch, cells_per_pair, [&](int64_t begin, int64_t end, Workspace& ws) {
    for (int64_t b = begin; b < end; ++b) fn(b, ws);
  });
}

}  // namespace dp
}  // namespace bedl
