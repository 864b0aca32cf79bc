// Sequence edit distances under unit costs between the labels themselves,
// without a symbol table: a label matches only an equal label, every other
// replacement, deletion and insertion costs 1. Bit vectors (unit_bits.h) over
// any alphabet, so that a large vocabulary needs neither a table nor tiles.
#include <algorithm>
#include <utility>

#include <ATen/Parallel.h>

#include "../../edit_distance.h"
#include "../inputs.h"
#include "../parallel.h"
#include "unit_bits.h"

namespace bedl {

namespace {

// The labels' extent (largest label + 1), every label checked >= 0.
int64_t label_extent(const at::Tensor& labels, const char* name) {
  const int64_t* l = labels.data_ptr<int64_t>();
  int64_t extent = 0;
  for (int64_t k = 0; k < labels.size(0); ++k) {
    BEDL_CHECK_VALUE(l[k] >= 0, name, "[", k, "] = ", l[k], " is not a label (labels are >= 0)");
    extent = std::max(extent, l[k] + 1);
  }
  return extent;
}

int64_t longest(const int64_t* ptr, int64_t count) {
  int64_t most = 0;
  for (int64_t t = 0; t < count; ++t) most = std::max(most, ptr[t + 1] - ptr[t]);
  return most;
}

// The two collections of a call (labels and ptr offsets, index tensors checked
// by the caller), contiguous, with their ptr checked: pair (tx, ty) as the bit
// vectors take it.
struct UnitSequences {
  at::Tensor x_labels, x_ptr, y_labels, y_ptr;
  int64_t nx, ny;
  const int64_t *xl, *xp, *yl, *yp;

  UnitSequences(const at::Tensor& x_labels_in, const at::Tensor& x_ptr_in, const at::Tensor& y_labels_in,
                const at::Tensor& y_ptr_in)
      : x_labels(x_labels_in.contiguous()),
        x_ptr(x_ptr_in.contiguous()),
        y_labels(y_labels_in.contiguous()),
        y_ptr(y_ptr_in.contiguous()),
        nx(dp::check_ptr(x_ptr, "x_ptr", x_labels.size(0), "labels")),
        ny(dp::check_ptr(y_ptr, "y_ptr", y_labels.size(0), "labels")),
        xl(x_labels.data_ptr<int64_t>()),
        xp(x_ptr.data_ptr<int64_t>()),
        yl(y_labels.data_ptr<int64_t>()),
        yp(y_ptr.data_ptr<int64_t>()) {}

  // The labels' extent over both sides, every label checked >= 0.
  int64_t symbols() const { return std::max(label_extent(x_labels, "x_labels"), label_extent(y_labels, "y_labels")); }
  sed::UnitPair pair(int64_t tx, int64_t ty) const {
    return sed::UnitPair{xl + xp[tx], xp[tx + 1] - xp[tx], yl + yp[ty], yp[ty + 1] - yp[ty]};
  }
  // The scheduler's cells per pair, as the symbol-table kernel's bit-vector path counts them.
  int64_t piece_cells() const { return sed::unit_piece_cells(longest(xp, nx), longest(yp, ny)); }
};

// Row-major pairs (i, j) of an (n x m) block, or with `triangle` (n <= m) those
// with j >= i: pair b's position, found by a cursor that moves row by row, since
// a piece asks for its pairs in nearly ascending order.
class MatrixPairs {
 public:
  MatrixPairs(int64_t rows, int64_t cols, bool triangle) : rows_(rows), cols_(cols), triangle_(triangle) {}
  int64_t count() const { return row_start(rows_); }
  // Row i's first pair.
  int64_t row_start(int64_t i) const { return triangle_ ? i * cols_ - i * (i - 1) / 2 : i * cols_; }
  int64_t first_col(int64_t i) const { return triangle_ ? i : 0; }
  // The row holding pair b (0 <= b < count()): binary search.
  int64_t row_of(int64_t b) const {
    int64_t lo = 0, hi = rows_ - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (row_start(mid) <= b) lo = mid; else hi = mid - 1;
    }
    return lo;
  }

 private:
  int64_t rows_, cols_;
  bool triangle_;
};

class MatrixCursor {
 public:
  MatrixCursor(const MatrixPairs& pairs, int64_t b) : pairs_(pairs), row_(pairs.row_of(b)) {
    start_ = pairs_.row_start(row_);
    end_ = pairs_.row_start(row_ + 1);
  }
  // (i, j) of pair b.
  std::pair<int64_t, int64_t> at(int64_t b) {
    while (b >= end_) {
      ++row_;
      start_ = end_;
      end_ = pairs_.row_start(row_ + 1);
    }
    while (b < start_) {
      --row_;
      end_ = start_;
      start_ = pairs_.row_start(row_);
    }
    return {row_, pairs_.first_col(row_) + (b - start_)};
  }

 private:
  const MatrixPairs& pairs_;
  int64_t row_, start_ = 0, end_ = 0;
};

// d[j][i] = d[i][j] for j > i < n of a row-major matrix of `stride` columns,
// in square tiles (a column written entry by entry misses the cache at every row).
template <typename T>
void mirror_upper(T* d, int64_t n, int64_t stride) {
  constexpr int64_t kTile = 64;
  const int64_t tiles = (n + kTile - 1) / kTile;
  at::parallel_for(0, tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ti = begin; ti < end; ++ti) {  // the tile row of the lower triangle's rows
      const int64_t j0 = ti * kTile, j1 = std::min(n, j0 + kTile);
      for (int64_t i0 = 0; i0 <= j0; i0 += kTile) {
        const int64_t i1 = std::min(n, i0 + kTile);
        for (int64_t j = j0; j < j1; ++j) {
          for (int64_t i = i0; i < std::min(i1, j); ++i) d[j * stride + i] = d[i * stride + j];
        }
      }
    }
  });
}

