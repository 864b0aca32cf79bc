// Tree edit distance (Zhang-Shasha) and its co-optimal alignment matrix on the CPU.
//
// Nodes are numbered 1..n in postorder inside the kernel; l(i) is the leftmost
// leaf of i's subtree and the keyroots are the highest nodes of each leftmost
// path. One forest table per keyroot pair (K, H) covers the forests
// x[l(K)..i] and y[l(H)..j].
//
// Counting (see docs/edit-distances.md): where Zhang-Shasha adds
// the full tree distance of two subtrees, we add tdm(i, j), the distance with
// the roots i and j matched, so that mappings which delete i or insert j are
// reached only through the deletion or insertion alternative of the same cell;
// and an insertion may not leave a cell entered by a deletion. Then every
// co-optimal mapping is exactly one derivation, and P follows from an inside
// pass (counts per cell, tdm counts kept) and an outside pass over the keyroot
// pairs in reverse order, which reads one table at a time and pushes
// completion counts down its co-optimal edges. Only the tables that some
// co-optimal mapping passes need counts; a distance pass and a boolean
// outside pass over the co-optimal flags find them first. Their flags and
// inside counts are written into stores (up to a memory bound; Cells) and
// read there in place, so that neither counting pass recomputes distances or
// ties and no table is copied. Memory is O(m n) plus the kept flags and
// counts (both bounded per thread).
//
// Mirroring both trees (children right to left) maps mappings one-to-one onto
// mappings of equal cost, so each pair runs in the orientation whose keyroot
// tables are smaller (left paths for right-heavy trees and vice versa).
//
// With symbol-table costs, pairs that share x (pairwise matrices) run the
// distance pass, or P's inside pass over every table, four at a time where
// the processor has AVX2 (ted_lanes_kernel.h), to the same bits; each pair's
// outside pass then reads the lanes' tables (outside_from_kept).
//
// Over 600 lines: one algorithm's passes (distance, co-optimal flags, inside
// counts, the boolean and counting outside sweeps) share TedPair's state and
// are kept together so that their expressions can be compared side by side.
#pragma once

#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "dp_common.h"
#include "tree_index.h"
#include "ted_workspace.h"

