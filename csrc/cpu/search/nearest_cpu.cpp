// Each row's k nearest entries by (distance, index), merged in place from a
// dense block of a distance matrix: the merge of a k-NN that computes the
// matrix's tiles. One pass over the block for its rows and, where each entry
// stands for its mirror too, one for its columns; a list of k per target row
// replaces a sort of the block (integer distances tie by the thousand).
#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "../../edit_distance.h"
#include "../check.h"

namespace bedl {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Columns a thread of the column pass keeps lists for, each row's stretch of
// the block one cache line or more.
constexpr int64_t kColumnChunk = 64;
// About this many block entries per thread at least: fewer are not worth a wake-up.
constexpr int64_t kEntriesPerThread = int64_t{1} << 16;

// (v, c) comes before (d, i): a smaller distance, or the same and a smaller index.
inline bool before(double v, int64_t c, double d, int64_t i) { return v < d || (v == d && c < i); }

// Inserts (v, c) into the list d[0 .. k), idx[0 .. k) sorted by (distance,
// index), dropping its last entry; (v, c) comes before that entry.
inline void insert(double* d, int64_t* idx, int64_t k, double v, int64_t c) {
  int64_t p = k - 1;
  while (p > 0 && before(v, c, d[p - 1], idx[p - 1])) {
    d[p] = d[p - 1];
    idx[p] = idx[p - 1];
    --p;
  }
  d[p] = v;
  idx[p] = c;
}

// Rows r0 + i take the entries (r0 + i, c0 + j, m[i, j]) of their row of the block.
void merge_rows(double* best_d, int64_t* best_i, int64_t k, const double* m, int64_t h, int64_t w, int64_t r0,
                int64_t c0, bool partners, bool drop_diagonal) {
  at::parallel_for(0, h, std::max<int64_t>(1, kEntriesPerThread / std::max<int64_t>(1, w)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t i = begin; i < end; ++i) {
                       const int64_t t = r0 + i;
                       double* d = best_d + t * k;
                       int64_t* idx = best_i + t * k;
                       const double* row = m + i * w;
                       // (with partners, entries below the diagonal are mirrors: not read)
                       const int64_t first = partners ? std::clamp<int64_t>(t - c0, 0, w) : 0;
                       for (int64_t j = first; j < w; ++j) {
                         const double v = row[j];
                         const int64_t c = c0 + j;
                         if (v < kInf && before(v, c, d[k - 1], idx[k - 1]) && !(drop_diagonal && c == t)) {
                           insert(d, idx, k, v, c);
                         }
                       }
                     }
                   });
}

// Rows c0 + j take the mirrors (c0 + j, r0 + i, m[i, j]) of the entries above
// the diagonal in their column of the block, a chunk of columns per thread
// reading the block row by row.
void merge_columns(double* best_d, int64_t* best_i, int64_t k, const double* m, int64_t h, int64_t w, int64_t r0,
                   int64_t c0) {
  const int64_t chunks = (w + kColumnChunk - 1) / kColumnChunk;
  const int64_t grain = std::max<int64_t>(1, kEntriesPerThread / std::max<int64_t>(1, h * kColumnChunk));
  at::parallel_for(0, chunks, grain, [&](int64_t begin, int64_t end) {
    double last_d[kColumnChunk];
    int64_t last_i[kColumnChunk];
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const int64_t j0 = chunk * kColumnChunk, j1 = std::min(w, j0 + kColumnChunk);
      for (int64_t j = j0; j < j1; ++j) {
        last_d[j - j0] = best_d[(c0 + j) * k + k - 1];
        last_i[j - j0] = best_i[(c0 + j) * k + k - 1];
      }
      for (int64_t i = 0; i < h; ++i) {
        const int64_t r = r0 + i;
        const double* row = m + i * w;
        for (int64_t j = std::max(j0, r - c0 + 1); j < j1; ++j) {  // (c > r: above the diagonal)
          const double v = row[j];
          if (v < kInf && before(v, r, last_d[j - j0], last_i[j - j0])) {
            const int64_t t = c0 + j;
            insert(best_d + t * k, best_i + t * k, k, v, r);
            last_d[j - j0] = best_d[t * k + k - 1];
            last_i[j - j0] = best_i[t * k + k - 1];
          }
        }
      }
    }
  });
}

}  // namespace

void knn_merge_dense_cpu(const at::Tensor& best_d, const at::Tensor& best_i, const at::Tensor& block_in,
                         int64_t row0, int64_t col0, bool partners, bool drop_diagonal) {
  for (const at::Tensor* t : {&best_d, &best_i, &block_in}) {
    BEDL_CHECK_VALUE(t->device().is_cpu() && t->layout() == at::kStrided,
                     "best_d, best_i and block must be dense CPU tensors");
    BEDL_CHECK_VALUE(t->dim() == 2, "best_d, best_i and block must be 2-D, got shapes ", best_d.sizes(), ", ",
                     best_i.sizes(), " and ", block_in.sizes());
  }
  BEDL_CHECK_TYPE(best_d.scalar_type() == at::kDouble, "best_d must be float64, got ", best_d.scalar_type());
  BEDL_CHECK_TYPE(best_i.scalar_type() == at::kLong, "best_i must be int64, got ", best_i.scalar_type());
  BEDL_CHECK_TYPE(block_in.scalar_type() == at::kDouble, "block must be float64, got ", block_in.scalar_type());
  BEDL_CHECK_VALUE(best_d.sizes() == best_i.sizes(), "best_d and best_i must be (rows, k) of one shape, got ",
                   best_d.sizes(), " and ", best_i.sizes());
  BEDL_CHECK_VALUE(best_d.is_contiguous() && best_i.is_contiguous(),
                   "best_d and best_i must be contiguous (they are written in place)");
  const int64_t n = best_d.size(0), k = best_d.size(1), h = block_in.size(0), w = block_in.size(1);
  BEDL_CHECK_VALUE(row0 >= 0 && row0 + h <= n, "the block's rows ", row0, " .. ", row0 + h, " are not rows of the ",
                   n, " lists");
  BEDL_CHECK_VALUE(col0 >= 0, "col0 must be >= 0, got ", col0);
  BEDL_CHECK_VALUE(!partners || col0 + w <= n, "with partners the block's columns ", col0, " .. ", col0 + w,
                   " must be rows of the ", n, " lists");
  if (k == 0 || h == 0 || w == 0) return;
  const at::Tensor block = block_in.contiguous();
  BEDL_CHECK_VALUE(!block.isnan().any().item<bool>(), "block holds NaN (a distance must be a number or +inf)");
  double* d = best_d.data_ptr<double>();
  int64_t* idx = best_i.data_ptr<int64_t>();
  const double* m = block.data_ptr<double>();
  // (two passes: a row of the block may also be one of its columns' targets)
  if (partners) merge_columns(d, idx, k, m, h, w, row0, col0);
  merge_rows(d, idx, k, m, h, w, row0, col0, partners, drop_diagonal);
}

}  // namespace bedl
