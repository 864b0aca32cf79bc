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
// pass (counts per cell, tdm counts kept) and an outside pass over the keyroot
// pairs in reverse order, which restores one table at a time and pushes
// completion counts down its co-optimal edges. Only the tables that some
// co-optimal mapping passes need counts; a distance pass and a boolean
// outside pass over the co-optimal flags find them first, and their flags
// are kept (up to a memory bound) so that neither counting pass recomputes
// distances or ties. Memory is O(m n) plus the kept flags and counts (both
// bounded per thread).
//
// Mirroring both trees (children right to left) maps mappings one-to-one onto
// mappings of equal cost, so each pair runs in the orientation whose keyroot
// tables are smaller (left paths for right-heavy trees and vice versa).
//
// Distances alone with symbol-table costs (pairwise matrices) run four pairs
// that share x at a time where the processor has AVX2 (ted_lanes, below),
// to the same bits.
#include "../edit_distance.h"
#include "dp_common.h"

#include <tuple>
#include <vector>

namespace bedl {
namespace {


enum : uint8_t { kDel = 1, kIns = 2, kMatch = 4 };

// Postorder view of one tree, derived from its preorder subtree sizes.
struct TreeIndex {
  int64_t n = 0;
  std::vector<int64_t> pre_of_post;  // 1-based postorder -> 0-based preorder (index 0 unused)
  std::vector<int64_t> leftmost;     // 1-based postorder -> 1-based postorder leftmost leaf
  std::vector<int64_t> keyroots;     // 1-based, ascending
  // Leftmost path of keyroots[k]: path_nodes[path_begin[k] .. path_begin[k + 1]), ascending.
  std::vector<int64_t> path_begin, path_nodes;
  std::vector<int64_t> keyroot_of;   // 1-based: the keyroot whose leftmost path holds the node
  double work = 0.0;                 // sum of the keyroots' subtree sizes
  int64_t wide_width = 0;            // columns of all non-leaf keyroots' tables side by side (ted_lanes)
};

// Both orientations of one tree: as given, and mirrored.
struct OrientedTree {
  TreeIndex left, right;
};

void finish_index(TreeIndex& t) {
  const int64_t n = t.n;
  std::vector<int64_t> top_of_path(n + 1, 0);
  for (int64_t i = 1; i <= n; ++i) top_of_path[t.leftmost[i]] = i;
  t.keyroot_of.assign(n + 1, 0);
  for (int64_t i = 1; i <= n; ++i) t.keyroot_of[i] = top_of_path[t.leftmost[i]];
  for (int64_t i = 1; i <= n; ++i) {
    if (top_of_path[t.leftmost[i]] == i) {
      t.keyroots.push_back(i);
      t.work += static_cast<double>(i - t.leftmost[i] + 1);
      if (t.leftmost[i] != i) t.wide_width += i - t.leftmost[i] + 2;
    }
  }
  // Every node lies on exactly one keyroot's leftmost path: the nodes that
  // share its leftmost leaf.
  std::vector<int64_t> slot(n + 1, 0);  // leftmost leaf -> path length, then write position
  for (int64_t i = 1; i <= n; ++i) ++slot[t.leftmost[i]];
  t.path_begin.assign(t.keyroots.size() + 1, 0);
  for (size_t k = 0; k < t.keyroots.size(); ++k) {
    const int64_t leaf = t.leftmost[t.keyroots[k]];
    t.path_begin[k + 1] = t.path_begin[k] + slot[leaf];
    slot[leaf] = t.path_begin[k];
  }
  t.path_nodes.assign(n, 0);
  for (int64_t i = 1; i <= n; ++i) t.path_nodes[slot[t.leftmost[i]]++] = i;
}

OrientedTree index_tree(const int64_t* size, int64_t n, int64_t tree_id, const char* side) {
  TORCH_CHECK_VALUE(n >= 1, side, " tree ", tree_id, " is empty; a tree has at least one node");
  TORCH_CHECK_VALUE(size[0] == n, side, " tree ", tree_id, ": the root's subtree size is ", size[0],
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
    TORCH_CHECK_VALUE(s >= 1 && i + s <= n, side, " tree ", tree_id, ": subtree size ", s,
                " of node ", i, " is out of range");
    TORCH_CHECK_VALUE(i == 0 || (!open_ends.empty() && i + s <= open_ends.back()), side, " tree ",
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

// below[j] = cost of the nodes l(j) .. j-1 (j's subtree but its root), summed
// from the leaf up along each leftmost path as a table's first row does.
template <typename CostOf>
void sums_below(const TreeIndex& t, const CostOf& cost_of, std::vector<double>& below) {
  below.resize(t.n + 1);
  for (int64_t k : t.keyroots) {
    const int64_t leaf = t.leftmost[k];
    double sum = 0.0;
    for (int64_t v = leaf; v <= k; ++v) {
      if (t.leftmost[v] == leaf) below[v] = sum;
      sum = sum + cost_of(v);
    }
  }
}

// Counts of co-optimal derivations, (m+1)(n+1) each, in one count type.
template <typename C>
struct CountBuffers {
  std::vector<C> tdm_count;          // counts of the root-matched subtree distances
  std::vector<C> tot, in_other;      // inside counts of the current table: all, and not entered by a deletion
  std::vector<C> out_any, out_ins, out_tdm;  // outside counts
  // The inside pass's tot and in_other of the needed tables (region by region,
  // row by row, like the kept flags), for the outside pass; -1: not kept.
  std::vector<C> kept;
  std::vector<int64_t> kept_offset;
};

struct TedWorkspace {
  std::vector<double> cost;      // (m+1)(n+1) postorder: [i][j] replace, [i][0] delete, [0][j] insert
  std::vector<double> dels;      // the deletion costs [i][0] again, contiguous (tables walk them down columns)
  std::vector<double> fd;        // forest distances of the current table
  std::vector<double> tdm;       // root-matched subtree distances, all tables
  std::vector<uint8_t> coopt;    // co-optimal incoming edges of the current table
  CountBuffers<dp::FastCount> fast;  // counts as doubles: the usual case
  CountBuffers<dp::Count> exact;     // counts with an exponent: where doubles overflow
  std::vector<double> p_acc;
  // Insertions of y[l(j) .. j-1] (deletions of x[l(i) .. i-1]), summed from
  // the path's leaf up exactly as a forest table's first row (column) does.
  std::vector<double> below_ins, below_del;
  std::vector<int64_t> y_symbol;  // y's labels in postorder (symbol-table costs)
  // Replacement costs for the distance pass: rep_row[i][rep_col[j]] is cost
  // (i, j) (postorder). Rows of `cost` for padded costs; rows of the symbol
  // table itself where it is float64, so that the distance alone gathers
  // each cost once, where it is used, instead of filling `cost` first.
  std::vector<const double*> rep_row;
  std::vector<int64_t> rep_col;
  std::vector<uint8_t> needed;    // keyroot pairs whose inside counts P needs (see ted_coopt)
  std::vector<uint8_t> reach_any, reach_ins, reach_tdm;  // mark_needed's boolean outside pass
  // Co-optimal flags of the needed tables, kept by mark_needed (region by
  // region, row-major) unless they exceed kFlagStoreLimit; -1: not kept.
  std::vector<uint8_t> flag_store;
  std::vector<int64_t> flag_offset;
  bool flags_kept = false;
};

template <typename Count>
struct TedPair {
  const TreeIndex& x;
  const TreeIndex& y;
  TedWorkspace& ws;
  CountBuffers<Count>& cnt;
  int64_t w;  // row stride of all (m+1)(n+1) arrays
  dp::Tie tie;

  double del(int64_t i) const { return ws.dels[i]; }
  double ins(int64_t j) const { return ws.cost[j]; }
  double rep(int64_t i, int64_t j) const { return ws.rep_row[i][ws.rep_col[j]]; }
  Count total(int64_t cell) const { return cnt.tot[cell]; }

  static const int64_t* path_of(const TreeIndex& t, size_t k, int64_t* len) {
    *len = t.path_begin[k + 1] - t.path_begin[k];
    return t.path_nodes.data() + t.path_begin[k];
  }

  void prepare_leaf_sums() {
    sums_below(y, [this](int64_t j) { return ins(j); }, ws.below_ins);
    sums_below(x, [this](int64_t i) { return del(i); }, ws.below_del);
  }

  // A keyroot that is a leaf has a one-row (one-column) table whose only
  // lasting output, tdm, has a closed form: the other forest is inserted
  // (deleted) except its root, which is matched. One derivation each.
  template <bool kCount>
  void leaf_x(int64_t kx) {
    const int64_t row = kx * w;
    for (int64_t j = 1; j <= y.n; ++j) {
      ws.tdm[row + j] = ws.below_ins[j] + rep(kx, j);
      if (kCount) cnt.tdm_count[row + j] = Count::one();
    }
  }

  template <bool kCount>
  void leaf_y(size_t kx_index, int64_t ky) {
    int64_t len;
    const int64_t* path = path_of(x, kx_index, &len);
    for (int64_t k = 0; k < len; ++k) {
      const int64_t cell = path[k] * w + ky;
      ws.tdm[cell] = ws.below_del[path[k]] + rep(path[k], ky);
      if (kCount) cnt.tdm_count[cell] = Count::one();
    }
  }

  // All tables of the inside pass, in keyroot order; with `needed` (counting
  // only) just the flagged keyroot pairs' forest tables.
  template <bool kCount>
  void inside(const uint8_t* needed = nullptr) {
    prepare_leaf_sums();
    const int64_t m = x.n, n = y.n;
    const size_t ky_count = y.keyroots.size();
    for (size_t a = 0; a < x.keyroots.size(); ++a) {
      const int64_t kx = x.keyroots[a];
      const bool x_leaf = x.leftmost[kx] == kx;
      if (x_leaf) {
        leaf_x<kCount>(kx);
        if (kx == m) any_table<kCount>(a, ky_count - 1);  // a one-node x: the final table
        continue;
      }
      for (size_t b = 0; b < ky_count; ++b) {
        const int64_t ky = y.keyroots[b];
        if (y.leftmost[ky] == ky && !(kx == m && ky == n)) {
          leaf_y<kCount>(a, ky);
        } else if (needed == nullptr) {
          any_table<kCount>(a, b);
        } else if (needed[a * ky_count + b]) {
          const uint8_t* f = kept_flags(a, b);
          if (f != nullptr) {
            count_table<false>(kx, ky, f);
            keep_counts(kx, ky, a * ky_count + b);
          } else {
            table<false>(kx, ky);
          }
        }
      }
    }
  }

  // Which forest tables need inside counts: those holding a cell of some
  // co-optimal mapping (every co-optimal predecessor of such a cell is one too,
  // so its counts never read a table outside the set). A boolean outside pass
  // finds them top-down: each such table recomputed with co-optimal flags from
  // the distance pass's tdm (the counting pass's own expressions, so the same
  // tie decisions), then swept like `sweep` with "reached" for counts. The set
  // is exactly the one the outside pass later sweeps (has_outside).
  // Their flags are kept (up to kFlagStoreLimit bytes), so that the counting
  // and outside passes need neither distances nor tie tests again.
  static constexpr size_t kFlagStoreLimit = size_t{1} << 26;

  void mark_needed(std::vector<uint8_t>& needed) {
    const size_t kx_count = x.keyroots.size(), ky_count = y.keyroots.size();
    const int64_t cells = (x.n + 1) * w;
    needed.assign(kx_count * ky_count, 0);
    ws.reach_any.assign(cells, 0);
    ws.reach_ins.assign(cells, 0);
    ws.reach_tdm.assign(cells, 0);
    ws.flag_offset.assign(kx_count * ky_count, -1);
    ws.flag_store.clear();
    ws.flags_kept = true;
    for (size_t a = kx_count; a-- > 0;) {
      for (size_t b = ky_count; b-- > 0;) {
        if (!reached(a, b)) continue;
        const int64_t kx = x.keyroots[a], ky = y.keyroots[b];
        needed[a * ky_count + b] = 1;
        flag_table(kx, ky);
        reach_sweep(kx, ky);
        if (ws.flags_kept) keep_flags(kx, ky, a * ky_count + b);
      }
    }
  }

  void keep_flags(int64_t kx, int64_t ky, size_t pair_index) {
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1, fw = ky - c0 + 1;
    const size_t size = static_cast<size_t>((kx - r0 + 1) * fw);
    if (ws.flag_store.size() + size > kFlagStoreLimit) {
      ws.flags_kept = false;  // too many: the passes recompute them instead
      ws.flag_store.clear();
      return;
    }
    ws.flag_offset[pair_index] = static_cast<int64_t>(ws.flag_store.size());
    for (int64_t i = r0; i <= kx; ++i) {
      const uint8_t* row = ws.coopt.data() + i * w + c0;
      ws.flag_store.insert(ws.flag_store.end(), row, row + fw);
    }
  }

  const uint8_t* kept_flags(size_t a, size_t b) const {
    if (!ws.flags_kept) return nullptr;
    const int64_t off = ws.flag_offset[a * y.keyroots.size() + b];
    return off < 0 ? nullptr : ws.flag_store.data() + off;
  }

  // The outside pass needs each needed table's inside counts again, in
  // reverse order; keeping them (up to kCountStoreLimit bytes, 16 MB per
  // thread beside the flags; the tables past it are counted again) spares
  // counting every table twice.
  static constexpr size_t kCountStoreLimit = size_t{1} << 24;

  void keep_counts(int64_t kx, int64_t ky, size_t pair_index) {
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1, fw = ky - c0 + 1;
    const size_t size = static_cast<size_t>(2 * (kx - r0 + 1) * fw);
    if ((cnt.kept.size() + size) * sizeof(Count) > kCountStoreLimit) return;  // counted again
    cnt.kept_offset[pair_index] = static_cast<int64_t>(cnt.kept.size());
    for (int64_t i = r0; i <= kx; ++i) {
      cnt.kept.insert(cnt.kept.end(), cnt.tot.begin() + i * w + c0, cnt.tot.begin() + i * w + ky + 1);
      cnt.kept.insert(cnt.kept.end(), cnt.in_other.begin() + i * w + c0,
                      cnt.in_other.begin() + i * w + ky + 1);
    }
  }

  // The table (kx, ky) ready for `sweep` from its kept flags `f` and kept
  // counts; false (nothing done) if its counts were not kept.
  bool restore_table(size_t a, size_t b, const uint8_t* f) {
    const int64_t off = cnt.kept_offset[a * y.keyroots.size() + b];
    if (off < 0) return false;
    const int64_t kx = x.keyroots[a], ky = y.keyroots[b];
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1, fw = ky - c0 + 1;
    const Count* kept = cnt.kept.data() + off;
    for (int64_t i = r0; i <= kx; ++i, kept += 2 * fw, f += fw) {
      std::copy(f, f + fw, ws.coopt.data() + i * w + c0);
      std::copy(kept, kept + fw, cnt.tot.data() + i * w + c0);
      std::copy(kept + fw, kept + 2 * fw, cnt.in_other.data() + i * w + c0);
    }
    return true;
  }

  // Inside counts of the forest table (kx, ky) from its kept co-optimal flags
  // `f` (the region row by row): `table` without distances or ties.
  // With kRestore the flags go back to ws.coopt for the sweep.
  template <bool kRestore>
  void count_table(int64_t kx, int64_t ky, const uint8_t* f) {
    Count* tot = cnt.tot.data();
    Count* other = cnt.in_other.data();
    Count* tdm_count = cnt.tdm_count.data();
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
    const int64_t corner = r0 * w + c0, fw = ky - c0 + 1;
    if (kRestore) {
      for (int64_t i = r0; i <= kx; ++i) std::copy(f + (i - r0) * fw, f + (i - r0 + 1) * fw, ws.coopt.data() + i * w + c0);
    }
    tot[corner] = Count::one();
    other[corner] = Count::one();
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      tot[i * w + c0] = Count::one();
      other[i * w + c0] = Count::zero();
    }
    for (int64_t j = c0 + 1; j <= ky; ++j) {
      tot[r0 * w + j] = Count::one();
      other[r0 * w + j] = Count::one();
    }
    const int64_t* ly = y.leftmost.data();
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      const int64_t li = x.leftmost[i];
      const bool x_on_path = li == r0 + 1;
      const int64_t row = i * w;
      const int64_t jump_base = (li - 1) * w - 1;
      const uint8_t* frow = f + (i - r0) * fw - c0;
      Count left_other = Count::zero();  // the first column is entered by deletions
      for (int64_t j = c0 + 1; j <= ky; ++j) {
        const int64_t cell = row + j;
        const uint8_t flags = frow[j];
        int64_t source;
        if (x_on_path && ly[j] == c0 + 1) {
          tdm_count[cell] = tot[cell - w - 1];
          source = corner;
        } else {
          source = jump_base + ly[j];
        }
        const Count in_d = (flags & kDel) ? tot[cell - w] : Count::zero();
        const Count via_ins = (flags & kIns) ? left_other : Count::zero();
        const Count via_match = (flags & kMatch) ? tot[source] * tdm_count[cell] : Count::zero();
        const Count in_o = via_ins + via_match;
        tot[cell] = in_d + in_o;
        other[cell] = in_o;
        left_other = in_o;
      }
    }
  }

  // True for the final table and for a table one of whose tdm cells (its two
  // keyroots' path pairs) satisfies `used(cell)`.
  template <typename Used>
  bool any_tdm_used(size_t a, size_t b, const Used& used) const {
    if (x.keyroots[a] == x.n && y.keyroots[b] == y.n) return true;
    int64_t len_x, len_y;
    const int64_t* px = path_of(x, a, &len_x);
    const int64_t* py = path_of(y, b, &len_y);
    for (int64_t s = 0; s < len_x; ++s)
      for (int64_t t = 0; t < len_y; ++t)
        if (used(px[s] * w + py[t])) return true;
    return false;
  }

  bool reached(size_t a, size_t b) const {
    return any_tdm_used(a, b, [this](int64_t cell) { return ws.reach_tdm[cell] != 0; });
  }

  // The forest table (kx, ky) again, with co-optimal flags and no counts.
  void flag_table(int64_t kx, int64_t ky) {
    double* fd = ws.fd.data();
    const double* tdm = ws.tdm.data();
    const double* cost = ws.cost.data();
    uint8_t* coopt = ws.coopt.data();
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
    const int64_t corner = r0 * w + c0;
    fd[corner] = 0.0;
    coopt[corner] = 0;
    double sum = 0.0;
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      sum = sum + del(i);
      fd[i * w + c0] = sum;
      coopt[i * w + c0] = kDel;
    }
    sum = 0.0;
    for (int64_t j = c0 + 1; j <= ky; ++j) {
      sum = sum + ins(j);
      fd[r0 * w + j] = sum;
      coopt[r0 * w + j] = kIns;
    }
    const int64_t* ly = y.leftmost.data();
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      const bool x_on_path = x.leftmost[i] == r0 + 1;
      const double del_i = del(i);
      const int64_t row = i * w;
      const int64_t jump_base = (x.leftmost[i] - 1) * w - 1;
      double left = fd[row + c0];
      for (int64_t j = c0 + 1; j <= ky; ++j) {
        const int64_t cell = row + j;
        const double a = fd[cell - w] + del_i;
        const double b = left + cost[j];
        const bool defines = x_on_path && ly[j] == c0 + 1;
        const double t = defines ? fd[cell - w - 1] + cost[cell] : tdm[cell];
        const double c = fd[defines ? corner : jump_base + ly[j]] + t;
        const double best = std::min(std::min(a, c), b);
        const double threshold = tie.threshold(best);
        coopt[cell] = static_cast<uint8_t>((tie.within(a, best, threshold) ? kDel : 0) |
                                           (tie.within(b, best, threshold) ? kIns : 0) |
                                           (tie.within(c, best, threshold) ? kMatch : 0));
        fd[cell] = best;
        left = best;
      }
    }
  }

