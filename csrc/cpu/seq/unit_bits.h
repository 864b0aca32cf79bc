// Sequence edit distances where every replacement costs 0 or 1 and every
// deletion and insertion 1 (unit costs, and 0/1 tables that let several
// symbols match): the DP table's columns as bit vectors of their +1 and -1
// steps, 64 rows a word (Myers' bit-vector algorithm in Hyyrö's form for the
// global distance). The distance is an integer, which the DP's sums of 0s and
// 1s give exactly too: the same bits.
#pragma once

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "../inputs.h"
#include "../parallel.h"

namespace bedl {
namespace sed {

// Whether a symbol table qualifies, and where its zeros are. Table layout as
// the symbol-table kernels read it: x's symbols are rows, y's columns, the
// last row and column the gap (their shared corner unused).
struct UnitTable {
  bool applies = false;
  // Unit costs between the labels themselves (no table): a label matches only itself.
  bool identity = false;
  // Otherwise replacing row symbol r by column symbol c costs 0: c in
  // row_zeros[row_begin[r] .. row_begin[r + 1]), r in the column's list alike.
  std::vector<int64_t> row_begin, row_zeros, col_begin, col_zeros;

  // A distances-only call's table (applies: false where the fast paths are
  // off). A label that is the gap itself (unknown="gap": deleting it costs
  // the unused corner) keeps the DP.
  static UnitTable of(const dp::SymbolInputs& in) {
    if (!dp::simd_switch().load(std::memory_order_relaxed)) return {};
    if (contains(in.x_labels, in.rows - 1) || contains(in.y_labels, in.cols - 1)) return {};
    UnitTable u;
    AT_DISPATCH_FLOATING_TYPES(in.table.scalar_type(), "unit_table",
                               [&] { u = scan(in.table.data_ptr<scalar_t>(), in.rows, in.cols); });
    return u;
  }

  // Unit costs between the labels themselves (labels 0 .. symbols - 1 on both
  // sides, table_rows = table_cols = symbols + 1 for unit_distance).
  static UnitTable labels_match_themselves() {
    UnitTable u;
    u.applies = u.identity = true;
    return u;
  }

 private:
  template <typename scalar_t>
  static UnitTable scan(const scalar_t* t, int64_t rows, int64_t cols) {
    UnitTable u;
    const int64_t R = rows - 1, C = cols - 1;  // symbols on each side
    for (int64_t r = 0; r < R; ++r) {
      if (t[r * cols + C] != scalar_t(1)) return u;
    }
    for (int64_t c = 0; c < C; ++c) {
      if (t[R * cols + c] != scalar_t(1)) return u;
    }
    std::vector<int64_t> col_count(C + 1, 0);
    u.row_begin.assign(R + 1, 0);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t c = 0; c < C; ++c) {
        const scalar_t v = t[r * cols + c];
        if (v == scalar_t(0)) {
          u.row_zeros.push_back(c);
          ++col_count[c + 1];
        } else if (v != scalar_t(1)) {
          return UnitTable{};
        }
      }
      u.row_begin[r + 1] = static_cast<int64_t>(u.row_zeros.size());
    }
    u.col_begin.assign(C + 1, 0);
    for (int64_t c = 0; c < C; ++c) u.col_begin[c + 1] = u.col_begin[c] + col_count[c + 1];
    u.col_zeros.resize(u.row_zeros.size());
    std::vector<int64_t> fill(u.col_begin.begin(), u.col_begin.end() - 1);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t k = u.row_begin[r]; k < u.row_begin[r + 1]; ++k) u.col_zeros[fill[u.row_zeros[k]]++] = r;
    }
    u.applies = true;
    return u;
  }
  static bool contains(const at::Tensor& labels, int64_t value) {
    const int64_t* p = labels.data_ptr<int64_t>();
    return std::find(p, p + labels.numel(), value) != p + labels.numel();
  }
};

// A thread's buffers, reused across pairs.
struct UnitWorkspace {
  std::vector<uint64_t> peq;      // per distinct text symbol: the pattern positions it matches, `words` words
  std::vector<int64_t> slot;      // text symbol -> its peq slot (-1: none yet); sized to the symbols
  std::vector<int64_t> touched;   // symbols whose slot is set (reset after the pair)
  std::vector<uint64_t> vp, vn;   // the current column's +1 and -1 steps
  std::vector<uint64_t> eq_of;    // text symbol -> a run's shared pattern's masks, eq_words each (else 0)
  std::vector<uint8_t> eq_marked; // text symbol -> whether it is in eq_set
  std::vector<int64_t> eq_set;    // symbols whose eq_of is set (cleared after the run)
  int64_t eq_words = 1;
};