// The block's pairs (x rows r0 .. r0 + h - 1 against y columns c0 .. c0 + w - 1;
// with `triangle`, c0 = r0 and only j >= i, the square mirrored) into d
// (row-major, w columns), each distance converted to T as Tensor.to would
// (integers: exact in float32 up to 2^24).
template <typename T>
void unit_matrix(const UnitSequences& in, int64_t symbols, int64_t r0, int64_t h, int64_t c0, int64_t w,
                 bool triangle, T* d) {
  const sed::UnitTable unit = sed::UnitTable::labels_match_themselves();
  const MatrixPairs pairs(h, w, triangle);
  dp::for_each_piece<sed::UnitWorkspace>(pairs.count(), in.piece_cells(), [&](int64_t begin, int64_t end,
                                                                                sed::UnitWorkspace& ws) {
    MatrixCursor cursor(pairs, begin);
    sed::unit_distances(
        unit, symbols + 1, symbols + 1, begin, end,
        [&](int64_t b) {
          const auto [i, j] = cursor.at(b);
          return in.pair(r0 + i, c0 + j);
        },
        [&](int64_t b, int64_t v) {
          const auto [i, j] = cursor.at(b);
          d[i * w + j] = static_cast<T>(v);
        },
        ws);
  });
  if (triangle) mirror_upper(d, h, w);
}

}  // namespace

at::Tensor sed_unit_matrix_cpu(const at::Tensor& x_labels_in, const at::Tensor& x_ptr_in,
                               const at::Tensor& y_labels_in, const at::Tensor& y_ptr_in, int64_t row_begin,
                               int64_t row_end, bool triangle, at::ScalarType dtype) {
  dp::check_index(x_labels_in, "x_labels", -1);
  dp::check_index(y_labels_in, "y_labels", -1);
  dp::check_index(x_ptr_in, "x_ptr", -1);
  dp::check_index(y_ptr_in, "y_ptr", -1);
  BEDL_CHECK_TYPE(dtype == at::kLong || dtype == at::kDouble || dtype == at::kFloat,
                  "dtype must be int64, float64 or float32, got ", dtype);
  const UnitSequences in(x_labels_in, x_ptr_in, y_labels_in, y_ptr_in);
  const int64_t nx = in.nx, ny = in.ny;
  BEDL_CHECK_VALUE(!triangle || nx == ny, "triangle needs as many x as y sequences, got ", nx, " and ", ny);
  BEDL_CHECK_VALUE(0 <= row_begin && row_begin <= row_end && row_end <= nx, "rows ", row_begin, " .. ", row_end,
                   " are not a range of the ", nx, " x sequences");
  const int64_t symbols = in.symbols();
  const int64_t h = row_end - row_begin, c0 = triangle ? row_begin : 0, w = ny - c0;
  at::Tensor dist = at::empty({h, w}, in.x_labels.options().dtype(dtype));
  if (dtype == at::kLong) {
    unit_matrix(in, symbols, row_begin, h, c0, w, triangle, dist.data_ptr<int64_t>());
  } else if (dtype == at::kDouble) {
    unit_matrix(in, symbols, row_begin, h, c0, w, triangle, dist.data_ptr<double>());
  } else {
    unit_matrix(in, symbols, row_begin, h, c0, w, triangle, dist.data_ptr<float>());
  }
  return dist;
}

at::Tensor sed_unit_cpu(const at::Tensor& x_labels_in, const at::Tensor& x_ptr_in, const at::Tensor& y_labels_in,
                        const at::Tensor& y_ptr_in, const at::Tensor& pair_x_in, const at::Tensor& pair_y_in) {
  dp::check_label_indices(x_labels_in, x_ptr_in, y_labels_in, y_ptr_in, pair_x_in, pair_y_in);
  const UnitSequences in(x_labels_in, x_ptr_in, y_labels_in, y_ptr_in);
  const at::Tensor pair_x = pair_x_in.contiguous(), pair_y = pair_y_in.contiguous();
  const int64_t batch = pair_x.size(0);
  const int64_t *px = pair_x.data_ptr<int64_t>(), *py = pair_y.data_ptr<int64_t>();
  dp::check_pair_indices(px, py, batch, in.nx, in.ny, "sequence");
  const int64_t symbols = in.symbols();
  const sed::UnitTable unit = sed::UnitTable::labels_match_themselves();
  at::Tensor dist = at::empty({batch}, in.x_labels.options());
  int64_t* d = dist.data_ptr<int64_t>();
  dp::for_each_piece<sed::UnitWorkspace>(batch, in.piece_cells(), [&](int64_t begin, int64_t end,
                                                                      sed::UnitWorkspace& ws) {
    sed::unit_distances(
        unit, symbols + 1, symbols + 1, begin, end, [&](int64_t b) { return in.pair(px[b], py[b]); },
        [&](int64_t b, int64_t v) { d[b] = v; }, ws);
  });
  return dist;
}

}  // namespace bedl