  // `sweep` with booleans: which cells of the table (kx, ky) some co-optimal
  // mapping passes, and which tdm it uses.
  void reach_sweep(int64_t kx, int64_t ky) {
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
    uint8_t* any = ws.reach_any.data();
    uint8_t* ins_only = ws.reach_ins.data();
    uint8_t* used_tdm = ws.reach_tdm.data();
    for (int64_t i = r0; i <= kx; ++i) {
      std::fill(any + i * w + c0, any + i * w + ky + 1, uint8_t{0});
      std::fill(ins_only + i * w + c0, ins_only + i * w + ky + 1, uint8_t{0});
    }
    if (kx == x.n && ky == y.n) any[kx * w + ky] = 1;
    for (int64_t i = kx; i >= r0; --i) {
      const int64_t li = x.leftmost[i];
      for (int64_t j = ky; j >= c0; --j) {
        const int64_t cell = i * w + j;
        const uint8_t flags = ws.coopt[cell];
        const int64_t lj = y.leftmost[j];
        const bool defines_tdm = i > r0 && j > c0 && li == r0 + 1 && lj == c0 + 1;
        if (any[cell] | ins_only[cell]) {
          if ((flags & kDel) && any[cell]) any[cell - w] = 1;
          if (flags & kIns) ins_only[cell - 1] = 1;
          if (flags & kMatch) {
            any[defines_tdm ? r0 * w + c0 : (li - 1) * w + (lj - 1)] = 1;
            used_tdm[cell] = 1;
          }
        }
        if (defines_tdm && used_tdm[cell]) any[cell - w - 1] = 1;
      }
    }
  }

