// Tree edit distance (Zhang-Shasha) and its co-optimal alignment matrix on the CPU.
//
// Nodes are numbered 1..n in postorder inside the kernel; l(i) is the leftmost
// leaf of i's subtree and the keyroots are the highest nodes of each leftmost
// path. One forest table per keyroot pair (K, H) covers the forests
// x[l(K)..i] and y[l(H)..j].
//
// Counting (see ../shared/design/edit-distances.md): where Zhang-Shasha adds
// the full tree distance of two subtrees, we add tdm(i, j), the distance with
// the roots i and j matched, so that mappings which delete i or insert j are
// reached only through the deletion or insertion alternative of the same cell;
// and an insertion may not leave a cell entered by a deletion. Then every
// co-optimal mapping is exactly one derivation, and P follows from an inside
// pass (counts per cell, tdm counts kept for all tables) and an outside pass
// over the keyroot pairs in reverse order, which recomputes one table at a time
// and pushes completion counts down its co-optimal edges. Memory is O(m n).
//
// Mirroring both trees (children right to left) maps mappings one-to-one onto
// mappings of equal cost, so each pair runs in the orientation whose keyroot
// tables are smaller (left paths for right-heavy trees and vice versa).
#include "../edit_distance.h"
#include "dp_common.h"

#include <vector>

namespace bedl {
namespace {

using dp::Count;

enum : uint8_t { kDel = 1, kIns = 2, kMatch = 4 };

// Postorder view of one tree, derived from its preorder subtree sizes.
struct TreeIndex {
  int64_t n = 0;
  std::vector<int64_t> pre_of_post;  // 1-based postorder -> 0-based preorder (index 0 unused)
  std::vector<int64_t> leftmost;     // 1-based postorder -> 1-based postorder leftmost leaf
  std::vector<int64_t> keyroots;     // 1-based, ascending
  double work = 0.0;                 // sum of the keyroots' subtree sizes
};

// Both orientations of one tree: as given, and mirrored.
struct OrientedTree {
  TreeIndex left, right;
};

void finish_index(TreeIndex& t) {
  const int64_t n = t.n;
  std::vector<int64_t> top_of_path(n + 1, 0);
  for (int64_t i = 1; i <= n; ++i) top_of_path[t.leftmost[i]] = i;
  for (int64_t i = 1; i <= n; ++i) {
    if (top_of_path[t.leftmost[i]] == i) {
      t.keyroots.push_back(i);
      t.work += static_cast<double>(i - t.leftmost[i] + 1);
    }
  }
}

OrientedTree index_tree(const int64_t* size, int64_t n, int64_t tree_id, const char* side) {
  TORCH_CHECK(n >= 1, side, " tree ", tree_id, " is empty; a tree has at least one node");
  TORCH_CHECK(size[0] == n, side, " tree ", tree_id, ": the root's subtree size is ", size[0],
              " but the tree has ", n, " nodes");
  OrientedTree o;
  TreeIndex& t = o.left;
  TreeIndex& r = o.right;
  t.n = r.n = n;
  t.pre_of_post.assign(n + 1, 0);
  t.leftmost.assign(n + 1, 0);
  r.pre_of_post.assign(n + 1, 0);
  r.leftmost.assign(n + 1, 0);
  std::vector<int64_t> open_ends;  // ends of the subtrees that contain the current node
  open_ends.reserve(64);
  for (int64_t i = 0; i < n; ++i) {
    while (!open_ends.empty() && open_ends.back() <= i) open_ends.pop_back();
    const int64_t s = size[i];
    TORCH_CHECK(s >= 1 && i + s <= n, side, " tree ", tree_id, ": subtree size ", s,
                " of node ", i, " is out of range");
    TORCH_CHECK(i == 0 || (!open_ends.empty() && i + s <= open_ends.back()), side, " tree ",
                tree_id, ": subtree of node ", i, " is not nested in its parent's (not preorder)");
    const int64_t depth = static_cast<int64_t>(open_ends.size());
    // Nodes before i in postorder: the non-ancestors before it in preorder and
    // its own descendants.
    const int64_t post = i - depth + s;  // 1-based
    t.pre_of_post[post] = i;
    t.leftmost[post] = post - s + 1;
    // The mirrored tree's postorder is the reversed preorder.
    const int64_t mpost = n - i;
    r.pre_of_post[mpost] = i;
    r.leftmost[mpost] = mpost - s + 1;
    open_ends.push_back(i + s);
  }
  finish_index(t);
  finish_index(r);
  return o;
}

struct TedWorkspace {
  std::vector<double> cost;      // (m+1)(n+1) postorder: [i][j] replace, [i][0] delete, [0][j] insert
  std::vector<double> fd;        // forest distances of the current table
  std::vector<double> tdm;       // root-matched subtree distances, all tables
  std::vector<Count> tdm_count;  // their counts
  std::vector<Count> in_del, in_other;  // inside counts of the current table
  std::vector<uint8_t> coopt;    // co-optimal incoming edges of the current table
  std::vector<Count> out_any, out_ins, out_tdm;
  std::vector<double> p_acc;
  std::vector<int64_t> path_x, path_y;
};

struct TedPair {
  const TreeIndex& x;
  const TreeIndex& y;
  TedWorkspace& ws;
  int64_t w;  // row stride of all (m+1)(n+1) arrays
  dp::Tie tie;