// One word of a text symbol's column step (Hyyro): vp and vn, the word's
// rows' +1 and -1 vertical steps, updated in place; carry, hp_in and hn_in
// pass from the word below to the word above (the sum's carry and the
// horizontal steps shifted in; below the lowest word 0, 1 and 0: row 0 steps
// by +1). hp and hn: the word's horizontal steps before the shift (those of
// the pattern's last row move the score).
inline void column_word(uint64_t eq, uint64_t& vp, uint64_t& vn, uint64_t& carry, uint64_t& hp_in, uint64_t& hn_in,
                        uint64_t& hp, uint64_t& hn) {
  const uint64_t a = eq & vp;
  const uint64_t s1 = a + vp;
  const uint64_t s2 = s1 + carry;
  carry = static_cast<uint64_t>(s1 < a) | static_cast<uint64_t>(s2 < s1);
  const uint64_t d0 = (s2 ^ vp) | eq | vn;
  hp = vn | ~(d0 | vp);
  hn = vp & d0;
  const uint64_t hp_shifted = (hp << 1) | hp_in, hn_shifted = (hn << 1) | hn_in;
  hp_in = hp >> 63;
  hn_in = hn >> 63;
  vp = hn_shifted | ~(d0 | hp_shifted);
  vn = hp_shifted & d0;
}

// The score's move at the pattern's last row (`last`: its bit) from a
// column's horizontal steps hp and hn.
inline int64_t last_row_move(uint64_t hp, uint64_t hn, uint64_t last) {
  return static_cast<int64_t>((hp & last) != 0) - static_cast<int64_t>((hn & last) != 0);
}

// The edit distance of x (m symbols, table rows) and y (n symbols, table
// columns) under a qualifying table u. The shorter sequence is the pattern
// (one bit per symbol); the other is read a symbol at a time.
inline int64_t unit_distance(const UnitTable& u, int64_t table_rows, int64_t table_cols, const int64_t* x,
                             int64_t m, const int64_t* y, int64_t n, UnitWorkspace& ws) {
  if (m == 0) return n;
  if (n == 0) return m;
  const bool x_pattern = m <= n;
  const int64_t plen = x_pattern ? m : n, tlen = x_pattern ? n : m;
  const int64_t* pattern = x_pattern ? x : y;
  const int64_t* text = x_pattern ? y : x;
  // Text symbols are y's (columns) where x is the pattern, else x's (rows).
  const int64_t text_symbols = x_pattern ? table_cols - 1 : table_rows - 1;
  const int64_t words = (plen + 63) / 64;
  if (static_cast<int64_t>(ws.slot.size()) < text_symbols) ws.slot.assign(text_symbols, -1);
  ws.peq.clear();
  ws.touched.clear();
  for (int64_t t = 0; t < tlen; ++t) {
    const int64_t s = text[t];
    if (ws.slot[s] < 0) {
      ws.slot[s] = static_cast<int64_t>(ws.touched.size());
      ws.touched.push_back(s);
    }
  }
  ws.peq.assign(ws.touched.size() * words, 0);
  // Pattern position p matches text symbol s where replacing one by the other costs 0.
  const std::vector<int64_t>& begin = x_pattern ? u.row_begin : u.col_begin;
  const std::vector<int64_t>& zeros = x_pattern ? u.row_zeros : u.col_zeros;
  for (int64_t p = 0; p < plen; ++p) {
    const int64_t sym = pattern[p];
    const uint64_t bit = uint64_t{1} << (p % 64);
    if (u.identity) {
      const int64_t sl = ws.slot[sym];
      if (sl >= 0) ws.peq[sl * words + p / 64] |= bit;
      continue;
    }
    for (int64_t k = begin[sym]; k < begin[sym + 1]; ++k) {
      const int64_t sl = ws.slot[zeros[k]];
      if (sl >= 0) ws.peq[sl * words + p / 64] |= bit;
    }
  }
  int64_t score = plen;  // the column's last entry: D(pattern, text[0 .. t))
  const uint64_t last_bit = uint64_t{1} << ((plen - 1) % 64);
  uint64_t hp = 0, hn = 0;
  if (words == 1) {  // (most sequences: one word, its vectors in registers)
    uint64_t vp = ~uint64_t{0}, vn = 0;
    for (int64_t t = 0; t < tlen; ++t) {
      uint64_t carry = 0, hp_in = 1, hn_in = 0;
      column_word(ws.peq[ws.slot[text[t]]], vp, vn, carry, hp_in, hn_in, hp, hn);
      score += last_row_move(hp, hn, last_bit);
    }
  } else {
    ws.vp.assign(words, ~uint64_t{0});
    ws.vn.assign(words, 0);
    for (int64_t t = 0; t < tlen; ++t) {
      const uint64_t* eq = ws.peq.data() + ws.slot[text[t]] * words;
      uint64_t carry = 0, hp_in = 1, hn_in = 0;
      for (int64_t w = 0; w < words; ++w) column_word(eq[w], ws.vp[w], ws.vn[w], carry, hp_in, hn_in, hp, hn);
      score += last_row_move(hp, hn, last_bit);  // (the last word's)
    }
  }
  for (int64_t s : ws.touched) ws.slot[s] = -1;
  return score;
}

