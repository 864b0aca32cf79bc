// The weighted recurrence that the counting and the soft passes of both
// algorithms share. A cell's inside weight is kept in two states: entered by
// a deletion (from the cell above, in either state), and entered otherwise
// (by an insertion, only from a left cell not entered by a deletion, so that
// each run of insertions and deletions is read insertions first and every
// mapping is exactly one derivation; or by a match, from its source cell in
// either state). A gate says which alternatives a cell admits: the
// co-optimal ones (counts of co-optimal mappings) or all (Boltzmann weights).
#pragma once

#include "counts.h"
#include "tie.h"

namespace bedl {
namespace dp {

// Every alternative (the soft passes: each derivation weighted by exp(-cost / T)).
struct AllAlternatives {
  template <class W>
  BEDL_HD W del(const W& w) const {
    return w;
  }
  template <class W>
  BEDL_HD W ins(const W& w) const {
    return w;
  }
  template <class W>
  BEDL_HD W match(const W& w) const {
    return w;
  }
};

// The co-optimal alternatives `flags` (the counting passes). Counts as
// doubles are masked rather than branched on: which alternatives tie varies
// from cell to cell, so branches mispredicted and were most of the inside
// passes' time.
struct CoOptimal {
  uint8_t flags;
  template <class C>
  BEDL_HD C keep(uint8_t bit, const C& c) const {
    return (flags & bit) ? c : C::zero();
  }
  BEDL_HD FastCount keep(uint8_t bit, const FastCount& c) const { return FastCount{keep_if(flags & bit, c.m)}; }
  template <class C>
  BEDL_HD C del(const C& c) const {
    return keep(kDel, c);
  }
  template <class C>
  BEDL_HD C ins(const C& c) const {
    return keep(kIns, c);
  }
  template <class C>
  BEDL_HD C match(const C& c) const {
    return keep(kMatch, c);
  }
};

// A cell's inside weights from what each alternative brings (the weight of
// its source state times the edge's weight): by_del, and other (not entered
// by a deletion); the cell's total is by_del + other.
template <class W, class Gate>
BEDL_HD void enter(const Gate& gate, const W& by_deletion, const W& by_insertion, const W& by_match, W& by_del,
                   W& other) {
  by_del = gate.del(by_deletion);
  other = gate.ins(by_insertion) + gate.match(by_match);
}

}  // namespace dp
}  // namespace bedl
