// The sequence kernels' inputs, checked once per input kind: padded cost
// blocks with each pair's lengths (PaddedSequences), or a symbol table with
// the elements' labels (SymbolSequences).
#pragma once

#include <utility>

#include "../inputs.h"

namespace bedl {
namespace sed {

// A batch of sequence pairs with padded costs (batch, rows, cols) and each
// pair's lengths, fitting its block. check_scalars() checks the scalar
// arguments (rel_tol, temperature) where the kernels always did.
struct PaddedSequences : dp::PaddedCosts {
  at::Tensor x_len, y_len;
  const int64_t *xl = nullptr, *yl = nullptr;

  template <typename CheckScalars>
  PaddedSequences(const at::Tensor& costs_in, const at::Tensor& x_len_in, const at::Tensor& y_len_in,
                  const CheckScalars& check_scalars)
      : dp::PaddedCosts(costs_in) {
    dp::check_index(x_len_in, "x_len", batch);
    dp::check_index(y_len_in, "y_len", batch);
    check_scalars();
    x_len = x_len_in.contiguous();
    y_len = y_len_in.contiguous();
    xl = x_len.data_ptr<int64_t>();
    yl = y_len.data_ptr<int64_t>();
    for (int64_t b = 0; b < batch; ++b) {
      BEDL_CHECK_VALUE(xl[b] >= 0 && xl[b] + 1 <= rows, "x_len[", b, "] = ", xl[b],
                       " does not fit costs of shape ", costs.sizes());
      BEDL_CHECK_VALUE(yl[b] >= 0 && yl[b] + 1 <= cols, "y_len[", b, "] = ", yl[b],
                       " does not fit costs of shape ", costs.sizes());
    }
  }
  std::pair<int64_t, int64_t> sizes(int64_t b) const { return {xl[b], yl[b]}; }
};

// A pair of a symbol-table call: its sequences' labels and lengths.
struct SymbolPair {
  const int64_t *x, *y;
  int64_t m, n;
};

// The checked inputs of the symbol-table sequence kernels and the batch's extent.
struct SymbolSequences : dp::BatchExtent {
  dp::SymbolInputs in;
  const int64_t *x_labels, *y_labels, *x_ptr, *y_ptr, *pair_x, *pair_y;

  SymbolSequences(const at::Tensor& symbol_costs, const at::Tensor& x_labels_in, const at::Tensor& x_ptr_in,
                  const at::Tensor& y_labels_in, const at::Tensor& y_ptr_in, const at::Tensor& pair_x_in,
                  const at::Tensor& pair_y_in, double rel_tol)
      : in(dp::check_symbol_inputs(symbol_costs, x_labels_in, x_ptr_in, y_labels_in, y_ptr_in, pair_x_in,
                                   pair_y_in, rel_tol)),
        x_labels(in.x_labels.data_ptr<int64_t>()),
        y_labels(in.y_labels.data_ptr<int64_t>()),
        x_ptr(in.x_ptr.data_ptr<int64_t>()),
        y_ptr(in.y_ptr.data_ptr<int64_t>()),
        pair_x(in.pair_x.data_ptr<int64_t>()),
        pair_y(in.pair_y.data_ptr<int64_t>()) {
    const int64_t nx = dp::check_ptr(in.x_ptr, "x_ptr", in.x_labels.size(0), "labels");
    const int64_t ny = dp::check_ptr(in.y_ptr, "y_ptr", in.y_labels.size(0), "labels");
    dp::check_pair_indices(pair_x, pair_y, in.batch, nx, ny, "sequence");
    for (int64_t b = 0; b < in.batch; ++b) {
      const SymbolPair sp = pair(b);
      add(b, sp.m, sp.n);
    }
  }
  // check_table_memory for the batch's largest pair, where `what` needs its whole table.
  void check_memory(const char* what) const {
    const auto [b, m, n] = dp::largest_pair(in.batch, [&](int64_t k) {
      const SymbolPair sp = pair(k);
      return std::make_pair(sp.m, sp.n);
    });
    dp::check_table_memory(b, m, n, dp::kSequencePBytes, what);
  }
  SymbolPair pair(int64_t b) const {
    const int64_t px = pair_x[b], py = pair_y[b];
    return {x_labels + x_ptr[px], y_labels + y_ptr[py], x_ptr[px + 1] - x_ptr[px], y_ptr[py + 1] - y_ptr[py]};
  }
};

}  // namespace sed
}  // namespace bedl