// One step of a one-word pattern's column (column_word with nothing carried
// in from below): vp and vn updated in place, score moved by the last row's
// horizontal step (`last`: the pattern's last bit).
inline void word_step(uint64_t eq, uint64_t& vp, uint64_t& vn, uint64_t last, int64_t& score) {
  uint64_t carry = 0, hp_in = 1, hn_in = 0, hp, hn;
  column_word(eq, vp, vn, carry, hp_in, hn_in, hp, hn);
  score += last_row_move(hp, hn, last);
}

#ifdef BEDL_X86_SIMD
// `steps` steps of four one-word chains (texts text[l], states vp[l], vn[l],
// score[l]) in one AVX2 vector of 64-bit lanes: word_step's operations on
// each lane, so the same integers.
__attribute__((target("avx2"))) inline void word_steps_avx2(const uint64_t* eq_of, const int64_t* const* text,
                                                            int64_t steps, uint64_t last, uint64_t* vp, uint64_t* vn,
                                                            int64_t* score) {
  __m256i VP = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(vp));
  __m256i VN = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(vn));
  __m256i S = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(score));
  const __m256i ones = _mm256_set1_epi64x(-1), one = _mm256_set1_epi64x(1);
  const __m256i L = _mm256_set1_epi64x(static_cast<long long>(last));
  const int64_t *t0 = text[0], *t1 = text[1], *t2 = text[2], *t3 = text[3];
  for (int64_t t = 0; t < steps; ++t) {
    const __m256i eq = _mm256_set_epi64x(static_cast<long long>(eq_of[t3[t]]), static_cast<long long>(eq_of[t2[t]]),
                                         static_cast<long long>(eq_of[t1[t]]), static_cast<long long>(eq_of[t0[t]]));
    const __m256i d0 =
        _mm256_or_si256(_mm256_or_si256(_mm256_xor_si256(_mm256_add_epi64(_mm256_and_si256(eq, VP), VP), VP), eq), VN);
    const __m256i hp = _mm256_or_si256(VN, _mm256_xor_si256(_mm256_or_si256(d0, VP), ones));
    const __m256i hn = _mm256_and_si256(VP, d0);
    // (a lane's comparison is -1 where its last bit is set: +1 for hp, -1 for hn)
    S = _mm256_sub_epi64(S, _mm256_cmpeq_epi64(_mm256_and_si256(hp, L), L));
    S = _mm256_add_epi64(S, _mm256_cmpeq_epi64(_mm256_and_si256(hn, L), L));
    const __m256i hp_shifted = _mm256_or_si256(_mm256_slli_epi64(hp, 1), one);
    const __m256i hn_shifted = _mm256_slli_epi64(hn, 1);
    VP = _mm256_or_si256(hn_shifted, _mm256_xor_si256(_mm256_or_si256(d0, hp_shifted), ones));
    VN = _mm256_and_si256(hp_shifted, d0);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(vp), VP);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(vn), VN);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(score), S);
}

