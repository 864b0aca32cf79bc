// Sequence edit distances under unit costs between the labels themselves,
// without a symbol table: a label matches only an equal label, every other
// replacement, deletion and insertion costs 1. Bit vectors (unit_bits.h) over
// any alphabet, so that a large vocabulary needs neither a table nor tiles.
#include <algorithm>

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

}  // namespace

at::Tensor sed_unit_cpu(const at::Tensor& x_labels_in, const at::Tensor& x_ptr_in, const at::Tensor& y_labels_in,
                        const at::Tensor& y_ptr_in, const at::Tensor& pair_x_in, const at::Tensor& pair_y_in) {
  dp::check_label_indices(x_labels_in, x_ptr_in, y_labels_in, y_ptr_in, pair_x_in, pair_y_in);
  const at::Tensor x_labels = x_labels_in.contiguous(), y_labels = y_labels_in.contiguous();
  const at::Tensor x_ptr = x_ptr_in.contiguous(), y_ptr = y_ptr_in.contiguous();
  const at::Tensor pair_x = pair_x_in.contiguous(), pair_y = pair_y_in.contiguous();
  const int64_t nx = dp::check_ptr(x_ptr, "x_ptr", x_labels.size(0), "labels");
  const int64_t ny = dp::check_ptr(y_ptr, "y_ptr", y_labels.size(0), "labels");
  const int64_t batch = pair_x.size(0);
  const int64_t *px = pair_x.data_ptr<int64_t>(), *py = pair_y.data_ptr<int64_t>();
  dp::check_pair_indices(px, py, batch, nx, ny, "sequence");
  const int64_t symbols = std::max(label_extent(x_labels, "x_labels"), label_extent(y_labels, "y_labels"));
  const sed::UnitTable unit = sed::UnitTable::labels_match_themselves();
  const int64_t *xl = x_labels.data_ptr<int64_t>(), *yl = y_labels.data_ptr<int64_t>();
  const int64_t *xp = x_ptr.data_ptr<int64_t>(), *yp = y_ptr.data_ptr<int64_t>();
  at::Tensor dist = at::empty({batch}, x_labels.options());
  int64_t* d = dist.data_ptr<int64_t>();
  // (the scheduler's cells per pair as the symbol-table kernel's bit-vector path counts them)
  const int64_t cells = sed::unit_piece_cells(longest(xp, nx), longest(yp, ny));
  dp::for_each_piece<sed::UnitWorkspace>(batch, cells, [&](int64_t begin, int64_t end, sed::UnitWorkspace& ws) {
    sed::unit_distances(
        unit, symbols + 1, symbols + 1, begin, end,
        [&](int64_t b) {
          const int64_t tx = px[b], ty = py[b];
          return sed::UnitPair{xl + xp[tx], xp[tx + 1] - xp[tx], yl + yp[ty], yp[ty + 1] - yp[ty]};
        },
        [&](int64_t b, int64_t v) { d[b] = v; }, ws);
  });
  return dist;
}

}  // namespace bedl