  double del(int64_t i) const { return ws.cost[i * w]; }
  double ins(int64_t j) const { return ws.cost[j]; }
  Count total(int64_t cell) const { return ws.in_del[cell] + ws.in_other[cell]; }

  // Fills the forest table of keyroots (kx, ky); with kCount also the inside
  // counts and co-optimal flags.
  template <bool kCount>
  void table(int64_t kx, int64_t ky) {
    double* fd = ws.fd.data();
    double* tdm = ws.tdm.data();
    const double* cost = ws.cost.data();
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
    const int64_t corner = r0 * w + c0;
    fd[corner] = 0.0;
    if (kCount) {
      ws.in_del[corner] = Count::zero();
      ws.in_other[corner] = Count::one();
      ws.coopt[corner] = 0;
    }
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      const int64_t cell = i * w + c0;
      fd[cell] = fd[cell - w] + del(i);
      if (kCount) {
        ws.in_del[cell] = total(cell - w);
        ws.in_other[cell] = Count::zero();
        ws.coopt[cell] = kDel;
      }
    }
    for (int64_t j = c0 + 1; j <= ky; ++j) {
      const int64_t cell = r0 * w + j;
      fd[cell] = fd[cell - 1] + ins(j);
      if (kCount) {
        ws.in_del[cell] = Count::zero();
        ws.in_other[cell] = Count::one();
        ws.coopt[cell] = kIns;
      }
    }
    const int64_t* ly = y.leftmost.data();
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      const int64_t li = x.leftmost[i];
      const bool x_on_path = li == r0 + 1;
      const double del_i = del(i);
      const int64_t row = i * w;
      if (!kCount && !x_on_path) {
        // The common row of the distance pass: every jump comes from row li - 1.
        const double* jump_row = fd + (li - 1) * w - 1;
        for (int64_t j = c0 + 1; j <= ky; ++j) {
          const int64_t cell = row + j;
          const double a = fd[cell - w] + del_i;
          const double c = jump_row[ly[j]] + tdm[cell];
          const double ac = std::min(a, c);
          fd[cell] = std::min(ac, fd[cell - 1] + cost[j]);
        }
        continue;
      }
      for (int64_t j = c0 + 1; j <= ky; ++j) {
        const int64_t cell = row + j;
        const int64_t lj = ly[j];
        const double a = fd[cell - w] + del_i;
        const double b = fd[cell - 1] + ins(j);
        int64_t source;  // cell the match (or jump) alternative comes from
        if (x_on_path && lj == c0 + 1) {
          // Both forests are whole trees: define tdm(i, j) here.
          tdm[cell] = fd[cell - w - 1] + cost[cell];
          if (kCount) ws.tdm_count[cell] = total(cell - w - 1);
          source = corner;
        } else {
          source = (li - 1) * w + (lj - 1);
        }
        const double c = fd[source] + tdm[cell];
        // Only b waits on the previous cell, so a and c are combined off that chain.
        const double best = std::min(std::min(a, c), b);
        fd[cell] = best;
        if (kCount) {
          uint8_t flags = 0;
          Count in_d, in_o;
          if (tie(a, best)) {
            flags |= kDel;
            in_d = total(cell - w);
          }
          if (tie(b, best)) {
            flags |= kIns;
            in_o = ws.in_other[cell - 1];
          }
          if (tie(c, best)) {
            flags |= kMatch;
            in_o = in_o + total(source) * ws.tdm_count[cell];
          }
          ws.in_del[cell] = in_d;
          ws.in_other[cell] = in_o;
          ws.coopt[cell] = flags;
        }
      }
    }
  }

