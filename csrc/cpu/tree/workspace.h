// Per-thread buffers of the tree kernel, reused across the pairs a thread runs.
#pragma once

#include <cstdint>
#include <vector>

#include "../../common/counts.h"
#include "../pair_sums.h"
#include "../staggered.h"

namespace bedl {
namespace ted {

// Counts of co-optimal derivations, (m+1)(n+1) each, in one count type.
// (Each per-cell array in a slot of its own: staggered.h.)
template <typename C>
struct CountBuffers {
  staggered_vector<C, 1> tdm_count;  // counts of the root-matched subtree distances
  staggered_vector<C, 2> tot;        // inside counts of the current table: all,
  staggered_vector<C, 3> in_other;   // and not entered by a deletion
  staggered_vector<C, 4> out_any;    // outside counts
  staggered_vector<C, 5> out_ins;
  staggered_vector<C, 6> out_tdm;
  // The inside pass's tot and in_other of the needed tables (region by region,
  // row by row, like the kept flags), for the outside pass; -1: not kept.
  std::vector<C> kept;  // grows only; kept_used entries are this pair's
  int64_t kept_used = 0;
  std::vector<int64_t> kept_offset;
};

struct TedWorkspace {
  staggered_vector<double, 7> cost;  // (m+1)(n+1) postorder: [i][j] replace, [i][0] delete, [0][j] insert
  std::vector<double> dels;      // the deletion costs [i][0] again, contiguous (tables walk them down columns)
  staggered_vector<double, 8> fd;    // forest distances of the current table
  staggered_vector<double, 9> tdm;   // root-matched subtree distances, all tables
  staggered_vector<uint8_t, 10> coopt;  // co-optimal incoming edges of the current table
  std::vector<double> match_row;  // a row's match alternatives (flag_table_by_rows)
  CountBuffers<dp::FastCount> fast;  // counts as doubles: the usual case
  CountBuffers<dp::Count> exact;     // counts with an exponent: where doubles overflow
  staggered_vector<double, 11> p_acc;
  bool p_acc_zero = false;  // p_acc all zero (its reader cleared it: the pair lists)
  // p_acc as `cells` zeros for the next pair's P.
  void clear_p_acc(int64_t cells) {
    if (p_acc_zero) {
      p_acc.resize(cells);
    } else {
      p_acc.assign(cells, 0.0);
    }
    p_acc_zero = false;
  }
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
  staggered_vector<dp::Reach, 12> reach_any;  // mark_needed's boolean outside pass
  staggered_vector<dp::Reach, 13> reach_ins;
  staggered_vector<dp::Reach, 14> reach_tdm;
  std::vector<int64_t> reach_end;  // the outside sweeps' rightmost reached cell per row (m+1)
  // Co-optimal flags of the needed tables, kept by mark_needed (region by
  // region, row-major) unless they exceed kFlagStoreLimit; -1: not kept.
  staggered_vector<uint8_t, 15> flag_store;  // grows only; flags_used entries are this pair's
  int64_t flags_used = 0;
  std::vector<int64_t> flag_offset;
  dp::PairLabelSums label_sums;  // a pair's P by label pair (the symbol-table gradient's lists)
  std::vector<int64_t> label_col;  // y's label slots in label_sums, in postorder
  std::vector<double> cut_below;   // a distance cutoff's lower bounds of the final table's rows
};

}  // namespace ted
}  // namespace bedl
