// Each pair's co-optimal matrix P summed by label pair, listed per pair:
// what the gradient with respect to a symbol table needs of a pair, whatever
// weight the loss later gives it. The forward of a distance matrix whose
// table requires grad computes these beside the distances (one counting pass
// instead of a distance pass now and a counting pass in backward); backward
// only weights and adds them (weighted_pair_sums_cpu).
//
// Layout (CSR over pairs): pair b's sums are entry[ptr[b] .. ptr[b + 1]),
// entry a * cols + c for x label a and y label c of a (rows, cols) table
// (rows - 1 and cols - 1: the gap; deletions in the gap column, insertions
// in the gap row), value the sum of P over the
// cells of that label pair, in double, listed by x's labels in order of
// first appearance (in preorder for trees), then the gap, and within them
// y's the same way; only nonzero sums. (Where a node's own label is the gap,
// an unknown label, its replacements and the gap row's or column's share
// one entry, listed twice.)
#pragma once

#include "inputs.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <tuple>
#include <vector>

namespace bedl {
namespace dp {

// The distinct labels of each of T label lists (list t: labels[ptr[t] ..
// ptr[t + 1]), preorder for trees), in order of first appearance, and each
// position's index among them: built once per call, read by every pair.
struct LabelSlots {
  std::vector<int64_t> slot;      // per position, like labels
  std::vector<int64_t> distinct;  // list t's at [begin[t], begin[t + 1])
  std::vector<int64_t> begin;

  LabelSlots(const int64_t* labels, const int64_t* ptr, int64_t T, int64_t symbols) {
    slot.resize(ptr[T]);
    begin.assign(T + 1, 0);
    std::vector<int64_t> slot_of(symbols, -1);
    for (int64_t t = 0; t < T; ++t) {
      begin[t] = static_cast<int64_t>(distinct.size());
      for (int64_t k = ptr[t]; k < ptr[t + 1]; ++k) {
        int64_t& s = slot_of[labels[k]];
        if (s < 0) {
          s = static_cast<int64_t>(distinct.size()) - begin[t];
          distinct.push_back(labels[k]);
        }
        slot[k] = s;
      }
      for (int64_t d = begin[t]; d < static_cast<int64_t>(distinct.size()); ++d) slot_of[distinct[d]] = -1;
    }
    begin[T] = static_cast<int64_t>(distinct.size());
  }
  int64_t count(int64_t t) const { return begin[t + 1] - begin[t]; }
};

// Per thread: one pair's sums over its own labels, dense (x's distinct
// labels and the gap) x (y's and the gap).
class PairLabelSums {
 public:
  // Starts the pair of x list tx and y list ty of a (table_rows, table_cols) table.
  void start(int64_t table_rows, int64_t table_cols, const LabelSlots& x, int64_t tx, const LabelSlots& y,
             int64_t ty) {
    table_rows_ = table_rows;
    table_cols_ = table_cols;
    x_symbols_ = x.distinct.data() + x.begin[tx];
    y_symbols_ = y.distinct.data() + y.begin[ty];
    rows_ = x.count(tx) + 1;
    cols_ = y.count(ty) + 1;
    sum_.resize(rows_ * cols_);
    std::fill(sum_.begin(), sum_.end(), 0.0);
  }
  // Slots: the row of x's label slot s (the gap row: insertions) plus the
  // column of y's label slot s (the gap column: deletions).
  int64_t x_row(int64_t s) const { return s * cols_; }
  int64_t gap_row() const { return (rows_ - 1) * cols_; }
  int64_t gap_col() const { return cols_ - 1; }
  // The sums by slot, to add into (a cell's P at slot x_row + y column;
  // adding a cell whose P is 0 changes no sum: P >= 0 and the sums start at +0).
  double* sums() { return sum_.data(); }

  // Lists the nonzero sums into entry/value (room for the pair's bound);
  // returns how many.
  int64_t emit(int64_t* entry, double* value) const {
    int64_t count = 0;
    for (int64_t r = 0; r < rows_; ++r) {
      const int64_t a = (r + 1 < rows_ ? x_symbols_[r] : table_rows_ - 1) * table_cols_;
      const double* row = sum_.data() + r * cols_;
      for (int64_t c = 0; c < cols_; ++c) {
        if (row[c] == 0.0) continue;
        entry[count] = a + (c + 1 < cols_ ? y_symbols_[c] : table_cols_ - 1);
        value[count++] = row[c];
      }
    }
    return count;
  }