  // The forest table of keyroots x.keyroots[a], y.keyroots[b].
  template <bool kCount>
  void any_table(size_t a, size_t b) {
    if (kCount) {
      table<false>(x.keyroots[a], y.keyroots[b]);
    } else {
      distance_table(a, b);
    }
  }

  // The forest table of keyroots (kx, ky), distances only, for what later
  // tables read of it: the tdm of its path pairs (i, j), each the forest
  // distance at (i - 1, j - 1) plus the replacement. So the last row and
  // column are left out (but in the final table, whose corner is the
  // answer): 12% of the cells of 30-node random trees. The same expressions
  // as `table`, so the same values to the bit.
  void distance_table(size_t a, size_t b) {
    double* fd = ws.fd.data();
    const int64_t kx = x.keyroots[a], ky = y.keyroots[b];
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
    const bool last = kx == x.n && ky == y.n;
    const int64_t rows_end = last ? kx : kx - 1, cols_end = last ? ky : ky - 1;
    fd[r0 * w + c0] = 0.0;
    // The sums stay in a register; reading them back from the strided column
    // made a store-to-load chain that cost as much as small tables themselves.
    double sum = 0.0;
    for (int64_t i = r0 + 1; i <= rows_end; ++i) {
      sum = sum + del(i);
      fd[i * w + c0] = sum;
    }
    sum = 0.0;
    for (int64_t j = c0 + 1; j <= cols_end; ++j) {
      sum = sum + ins(j);
      fd[r0 * w + j] = sum;
    }
    double* tdm = ws.tdm.data();
    const double* cost = ws.cost.data();  // row 0: insertions
    const int64_t corner = r0 * w + c0;
    const int64_t* ly = y.leftmost.data();
    for (int64_t i = r0 + 1; i <= rows_end; ++i) {
      const int64_t li = x.leftmost[i];
      const bool x_on_path = li == r0 + 1;
      const double del_i = del(i);
      const int64_t row = i * w;
      // The left neighbour stays in a register: the insertion alternative
      // is the only chain from cell to cell.
      if (!x_on_path && i < rows_end && x.leftmost[i + 1] != r0 + 1) {
        // Two ordinary rows at once, the second one cell behind: two
        // independent chains for the processor to overlap.
        const int64_t row2 = row + w;
        const double del2 = del(i + 1);
        const double* jump1 = fd + (li - 1) * w - 1;
        const double* jump2 = fd + (x.leftmost[i + 1] - 1) * w - 1;
        double left1 = fd[row + c0], left2 = fd[row2 + c0];
        int64_t j = c0 + 1;
        left1 = std::min(std::min(fd[row - w + j] + del_i, jump1[ly[j]] + tdm[row + j]), left1 + cost[j]);
        fd[row + j] = left1;
        for (j = c0 + 2; j <= cols_end; ++j) {
          left1 = std::min(std::min(fd[row - w + j] + del_i, jump1[ly[j]] + tdm[row + j]),
                           left1 + cost[j]);
          fd[row + j] = left1;
          const int64_t k = j - 1;
          left2 = std::min(std::min(fd[row + k] + del2, jump2[ly[k]] + tdm[row2 + k]),
                           left2 + cost[k]);
          fd[row2 + k] = left2;
        }
        left2 = std::min(std::min(fd[row + cols_end] + del2, jump2[ly[cols_end]] + tdm[row2 + cols_end]),
                         left2 + cost[cols_end]);
        fd[row2 + cols_end] = left2;
        ++i;
        continue;
      }
      double left = fd[row + c0];
      if (!x_on_path) {
        // Every jump comes from row li - 1.
        const double* jump_row = fd + (li - 1) * w - 1;
        for (int64_t j = c0 + 1; j <= cols_end; ++j) {
          const int64_t cell = row + j;
          const double ac = std::min(fd[cell - w] + del_i, jump_row[ly[j]] + tdm[cell]);
          left = std::min(ac, left + cost[j]);
          fd[cell] = left;
        }
      } else {
        // Jumps come from row r0; cells on y's path define tdm.
        const double* jump_row = fd + r0 * w - 1;
        for (int64_t j = c0 + 1; j <= cols_end; ++j) {
          const int64_t cell = row + j;
          double c;
          if (ly[j] == c0 + 1) {
            tdm[cell] = fd[cell - w - 1] + rep(i, j);
            c = fd[corner] + tdm[cell];
          } else {
            c = jump_row[ly[j]] + tdm[cell];
          }
          left = std::min(std::min(fd[cell - w] + del_i, c), left + cost[j]);
          fd[cell] = left;
        }
      }
    }
    if (last) return;
    // The path pairs in the left-out row and column.
    int64_t len_x, len_y;
    const int64_t* px = path_of(x, a, &len_x);
    const int64_t* py = path_of(y, b, &len_y);
    for (int64_t s = 0; s < len_x; ++s) {
      const int64_t cell = px[s] * w + ky;
      tdm[cell] = fd[cell - w - 1] + rep(px[s], ky);
    }
    for (int64_t t = 0; t + 1 < len_y; ++t) {
      const int64_t cell = kx * w + py[t];
      tdm[cell] = fd[cell - w - 1] + rep(kx, py[t]);
    }
  }

