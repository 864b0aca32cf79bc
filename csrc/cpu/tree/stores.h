// Where the counting passes of one tree pair keep each needed table's
// co-optimal flags and inside counts: per-thread stores up to a memory bound,
// read in place by the later passes; past the bound, the current table's
// arrays (and the table is computed again where it is read).
#pragma once

#include <cstdint>
#include <optional>

#include "pair.h"

namespace bedl {
namespace ted {

// Flags of the needed tables, kept for the counting and outside passes.
constexpr size_t kFlagStoreLimit = size_t{1} << 26;
// Inside counts of the needed tables (16 MB per thread beside the flags): the
// outside pass reads them again in reverse order; the tables past the bound
// are counted again.
constexpr size_t kCountStoreLimit = size_t{1} << 24;

// Where table (kx, ky)'s flags go: the flag store, where they fit under
// kFlagStoreLimit, else the current table's array.
template <typename Count>
Cells<uint8_t> flags_for(TreePair<Count>& p, int64_t kx, int64_t ky, size_t pair_index) {
  TedWorkspace& ws = p.ws;
  const ForestTable t = p.table(kx, ky);
  const int64_t fw = ky - t.c0 + 1;
  const int64_t size = (kx - t.r0 + 1) * fw;
  if (ws.flags_used + size > static_cast<int64_t>(kFlagStoreLimit)) {
    return {ws.coopt.data() + t.r0 * p.w + t.c0, p.w, t.r0, t.c0};
  }
  ws.flag_offset[pair_index] = ws.flags_used;
  ws.flags_used += size;
  if (static_cast<int64_t>(ws.flag_store.size()) < ws.flags_used) ws.flag_store.resize(ws.flags_used);
  return {ws.flag_store.data() + ws.flag_offset[pair_index], fw, t.r0, t.c0};
}

// Table (a, b)'s kept flags, if any.
template <typename Count>
std::optional<Cells<const uint8_t>> kept_flags(const TreePair<Count>& p, size_t a, size_t b) {
  const int64_t off = p.ws.flag_offset[a * p.y.keyroots.size() + b];
  if (off < 0) return std::nullopt;
  const ForestTable t = p.table(p.x.keyroots[a], p.y.keyroots[b]);
  return Cells<const uint8_t>{p.ws.flag_store.data() + off, t.ky - t.c0 + 1, t.r0, t.c0};
}

// The current table's count arrays, for table (kx, ky).
template <typename Count>
CountCells<Count> table_counts(TreePair<Count>& p, int64_t kx, int64_t ky) {
  const ForestTable t = p.table(kx, ky);
  const int64_t corner = t.r0 * p.w + t.c0;
  return {{p.cnt.tot.data() + corner, p.w, t.r0, t.c0}, {p.cnt.in_other.data() + corner, p.w, t.r0, t.c0}};
}

// The counts kept at `off` for a table of width fw and corner (r0, c0): rows
// of all and of not-by-deletion counts in turn.
template <typename Count>
CountCells<Count> kept_counts_at(TreePair<Count>& p, int64_t off, int64_t fw, int64_t r0, int64_t c0) {
  Count* base = p.cnt.kept.data() + off;
  return {{base, 2 * fw, r0, c0}, {base + fw, 2 * fw, r0, c0}};
}

// Where table (kx, ky)'s inside counts go: the count store, where they fit
// under kCountStoreLimit, else the current table's arrays.
template <typename Count>
CountCells<Count> counts_for(TreePair<Count>& p, int64_t kx, int64_t ky, size_t pair_index) {
  CountBuffers<Count>& cnt = p.cnt;
  const ForestTable t = p.table(kx, ky);
  const int64_t fw = ky - t.c0 + 1;
  const int64_t size = 2 * (kx - t.r0 + 1) * fw;
  if ((cnt.kept_used + size) * static_cast<int64_t>(sizeof(Count)) > static_cast<int64_t>(kCountStoreLimit)) {
    return table_counts(p, kx, ky);
  }
  cnt.kept_offset[pair_index] = cnt.kept_used;
  cnt.kept_used += size;
  if (static_cast<int64_t>(cnt.kept.size()) < cnt.kept_used) cnt.kept.resize(cnt.kept_used);
  return kept_counts_at(p, cnt.kept_offset[pair_index], fw, t.r0, t.c0);
}

// The number of co-optimal mappings: the final table's last count, kept or in
// the current table's arrays.
template <typename Count>
Count final_total(TreePair<Count>& p) {
  const int64_t off = p.cnt.kept_offset.back();
  if (off < 0) return p.cnt.tot[p.x.n * p.w + p.y.n];
  const ForestTable t = p.table(p.x.n, p.y.n);
  return kept_counts_at(p, off, p.y.n - t.c0 + 1, t.r0, t.c0).total.at(p.x.n, p.y.n);
}

}  // namespace ted
}  // namespace bedl