namespace bedl {
namespace ted {

using dp::kDel;
using dp::kIns;
using dp::kMatch;

// The outside sweeps' weights (any, ins, tdm) at `cells` or more entries,
// all zero: each pass leaves them so (outside_sweep clears every entry it
// consumes), so they are cleared only where they grow.
template <typename W>
inline void zero_filled(std::vector<W>& weights, int64_t cells) {
  if (static_cast<int64_t>(weights.size()) < cells) weights.resize(cells, W::zero());
}

// fn(a, b) for the set entries of `needed` (keyroot pairs, row-major with
// ky_count per row of x's keyroot a), from the last to the first, eight
// clear entries at a time (most are clear); fn may set earlier entries.
template <class Fn>
inline void for_each_needed_backwards(const std::vector<uint8_t>& needed, size_t ky_count, const Fn& fn) {
  const uint8_t* flag = needed.data();
  for (int64_t k = static_cast<int64_t>(needed.size()) - 1; k >= 0; --k) {
    if (k >= 7) {
      uint64_t word;
      std::memcpy(&word, flag + k - 7, sizeof(word));
      if (word == 0) {
        k -= 7;
        continue;
      }
    }
    if (flag[k]) fn(static_cast<size_t>(k) / ky_count, static_cast<size_t>(k) % ky_count);
  }
}

// A forest table's cells (i, j), i >= r0 and j >= c0, at
// data[(i - r0) * stride + (j - c0)]: the current table's arrays (stride w)
// or its region of a store (its own width), which the passes keep for later
// passes and read in place.
template <typename T>
struct Cells {
  T* data = nullptr;
  int64_t stride = 0;
  int64_t r0 = 0, c0 = 0;
  T& at(int64_t i, int64_t j) const { return data[(i - r0) * stride + (j - c0)]; }
  operator Cells<const T>() const
    requires(!std::is_const_v<T>)
  {
    return {data, stride, r0, c0};
  }
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
          if (const auto f = kept_flags(a, b)) {
            count_table(kx, ky, *f, counts_for(kx, ky, a * ky_count + b));
          } else {
            table<true, false>(kx, ky);
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
  // tie decisions), then swept like `sweep` with "reached" for counts; a
  // reached match marks the table that defines its tdm (the keyroots of the
  // paths through its two nodes). The outside pass later sweeps the same set
  // (counts can only be zero where reach is not, never the other way round).
  // Their flags are kept (up to kFlagStoreLimit bytes), so that the counting
  // and outside passes need neither distances nor tie tests again.
  static constexpr size_t kFlagStoreLimit = size_t{1} << 26;

  // mark_needed: the needed tables, as above. The same sweep also tells whether the co-optimal mapping is unique: if
  // every reached cell (but a table's corner) has exactly one alternative
  // that its reach can take, the reached edges form one derivation, which is
  // then the only co-optimal mapping (each is a derivation, all within the
  // reach). P is then 1 on its events and 0 elsewhere -- what the counting
  // passes give (1 * 1 / 1) -- and is left in ws.p_acc; returns true then.
  bool mark_needed(std::vector<uint8_t>& needed) {
    const size_t kx_count = x.keyroots.size(), ky_count = y.keyroots.size();
    const int64_t cells = (x.n + 1) * w;
    needed.assign(kx_count * ky_count, 0);
    zero_filled(ws.reach_any, cells);  // (each sweep leaves these two zero)
    ws.reach_end.resize(x.n + 1);
    zero_filled(ws.reach_ins, cells);
    zero_filled(ws.reach_tdm, cells);
    ws.flag_offset.assign(kx_count * ky_count, -1);
    ws.flags_used = 0;
    ws.clear_p_acc(cells);
    ReachOutside out{ws.reach_any.data(), ws.reach_ins.data(), ws.reach_tdm.data(), ws.p_acc.data(), w, false,
                     needed.data(), x.path_index.data(), y.path_index.data(), ky_count, {}};
    needed[kx_count * ky_count - 1] = 1;  // the final table
    for_each_needed_backwards(needed, ky_count, [&](size_t a, size_t b) {
      const int64_t kx = x.keyroots[a], ky = y.keyroots[b];
      const Cells<uint8_t> f = flags_for(kx, ky, a * ky_count + b);
      flag_table(kx, ky, f);
      out.at = f;
      outside_sweep(kx, ky, out);
    });
    return !out.branched;
  }

  // Where table (kx, ky)'s flags go: the flag store, where they fit under
  // kFlagStoreLimit (kept for the counting and outside passes), else the
  // current table's array.
  Cells<uint8_t> flags_for(int64_t kx, int64_t ky, size_t pair_index) {
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1, fw = ky - c0 + 1;
    const int64_t size = (kx - r0 + 1) * fw;
    if (ws.flags_used + size > static_cast<int64_t>(kFlagStoreLimit)) {
      return {ws.coopt.data() + r0 * w + c0, w, r0, c0};
    }
    ws.flag_offset[pair_index] = ws.flags_used;
    ws.flags_used += size;
    if (static_cast<int64_t>(ws.flag_store.size()) < ws.flags_used) ws.flag_store.resize(ws.flags_used);
    return {ws.flag_store.data() + ws.flag_offset[pair_index], fw, r0, c0};
  }

  // Table (a, b)'s kept flags, if any.
  std::optional<Cells<const uint8_t>> kept_flags(size_t a, size_t b) const {
    const int64_t off = ws.flag_offset[a * y.keyroots.size() + b];
    if (off < 0) return std::nullopt;
    const int64_t kx = x.keyroots[a], ky = y.keyroots[b];
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
    return Cells<const uint8_t>{ws.flag_store.data() + off, ky - c0 + 1, r0, c0};
  }

  // The outside pass needs each needed table's inside counts again, in
  // reverse order; keeping them (up to kCountStoreLimit bytes, 16 MB per
  // thread beside the flags; the tables past it are counted again) spares
  // counting every table twice.
  static constexpr size_t kCountStoreLimit = size_t{1} << 24;

  // A table's inside counts: all, and not entered by a deletion.
  struct CountCells {
    Cells<Count> total, other;
  };

  // Where table (kx, ky)'s inside counts go: the count store (rows of all
  // and of not-by-deletion counts in turn), where they fit under
  // kCountStoreLimit, else the current table's arrays.
  CountCells counts_for(int64_t kx, int64_t ky, size_t pair_index) {
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1, fw = ky - c0 + 1;
    const int64_t size = 2 * (kx - r0 + 1) * fw;
    if ((cnt.kept_used + size) * static_cast<int64_t>(sizeof(Count)) > static_cast<int64_t>(kCountStoreLimit)) {
      return table_counts(kx, ky);
    }
    cnt.kept_offset[pair_index] = cnt.kept_used;
    cnt.kept_used += size;
    if (static_cast<int64_t>(cnt.kept.size()) < cnt.kept_used) cnt.kept.resize(cnt.kept_used);
    return kept_counts_at(cnt.kept_offset[pair_index], fw, r0, c0);
  }

  CountCells kept_counts_at(int64_t off, int64_t fw, int64_t r0, int64_t c0) {
    Count* base = cnt.kept.data() + off;
    return {{base, 2 * fw, r0, c0}, {base + fw, 2 * fw, r0, c0}};
  }

  // The number of co-optimal mappings: the final table's last count, kept
  // or in the current table's arrays.
  Count final_total() {
    const int64_t off = cnt.kept_offset.back();
    if (off < 0) return cnt.tot[x.n * w + y.n];
    const int64_t r0 = x.leftmost[x.n] - 1, c0 = y.leftmost[y.n] - 1;
    return kept_counts_at(off, y.n - c0 + 1, r0, c0).total.at(x.n, y.n);
  }

  // The current table's count arrays, for table (kx, ky).
  CountCells table_counts(int64_t kx, int64_t ky) {
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1, corner = r0 * w + c0;
    return {{cnt.tot.data() + corner, w, r0, c0}, {cnt.in_other.data() + corner, w, r0, c0}};
  }

  // Inside counts of the forest table (kx, ky) from its kept co-optimal flags
  // `f` into `out`: `table` without distances or ties.
  void count_table(int64_t kx, int64_t ky, const Cells<const uint8_t>& f, const CountCells& out) {
    Count* tdm_count = cnt.tdm_count.data();
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
    const int64_t cs = out.total.stride;
    Count* tot0 = out.total.data;  // cell (r0, c0); columns relative to c0
    Count* other0 = out.other.data;
    tot0[0] = Count::one();
    other0[0] = Count::one();
    for (int64_t i = 1; i <= kx - r0; ++i) {
      tot0[i * cs] = Count::one();
      other0[i * cs] = Count::zero();
    }
    for (int64_t j = 1; j <= ky - c0; ++j) {
      tot0[j] = Count::one();
      other0[j] = Count::one();
    }
    const int64_t* ly = y.leftmost.data() + c0;  // ly[j]: the leftmost leaf of column c0 + j
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      const int64_t li = x.leftmost[i];
      const bool x_on_path = li == r0 + 1;
      const int64_t row = i * w + c0;  // tdm_count[row + j]: cell (i, c0 + j)
      Count* tot = tot0 + (i - r0) * cs;
      Count* other = other0 + (i - r0) * cs;
      const Count* jump = tot0 + (li - 1 - r0) * cs - c0 - 1;  // + l(j): the cell a jump comes from
      const uint8_t* frow = f.data + (i - r0) * f.stride;
      Count left_other = Count::zero();  // the first column is entered by deletions
      for (int64_t j = 1; j <= ky - c0; ++j) {
        const uint8_t flags = frow[j];
        const Count* source;
        if (x_on_path && ly[j] == c0 + 1) {
          tdm_count[row + j] = tot[j - cs - 1];
          source = tot0;
        } else {
          source = jump + ly[j];
        }
        Count in_d, in_o;
        dp::count_entries(flags, tot[j - cs], left_other, [&] { return *source * tdm_count[row + j]; }, in_d, in_o);
        tot[j] = in_d + in_o;
        other[j] = in_o;
        left_other = in_o;
      }
    }
  }

