// Kernels for edit distances and co-optimal alignment matrices.
//
// Everything here sees numbers only: padded cost matrices in, distances and
// co-optimal matrices P out. Trees arrive as preorder subtree sizes (node i's
// subtree is nodes i .. i + size[i] - 1), concatenated over a table of trees
// and described by offset ("ptr") tensors, pytorch_scatter style.
//
// Cost layout of pair b with |x| = m, |y| = n inside the padded (B, M1, N1)
// tensor: costs[b, i, j] replaces x_i by y_j (i < m, j < n), costs[b, i, n]
// deletes x_i, costs[b, m, j] inserts y_j; costs[b, m, n] is unused.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <tuple>

namespace bedl {

// Tree edit distance (Zhang-Shasha) for B pairs (x_trees[pair_x[b]], y_trees[pair_y[b]]).
// Returns the distances (B,) and, if need_coopt, P (B, M1, N1) (else an empty tensor).
std::tuple<at::Tensor, at::Tensor> ted_cpu(const at::Tensor& costs,
                                           const at::Tensor& x_sizes,
                                           const at::Tensor& x_ptr,
                                           const at::Tensor& y_sizes,
                                           const at::Tensor& y_ptr,
                                           const at::Tensor& pair_x,
                                           const at::Tensor& pair_y,
                                           bool need_coopt,
                                           double rel_tol);

// The same for costs given as a (rows, cols) symbol cost table (x's labels
// index rows and y's columns, the last row and the last column the gap; a
// whole alphabet's table is square) and a symbol index per node (x_labels,
// concatenated like x_sizes):
// pair b's costs are gathered inside the kernel, never materialised per pair.
// P comes back padded (B, max |x| + 1, max |y| + 1) in the layout above.
std::tuple<at::Tensor, at::Tensor> ted_symbols_cpu(const at::Tensor& symbol_costs,
                                                   const at::Tensor& x_labels,
                                                   const at::Tensor& x_sizes,
                                                   const at::Tensor& x_ptr,
                                                   const at::Tensor& y_labels,
                                                   const at::Tensor& y_sizes,
                                                   const at::Tensor& y_ptr,
                                                   const at::Tensor& pair_x,
                                                   const at::Tensor& pair_y,
                                                   bool need_coopt,
                                                   double rel_tol,
                                                   const std::optional<at::Tensor>& max_distance);

// Sequence edit distance for B pairs of lengths (x_len[b], y_len[b]).
std::tuple<at::Tensor, at::Tensor> sed_cpu(const at::Tensor& costs,
                                           const at::Tensor& x_len,
                                           const at::Tensor& y_len,
                                           bool need_coopt,
                                           double rel_tol);

// Sequence edit distance with symbol-table costs: sequence t of x is
// x_labels[x_ptr[t] .. x_ptr[t + 1]).
std::tuple<at::Tensor, at::Tensor> sed_symbols_cpu(const at::Tensor& symbol_costs,
                                                   const at::Tensor& x_labels,
                                                   const at::Tensor& x_ptr,
                                                   const at::Tensor& y_labels,
                                                   const at::Tensor& y_ptr,
                                                   const at::Tensor& pair_x,
                                                   const at::Tensor& pair_y,
                                                   bool need_coopt,
                                                   double rel_tol,
                                                   const std::optional<at::Tensor>& max_distance);

// Sequence edit distances (int64) under unit costs between the labels
// themselves (a label matches only an equal one; labels >= 0), no table.
at::Tensor sed_unit_cpu(const at::Tensor& x_labels, const at::Tensor& x_ptr, const at::Tensor& y_labels,
                        const at::Tensor& y_ptr, const at::Tensor& pair_x, const at::Tensor& pair_y);

// sed_unit_cpu's distances of the rows row_begin .. row_end - 1 of the (nx, ny)
// matrix in dtype (int64, float64 or float32), computed without pair lists:
// (rows, ny); with `triangle` (nx == ny) the columns from row_begin on,
// (rows, ny - row_begin), only j >= i computed and the square's j < i mirrored.
at::Tensor sed_unit_matrix_cpu(const at::Tensor& x_labels, const at::Tensor& x_ptr, const at::Tensor& y_labels,
                               const at::Tensor& y_ptr, int64_t row_begin, int64_t row_end, bool triangle,
                               at::ScalarType dtype);

// Merges the entries of a dense block of a distance matrix, (row0 + i, col0 + j,
// block[i, j]) for finite values, into each row's k nearest by (distance,
// index): best_d (rows, k) float64 and best_i int64, each row sorted so with
// missing entries (+inf, INT64_MAX) last, are updated in place to the k first
// of their own entries and the block's (which must be other entries). With
// `partners` each entry at col >= row also stands for (col, row) (the entries
// below the diagonal are not read); with `drop_diagonal` entries (i, i) are not
// entries.
void knn_merge_dense_cpu(const at::Tensor& best_d, const at::Tensor& best_i, const at::Tensor& block, int64_t row0,
                         int64_t col0, bool partners, bool drop_diagonal);

// The gradient of sum_b pair_weights[b] * distance_b with respect to the
// (rows, cols) symbol table, for the pairs of ted_symbols_cpu (sed_symbols_cpu): the
// weighted co-optimal matrices summed by (x label, y label), deletions in the
// gap column, insertions in the gap row, without materialising P per pair.
// Same co-optimal sets (tie tolerance, overflow rule) as the distance
// kernels with need_coopt; pairs of weight 0 are skipped. Sums in float64 in
// a fixed order (blocks of consecutive pairs, then block by block): the same
// bits for any thread count. Returns (rows, cols) in the table's dtype.
at::Tensor ted_symbols_grad_cpu(const at::Tensor& symbol_costs,
                                const at::Tensor& x_labels,
                                const at::Tensor& x_sizes,
                                const at::Tensor& x_ptr,
                                const at::Tensor& y_labels,
                                const at::Tensor& y_sizes,
                                const at::Tensor& y_ptr,
                                const at::Tensor& pair_x,
                                const at::Tensor& pair_y,
                                const at::Tensor& pair_weights,
                                double rel_tol);

at::Tensor sed_symbols_grad_cpu(const at::Tensor& symbol_costs,
                                const at::Tensor& x_labels,
                                const at::Tensor& x_ptr,
                                const at::Tensor& y_labels,
                                const at::Tensor& y_ptr,
                                const at::Tensor& pair_x,
                                const at::Tensor& pair_y,
                                const at::Tensor& pair_weights,
                                double rel_tol);

// Distances with each pair's P listed by label pair, for a backward that
// only weights them (weighted_pair_sums_cpu): (distances (B,), ptr (B + 1,),
// entry (E,), value (E,) float64), pair b's sums at [ptr[b], ptr[b + 1]),
// entry a * cols + c (x label a, y label c, the last row and column the gap; listed twice where
// nodes carry the gap as their label). The same P as the
// kernels above with need_coopt. Where the lists could exceed max_entries
// (each pair's room: (distinct x labels + 1)(distinct y labels + 1) - 1),
// only the distances, and ptr, entry and value empty.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> ted_symbols_sums_cpu(
    const at::Tensor& symbol_costs, const at::Tensor& x_labels, const at::Tensor& x_sizes, const at::Tensor& x_ptr,
    const at::Tensor& y_labels, const at::Tensor& y_sizes, const at::Tensor& y_ptr, const at::Tensor& pair_x,
    const at::Tensor& pair_y, double rel_tol, int64_t max_entries);

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> sed_symbols_sums_cpu(
    const at::Tensor& symbol_costs, const at::Tensor& x_labels, const at::Tensor& x_ptr, const at::Tensor& y_labels,
    const at::Tensor& y_ptr, const at::Tensor& pair_x, const at::Tensor& pair_y, double rel_tol,
    int64_t max_entries);