// `steps` steps of four chains of a pattern of `words` words (texts text[l],
// states vp[w * 4 + l] and vn[w * 4 + l], scores score[l]) in AVX2 vectors of
// 64-bit lanes, word by word from the lowest: column_word's operations on
// each lane (its unsigned carries as comparisons with the sign bit flipped),
// so the same integers. `last`: the pattern's last bit in its last word.
__attribute__((target("avx2"))) inline void words_steps_avx2(const uint64_t* eq_of, int64_t words,
                                                             const int64_t* const* text, int64_t steps, uint64_t last,
                                                             uint64_t* vp, uint64_t* vn, int64_t* score) {
  __m256i S = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(score));
  const __m256i ones = _mm256_set1_epi64x(-1), one = _mm256_set1_epi64x(1);
  const __m256i sign = _mm256_set1_epi64x(static_cast<long long>(uint64_t{1} << 63));
  const __m256i L = _mm256_set1_epi64x(static_cast<long long>(last));
  const int64_t *t0 = text[0], *t1 = text[1], *t2 = text[2], *t3 = text[3];
  for (int64_t t = 0; t < steps; ++t) {
    const uint64_t *e0 = eq_of + t0[t] * words, *e1 = eq_of + t1[t] * words;
    const uint64_t *e2 = eq_of + t2[t] * words, *e3 = eq_of + t3[t] * words;
    __m256i carry = _mm256_setzero_si256(), hp_in = one, hn_in = _mm256_setzero_si256();
    __m256i hp = _mm256_setzero_si256(), hn = _mm256_setzero_si256();
    for (int64_t w = 0; w < words; ++w) {
      __m256i* vpw = reinterpret_cast<__m256i*>(vp + 4 * w);
      __m256i* vnw = reinterpret_cast<__m256i*>(vn + 4 * w);
      const __m256i VP = _mm256_loadu_si256(vpw), VN = _mm256_loadu_si256(vnw);
      const __m256i eq = _mm256_set_epi64x(static_cast<long long>(e3[w]), static_cast<long long>(e2[w]),
                                           static_cast<long long>(e1[w]), static_cast<long long>(e0[w]));
      const __m256i a = _mm256_and_si256(eq, VP);
      const __m256i s1 = _mm256_add_epi64(a, VP);
      const __m256i s2 = _mm256_add_epi64(s1, carry);
      // (s1 < a) | (s2 < s1), unsigned: signed comparisons of the values with the sign bit flipped
      const __m256i c1 = _mm256_cmpgt_epi64(_mm256_xor_si256(a, sign), _mm256_xor_si256(s1, sign));
      const __m256i c2 = _mm256_cmpgt_epi64(_mm256_xor_si256(s1, sign), _mm256_xor_si256(s2, sign));
      carry = _mm256_and_si256(_mm256_or_si256(c1, c2), one);
      const __m256i d0 = _mm256_or_si256(_mm256_or_si256(_mm256_xor_si256(s2, VP), eq), VN);
      hp = _mm256_or_si256(VN, _mm256_xor_si256(_mm256_or_si256(d0, VP), ones));
      hn = _mm256_and_si256(VP, d0);
      const __m256i hp_shifted = _mm256_or_si256(_mm256_slli_epi64(hp, 1), hp_in);
      const __m256i hn_shifted = _mm256_or_si256(_mm256_slli_epi64(hn, 1), hn_in);
      hp_in = _mm256_srli_epi64(hp, 63);
      hn_in = _mm256_srli_epi64(hn, 63);
      _mm256_storeu_si256(vpw, _mm256_or_si256(hn_shifted, _mm256_xor_si256(_mm256_or_si256(d0, hp_shifted), ones)));
      _mm256_storeu_si256(vnw, _mm256_and_si256(hp_shifted, d0));
    }
    // (a lane's comparison is -1 where its last bit is set: +1 for hp, -1 for hn)
    S = _mm256_sub_epi64(S, _mm256_cmpeq_epi64(_mm256_and_si256(hp, L), L));
    S = _mm256_add_epi64(S, _mm256_cmpeq_epi64(_mm256_and_si256(hn, L), L));
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(score), S);
}
#endif

// Whether unit_run steps its four chains (of one word or several) in AVX2 vectors: the
// AVX2 paths are on (dp::simd_avx2) and BEDL_TORCH_UNIT_AVX2 is not "0"
// (read once; the tests run the scalar chains in a process that sets it).
inline bool unit_avx2() {
  static const bool allowed = [] {
    const char* v = std::getenv("BEDL_TORCH_UNIT_AVX2");
    return v == nullptr || std::string(v) != "0";
  }();
  return allowed && dp::simd_avx2();
}