  // mark_needed's table (kx, ky): distances, and co-optimal flags into f.
  // Where every cost is >= 0 and the processor has AVX2, each row's values
  // come first (the insertion chain alone) and then its flags, four cells at
  // a time (dp::row_flags_nonnegative); otherwise table<false, true>. The
  // same values and flags either way.
  void flag_table(int64_t kx, int64_t ky, const Cells<uint8_t>& f) {
#ifdef BEDL_X86_SIMD
    if (tie.nonnegative && dp::simd_avx2()) {
      flag_table_by_rows(kx, ky, f);
      return;
    }
#endif
    table<false, true>(kx, ky, f);
  }

#ifdef BEDL_X86_SIMD
  void flag_table_by_rows(int64_t kx, int64_t ky, const Cells<uint8_t>& f) {
    double* fd = ws.fd.data();
    double* tdm = ws.tdm.data();
    const double* cost = ws.cost.data();
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
    const int64_t corner = r0 * w + c0, count = ky - c0;
    ws.match_row.resize(count + 1);
    double* match = ws.match_row.data();  // match[j]: the match alternative of column c0 + j
    fd[corner] = 0.0;
    f.data[0] = 0;
    double sum = 0.0;
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      sum = sum + del(i);
      fd[i * w + c0] = sum;
      f.data[(i - r0) * f.stride] = kDel;
    }
    sum = 0.0;
    for (int64_t j = c0 + 1; j <= ky; ++j) {
      sum = sum + ins(j);
      fd[r0 * w + j] = sum;
      f.data[j - c0] = kIns;
    }
    const int64_t* ly = y.leftmost.data();
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      const int64_t li = x.leftmost[i];
      const bool x_on_path = li == r0 + 1;
      const double del_i = del(i);
      const int64_t row = i * w;
      const int64_t jump_base = (li - 1) * w - 1;
      double left = fd[row + c0];
      for (int64_t j = c0 + 1; j <= ky; ++j) {
        const int64_t cell = row + j;
        const int64_t lj = ly[j];
        int64_t source;
        if (x_on_path && lj == c0 + 1) {
          tdm[cell] = fd[cell - w - 1] + cost[cell];
          source = corner;
        } else {
          source = jump_base + lj;
        }
        const double c = fd[source] + tdm[cell];
        left = dp::best_of(fd[cell - w] + del_i, c, left + cost[j]);
        fd[cell] = left;
        match[j - c0] = c;
      }
      dp::row_flags_nonnegative(tie, fd + row - w + c0, del_i, fd + row + c0, cost + c0, match, count,
                                f.data + (i - r0) * f.stride);
    }
  }
#endif