  // Fills the forest table of keyroots (kx, ky) with distances and inside
  // counts (the counting pass where no flags were kept; distance_table is the
  // distance pass), and with kFlags what only the outside pass reads:
  // co-optimal flags and counts not entered by a deletion.
  template <bool kFlags>
  void table(int64_t kx, int64_t ky) {
    double* fd = ws.fd.data();
    double* tdm = ws.tdm.data();
    const double* cost = ws.cost.data();
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
    const int64_t corner = r0 * w + c0;
    fd[corner] = 0.0;
    cnt.tot[corner] = Count::one();
    if (kFlags) {
      cnt.in_other[corner] = Count::one();
      ws.coopt[corner] = 0;
    }
    // First column and row: deletions (insertions) only, one derivation each.
    // The sums stay in a register; reading them back from the strided column
    // made a store-to-load chain that cost as much as small tables themselves.
    double sum = 0.0;
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      const int64_t cell = i * w + c0;
      sum = sum + del(i);
      fd[cell] = sum;
      cnt.tot[cell] = Count::one();
      if (kFlags) {
        cnt.in_other[cell] = Count::zero();
        ws.coopt[cell] = kDel;
      }
    }
    sum = 0.0;
    for (int64_t j = c0 + 1; j <= ky; ++j) {
      const int64_t cell = r0 * w + j;
      sum = sum + ins(j);
      fd[cell] = sum;
      cnt.tot[cell] = Count::one();
      if (kFlags) {
        cnt.in_other[cell] = Count::one();
        ws.coopt[cell] = kIns;
      }
    }
    const int64_t* ly = y.leftmost.data();
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      const int64_t li = x.leftmost[i];
      const bool x_on_path = li == r0 + 1;
      const double del_i = del(i);
      const int64_t row = i * w;
      // The counting pass: counts of derivations entering each cell, in
      // total and "not by a deletion" (an insertion may not follow one).
      Count* tot = cnt.tot.data();
      Count* other = cnt.in_other.data();
      Count* tdm_count = cnt.tdm_count.data();
      uint8_t* coopt = ws.coopt.data();
      const int64_t jump_base = (li - 1) * w - 1;  // + l(j): the cell a jump comes from
      double left = fd[row + c0];
      Count left_other = Count::zero();  // the first column is entered by deletions
      for (int64_t j = c0 + 1; j <= ky; ++j) {
        const int64_t cell = row + j;
        const int64_t lj = ly[j];
        const double a = fd[cell - w] + del_i;
        const double b = left + cost[j];
        int64_t source;  // cell the match (or jump) alternative comes from
        if (x_on_path && lj == c0 + 1) {
          // Both forests are whole trees: define tdm(i, j) here.
          tdm[cell] = fd[cell - w - 1] + cost[cell];
          tdm_count[cell] = tot[cell - w - 1];
          source = corner;
        } else {
          source = jump_base + lj;
        }
        const double c = fd[source] + tdm[cell];
        const double best = std::min(std::min(a, c), b);
        const double threshold = tie.threshold(best);
        // Which alternatives tie varies from cell to cell: selects instead of
        // branches keep the processor from mispredicting at every cell.
        const bool by_del = tie.within(a, best, threshold);
        const bool by_ins = tie.within(b, best, threshold);
        const bool by_match = tie.within(c, best, threshold);
        const uint8_t flags = static_cast<uint8_t>((by_del ? kDel : 0) | (by_ins ? kIns : 0) |
                                                   (by_match ? kMatch : 0));
        const Count in_d = by_del ? tot[cell - w] : Count::zero();
        const Count via_ins = by_ins ? left_other : Count::zero();
        const Count via_match = by_match ? tot[source] * tdm_count[cell] : Count::zero();
        const Count in_o = via_ins + via_match;
        fd[cell] = best;
        left = best;
        tot[cell] = in_d + in_o;
        left_other = in_o;
        if (kFlags) {
          other[cell] = in_o;
          coopt[cell] = flags;
        }
      }
    }
  }

  // True if some replacement defined in the table of keyroots x.keyroots[a],
  // y.keyroots[b] lies on a co-optimal mapping; only then does the outside
  // pass need the table.
  bool has_outside(size_t a, size_t b) const {
    return any_tdm_used(a, b, [this](int64_t cell) { return !cnt.out_tdm[cell].is_zero(); });
  }

  // Pushes outside counts down the co-optimal edges of the table (kx, ky),
  // which must have just been recomputed with counts, and accumulates P.
  void sweep(int64_t kx, int64_t ky, const Count& all) {
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
    Count* out_any = cnt.out_any.data();
    Count* out_ins = cnt.out_ins.data();
    Count* out_tdm = cnt.out_tdm.data();
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
            acc[j] += dp::ratio(cnt.in_other[cell - 1] * out_o, all);
          }
          if (flags & kMatch) {
            const int64_t source = defines_tdm ? r0 * w + c0 : (li - 1) * w + (lj - 1);
            out_any[source] = out_any[source] + out_o * cnt.tdm_count[cell];
            out_tdm[cell] = out_tdm[cell] + out_o * total(source);
          }
        }
        // tdm(i, j) is used nowhere after this cell: all its outside counts
        // are in, so the replacement i -> j is final and its inside lies in
        // this table at (i - 1, j - 1).
        if (defines_tdm && !out_tdm[cell].is_zero()) {
          acc[cell] += dp::ratio(cnt.tdm_count[cell] * out_tdm[cell], all);
          out_any[cell - w - 1] = out_any[cell - w - 1] + out_tdm[cell];
        }
      }
    }
  }
};

// Each pair runs in the orientation whose keyroot tables are smaller.
struct OrientedPair {
  const TreeIndex& x;
  const TreeIndex& y;
};