  // True if some replacement defined in the table (kx, ky) lies on a
  // co-optimal mapping; only then does the outside pass need the table.
  bool has_outside(int64_t kx, int64_t ky) {
    if (kx == x.n && ky == y.n) return true;
    const int64_t lx = x.leftmost[kx], ly = y.leftmost[ky];
    ws.path_x.clear();
    ws.path_y.clear();
    for (int64_t i = lx; i <= kx; ++i)
      if (x.leftmost[i] == lx) ws.path_x.push_back(i);
    for (int64_t j = ly; j <= ky; ++j)
      if (y.leftmost[j] == ly) ws.path_y.push_back(j);
    for (int64_t i : ws.path_x)
      for (int64_t j : ws.path_y)
        if (!ws.out_tdm[i * w + j].is_zero()) return true;
    return false;
  }

  // Pushes outside counts down the co-optimal edges of the table (kx, ky),
  // which must have just been recomputed with counts, and accumulates P.
  void sweep(int64_t kx, int64_t ky, const Count& all) {
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
    Count* out_any = ws.out_any.data();
    Count* out_ins = ws.out_ins.data();
    Count* out_tdm = ws.out_tdm.data();
    double* acc = ws.p_acc.data();
    for (int64_t i = r0; i <= kx; ++i) {
      std::fill(out_any + i * w + c0, out_any + i * w + ky + 1, Count::zero());
      std::fill(out_ins + i * w + c0, out_ins + i * w + ky + 1, Count::zero());
    }
    if (kx == x.n && ky == y.n) out_any[kx * w + ky] = Count::one();
    for (int64_t i = kx; i >= r0; --i) {
      const int64_t li = x.leftmost[i];
      for (int64_t j = ky; j >= c0; --j) {
        const int64_t cell = i * w + j;
        const uint8_t flags = ws.coopt[cell];
        const int64_t lj = y.leftmost[j];
        const bool defines_tdm = i > r0 && j > c0 && li == r0 + 1 && lj == c0 + 1;
        const Count out_d = out_any[cell];
        const Count out_o = out_any[cell] + out_ins[cell];
        if (!out_o.is_zero()) {
          if (flags & kDel) {
            out_any[cell - w] = out_any[cell - w] + out_d;
            acc[i * w] += dp::ratio(total(cell - w) * out_d, all);
          }
          if (flags & kIns) {
            out_ins[cell - 1] = out_ins[cell - 1] + out_o;
            acc[j] += dp::ratio(ws.in_other[cell - 1] * out_o, all);
          }
          if (flags & kMatch) {
            const int64_t source = defines_tdm ? r0 * w + c0 : (li - 1) * w + (lj - 1);
            out_any[source] = out_any[source] + out_o * ws.tdm_count[cell];
            out_tdm[cell] = out_tdm[cell] + out_o * total(source);
          }
        }
        // tdm(i, j) is used nowhere after this cell: all its outside counts
        // are in, so the replacement i -> j is final and its inside lies in
        // this table at (i - 1, j - 1).
        if (defines_tdm && !out_tdm[cell].is_zero()) {
          acc[cell] += dp::ratio(ws.tdm_count[cell] * out_tdm[cell], all);
          out_any[cell - w - 1] = out_any[cell - w - 1] + out_tdm[cell];
        }
      }
    }
  }
};