  // The forest table of keyroots x.keyroots[a], y.keyroots[b].
  template <bool kCount>
  void any_table(size_t a, size_t b) {
    if (kCount) {
      table<true, false>(x.keyroots[a], y.keyroots[b]);
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
        left1 = dp::best_of(fd[row - w + j] + del_i, jump1[ly[j]] + tdm[row + j], left1 + cost[j]);
        fd[row + j] = left1;
        for (j = c0 + 2; j <= cols_end; ++j) {
          left1 = dp::best_of(fd[row - w + j] + del_i, jump1[ly[j]] + tdm[row + j], left1 + cost[j]);
          fd[row + j] = left1;
          const int64_t k = j - 1;
          left2 = dp::best_of(fd[row + k] + del2, jump2[ly[k]] + tdm[row2 + k], left2 + cost[k]);
          fd[row2 + k] = left2;
        }
        left2 = dp::best_of(fd[row + cols_end] + del2, jump2[ly[cols_end]] + tdm[row2 + cols_end],
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
          left = dp::best_of(fd[cell - w] + del_i, jump_row[ly[j]] + tdm[cell], left + cost[j]);
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
          left = dp::best_of(fd[cell - w] + del_i, c, left + cost[j]);
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

  // Fills the forest table of keyroots (kx, ky) with distances and, with
  // kCount, inside counts (the counting pass where no flags were kept;
  // distance_table is the distance pass), and with kFlags what the outside
  // sweeps read: co-optimal flags and counts not entered by a deletion.
  // table<false, true> is the boolean outside pass's table: flags only.
  template <bool kCount, bool kFlags>
  void table(int64_t kx, int64_t ky, const Cells<uint8_t>& flags_out = {}) {
    if (tie.nonnegative) {
      table_with<kCount, kFlags, true>(kx, ky, flags_out);
    } else {
      table_with<kCount, kFlags, false>(kx, ky, flags_out);
    }
  }

  // `table` with the tie test for costs >= 0 (kNonnegative) or for any.
  template <bool kCount, bool kFlags, bool kNonnegative>
  void table_with(int64_t kx, int64_t ky, const Cells<uint8_t>& flags_out) {
    double* fd = ws.fd.data();
    double* tdm = ws.tdm.data();
    const double* cost = ws.cost.data();
    Count* tot = cnt.tot.data();
    Count* other = cnt.in_other.data();
    Count* tdm_count = cnt.tdm_count.data();
    uint8_t* flags0 = flags_out.data;  // cell (r0, c0)
    const int64_t fs = flags_out.stride;
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
    const int64_t corner = r0 * w + c0;
    fd[corner] = 0.0;
    if (kCount) tot[corner] = Count::one();
    if (kCount && kFlags) other[corner] = Count::one();
    if (kFlags) flags0[0] = 0;
    // First column and row: deletions (insertions) only, one derivation each.
    // The sums stay in a register; reading them back from the strided column
    // made a store-to-load chain that cost as much as small tables themselves.
    double sum = 0.0;
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      const int64_t cell = i * w + c0;
      sum = sum + del(i);
      fd[cell] = sum;
      if (kCount) tot[cell] = Count::one();
      if (kCount && kFlags) other[cell] = Count::zero();
      if (kFlags) flags0[(i - r0) * fs] = kDel;
    }
    sum = 0.0;
    for (int64_t j = c0 + 1; j <= ky; ++j) {
      const int64_t cell = r0 * w + j;
      sum = sum + ins(j);
      fd[cell] = sum;
      if (kCount) tot[cell] = Count::one();
      if (kCount && kFlags) other[cell] = Count::one();
      if (kFlags) flags0[j - c0] = kIns;
    }
    const int64_t* ly = y.leftmost.data();
    for (int64_t i = r0 + 1; i <= kx; ++i) {
      const int64_t li = x.leftmost[i];
      const bool x_on_path = li == r0 + 1;
      const double del_i = del(i);
      const int64_t row = i * w;
      const int64_t jump_base = (li - 1) * w - 1;  // + l(j): the cell a jump comes from
      uint8_t* frow = kFlags ? flags0 + (i - r0) * fs - c0 : nullptr;  // frow[j]: cell (i, j)
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
          if (kCount) tdm_count[cell] = tot[cell - w - 1];
          source = corner;
        } else {
          source = jump_base + lj;
        }
        const double c = fd[source] + tdm[cell];
        const double best = dp::best_of(a, c, b);
        fd[cell] = best;
        left = best;
        const uint8_t flags = kNonnegative ? tie.flags_nonnegative(a, b, c, best) : tie.flags(a, b, c, best);
        if (kFlags) frow[j] = flags;
        if (kCount) {
          Count in_d, in_o;
          dp::count_entries(flags, tot[cell - w], left_other, [&] { return tot[source] * tdm_count[cell]; },
                            in_d, in_o);
          tot[cell] = in_d + in_o;
          left_other = in_o;
          if (kFlags) other[cell] = in_o;
        }
      }
    }
  }

