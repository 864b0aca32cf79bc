// Per-thread buffers of the sequence kernel, reused across the pairs a thread runs.
#pragma once

#include <cstdint>
#include <vector>

#include "../../common/counts.h"
#include "../pair_sums.h"
#include "../staggered.h"
#include "lanes.h"

namespace bedl {
namespace sed {

// Counts in one count type.
// (Each per-cell array in a slot of its own: staggered.h.)
template <typename C>
struct SedCounts {
  staggered_vector<C, 1> in_del;    // inside counts, (m+1)(n+1)
  staggered_vector<C, 2> in_other;
  staggered_vector<C, 3> out_any;   // outside counts, two rows each
  staggered_vector<C, 4> out_ins;
};

// Where x repeats its symbols, SymbolRows (distance.h) gathers one row per
// distinct symbol: its slots (symbol -> slot, all -1 between pairs; x's row ->
// its slot).
struct SymbolRowSlots {
  std::vector<int64_t> slot_of, of_row;
};

struct SedWorkspace {
  std::vector<double> row_prev, row_cur, row_next;  // distance rows
  SedCounts<dp::FastCount> fast;            // counts as doubles: the usual case
  SedCounts<dp::Count> exact;               // counts with an exponent: where doubles overflow
  staggered_vector<uint8_t, 5> coopt;       // co-optimal incoming edges per cell
  staggered_vector<double, 6> p_acc;        // P accumulator, (m+1)(n+1)
  staggered_vector<double, 7> cost;         // a pair's costs gathered from a symbol table (or a few rows of them)
  SymbolRowSlots row_slots;                 // x's symbols' rows (SymbolRows)
  std::vector<double> below;               // a cutoff's lower bounds of each row's completions
  std::vector<double> ins_skew;             // insertion costs as the AVX2 strips read them
  sed::SedLanes lanes;                      // four pairs' inside passes at once (AVX2)
  dp::PairLabelSums label_sums;             // a pair's P by label pair (the symbol-table gradient's lists)
  std::vector<int64_t> label_col;           // y's label slots in label_sums
};

}  // namespace sed
}  // namespace bedl
