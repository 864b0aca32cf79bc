// The least entry of a table row, for the distance cutoffs (sequences'
// RowCutoff, trees' final_row_beyond): four running minima, since one chain
// waits on each comparison. The minimum is the same number in any order (an
// exact operation; a zero's sign cannot change a sum compared with a limit).
#pragma once

#include <algorithm>
#include <cstdint>

namespace bedl {
namespace dp {

// min(row[begin], ..., row[end]), begin <= end.
inline double row_minimum(const double* row, int64_t begin, int64_t end) {
  double low[4] = {row[begin], row[begin], row[begin], row[begin]};
  int64_t j = begin + 1;
  for (; j + 3 <= end; j += 4) {
    for (int k = 0; k < 4; ++k) low[k] = std::min(low[k], row[j + k]);
  }
  for (; j <= end; ++j) low[0] = std::min(low[0], row[j]);
  return std::min(std::min(low[0], low[1]), std::min(low[2], low[3]));
}

}  // namespace dp
}  // namespace bedl