  // The outside sweep of the table (kx, ky), whose co-optimal flags (and,
  // for counts, inside counts) `out` reads: pushes outside weights down its
  // co-optimal edges, from the final cell (or the tdm cells larger tables
  // used) to the corner. One loop, two instances: Out = CountOutside
  // (completion counts; accumulates P) and ReachOutside (the same with
  // booleans: which cells and tdm some co-optimal mapping uses).
  template <class Out>
  void outside_sweep(int64_t kx, int64_t ky, Out& out) {
    using W = typename Out::Weight;
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
    // out_any and out_ins are zero on entry: each sweep clears every cell it
    // visits, and weight reaches only cells it visits (below).
    W* out_any = out.any;
    W* out_ins = out.ins;
    W* out_tdm = out.tdm;
    // Each row's rightmost cell that outside weight can have reached (or
    // whose tdm larger tables used); the cells right of it have none, so
    // each row is swept from there. Weight enters a row only through the
    // pushes below, each of which moves its end.
    int64_t* reach_end = ws.reach_end.data();
    for (int64_t i = r0; i <= kx; ++i) reach_end[i] = c0 - 1;
    if (kx == x.n && ky == y.n) {
      out_any[kx * w + ky] = W::one();
      reach_end[kx] = ky;
    }
    {
      int64_t len_x, len_y;
      const int64_t* px = path_of(x, x.path_index[kx], &len_x);
      const int64_t* py = path_of(y, y.path_index[ky], &len_y);
      for (int64_t s = 0; s < len_x; ++s) {
        for (int64_t t = len_y; t-- > 0;) {
          if (!out_tdm[px[s] * w + py[t]].is_zero()) {
            reach_end[px[s]] = std::max(reach_end[px[s]], py[t]);
            break;
          }
        }
      }
    }
    for (int64_t i = kx; i >= r0; --i) {
      const int64_t li = x.leftmost[i];
      for (int64_t j = reach_end[i]; j >= c0; --j) {
        const int64_t cell = i * w + j;
        const int64_t lj = y.leftmost[j];
        const bool defines_tdm = i > r0 && j > c0 && li == r0 + 1 && lj == c0 + 1;
        const W out_d = out_any[cell];  // a deletion may follow anything
        const W out_o = out_any[cell] + out_ins[cell];
        out_any[cell] = out_ins[cell] = W::zero();  // (pushes below go to other cells)
        if (!out_o.is_zero()) {
          const uint8_t flags = out.flags(i, j, cell);
          out.visited(flags, out_d);
          if (flags & kDel) {
            out_any[cell - w] = out_any[cell - w] + out_d;
            reach_end[i - 1] = std::max(reach_end[i - 1], j);
            out.deleted(i, j, cell, out_d);
          }
          if (flags & kIns) {
            out_ins[cell - 1] = out_ins[cell - 1] + out_o;
            out.inserted(i, j, cell, out_o);
          }
          if (flags & kMatch) {
            out.used_tdm(i, j);
            const int64_t si = defines_tdm ? r0 : li - 1, sj = defines_tdm ? c0 : lj - 1;
            const int64_t source = si * w + sj;
            out_any[source] = out_any[source] + out_o * out.tdm_inside(i, j, cell);
            reach_end[si] = std::max(reach_end[si], sj);
            out_tdm[cell] = out_tdm[cell] + out_o * out.inside(si, sj, source);
          }
        }
        // tdm(i, j) is used nowhere after this cell: all its outside weight
        // is in, so the replacement i -> j is final and its inside lies in
        // this table at (i - 1, j - 1).
        if (defines_tdm && !out_tdm[cell].is_zero()) {
          out.replaced(i, j, cell, out_tdm[cell]);
          out_any[cell - w - 1] = out_any[cell - w - 1] + out_tdm[cell];
          out_tdm[cell] = W::zero();  // (every used tdm ends here: the array is all zero after a pass)
          reach_end[i - 1] = std::max(reach_end[i - 1], j - 1);
        }
      }
    }
  }

