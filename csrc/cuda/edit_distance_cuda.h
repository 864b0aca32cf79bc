// The CUDA implementations of the operators of edit_distance.h (same
// arguments, same results: distances bit for bit, P within the tie rule's
// bits, see docs/gpu.md). Costs, symbol tables and outputs live on one GPU;
// index tensors may be on the host or that GPU.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <tuple>

namespace bedl {

std::tuple<at::Tensor, at::Tensor> sed_cuda(const at::Tensor& costs, const at::Tensor& x_len,
                                            const at::Tensor& y_len, bool need_coopt, double rel_tol);

std::tuple<at::Tensor, at::Tensor> sed_symbols_cuda(const at::Tensor& symbol_costs, const at::Tensor& x_labels,
                                                    const at::Tensor& x_ptr, const at::Tensor& y_labels,
                                                    const at::Tensor& y_ptr, const at::Tensor& pair_x,
                                                    const at::Tensor& pair_y, bool need_coopt, double rel_tol,
                                                    const std::optional<at::Tensor>& max_distance);

std::tuple<at::Tensor, at::Tensor> ted_cuda(const at::Tensor& costs, const at::Tensor& x_sizes,
                                            const at::Tensor& x_ptr, const at::Tensor& y_sizes,
                                            const at::Tensor& y_ptr, const at::Tensor& pair_x,
                                            const at::Tensor& pair_y, bool need_coopt, double rel_tol);

std::tuple<at::Tensor, at::Tensor> ted_symbols_cuda(const at::Tensor& symbol_costs, const at::Tensor& x_labels,
                                                    const at::Tensor& x_sizes, const at::Tensor& x_ptr,
                                                    const at::Tensor& y_labels, const at::Tensor& y_sizes,
                                                    const at::Tensor& y_ptr, const at::Tensor& pair_x,
                                                    const at::Tensor& pair_y, bool need_coopt, double rel_tol,
                                                    const std::optional<at::Tensor>& max_distance);

// The soft distances and their expected alignments (padded costs): the CPU's
// sums; exp and log round as the GPU's math library does (docs/gpu.md).
std::tuple<at::Tensor, at::Tensor> sed_soft_cuda(const at::Tensor& costs, const at::Tensor& x_len,
                                                 const at::Tensor& y_len, double temperature, bool need_grad);

std::tuple<at::Tensor, at::Tensor> ted_soft_cuda(const at::Tensor& costs, const at::Tensor& x_sizes,
                                                 const at::Tensor& x_ptr, const at::Tensor& y_sizes,
                                                 const at::Tensor& y_ptr, const at::Tensor& pair_x,
                                                 const at::Tensor& pair_y, double temperature, bool need_grad);

// The operators registered for the CUDA dispatch key here; the others have CUDA
// implementations in Python (bedl_torch/_cuda_fallbacks.py).
inline const char* const kCudaOperators[] = {"sed", "sed_symbols", "ted", "ted_symbols", "sed_soft", "ted_soft"};

}  // namespace bedl