inline OrientedPair orient(const OrientedTree& xo, const OrientedTree& yo) {
  const bool mirror = xo.right.work * yo.right.work < xo.left.work * yo.left.work;
  return mirror ? OrientedPair{xo.right, yo.right} : OrientedPair{xo.left, yo.left};
}

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
void point_at_cost(int64_t m, int64_t n, TedWorkspace& ws) {
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

// Costs of a pair gathered from a (S, S) symbol cost table (gap = S - 1) by
// the nodes' labels (preorder); with kScale returns the largest absolute
// cost, the tie scale, over the same entries the padded layout would hold
// (only P needs it: the distance pass has no ties to decide).
template <bool kScale, typename scalar_t>
double fill_symbols(const TreeIndex& x, const TreeIndex& y, const scalar_t* table, int64_t S,
                    const int64_t* x_labels, const int64_t* y_labels, TedWorkspace& ws) {
  const int64_t m = x.n, n = y.n, w = n + 1, gap = S - 1;
  ws.cost.resize((m + 1) * w);
  ws.y_symbol.resize(n + 1);
  int64_t* y_symbol = ws.y_symbol.data();
  for (int64_t j = 1; j <= n; ++j) y_symbol[j] = y_labels[y.pre_of_post[j]];
  double* cost = ws.cost.data();
  ws.dels.resize(m + 1);
  double scale = 0.0;
  cost[0] = 0.0;
  const scalar_t* gap_row = table + gap * S;
  for (int64_t j = 1; j <= n; ++j) {
    cost[j] = static_cast<double>(gap_row[y_symbol[j]]);
    if (kScale) scale = std::max(scale, std::fabs(cost[j]));
  }
  for (int64_t i = 1; i <= m; ++i) {
    const scalar_t* row = table + x_labels[x.pre_of_post[i]] * S;
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

// The distance (and, with need_coopt, P in ws.p_acc) of the pair whose costs
// are in ws.cost.
// Inside and outside passes with counts of type Count; false (and nothing
// accumulated) if the total count is not representable in that type.
template <typename Count>
bool ted_coopt(const TreeIndex& x, const TreeIndex& y, const dp::Tie& tie, TedWorkspace& ws,
               CountBuffers<Count>& cnt, double* distance) {
  const int64_t m = x.n, n = y.n, w = n + 1, cells = (m + 1) * w;
  cnt.tdm_count.resize(cells);
  cnt.tot.resize(cells);
  cnt.in_other.resize(cells);
  cnt.out_any.resize(cells);
  cnt.out_ins.resize(cells);
  ws.coopt.resize(cells);
  TedPair<Count> pair{x, y, ws, cnt, w, tie};
  // Counting costs several times the distance per cell, and P needs the counts
  // of only the tables that its co-optimal mappings pass (about a fifth of the
  // cells of random trees): distances everywhere first, then those tables
  // top-down with their co-optimal flags, then counts there alone, from the
  // kept flags.
  pair.template inside<false>();
  pair.mark_needed(ws.needed);
  cnt.kept.clear();
  cnt.kept_offset.assign(ws.needed.size(), -1);
  pair.template inside<true>(ws.needed.data());
  *distance = ws.fd[m * w + n];  // the outside pass reuses fd
  const Count all = pair.total(m * w + n);
  if (!all.usable_total()) return false;
  cnt.out_tdm.assign(cells, Count::zero());
  ws.p_acc.assign(cells, 0.0);
  for (size_t a = x.keyroots.size(); a-- > 0;) {
    for (size_t b = y.keyroots.size(); b-- > 0;) {
      if (!pair.has_outside(a, b)) continue;
      const uint8_t* f = pair.kept_flags(a, b);
      if (f != nullptr) {
        if (!pair.restore_table(a, b, f)) pair.template count_table<true>(x.keyroots[a], y.keyroots[b], f);
      } else {
        pair.template table<true>(x.keyroots[a], y.keyroots[b]);
      }
      pair.sweep(x.keyroots[a], y.keyroots[b], all);
    }
  }
  return true;
}

// The distance (and, with need_coopt, P in ws.p_acc) of the pair whose costs
// are in ws.cost.
double ted_solve(const TreeIndex& x, const TreeIndex& y, bool need_coopt, const dp::Tie& tie,
                 TedWorkspace& ws) {
  const int64_t m = x.n, n = y.n, w = n + 1, cells = (m + 1) * w;
  ws.fd.resize(cells);
  ws.tdm.resize(cells);
  if (!need_coopt) {
    TedPair<dp::FastCount> pair{x, y, ws, ws.fast, w, tie};
    pair.inside<false>();
    return ws.fd[m * w + n];
  }
  // Counts as doubles unless they overflow (massive ties in large trees).
  double distance;
  if (!ted_coopt(x, y, tie, ws, ws.fast, &distance)) {
    // Cannot fail for costs within the overflow rule (some alternative of each cell is its minimum).
    const bool counted = ted_coopt(x, y, tie, ws, ws.exact, &distance);
    TORCH_CHECK(counted, "internal error: no co-optimal mapping was counted for a pair of ", x.n, " and ", y.n, " nodes");
  }
  return distance;
}

// P from ws.p_acc back to preorder and the padded cost layout.
template <typename scalar_t>
void write_coopt(const TreeIndex& x, const TreeIndex& y, const TedWorkspace& ws, scalar_t* p,
                 int64_t stride) {
  const int64_t m = x.n, n = y.n, w = n + 1;
  const double* acc = ws.p_acc.data();
  for (int64_t i = 1; i <= m; ++i) {
    scalar_t* row = p + x.pre_of_post[i] * stride;
    row[n] = static_cast<scalar_t>(acc[i * w]);
    for (int64_t j = 1; j <= n; ++j) row[y.pre_of_post[j]] = static_cast<scalar_t>(acc[i * w + j]);
  }
  for (int64_t j = 1; j <= n; ++j) p[m * stride + y.pre_of_post[j]] = static_cast<scalar_t>(acc[j]);
}

#ifdef BEDL_X86_SIMD
// ---- Four pairs at once: the distance with symbol-table costs, AVX2 ----
//
// The forest tables of 30-node random trees average 6 x 6 cells, so a sweep
// row by row spends about as much on starting rows and tables (and on the
// mispredicted exits of short loops) as on cells, and each cell waits for its
// left neighbour. Here up to four pairs that share x (and orientation) run in
// the four lanes of AVX2 vectors. For one keyroot K of x, all tables (K, H)
// over the non-leaf keyroots H of a lane's y stand side by side in one wide
// row, each with its first column (as a cell whose only finite alternative
// is the deletion), so a keyroot of x is one loop over long rows with four
// independent chains. The columns of lane l come from its own y: the jump
// and tdm reads, which follow y's structure, are gathers. Every cell uses the
// expressions of distance_table in the same order (including std::min's
// operand order), so lanes and the scalar kernel give the same bits
// (test_simd_lanes_equal_scalar_kernel).
constexpr int kLanes = 4;

// y's side of the wide layout, which does not depend on x: built once per
// tree (and orientation) of a call. Table H's columns are l(H) - 1 .. H.
// Indices are in doubles of lane 0 (times kLanes); each lane adds its number.
struct WideY {
  int64_t width = 0, final_col = 0;  // final_col: the root's table is the last
  std::vector<double> ins;           // +inf in first columns: no insertion enters them
  std::vector<double> first_row;     // the tables' first rows (insertion sums)
  std::vector<double> below_ins;     // inserting l(j) .. j - 1 (leaf rows' tdm); +inf in first columns
  std::vector<int64_t> jump_at;      // the column the jump (match) alternative comes from
  // Where a row's tdm of the column's node lies, relative to the row's start:
  // the node's column in its own keyroot's table (itself on paths), leaf
  // keyroot k's slot (-2 - k), or the +inf slot (-1) in first columns.
  std::vector<int64_t> def_at;
  std::vector<int64_t> symbol;       // the column's symbol (0 in first columns)
  std::vector<int64_t> leaf_symbol;  // the leaf keyroots' symbols, slot by slot
  // Small alphabets (S <= kRepBySymbolLimit): the replacement cost of every
  // column for each symbol s of x, at [s * width + c], for ted_lanes' rep_w.
  std::vector<double> rep_by_symbol;
  static constexpr int64_t kRepBySymbolLimit = 32;
};

inline bool lanes_fit(const TreeIndex& x, const TreeIndex& y) {
  // One-node trees take the scalar kernel's special cases. The wide rows of
  // large trees (comb-shaped ones have O(n^2) columns) outgrow the caches:
  // measured on random trees, lanes were 1.8x the scalar kernel at 100 nodes
  // ((n+1) W ~ 23k cells), 1.2x at 200 (~91k), 0.75x at 300 (~207k).
  return x.n >= 2 && y.n >= 2 && (x.n + 1) * y.wide_width <= (int64_t{1} << 17);
}

// Bytes of one WideY (an upper bound), and how many all of a call's may take.
inline size_t wide_bytes_of(int64_t width, int64_t S) {
  const int64_t per_column = 7 + (S <= WideY::kRepBySymbolLimit ? S : 0);
  return static_cast<size_t>(width) * static_cast<size_t>(per_column) * sizeof(double) + 256;
}
constexpr size_t kWideBudget = size_t{1} << 28;  // 256 MB

template <typename scalar_t>
void build_wide(const TreeIndex& y, const int64_t* labels, const scalar_t* table, int64_t S,
                WideY& out) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const scalar_t* gap_row = table + (S - 1) * S;
  std::vector<int64_t> symbol(y.n + 1, 0);
  for (int64_t j = 1; j <= y.n; ++j) symbol[j] = labels[y.pre_of_post[j]];
  std::vector<double> below;
  sums_below(y, [&](int64_t j) { return static_cast<double>(gap_row[symbol[j]]); }, below);
  out = WideY{};
  for (auto* v : {&out.ins, &out.first_row, &out.below_ins}) v->reserve(y.wide_width);
  for (auto* v : {&out.jump_at, &out.def_at, &out.symbol}) v->reserve(y.wide_width);
  std::vector<int64_t> def_of(y.n + 1, -1);  // node -> def_at / kLanes, filled in keyroot order
  auto column = [&](double ins, double first, double below_ins, int64_t jump, int64_t node, bool path) {
    if (path) def_of[node] = static_cast<int64_t>(out.ins.size());
    out.ins.push_back(ins);
    out.first_row.push_back(first);
    out.below_ins.push_back(below_ins);
    out.jump_at.push_back(jump * kLanes);
    out.def_at.push_back(node == 0 ? -kLanes : def_of[node] * kLanes);
    out.symbol.push_back(symbol[node]);
  };
  for (int64_t h : y.keyroots) {
    const int64_t c0 = y.leftmost[h] - 1;
    if (c0 + 1 == h) {  // leaf keyroots: closed form
      def_of[h] = -2 - static_cast<int64_t>(out.leaf_symbol.size());
      out.leaf_symbol.push_back(symbol[h]);
      continue;
    }
    const int64_t base = static_cast<int64_t>(out.ins.size());
    column(inf, 0.0, inf, base, 0, false);  // the first column: deletions only
    double sum = 0.0;
    for (int64_t j = c0 + 1; j <= h; ++j) {
      const double ins = static_cast<double>(gap_row[symbol[j]]);
      sum = sum + ins;
      column(ins, sum, below[j], base + y.leftmost[j] - 1 - c0, j, y.leftmost[j] == c0 + 1);
    }
  }
  out.width = static_cast<int64_t>(out.ins.size());
  out.final_col = out.width - 1;
  if (S <= WideY::kRepBySymbolLimit) {
    out.rep_by_symbol.resize(S * out.width);
    for (int64_t a = 0; a < S; ++a) {
      for (int64_t c = 0; c < out.width; ++c)
        out.rep_by_symbol[a * out.width + c] = static_cast<double>(table[a * S + out.symbol[c]]);
    }
  }
}

struct LaneWorkspace {
  std::vector<double> fd;         // (m+1) wide rows x W columns x kLanes
  // Per row i of x: the +inf slot, one slot per leaf keyroot of y (L, the
  // most of the lanes; slot k at -2 - k), then tdm(i, node of column c) for
  // every column, as the rows of x's paths define or read it, so that other
  // rows read it contiguously: (m+1) x (L+1+W) x kLanes.
  std::vector<double> tdm;
  std::vector<double> ins, first_row, below_ins;     // W x kLanes
  std::vector<int64_t> jump_at, def_at, symbol_at;   // W x kLanes gather indices
  // What the rows on a path of x jump to: always the first row (so, the
  // same for every keyroot of x), gathered once.
  std::vector<double> jump_first;                    // W x kLanes
  std::vector<int64_t> leaf_symbol;                  // L x kLanes
  std::vector<int64_t> x_symbol;                     // x's labels in postorder
  std::vector<double> del, below_del;                // x's deletions, sums below (postorder)
  // Replacement costs by wide column (and by leaf keyroot slot) for each
  // distinct symbol of x, where x has few: contiguous loads in the rows
  // instead of a gather per step.
  std::vector<double> rep_w, leaf_rep_w;
  std::vector<int64_t> slot_of;                      // symbol -> row of rep_w, -1: none
  std::vector<int64_t> distinct_symbols;
  std::vector<int64_t> rep_slot;                     // x node -> its row of rep_w
};

// src[at[0..3]] as a vector. Four loads and two inserts: vgatherqpd took
// 1.6x as long on the AMD EPYC (Zen 3) this was measured on.
__attribute__((target("avx2"))) inline __m256d gather4(const double* src, const int64_t* at) {
  const __m128d lo = _mm_loadh_pd(_mm_load_sd(src + at[0]), src + at[1]);
  const __m128d hi = _mm_loadh_pd(_mm_load_sd(src + at[2]), src + at[3]);
  return _mm256_insertf128_pd(_mm256_castpd128_pd256(lo), hi, 1);
}
__attribute__((target("avx2"))) inline __m256d gather4(const float* src, const int64_t* at) {
  return _mm256_set_pd(src[at[3]], src[at[2]], src[at[1]], src[at[0]]);
}

// out[c * kLanes + l] = (c < len[l] ? src[l][c] : pad) (+ l for indices) for c < W:
// four columns at a time as a 4 x 4 transpose, the ragged end one by one.
template <typename T, bool kIndex>
__attribute__((target("avx2"))) void interleave_lanes(const T* const src[kLanes], const int64_t len[kLanes],
                                                      T pad, int64_t W, T* out) {
  static_assert(sizeof(T) == sizeof(double), "64-bit columns");
  int64_t common = W;
  for (int l = 0; l < kLanes; ++l) common = std::min(common, len[l]);
  common -= common % kLanes;
  const __m256i lane_index = _mm256_set_epi64x(3, 2, 1, 0);
  for (int64_t c = 0; c < common; c += kLanes) {
    const __m256d r0 = _mm256_loadu_pd(reinterpret_cast<const double*>(src[0] + c));
    const __m256d r1 = _mm256_loadu_pd(reinterpret_cast<const double*>(src[1] + c));
    const __m256d r2 = _mm256_loadu_pd(reinterpret_cast<const double*>(src[2] + c));
    const __m256d r3 = _mm256_loadu_pd(reinterpret_cast<const double*>(src[3] + c));
    const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    const __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    __m256d cols[kLanes] = {_mm256_permute2f128_pd(t0, t2, 0x20), _mm256_permute2f128_pd(t1, t3, 0x20),
                            _mm256_permute2f128_pd(t0, t2, 0x31), _mm256_permute2f128_pd(t1, t3, 0x31)};
    for (int k = 0; k < kLanes; ++k) {
      if (kIndex) cols[k] = _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(cols[k]), lane_index));
      _mm256_storeu_pd(reinterpret_cast<double*>(out + (c + k) * kLanes), cols[k]);
    }
  }
  for (int64_t c = common; c < W; ++c) {
    for (int l = 0; l < kLanes; ++l) {
      const T v = c < len[l] ? src[l][c] : pad;
      out[c * kLanes + l] = kIndex ? static_cast<T>(v + l) : v;
    }
  }
}