  // A table's flags and inside counts where the scalar passes leave them
  // (kept or in the current table's arrays), and all tdm counts (by cell).
  // (The AVX2 lanes read theirs by (i, j) from their own layout:
  // ted_coopt_lanes_avx2.cpp.)
  struct TableSource {
    Cells<const uint8_t> f;
    Cells<const Count> tot, other;
    const Count* tdm_count;
    uint8_t flags(int64_t i, int64_t j, int64_t) const { return f.at(i, j); }
    Count total(int64_t i, int64_t j, int64_t) const { return tot.at(i, j); }
    Count in_other(int64_t i, int64_t j, int64_t) const { return other.at(i, j); }
    Count tdm(int64_t, int64_t, int64_t cell) const { return tdm_count[cell]; }
  };
  TableSource source(const Cells<const uint8_t>& f, const CountCells& c) const {
    return {f, c.total, c.other, cnt.tdm_count.data()};
  }

  // Completion counts; P[event] += inside * outside / all, the counts read
  // from `src`. With `needed`, also marks the table defining each tdm it
  // uses, as ReachOutside does.
  template <class Source>
  struct CountOutside {
    using Weight = Count;
    Count *any, *ins, *tdm;
    const TedPair& pair;
    const Source& src;
    const Count& all;
    double* acc;
    uint8_t* needed;
    uint8_t flags(int64_t i, int64_t j, int64_t cell) const { return src.flags(i, j, cell); }
    Count inside(int64_t i, int64_t j, int64_t cell) const { return src.total(i, j, cell); }
    Count tdm_inside(int64_t i, int64_t j, int64_t cell) const { return src.tdm(i, j, cell); }
    void deleted(int64_t i, int64_t j, int64_t cell, const Count& o) const {
      acc[i * pair.w] += dp::ratio(src.total(i - 1, j, cell - pair.w) * o, all);
    }
    void inserted(int64_t i, int64_t j, int64_t cell, const Count& o) const {
      acc[j] += dp::ratio(src.in_other(i, j - 1, cell - 1) * o, all);
    }
    void replaced(int64_t i, int64_t j, int64_t cell, const Count& o) const {
      acc[cell] += dp::ratio(src.tdm(i, j, cell) * o, all);
    }
    static void visited(uint8_t, const Count&) {}
    void used_tdm(int64_t i, int64_t j) const {
      if (needed != nullptr) needed[pair.x.path_index[i] * pair.y.keyroots.size() + pair.y.path_index[j]] = 1;
    }
  };

