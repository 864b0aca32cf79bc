// The sequence edit distance's recurrence, backend-free: the (m+1) x (n+1)
// grid, cell (i, j) the prefixes x[..i] against y[..j], row 0 and column 0
// the empty prefixes. The cell's value is the cheapest of replacing x_i by y_j
// (after the cell up-left), deleting x_i (after the cell above) and inserting
// y_j (after the cell to the left), in that operand order (std::min's order
// decides between equal values, and so the sign of a zero); its co-optimal
// flags come from dp::Tie; its counts and soft weights from dp::enter, the
// replacement entering the `other` state as a forest's match does.
#pragma once

#include "macros.h"
#include "states.h"

namespace bedl {
namespace sed {

// The three alternatives of a sequence cell and its value.
template <class V>
struct SequenceAlternatives {
  V rep, del, ins;
  BEDL_HD V best() const { return min_of(min_of(rep, del), ins); }
};

// Cell (i, j)'s alternatives: diag + rep(i, j), up + del(i), left + ins(j).
template <class V>
BEDL_HD SequenceAlternatives<V> sequence_alternatives(V diag, V rep, V up, V del_i, V left, V ins_j) {
  return {diag + rep, up + del_i, left + ins_j};
}

// Cell (i, j)'s value alone.
template <class V>
BEDL_HD V sequence_value(V diag, V rep, V up, V del_i, V left, V ins_j) {
  return sequence_alternatives(diag, rep, up, del_i, left, ins_j).best();
}

// Cell (i, j)'s value and co-optimal flags.
BEDL_HD double sequence_value_flags(const dp::Tie& tie, double diag, double rep, double up, double del_i,
                                    double left, double ins_j, uint8_t& flags) {
  const SequenceAlternatives<double> a = sequence_alternatives(diag, rep, up, del_i, left, ins_j);
  const double best = a.best();
  flags = tie.flags(a.del, a.ins, a.rep, best);
  return best;
}

}  // namespace sed
}  // namespace bedl