// Replacement costs of x_i against column block c: from its row by symbol
// (rep_w), else gathered from its row of the table.
template <typename scalar_t>
__attribute__((target("avx2"))) inline __m256d rep_block(const double* rep_w, const scalar_t* rep_row,
                                                         const int64_t* symbol_at, int64_t c) {
  return rep_w ? _mm256_loadu_pd(rep_w + c) : gather4(rep_row, symbol_at + c);
}

// tdm of column block c in a row of K's path (or K's own row): defined from
// the cell up-left (`diag`) where the column is its own definition, i.e. on
// a path of y's tables; elsewhere read where it was defined (before in this
// row, or a leaf keyroot's slot). Stored in the row's tdm and returned.
// `own` holds the block's own indices and advances to the next block.
__attribute__((target("avx2"))) inline __m256d path_tdm_block(double* tdm_row, const int64_t* def_at,
                                                              int64_t c, __m256i& own, __m256d diag,
                                                              __m256d rep) {
  const __m256d on_path = _mm256_castsi256_pd(
      _mm256_cmpeq_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(def_at + c)), own));
  own = _mm256_add_epi64(own, _mm256_set1_epi64x(kLanes));
  const __m256d tv = _mm256_blendv_pd(gather4(tdm_row, def_at + c), _mm256_add_pd(diag, rep), on_path);
  _mm256_storeu_pd(tdm_row + c, tv);
  return tv;
}

// Distances of the pairs (x, ys[l]) for l < lanes (2 <= lanes <= 4; unused
// lanes repeat the last pair) into out[l]; x_labels in preorder.
template <typename scalar_t>
__attribute__((target("avx2"))) void ted_lanes(const TreeIndex& x, const WideY* const* ys,
                                               int lanes, const scalar_t* table, int64_t S,
                                               const int64_t* x_labels, LaneWorkspace& ws,
                                               double* out) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const int64_t m = x.n, gap = S - 1;
  const WideY* y_of[kLanes];
  int64_t W = 0, L = 0;
  for (int l = 0; l < kLanes; ++l) {
    y_of[l] = ys[std::min(l, lanes - 1)];
    W = std::max(W, y_of[l]->width);
    L = std::max(L, static_cast<int64_t>(y_of[l]->leaf_symbol.size()));
  }
  const int64_t row_len = W * kLanes, tdm_row = (L + 1 + W) * kLanes, tdm_start = (L + 1) * kLanes;

  // x's side.
  ws.x_symbol.resize(m + 1);
  ws.del.resize(m + 1);
  for (int64_t i = 1; i <= m; ++i) {
    ws.x_symbol[i] = x_labels[x.pre_of_post[i]];
    ws.del[i] = static_cast<double>(table[ws.x_symbol[i] * S + gap]);
  }
  sums_below(x, [&](int64_t i) { return ws.del[i]; }, ws.below_del);
  // Rows of leaves and of paths read a replacement cost per cell. With few
  // symbols in x (unit costs over a small alphabet), one row of them per
  // symbol costs less than gathering them in every such row.
  if (ws.slot_of.size() < static_cast<size_t>(S)) ws.slot_of.resize(S, -1);
  std::vector<int64_t>& symbols = ws.distinct_symbols;
  symbols.clear();
  ws.rep_slot.resize(m + 1);
  for (int64_t i = 1; i <= m; ++i) {
    int64_t& slot = ws.slot_of[ws.x_symbol[i]];
    if (slot < 0) {
      slot = static_cast<int64_t>(symbols.size());
      symbols.push_back(ws.x_symbol[i]);
    }
    ws.rep_slot[i] = slot;
  }
  for (int64_t s : symbols) ws.slot_of[s] = -1;
  const bool by_symbol = 2 * static_cast<int64_t>(symbols.size()) <= m;

  // The lanes' columns, interleaved and padded to W.
  ws.fd.resize((m + 1) * row_len);
  ws.tdm.resize((m + 1) * tdm_row);
  for (auto* v : {&ws.ins, &ws.first_row, &ws.below_ins}) v->resize(row_len);
  for (auto* v : {&ws.jump_at, &ws.def_at}) v->resize(row_len);
  ws.leaf_symbol.assign(L * kLanes, 0);
  if (by_symbol) {
    ws.rep_w.resize(symbols.size() * row_len);
    ws.leaf_rep_w.resize(symbols.size() * L * kLanes);
  } else {
    ws.symbol_at.resize(row_len);
  }
  {
    // Padding columns are like first columns (deletions only, no tdm); they
    // jump to column 0.
    int64_t len[kLanes];
    const double *ins_src[kLanes], *first_src[kLanes], *below_src[kLanes];
    const int64_t *jump_src[kLanes], *def_src[kLanes];
    for (int l = 0; l < kLanes; ++l) {
      const WideY& y = *y_of[l];
      len[l] = y.width;
      ins_src[l] = y.ins.data();
      first_src[l] = y.first_row.data();
      below_src[l] = y.below_ins.data();
      jump_src[l] = y.jump_at.data();
      def_src[l] = y.def_at.data();
    }
    interleave_lanes<double, false>(ins_src, len, inf, W, ws.ins.data());
    interleave_lanes<double, false>(first_src, len, 0.0, W, ws.first_row.data());
    interleave_lanes<double, false>(below_src, len, inf, W, ws.below_ins.data());
    interleave_lanes<int64_t, true>(jump_src, len, 0, W, ws.jump_at.data());
    interleave_lanes<int64_t, true>(def_src, len, -kLanes, W, ws.def_at.data());
  }
  for (int l = 0; l < kLanes; ++l) {
    const WideY& y = *y_of[l];
    const int64_t w = y.width;
    for (size_t k = 0; k < y.leaf_symbol.size(); ++k) ws.leaf_symbol[k * kLanes + l] = y.leaf_symbol[k];
    if (by_symbol && y.rep_by_symbol.empty()) {
      for (size_t s = 0; s < symbols.size(); ++s) {
        const scalar_t* rep_row = table + symbols[s] * S;
        double* rep = ws.rep_w.data() + s * row_len + l;
        for (int64_t col = 0; col < w; ++col) rep[col * kLanes] = static_cast<double>(rep_row[y.symbol[col]]);
        for (int64_t col = w; col < W; ++col) rep[col * kLanes] = 0.0;
      }
    } else if (!by_symbol) {
      for (int64_t col = 0; col < W; ++col) ws.symbol_at[col * kLanes + l] = col < w ? y.symbol[col] : 0;
    }
  }
  if (by_symbol && !y_of[0]->rep_by_symbol.empty()) {  // (all lanes have them: same S)
    const double* src[kLanes];
    int64_t len[kLanes];
    for (size_t s = 0; s < symbols.size(); ++s) {
      for (int l = 0; l < kLanes; ++l) {
        src[l] = y_of[l]->rep_by_symbol.data() + symbols[s] * y_of[l]->width;
        len[l] = y_of[l]->width;
      }
      interleave_lanes<double, false>(src, len, 0.0, W, ws.rep_w.data() + s * row_len);
    }
  }
  if (by_symbol) {
    for (size_t s = 0; s < symbols.size(); ++s) {
      const scalar_t* rep_row = table + symbols[s] * S;
      double* rep = ws.leaf_rep_w.data() + s * L * kLanes;
      for (int64_t k = 0; k < L * kLanes; ++k) rep[k] = static_cast<double>(rep_row[ws.leaf_symbol[k]]);
    }
  }
  for (int64_t i = 0; i <= m; ++i) {
    for (int l = 0; l < kLanes; ++l) ws.tdm[i * tdm_row + tdm_start - kLanes + l] = inf;
  }
  ws.jump_first.resize(row_len);
  for (int64_t at = 0; at < row_len; ++at) ws.jump_first[at] = ws.first_row[ws.jump_at[at]];

  double* fd = ws.fd.data();
  // Local pointers: through the vectors the compiler reloads them after every store.
  const double *ins = ws.ins.data(), *below_ins = ws.below_ins.data();
  const int64_t *jump_at = ws.jump_at.data(), *def_at = ws.def_at.data();
  const int64_t* symbol_at = ws.symbol_at.data();
  const double* jump_first = ws.jump_first.data();
  const int64_t* x_symbol = ws.x_symbol.data();
  const double* below_del = ws.below_del.data();
  auto tdm_of = [&](int64_t i) { return ws.tdm.data() + i * tdm_row + tdm_start; };
  auto rep_w_of = [&](int64_t i) -> const double* {
    return by_symbol ? ws.rep_w.data() + ws.rep_slot[i] * row_len : nullptr;
  };
  const __m256i lane_index = _mm256_set_epi64x(3, 2, 1, 0);
  for (size_t a = 0; a < x.keyroots.size(); ++a) {
    const int64_t kx = x.keyroots[a], r0 = x.leftmost[kx] - 1;
    // A leaf keyroot's tdm (y inserted but for its root, which is matched)
    // is computed where it is read: rows of leaves below.
    if (r0 + 1 == kx) continue;
    // y's leaf keyroots: x deleted but for the root, for the nodes on K's path.
    const int64_t path_len = x.path_begin[a + 1] - x.path_begin[a];
    const int64_t* path = x.path_nodes.data() + x.path_begin[a];
    for (int64_t s = 0; s < path_len; ++s) {
      const int64_t i = path[s];
      const __m256d below = _mm256_set1_pd(below_del[i]);
      double* slots = tdm_of(i);
      const double* rep_w = by_symbol ? ws.leaf_rep_w.data() + ws.rep_slot[i] * L * kLanes : nullptr;
      const scalar_t* rep_row = table + x_symbol[i] * S;
      for (int64_t k = 0; k < L; ++k) {
        const __m256d rep = rep_w ? _mm256_loadu_pd(rep_w + k * kLanes)
                                  : gather4(rep_row, ws.leaf_symbol.data() + k * kLanes);
        _mm256_storeu_pd(slots - (2 + k) * kLanes, _mm256_add_pd(below, rep));
      }
    }
    // Row r0 is the first row, read only as the row above r0 + 1 (rows on
    // K's path jump to it through jump_first).
    // Only the tdm cells of row kx are read later (but in the final tables).
    const int64_t rows_end = kx == m ? m : kx - 1;
    for (int64_t i = r0 + 1; i <= rows_end; ++i) {
      const int64_t li = x.leftmost[i];
      const bool x_on_path = li == r0 + 1;
      const double* up = i - 1 == r0 ? ws.first_row.data() : fd + (i - 1) * row_len;
      double* cur = fd + i * row_len;
      const double* jump = fd + (li - 1) * row_len;  // (rows on K's path: jump_first)
      double* tdm_i = tdm_of(i);
      const scalar_t* rep_row = table + x_symbol[i] * S;
      const double* rep_w = rep_w_of(i);
      const __m256d del = _mm256_set1_pd(ws.del[i]);
      __m256d left = _mm256_set1_pd(inf);
      // std::min(a, b) is (b < a) ? b : a, and _mm256_min_pd(p, q) is (p < q) ? p : q.
      if (!x_on_path && li != i) {
        // i lies on a path below: its row of tdm is complete.
        for (int64_t c = 0; c < row_len; c += kLanes) {
          const __m256d del_alt = _mm256_add_pd(_mm256_loadu_pd(up + c), del);
          const __m256d match = _mm256_add_pd(gather4(jump, jump_at + c), _mm256_loadu_pd(tdm_i + c));
          left = _mm256_min_pd(_mm256_add_pd(left, _mm256_loadu_pd(ins + c)), _mm256_min_pd(match, del_alt));
          _mm256_storeu_pd(cur + c, left);
        }
      } else if (!x_on_path) {
        // A leaf: tdm(i, j) inserts y's subtree of j but j, matched to i
        // (the leaf keyroots' closed form; the same sums for leaves on paths).
        for (int64_t c = 0; c < row_len; c += kLanes) {
          const __m256d del_alt = _mm256_add_pd(_mm256_loadu_pd(up + c), del);
          const __m256d tv = _mm256_add_pd(_mm256_loadu_pd(below_ins + c), rep_block(rep_w, rep_row, symbol_at, c));
          const __m256d match = _mm256_add_pd(gather4(jump, jump_at + c), tv);
          left = _mm256_min_pd(_mm256_add_pd(left, _mm256_loadu_pd(ins + c)), _mm256_min_pd(match, del_alt));
          _mm256_storeu_pd(cur + c, left);
        }
      } else {
        // Rows on K's path define their tdm as they go (path_tdm_block) and
        // jump to the first row.
        __m256d diag = _mm256_setzero_pd();  // column 0 is a first column, never on a path
        __m256i own = lane_index;
        for (int64_t c = 0; c < row_len; c += kLanes) {
          const __m256d above = _mm256_loadu_pd(up + c);
          const __m256d del_alt = _mm256_add_pd(above, del);
          const __m256d tv =
              path_tdm_block(tdm_i, def_at, c, own, diag, rep_block(rep_w, rep_row, symbol_at, c));
          diag = above;
          const __m256d match = _mm256_add_pd(_mm256_loadu_pd(jump_first + c), tv);
          left = _mm256_min_pd(_mm256_add_pd(left, _mm256_loadu_pd(ins + c)), _mm256_min_pd(match, del_alt));
          _mm256_storeu_pd(cur + c, left);
        }
      }
    }
    if (kx == m) break;  // the last keyroot
    // The row of tdm of kx, as a path row would leave it (from row kx - 1).
    const double* up = fd + (kx - 1) * row_len;
    const scalar_t* rep_row = table + x_symbol[kx] * S;
    const double* rep_w = rep_w_of(kx);
    double* tdm_k = tdm_of(kx);
    __m256d diag = _mm256_setzero_pd();
    __m256i own = lane_index;
    for (int64_t c = 0; c < row_len; c += kLanes) {
      path_tdm_block(tdm_k, def_at, c, own, diag, rep_block(rep_w, rep_row, symbol_at, c));
      diag = _mm256_loadu_pd(up + c);
    }
  }
  for (int l = 0; l < lanes; ++l) out[l] = fd[m * row_len + y_of[l]->final_col * kLanes + l];
}

