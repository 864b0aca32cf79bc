// Entry points of the soft (temperature) edit distances: checks, dispatch
// over dtypes, the batch loop. The passes are in ted_soft.h and sed_soft.h,
// the weights in soft_weights.h.
#include "../edit_distance.h"
#include "dp_common.h"
#include "sed_soft.h"
#include "soft_weights.h"
#include "ted_costs.h"
#include "ted_passes.h"
#include "ted_soft.h"
#include "tree_index.h"

#include <tuple>
#include <vector>

namespace bedl {

std::tuple<at::Tensor, at::Tensor> ted_soft_cpu(const at::Tensor& costs_in, const at::Tensor& x_sizes,
                                                const at::Tensor& x_ptr, const at::Tensor& y_sizes,
                                                const at::Tensor& y_ptr, const at::Tensor& pair_x,
                                                const at::Tensor& pair_y, double temperature, bool need_grad) {
  using namespace ted;
  dp::check_costs(costs_in);
  const int64_t batch = costs_in.size(0);
  dp::check_index(x_sizes, "x_sizes", -1);
  dp::check_index(y_sizes, "y_sizes", -1);
  dp::check_index(x_ptr, "x_ptr", -1);
  dp::check_index(y_ptr, "y_ptr", -1);
  dp::check_index(pair_x, "pair_x", batch);
  dp::check_index(pair_y, "pair_y", batch);
  soft::check_temperature(temperature);
  const at::Tensor costs = costs_in.contiguous();
  const IndexedTrees trees = index_both(x_sizes, x_ptr, y_sizes, y_ptr);
  const std::vector<OrientedTree>& xs = trees.xs;
  const std::vector<OrientedTree>& ys = trees.ys();
  const at::Tensor px = pair_x.contiguous(), py = pair_y.contiguous();
  const int64_t* px_p = px.data_ptr<int64_t>();
  const int64_t* py_p = py.data_ptr<int64_t>();
  const int64_t rows = costs.size(1), cols = costs.size(2);
  check_pairs(xs, ys, px_p, py_p, batch);
  for (int64_t b = 0; b < batch; ++b) {
    BEDL_CHECK_VALUE(xs[px_p[b]].left.n + 1 <= rows && ys[py_p[b]].left.n + 1 <= cols, "pair ", b,
                     " has trees of ", xs[px_p[b]].left.n, " and ", ys[py_p[b]].left.n,
                     " nodes, which do not fit costs of shape ", costs.sizes());
  }
  at::Tensor dist = at::empty({batch}, costs.options());
  at::Tensor grad = need_grad ? at::zeros_like(costs) : at::empty({0}, costs.options());
  AT_DISPATCH_FLOATING_TYPES(costs.scalar_type(), "ted_soft_cpu", [&] {
    const scalar_t* c = costs.data_ptr<scalar_t>();
    scalar_t* d = dist.data_ptr<scalar_t>();
    scalar_t* p = need_grad ? grad.data_ptr<scalar_t>() : nullptr;
    auto sizes = [&](int64_t b) { return std::make_pair(xs[px_p[b]].left.n, ys[py_p[b]].left.n); };
    const std::vector<double> scales = dp::cost_scales(c, batch, rows, cols, sizes);
    for (int64_t b = 0; b < batch; ++b) {
      soft::check_soft_range<scalar_t>(scales[b], temperature, sizes(b).first, sizes(b).second, b);
    }
    dp::for_each_pair<SoftWorkspace>(batch, rows * cols, [&](int64_t b, SoftWorkspace& ws) {
      const OrientedPair pair = orient(xs[px_p[b]], ys[py_p[b]]);
      const TreeIndex &x = pair.x, &y = pair.y;
      const int64_t off = b * rows * cols;
      fill_padded(x, y, c + off, cols, ws.ted);
      d[b] = static_cast<scalar_t>(ted_soft_solve(x, y, temperature, need_grad, ws));
      if (need_grad) write_coopt(x, y, ws.ted, p + off, cols);
    });
  });
  return {dist, grad};
}

std::tuple<at::Tensor, at::Tensor> sed_soft_cpu(const at::Tensor& costs_in, const at::Tensor& x_len,
                                                const at::Tensor& y_len, double temperature, bool need_grad) {
  dp::check_costs(costs_in);
  const int64_t batch = costs_in.size(0);
  dp::check_index(x_len, "x_len", batch);
  dp::check_index(y_len, "y_len", batch);
  soft::check_temperature(temperature);
  const at::Tensor costs = costs_in.contiguous();
  const at::Tensor xl = x_len.contiguous();
  const at::Tensor yl = y_len.contiguous();
  const int64_t rows = costs.size(1), cols = costs.size(2);
  const int64_t* xl_p = xl.data_ptr<int64_t>();
  const int64_t* yl_p = yl.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    BEDL_CHECK_VALUE(xl_p[b] >= 0 && xl_p[b] + 1 <= rows, "x_len[", b, "] = ", xl_p[b],
                     " does not fit costs of shape ", costs.sizes());
    BEDL_CHECK_VALUE(yl_p[b] >= 0 && yl_p[b] + 1 <= cols, "y_len[", b, "] = ", yl_p[b],
                     " does not fit costs of shape ", costs.sizes());
  }
  at::Tensor dist = at::empty({batch}, costs.options());
  at::Tensor grad = need_grad ? at::zeros_like(costs) : at::empty({0}, costs.options());
  AT_DISPATCH_FLOATING_TYPES(costs.scalar_type(), "sed_soft_cpu", [&] {
    const scalar_t* c = costs.data_ptr<scalar_t>();
    scalar_t* d = dist.data_ptr<scalar_t>();
    scalar_t* p = need_grad ? grad.data_ptr<scalar_t>() : nullptr;
    const std::vector<double> scales = dp::cost_scales(
        c, batch, rows, cols, [&](int64_t b) { return std::make_pair(xl_p[b], yl_p[b]); });
    for (int64_t b = 0; b < batch; ++b) {
      soft::check_soft_range<scalar_t>(scales[b], temperature, xl_p[b], yl_p[b], b);
    }
    dp::for_each_pair<soft::SedSoftWorkspace>(batch, rows * cols, [&](int64_t b, soft::SedSoftWorkspace& ws) {
      const int64_t off = b * rows * cols;
      const int64_t m = xl_p[b], n = yl_p[b], w = n + 1;
      soft::fill_sequence_costs(c + off, m, n, cols, ws.cost);
      d[b] = static_cast<scalar_t>(soft::sed_soft_solve(m, n, temperature, need_grad, ws));
      if (!need_grad) return;
      // P from the kernel layout back to the padded one.
      const double* acc = ws.p_acc.data();
      scalar_t* pb = p + off;
      for (int64_t j = 1; j <= n; ++j) pb[m * cols + j - 1] = static_cast<scalar_t>(acc[j]);
      for (int64_t i = 1; i <= m; ++i) {
        scalar_t* row = pb + (i - 1) * cols;
        row[n] = static_cast<scalar_t>(acc[i * w]);
        for (int64_t j = 1; j <= n; ++j) row[j - 1] = static_cast<scalar_t>(acc[i * w + j]);
      }
    });
  });
  return {dist, grad};
}

}  // namespace bedl
