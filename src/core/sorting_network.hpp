// Sorting networks made at compile time for the rank filters: Batcher's
// odd-even merge sort of the next power of two (padding values that hold
// +infinity never move, so exchanges touching them are dropped), pruned to
// the exchanges that the wanted output positions depend on, and of those to
// the half (minimum or maximum) that is read later. Exact: a network moves
// values, never computes any. Plain constexpr code, for the CPU and CUDA
// kernels alike.
#pragma once
#include <cstdint>

namespace gpufilt {

struct Exchange {
  int32_t lo, hi;  // lo < hi: lo gets the minimum, hi the maximum
  bool keep_min, keep_max;
};

struct ExchangeList {
  static constexpr int kMaxTaps = 128;   // beyond, other algorithms
  static constexpr int kCapacity = 1536; // Batcher's 128-input sort has 1471
  Exchange items[kCapacity] = {};
  int count = 0;
};

// The exchanges, in the order they run, after which positions [first, last]
// of `taps` values hold the values of those ranks (0-based). Empty for
// arguments out of range.
constexpr ExchangeList sorting_exchanges(int taps, int first, int last) {
  ExchangeList all, kept;
  if (taps < 1 || taps > ExchangeList::kMaxTaps || first < 0 || last < first || last >= taps) return kept;
  int n = 1;
  while (n < taps) n *= 2;
  for (int p = 1; p < n; p *= 2)
    for (int k = p; k >= 1; k /= 2)
      for (int j = k % p; j + k < n; j += 2 * k)
        for (int i = 0; i < (k < n - j - k ? k : n - j - k); ++i)
          if ((i + j) / (2 * p) == (i + j + k) / (2 * p) && i + j + k < taps)
            all.items[all.count++] = {i + j, i + j + k, false, false};
  bool needed[ExchangeList::kMaxTaps] = {};
  for (int r = first; r <= last; ++r) needed[r] = true;
  for (int x = all.count - 1; x >= 0; --x) {  // backwards: what the wanted positions depend on
    Exchange e = all.items[x];
    e.keep_min = needed[e.lo];
    e.keep_max = needed[e.hi];
    if (e.keep_min || e.keep_max) {
      needed[e.lo] = needed[e.hi] = true;
      kept.items[kept.count++] = e;
    }
  }
  for (int x = 0; x < kept.count / 2; ++x) {  // back in the order they run
    const Exchange e = kept.items[x];
    kept.items[x] = kept.items[kept.count - 1 - x];
    kept.items[kept.count - 1 - x] = e;
  }
  return kept;
}

}  // namespace gpufilt
