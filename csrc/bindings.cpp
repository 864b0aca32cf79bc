// The only file that knows pybind11: exposes the kernels as bedl_torch._C.
#include <torch/extension.h>

#include "edit_distance.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "bedl_torch kernels: edit distances and co-optimal alignment matrices";
  m.def("ted_cpu", &bedl::ted_cpu,
        "Tree edit distances (and co-optimal matrices) of a batch of pairs", py::arg("costs"),
        py::arg("x_sizes"), py::arg("x_ptr"), py::arg("y_sizes"), py::arg("y_ptr"),
        py::arg("pair_x"), py::arg("pair_y"), py::arg("need_coopt"), py::arg("rel_tol"));
  m.def("sed_cpu", &bedl::sed_cpu,
        "Sequence edit distances (and co-optimal matrices) of a batch of pairs", py::arg("costs"),
        py::arg("x_len"), py::arg("y_len"), py::arg("need_coopt"), py::arg("rel_tol"));
  m.def("ted_symbols_cpu", &bedl::ted_symbols_cpu,
        "Tree edit distances with costs from a symbol cost table", py::arg("symbol_costs"),
        py::arg("x_labels"), py::arg("x_sizes"), py::arg("x_ptr"), py::arg("y_labels"),
        py::arg("y_sizes"), py::arg("y_ptr"), py::arg("pair_x"), py::arg("pair_y"),
        py::arg("need_coopt"), py::arg("rel_tol"));
  m.def("set_simd_enabled", &bedl::set_simd_enabled,
        "Turn the AVX2 kernels on or off (same results; for tests and benchmarks)", py::arg("on"));
  m.def("simd_enabled", &bedl::simd_enabled, "Whether the AVX2 kernels run");
  m.def("sed_symbols_cpu", &bedl::sed_symbols_cpu,
        "Sequence edit distances with costs from a symbol cost table", py::arg("symbol_costs"),
        py::arg("x_labels"), py::arg("x_ptr"), py::arg("y_labels"), py::arg("y_ptr"),
        py::arg("pair_x"), py::arg("pair_y"), py::arg("need_coopt"), py::arg("rel_tol"));
  m.attr("torch_version") = TORCH_VERSION;
}
