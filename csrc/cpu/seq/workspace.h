// Per-thread buffers of the sequence kernel, reused across the pairs a thread runs.
#pragma once

#include <cstdint>
#include <vector>

#include "../../common/counts.h"
#include "../pair_sums.h"
#include "lanes.h"

namespace bedl {
namespace sed {

// Counts in one count type.
template <typename C>
struct SedCounts {
  std::vector<C> in_del, in_other;  // inside counts, (m+1)(n+1)
  std::vector<C> out_any, out_ins;  // outside counts, two rows each
};

struct SedWorkspace {
  std::vector<double> row_prev, row_cur, row_next;  // distance rows
  SedCounts<dp::FastCount> fast;            // counts as doubles: the usual case
  SedCounts<dp::Count> exact;               // counts with an exponent: where doubles overflow
  std::vector<uint8_t> coopt;               // co-optimal incoming edges per cell
  std::vector<double> p_acc;                // P accumulator, (m+1)(n+1)
  std::vector<double> cost;                 // a pair's costs gathered from a symbol table (or a few rows of them)
  std::vector<double> below;               // a cutoff's lower bounds of each row's completions
  std::vector<double> ins_skew;             // insertion costs as the AVX2 strips read them
  sed::SedLanes lanes;                      // four pairs' inside passes at once (AVX2)
  dp::PairLabelSums label_sums;             // a pair's P by label pair (the symbol-table gradient's lists)
  std::vector<int64_t> label_col;           // y's label slots in label_sums
};

}  // namespace sed
}  // namespace bedl