template <typename scalar_t>
double ted_pair(const OrientedTree& xo, const OrientedTree& yo, const scalar_t* c, int64_t stride,
                bool need_coopt, const dp::Tie& tie, scalar_t* p, TedWorkspace& ws) {
  const bool mirror = xo.right.work * yo.right.work < xo.left.work * yo.left.work;
  const TreeIndex& x = mirror ? xo.right : xo.left;
  const TreeIndex& y = mirror ? yo.right : yo.left;
  const int64_t m = x.n, n = y.n, w = n + 1, cells = (m + 1) * w;
  // Costs in postorder, so the DP reads rows contiguously.
  ws.cost.resize(cells);
  double* cost = ws.cost.data();
  cost[0] = 0.0;
  for (int64_t j = 1; j <= n; ++j) cost[j] = static_cast<double>(c[m * stride + y.pre_of_post[j]]);
  for (int64_t i = 1; i <= m; ++i) {
    const scalar_t* row = c + x.pre_of_post[i] * stride;
    cost[i * w] = static_cast<double>(row[n]);
    for (int64_t j = 1; j <= n; ++j) cost[i * w + j] = static_cast<double>(row[y.pre_of_post[j]]);
  }
  ws.fd.resize(cells);
  ws.tdm.resize(cells);
  TedPair pair{x, y, ws, w, tie};
  if (!need_coopt) {
    for (int64_t kx : x.keyroots)
      for (int64_t ky : y.keyroots) pair.table<false>(kx, ky);
    return ws.fd[m * w + n];
  }
  ws.tdm_count.resize(cells);
  ws.in_del.resize(cells);
  ws.in_other.resize(cells);
  ws.coopt.resize(cells);
  ws.out_any.resize(cells);
  ws.out_ins.resize(cells);
  ws.out_tdm.assign(cells, Count::zero());
  ws.p_acc.assign(cells, 0.0);
  for (int64_t kx : x.keyroots)
    for (int64_t ky : y.keyroots) pair.table<true>(kx, ky);
  const double distance = ws.fd[m * w + n];
  const Count all = pair.total(m * w + n);
  for (auto ix = x.keyroots.rbegin(); ix != x.keyroots.rend(); ++ix) {
    for (auto iy = y.keyroots.rbegin(); iy != y.keyroots.rend(); ++iy) {
      if (!pair.has_outside(*ix, *iy)) continue;
      pair.table<true>(*ix, *iy);
      pair.sweep(*ix, *iy, all);
    }
  }
  // Back to preorder and the cost layout.
  const double* acc = ws.p_acc.data();
  for (int64_t i = 1; i <= m; ++i) {
    scalar_t* row = p + x.pre_of_post[i] * stride;
    row[n] = static_cast<scalar_t>(acc[i * w]);
    for (int64_t j = 1; j <= n; ++j) row[y.pre_of_post[j]] = static_cast<scalar_t>(acc[i * w + j]);
  }
  for (int64_t j = 1; j <= n; ++j) p[m * stride + y.pre_of_post[j]] = static_cast<scalar_t>(acc[j]);
  return distance;
}

