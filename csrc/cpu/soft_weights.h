// Costs as the soft passes read them: Boltzmann weights exp(-c / T) of
// reduced costs, as doubles (PlainWeight) or with a wide exponent
// (WideWeight). The backend-free part (the weights, node potentials, shares)
// is in common/weights.h; here the CPU's checks and vector wrappers.
//
// The soft distance -T log sum_M exp(-cost(M) / T) is the log semiring's
// instance of the kernels' recurrence. Its values are kept as their
// exponentials, the weights exp(-v / T): a cell is then a few products and
// sums, as in the counting passes, instead of a logarithm and an exponential
// per alternative. Two measures keep the weights in range:
//  * node potentials: every mapping deletes or replaces each x_i once and
//    inserts or replaces each y_j once, so subtracting a_i from row i and b_j
//    from column j lowers every mapping's cost by the same sum(a) + sum(b).
//    With a_i, b_j the row and column minima all reduced costs are >= 0, the
//    weights <= 1, and the cheapest mapping's weight is exp(-d' / T) for the
//    reduced distance d', far nearer 1 than exp(-d / T);
//  * doubles where the pair is small enough and the total far enough from
//    underflow (fast_range_holds), else WideWeight, whose exponent never
//    leaves its range.
// A weight carries the relative error of c / T, about 1e-16 |c| / T, and a
// mapping's weight (so P) that of its |x| + |y| operations together.
#pragma once

#include "../common/counts.h"
#include "../common/weights.h"
#include "check.h"

#include <algorithm>
#include <climits>
#include <limits>
#include <cmath>
#include <cstdint>
#include <vector>

namespace bedl {
namespace soft {

// ValueError unless the temperature is finite and > 0.
inline void check_temperature(double temperature) {
  BEDL_CHECK_VALUE(std::isfinite(temperature) && temperature > 0.0,
                   "temperature must be finite and > 0, got ", temperature);
}

// ValueError where pair b's costs (largest absolute cost max_abs, |x| = m,
// |y| = n) are out of the soft passes' range at this temperature: a reduced
// cost is at most 4 max_abs, and a WideWeight's k sums those of at most
// 2 (m + n) + 2 weights, each about log2(weight) / 512, which must stay well
// inside int64; and the soft distance, down to the distance minus
// T (m + n) log 2, must fit the dtype.
template <typename scalar_t>
inline void check_soft_range(double max_abs, double temperature, int64_t m, int64_t n, int64_t b) {
  const double nodes = static_cast<double>(m + n);
  const double step_bound = (2.0 * nodes + 2.0) * (4.0 * kLog2e / 512.0) * (max_abs / temperature);
  BEDL_CHECK_VALUE(step_bound < 1.0e18, "costs of pair ", b, " are too large for temperature ",
                   temperature, ": max|cost| / temperature = ", max_abs / temperature,
                   " with |x| + |y| = ", m + n, " nodes; raise the temperature or scale the costs down");
  BEDL_CHECK_VALUE(2.0 * nodes * (max_abs + temperature) <= static_cast<double>(std::numeric_limits<scalar_t>::max()),
                   "temperature ", temperature, " is too large for pair ", b, " (|x| + |y| = ", m + n,
                   "): the soft distance, down to the distance minus temperature * (|x| + |y|) log 2, "
                   "would overflow ", sizeof(scalar_t) == 8 ? "float64" : "float32");
}

// common/weights.h's reduce_costs and weights_of on vectors sized here.
inline double reduce_costs(const double* cost, int64_t m, int64_t n, std::vector<double>& reduced,
                           std::vector<double>& column_min) {
  reduced.resize((m + 1) * (n + 1));
  column_min.resize(n + 1);
  return reduce_costs(cost, m, n, reduced.data(), column_min.data());
}

template <typename Weight>
void weights_of(const std::vector<double>& reduced, double temperature, std::vector<Weight>& out) {
  out.resize(reduced.size());
  weights_of(reduced.data(), static_cast<int64_t>(reduced.size()), temperature, out.data());
}

}  // namespace soft
}  // namespace bedl
