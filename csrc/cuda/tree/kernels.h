// Launchers of the tree kernels on a CUDA stream: raw device pointers and
// sizes in, no torch (kernels.cu compiles with nvcc alone). Each runs
// `threads` GPU threads over the batch (jobs.h), `workspace` holding each
// thread's tables.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "jobs.h"

namespace bedl {
namespace gpu {

// Distances of the pairs order[0 .. count) (nullptr: 0 .. count) into d
// (status per pair); workspace: threads * tree_distance_workspace(max_m, max_n) doubles.
template <typename scalar_t, class Pairs>
cudaError_t launch_tree_distances(const Pairs& pairs, const int64_t* order, int64_t count, int64_t threads,
                                  double* workspace, int64_t max_m, int64_t max_n, scalar_t* d, int32_t* status,
                                  cudaStream_t stream);

// Distances of the lane groups first .. first + count (cuda/tree/lanes_plan.h)
// on `warps` warps into d (status per pair); workspace: warps * group_bytes
// bytes, group_bytes at least wide_group_bytes of every group of the launch.
template <typename scalar_t>
cudaError_t launch_tree_lanes(const SymbolTreePairs<scalar_t>& pairs, const WideTrees& wide, const LaneGroups& groups,
                              int64_t first, int64_t count, int64_t warps, char* workspace, int64_t group_bytes,
                              scalar_t* d, int32_t* status, cudaStream_t stream);

// Distances and P of the pairs order[0 .. count) (nullptr: 0 .. count) into
// d and p (zero on entry), counts of type Count (jobs.h: tree_coopt_thread);
// workspace: threads * tree_coopt_workspace_bytes<Count>(max_m, max_n) bytes.
template <typename Count, typename scalar_t, class Pairs>
cudaError_t launch_tree_coopt(const Pairs& pairs, const int64_t* order, int64_t count, int64_t threads,
                              char* workspace, int64_t max_m, int64_t max_n, double rel_tol, scalar_t* d, scalar_t* p,
                              int64_t rows, int64_t cols, int32_t* status, cudaStream_t stream);

// Soft distances (and with need_grad the expected alignments into p, zero on
// entry, the costs' layout) of padded pairs at `temperature`; workspace:
// threads * tree_soft_workspace_bytes(max_m, max_n) bytes.
template <typename scalar_t>
cudaError_t launch_tree_soft(const PaddedTreePairs<scalar_t>& pairs, int64_t batch, int64_t threads, char* workspace,
                             int64_t max_m, int64_t max_n, double temperature, bool need_grad, scalar_t* d,
                             scalar_t* p, int32_t* status, cudaStream_t stream);

// Threads per block of the tree kernel.
constexpr int kTreeBlock = 128;

}  // namespace gpu
}  // namespace bedl
