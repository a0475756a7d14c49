// Checks cuda/box_select.cuh (the selection of the CUDA separable box
// medians) on the host against std::nth_element, for every box it serves,
// on random windows of 32- and 64-bit order keys: spread, with many ties,
// and with NaNs (the greatest key). Build and run (no GPU needed):
//   g++ -std=c++17 -O2 -fconstexpr-ops-limit=1000000000 -Isrc \
//       -x c++ tests/host/box_select_check.cu -o /tmp/box_select_check && /tmp/box_select_check
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda/box_select.cuh"

using gpufilt::cuda::ColumnMedian;

// Fills `n` keys of one of the value kinds.
template <class V>
void draw(std::mt19937_64& rng, int kind, V* v, int n) {
  for (int i = 0; i < n; ++i) {
    V k = (V)rng();
    if (kind == 1) k = (V)(rng() % 4);                                  // many ties
    if (kind == 2) k = rng() % 5 == 0 ? ~(V)0 : (V)(rng() % 1000);     // NaNs, some
    if (kind == 3) k = rng() % 5 == 0 ? (V)(rng() % 3) : ~(V)0;        // NaNs, mostly
    v[i] = k;
  }
}

// Windows of KX + 1 columns: outputs 0 and 1 of a pair, as the kernel runs it.
template <int KM, int KP, int KX, class V, bool SPLIT_COLUMN = false>
long check(long windows, std::mt19937_64& rng) {
  using M = ColumnMedian<KM, KP, KX, SPLIT_COLUMN>;
  constexpr int rows = M::rows, taps = rows * KX;
  long failures = 0;
  V in[KX + 1][rows], col[KX + 1][rows];
  for (long w = 0; w < windows; ++w) {
    const int kind = (int)(w % 4);
    for (int c = 0; c <= KX; ++c) {
      draw(rng, kind, in[c], rows);
      V held[rows];  // the KM runs, each sorted alone, as the kernel keeps them
      for (int m = 0; m < KM; ++m) {
        V run[KP];
        for (int j = 0; j < KP; ++j) run[j] = in[c][m * KP + j];
        M::sort_run(run);
        for (int j = 0; j < KP; ++j) held[m * KP + j] = run[j];
      }
      M::merge_column(held, col[c]);
      V expect[rows];
      std::copy(in[c], in[c] + rows, expect);
      std::sort(expect, expect + rows);
      failures += !std::equal(expect, expect + rows, col[c]);
    }
    V first, second;
    M::medians([&](int c, V (&v)[rows]) { std::copy(col[c], col[c] + rows, v); }, first, second);
    for (int side = 0; side < 2; ++side) {
      std::vector<V> all;
      for (int c = side; c < side + KX; ++c) all.insert(all.end(), in[c], in[c] + rows);
      std::nth_element(all.begin(), all.begin() + taps / 2, all.end());
      if (all[taps / 2] != (side ? second : first) && ++failures <= 5)
        std::printf("  %dx%dx%d: window %ld side %d: %llu, expected %llu\n", KM, KP, KX, w, side,
                    (unsigned long long)(side ? second : first), (unsigned long long)all[taps / 2]);
    }
  }
  std::printf("%dx%dx%d %2d-bit keys: %ld windows, %ld failures\n", KM, KP, KX, (int)(8 * sizeof(V)), windows, failures);
  return failures;
}

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 1000000;
  std::mt19937_64 rng(12345);
  long failures = 0;
  failures += check<3, 3, 3, uint32_t>(n, rng);
  failures += check<3, 3, 3, uint64_t>(n / 4, rng);
  failures += check<3, 1, 3, uint32_t>(n, rng);
  failures += check<3, 1, 3, uint64_t>(n / 4, rng);
  failures += check<5, 1, 5, uint32_t>(n, rng);
  failures += check<5, 1, 5, uint64_t>(n / 4, rng);
  failures += check<7, 1, 7, uint32_t>(n, rng);
  failures += check<7, 1, 7, uint64_t>(n / 4, rng);
  failures += check<3, 3, 3, int32_t>(n, rng);  // KeyKind::Int: signed keys
  failures += check<3, 3, 3, uint32_t, true>(n, rng);  // column merges by max_by_sum (the CUDA kernel's 3-D boxes)
  failures += check<3, 3, 3, int32_t, true>(n, rng);
  return failures != 0;
}
