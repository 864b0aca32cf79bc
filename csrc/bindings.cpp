// The only file that knows Python: registers the kernels as torch operators
// (torch.ops.bedl_torch.*, schemas on tensors, CPU implementations) and keeps
// a small pybind11 module bedl_torch._C for loading the library and the
// switches that are not operators.
#include <torch/extension.h>
#include <torch/library.h>

#include "edit_distance.h"

TORCH_LIBRARY(bedl_torch, m) {
  m.def("ted(Tensor costs, Tensor x_sizes, Tensor x_ptr, Tensor y_sizes, Tensor y_ptr, "
        "Tensor pair_x, Tensor pair_y, bool need_coopt, float rel_tol) -> (Tensor, Tensor)");
  m.def("ted_symbols(Tensor symbol_costs, Tensor x_labels, Tensor x_sizes, Tensor x_ptr, "
        "Tensor y_labels, Tensor y_sizes, Tensor y_ptr, Tensor pair_x, Tensor pair_y, "
        "bool need_coopt, float rel_tol, Tensor? max_distance=None) -> (Tensor, Tensor)");
  m.def("sed(Tensor costs, Tensor x_len, Tensor y_len, bool need_coopt, float rel_tol) -> (Tensor, Tensor)");
  m.def("sed_symbols(Tensor symbol_costs, Tensor x_labels, Tensor x_ptr, Tensor y_labels, Tensor y_ptr, "
        "Tensor pair_x, Tensor pair_y, bool need_coopt, float rel_tol, Tensor? max_distance=None) -> (Tensor, Tensor)");
  m.def("ted_symbols_grad(Tensor symbol_costs, Tensor x_labels, Tensor x_sizes, Tensor x_ptr, "
        "Tensor y_labels, Tensor y_sizes, Tensor y_ptr, Tensor pair_x, Tensor pair_y, "
        "Tensor pair_weights, float rel_tol) -> Tensor");
  m.def("sed_symbols_grad(Tensor symbol_costs, Tensor x_labels, Tensor x_ptr, Tensor y_labels, "
        "Tensor y_ptr, Tensor pair_x, Tensor pair_y, Tensor pair_weights, float rel_tol) -> Tensor");
  m.def("ted_symbols_sums(Tensor symbol_costs, Tensor x_labels, Tensor x_sizes, Tensor x_ptr, "
        "Tensor y_labels, Tensor y_sizes, Tensor y_ptr, Tensor pair_x, Tensor pair_y, float rel_tol, "
        "int max_entries) -> (Tensor, Tensor, Tensor, Tensor)");
  m.def("sed_symbols_sums(Tensor symbol_costs, Tensor x_labels, Tensor x_ptr, Tensor y_labels, Tensor y_ptr, "
        "Tensor pair_x, Tensor pair_y, float rel_tol, int max_entries) -> (Tensor, Tensor, Tensor, Tensor)");
  m.def("weighted_pair_sums(Tensor sum_ptr, Tensor sum_entry, Tensor sum_value, Tensor pair_weights, "
        "int symbols) -> Tensor");
  m.def("ted_soft(Tensor costs, Tensor x_sizes, Tensor x_ptr, Tensor y_sizes, Tensor y_ptr, "
        "Tensor pair_x, Tensor pair_y, float temperature, bool need_grad) -> (Tensor, Tensor)");
  m.def("sed_soft(Tensor costs, Tensor x_len, Tensor y_len, float temperature, bool need_grad) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(bedl_torch, CPU, m) {
  m.impl("ted", &bedl::ted_cpu);
  m.impl("ted_symbols", &bedl::ted_symbols_cpu);
  m.impl("sed", &bedl::sed_cpu);
  m.impl("sed_symbols", &bedl::sed_symbols_cpu);
  m.impl("ted_symbols_grad", &bedl::ted_symbols_grad_cpu);
  m.impl("sed_symbols_grad", &bedl::sed_symbols_grad_cpu);
  m.impl("ted_symbols_sums", &bedl::ted_symbols_sums_cpu);
  m.impl("sed_symbols_sums", &bedl::sed_symbols_sums_cpu);
  m.impl("weighted_pair_sums", &bedl::weighted_pair_sums_cpu);
  m.impl("ted_soft", &bedl::ted_soft_cpu);
  m.impl("sed_soft", &bedl::sed_soft_cpu);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "bedl_torch kernels: the operators live in torch.ops.bedl_torch once this module is loaded";
  m.def("set_simd_enabled", &bedl::set_simd_enabled,
        "Turn the AVX2 kernels on or off (same results; for tests and benchmarks)", py::arg("on"));
  m.def("simd_enabled", &bedl::simd_enabled, "Whether the AVX2 kernels run");
  m.attr("torch_version") = TORCH_VERSION;
}
