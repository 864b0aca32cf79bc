// Entry point of the soft (temperature) tree edit distance: checks, dispatch
// over dtypes, the batch loop. The passes are in soft.h, the weights in
// ../soft_weights.h.
#include "../../edit_distance.h"
#include "coopt.h"
#include "costs.h"
#include "inputs.h"
#include "soft.h"

#include <tuple>
#include <vector>

namespace bedl {

std::tuple<at::Tensor, at::Tensor> ted_soft_cpu(const at::Tensor& costs_in, const at::Tensor& x_sizes,
                                                const at::Tensor& x_ptr, const at::Tensor& y_sizes,
                                                const at::Tensor& y_ptr, const at::Tensor& pair_x,
                                                const at::Tensor& pair_y, double temperature, bool need_grad) {
  using namespace ted;
  const PaddedTrees in(costs_in, x_sizes, x_ptr, y_sizes, y_ptr, pair_x, pair_y,
                       [&] { soft::check_temperature(temperature); });
  in.check_memory(dp::kTreeSoftBytes, "the soft distance");
  const at::Tensor& costs = in.costs;
  const int64_t batch = in.batch, rows = in.rows, cols = in.cols;
  at::Tensor dist = at::empty({batch}, costs.options());
  at::Tensor grad = need_grad ? at::zeros_like(costs) : at::empty({0}, costs.options());
  AT_DISPATCH_FLOATING_TYPES(costs.scalar_type(), "ted_soft_cpu", [&] {
    const scalar_t* c = costs.data_ptr<scalar_t>();
    scalar_t* d = dist.data_ptr<scalar_t>();
    scalar_t* p = need_grad ? grad.data_ptr<scalar_t>() : nullptr;
    auto sizes = [&](int64_t b) { return in.sizes(b); };
    const std::vector<double> scales = in.scales<scalar_t>(sizes);
    for (int64_t b = 0; b < batch; ++b) {
      soft::check_soft_range<scalar_t>(scales[b], temperature, sizes(b).first, sizes(b).second, b);
    }
    dp::for_each_pair<SoftWorkspace>(batch, rows * cols, [&](int64_t b, SoftWorkspace& ws) {
      const OrientedPair pair = in.oriented(b);
      const TreeIndex &x = pair.x, &y = pair.y;
      const int64_t off = b * rows * cols;
      fill_padded(x, y, c + off, cols, ws.ted);
      d[b] = static_cast<scalar_t>(ted_soft_solve(x, y, temperature, need_grad, ws));
      if (need_grad) write_coopt(x, y, ws.ted, p + off, cols);
    });
  });
  return {dist, grad};
}

}  // namespace bedl
