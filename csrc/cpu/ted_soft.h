// Soft (temperature) tree edit distance and its gradient, the expected
// alignment, on the CPU.
//
// soft(x, y) = -T log sum_M exp(-cost(M) / T) over all valid mappings M: the
// counting passes of ted_passes.h with every alternative admitted and each
// derivation weighted by exp(-cost / T) (soft_weights.h) instead of counted
// once where co-optimal. The same canonical derivations (tdm with the roots
// matched; no insertion right after a deletion) count each mapping once.
// The inside pass fills the keyroot tables in order (leaf keyroots by their
// closed forms); the outside pass recomputes them in reverse order and pushes
// outside weights down every edge, accumulating
//   P[event] = inside(source) * weight(event) * outside(target) / total,
// the probability of the event under p(M) ~ exp(-cost(M) / T), exactly where
// the counting sweep accumulates inside * outside / all. As T -> 0 the soft
// distance tends to the distance and P to the co-optimal matrix.
// Memory: (m+1)(n+1) weights per array, no table is kept.
#pragma once

#include "dp_common.h"
#include "soft_weights.h"
#include "ted_workspace.h"
#include "tree_index.h"

#include <vector>

namespace bedl {
namespace ted {

// The soft passes' arrays in one weight type, (m+1)(n+1) each, postorder.
template <typename Weight>
struct SoftBuffers {
  std::vector<Weight> weight;             // exp(-c' / T) of the reduced costs, the cost layout
  std::vector<Weight> tdm;                // weights of the root-matched subtree pairs, all tables
  std::vector<Weight> tot, in_other;      // inside weights of the current table: all, not entered by a deletion
  std::vector<Weight> out_any, out_ins, out_tdm;  // outside weights
  std::vector<Weight> below_ins, below_del;       // the leaf keyroots' closed forms
};

struct SoftWorkspace {
  TedWorkspace ted;                   // the pair's costs in postorder (fill_padded) and P (p_acc)
  std::vector<double> reduced, column_min;  // soft::reduce_costs
  SoftBuffers<soft::PlainWeight> fast;  // weights as doubles: the usual case
  SoftBuffers<soft::WideWeight> wide; // weights with a wide exponent: where doubles under- or overflow
};

template <typename Weight>
struct SoftPair {
  const TreeIndex& x;
  const TreeIndex& y;
  SoftBuffers<Weight>& buf;
  int64_t w;  // row stride of all (m+1)(n+1) arrays

  const Weight& del(int64_t i) const { return buf.weight[i * w]; }
  const Weight& ins(int64_t j) const { return buf.weight[j]; }
  const Weight& rep(int64_t i, int64_t j) const { return buf.weight[i * w + j]; }

  static const int64_t* path_of(const TreeIndex& t, size_t k, int64_t* len) {
    *len = t.path_begin[k + 1] - t.path_begin[k];
    return t.path_nodes.data() + t.path_begin[k];
  }

  // below[v] = the weight of inserting (deleting) v's subtree but its root,
  // multiplied up each leftmost path as a table's first row (column) does.
  template <typename WeightOf>
  static void products_below(const TreeIndex& t, const WeightOf& weight_of, std::vector<Weight>& below) {
    below.resize(t.n + 1);
    for (int64_t k : t.keyroots) {
      const int64_t leaf = t.leftmost[k];
      Weight product = Weight::one();
      for (int64_t v = leaf; v <= k; ++v) {
        if (t.leftmost[v] == leaf) below[v] = product;
        product = product * weight_of(v);
      }
    }
  }

  // A leaf keyroot's table has one lasting output, tdm, in closed form: the
  // other subtree but its root inserted (deleted), the roots matched.
  void leaf_x(int64_t kx) {
    for (int64_t j = 1; j <= y.n; ++j) buf.tdm[kx * w + j] = buf.below_ins[j] * rep(kx, j);
  }

  void leaf_y(size_t kx_index, int64_t ky) {
    int64_t len;
    const int64_t* path = path_of(x, kx_index, &len);
    for (int64_t k = 0; k < len; ++k) buf.tdm[path[k] * w + ky] = buf.below_del[path[k]] * rep(path[k], ky);
  }

  // Every table of the inside pass, in keyroot order; the final one's last
  // cell holds the total weight.
  void inside() {
    products_below(y, [this](int64_t j) { return ins(j); }, buf.below_ins);
    products_below(x, [this](int64_t i) { return del(i); }, buf.below_del);
    const int64_t m = x.n, n = y.n;
    const size_t ky_count = y.keyroots.size();
    for (size_t a = 0; a < x.keyroots.size(); ++a) {
      const int64_t kx = x.keyroots[a];
      if (x.leftmost[kx] == kx) {
        leaf_x(kx);
        if (kx == m) table(kx, y.keyroots[ky_count - 1]);  // a one-node x: the final table
        continue;
      }
      for (size_t b = 0; b < ky_count; ++b) {
        const int64_t ky = y.keyroots[b];
        if (y.leftmost[ky] == ky && !(kx == m && ky == n)) {
          leaf_y(a, ky);
        } else {
          table(kx, ky);
        }
      }
    }
  }

