// The only file that knows Python: registers the kernels as torch operators
// (torch.ops.bedl_torch.*, schemas on tensors, CPU implementations) and keeps
// a small pybind11 module bedl_torch._C for loading the library and the
// switches that are not operators.
#include <torch/extension.h>
#include <torch/library.h>

#include "cpu/inputs.h"
#include "cpu/tree/flat.h"
#include "edit_distance.h"
#ifdef BEDL_WITH_CUDA
#include "cuda/edit_distance_cuda.h"
#endif

TORCH_LIBRARY(bedl_torch, m) {
  m.def("ted(Tensor costs, Tensor x_sizes, Tensor x_ptr, Tensor y_sizes, Tensor y_ptr, "
        "Tensor pair_x, Tensor pair_y, bool need_coopt, float rel_tol) -> (Tensor, Tensor)");
  m.def("ted_symbols(Tensor symbol_costs, Tensor x_labels, Tensor x_sizes, Tensor x_ptr, "
        "Tensor y_labels, Tensor y_sizes, Tensor y_ptr, Tensor pair_x, Tensor pair_y, "
        "bool need_coopt, float rel_tol, Tensor? max_distance=None) -> (Tensor, Tensor)");
  m.def("sed(Tensor costs, Tensor x_len, Tensor y_len, bool need_coopt, float rel_tol) -> (Tensor, Tensor)");
  m.def("sed_symbols(Tensor symbol_costs, Tensor x_labels, Tensor x_ptr, Tensor y_labels, Tensor y_ptr, "
        "Tensor pair_x, Tensor pair_y, bool need_coopt, float rel_tol, Tensor? max_distance=None) -> (Tensor, Tensor)");
  m.def("sed_unit(Tensor x_labels, Tensor x_ptr, Tensor y_labels, Tensor y_ptr, Tensor pair_x, Tensor pair_y) "
        "-> Tensor");
  m.def("sed_unit_matrix(Tensor x_labels, Tensor x_ptr, Tensor y_labels, Tensor y_ptr, int row_begin, "
        "int row_end, bool triangle, ScalarType dtype) -> Tensor");
  m.def("knn_merge_dense(Tensor(a!) best_d, Tensor(b!) best_i, Tensor block, int row0, int col0, bool partners, "
        "bool drop_diagonal) -> ()");
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
        "int rows, int cols) -> Tensor");
  m.def("ted_soft(Tensor costs, Tensor x_sizes, Tensor x_ptr, Tensor y_sizes, Tensor y_ptr, "
        "Tensor pair_x, Tensor pair_y, float temperature, bool need_grad) -> (Tensor, Tensor)");
  m.def("sed_soft(Tensor costs, Tensor x_len, Tensor y_len, float temperature, bool need_grad) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(bedl_torch, CPU, m) {
  m.impl("ted", &bedl::ted_cpu);
  m.impl("ted_symbols", &bedl::ted_symbols_cpu);
  m.impl("sed", &bedl::sed_cpu);
  m.impl("sed_symbols", &bedl::sed_symbols_cpu);
  m.impl("sed_unit", &bedl::sed_unit_cpu);
  m.impl("sed_unit_matrix", &bedl::sed_unit_matrix_cpu);
  m.impl("knn_merge_dense", &bedl::knn_merge_dense_cpu);
  m.impl("ted_symbols_grad", &bedl::ted_symbols_grad_cpu);
  m.impl("sed_symbols_grad", &bedl::sed_symbols_grad_cpu);
  m.impl("ted_symbols_sums", &bedl::ted_symbols_sums_cpu);
  m.impl("sed_symbols_sums", &bedl::sed_symbols_sums_cpu);
  m.impl("weighted_pair_sums", &bedl::weighted_pair_sums_cpu);
  m.impl("ted_soft", &bedl::ted_soft_cpu);
  m.impl("sed_soft", &bedl::sed_soft_cpu);
}

namespace {

// The flat tree arrays a GPU kernel reads (tests run the GPU's per-thread jobs on the host with them).
py::tuple flat_tree_pairs(const at::Tensor& x_sizes, const at::Tensor& x_ptr, const at::Tensor& y_sizes,
                          const at::Tensor& y_ptr, const at::Tensor& pair_x, const at::Tensor& pair_y) {
  bedl::dp::check_index(pair_x, "pair_x", -1);
  bedl::dp::check_index(pair_y, "pair_y", pair_x.size(0));
  const bedl::ted::IndexedTrees trees = bedl::ted::index_both(x_sizes, x_ptr, y_sizes, y_ptr);
  const at::Tensor px = pair_x.contiguous(), py = pair_y.contiguous();
  bedl::ted::check_pairs(trees.xs, trees.ys(), px.data_ptr<int64_t>(), py.data_ptr<int64_t>(), px.size(0));
  const bedl::ted::FlatTreePairs f =
      bedl::ted::flat_tree_pairs(trees, px.data_ptr<int64_t>(), py.data_ptr<int64_t>(), px.size(0));
  py::list out;
  for (const bedl::ted::FlatSide* s : {&f.x, &f.y}) {
    for (const at::Tensor* t : {&s->pre_of_post, &s->leftmost, &s->node_ptr, &s->keyroots, &s->key_ptr,
                                &s->path_index, &s->path_begin, &s->path_nodes}) {
      out.append(*t);
    }
  }
  out.append(f.x_entry);
  out.append(f.y_entry);
  return py::tuple(out);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "bedl_torch kernels: the operators live in torch.ops.bedl_torch once this module is loaded";
  m.def("set_simd_enabled", &bedl::set_simd_enabled,
        "Turn the fast paths on or off: the AVX2 kernels and the bit-vector sequence distances "
        "under 0/1 costs (same results; for tests and benchmarks)", py::arg("on"));
  m.def("simd_enabled", &bedl::simd_enabled, "Whether the AVX2 kernels run");
  m.def("_flat_tree_pairs", &flat_tree_pairs,
        "The flat tree arrays of the GPU kernels (x: pre_of_post, leftmost, node_ptr, keyroots, key_ptr, "
        "path_index, path_begin, path_nodes; the same for y; x_entry, y_entry), for tests");
  m.attr("torch_version") = TORCH_VERSION;
  // The operators with CUDA kernels in this build (empty where it was built without CUDA).
  py::list cuda_operators;
#ifdef BEDL_WITH_CUDA
  for (const char* name : bedl::kCudaOperators) cuda_operators.append(name);
#endif
  m.attr("cuda_operators") = cuda_operators;
}
