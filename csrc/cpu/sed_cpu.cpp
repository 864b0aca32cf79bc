// Sequence edit distance and its co-optimal alignment matrix on the CPU.
//
// Distance: the classic (m+1) x (n+1) table, two rows at a time.
// P: an inside pass that counts co-optimal alignments per cell (log space),
// with two counts per cell -- "entered by a deletion" (D) and "entered
// otherwise" (O) -- because an insertion may never directly follow a deletion:
// that makes alignments and DP paths one-to-one (a run of indels is always
// read as its insertions first). An outside pass then pushes completion counts
// back along the co-optimal edges; P[event] = inside * outside / total.
#include "../edit_distance.h"
#include "dp_common.h"

#include <vector>

namespace bedl {
namespace {

using dp::kNegInf;
using dp::log_add;

enum : uint8_t { kDel = 1, kIns = 2, kRep = 4 };

struct SedWorkspace {
  std::vector<double> row_prev, row_cur;    // distance rows
  std::vector<double> in_del, in_other;     // log inside counts, (m+1)(n+1)
  std::vector<uint8_t> coopt;               // co-optimal incoming edges per cell
  std::vector<double> out_any, out_ins;     // log outside counts, two rows each
  std::vector<double> p_acc;                // P accumulator, (m+1)(n+1)
};

template <typename scalar_t>
double sed_distance(const scalar_t* c, int64_t m, int64_t n, int64_t stride, SedWorkspace& ws) {
  ws.row_prev.resize(n + 1);
  ws.row_cur.resize(n + 1);
  double* prev = ws.row_prev.data();
  double* cur = ws.row_cur.data();
  const scalar_t* ins = c + m * stride;
  prev[0] = 0.0;
  for (int64_t j = 1; j <= n; ++j) prev[j] = prev[j - 1] + static_cast<double>(ins[j - 1]);
  for (int64_t i = 1; i <= m; ++i) {
    const scalar_t* row = c + (i - 1) * stride;
    const double del = static_cast<double>(row[n]);
    cur[0] = prev[0] + del;
    for (int64_t j = 1; j <= n; ++j) {
      const double rep = prev[j - 1] + static_cast<double>(row[j - 1]);
      const double d = prev[j] + del;
      const double in = cur[j - 1] + static_cast<double>(ins[j - 1]);
      cur[j] = std::min(rep, std::min(d, in));
    }
    std::swap(prev, cur);
  }
  return prev[n];
}

// Fills p (padded row stride `pstride`) with the co-optimal matrix and returns the distance.
template <typename scalar_t>
double sed_coopt(const scalar_t* c, int64_t m, int64_t n, int64_t stride, double rel_tol,
                 scalar_t* p, SedWorkspace& ws) {
  const int64_t w = n + 1;
  const int64_t cells = (m + 1) * w;
  const dp::Tie tie{rel_tol, dp::max_abs_cost(c, m, n, stride)};
  ws.in_del.assign(cells, kNegInf);
  ws.in_other.assign(cells, kNegInf);
  ws.coopt.assign(cells, 0);
  ws.row_prev.resize(w);
  ws.row_cur.resize(w);
  double* in_del = ws.in_del.data();
  double* in_other = ws.in_other.data();
  uint8_t* coopt = ws.coopt.data();
  const scalar_t* ins = c + m * stride;
  auto total = [&](int64_t cell) { return log_add(in_del[cell], in_other[cell]); };

  // Inside pass.
  double* prev = ws.row_prev.data();
  double* cur = ws.row_cur.data();
  prev[0] = 0.0;
  in_other[0] = 0.0;
  for (int64_t j = 1; j <= n; ++j) {
    prev[j] = prev[j - 1] + static_cast<double>(ins[j - 1]);
    in_other[j] = 0.0;
    coopt[j] = kIns;
  }
  for (int64_t i = 1; i <= m; ++i) {
    const scalar_t* row = c + (i - 1) * stride;
    const double del = static_cast<double>(row[n]);
    const int64_t base = i * w;
    cur[0] = prev[0] + del;
    in_del[base] = 0.0;
    coopt[base] = kDel;
    for (int64_t j = 1; j <= n; ++j) {
      const double rep = prev[j - 1] + static_cast<double>(row[j - 1]);
      const double d = prev[j] + del;
      const double in = cur[j - 1] + static_cast<double>(ins[j - 1]);
      const double best = std::min(rep, std::min(d, in));
      cur[j] = best;
      const int64_t cell = base + j;
      uint8_t flags = 0;
      if (tie(d, best)) {
        flags |= kDel;
        in_del[cell] = total(cell - w);
      }
      double other = kNegInf;
      if (tie(in, best)) {
        flags |= kIns;
        other = in_other[cell - 1];
      }
      if (tie(rep, best)) {
        flags |= kRep;
        other = log_add(other, total(cell - w - 1));
      }
      in_other[cell] = other;
      coopt[cell] = flags;
    }
    std::swap(prev, cur);
  }
  const double distance = prev[n];
  const double log_total = total(cells - 1);

  // Outside pass, two rows at a time: row i pushes into rows i and i - 1.
  ws.out_any.assign(2 * w, kNegInf);
  ws.out_ins.assign(2 * w, kNegInf);
  ws.p_acc.assign(cells, 0.0);
  double* acc = ws.p_acc.data();
  auto acc_at = [&](int64_t i, int64_t j) -> double& {
    // Node-indexed accumulator: rows < m are x's nodes, row m insertions,
    // column n deletions (the cost layout).
    return acc[i * w + j];
  };
  for (int64_t i = m; i >= 0; --i) {
    double* any_cur = ws.out_any.data() + (i & 1) * w;
    double* ins_cur = ws.out_ins.data() + (i & 1) * w;
    double* any_up = ws.out_any.data() + ((i + 1) & 1) * w;
    if (i == m) any_cur[n] = 0.0;
    for (int64_t j = n; j >= 0; --j) {
      const int64_t cell = i * w + j;
      const double out_d = any_cur[j];
      const double out_o = log_add(any_cur[j], ins_cur[j]);
      const uint8_t flags = coopt[cell];
      if (out_o == kNegInf || flags == 0) continue;
      if (flags & kDel) {  // delete x_{i-1}; the source may be in either state
        any_up[j] = log_add(any_up[j], out_d);
        acc_at(i - 1, n) += std::exp(total(cell - w) + out_d - log_total);
      }
      if (flags & kIns) {  // insert y_{j-1}; only from a cell not entered by a deletion
        ins_cur[j - 1] = log_add(ins_cur[j - 1], out_o);
        acc_at(m, j - 1) += std::exp(in_other[cell - 1] + out_o - log_total);
      }
      if (flags & kRep) {
        any_up[j - 1] = log_add(any_up[j - 1], out_o);
        acc_at(i - 1, j - 1) += std::exp(total(cell - w - 1) + out_o - log_total);
      }
    }
    // Row i is done; row i - 2 reuses its storage.
    std::fill(any_cur, any_cur + w, kNegInf);
    std::fill(ins_cur, ins_cur + w, kNegInf);
  }
  for (int64_t i = 0; i <= m; ++i) {
    for (int64_t j = 0; j <= n; ++j) {
      if (i == m && j == n) continue;
      p[i * (stride) + j] = static_cast<scalar_t>(acc[i * w + j]);
    }
  }
  return distance;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> sed_cpu(const at::Tensor& costs_in, const at::Tensor& x_len,
                                           const at::Tensor& y_len, bool need_coopt,
                                           double rel_tol) {
  dp::check_costs(costs_in);
  const int64_t batch = costs_in.size(0);
  dp::check_index(x_len, "x_len", batch);
  dp::check_index(y_len, "y_len", batch);
  TORCH_CHECK(rel_tol >= 0.0 && std::isfinite(rel_tol), "rel_tol must be finite and >= 0");
  const at::Tensor costs = costs_in.contiguous();
  const at::Tensor xl = x_len.contiguous();
  const at::Tensor yl = y_len.contiguous();
  const int64_t rows = costs.size(1), cols = costs.size(2);
  const int64_t* xl_p = xl.data_ptr<int64_t>();
  const int64_t* yl_p = yl.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    TORCH_CHECK(xl_p[b] >= 0 && xl_p[b] + 1 <= rows, "x_len[", b, "] = ", xl_p[b],
                " does not fit costs of shape ", costs.sizes());
    TORCH_CHECK(yl_p[b] >= 0 && yl_p[b] + 1 <= cols, "y_len[", b, "] = ", yl_p[b],
                " does not fit costs of shape ", costs.sizes());
  }
  at::Tensor dist = at::empty({batch}, costs.options());
  at::Tensor coopt = need_coopt ? at::zeros_like(costs) : at::empty({0}, costs.options());
  AT_DISPATCH_FLOATING_TYPES(costs.scalar_type(), "sed_cpu", [&] {
    const scalar_t* c = costs.data_ptr<scalar_t>();
    scalar_t* d = dist.data_ptr<scalar_t>();
    scalar_t* p = need_coopt ? coopt.data_ptr<scalar_t>() : nullptr;
    dp::for_each_pair<SedWorkspace>(batch, [&](int64_t b, SedWorkspace& ws) {
      const scalar_t* cb = c + b * rows * cols;
      const int64_t m = xl_p[b], n = yl_p[b];
      d[b] = static_cast<scalar_t>(
          need_coopt ? sed_coopt(cb, m, n, cols, rel_tol, p + b * rows * cols, ws)
                     : sed_distance(cb, m, n, cols, ws));
    });
  });
  return {dist, coopt};
}

}  // namespace bedl
