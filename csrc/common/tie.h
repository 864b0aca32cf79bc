// The tie test: which alternatives of a cell are co-optimal.
#pragma once

#include "macros.h"

namespace bedl {
namespace dp {

// Which alternatives of a cell are co-optimal: deleting x_i (from the cell
// above), inserting y_j (from the left), matching (a replacement, or in a
// forest the jump over a matched subtree pair).
enum : uint8_t { kDel = 1, kIns = 2, kMatch = 4 };

// The tie test, on any value type (double, or four lanes of doubles, whose
// comparisons give lane masks). Two alternatives tie when they differ by at
// most rel_tol times the magnitude involved: the larger of both values and of
// the largest absolute cost of the pair (rounding in a sum of costs scales
// with the costs, not only with the sum). rel_tol * max(|v|, |b|, s) ==
// max(rel_tol |v|, rel_tol max(|b|, s)) exactly (rounding a product is
// monotone), so a cell computes the part that depends on its best value once:
// tie_threshold.
template <class V>
BEDL_HD V tie_threshold(V best, V scale, V rel_tol) {
  return rel_tol * max_of(abs_of(best), scale);
}
template <class V>
BEDL_HD auto ties(V value, V best, V threshold, V rel_tol) {
  return value - best <= max_of(threshold, rel_tol * abs_of(value));
}
// `ties` where every cost is >= 0: then 0 <= best <= value, so the bound
// max(threshold, rel_tol |value|) is rel_tol * max(scale, value) exactly
// (docs/edit-distances.md): the same answer, fewer operations.
template <class V>
BEDL_HD auto ties_nonnegative(V value, V best, V scale, V rel_tol) {
  return value - best <= rel_tol * max_of(scale, value);
}

// The tie test of one pair (scalar): its tolerance, its cost scale, and
// whether all its costs are >= 0.
struct Tie {
  double rel_tol;
  double cost_scale;
  bool nonnegative = false;  // every cost of the pair is >= 0: flags_nonnegative may be used
  BEDL_HD double threshold(double best) const { return tie_threshold(best, cost_scale, rel_tol); }
  BEDL_HD bool within(double value, double best, double threshold) const {
    return ties(value, best, threshold, rel_tol);
  }
  // The co-optimal alternatives of a cell whose value is `best`. Selects
  // rather than branches: which alternatives tie varies from cell to cell.
  BEDL_HD uint8_t flags(double del_alt, double ins_alt, double match_alt, double best) const {
    const double t = threshold(best);
    return static_cast<uint8_t>((within(del_alt, best, t) ? kDel : 0) | (within(ins_alt, best, t) ? kIns : 0) |
                                (within(match_alt, best, t) ? kMatch : 0));
  }
  // `flags` where every cost is >= 0 (ties_nonnegative): the same flags.
  BEDL_HD bool within_nonnegative(double value, double best) const {
    return ties_nonnegative(value, best, cost_scale, rel_tol);
  }
  BEDL_HD uint8_t flags_nonnegative(double del_alt, double ins_alt, double match_alt, double best) const {
    return static_cast<uint8_t>((within_nonnegative(del_alt, best) ? kDel : 0) |
                                (within_nonnegative(ins_alt, best) ? kIns : 0) |
                                (within_nonnegative(match_alt, best) ? kMatch : 0));
  }
  // flags or flags_nonnegative, chosen at compile time (kNonnegative: only where nonnegative holds).
  template <bool kNonnegative>
  BEDL_HD uint8_t flags_of(double del_alt, double ins_alt, double match_alt, double best) const {
    return kNonnegative ? flags_nonnegative(del_alt, ins_alt, match_alt, best) : flags(del_alt, ins_alt, match_alt, best);
  }
};

}  // namespace dp
}  // namespace bedl
