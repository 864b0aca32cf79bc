// Costs as the soft passes read them: Boltzmann weights exp(-c / T) of
// reduced costs, as doubles (PlainWeight) or with a wide exponent
// (WideWeight).
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

constexpr double kLog2e = 1.4426950408889634073599;
constexpr double kLn2 = 0.6931471805599453094172;

// A partial mapping of a + b nodes has at most C(a + b, a) <= 2^(a + b)
// derivations, so with weights <= 1 no inside or outside weight exceeds
// 2^(m + n), nor does the total or an edge's inside * weight * outside (at
// most the total): doubles hold them up to m + n = 1000. The total must also
// exceed 2^(m + n - 980) (below), which pairs of more than kFastNodes nodes
// rarely do: they start with wide weights.
constexpr int64_t kFastNodes = 500;

inline bool fast_range_holds(const PlainWeight& total, int64_t nodes) {
  // Weights that underflowed are lost; with the total above 2^(nodes - 980)
  // what they could carry into it or into P (at most 2^-1074 per operation,
  // of which there are fewer than 2^40, times an outside weight <= 2^nodes)
  // is below 2^-54 of it.
  return nodes <= kFastNodes && std::isfinite(total.m) && total.m >= dp::pow2(nodes - 980);
}
inline bool fast_range_holds(const WideWeight& total, int64_t) { return total.m > 0.0; }

// exp(-reduced / T) in a weight type.
inline void boltzmann(double reduced, double temperature, PlainWeight& out) {
  out.m = std::exp(-reduced / temperature);
}
inline void boltzmann(double reduced, double temperature, WideWeight& out) {
  const double log2_weight = -reduced / temperature * kLog2e;
  const double k = std::nearbyint(log2_weight / 512.0);
  out = normalized(std::exp2(log2_weight - 512.0 * k), static_cast<int64_t>(k));
}

inline double log_of(const PlainWeight& w) { return std::log(w.m); }
inline double log_of(const WideWeight& w) {
  return std::log(w.m) + static_cast<double>(w.k) * (512.0 * kLn2);
}

// The shares num / total of weights num <= total (P's entries), with the
// total's reciprocal computed once.
class ShareOf {
 public:
  explicit ShareOf(const PlainWeight& total) : inv_(1.0 / total.m), k_(0) {}
  explicit ShareOf(const WideWeight& total) : inv_(1.0 / total.m), k_(total.k) {}
  double operator()(const PlainWeight& num) const { return num.m * inv_; }
  double operator()(const WideWeight& num) const {
    const double q = num.m * inv_;
    const int64_t dk = num.k - k_;  // <= 1, as num <= total
    if (dk == 0) return q;
    if (dk == 1) return q * kStep;
    if (dk == -1) return q * kInvStep;
    return 0.0;  // below 2^-512
  }

 private:
  double inv_;
  int64_t k_;
};

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

// Node potentials: reduced[i * w + j] = cost - a_i - b_j for the kernel
// layout (w = n + 1; [i][j] replaces x_i by y_j, [i][0] deletes x_i, [0][j]
// inserts y_j, 1-based; [0][0] unused), with a_i the minimum of row i and b_j
// that of column j after it; each is a difference of ordered doubles, so >= 0
// exactly, and every weight <= 1. Returns sum(a) + sum(b), the cost every
// mapping lost.
inline double reduce_costs(const double* cost, int64_t m, int64_t n, std::vector<double>& reduced,
                           std::vector<double>& column_min) {
  const int64_t w = n + 1;
  reduced.resize((m + 1) * w);
  column_min.assign(w, 0.0);
  double* r = reduced.data();
  double* b = column_min.data();
  for (int64_t j = 1; j <= n; ++j) b[j] = cost[j];
  double shift = 0.0;
  for (int64_t i = 1; i <= m; ++i) {
    const double* row = cost + i * w;
    double a = row[0];
    for (int64_t j = 1; j <= n; ++j) a = std::min(a, row[j]);
    shift += a;
    double* out = r + i * w;
    for (int64_t j = 0; j <= n; ++j) out[j] = row[j] - a;
    for (int64_t j = 1; j <= n; ++j) b[j] = std::min(b[j], out[j]);
  }
  r[0] = 0.0;
  for (int64_t j = 1; j <= n; ++j) {
    shift += b[j];
    r[j] = cost[j] - b[j];
  }
  for (int64_t i = 1; i <= m; ++i) {
    double* out = r + i * w;
    for (int64_t j = 1; j <= n; ++j) out[j] -= b[j];
  }
  return shift;
}

// The weights of reduced costs ([0][0], unused, gets one).
template <typename Weight>
void weights_of(const std::vector<double>& reduced, double temperature, std::vector<Weight>& out) {
  out.resize(reduced.size());
  for (size_t k = 1; k < reduced.size(); ++k) boltzmann(reduced[k], temperature, out[k]);
  if (!out.empty()) out[0] = Weight::one();
}

}  // namespace soft
}  // namespace bedl
