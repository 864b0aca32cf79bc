// weighted_pair_sums: the backward of distances whose forward listed each
// pair's P by label pair (pair_sums.h): sum_b w_b * sums_b into a (rows, cols) table.
#include "../edit_distance.h"
#include "inputs.h"

#include <vector>

namespace bedl {

at::Tensor weighted_pair_sums_cpu(const at::Tensor& sum_ptr, const at::Tensor& sum_entry,
                                  const at::Tensor& sum_value, const at::Tensor& pair_weights, int64_t rows, int64_t cols) {
  BEDL_CHECK_VALUE(rows >= 1 && cols >= 1, "the table must have at least one row and one column, got (", rows, ", ",
                   cols, ")");
  dp::check_index(sum_ptr, "sum_ptr", -1);
  BEDL_CHECK_VALUE(sum_ptr.size(0) >= 1, "sum_ptr must have at least one entry (pairs + 1)");
  const int64_t batch = sum_ptr.size(0) - 1;
  dp::check_index(sum_entry, "sum_entry", -1);
  BEDL_CHECK_VALUE(sum_value.device().is_cpu() && sum_value.layout() == at::kStrided,
                   "sum_value must be a dense CPU tensor");
  BEDL_CHECK_TYPE(sum_value.scalar_type() == at::kDouble, "sum_value must be float64, got ",
                  sum_value.scalar_type());
  BEDL_CHECK_VALUE(sum_value.dim() == 1 && sum_value.size(0) == sum_entry.size(0),
                   "sum_value must be 1-D like sum_entry (", sum_entry.size(0), " entries), got shape ",
                   sum_value.sizes());
  BEDL_CHECK_VALUE(pair_weights.device().is_cpu() && pair_weights.layout() == at::kStrided,
                   "pair_weights must be a dense CPU tensor");
  BEDL_CHECK_TYPE(pair_weights.scalar_type() == at::kFloat || pair_weights.scalar_type() == at::kDouble,
                  "pair_weights must be float32 or float64, got ", pair_weights.scalar_type());
  BEDL_CHECK_VALUE(pair_weights.dim() == 1 && pair_weights.size(0) == batch, "pair_weights must have shape (",
                   batch, ",) (one weight per pair of sum_ptr), got ", pair_weights.sizes());
  const at::Tensor ptr = sum_ptr.contiguous(), entry = sum_entry.contiguous(), value = sum_value.contiguous();
  const at::Tensor weights = pair_weights.to(at::kDouble).contiguous();
  const int64_t* p = ptr.data_ptr<int64_t>();
  const int64_t* e = entry.data_ptr<int64_t>();
  const double* v = value.data_ptr<double>();
  const double* w = weights.data_ptr<double>();
  const int64_t entries = entry.size(0), cells = rows * cols;
  BEDL_CHECK_VALUE(p[0] == 0 && p[batch] == entries, "sum_ptr must run from 0 to the ", entries,
                   " entries of sum_entry, got ", p[0], " .. ", p[batch]);
  for (int64_t b = 0; b < batch; ++b) {
    BEDL_CHECK_VALUE(p[b] <= p[b + 1], "sum_ptr must not decrease, got ", p[b], " then ", p[b + 1],
                     " at pair ", b);
  }
  for (int64_t k = 0; k < entries; ++k) {
    BEDL_CHECK_VALUE(e[k] >= 0 && e[k] < cells, "sum_entry[", k, "] = ", e[k], " is outside a (", rows, ", ", cols,
                     ") table");
  }
  // Serially, pair by pair: the same bits for any thread count.
  std::vector<double> total(cells, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    if (w[b] == 0.0) continue;
    for (int64_t k = p[b]; k < p[b + 1]; ++k) total[e[k]] += w[b] * v[k];
  }
  at::Tensor out = at::empty({rows, cols}, pair_weights.options());
  AT_DISPATCH_FLOATING_TYPES(out.scalar_type(), "weighted_pair_sums_cpu", [&] {
    scalar_t* o = out.data_ptr<scalar_t>();
    for (int64_t k = 0; k < cells; ++k) o[k] = static_cast<scalar_t>(total[k]);
  });
  return out;
}

}  // namespace bedl