  // Reachability: every co-optimal alternative has a positive count. Marks
  // the table defining each reached tdm in `needed`, the reached events in
  // acc (P where the mapping is unique), and sets
  // `branched` where a reached cell other than a corner (flags 0) has no or
  // several alternatives its reach can take (a deletion needs reach that may
  // follow one: out_d).
  struct ReachOutside {
    using Weight = dp::Reach;
    dp::Reach *any, *ins, *tdm;
    double* acc;
    int64_t w;
    bool branched;
    uint8_t* needed;  // keyroot pairs, row-major
    const int64_t *x_path, *y_path;  // a node's keyroot index (TreeIndex::path_index)
    size_t ky_count;
    Cells<const uint8_t> at;  // the swept table's flags
    uint8_t flags(int64_t i, int64_t j, int64_t) const { return at.at(i, j); }
    static dp::Reach inside(int64_t, int64_t, int64_t) { return dp::Reach::one(); }
    static dp::Reach tdm_inside(int64_t, int64_t, int64_t) { return dp::Reach::one(); }
    void deleted(int64_t i, int64_t, int64_t, dp::Reach o) {
      if (!o.is_zero()) acc[i * w] += 1.0;
    }
    void inserted(int64_t, int64_t j, int64_t, dp::Reach) { acc[j] += 1.0; }
    void replaced(int64_t, int64_t, int64_t cell, dp::Reach) { acc[cell] += 1.0; }
    void visited(uint8_t flags, dp::Reach out_d) {
      const int ways = ((flags & kDel) && !out_d.is_zero()) + ((flags & kIns) != 0) + ((flags & kMatch) != 0);
      branched |= flags != 0 && ways != 1;
    }
    void used_tdm(int64_t i, int64_t j) { needed[x_path[i] * ky_count + y_path[j]] = 1; }
  };

  template <class Source>
  void sweep(int64_t kx, int64_t ky, const Count& all, const Source& src, uint8_t* mark_needed = nullptr) {
    CountOutside<Source> out{cnt.out_any.data(), cnt.out_ins.data(), cnt.out_tdm.data(), *this, src,
                             all, ws.p_acc.data(), mark_needed};
    outside_sweep(kx, ky, out);
  }

