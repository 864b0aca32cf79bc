// The tree kernel's passes for one pair on the CPU: the distance, and the
// co-optimal matrix P by counting (see docs/edit-distances.md).
//
// Counting: every co-optimal mapping is exactly one derivation (tdm with the
// roots matched; no insertion right after a deletion), so P follows from an
// inside pass (counts per cell, tdm counts kept) and an outside pass over the
// keyroot pairs in reverse order, which reads one table at a time and pushes
// completion counts down its co-optimal edges. Only the tables that some
// co-optimal mapping passes need counts (about a fifth of the cells of random
// trees): a distance pass and a boolean outside pass over the co-optimal flags
// find them first; their flags and inside counts go to the stores (stores.h)
// and are read there in place, so neither counting pass recomputes distances
// or ties. Memory is O(m n) plus the kept flags and counts (both bounded per
// thread).
//
// Mirroring both trees (children right to left) maps mappings one-to-one onto
// mappings of equal cost, so each pair runs in the orientation whose keyroot
// tables are smaller (tree_cpu.cpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "../../common/forest_coopt.h"
#include "../check.h"
#include "outside.h"
#include "stores.h"
#include "tables.h"

namespace bedl {
namespace ted {

// fn(a, b) for the set entries of `needed` (keyroot pairs, row-major with
// ky_count per row of x's keyroot a), from the last to the first, eight clear
// entries at a time (most are clear); fn may set earlier entries.
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

// All tables of the inside pass, in keyroot order; with `needed` (counting
// only) just the flagged keyroot pairs' forest tables, counted from their kept
// flags where the store holds them.
template <bool kCount, typename Count>
void inside(TreePair<Count>& p, const uint8_t* needed = nullptr) {
  const TreeIndex &x = p.x, &y = p.y;
  prepare_leaf_sums(p);
  const size_t ky_count = y.keyroots.size();
  for (size_t a = 0; a < x.keyroots.size(); ++a) {
    const int64_t kx = x.keyroots[a];
    if (x.leftmost[kx] == kx) {  // a leaf keyroot of x
      leaf_x<kCount>(p, kx);
      if (kx == x.n) {  // a one-node x: the final table
        if (kCount) {
          table<true, false>(p, kx, y.keyroots[ky_count - 1]);
        } else {
          distance_table(p, a, ky_count - 1);
        }
      }
      continue;
    }
    for (size_t b = 0; b < ky_count; ++b) {
      const int64_t ky = y.keyroots[b];
      if (y.leftmost[ky] == ky && !p.is_final(kx, ky)) {
        leaf_y<kCount>(p, a, ky);
      } else if (needed == nullptr) {
        if (kCount) {
          table<true, false>(p, kx, ky);
        } else {
          distance_table(p, a, b);
        }
      } else if (needed[a * ky_count + b]) {
        if (const auto f = kept_flags(p, a, b)) {
          count_table(p, kx, ky, *f, counts_for(p, kx, ky, a * ky_count + b));
        } else {
          table<true, false>(p, kx, ky);
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
// tie decisions) into the flag store, then swept with "reached" for counts; a
// reached match marks the table that defines its tdm. The same sweep tells
// whether the co-optimal mapping is unique: if every reached cell (but a
// table's corner) has exactly one alternative its reach can take, the reached
// edges form the only co-optimal mapping; P is then 1 on its events and 0
// elsewhere -- what the counting passes give -- and is left in ws.p_acc;
// returns true then.
template <typename Count>
bool mark_needed(TreePair<Count>& p, std::vector<uint8_t>& needed) {
  const TreeIndex &x = p.x, &y = p.y;
  TedWorkspace& ws = p.ws;
  const size_t kx_count = x.keyroots.size(), ky_count = y.keyroots.size();
  const int64_t cells = (x.n + 1) * p.w;
  needed.assign(kx_count * ky_count, 0);
  zero_filled(ws.reach_any, cells);  // (each sweep leaves these two zero)
  ws.reach_end.resize(x.n + 1);
  zero_filled(ws.reach_ins, cells);
  zero_filled(ws.reach_tdm, cells);
  ws.flag_offset.assign(kx_count * ky_count, -1);
  ws.flags_used = 0;
  ws.clear_p_acc(cells);
  ReachOutside out{{},
                   ws.reach_any.data(),
                   ws.reach_ins.data(),
                   ws.reach_tdm.data(),
                   ws.p_acc.data(),
                   p.w,
                   false,
                   needed.data(),
                   x.path_index.data(),
                   y.path_index.data(),
                   ky_count,
                   {}};
  needed[kx_count * ky_count - 1] = 1;  // the final table
  for_each_needed_backwards(needed, ky_count, [&](size_t a, size_t b) {
    const int64_t kx = x.keyroots[a], ky = y.keyroots[b];
    const Cells<uint8_t> f = flags_for(p, kx, ky, a * ky_count + b);
    flag_table(p, kx, ky, f);
    out.at = f;
    outside_sweep(x, y, p.w, kx, ky, ws.reach_end.data(), out);
  });
  return !out.branched;
}

// The counting sweep of table (kx, ky), its flags and counts read from `src`;
// with mark_needed, also marks the tables whose tdm it uses.
template <class Source, typename Count>
void count_sweep(TreePair<Count>& p, int64_t kx, int64_t ky, const Count& all, const Source& src,
                 uint8_t* mark_needed = nullptr) {
  CountOutside<Source, Count> out{{},
                                  p.cnt.out_any.data(),
                                  p.cnt.out_ins.data(),
                                  p.cnt.out_tdm.data(),
                                  src,
                                  all,
                                  p.ws.p_acc.data(),
                                  p.w,
                                  mark_needed,
                                  p.x.path_index.data(),
                                  p.y.path_index.data(),
                                  static_cast<int64_t>(p.y.keyroots.size())};
  outside_sweep(p.x, p.y, p.w, kx, ky, p.ws.reach_end.data(), out);
}

template <typename Count>
TableSource<Count> source_of(const TreePair<Count>& p, const Cells<const uint8_t>& f, const CountCells<Count>& c) {
  return {f, c.total, c.other, p.cnt.tdm_count.data()};
}

// The outside pass (P into ws.p_acc) where the inside pass kept every table
// (the AVX2 lanes): source(a, b) reads table (a, b)'s flags and counts (and
// all tdm counts). The tables some co-optimal mapping passes are found as it
// goes: each sweep marks those defining the tdm it uses, all of which come
// later in this order.
template <typename Count, class SourceOf>
void outside_from_kept(TreePair<Count>& p, const Count& all, const SourceOf& source) {
  TedWorkspace& ws = p.ws;
  const size_t ky_count = p.y.keyroots.size();
  const int64_t cells = (p.x.n + 1) * p.w;
  zero_filled(p.cnt.out_any, cells);
  zero_filled(p.cnt.out_ins, cells);
  ws.reach_end.resize(p.x.n + 1);
  ws.needed.assign(p.x.keyroots.size() * ky_count, 0);
  ws.needed.back() = 1;  // the final table
  zero_filled(p.cnt.out_tdm, cells);
  ws.clear_p_acc(cells);
  for_each_needed_backwards(ws.needed, ky_count, [&](size_t a, size_t b) {
    count_sweep(p, p.x.keyroots[a], p.y.keyroots[b], all, source(a, b), ws.needed.data());
  });
}

// The distance and P (in ws.p_acc) of the pair whose costs are in ws.cost,
// with counts of type Count; false (nothing accumulated) if the total count is
// not representable in that type.
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
  TreePair<Count> p{x, y, ws, cnt, w, tie};
  // Distances everywhere first, then the needed tables top-down with their
  // co-optimal flags, then counts there alone, from the kept flags.
  inside<false>(p);
  if (mark_needed(p, ws.needed)) {  // one co-optimal mapping: P is in ws.p_acc already
    *distance = ws.fd[m * w + n];
    return true;
  }
  cnt.kept_used = 0;
  cnt.kept_offset.assign(ws.needed.size(), -1);
  inside<true>(p, ws.needed.data());
  *distance = ws.fd[m * w + n];  // the outside pass reuses fd
  const Count all = final_total(p);
  if (!all.usable_total()) return false;
  zero_filled(cnt.out_tdm, cells);
  ws.clear_p_acc(cells);
  const size_t ky_count = y.keyroots.size();
  for_each_needed_backwards(ws.needed, ky_count, [&](size_t a, size_t b) {
    const int64_t kx = x.keyroots[a], ky = y.keyroots[b];
    const ForestTable t = p.table(kx, ky);
    const CountCells<Count> counts = table_counts(p, kx, ky);
    if (const auto f = kept_flags(p, a, b)) {
      const int64_t off = cnt.kept_offset[a * ky_count + b];
      if (off >= 0) {
        count_sweep(p, kx, ky, all, source_of(p, *f, kept_counts_at(p, off, ky - t.c0 + 1, t.r0, t.c0)));
      } else {
        count_table(p, kx, ky, *f, counts);  // not kept: counted again
        count_sweep(p, kx, ky, all, source_of(p, *f, counts));
      }
    } else {
      const Cells<uint8_t> flags{ws.coopt.data() + t.r0 * w + t.c0, w, t.r0, t.c0};
      table<true, true>(p, kx, ky, flags);
      count_sweep(p, kx, ky, all, source_of(p, flags, counts));
    }
  });
  return true;
}

// The distance (and, with need_coopt, P in ws.p_acc) of the pair whose costs
// are in ws.cost. cut_below (distances only; m + 1 entries) and cut_limit: the
// final table's cutoff (distance_table); +inf where it stops the pair.
inline double ted_solve(const TreeIndex& x, const TreeIndex& y, bool need_coopt, const dp::Tie& tie,
                        TedWorkspace& ws, const double* cut_below = nullptr, double cut_limit = 0.0) {
  const int64_t m = x.n, n = y.n, w = n + 1, cells = (m + 1) * w;
  ws.fd.resize(cells);
  ws.tdm.resize(cells);
  if (!need_coopt) {
    TreePair<dp::FastCount> p{x, y, ws, ws.fast, w, tie, cut_below, cut_limit};
    inside<false>(p);
    return p.beyond ? std::numeric_limits<double>::infinity() : ws.fd[m * w + n];
  }
  // Counts as doubles unless they overflow (massive ties in large trees).
  double distance;
  if (!ted_coopt(x, y, tie, ws, ws.fast, &distance)) {
    // Counts with exponents do not overflow, so none means that the tie test
    // kept no mapping: each is counted in one order of its edits (insertions
    // before deletions), and rounding can make exactly that order cost more
    // than another; a tolerance of a few ulps keeps it.
    const bool counted = ted_coopt(x, y, tie, ws, ws.exact, &distance);
    BEDL_CHECK_VALUE(counted, "pair of ", x.n, " and ", y.n,
                     " nodes: no co-optimal mapping survives the tie test at rel_tol=", tie.rel_tol,
                     " (rounding in sums of these costs tells equal-cost orders of edits apart); "
                     "use a larger rel_tol, e.g. the default (1e-9 for float64, 1e-5 for float32)");
  }
  return distance;
}

// P from ws.p_acc back to preorder and the padded cost layout.
template <typename scalar_t>
void write_coopt(const TreeIndex& x, const TreeIndex& y, const TedWorkspace& ws, scalar_t* p, int64_t stride) {
  store_tree_p(x.pre_of_post.data(), y.pre_of_post.data(), x.n, y.n, ws.p_acc.data(), p, stride);
}

}  // namespace ted
}  // namespace bedl