// sum_b pair_weights[b] * (pair b's sums) as a (rows, cols) table of pair_weights'
// dtype, from the lists of ted_symbols_sums_cpu / sed_symbols_sums_cpu;
// summed in float64 pair by pair, in order (the same bits for any thread count).
at::Tensor weighted_pair_sums_cpu(const at::Tensor& sum_ptr, const at::Tensor& sum_entry,
                                  const at::Tensor& sum_value, const at::Tensor& pair_weights, int64_t rows,
                                  int64_t cols);

// Soft (temperature) edit distances: -T log sum_M exp(-cost(M) / T) over all
// valid mappings (trees, the arguments of ted_cpu) or alignments (sequences,
// those of sed_cpu), temperature finite and > 0. Returns the soft distances
// (B,) and, if need_grad, their gradient with respect to the costs, the
// expected alignment under p(M) ~ exp(-cost(M) / T), in the padded cost
// layout (B, M1, N1) (else an empty tensor).
std::tuple<at::Tensor, at::Tensor> ted_soft_cpu(const at::Tensor& costs,
                                                const at::Tensor& x_sizes,
                                                const at::Tensor& x_ptr,
                                                const at::Tensor& y_sizes,
                                                const at::Tensor& y_ptr,
                                                const at::Tensor& pair_x,
                                                const at::Tensor& pair_y,
                                                double temperature,
                                                bool need_grad);

std::tuple<at::Tensor, at::Tensor> sed_soft_cpu(const at::Tensor& costs,
                                                const at::Tensor& x_len,
                                                const at::Tensor& y_len,
                                                double temperature,
                                                bool need_grad);

// The AVX2 kernels (sequence distances four rows at a time, tree distances of
// four pairs at a time) are used where the processor has AVX2 unless turned
// off here; both paths give the same bits. For tests and benchmarks.
void set_simd_enabled(bool on);
bool simd_enabled();

}  // namespace bedl