  // The outside pass (P into ws.p_acc) where the inside pass kept every
  // table: source_of(a, b) reads table (a, b)'s flags and counts (and all
  // tdm counts). The tables some co-optimal mapping passes are found as it
  // goes: each sweep marks those defining the tdm it uses, all of which come
  // later in this order.
  template <class SourceOf>
  void outside_from_kept(const Count& all, const SourceOf& source_of) {
    const size_t ky_count = y.keyroots.size();
    const int64_t cells = (x.n + 1) * w;
    zero_filled(cnt.out_any, cells);
    zero_filled(cnt.out_ins, cells);
    ws.reach_end.resize(x.n + 1);
    ws.needed.assign(x.keyroots.size() * ky_count, 0);
    ws.needed.back() = 1;  // the final table
    zero_filled(cnt.out_tdm, cells);
    ws.clear_p_acc(cells);
    for_each_needed_backwards(ws.needed, ky_count, [&](size_t a, size_t b) {
      sweep(x.keyroots[a], y.keyroots[b], all, source_of(a, b), ws.needed.data());
    });
  }
};

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
  zero_filled(cnt.out_any, cells);
  zero_filled(cnt.out_ins, cells);
  ws.coopt.resize(cells);
  ws.reach_end.resize(m + 1);
  TedPair<Count> pair{x, y, ws, cnt, w, tie};
  // Counting costs several times the distance per cell, and P needs the counts
  // of only the tables that its co-optimal mappings pass (about a fifth of the
  // cells of random trees): distances everywhere first, then those tables
  // top-down with their co-optimal flags, then counts there alone, from the
  // kept flags.
  pair.template inside<false>();
  if (pair.mark_needed(ws.needed)) {  // one co-optimal mapping: P is in ws.p_acc already
    *distance = ws.fd[m * w + n];
    return true;
  }
  cnt.kept_used = 0;
  cnt.kept_offset.assign(ws.needed.size(), -1);
  pair.template inside<true>(ws.needed.data());
  *distance = ws.fd[m * w + n];  // the outside pass reuses fd
  const Count all = pair.final_total();
  if (!all.usable_total()) return false;
  zero_filled(cnt.out_tdm, cells);
  ws.clear_p_acc(cells);
  const size_t ky_count = y.keyroots.size();
  for_each_needed_backwards(ws.needed, ky_count, [&](size_t a, size_t b) {
    const int64_t kx = x.keyroots[a], ky = y.keyroots[b];
    const int64_t r0 = x.leftmost[kx] - 1, c0 = y.leftmost[ky] - 1;
    const auto counts = pair.table_counts(kx, ky);
    if (const auto f = pair.kept_flags(a, b)) {
      const int64_t off = cnt.kept_offset[a * ky_count + b];
      if (off >= 0) {
        pair.sweep(kx, ky, all, pair.source(*f, pair.kept_counts_at(off, ky - c0 + 1, r0, c0)));
      } else {
        pair.count_table(kx, ky, *f, counts);  // not kept: counted again
        pair.sweep(kx, ky, all, pair.source(*f, counts));
      }
    } else {
      const Cells<uint8_t> flags{ws.coopt.data() + r0 * w + c0, w, r0, c0};
      pair.template table<true, true>(kx, ky, flags);
      pair.sweep(kx, ky, all, pair.source(flags, counts));
    }
  });
  return true;
}

// The distance (and, with need_coopt, P in ws.p_acc) of the pair whose costs
// are in ws.cost.
inline double ted_solve(const TreeIndex& x, const TreeIndex& y, bool need_coopt, const dp::Tie& tie,
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
    // Counts with exponents do not overflow, so none means that the tie test
    // kept no mapping: each is counted in one order of its edits (insertions
    // before deletions), and rounding can make exactly that order cost more
    // than another; a tolerance of a few ulps keeps it.
    const bool counted = ted_coopt(x, y, tie, ws, ws.exact, &distance);
    BEDL_CHECK_VALUE(counted, "pair of ", x.n, " and ", y.n, " nodes: no co-optimal mapping survives the tie test at rel_tol=",
                     tie.rel_tol, " (rounding in sums of these costs tells equal-cost orders of edits apart); "
                     "use a larger rel_tol, e.g. the default (1e-9 for float64, 1e-5 for float32)");
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

}  // namespace ted
}  // namespace bedl