  // The forest table of keyroots (kx, ky): inside weights (tot, and
  // in_other for the outside sweep), and the tdm of its path pairs. TedPair's
  // table with weights for counts and no ties.
  void table(int64_t kx, int64_t ky) {
    Weight* tot = buf.tot.data();
    Weight* other = buf.in_other.data();
    Weight* tdm = buf.tdm.data();
    const Weight* weight = buf.weight.data();  // row 0: insertions
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
    const int64_t corner = r0 * w + c0;
    tot[corner] = Weight::one();
    other[corner] = Weight::one();
    // First column and row: deletions (insertions) only.
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      tot[i * w + c0] = tot[(i - 1) * w + c0] * del(i);
      other[i * w + c0] = Weight::zero();
    }
    for (int64_t j = c0 + 1; j <= ky; ++j) {
      tot[r0 * w + j] = tot[r0 * w + j - 1] * weight[j];
      other[r0 * w + j] = tot[r0 * w + j];
    }
    const int64_t* ly = y.leftmost.data();
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      const int64_t li = x.leftmost[i];
      const bool x_on_path = li == r0 + 1;
      const Weight del_i = del(i);
      const int64_t row = i * w;
      const int64_t jump_base = (li - 1) * w - 1;  // + l(j): the cell a jump comes from
      Weight left_other = Weight::zero();  // the first column is entered by deletions
      for (int64_t j = c0 + 1; j <= ky; ++j) {
        const int64_t cell = row + j;
        int64_t source;  // cell the match (or jump) alternative comes from
        if (x_on_path && ly[j] == c0 + 1) {
          // Both forests are whole trees: define tdm(i, j) here.
          tdm[cell] = tot[cell - w - 1] * weight[cell];
          source = corner;
        } else {
          source = jump_base + ly[j];
        }
        Weight in_d, in_o;
        dp::soft_entries(tot[cell - w], del_i, left_other, weight[j], tot[source] * tdm[cell], in_d, in_o);
        tot[cell] = in_d + in_o;
        other[cell] = in_o;
        left_other = in_o;
      }
    }
  }

  // False where no tdm of the table's path pairs carries outside weight
  // (only by underflow) and it is not the final table: its sweep adds nothing.
  bool has_outside(size_t a, size_t b) const {
    if (x.keyroots[a] == x.n && y.keyroots[b] == y.n) return true;
    int64_t len_x, len_y;
    const int64_t* px = path_of(x, a, &len_x);
    const int64_t* py = path_of(y, b, &len_y);
    for (int64_t s = 0; s < len_x; ++s)
      for (int64_t t = 0; t < len_y; ++t)
        if (!buf.out_tdm[px[s] * w + py[t]].is_zero()) return true;
    return false;
  }