 private:
  int64_t table_rows_ = 0, table_cols_ = 0, rows_ = 0, cols_ = 0;
  const int64_t *x_symbols_ = nullptr, *y_symbols_ = nullptr;
  std::vector<double> sum_;
};

// row[col[j]] += p[j] for j < n, then p[j] = 0: one row of a pair's P into
// its sums by slot, leaving P's buffer zero for the next pair. P is mostly
// zeros (adding 0 changes no sum), so blocks of four zeros are skipped at once.
inline void take_p_row(double* row, const int64_t* col, double* p, int64_t n) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    uint64_t bits[4];
    std::memcpy(bits, p + j, sizeof(bits));
    if ((bits[0] | bits[1] | bits[2] | bits[3]) == 0) continue;
    for (int k = 0; k < 4; ++k) {
      row[col[j + k]] += p[j + k];
      p[j + k] = 0.0;
    }
  }
  for (; j < n; ++j) {
    row[col[j]] += p[j];
    p[j] = 0.0;
  }
}

// Both sides' label slots of a symbol-table call.
struct PairLabels {
  LabelSlots x, y;
  explicit PairLabels(const SymbolInputs& in)
      : x(in.x_labels.data_ptr<int64_t>(), in.x_ptr.data_ptr<int64_t>(), in.x_ptr.size(0) - 1, in.rows),
        y(in.y_labels.data_ptr<int64_t>(), in.y_ptr.data_ptr<int64_t>(), in.y_ptr.size(0) - 1, in.cols) {}

  // Each pair's room for its list: (distinct x labels + 1) (distinct y
  // labels + 1) - 1 (no gap against gap), at most its cells but one;
  // sizes(b) gives pair b's (|x|, |y|).
  template <class Sizes>
  std::vector<int64_t> list_bounds(const SymbolInputs& in, const Sizes& sizes) const {
    const int64_t* px = in.pair_x.data_ptr<int64_t>();
    const int64_t* py = in.pair_y.data_ptr<int64_t>();
    std::vector<int64_t> out(in.batch);
    for (int64_t b = 0; b < in.batch; ++b) {
      const auto [m, n] = sizes(b);
      out[b] = std::min((x.count(px[b]) + 1) * (y.count(py[b]) + 1), (m + 1) * (n + 1)) - 1;
    }
    return out;
  }
};

// 0 .. batch - 1: every pair of a call, in order.
inline std::vector<int64_t> all_pairs(int64_t batch) {
  std::vector<int64_t> out(batch);
  for (int64_t b = 0; b < batch; ++b) out[b] = b;
  return out;
}

// Lists of some of a batch's pairs (`order`: their indices, each once): a
// slot per pair of room for its largest possible list, filled by the pairs
// in any order and on any thread (take), then read in `order`.
class PairSumsOut {
 public:
  // False where the slots would exceed max_entries in all (nothing allocated).
  bool plan(const std::vector<int64_t>& order, const std::vector<int64_t>& bounds, int64_t max_entries) {
    order_ = order;
    start_.assign(order.size() + 1, 0);
    if (slot_of_.size() < bounds.size()) slot_of_.resize(bounds.size(), -1);
    for (size_t k = 0; k < order.size(); ++k) {
      start_[k + 1] = start_[k] + bounds[order[k]];
      if (start_[k + 1] > max_entries) return false;
      slot_of_[order[k]] = static_cast<int64_t>(k);
    }
    if (capacity_ < start_.back()) {  // (left uninitialised: each pair writes its own)
      capacity_ = start_.back();
      entry_.reset(new int64_t[capacity_]);
      value_.reset(new double[capacity_]);
    }
    count_.assign(order.size(), 0);
    return true;
  }
  // Pair b's list, from `sums` (that pair just summed).
  void take(int64_t b, PairLabelSums& sums) {
    const int64_t k = slot_of_[b];
    count_[k] = sums.emit(entry_.get() + start_[k], value_.get() + start_[k]);
  }

  // total[entry] += weight[b] * value over the pairs in order, each pair's list in order.
  template <typename scalar_t>
  void add_weighted(const scalar_t* weight, std::vector<double>& total) const {
    for (size_t k = 0; k < order_.size(); ++k) {
      const double w = static_cast<double>(weight[order_[k]]);
      for (int64_t at = start_[k]; at < start_[k] + count_[k]; ++at) total[entry_[at]] += w * value_[at];
    }
  }

