// Compiles csrc/common's recurrence as device code (tests/test_common_headers.py
// runs nvcc on it where nvcc is found): every cell and carrier the GPU backend
// instantiates, in one kernel. Nothing here runs on the development machines.
#include "../../csrc/common/forest.h"
#include "../../csrc/common/sequence.h"
#include "../../csrc/common/weights.h"

namespace {

template <class W>
__device__ W weighted_cell(W up_total, W left_other, W source_total, W tdm_weight, uint8_t flags) {
  W by_del, other;
  bedl::ted::forest_weights(bedl::dp::CoOptimal{flags}, up_total, left_other, source_total, tdm_weight, by_del,
                            other);
  W soft_del, soft_other;
  bedl::dp::enter(bedl::dp::AllAlternatives{}, up_total, left_other, source_total * tdm_weight, soft_del, soft_other);
  return by_del + other + soft_del + soft_other;
}

}  // namespace

__global__ void common_cells(const double* in, const int64_t* leftmost, double* out, int64_t n) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= n) return;
  const bedl::dp::Tie tie{1e-9, 1.0, true};
  uint8_t flags = 0;
  const double tree = bedl::ted::forest_value_flags<true>(tie, in[0], in[1], in[2], in[3], in[4], in[5], flags);
  const double general = bedl::ted::forest_value_flags<false>(tie, in[0], in[1], in[2], in[3], in[4], in[5], flags);
  const double seq = bedl::sed::sequence_value_flags(tie, in[0], in[1], in[2], in[3], in[4], in[5], flags);
  const bedl::ted::ForestTable table(leftmost, leftmost, 3, 3);
  const bedl::ted::ForestRow row(table, 2, 4);
  const int64_t source = row.source(leftmost[2], row.defines_tdm(leftmost[2]), 0);
  const bedl::dp::FastCount fast = weighted_cell(bedl::dp::FastCount{in[0]}, bedl::dp::FastCount{in[1]},
                                                 bedl::dp::FastCount{in[2]}, bedl::dp::FastCount{in[3]}, flags);
  const bedl::dp::Count exact = weighted_cell(bedl::dp::Count::one(), bedl::dp::Count::one(), bedl::dp::Count::one(),
                                              bedl::dp::Count::one(), flags);
  const bedl::soft::PlainWeight plain = weighted_cell(bedl::soft::PlainWeight{in[0]}, bedl::soft::PlainWeight{in[1]},
                                                      bedl::soft::PlainWeight{in[2]}, bedl::soft::PlainWeight{in[3]},
                                                      flags);
  const bedl::soft::WideWeight wide = weighted_cell(bedl::soft::WideWeight::one(), bedl::soft::WideWeight::one(),
                                                    bedl::soft::WideWeight::one(), bedl::soft::WideWeight::one(), flags);
  out[k] = tree + general + seq + static_cast<double>(source) + fast.m + bedl::dp::ratio(exact, exact) + plain.m +
           wide.m + bedl::ted::leaf_tdm_value(in[0], in[1]);
}