// x (m symbols, table rows) as the pattern of a run of pairs, `words` =
// ceil(m / 64) words a symbol: eq_of[s * words + w] holds the positions
// 64 w .. 64 w + 63 of x that text symbol s (a table column) matches at
// cost 0. clear_pattern restores eq_of to zeros.
inline void set_pattern(const UnitTable& u, int64_t text_symbols, const int64_t* x, int64_t m, UnitWorkspace& ws) {
  const int64_t words = (m + 63) / 64;
  if (static_cast<int64_t>(ws.eq_of.size()) < text_symbols * words) ws.eq_of.assign(text_symbols * words, 0);
  if (static_cast<int64_t>(ws.eq_marked.size()) < text_symbols) ws.eq_marked.assign(text_symbols, 0);
  ws.eq_words = words;
  auto mark = [&](int64_t s, int64_t p) {
    if (!ws.eq_marked[s]) {
      ws.eq_marked[s] = 1;
      ws.eq_set.push_back(s);
    }
    ws.eq_of[s * words + p / 64] |= uint64_t{1} << (p % 64);
  };
  for (int64_t p = 0; p < m; ++p) {
    if (u.identity) {
      mark(x[p], p);
      continue;
    }
    for (int64_t k = u.row_begin[x[p]]; k < u.row_begin[x[p] + 1]; ++k) mark(u.row_zeros[k], p);
  }
}
inline void clear_pattern(UnitWorkspace& ws) {
  for (int64_t s : ws.eq_set) {
    std::fill_n(ws.eq_of.begin() + s * ws.eq_words, ws.eq_words, uint64_t{0});
    ws.eq_marked[s] = 0;
  }
  ws.eq_set.clear();
}

// Whether a run against x of m symbols keeps its masks within a thread's
// budget (words per text symbol, all text symbols): else pairs go one by one.
constexpr int64_t kRunMaskWords = int64_t{1} << 21;  // 16 MB
inline bool run_fits(int64_t m, int64_t text_symbols) {
  return m >= 1 && ((m + 63) / 64) * text_symbols <= kRunMaskWords;
}

// A text: its symbols (table columns) and their count.
struct UnitText {
  const int64_t* symbols;
  int64_t n;
};

// Distances of the pattern set in ws (m symbols, kOneWord: m <= 64) against
// texts text_of(k), k < count, into out(k, distance). A step's dozen
// dependent operations a word keep one chain from filling the core, so four
// texts run as independent chains, each lane taking the next text as its
// own ends (the same integers as unit_distance).
template <bool kOneWord, typename TextOf, typename Out>
inline void unit_run(UnitWorkspace& ws, int64_t m, int64_t count, const TextOf& text_of, const Out& out) {
  constexpr int kChains = 4;
  static_assert(kChains == 4, "word_steps_avx2 and words_steps_avx2 step four 64-bit lanes");
  const int64_t words = ws.eq_words;
  const uint64_t* eq_of = ws.eq_of.data();
  const uint64_t last = uint64_t{1} << ((m - 1) % 64);
  const int64_t* text[kChains];
  int64_t left[kChains], score[kChains], who[kChains];
  uint64_t vp1[kChains], vn1[kChains];  // one word: in registers
  if constexpr (!kOneWord) {
    ws.vp.resize(kChains * words);
    ws.vn.resize(kChains * words);
  }
  // (several words: lane l's word w at w * kChains + l, as the AVX2 steps load them)
  uint64_t* vps = ws.vp.data();
  uint64_t* vns = ws.vn.data();
  auto step = [&](int l, int64_t symbol) {
    if constexpr (kOneWord) {
      word_step(eq_of[symbol], vp1[l], vn1[l], last, score[l]);
    } else {
      const uint64_t* eq = eq_of + symbol * words;
      uint64_t carry = 0, hp_in = 1, hn_in = 0, hp = 0, hn = 0;
      for (int64_t w = 0; w < words; ++w)
        column_word(eq[w], vps[w * kChains + l], vns[w * kChains + l], carry, hp_in, hn_in, hp, hn);
      score[l] += last_row_move(hp, hn, last);
    }
  };
  int64_t next = 0;
  // Lane l takes the next non-empty text (an empty one is m deletions); false when none is left.
  auto take = [&](int l) {
    for (; next < count; ++next) {
      const UnitText t = text_of(next);
      if (t.n == 0) {
        out(next, m);
        continue;
      }
      text[l] = t.symbols;
      left[l] = t.n;
      score[l] = m;
      who[l] = next++;
      if constexpr (kOneWord) {
        vp1[l] = ~uint64_t{0};
        vn1[l] = 0;
      } else {
        for (int64_t w = 0; w < words; ++w) {
          vps[w * kChains + l] = ~uint64_t{0};
          vns[w * kChains + l] = 0;
        }
      }
      return true;
    }
    return false;
  };
  [[maybe_unused]] const bool avx2 = unit_avx2();
  int lanes = 0;
  while (lanes < kChains && take(lanes)) ++lanes;
  if (lanes == kChains) {
    for (;;) {
      const int64_t steps = std::min(std::min(left[0], left[1]), std::min(left[2], left[3]));
#ifdef BEDL_X86_SIMD
      if (avx2) {
        if constexpr (kOneWord) {
          word_steps_avx2(eq_of, text, steps, last, vp1, vn1, score);
        } else {
          words_steps_avx2(eq_of, words, text, steps, last, vps, vns, score);
        }
      } else
#endif
      {
        for (int64_t t = 0; t < steps; ++t) {
          if constexpr (kOneWord) {
#pragma GCC unroll 4
            for (int l = 0; l < kChains; ++l) step(l, text[l][t]);
          } else {  // word by word, the four lanes' chains side by side
            const uint64_t* eq[kChains];
            uint64_t carry[kChains], hp_in[kChains], hn_in[kChains], hp[kChains] = {}, hn[kChains] = {};
            for (int l = 0; l < kChains; ++l) {
              eq[l] = eq_of + text[l][t] * words;
              carry[l] = 0, hp_in[l] = 1, hn_in[l] = 0;
            }
            for (int64_t w = 0; w < words; ++w) {
#pragma GCC unroll 4
              for (int l = 0; l < kChains; ++l)
                column_word(eq[l][w], vps[w * kChains + l], vns[w * kChains + l], carry[l], hp_in[l], hn_in[l],
                            hp[l], hn[l]);
            }
            for (int l = 0; l < kChains; ++l)
              score[l] += last_row_move(hp[l], hn[l], last);
          }
        }
      }
      bool all = true;
      for (int l = 0; l < kChains; ++l) {
        text[l] += steps;
        left[l] -= steps;
        if (left[l] > 0) continue;
        out(who[l], score[l]);
        if (all && take(l)) continue;
        all = false;
        left[l] = 0;  // (finished; the others end alone below)
      }
      if (!all) break;
    }
  }
  for (int l = 0; l < lanes; ++l) {
    if (left[l] == 0) continue;
    for (int64_t t = 0; t < left[l]; ++t) step(l, text[l][t]);
    out(who[l], score[l]);
  }
}

