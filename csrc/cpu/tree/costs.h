// A pair's costs as the tree passes read them: postorder rows of the padded
// block or of a symbol table, insertions in row 0, deletions in column 0 and
// again contiguously (ws.dels).
#pragma once

#include "index.h"
#include "workspace.h"

namespace bedl {
namespace ted {

// Costs of a pair from its padded block (row stride `stride`, preorder),
// into the workspace in postorder so the DP reads rows contiguously.
template <typename scalar_t>
void fill_padded(const TreeIndex& x, const TreeIndex& y, const scalar_t* c, int64_t stride,
                 TedWorkspace& ws) {
  const int64_t m = x.n, n = y.n, w = n + 1;
  ws.cost.resize((m + 1) * w);
  double* cost = ws.cost.data();
  cost[0] = 0.0;
  for (int64_t j = 1; j <= n; ++j) cost[j] = static_cast<double>(c[m * stride + y.pre_of_post[j]]);
  ws.dels.resize(m + 1);
  for (int64_t i = 1; i <= m; ++i) {
    const scalar_t* row = c + x.pre_of_post[i] * stride;
    cost[i * w] = ws.dels[i] = static_cast<double>(row[n]);
    for (int64_t j = 1; j <= n; ++j) cost[i * w + j] = static_cast<double>(row[y.pre_of_post[j]]);
  }
}

// rep_row and rep_col for costs filled into ws.cost.
inline void point_at_cost(int64_t m, int64_t n, TedWorkspace& ws) {
  const int64_t w = n + 1;
  ws.rep_row.resize(m + 1);
  ws.rep_col.resize(n + 1);
  for (int64_t i = 0; i <= m; ++i) ws.rep_row[i] = ws.cost.data() + i * w;
  for (int64_t j = 0; j <= n; ++j) ws.rep_col[j] = j;
}

// Costs for the distance alone, read in place from float64 rows: x's node p
// (preorder) has the row x_row(p), y's node q the column y_col(q), beside the
// insertion row and the deletion column. Only insertions and deletions are
// copied (row 0 of ws.cost, ws.dels).
template <typename XRow, typename YCol>
void point_at_rows(const TreeIndex& x, const TreeIndex& y, const XRow& x_row, const YCol& y_col,
                   const double* ins_row, int64_t del_col, TedWorkspace& ws) {
  const int64_t m = x.n, n = y.n;
  ws.cost.resize(n + 1);
  ws.dels.resize(m + 1);
  ws.rep_row.resize(m + 1);
  ws.rep_col.resize(n + 1);
  ws.cost[0] = 0.0;
  for (int64_t j = 1; j <= n; ++j) {
    ws.rep_col[j] = y_col(y.pre_of_post[j]);
    ws.cost[j] = ins_row[ws.rep_col[j]];
  }
  for (int64_t i = 1; i <= m; ++i) {
    ws.rep_row[i] = x_row(x.pre_of_post[i]);
    ws.dels[i] = ws.rep_row[i][del_col];
  }
}

// point_at_rows where the costs are float64 (true); float32 costs are
// converted by filling ws.cost instead (false, nothing done).
template <typename XRow, typename YCol>
bool point_in_place(const TreeIndex& x, const TreeIndex& y, const XRow& x_row, const YCol& y_col,
                    const double* ins_row, int64_t del_col, TedWorkspace& ws) {
  point_at_rows(x, y, x_row, y_col, ins_row, del_col, ws);
  return true;
}
template <typename XRow, typename YCol>
bool point_in_place(const TreeIndex&, const TreeIndex&, const XRow&, const YCol&, const float*,
                    int64_t, TedWorkspace&) {
  return false;
}

// Costs of a pair gathered from a (rows, cols) symbol cost table (the last
// row and the last column the gap) by the nodes' labels (preorder); with
// kScale returns the largest absolute cost, the tie scale, over the same entries the padded layout would hold
// (only P needs it: the distance pass has no ties to decide).
template <bool kScale, typename scalar_t>
double fill_symbols(const scalar_t* table, int64_t rows, int64_t cols, const TreeIndex& x,
                    const int64_t* x_labels, const TreeIndex& y, const int64_t* y_labels, TedWorkspace& ws) {
  const int64_t m = x.n, n = y.n, w = n + 1, gap = cols - 1;
  ws.cost.resize((m + 1) * w);
  ws.y_symbol.resize(n + 1);
  int64_t* y_symbol = ws.y_symbol.data();
  for (int64_t j = 1; j <= n; ++j) y_symbol[j] = y_labels[y.pre_of_post[j]];
  double* cost = ws.cost.data();
  ws.dels.resize(m + 1);
  double scale = 0.0;
  cost[0] = 0.0;
  const scalar_t* gap_row = table + (rows - 1) * cols;
  for (int64_t j = 1; j <= n; ++j) {
    cost[j] = static_cast<double>(gap_row[y_symbol[j]]);
    if (kScale) scale = std::max(scale, std::fabs(cost[j]));
  }
  for (int64_t i = 1; i <= m; ++i) {
    const scalar_t* row = table + x_labels[x.pre_of_post[i]] * cols;
    double* out = cost + i * w;
    out[0] = ws.dels[i] = static_cast<double>(row[gap]);
    if (!kScale) {
      for (int64_t j = 1; j <= n; ++j) out[j] = static_cast<double>(row[y_symbol[j]]);
      continue;
    }
    double s = std::fabs(out[0]);
    for (int64_t j = 1; j <= n; ++j) {
      out[j] = static_cast<double>(row[y_symbol[j]]);
      s = std::max(s, std::fabs(out[j]));
    }
    scale = std::max(scale, s);
  }
  return scale;
}

}  // namespace ted
}  // namespace bedl
