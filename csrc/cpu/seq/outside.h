// The sequence kernel's outside sweep on the CPU: common/sequence_passes.h's
// sweep and its counting policy, with the per-thread vectors as buffers.
#pragma once

#include <cstdint>

#include "../../common/sequence_passes.h"

namespace bedl {
namespace sed {

// P of an (m, n) pair into p_acc (the cost layout), from inside counts `g`
// and their total `all`; cnt's two-row buffers as scratch.
template <typename Count, typename E, typename Buffers, typename Acc>
void count_outside(const InsideGrid<Count, E>& g, int64_t m, int64_t n, const Count& all, Buffers& cnt,
                   Acc& p_acc) {
  const int64_t w = n + 1;
  cnt.out_any.resize(2 * w);
  cnt.out_ins.resize(2 * w);
  p_acc.resize((m + 1) * w);
  count_outside(g, m, n, all, cnt.out_any.data(), cnt.out_ins.data(), p_acc.data());
}

}  // namespace sed
}  // namespace bedl