// The scheduler's cells per pair (dp::for_each_piece) for bit-vector pairs of
// at most m and n symbols: the DP's cells over 512, so that a piece (16k
// cells) holds runs of tens of pairs even for sequences of 300 symbols (over
// 32, as before, pieces of 5 such pairs left unit_run's four lanes unfilled).
inline int64_t unit_piece_cells(int64_t m, int64_t n) {
  return std::max<int64_t>(1, (m + 1) * (n + 1) / 512);
}

// A pair of a unit-cost batch: x (table rows) and y (table columns).
struct UnitPair {
  const int64_t* x;
  int64_t m;
  const int64_t* y;
  int64_t n;
};

// Distances of pairs pair_of(b), begin <= b < end, into out(b, distance):
// consecutive pairs that share x run against it as their pattern (its masks
// set once, unit_run), pairs whose x is too long for that one by one
// (unit_distance).
template <typename PairOf, typename Out>
inline void unit_distances(const UnitTable& u, int64_t table_rows, int64_t table_cols, int64_t begin, int64_t end,
                           const PairOf& pair_of, const Out& out, UnitWorkspace& ws) {
  for (int64_t b = begin; b < end;) {
    const UnitPair p = pair_of(b);
    if (!run_fits(p.m, table_cols - 1)) {
      out(b, unit_distance(u, table_rows, table_cols, p.x, p.m, p.y, p.n, ws));
      ++b;
      continue;
    }
    int64_t e = b + 1;
    while (e < end) {
      const UnitPair q = pair_of(e);
      if (q.x != p.x || q.m != p.m) break;
      ++e;
    }
    set_pattern(u, table_cols - 1, p.x, p.m, ws);
    auto text_of = [&](int64_t k) {
      const UnitPair q = pair_of(b + k);
      return UnitText{q.y, q.n};
    };
    auto put = [&](int64_t k, int64_t d) { out(b + k, d); };
    if (p.m <= 64) {
      unit_run<true>(ws, p.m, e - b, text_of, put);
    } else {
      unit_run<false>(ws, p.m, e - b, text_of, put);
    }
    clear_pattern(ws);
    b = e;
  }
}

}  // namespace sed
}  // namespace bedl
