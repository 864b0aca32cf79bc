// Registers the CUDA kernels for the CUDA dispatch key: a call with CUDA costs
// runs on that GPU. Built only where setup.py finds nvcc and a CUDA torch.
#include <torch/library.h>

#include "edit_distance_cuda.h"

TORCH_LIBRARY_IMPL(bedl_torch, CUDA, m) {
  m.impl("sed", &bedl::sed_cuda);
  m.impl("sed_symbols", &bedl::sed_symbols_cuda);
  m.impl("ted", &bedl::ted_cuda);
  m.impl("ted_symbols", &bedl::ted_symbols_cuda);
  m.impl("sed_soft", &bedl::sed_soft_cuda);
  m.impl("ted_soft", &bedl::ted_soft_cuda);
}
