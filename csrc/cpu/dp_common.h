// What the tree and the sequence kernels really share: tie handling,
// counts in log space, cost checks and the batch loop.
#pragma once

#include <ATen/Parallel.h>
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace bedl {
namespace dp {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// log(exp(a) + exp(b)). Counts of co-optimal mappings grow exponentially with
// the size of the inputs when costs tie, so they are kept as logarithms.
inline double log_add(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  return a > b ? a + std::log1p(std::exp(b - a)) : b + std::log1p(std::exp(a - b));
}

// Two alternatives tie when they differ by at most rel_tol times the magnitude
// involved: the larger of both values and of the largest absolute cost of the
// pair (rounding in a sum of costs scales with the costs, not only with the sum).
struct Tie {
  double rel_tol;
  double cost_scale;
  inline bool operator()(double value, double best) const {
    const double scale = std::max({std::fabs(value), std::fabs(best), cost_scale});
    return value - best <= rel_tol * scale;
  }
};

inline void check_costs(const at::Tensor& costs) {
  TORCH_CHECK(costs.device().is_cpu(), "costs must be a CPU tensor in the CPU kernel, got ",
              costs.device());
  TORCH_CHECK(costs.dim() == 3, "costs must be 3-D (batch, |x|+1, |y|+1), got ", costs.dim(),
              "-D");
  TORCH_CHECK(at::isFloatingType(costs.scalar_type()),
              "costs must be a floating point tensor (float32 or float64), got ",
              costs.scalar_type());
  TORCH_CHECK(costs.numel() == 0 || at::isfinite(costs).all().item<bool>(),
              "costs must be finite (no NaN or inf)");
}

inline void check_index(const at::Tensor& t, const char* name, int64_t len) {
  TORCH_CHECK(t.device().is_cpu(), name, " must be a CPU tensor");
  TORCH_CHECK(t.scalar_type() == at::kLong, name, " must be int64, got ", t.scalar_type());
  TORCH_CHECK(t.dim() == 1, name, " must be 1-D, got ", t.dim(), "-D");
  if (len >= 0) {
    TORCH_CHECK(t.size(0) == len, name, " must have ", len, " entries, got ", t.size(0));
  }
}

// Largest absolute cost of one pair's (m+1, n+1) block (the tie scale).
template <typename scalar_t>
double max_abs_cost(const scalar_t* c, int64_t m, int64_t n, int64_t row_stride) {
  double s = 0.0;
  for (int64_t i = 0; i <= m; ++i) {
    for (int64_t j = 0; j <= n; ++j) {
      if (i == m && j == n) continue;
      s = std::max(s, std::fabs(static_cast<double>(c[i * row_stride + j])));
    }
  }
  return s;
}

// Runs fn(b, workspace) for every pair, in parallel over pairs, with one
// workspace per chunk so buffers are reused across the pairs of a chunk. Each
// pair is computed by one thread from start to end, so results do not depend
// on the thread count.
template <typename Workspace, typename Fn>
void for_each_pair(int64_t batch, const Fn& fn) {
  at::parallel_for(0, batch, 1, [&](int64_t begin, int64_t end) {
    Workspace ws;
    for (int64_t b = begin; b < end; ++b) fn(b, ws);
  });
}

}  // namespace dp
}  // namespace bedl
