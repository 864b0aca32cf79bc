// The sequence kernels on CUDA: one thread per pair at a time, running the
// per-thread jobs of jobs.h (common/'s passes) with b from the thread index.
#include "kernels.h"

namespace bedl {
namespace gpu {
namespace {

__device__ int64_t thread_index() { return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; }

template <typename scalar_t, class Pairs>
__global__ void __launch_bounds__(kSequenceBlock)
    sequence_distances_kernel(Pairs pairs, int64_t batch, int64_t threads, double* workspace, int64_t max_n,
                              scalar_t* d, int32_t* status) {
  const int64_t thread = thread_index();
  if (thread >= threads) return;  // (the last block's spare threads: no workspace)
  sequence_distances_thread(pairs, batch, thread, threads, workspace + thread * distance_workspace(max_n), max_n, d,
                            status);
}

template <typename Count, typename scalar_t, class Pairs>
__global__ void __launch_bounds__(kSequenceBlock)
    sequence_coopt_kernel(Pairs pairs, const int64_t* order, int64_t count, int64_t threads, char* workspace,
                          int64_t max_m, int64_t max_n, double rel_tol, scalar_t* d, scalar_t* p, int64_t rows,
                          int64_t cols, int32_t* status) {
  const int64_t thread = thread_index();
  if (thread >= threads) return;
  sequence_coopt_thread<Count>(pairs, order, count, thread, threads,
                               workspace + thread * coopt_workspace_bytes<Count>(max_m, max_n), max_m, max_n,
                               rel_tol, d, p, rows, cols, status);
}

template <typename scalar_t>
__global__ void __launch_bounds__(kSequenceBlock)
    sequence_soft_kernel(PaddedSequencePairs<scalar_t> pairs, int64_t batch, int64_t threads, char* workspace,
                         int64_t max_m, int64_t max_n, double temperature, bool need_grad, scalar_t* d, scalar_t* p,
                         int32_t* status) {
  const int64_t thread = thread_index();
  if (thread >= threads) return;
  sequence_soft_thread(pairs, batch, thread, threads, workspace + thread * sequence_soft_workspace_bytes(max_m, max_n),
                       max_m, max_n, temperature, need_grad, d, p, status);
}

unsigned blocks_for(int64_t threads) {
  return static_cast<unsigned>((threads + kSequenceBlock - 1) / kSequenceBlock);
}

}  // namespace

template <typename scalar_t, class Pairs>
cudaError_t launch_sequence_distances(const Pairs& pairs, int64_t batch, int64_t threads, double* workspace,
                                      int64_t max_n, scalar_t* d, int32_t* status, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  sequence_distances_kernel<scalar_t><<<blocks_for(threads), kSequenceBlock, 0, stream>>>(pairs, batch, threads,
                                                                                          workspace, max_n, d, status);
  return cudaGetLastError();
}

template <typename Count, typename scalar_t, class Pairs>
cudaError_t launch_sequence_coopt(const Pairs& pairs, const int64_t* order, int64_t count, int64_t threads,
                                  char* workspace, int64_t max_m, int64_t max_n, double rel_tol, scalar_t* d,
                                  scalar_t* p, int64_t rows, int64_t cols, int32_t* status, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  sequence_coopt_kernel<Count, scalar_t><<<blocks_for(threads), kSequenceBlock, 0, stream>>>(
      pairs, order, count, threads, workspace, max_m, max_n, rel_tol, d, p, rows, cols, status);
  return cudaGetLastError();
}

template <typename scalar_t>
cudaError_t launch_sequence_soft(const PaddedSequencePairs<scalar_t>& pairs, int64_t batch, int64_t threads,
                                 char* workspace, int64_t max_m, int64_t max_n, double temperature, bool need_grad,
                                 scalar_t* d, scalar_t* p, int32_t* status, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  sequence_soft_kernel<scalar_t><<<blocks_for(threads), kSequenceBlock, 0, stream>>>(
      pairs, batch, threads, workspace, max_m, max_n, temperature, need_grad, d, p, status);
  return cudaGetLastError();
}

#define BEDL_SEQUENCE_LAUNCHERS(scalar_t)                                                                         \
  template cudaError_t launch_sequence_distances<scalar_t, PaddedSequencePairs<scalar_t>>(                        \
      const PaddedSequencePairs<scalar_t>&, int64_t, int64_t, double*, int64_t, scalar_t*, int32_t*, cudaStream_t); \
  template cudaError_t launch_sequence_distances<scalar_t, SymbolSequencePairs<scalar_t>>(                        \
      const SymbolSequencePairs<scalar_t>&, int64_t, int64_t, double*, int64_t, scalar_t*, int32_t*, cudaStream_t); \
  template cudaError_t launch_sequence_coopt<dp::FastCount, scalar_t, PaddedSequencePairs<scalar_t>>(             \
      const PaddedSequencePairs<scalar_t>&, const int64_t*, int64_t, int64_t, char*, int64_t, int64_t, double,   \
      scalar_t*, scalar_t*, int64_t, int64_t, int32_t*, cudaStream_t);                                             \
  template cudaError_t launch_sequence_coopt<dp::Count, scalar_t, PaddedSequencePairs<scalar_t>>(                 \
      const PaddedSequencePairs<scalar_t>&, const int64_t*, int64_t, int64_t, char*, int64_t, int64_t, double,   \
      scalar_t*, scalar_t*, int64_t, int64_t, int32_t*, cudaStream_t);                                             \
  template cudaError_t launch_sequence_coopt<dp::FastCount, scalar_t, SymbolSequencePairs<scalar_t>>(             \
      const SymbolSequencePairs<scalar_t>&, const int64_t*, int64_t, int64_t, char*, int64_t, int64_t, double,   \
      scalar_t*, scalar_t*, int64_t, int64_t, int32_t*, cudaStream_t);                                             \
  template cudaError_t launch_sequence_coopt<dp::Count, scalar_t, SymbolSequencePairs<scalar_t>>(                 \
      const SymbolSequencePairs<scalar_t>&, const int64_t*, int64_t, int64_t, char*, int64_t, int64_t, double,   \
      scalar_t*, scalar_t*, int64_t, int64_t, int32_t*, cudaStream_t);

#define BEDL_SEQUENCE_SOFT_LAUNCHER(scalar_t)                                                                     \
  template cudaError_t launch_sequence_soft<scalar_t>(const PaddedSequencePairs<scalar_t>&, int64_t, int64_t, char*, \
                                                      int64_t, int64_t, double, bool, scalar_t*, scalar_t*, int32_t*, \
                                                      cudaStream_t);

BEDL_SEQUENCE_SOFT_LAUNCHER(float)
BEDL_SEQUENCE_SOFT_LAUNCHER(double)
BEDL_SEQUENCE_LAUNCHERS(float)
BEDL_SEQUENCE_LAUNCHERS(double)

}  // namespace gpu
}  // namespace bedl