// Groups of pairs for ted_lanes: same x tree and orientation, in order of y's
// width within a group so that lanes do similar work. Pairs left alone (or
// that do not fit) run on the scalar kernel.
struct LaneGroup {
  int64_t pair[kLanes];
  int count;
};

inline void plan_lanes(const std::vector<OrientedTree>& xs, const std::vector<OrientedTree>& ys,
                       const int64_t* px, const int64_t* py, int64_t batch,
                       std::vector<LaneGroup>& groups, std::vector<int64_t>& singles) {
  struct Entry {
    int64_t key, width, pair;
  };
  std::vector<Entry> unsorted;
  unsorted.reserve(batch);
  std::vector<int64_t> bucket_end(xs.size() * 2 + 1, 0);  // keys counted, then bucket ends
  for (int64_t b = 0; b < batch; ++b) {
    const OrientedPair o = orient(xs[px[b]], ys[py[b]]);
    if (!lanes_fit(o.x, o.y)) {
      singles.push_back(b);
      continue;
    }
    const bool mirrored = &o.x == &xs[px[b]].right;
    unsorted.push_back({px[b] * 2 + (mirrored ? 1 : 0), o.y.wide_width, b});
    ++bucket_end[unsorted.back().key + 1];
  }
  // By key (a counting sort: the keys are few and dense), then by width
  // within each key's (short) run.
  for (size_t k = 1; k < bucket_end.size(); ++k) bucket_end[k] += bucket_end[k - 1];
  std::vector<Entry> entries(unsorted.size());
  for (const Entry& e : unsorted) entries[bucket_end[e.key]++] = e;  // now bucket_end[key] = end of key
  for (size_t key = 0, begin = 0; key + 1 < bucket_end.size(); begin = bucket_end[key++]) {
    std::sort(entries.begin() + begin, entries.begin() + bucket_end[key], [](const Entry& p, const Entry& q) {
      return std::tie(p.width, p.pair) < std::tie(q.width, q.pair);
    });
  }
  for (size_t k = 0; k < entries.size();) {
    size_t end = k;
    while (end < entries.size() && entries[end].key == entries[k].key) ++end;
    for (; k < end; k += kLanes) {
      const int count = static_cast<int>(std::min<size_t>(kLanes, end - k));
      if (count == 1) {
        singles.push_back(entries[k].pair);
        continue;
      }
      LaneGroup g{};
      g.count = count;
      for (int l = 0; l < count; ++l) g.pair[l] = entries[k + l].pair;
      groups.push_back(g);
    }
    k = end;
  }
}
#endif  // BEDL_X86_SIMD

std::vector<OrientedTree> index_trees(const at::Tensor& sizes, const at::Tensor& ptr,
                                   const char* side) {
  const int64_t count = ptr.size(0) - 1;
  TORCH_CHECK_VALUE(count >= 0, side, "_ptr must have at least one entry");
  const int64_t* ptr_p = ptr.data_ptr<int64_t>();
  const int64_t* size_p = sizes.data_ptr<int64_t>();
  TORCH_CHECK_VALUE(ptr_p[0] == 0 && ptr_p[count] == sizes.size(0), side,
              "_ptr must start at 0 and end at the number of nodes");
  std::vector<OrientedTree> trees(count);
  for (int64_t t = 0; t < count; ++t) {
    TORCH_CHECK_VALUE(ptr_p[t + 1] >= ptr_p[t], side, "_ptr must be non-decreasing");
    trees[t] = index_tree(size_p + ptr_p[t], ptr_p[t + 1] - ptr_p[t], t, side);
  }
  return trees;
}

// The trees of both sides. A pairwise matrix of one collection passes the
// same tree tensors as x and y: they are indexed once.
struct IndexedTrees {
  std::vector<OrientedTree> xs, ys_own;
  bool same = false;
  const std::vector<OrientedTree>& ys() const { return same ? xs : ys_own; }
};

IndexedTrees index_both(const at::Tensor& x_sizes, const at::Tensor& x_ptr,
                        const at::Tensor& y_sizes, const at::Tensor& y_ptr) {
  IndexedTrees t;
  t.xs = index_trees(x_sizes.contiguous(), x_ptr.contiguous(), "x");
  t.same = x_sizes.is_same(y_sizes) && x_ptr.is_same(y_ptr);
  if (!t.same) t.ys_own = index_trees(y_sizes.contiguous(), y_ptr.contiguous(), "y");
  return t;
}

// Checks the pair indices against the tree tables (serially, so errors name the pair).
void check_pairs(const std::vector<OrientedTree>& xs, const std::vector<OrientedTree>& ys,
                 const int64_t* px, const int64_t* py, int64_t batch) {
  for (int64_t b = 0; b < batch; ++b) {
    TORCH_CHECK_VALUE(px[b] >= 0 && px[b] < static_cast<int64_t>(xs.size()), "pair_x[", b, "] = ", px[b],
                " is not a tree index");
    TORCH_CHECK_VALUE(py[b] >= 0 && py[b] < static_cast<int64_t>(ys.size()), "pair_y[", b, "] = ", py[b],
                " is not a tree index");
  }
}

}  // namespace

