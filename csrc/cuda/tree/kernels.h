// Launcher of the tree distance kernel on a CUDA stream: raw device pointers
// and sizes in, no torch (kernels.cu compiles with nvcc alone). It runs
// `threads` GPU threads over the batch (jobs.h), `workspace` holding each
// thread's fd and tdm tables.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "jobs.h"

namespace bedl {
namespace gpu {

// Distances of `batch` pairs into d (status per pair); workspace:
// threads * tree_distance_workspace(max_m, max_n) doubles.
template <typename scalar_t, class Pairs>
cudaError_t launch_tree_distances(const Pairs& pairs, int64_t batch, int64_t threads, double* workspace,
                                  int64_t max_m, int64_t max_n, scalar_t* d, int32_t* status, cudaStream_t stream);

// Threads per block of the tree kernel.
constexpr int kTreeBlock = 128;

}  // namespace gpu
}  // namespace bedl