  // TedPair::outside_sweep over every edge of the table (kx, ky), which must
  // have just been recomputed: the first column's edges are deletions, the
  // first row's insertions, the other cells' all three alternatives. P goes
  // to acc in the postorder cost layout: deletions in column 0, insertions in
  // row 0, replacements at their cell; share(w) is w / total.
  void sweep(int64_t kx, int64_t ky, const soft::ShareOf& share, double* acc) {
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
    const int64_t corner = r0 * w + c0;
    Weight* out_any = buf.out_any.data();
    Weight* out_ins = buf.out_ins.data();
    Weight* out_tdm = buf.out_tdm.data();
    const Weight* tot = buf.tot.data();
    const Weight* other = buf.in_other.data();
    const Weight* tdm = buf.tdm.data();
    const int64_t* ly = y.leftmost.data();
    // out_ins of a cell has one contribution, from its right neighbour, set
    // before the cell is read; only the last column starts empty.
    for (int64_t i = r0; i <= kx; ++i) {
      std::fill(out_any + i * w + c0, out_any + i * w + ky + 1, Weight::zero());
      out_ins[i * w + ky] = Weight::zero();
    }
    if (kx == x.n && ky == y.n) out_any[kx * w + ky] = Weight::one();
    for (int64_t i = kx; i > r0; --i) {
      const int64_t li = x.leftmost[i];
      const bool x_on_path = li == r0 + 1;
      const Weight d = del(i);
      const int64_t row = i * w;
      const int64_t jump_base = (li - 1) * w - 1;  // + l(j): the cell a jump comes from
      double deleted = 0.0;                        // P of deleting x_i, this table's share
      for (int64_t j = ky; j > c0; --j) {
        const int64_t cell = row + j;
        const bool defines_tdm = x_on_path && ly[j] == c0 + 1;
        const Weight out_d = out_any[cell];  // a deletion may follow anything
        const Weight out_o = out_d + out_ins[cell];
        // insert y_j, from the left cell not entered by a deletion
        const Weight& g = ins(j);
        out_ins[cell - 1] = out_o * g;
        if (!out_o.is_zero()) {
          acc[j] += share(other[cell - 1] * g * out_o);
          // delete x_i, from either state of the cell above
          out_any[cell - w] = out_any[cell - w] + out_d * d;
          deleted += share(tot[cell - w] * d * out_d);
          // match the subtrees of i and j (or jump over them)
          const int64_t source = defines_tdm ? corner : jump_base + ly[j];
          out_any[source] = out_any[source] + out_o * tdm[cell];
          out_tdm[cell] = out_tdm[cell] + out_o * tot[source];
        }
        // tdm(i, j) is used nowhere after this cell: all its outside weight
        // is in, so the replacement i -> j is final and its inside lies in
        // this table at (i - 1, j - 1).
        if (defines_tdm && !out_tdm[cell].is_zero()) {
          acc[cell] += share(tdm[cell] * out_tdm[cell]);
          out_any[cell - w - 1] = out_any[cell - w - 1] + out_tdm[cell] * rep(i, j);
        }
      }
      const int64_t first = row + c0;  // the first column: entered by deleting x_i
      const Weight out_d = out_any[first];
      if (!out_d.is_zero()) {
        out_any[first - w] = out_any[first - w] + out_d * d;
        deleted += share(tot[first - w] * d * out_d);
      }
      acc[row] += deleted;
    }
    for (int64_t j = ky; j > c0; --j) {  // the first row: entered by inserting y_j
      const int64_t cell = r0 * w + j;
      const Weight out_o = out_any[cell] + out_ins[cell];
      const Weight& g = ins(j);
      out_ins[cell - 1] = out_o * g;
      acc[j] += share(other[cell - 1] * g * out_o);
    }
  }
};

// The inside pass (and with need_grad the outside pass, P in ws.ted.p_acc) in
// one weight type for the costs reduced in ws.reduced; false (nothing
// accumulated) where the total is out of that type's range.
template <typename Weight>
bool ted_soft_pass(const TreeIndex& x, const TreeIndex& y, double temperature, bool need_grad,
                   SoftWorkspace& ws, SoftBuffers<Weight>& buf, double* log_total) {
  const int64_t m = x.n, n = y.n, w = n + 1, cells = (m + 1) * w;
  soft::weights_of(ws.reduced, temperature, buf.weight);
  buf.tdm.resize(cells);
  buf.tot.resize(cells);
  buf.in_other.resize(cells);
  SoftPair<Weight> pair{x, y, buf, w};
  pair.inside();
  const Weight all = buf.tot[m * w + n];
  if (!soft::fast_range_holds(all, m + n)) return false;
  *log_total = soft::log_of(all);
  if (!need_grad) return true;
  buf.out_any.resize(cells);
  buf.out_ins.resize(cells);
  buf.out_tdm.assign(cells, Weight::zero());
  ws.ted.clear_p_acc(cells);
  const soft::ShareOf share(all);
  for (size_t a = x.keyroots.size(); a-- > 0;) {
    for (size_t b = y.keyroots.size(); b-- > 0;) {
      if (!pair.has_outside(a, b)) continue;
      pair.table(x.keyroots[a], y.keyroots[b]);
      pair.sweep(x.keyroots[a], y.keyroots[b], share, ws.ted.p_acc.data());
    }
  }
  return true;
}

// The soft distance of the pair whose costs are in ws.ted.cost (and with
// need_grad its expected alignment in ws.ted.p_acc): weights as doubles
// unless they leave their range, then with a wide exponent.
inline double ted_soft_solve(const TreeIndex& x, const TreeIndex& y, double temperature, bool need_grad,
                             SoftWorkspace& ws) {
  const double shift = soft::reduce_costs(ws.ted.cost.data(), x.n, y.n, ws.reduced, ws.column_min);
  double log_total = 0.0;
  if (x.n + y.n > soft::kFastNodes || !ted_soft_pass(x, y, temperature, need_grad, ws, ws.fast, &log_total)) {
    // Cannot fail: the cheapest mapping's weight is a positive WideWeight.
    const bool done = ted_soft_pass(x, y, temperature, need_grad, ws, ws.wide, &log_total);
    BEDL_CHECK(done, "internal error: no mapping was weighed for a pair of ", x.n, " and ", y.n, " nodes");
  }
  return shift - temperature * log_total;
}

}  // namespace ted
}  // namespace bedl