std::vector<OrientedTree> index_trees(const at::Tensor& sizes, const at::Tensor& ptr,
                                   const char* side) {
  const int64_t count = ptr.size(0) - 1;
  TORCH_CHECK(count >= 0, side, "_ptr must have at least one entry");
  const int64_t* ptr_p = ptr.data_ptr<int64_t>();
  const int64_t* size_p = sizes.data_ptr<int64_t>();
  TORCH_CHECK(ptr_p[0] == 0 && ptr_p[count] == sizes.size(0), side,
              "_ptr must start at 0 and end at the number of nodes");
  std::vector<OrientedTree> trees(count);
  for (int64_t t = 0; t < count; ++t) {
    TORCH_CHECK(ptr_p[t + 1] >= ptr_p[t], side, "_ptr must be non-decreasing");
    trees[t] = index_tree(size_p + ptr_p[t], ptr_p[t + 1] - ptr_p[t], t, side);
  }
  return trees;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> ted_cpu(const at::Tensor& costs_in, const at::Tensor& x_sizes,
                                           const at::Tensor& x_ptr, const at::Tensor& y_sizes,
                                           const at::Tensor& y_ptr, const at::Tensor& pair_x,
                                           const at::Tensor& pair_y, bool need_coopt,
                                           double rel_tol) {
  dp::check_costs(costs_in);
  const int64_t batch = costs_in.size(0);
  dp::check_index(x_sizes, "x_sizes", -1);
  dp::check_index(y_sizes, "y_sizes", -1);
  dp::check_index(x_ptr, "x_ptr", -1);
  dp::check_index(y_ptr, "y_ptr", -1);
  dp::check_index(pair_x, "pair_x", batch);
  dp::check_index(pair_y, "pair_y", batch);
  TORCH_CHECK(rel_tol >= 0.0 && std::isfinite(rel_tol), "rel_tol must be finite and >= 0");
  const at::Tensor costs = costs_in.contiguous();
  const std::vector<OrientedTree> xs = index_trees(x_sizes.contiguous(), x_ptr.contiguous(), "x");
  const std::vector<OrientedTree> ys = index_trees(y_sizes.contiguous(), y_ptr.contiguous(), "y");
  const at::Tensor px = pair_x.contiguous(), py = pair_y.contiguous();
  const int64_t* px_p = px.data_ptr<int64_t>();
  const int64_t* py_p = py.data_ptr<int64_t>();
  const int64_t rows = costs.size(1), cols = costs.size(2);
  for (int64_t b = 0; b < batch; ++b) {
    TORCH_CHECK(px_p[b] >= 0 && px_p[b] < static_cast<int64_t>(xs.size()), "pair_x[", b,
                "] = ", px_p[b], " is not a tree index");
    TORCH_CHECK(py_p[b] >= 0 && py_p[b] < static_cast<int64_t>(ys.size()), "pair_y[", b,
                "] = ", py_p[b], " is not a tree index");
    TORCH_CHECK(xs[px_p[b]].left.n + 1 <= rows && ys[py_p[b]].left.n + 1 <= cols, "pair ", b,
                " has trees of ", xs[px_p[b]].left.n, " and ", ys[py_p[b]].left.n,
                " nodes, which do not fit costs of shape ", costs.sizes());
  }
  at::Tensor dist = at::empty({batch}, costs.options());
  at::Tensor coopt = need_coopt ? at::zeros_like(costs) : at::empty({0}, costs.options());
  AT_DISPATCH_FLOATING_TYPES(costs.scalar_type(), "ted_cpu", [&] {
    const scalar_t* c = costs.data_ptr<scalar_t>();
    scalar_t* d = dist.data_ptr<scalar_t>();
    scalar_t* p = need_coopt ? coopt.data_ptr<scalar_t>() : nullptr;
    const std::vector<double> scales = dp::cost_scales(c, batch, rows, cols, [&](int64_t b) {
      return std::make_pair(xs[px_p[b]].left.n, ys[py_p[b]].left.n);
    });
    dp::for_each_pair<TedWorkspace>(batch, rows * cols, [&](int64_t b, TedWorkspace& ws) {
      const int64_t off = b * rows * cols;
      d[b] = static_cast<scalar_t>(ted_pair(xs[px_p[b]], ys[py_p[b]], c + off, cols, need_coopt,
                                            dp::Tie{rel_tol, scales[b]},
                                            need_coopt ? p + off : nullptr, ws));
    });
  });
  return {dist, coopt};
}

}  // namespace bedl
