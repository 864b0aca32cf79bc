// The sequence kernels on CUDA: one thread per pair at a time, running the
// per-thread jobs of jobs.h (common/'s passes) with b from the thread index;
// symbol-table distances keep their rows in registers: a thread per pair of
// short sequences, a warp per pair of longer ones.
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

// The symbol table the block reads: copied to `shared` (16-byte aligned) where
// table_in_shared (the same for the whole block), else the one in global memory.
template <typename scalar_t>
__device__ const scalar_t* block_table(const SymbolSequencePairs<scalar_t>& pairs, bool table_in_shared,
                                       unsigned char* shared) {
  if (!table_in_shared) return pairs.table;
  scalar_t* copy = reinterpret_cast<scalar_t*>(shared);
  for (int64_t k = threadIdx.x; k < pairs.rows * pairs.cols; k += blockDim.x) copy[k] = pairs.table[k];
  __syncthreads();
  return copy;
}

// The register-row distance kernel of width N: each thread's y labels (and the
// table where it fits) in shared memory, then sequence_short_distances_thread.
template <int N, typename scalar_t>
__global__ void __launch_bounds__(kSequenceBlock)
    sequence_short_distances_kernel(SymbolSequencePairs<scalar_t> pairs, int64_t batch, bool table_in_shared,
                                    scalar_t* d) {
  extern __shared__ __align__(16) unsigned char shared[];
  int32_t* labels = reinterpret_cast<int32_t*>(shared);
  const scalar_t* table = block_table(pairs, table_in_shared, shared + short_labels_bytes(N));
  sequence_short_distances_thread<N>(pairs, table, batch, thread_index(),
                                     static_cast<int64_t>(gridDim.x) * blockDim.x, labels + threadIdx.x,
                                     kSequenceBlock, d);
}

// The warp-per-pair distance kernel of strip width N: warp w takes pairs
// w, w + warps, ...; its lanes step through each pass in lockstep, each step's
// left boundaries passed one lane up by a shuffle (jobs.h, SequenceStrip).
template <int N, typename scalar_t>
__global__ void __launch_bounds__(kSequenceBlock)
    sequence_warp_distances_kernel(SymbolSequencePairs<scalar_t> pairs, int64_t batch, bool table_in_shared,
                                   double* boundaries, int64_t boundary_stride, scalar_t* d) {
  extern __shared__ __align__(16) unsigned char shared[];
  const scalar_t* table = block_table(pairs, table_in_shared, shared);
  const int lane = static_cast<int>(threadIdx.x % kWarpLanes);
  const int64_t warp = thread_index() / kWarpLanes;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpLanes;
  double* boundary = boundaries + warp * boundary_stride;
  for (int64_t b = warp; b < batch; b += warps) {  // (the same pairs for every lane of the warp)
    SequenceStrip<N, scalar_t> strip;
    strip.start(pairs, table, b, lane);
    for (int64_t pass = 0; pass < strip.passes(); ++pass) {
      strip.begin_pass(pass);
      double sent = 0.0;
      for (int64_t s = 0; s <= strip.m + kWarpLanes - 1; ++s) {
        const double recv = __shfl_up_sync(0xffffffffu, sent, 1);
        sent = strip.lane_step(s, recv, boundary);
      }
      __syncwarp();  // (lane 31's boundary column, read by lane 0 in the next pass)
    }
    const double result = __shfl_sync(0xffffffffu, strip.result, strip.owner());
    if (lane == 0) d[b] = static_cast<scalar_t>(result);
  }
}

// The bytes of the symbol table's copy in a block's shared memory: the table's
// own where it takes at most kShortTableBytes, else 0 (read from global memory).
template <typename scalar_t>
int64_t shared_table_bytes(const SymbolSequencePairs<scalar_t>& pairs) {
  const int64_t bytes = pairs.rows * pairs.cols * static_cast<int64_t>(sizeof(scalar_t));
  return bytes <= kShortTableBytes ? bytes : 0;
}

template <int N, typename scalar_t>
cudaError_t launch_short_width(const SymbolSequencePairs<scalar_t>& pairs, int64_t batch, int64_t blocks,
                               scalar_t* d, cudaStream_t stream) {
  const int64_t table_bytes = shared_table_bytes(pairs);
  const bool table_in_shared = table_bytes > 0;
  const int64_t bytes = short_labels_bytes(N) + table_bytes;
  const auto kernel = sequence_short_distances_kernel<N, scalar_t>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (err != cudaSuccess) return err;
  kernel<<<static_cast<unsigned>(blocks), kSequenceBlock, static_cast<size_t>(bytes), stream>>>(pairs, batch,
                                                                                               table_in_shared, d);
  return cudaGetLastError();
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

template <typename scalar_t>
cudaError_t launch_sequence_short_distances(const SymbolSequencePairs<scalar_t>& pairs, int64_t batch, int width,
                                            int64_t blocks, scalar_t* d, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  switch (width) {
    case 8: return launch_short_width<8>(pairs, batch, blocks, d, stream);
    case 16: return launch_short_width<16>(pairs, batch, blocks, d, stream);
    case 32: return launch_short_width<32>(pairs, batch, blocks, d, stream);
    case 48: return launch_short_width<48>(pairs, batch, blocks, d, stream);
    case 64: return launch_short_width<64>(pairs, batch, blocks, d, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <int N, typename scalar_t>
cudaError_t launch_warp_width(const SymbolSequencePairs<scalar_t>& pairs, int64_t batch, int64_t blocks,
                              double* boundaries, int64_t boundary_stride, scalar_t* d, cudaStream_t stream) {
  const int64_t table_bytes = shared_table_bytes(pairs);
  sequence_warp_distances_kernel<N, scalar_t>
      <<<static_cast<unsigned>(blocks), kSequenceBlock, static_cast<size_t>(table_bytes), stream>>>(
          pairs, batch, table_bytes > 0, boundaries, boundary_stride, d);
  return cudaGetLastError();
}

template <typename scalar_t>
cudaError_t launch_sequence_warp_distances(const SymbolSequencePairs<scalar_t>& pairs, int64_t batch,
                                           int64_t blocks, double* boundaries, int64_t boundary_stride, scalar_t* d,
                                           int64_t max_n, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  switch (warp_strip_width(max_n)) {
    case 4: return launch_warp_width<4>(pairs, batch, blocks, boundaries, boundary_stride, d, stream);
    case 8: return launch_warp_width<8>(pairs, batch, blocks, boundaries, boundary_stride, d, stream);
    default: return launch_warp_width<16>(pairs, batch, blocks, boundaries, boundary_stride, d, stream);
  }
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

template cudaError_t launch_sequence_short_distances<float>(const SymbolSequencePairs<float>&, int64_t, int, int64_t,
                                                             float*, cudaStream_t);
template cudaError_t launch_sequence_short_distances<double>(const SymbolSequencePairs<double>&, int64_t, int,
                                                              int64_t, double*, cudaStream_t);
template cudaError_t launch_sequence_warp_distances<float>(const SymbolSequencePairs<float>&, int64_t, int64_t,
                                                            double*, int64_t, float*, int64_t, cudaStream_t);
template cudaError_t launch_sequence_warp_distances<double>(const SymbolSequencePairs<double>&, int64_t, int64_t,
                                                             double*, int64_t, double*, int64_t, cudaStream_t);
BEDL_SEQUENCE_SOFT_LAUNCHER(float)
BEDL_SEQUENCE_SOFT_LAUNCHER(double)
BEDL_SEQUENCE_LAUNCHERS(float)
BEDL_SEQUENCE_LAUNCHERS(double)

}  // namespace gpu
}  // namespace bedl
