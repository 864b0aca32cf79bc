// Entry point of the soft (temperature) sequence edit distance: checks,
// dispatch over dtypes, the batch loop. The passes are in soft.h, the weights
// in ../soft_weights.h.
#include "../../edit_distance.h"
#include "inputs.h"
#include "soft.h"

#include <tuple>
#include <vector>

namespace bedl {

std::tuple<at::Tensor, at::Tensor> sed_soft_cpu(const at::Tensor& costs_in, const at::Tensor& x_len,
                                                const at::Tensor& y_len, double temperature, bool need_grad) {
  const sed::PaddedSequences in(costs_in, x_len, y_len, [&] { soft::check_temperature(temperature); });
  {
    const auto [b, m, n] = dp::largest_pair(in.batch, [&](int64_t k) { return in.sizes(k); });
    dp::check_table_memory(b, m, n, dp::kSequenceSoftBytes, "the soft distance");
  }
  const at::Tensor& costs = in.costs;
  const int64_t batch = in.batch, rows = in.rows, cols = in.cols;
  const int64_t* xl_p = in.xl;
  const int64_t* yl_p = in.yl;
  at::Tensor dist = at::empty({batch}, costs.options());
  at::Tensor grad = need_grad ? at::zeros_like(costs) : at::empty({0}, costs.options());
  AT_DISPATCH_FLOATING_TYPES(costs.scalar_type(), "sed_soft_cpu", [&] {
    const scalar_t* c = costs.data_ptr<scalar_t>();
    scalar_t* d = dist.data_ptr<scalar_t>();
    scalar_t* p = need_grad ? grad.data_ptr<scalar_t>() : nullptr;
    const std::vector<double> scales = in.scales<scalar_t>([&](int64_t b) { return in.sizes(b); });
    for (int64_t b = 0; b < batch; ++b) {
      soft::check_soft_range<scalar_t>(scales[b], temperature, xl_p[b], yl_p[b], b);
    }
    dp::for_each_pair<soft::SedSoftWorkspace>(batch, rows * cols, [&](int64_t b, soft::SedSoftWorkspace& ws) {
      const int64_t off = b * rows * cols;
      const int64_t m = xl_p[b], n = yl_p[b];
      soft::fill_sequence_costs(c + off, m, n, cols, ws.cost);
      d[b] = static_cast<scalar_t>(soft::sed_soft_solve(m, n, temperature, need_grad, ws));
      if (need_grad) soft::store_sequence_p(ws.p_acc.data(), m, n, p + off, cols);
    });
  });
  return {dist, grad};
}

}  // namespace bedl
