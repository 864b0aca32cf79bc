// The sequence edit distance's passes over one pair, backend-free: the
// distance (two rows), the inside counting pass (co-optimal alignments per
// cell in two states, see states.h), the outside sweep (completion counts
// pushed back along the co-optimal edges; P[event] = inside * outside / all)
// and the tie scale. Every buffer is a raw pointer the caller sizes: the CPU
// kernel hands in its per-thread vectors, the GPU kernel one thread's slice of
// a device workspace, so both run these loops in the same order (the same bits).
//
// A cost source `Costs` gives doubles for a pair of extent (m, n): row(i)
// (i < m) with rep(j) replacing x_i by y_j and del() deleting x_i, and ins(j)
// inserting y_j.
#pragma once

#include "counts.h"
#include "sequence.h"
#include "states.h"

namespace bedl {
namespace sed {

using dp::kDel;
using dp::kIns;
using dp::kMatch;

// A padded cost block (row stride `stride`; row m the insertions, column n the deletions).
template <typename scalar_t>
struct PaddedCostRows {
  struct Row {
    const scalar_t* c;
    int64_t n;
    BEDL_HD double rep(int64_t j) const { return static_cast<double>(c[j]); }
    BEDL_HD double del() const { return static_cast<double>(c[n]); }
  };
  const scalar_t* c;
  int64_t stride, m, n;
  BEDL_HD Row row(int64_t i) const { return Row{c + i * stride, n}; }
  BEDL_HD double ins(int64_t j) const { return static_cast<double>(c[m * stride + j]); }
};

// A pair's costs read from a (rows, cols) symbol table through the labels x
// (m) and y (n): x's labels index rows, y's columns, and the last row and the
// last column are the gap. YLabels: y[j] gives label j (a pointer, or a GPU
// thread's strided copy of them, gpu::StridedLabels).
template <typename scalar_t, class YLabels = const int64_t*>
struct SymbolCostRows {
  struct Row {
    const scalar_t* c;
    YLabels y;
    int64_t gap;
    BEDL_HD double rep(int64_t j) const { return static_cast<double>(c[y[j]]); }
    BEDL_HD double del() const { return static_cast<double>(c[gap]); }
  };
  const scalar_t* table;
  int64_t rows, cols;
  const int64_t* x;
  YLabels y;
  BEDL_HD Row row(int64_t i) const { return Row{table + x[i] * cols, y, cols - 1}; }
  BEDL_HD double ins(int64_t j) const { return static_cast<double>(table[(rows - 1) * cols + y[j]]); }
};

// The largest absolute cost of the entries a pair uses (the tie test's scale;
// NaN or inf where one of them is).
template <class Costs>
BEDL_HD double sequence_cost_scale(const Costs& c, int64_t m, int64_t n) {
  double scale = 0.0;
  for (int64_t i = 0; i < m; ++i) {
    const auto row = c.row(i);
    for (int64_t j = 0; j < n; ++j) scale = max_abs_step(scale, row.rep(j));
    scale = max_abs_step(scale, row.del());
  }
  for (int64_t j = 0; j < n; ++j) scale = max_abs_step(scale, c.ins(j));
  return scale;
}

// The distance alone, row by row: prev and cur hold n + 1 doubles each.
template <class Costs>
BEDL_HD double sequence_distance(const Costs& c, int64_t m, int64_t n, double* prev, double* cur) {
  prev[0] = 0.0;
  for (int64_t j = 1; j <= n; ++j) prev[j] = prev[j - 1] + c.ins(j - 1);
  for (int64_t i = 1; i <= m; ++i) {
    const auto row = c.row(i - 1);
    const double del = row.del();
    double left = prev[0] + del;
    cur[0] = left;
    for (int64_t j = 1; j <= n; ++j) {
      left = sequence_value(prev[j - 1], row.rep(j - 1), prev[j], del, left, c.ins(j - 1));
      cur[j] = left;
    }
    double* t = prev;
    prev = cur;
    cur = t;
  }
  return prev[n];
}

// The distance alone for n <= N, the row in one array of N + 1 doubles updated
// in place (a GPU thread's registers: every index is the unrolled loops'
// counter). The cells of sequence_distance in the same order, so the same bits.
template <int N, class Costs>
BEDL_HD double sequence_distance_fixed(const Costs& c, int64_t m, int64_t n) {
  double row[N + 1] = {};  // (columns beyond n are never read: zeros keep compilers' checks quiet)
  BEDL_UNROLL
  for (int j = 1; j <= N; ++j) {
    if (j > n) break;
    row[j] = row[j - 1] + c.ins(j - 1);
  }
  for (int64_t i = 1; i <= m; ++i) {
    const auto r = c.row(i - 1);
    const double del = r.del();
    double diag = row[0];  // row i - 1, column j - 1
    double left = diag + del;
    row[0] = left;
    BEDL_UNROLL
    for (int j = 1; j <= N; ++j) {
      if (j > n) break;
      const double up = row[j];
      left = sequence_value(diag, r.rep(j - 1), up, del, left, c.ins(j - 1));
      diag = up;
      row[j] = left;
    }
  }
  double out = row[0];
  BEDL_UNROLL
  for (int j = 1; j <= N; ++j) {
    if (j == n) out = row[j];
  }
  return out;
}

// One pair's buffers for the counting passes, (m+1)(n+1) cells unless noted.
template <typename Count>
struct SequenceCounts {
  Count* in_del;    // inside counts entered by a deletion
  Count* in_other;  // entered otherwise
  uint8_t* coopt;   // co-optimal incoming edges
  double* prev;     // n + 1: distance rows
  double* cur;      // n + 1
  Count* out_any;   // 2 (n + 1): outside counts, two rows
  Count* out_ins;   // 2 (n + 1)
  double* p_acc;    // P in the cost layout (row stride n + 1)
};

// The inside pass: distances, co-optimal flags and inside counts of every
// cell; returns the distance.
template <typename Count, class Costs>
BEDL_HD double sequence_inside(const Costs& c, int64_t m, int64_t n, const dp::Tie& tie,
                               const SequenceCounts<Count>& buf) {
  const int64_t w = n + 1;
  Count* in_del = buf.in_del;
  Count* in_other = buf.in_other;
  uint8_t* coopt = buf.coopt;
  double* prev = buf.prev;
  double* cur = buf.cur;
  prev[0] = 0.0;
  in_del[0] = Count::zero();
  in_other[0] = Count::one();
  coopt[0] = 0;
  for (int64_t j = 1; j <= n; ++j) {
    prev[j] = prev[j - 1] + c.ins(j - 1);
    in_del[j] = Count::zero();
    in_other[j] = Count::one();
    coopt[j] = kIns;
  }
  for (int64_t i = 1; i <= m; ++i) {
    const auto row = c.row(i - 1);
    const double del = row.del();
    const int64_t base = i * w;
    double left = prev[0] + del;
    cur[0] = left;
    in_del[base] = Count::one();
    in_other[base] = Count::zero();
    coopt[base] = kDel;
    // The left neighbour's value and count stay in registers: the chain from
    // cell to cell does not go through memory.
    Count left_other = Count::zero();
    for (int64_t j = 1; j <= n; ++j) {
      uint8_t flags;
      const double ins_j = c.ins(j - 1);
      const double best = sequence_value_flags(tie, prev[j - 1], row.rep(j - 1), prev[j], del, left, ins_j, flags);
      cur[j] = best;
      left = best;  // only the insertion waits on the previous cell
      const int64_t cell = base + j;
      Count by_del, other;
      dp::enter(dp::CoOptimal{flags}, in_del[cell - w] + in_other[cell - w], left_other,
                in_del[cell - w - 1] + in_other[cell - w - 1], by_del, other);
      in_del[cell] = by_del;
      in_other[cell] = other;
      left_other = other;
      coopt[cell] = flags;
    }
    double* t = prev;
    prev = cur;
    cur = t;
  }
  return prev[n];
}

// The outside sweep of an (m, n) pair. out.any and out.ins hold two rows of
// n + 1 weights each, zero on entry and left so. Row i pushes into rows i and
// i - 1; a row visits only the columns that can hold outside weight: those the
// row below reached (and one to their left), then leftwards while insertions
// carry weight. Policies: CountOutside (below), the soft passes' SoftOutside.
template <class Out>
BEDL_HD void sequence_outside(int64_t m, int64_t n, Out& out) {
  using W = typename Out::Weight;
  const int64_t w = n + 1;
  // Columns with outside weight in the row below (row m: its last cell, set below).
  int64_t lo_below = n + 1, hi_below = n;
  for (int64_t i = m; i >= 0; --i) {
    W* any_cur = out.any + (i & 1) * w;
    W* ins_cur = out.ins + (i & 1) * w;
    W* any_up = out.any + ((i + 1) & 1) * w;
    if (i == m) any_cur[n] = W::one();
    int64_t lo = n + 1, hi = -1;
    for (int64_t j = hi_below; j >= 0; --j) {
      const W out_d = any_cur[j];
      const W out_o = any_cur[j] + ins_cur[j];
      if (out_o.is_zero()) {
        if (j < lo_below - 1) break;  // nothing from below here, and no insertion goes on
        continue;
      }
      lo = j;
      hi = max_of(hi, j);
      const uint8_t flags = out.flags(i, j);
      if (flags & kDel) {  // delete x_i; the source may be in either state
        any_up[j] = any_up[j] + out.after_deletion(out_d, i);
        out.deleted(i, j, out_d);
      }
      if (flags & kIns) {  // insert y_j; only from a cell not entered by a deletion
        ins_cur[j - 1] = ins_cur[j - 1] + out.after_insertion(out_o, j);
        out.inserted(i, j, out_o);
      }
      if (flags & kMatch) {  // replace x_i by y_j
        any_up[j - 1] = any_up[j - 1] + out.after_replacement(out_o, i, j);
        out.replaced(i, j, out_o);
      }
    }
    out.row_done(i);
    // Row i is done; row i - 2 reuses its storage, which holds weights only
    // where the row below pushed and where this row's insertions went.
    const int64_t clear_from = max_of<int64_t>(0, min_of(lo_below, lo) - 1);
    for (int64_t j = clear_from; j <= hi_below; ++j) {
      any_cur[j] = W::zero();
      ins_cur[j] = W::zero();
    }
    lo_below = lo;
    hi_below = hi;
  }
}

// One pair's inside counts and flags for the outside pass: cell (i, j) at
// (i * w + j) * stride of arrays of E (Count; doubles in the CPU's AVX2 lanes,
// lane-offset).
template <typename Count, typename E>
struct InsideGrid {
  const E* in_del;
  const E* in_other;
  const uint8_t* coopt;
  int64_t w, stride;
  BEDL_HD int64_t at(int64_t i, int64_t j) const { return (i * w + j) * stride; }
  BEDL_HD Count other(int64_t i, int64_t j) const { return Count{in_other[at(i, j)]}; }
  BEDL_HD Count total(int64_t i, int64_t j) const {
    const int64_t c = at(i, j);
    return Count{in_del[c]} + Count{in_other[c]};
  }
};

// Completion counts over the co-optimal edges of `g`; P into acc in the cost
// layout (row stride n + 1: rows < m nodes of x, row m insertions, column n
// deletions).
template <typename Count, typename E>
struct CountOutside {
  using Weight = Count;
  Count *any, *ins;
  const InsideGrid<Count, E>& g;
  const Count& all;
  double* acc;
  int64_t m, n;
  BEDL_HD uint8_t flags(int64_t i, int64_t j) const { return g.coopt[g.at(i, j)]; }
  BEDL_HD static Count after_deletion(const Count& o, int64_t) { return o; }
  BEDL_HD static Count after_insertion(const Count& o, int64_t) { return o; }
  BEDL_HD static Count after_replacement(const Count& o, int64_t, int64_t) { return o; }
  BEDL_HD void deleted(int64_t i, int64_t j, const Count& o) const {
    acc[(i - 1) * (n + 1) + n] += dp::ratio(g.total(i - 1, j) * o, all);
  }
  BEDL_HD void inserted(int64_t i, int64_t j, const Count& o) const {
    acc[m * (n + 1) + j - 1] += dp::ratio(g.other(i, j - 1) * o, all);
  }
  BEDL_HD void replaced(int64_t i, int64_t j, const Count& o) const {
    acc[(i - 1) * (n + 1) + j - 1] += dp::ratio(g.total(i - 1, j - 1) * o, all);
  }
  BEDL_HD static void row_done(int64_t) {}
};

// P of an (m, n) pair into p_acc ((m+1)(n+1), the cost layout), from inside
// counts `g` and their total `all`; out_any and out_ins (2 (n + 1) each) as scratch.
template <typename Count, typename E>
BEDL_HD void count_outside(const InsideGrid<Count, E>& g, int64_t m, int64_t n, const Count& all, Count* out_any,
                           Count* out_ins, double* p_acc) {
  const int64_t w = n + 1;
  for (int64_t k = 0; k < 2 * w; ++k) {
    out_any[k] = Count::zero();
    out_ins[k] = Count::zero();
  }
  for (int64_t k = 0; k < (m + 1) * w; ++k) p_acc[k] = 0.0;
  CountOutside<Count, E> out{out_any, out_ins, g, all, p_acc, m, n};
  sequence_outside(m, n, out);
}

// The distance (in *distance) and P (in buf.p_acc) with counts of type Count;
// false (P incomplete) if the total count is not representable in that type.
template <typename Count, class Costs>
BEDL_HD bool sequence_counted(const Costs& c, int64_t m, int64_t n, const dp::Tie& tie,
                              const SequenceCounts<Count>& buf, double* distance) {
  *distance = sequence_inside(c, m, n, tie, buf);
  const int64_t last = (m + 1) * (n + 1) - 1;
  const Count all = buf.in_del[last] + buf.in_other[last];
  if (!all.usable_total()) return false;
  count_outside(InsideGrid<Count, Count>{buf.in_del, buf.in_other, buf.coopt, n + 1, 1}, m, n, all, buf.out_any,
                buf.out_ins, buf.p_acc);
  return true;
}

}  // namespace sed
}  // namespace bedl
