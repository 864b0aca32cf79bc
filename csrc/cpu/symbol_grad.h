// The gradient of weighted distances with respect to a symbol cost table:
// G[a, b] = sum_k w_k sum_(i,j) P_k[i, j] [label_x(i) = a, label_y(j) = b]
// (the gap row and column for deletions and insertions), summed straight from
// each pair's co-optimal accumulator instead of materialising P per pair.
//
// Same bits for any thread count: pairs are summed in fixed blocks of
// consecutive pairs (each block by one thread, its pairs in order, into a
// sparse list of the table entries it touched, in order of first touch),
// and the blocks' lists are added into the table serially in block order.
// Sums are in double; the table comes back in its own dtype.
#pragma once

#include "dp_common.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace bedl {
namespace dp {

// Pairs per block: small enough to spread over threads, large enough that a
// block's list merges the many repeats of the same label pairs.
constexpr int64_t kGradBlockPairs = 16;

// A block's sums over a (S, S) table, dense for adding, listed for emptying.
struct LabelSums {
  std::vector<double> sum;
  std::vector<uint8_t> seen;
  std::vector<int64_t> touched;

  void resize(int64_t cells) {
    if (static_cast<int64_t>(sum.size()) == cells) return;
    sum.assign(cells, 0.0);
    seen.assign(cells, 0);
    touched.clear();
  }
  void add(int64_t entry, double value) {
    if (!seen[entry]) {
      seen[entry] = 1;
      touched.push_back(entry);
    }
    sum[entry] += value;
  }
  // Moves the sums into `out` (entry, value) in order of first touch and clears them.
  void drain(std::vector<std::pair<int64_t, double>>& out) {
    out.reserve(touched.size());
    for (int64_t entry : touched) {
      out.emplace_back(entry, sum[entry]);
      sum[entry] = 0.0;
      seen[entry] = 0;
    }
    touched.clear();
  }
};

template <typename Workspace>
struct GradWorkspace {
  Workspace pair;
  LabelSums sums;
};

// Pair weights: a dense CPU (batch,) tensor of the table's dtype.
inline at::Tensor check_pair_weights(const at::Tensor& weights, const at::Tensor& table, int64_t batch) {
  TORCH_CHECK_VALUE(weights.device().is_cpu() && weights.layout() == at::kStrided,
                    "pair_weights must be a dense CPU tensor");
  TORCH_CHECK_TYPE(weights.scalar_type() == table.scalar_type(), "pair_weights must have the dtype of symbol_costs (",
                   table.scalar_type(), "), got ", weights.scalar_type());
  TORCH_CHECK_VALUE(weights.dim() == 1 && weights.size(0) == batch, "pair_weights must have shape (", batch,
                    ",) (one weight per pair), got ", weights.sizes());
  return weights.contiguous();
}

// Runs block_sums(begin, end, workspace) for fixed blocks of consecutive
// pairs, each of which adds the weighted P of its pairs (in order; pairs of
// weight 0 add nothing and may be skipped) into workspace.sums by table entry
// (a * S + b); returns the (S, S) sums in dtype scalar_t.
template <typename scalar_t, typename Workspace, typename BlockSums>
at::Tensor weighted_label_sums_by_block(int64_t S, int64_t batch, int64_t cells_per_pair,
                                        const at::TensorOptions& options, const BlockSums& block_sums) {
  const int64_t blocks = (batch + kGradBlockPairs - 1) / kGradBlockPairs;
  std::vector<std::vector<std::pair<int64_t, double>>> lists(blocks);
  for_each_pair<GradWorkspace<Workspace>>(
      blocks, cells_per_pair * kGradBlockPairs, [&](int64_t block, GradWorkspace<Workspace>& ws) {
        ws.sums.resize(S * S);
        block_sums(block * kGradBlockPairs, std::min(batch, (block + 1) * kGradBlockPairs), ws);
        ws.sums.drain(lists[block]);
      });
  std::vector<double> total(S * S, 0.0);
  for (const auto& list : lists) {
    for (const auto& entry : list) total[entry.first] += entry.second;
  }
  at::Tensor out = at::empty({S, S}, options);
  scalar_t* o = out.data_ptr<scalar_t>();
  for (int64_t k = 0; k < S * S; ++k) o[k] = static_cast<scalar_t>(total[k]);
  return out;
}

// weighted_label_sums_by_block with pair_sums(b, weight, workspace) per pair
// of nonzero weight.
template <typename scalar_t, typename Workspace, typename PairSums>
at::Tensor weighted_label_sums(int64_t S, int64_t batch, int64_t cells_per_pair, const scalar_t* weights,
                               const at::TensorOptions& options, const PairSums& pair_sums) {
  return weighted_label_sums_by_block<scalar_t, Workspace>(
      S, batch, cells_per_pair, options, [&](int64_t begin, int64_t end, GradWorkspace<Workspace>& ws) {
        for (int64_t b = begin; b < end; ++b) {
          const double weight = static_cast<double>(weights[b]);
          if (weight != 0.0) pair_sums(b, weight, ws);
        }
      });
}

}  // namespace dp
}  // namespace bedl
