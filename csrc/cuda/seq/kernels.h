// Launchers of the sequence kernels on a CUDA stream: raw device pointers and
// sizes in, no torch (kernels.cu compiles with nvcc alone). Each runs `threads`
// GPU threads over the batch (jobs.h), `workspace` holding each thread's slice.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "jobs.h"

namespace bedl {
namespace gpu {

// Distances of `batch` pairs into d (status per pair); workspace:
// threads * distance_workspace(max_n) doubles.
template <typename scalar_t, class Pairs>
cudaError_t launch_sequence_distances(const Pairs& pairs, int64_t batch, int64_t threads, double* workspace,
                                      int64_t max_n, scalar_t* d, int32_t* status, cudaStream_t stream);

// Distances and P (p: batch x rows x cols, zero on entry) of the pairs
// order[0 .. count) (order == nullptr: pairs 0 .. count - 1) with counts of
// type Count; workspace: threads * coopt_workspace_bytes<Count>(max_m, max_n) bytes.
template <typename Count, typename scalar_t, class Pairs>
cudaError_t launch_sequence_coopt(const Pairs& pairs, const int64_t* order, int64_t count, int64_t threads,
                                  char* workspace, int64_t max_m, int64_t max_n, double rel_tol, scalar_t* d,
                                  scalar_t* p, int64_t rows, int64_t cols, int32_t* status, cudaStream_t stream);

// Soft distances (and with need_grad the expected alignments into p, zero on
// entry, the costs' layout) of padded pairs at `temperature`; workspace:
// threads * sequence_soft_workspace_bytes(max_m, max_n) bytes.
template <typename scalar_t>
cudaError_t launch_sequence_soft(const PaddedSequencePairs<scalar_t>& pairs, int64_t batch, int64_t threads,
                                 char* workspace, int64_t max_m, int64_t max_n, double temperature, bool need_grad,
                                 scalar_t* d, scalar_t* p, int32_t* status, cudaStream_t stream);

// Symbol-table distances of `batch` pairs whose y have at most `width`
// symbols (short_sequence_width of the longest) into d, the row in registers,
// on `blocks` blocks of kSequenceBlock threads.
template <typename scalar_t>
cudaError_t launch_sequence_short_distances(const SymbolSequencePairs<scalar_t>& pairs, int64_t batch, int width,
                                            int64_t blocks, scalar_t* d, cudaStream_t stream);

// Symbol-table distances of `batch` pairs into d, a warp per pair (its lanes
// strips of warp_strip_width(max_n) columns), on `blocks` blocks of
// kSequenceBlock threads; boundaries: boundary_stride (>= max_m + 1) doubles
// per warp, read where a y is longer than one pass (32 strips).
template <typename scalar_t>
cudaError_t launch_sequence_warp_distances(const SymbolSequencePairs<scalar_t>& pairs, int64_t batch,
                                           int64_t blocks, double* boundaries, int64_t boundary_stride, scalar_t* d,
                                           int64_t max_n, cudaStream_t stream);

// Threads per block of these kernels.
constexpr int kSequenceBlock = 128;

// The register-row kernel's shared memory: each thread's y labels, then the
// table where it takes at most kShortTableBytes (else it is read from global
// memory; the warp kernel keeps only the table there, by the same rule).
constexpr int64_t kShortTableBytes = 32 << 10;
BEDL_HD constexpr int64_t short_labels_bytes(int width) { return int64_t{4} * width * kSequenceBlock; }

}  // namespace gpu
}  // namespace bedl
