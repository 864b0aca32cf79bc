// What one forest-table cell costs on this machine, without the library:
// the Zhang-Shasha distance recurrence on a synthetic H x W table,
//   fd[i][j] = min(fd[i-1][j] + del[i], fd[l(i)-1][l(j)-1] + tdm[i][j], fd[i][j-1] + ins[j]),
// swept in three orders, and the bare insertion chain min(a, left + ins).
// The orders differ in how many independent chains a processor sees at once:
// row by row (one), and groups of R rows on a skew, row r at column s - r in
// step s (R independent cells per step).
//
// Build and run (no torch needed):
//   g++ -O3 -o /tmp/cell_floor benchmarks/cell_floor.cpp && /tmp/cell_floor
// Session 4's numbers and what they mean are in benchmarks/HISTORY.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

struct Table {
  int H, W, w;
  std::vector<double> fd, tdm, ins, del;
  std::vector<long> lx, ly;  // leftmost leaves, 1-based, l(k) <= k

  Table(int h, int width) : H(h), W(width), w(width + 1) {
    fd.assign((H + 1) * w, 0.0);
    tdm.assign((H + 1) * w, 1.0);
    ins.assign(w, 1.0);
    del.assign(H + 1, 1.0);
    lx.resize(H + 1);
    ly.resize(w);
    std::mt19937 gen(1);
    for (int i = 0; i <= H; ++i) lx[i] = std::max(1, i - static_cast<int>(gen() % 3));
    for (int j = 0; j <= W; ++j) ly[j] = std::max(1, j - static_cast<int>(gen() % 3));
  }
};

void rows(Table& t) {
  for (int i = 1; i <= t.H; ++i) {
    const double* jump = t.fd.data() + (t.lx[i] - 1) * t.w - 1;
    double left = t.fd[i * t.w];
    for (int j = 1; j <= t.W; ++j) {
      const double a = t.fd[(i - 1) * t.w + j] + t.del[i];
      const double c = jump[t.ly[j]] + t.tdm[i * t.w + j];
      left = std::min(std::min(a, c), left + t.ins[j]);
      t.fd[i * t.w + j] = left;
    }
  }
}

void chain_only(Table& t) {
  for (int i = 1; i <= t.H; ++i) {
    double left = t.fd[i * t.w];
    for (int j = 1; j <= t.W; ++j) {
      left = std::min(t.fd[(i - 1) * t.w + j] + t.del[i], left + t.ins[j]);
      t.fd[i * t.w + j] = left;
    }
  }
}

template <int R>
void skewed_group(Table& t, int i) {
  double left[R], del_r[R];
  const double* jump[R];
  double* row[R];
  for (int r = 0; r < R; ++r) {
    left[r] = t.fd[(i + r) * t.w];
    del_r[r] = t.del[i + r];
    jump[r] = t.fd.data() + (t.lx[i + r] - 1) * t.w - 1;
    row[r] = t.fd.data() + (i + r) * t.w;
  }
  const double* above = t.fd.data() + (i - 1) * t.w;
  for (int s = 1; s <= t.W + R - 1; ++s) {
    // Last lane first: left[r - 1] still holds the cell above from step s - 1.
#pragma GCC unroll 8
    for (int r = R - 1; r >= 0; --r) {
      const int j = s - r;
      if (j < 1 || j > t.W) continue;
      const double up = r == 0 ? above[j] : left[r > 0 ? r - 1 : 0];
      const double c = jump[r][t.ly[j]] + t.tdm[(i + r) * t.w + j];
      left[r] = std::min(std::min(up + del_r[r], c), left[r] + t.ins[j]);
      row[r][j] = left[r];
    }
  }
}

template <int R>
void skewed(Table& t) {
  int i = 1;
  for (; i + R - 1 <= t.H; i += R) skewed_group<R>(t, i);
  for (; i <= t.H; ++i) skewed_group<1>(t, i);
}

template <typename Fn>
double ns_per_cell(int H, int W, Fn fn) {
  Table t(H, W);
  const long reps = std::max(1L, 20000000L / (H * W));
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (long k = 0; k < reps; ++k) {
      fn(t);
      t.fd[0] = t.fd[H * t.w + W] * 1e-300;  // a dependency between repetitions
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, s / reps / (H * W) * 1e9);
  }
  return best;
}

}  // namespace

int main() {
  std::printf("| table | row by row | 2 rows on a skew | 4 rows on a skew | insertion chain only |\n");
  std::printf("|---|---|---|---|---|\n");
  const int sizes[][2] = {{8, 8}, {30, 30}, {64, 64}};
  for (const auto& hw : sizes) {
    const int H = hw[0], W = hw[1];
    std::printf("| %dx%d | %.2f ns | %.2f ns | %.2f ns | %.2f ns |\n", H, W, ns_per_cell(H, W, rows),
                ns_per_cell(H, W, skewed<2>), ns_per_cell(H, W, skewed<4>), ns_per_cell(H, W, chain_only));
  }
  return 0;
}