void set_simd_enabled(bool on) { dp::simd_switch().store(on); }
bool simd_enabled() { return dp::simd_avx2(); }

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
  dp::check_rel_tol(rel_tol);
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
    TORCH_CHECK_VALUE(xs[px_p[b]].left.n + 1 <= rows && ys[py_p[b]].left.n + 1 <= cols, "pair ", b,
                " has trees of ", xs[px_p[b]].left.n, " and ", ys[py_p[b]].left.n,
                " nodes, which do not fit costs of shape ", costs.sizes());
  }
  at::Tensor dist = at::empty({batch}, costs.options());
  at::Tensor coopt = need_coopt ? at::zeros_like(costs) : at::empty({0}, costs.options());
  AT_DISPATCH_FLOATING_TYPES(costs.scalar_type(), "ted_cpu", [&] {
    const scalar_t* c = costs.data_ptr<scalar_t>();
    scalar_t* d = dist.data_ptr<scalar_t>();
    scalar_t* p = need_coopt ? coopt.data_ptr<scalar_t>() : nullptr;
    const std::vector<double> scales = dp::cost_scales(
        c, batch, rows, cols,
        [&](int64_t b) { return std::make_pair(xs[px_p[b]].left.n, ys[py_p[b]].left.n); });
    dp::for_each_pair<TedWorkspace>(batch, rows * cols, [&](int64_t b, TedWorkspace& ws) {
      const OrientedPair pair = orient(xs[px_p[b]], ys[py_p[b]]);
      const TreeIndex &x = pair.x, &y = pair.y;
      const int64_t off = b * rows * cols;
      const scalar_t* block = c + off;
      if (need_coopt || !point_in_place(x, y, [&](int64_t p) { return block + p * cols; },
                                        [](int64_t q) { return q; }, block + x.n * cols, y.n, ws)) {
        fill_padded(x, y, block, cols, ws);
        point_at_cost(x.n, y.n, ws);
      }
      d[b] = static_cast<scalar_t>(ted_solve(x, y, need_coopt, dp::Tie{rel_tol, scales[b]}, ws));
      if (need_coopt) write_coopt(x, y, ws, p + off, cols);
    });
  });
  return {dist, coopt};
}

std::tuple<at::Tensor, at::Tensor> ted_symbols_cpu(
    const at::Tensor& symbol_costs_in, const at::Tensor& x_labels, const at::Tensor& x_sizes,
    const at::Tensor& x_ptr, const at::Tensor& y_labels, const at::Tensor& y_sizes,
    const at::Tensor& y_ptr, const at::Tensor& pair_x, const at::Tensor& pair_y, bool need_coopt,
    double rel_tol) {
  const dp::SymbolInputs in =
      dp::check_symbol_inputs(symbol_costs_in, x_labels, x_ptr, y_labels, y_ptr, pair_x, pair_y, rel_tol);
  dp::check_index(x_sizes, "x_sizes", in.x_labels.size(0));
  dp::check_index(y_sizes, "y_sizes", in.y_labels.size(0));
  const int64_t S = in.symbols, batch = in.batch;
  const at::Tensor &table = in.table, &xl = in.x_labels, &yl = in.y_labels;
  const at::Tensor &xptr = in.x_ptr, &yptr = in.y_ptr, &px = in.pair_x, &py = in.pair_y;
  const IndexedTrees trees = index_both(x_sizes, x_ptr, y_sizes, y_ptr);
  const std::vector<OrientedTree>& xs = trees.xs;
  const std::vector<OrientedTree>& ys = trees.ys();
  const int64_t* px_p = px.data_ptr<int64_t>();
  const int64_t* py_p = py.data_ptr<int64_t>();
  const int64_t* xptr_p = xptr.data_ptr<int64_t>();
  const int64_t* yptr_p = yptr.data_ptr<int64_t>();
  check_pairs(xs, ys, px_p, py_p, batch);
  int64_t rows = 1, cols = 1, longest = -1, longest_m = 0, longest_n = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t m = xs[px_p[b]].left.n, n = ys[py_p[b]].left.n;
    rows = std::max(rows, m + 1);
    cols = std::max(cols, n + 1);
    if (longest < 0 || m + n > longest_m + longest_n) std::tie(longest, longest_m, longest_n) = std::tie(b, m, n);
  }
  at::Tensor dist = at::empty({batch}, table.options());
  at::Tensor coopt = need_coopt ? at::zeros({batch, rows, cols}, table.options())
                                : at::empty({0}, table.options());
  AT_DISPATCH_FLOATING_TYPES(table.scalar_type(), "ted_symbols_cpu", [&] {
    if (longest >= 0) dp::check_pair_costs<scalar_t>(in.max_abs, longest_m, longest_n, longest, "symbol costs");
    const scalar_t* t = table.data_ptr<scalar_t>();
    const int64_t* xl_p = xl.data_ptr<int64_t>();
    const int64_t* yl_p = yl.data_ptr<int64_t>();
    scalar_t* d = dist.data_ptr<scalar_t>();
    scalar_t* p = need_coopt ? coopt.data_ptr<scalar_t>() : nullptr;
    auto one_pair = [&](int64_t b, TedWorkspace& ws) {
      const OrientedPair pair = orient(xs[px_p[b]], ys[py_p[b]]);
      const TreeIndex &x = pair.x, &y = pair.y;
      const int64_t* x_labels = xl_p + xptr_p[px_p[b]];
      const int64_t* y_labels = yl_p + yptr_p[py_p[b]];
      double scale = 0.0;
      if (need_coopt || !point_in_place(x, y, [&](int64_t p) { return t + x_labels[p] * S; },
                                        [&](int64_t q) { return y_labels[q]; }, t + (S - 1) * S,
                                        S - 1, ws)) {
        scale = need_coopt ? fill_symbols<true>(x, y, t, S, x_labels, y_labels, ws)
                           : fill_symbols<false>(x, y, t, S, x_labels, y_labels, ws);
        point_at_cost(x.n, y.n, ws);
      }
      d[b] = static_cast<scalar_t>(ted_solve(x, y, need_coopt, dp::Tie{rel_tol, scale}, ws));
      if (need_coopt) write_coopt(x, y, ws, p + b * rows * cols, cols);
    };
#ifdef BEDL_X86_SIMD
    if (!need_coopt && dp::simd_avx2()) {
      std::vector<LaneGroup> groups;
      std::vector<int64_t> singles;
      plan_lanes(xs, ys, px_p, py_p, batch, groups, singles);
      // y's side of the wide layout, per tree and orientation used by a group,
      // within a memory budget (comb-shaped trees have O(n^2) columns); the
      // groups past it run on the scalar kernel.
      std::vector<WideY> wide(ys.size() * 2);
      std::vector<uint8_t> built(ys.size() * 2, 0);
      std::vector<int64_t> to_build;  // (tree * 2 + side), built below in parallel
      size_t wide_bytes = 0;
      size_t kept_groups = 0;
      for (const LaneGroup& g : groups) {
        const OrientedTree& xo = xs[px_p[g.pair[0]]];
        const int side = &orient(xo, ys[py_p[g.pair[0]]]).x == &xo.right ? 1 : 0;
        size_t more = 0;
        for (int l = 0; l < g.count; ++l) {
          const OrientedTree& yo = ys[py_p[g.pair[l]]];
          if (!built[py_p[g.pair[l]] * 2 + side]) more += wide_bytes_of((side ? yo.right : yo.left).wide_width, S);
        }
        if (wide_bytes + more > kWideBudget) {
          for (int l = 0; l < g.count; ++l) singles.push_back(g.pair[l]);
          continue;
        }
        wide_bytes += more;
        for (int l = 0; l < g.count; ++l) {
          const int64_t k = py_p[g.pair[l]] * 2 + side;
          if (built[k]) continue;
          built[k] = 1;
          to_build.push_back(k);
        }
        groups[kept_groups++] = g;
      }
      groups.resize(kept_groups);
      at::parallel_for(0, static_cast<int64_t>(to_build.size()), 16, [&](int64_t begin, int64_t end) {
        for (int64_t n = begin; n < end; ++n) {
          const int64_t k = to_build[n], tree = k / 2;
          const OrientedTree& yo = ys[tree];
          build_wide(k % 2 ? yo.right : yo.left, yl_p + yptr_p[tree], t, S, wide[k]);
        }
      });
      const int64_t g_count = static_cast<int64_t>(groups.size());
      struct Workspaces {
        TedWorkspace ted;
        LaneWorkspace lanes;
      };
      dp::for_each_pair<Workspaces>(
          g_count + static_cast<int64_t>(singles.size()), rows * cols * 2, [&](int64_t k, Workspaces& ws) {
            if (k >= g_count) return one_pair(singles[k - g_count], ws.ted);
            const LaneGroup& g = groups[k];
            const OrientedTree& xo = xs[px_p[g.pair[0]]];
            const OrientedPair first = orient(xo, ys[py_p[g.pair[0]]]);
            const int side = &first.x == &xo.right ? 1 : 0;
            const WideY* y_wide[kLanes];
            for (int l = 0; l < g.count; ++l) y_wide[l] = &wide[py_p[g.pair[l]] * 2 + side];
            double out[kLanes];
            ted_lanes(first.x, y_wide, g.count, t, S, xl_p + xptr_p[px_p[g.pair[0]]], ws.lanes, out);
            for (int l = 0; l < g.count; ++l) d[g.pair[l]] = static_cast<scalar_t>(out[l]);
          });
      return;
    }
#endif
    dp::for_each_pair<TedWorkspace>(batch, rows * cols, one_pair);
  });
  return {dist, coopt};
}

}  // namespace bedl
