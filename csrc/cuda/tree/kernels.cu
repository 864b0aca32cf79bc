// The tree kernels on CUDA: one thread per pair at a time, running the
// per-thread jobs of jobs.h (common/forest_passes.h for distances,
// common/forest_coopt.h for P) with b from the thread index; and symbol-table
// distances in lane groups, a warp per group (jobs.h: tree_lane_job).
#include "kernels.h"

namespace bedl {
namespace gpu {
namespace {

template <typename scalar_t, class Pairs>
__global__ void __launch_bounds__(kTreeBlock)
    tree_distances_kernel(Pairs pairs, const int64_t* order, int64_t count, int64_t threads, double* workspace,
                          int64_t max_m, int64_t max_n, scalar_t* d, int32_t* status) {
  const int64_t thread = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (thread >= threads) return;  // (the last block's spare threads: no workspace)
  tree_distances_thread(pairs, order, count, thread, threads,
                        workspace + thread * tree_distance_workspace(max_m, max_n), max_m, max_n, d, status);
}

// Warp w takes groups first + w, first + w + warps, ...; lane l of the warp
// runs lane l of each on the warp's arrays.
template <typename scalar_t>
__global__ void __launch_bounds__(kTreeBlock)
    tree_lanes_kernel(SymbolTreePairs<scalar_t> pairs, WideTrees wide, LaneGroups groups, int64_t first,
                      int64_t count, int64_t warps, char* workspace, int64_t group_bytes, scalar_t* d,
                      int32_t* status) {
  const int64_t thread = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t warp = thread / ted::kLaneStride, lane = thread % ted::kLaneStride;
  if (warp >= warps) return;  // (whole warps: blocks are whole warps)
  for (int64_t g = first + warp; g < first + count; g += warps) {
    tree_lane_job(pairs, wide, groups, g, lane, workspace + warp * group_bytes, d, status);
  }
}

template <typename Count, typename scalar_t, class Pairs>
__global__ void __launch_bounds__(kTreeBlock)
    tree_coopt_kernel(Pairs pairs, const int64_t* order, int64_t count, int64_t threads, char* workspace,
                      int64_t max_m, int64_t max_n, double rel_tol, scalar_t* d, scalar_t* p, int64_t rows,
                      int64_t cols, int32_t* status) {
  const int64_t thread = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (thread >= threads) return;
  tree_coopt_thread<Count>(pairs, order, count, thread, threads,
                           workspace + thread * tree_coopt_workspace_bytes<Count>(max_m, max_n), max_m, max_n,
                           rel_tol, d, p, rows, cols, status);
}

template <typename scalar_t>
__global__ void __launch_bounds__(kTreeBlock)
    tree_soft_kernel(PaddedTreePairs<scalar_t> pairs, int64_t batch, int64_t threads, char* workspace, int64_t max_m,
                     int64_t max_n, double temperature, bool need_grad, scalar_t* d, scalar_t* p, int32_t* status) {
  const int64_t thread = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (thread >= threads) return;
  tree_soft_thread(pairs, batch, thread, threads, workspace + thread * tree_soft_workspace_bytes(max_m, max_n), max_m,
                   max_n, temperature, need_grad, d, p, status);
}

}  // namespace

template <typename scalar_t, class Pairs>
cudaError_t launch_tree_distances(const Pairs& pairs, const int64_t* order, int64_t count, int64_t threads,
                                  double* workspace, int64_t max_m, int64_t max_n, scalar_t* d, int32_t* status,
                                  cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((threads + kTreeBlock - 1) / kTreeBlock);
  tree_distances_kernel<scalar_t><<<blocks, kTreeBlock, 0, stream>>>(pairs, order, count, threads, workspace,
                                                                    max_m, max_n, d, status);
  return cudaGetLastError();
}

template <typename scalar_t>
cudaError_t launch_tree_lanes(const SymbolTreePairs<scalar_t>& pairs, const WideTrees& wide, const LaneGroups& groups,
                              int64_t first, int64_t count, int64_t warps, char* workspace, int64_t group_bytes,
                              scalar_t* d, int32_t* status, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const int64_t threads = warps * ted::kLaneStride;
  const unsigned blocks = static_cast<unsigned>((threads + kTreeBlock - 1) / kTreeBlock);
  tree_lanes_kernel<scalar_t><<<blocks, kTreeBlock, 0, stream>>>(pairs, wide, groups, first, count, warps, workspace,
                                                                group_bytes, d, status);
  return cudaGetLastError();
}

template <typename Count, typename scalar_t, class Pairs>
cudaError_t launch_tree_coopt(const Pairs& pairs, const int64_t* order, int64_t count, int64_t threads,
                              char* workspace, int64_t max_m, int64_t max_n, double rel_tol, scalar_t* d, scalar_t* p,
                              int64_t rows, int64_t cols, int32_t* status, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((threads + kTreeBlock - 1) / kTreeBlock);
  tree_coopt_kernel<Count, scalar_t><<<blocks, kTreeBlock, 0, stream>>>(pairs, order, count, threads, workspace,
                                                                       max_m, max_n, rel_tol, d, p, rows, cols,
                                                                       status);
  return cudaGetLastError();
}

template <typename scalar_t>
cudaError_t launch_tree_soft(const PaddedTreePairs<scalar_t>& pairs, int64_t batch, int64_t threads, char* workspace,
                             int64_t max_m, int64_t max_n, double temperature, bool need_grad, scalar_t* d,
                             scalar_t* p, int32_t* status, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((threads + kTreeBlock - 1) / kTreeBlock);
  tree_soft_kernel<scalar_t><<<blocks, kTreeBlock, 0, stream>>>(pairs, batch, threads, workspace, max_m, max_n,
                                                                temperature, need_grad, d, p, status);
  return cudaGetLastError();
}

#define BEDL_TREE_COOPT_LAUNCHER(Count, scalar_t, Pairs)                                                      \
  template cudaError_t launch_tree_coopt<Count, scalar_t, Pairs>(const Pairs&, const int64_t*, int64_t, int64_t, \
                                                                 char*, int64_t, int64_t, double, scalar_t*,   \
                                                                 scalar_t*, int64_t, int64_t, int32_t*,        \
                                                                 cudaStream_t);

#define BEDL_TREE_LAUNCHERS(scalar_t)                                                                         \
  template cudaError_t launch_tree_distances<scalar_t, PaddedTreePairs<scalar_t>>(                            \
      const PaddedTreePairs<scalar_t>&, const int64_t*, int64_t, int64_t, double*, int64_t, int64_t, scalar_t*, \
      int32_t*, cudaStream_t);                                                                                \
  template cudaError_t launch_tree_distances<scalar_t, SymbolTreePairs<scalar_t>>(                            \
      const SymbolTreePairs<scalar_t>&, const int64_t*, int64_t, int64_t, double*, int64_t, int64_t, scalar_t*, \
      int32_t*, cudaStream_t);                                                                                \
  template cudaError_t launch_tree_lanes<scalar_t>(const SymbolTreePairs<scalar_t>&, const WideTrees&,           \
                                                   const LaneGroups&, int64_t, int64_t, int64_t, char*, int64_t, \
                                                   scalar_t*, int32_t*, cudaStream_t);                          \
  BEDL_TREE_COOPT_LAUNCHER(dp::FastCount, scalar_t, PaddedTreePairs<scalar_t>)                                \
  BEDL_TREE_COOPT_LAUNCHER(dp::Count, scalar_t, PaddedTreePairs<scalar_t>)                                    \
  BEDL_TREE_COOPT_LAUNCHER(dp::FastCount, scalar_t, SymbolTreePairs<scalar_t>)                                \
  BEDL_TREE_COOPT_LAUNCHER(dp::Count, scalar_t, SymbolTreePairs<scalar_t>)                                    \
  template cudaError_t launch_tree_soft<scalar_t>(const PaddedTreePairs<scalar_t>&, int64_t, int64_t, char*,      \
                                                  int64_t, int64_t, double, bool, scalar_t*, scalar_t*, int32_t*, \
                                                  cudaStream_t);

BEDL_TREE_LAUNCHERS(float)
BEDL_TREE_LAUNCHERS(double)

}  // namespace gpu
}  // namespace bedl