  // (distances, ptr, entry, value) of the sums ops: the lists where they
  // were computed (`listed`), else three empty tensors.
  std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> with_distances(const at::Tensor& distances,
                                                                          bool listed) const {
    if (!listed) return {distances, at::empty({0}, at::kLong), at::empty({0}, at::kLong), at::empty({0}, at::kDouble)};
    auto [ptr, entry, value] = tensors();
    return {distances, ptr, entry, value};
  }

  // (ptr (B + 1,), entry (E,), value (E,) float64) over the pairs in order.
  std::tuple<at::Tensor, at::Tensor, at::Tensor> tensors() const {
    const int64_t B = static_cast<int64_t>(order_.size());
    at::Tensor ptr = at::empty({B + 1}, at::kLong);
    int64_t* p = ptr.data_ptr<int64_t>();
    p[0] = 0;
    for (int64_t k = 0; k < B; ++k) p[k + 1] = p[k] + count_[k];
    at::Tensor entry = at::empty({p[B]}, at::kLong);
    at::Tensor value = at::empty({p[B]}, at::kDouble);
    for (int64_t k = 0; k < B; ++k) {
      std::copy_n(entry_.get() + start_[k], count_[k], entry.data_ptr<int64_t>() + p[k]);
      std::copy_n(value_.get() + start_[k], count_[k], value.data_ptr<double>() + p[k]);
    }
    return {ptr, entry, value};
  }

 private:
  std::vector<int64_t> order_, slot_of_, start_, count_;
  int64_t capacity_ = 0;
  std::unique_ptr<int64_t[]> entry_;
  std::unique_ptr<double[]> value_;
};

// Pair weights: a dense CPU (batch,) tensor of the table's dtype.
inline at::Tensor check_pair_weights(const at::Tensor& weights, const at::Tensor& table, int64_t batch) {
  BEDL_CHECK_VALUE(weights.device().is_cpu() && weights.layout() == at::kStrided,
                   "pair_weights must be a dense CPU tensor");
  BEDL_CHECK_TYPE(weights.scalar_type() == table.scalar_type(), "pair_weights must have the dtype of symbol_costs (",
                  table.scalar_type(), "), got ", weights.scalar_type());
  BEDL_CHECK_VALUE(weights.dim() == 1 && weights.size(0) == batch, "pair_weights must have shape (", batch,
                   ",) (one weight per pair), got ", weights.sizes());
  return weights.contiguous();
}

// Entries of lists computed at a time by the gradient kernels (16 bytes each:
// 64 MB), which add them up chunk by chunk.
constexpr int64_t kGradChunkEntries = int64_t{1} << 22;

// The (rows, cols) gradient sum_b weight[b] * (pair b's list) over the pairs of
// nonzero weight, in the table's dtype: lists(order, out) computes the lists
// of the pairs `order` into out (planned), chunk after chunk of at most
// kGradChunkEntries entries of room (at least one pair), each chunk's then
// added pair by pair in order. The same bits as weighted_pair_sums_cpu on the
// lists of all pairs, for any thread count and chunking.
template <typename scalar_t, class Lists>
at::Tensor weighted_lists_grad(int64_t rows, int64_t cols, const std::vector<int64_t>& bounds,
                               const scalar_t* weight, const at::TensorOptions& options, const Lists& lists) {
  std::vector<double> total(rows * cols, 0.0);
  PairSumsOut out;
  std::vector<int64_t> chunk;
  int64_t room = 0;
  auto flush = [&] {
    out.plan(chunk, bounds, std::numeric_limits<int64_t>::max());
    lists(chunk, out);
    out.add_weighted(weight, total);
    chunk.clear();
    room = 0;
  };
  for (int64_t b = 0; b < static_cast<int64_t>(bounds.size()); ++b) {
    if (weight[b] == scalar_t(0)) continue;  // adds nothing
    if (!chunk.empty() && room + bounds[b] > kGradChunkEntries) flush();
    chunk.push_back(b);
    room += bounds[b];
  }
  if (!chunk.empty()) flush();
  at::Tensor grad = at::empty({rows, cols}, options);
  scalar_t* g = grad.data_ptr<scalar_t>();
  for (int64_t k = 0; k < rows * cols; ++k) g[k] = static_cast<scalar_t>(total[k]);
  return grad;
}

}  // namespace dp
}  // namespace bedl
