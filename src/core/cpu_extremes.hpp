// Minimum, maximum and (float) mean passes of long windows on the CPU, at
// a cost that grows little or not at all with the window, for the line
// passes and the fused chains of cpu_backend.cpp (the short windows there
// compare or add every tap: min_max_rows, window_mean_rows).
//
// Scipy's rule (a running value replaced only by a strictly smaller or
// larger one, from the window's first tap) gives: a window whose first tap
// is NaN gives that NaN; otherwise NaN loses to every number and the first
// of equal values (signed zeros) wins. As in the GPU's min_max.cuh, the
// order "NaN after every number, the earlier of equal values" is
// associative (extreme_of), so the kernels below may regroup a window, and
// the head rule (the window's first tap, if NaN) is applied at the end:
// the results are min_max_rows' to the bit.
//
// * Windows across rows (a pass along an axis other than the most
//   contiguous one, whose taps are rows of cells): van Herk / Gil-Werman,
//   scan_extremes. Outputs go in blocks of `w`; each block's suffix scan
//   (over the rows of its first window) and the running prefix of the next
//   block give every window from two values: about three comparisons an
//   output, each a vector over a row of cells, whatever the size.
// * Windows along one line (the most contiguous axis, cells side by side):
//   doubling, doubled_extremes. Extremes of 2, 4, 8 ... neighbours, each
//   level from the one before in one vector pass; a window is the extreme
//   of two overlapping spans of the largest power of two in it (overlap is
//   harmless: an extreme picks one element). log2(w) + 1 passes.
// * Means: sums of 2, 4, 8 ... neighbours likewise, a window's from those of
//   the powers of two in w (doubled_means along a line, doubled_mean_rows
//   across rows, in one order: the same bits on every path).
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/cpu_isa.hpp"
#include "core/cpu_lines.hpp"
#include "core/separable.hpp"

namespace gpufilt {
namespace cpu {

// Where a pass's taps come from, for the routing rule below.
enum class TapSource {
  Ring,    // the strip chain's ring of rows (L2)
  Memory,  // planes read from memory (the plane chain's march pass), the lanes of a line pass
  Cache,   // rows and lines held in L1/L2 (a plane's passes, lines along the most contiguous axis)
};

// The one routing rule: whether a pass of `kind` over windows of `taps`
// runs on the kernels below. Extremes scan from the size where it measured
// faster than comparing every tap, which depends on where the taps come
// from; means (float sums, up to 32 taps: kFloatWindow) double from 24 taps
// on every path, whose results must agree to the bit. One thread, this
// machine (AMD EPYC, AVX-512), against the tap-by-tap kernels: strip chain
// (minimum_filter1d, float32 4096^2 axis 0) 1.6x at 2, 2.3x at 3, 24x at
// 31; march pass (256^3 axis 0) 1.2x at 3, 0.92-0.94x at 4-6, 1.1x at 9,
// 2x at 15; line-pass lanes (uint8 4096^2 axis 0) 1.0x at 2-3, 1.06x at 5,
// 2x at 31; cached rows and lines (256^3 axis 1, 4096^2 axis -1) 0.41-0.44x
// at 2, 0.94x at 15, 1.3-1.6x at 31. Means, float32: 4096^2 axis 0 1.9x at
// 16 and 31, axis -1 0.78x at 16, 1.08x at 31; 256^3 axis 0 0.85x at 16,
// 1.34x at 31 (benchmarks/RESULTS.md).
inline bool scans_windows(LineKind kind, int64_t taps, TapSource from) {
  switch (kind) {
    case LineKind::Minimum:
    case LineKind::Maximum: return taps >= (from == TapSource::Ring ? 2 : from == TapSource::Memory ? 8 : 16);
    case LineKind::Uniform: return taps >= 24;
    default: return false;
  }
}

// Each selection below is one comparison inside `?:`, as the other kernels
// write theirs: GCC lowers a vector comparison kept in a variable, or two
// masks combined, lane by lane (16 ns an element) in the generic templates
// that the AVX2 and AVX-512 copies inline.

// b if it beats a by scipy's comparison (strictly), else a: the window's
// first tap a and a later value b, or a window's head and the rest's extreme.
template <bool Minimum, class V>
GF_INLINE V plain_extreme(const V& a, const V& b) {
  return (Minimum ? b < a : b > a) ? b : a;
}

// x, or `other` in the lanes where x holds NaN (none, for integers). Floats
// test their bits as integers: x != x is an "unordered" comparison, which
// GCC also runs lane by lane.
template <class V>
GF_INLINE V unless_nan(const V& x, const V& other) {
  if constexpr (std::is_arithmetic_v<V>) {
    return x != x ? other : x;
  } else {
    using E = std::remove_cv_t<std::remove_reference_t<decltype(x[0])>>;
    if constexpr (std::is_integral_v<E>) {
      return x;
    } else {
      using I = std::conditional_t<sizeof(E) == 4, int32_t, int64_t>;
      constexpr I exponent = sizeof(E) == 4 ? (I)0x7f800000 : (I)0x7ff0000000000000;
      constexpr I magnitude = sizeof(E) == 4 ? (I)0x7fffffff : (I)0x7fffffffffffffff;
      const auto bits = load_as<typename Simd<I, sizeof(V)>::V>(&x);
      return (bits & magnitude) > exponent ? other : x;
    }
  }
}

// The first of a and b (a before b) by the associative order: NaN after
// every number, the earlier of equal values. A NaN a gives b (NaN or not).
template <bool Minimum, class V>
GF_INLINE V extreme_of(const V& a, const V& b) {
  return plain_extreme<Minimum>(unless_nan(a, b), b);
}

// Rows `stride` elements apart: row k at base + k * stride.
template <class P>
struct RowsAt {
  P base;
  int64_t stride;
  GF_INLINE P operator[](int64_t k) const { return base + k * stride; }
};

// Elements of the scratch of scan_extremes (`rows`: w) and doubled_mean_rows (n + w - 1).
template <class E>
constexpr int64_t scan_heads_elements(int64_t rows) {
  return rows * kTile * (64 / (int64_t)sizeof(E));  // rows of a tile of up to kTile 64-byte vectors
}

// res[i][j] = the extreme of rows[i][j] .. rows[i + w - 1][j] (scipy's
// rule), for outputs i < n and cells j < count; rows[k] for k < n + w - 1.
// Rows and Res: anything indexable by a row number giving a pointer (RowsAt,
// an array of pointers). heads: scan_heads_elements<E>(w).
template <bool Minimum, int Bytes, class E, class Rows, class Res>
void scan_extremes(Rows rows, int64_t n, int64_t w, int64_t count, Res res, E* heads) {
  for_tiles<E, Bytes>(count, [&](int64_t j, auto tiles, auto v) GF_INLINE_LAMBDA {
    using V = decltype(v);
    constexpr int N = decltype(tiles)::value, step = sizeof(V) / sizeof(E);
    auto at = [&](int64_t k, int t) { return load_as<V>(rows[k] + j + t * step); };
    auto head = [&](int64_t k, int t) { return heads + (k * N + t) * step; };
    for (int64_t i0 = 0; i0 < n; i0 += w) {
      const int64_t outputs = std::min(w, n - i0);
      // The suffix scan of rows [i0, i0 + w): run, by the associative order;
      // stored for the block's heads, by scipy's (a NaN head stays).
      V run[N];
      for (int t = 0; t < N; ++t) run[t] = at(i0 + w - 1, t);
      if (w - 1 < outputs)
        for (int t = 0; t < N; ++t) store_as(head(w - 1, t), run[t]);
      for (int64_t k = w - 2; k >= 0; --k)
        for (int t = 0; t < N; ++t) {
          const V u = at(i0 + k, t), s = plain_extreme<Minimum>(u, run[t]);
          run[t] = unless_nan(s, run[t]);  // s is u where u is NaN
          if (k < outputs) store_as(head(k, t), s);
        }
      for (int t = 0; t < N; ++t) store_as(res[i0] + j + t * step, load_as<V>(head(0, t)));
      // Window i0 + m: its head's suffix and the prefix of rows [i0 + w, i0 + w + m).
      V prefix[N];
      for (int64_t m = 1; m < outputs; ++m)
        for (int t = 0; t < N; ++t) {
          const V x = at(i0 + w + m - 1, t);
          prefix[t] = m == 1 ? x : extreme_of<Minimum>(prefix[t], x);
          store_as(res[i0 + m] + j + t * step, plain_extreme<Minimum>(load_as<V>(head(m, t)), prefix[t]));
        }
    }
  });
}

// Means by doubling (doubled_means) across rows: res[i][j] = the mean of
// rows[i][j] .. rows[i + w - 1][j], for i < n and j < count, each sum made
// in the order doubled_means makes it along a line, whatever n and the rows
// around: every path (fused or pass by pass, any layout, any threads) gives
// the same bits. (van Herk's suffix and prefix sums cost three additions an
// output, but depend on where blocks start, and along a contiguous line run
// serially.) levels: scan_heads_elements<E>(n + w - 1).
template <int Bytes, class E, class Rows, class Res>
void doubled_mean_rows(Rows rows, int64_t n, int64_t w, int64_t count, Res res, E* levels) {
  const E divisor = (E)w;
  for_tiles<E, Bytes>(count, [&](int64_t j, auto tiles, auto v) GF_INLINE_LAMBDA {
    using V = decltype(v);
    constexpr int N = decltype(tiles)::value, step = sizeof(V) / sizeof(E);
    auto level = [&](int64_t k, int t) { return levels + (k * N + t) * step; };
    auto out = [&](int64_t i, int t) { return res[i] + j + t * step; };
    int64_t valid = n + w - 1, span = 1, done = 0;  // level k: the sum of rows k .. k + span - 1
    for (;;) {
      if (w & span) {  // out(i): the sum of rows i .. i + done + span - 1
        for (int64_t i = 0; i < n; ++i)
          for (int t = 0; t < N; ++t) {
            const V x = span == 1 ? load_as<V>(rows[i + done] + j + t * step) : load_as<V>(level(i + done, t));
            store_as(out(i, t), done == 0 ? x : load_as<V>(out(i, t)) + x);
          }
        done += span;
      }
      if (2 * span > w) break;
      valid -= span;
      for (int64_t k = 0; k < valid; ++k)
        for (int t = 0; t < N; ++t) {
          const V a = span == 1 ? load_as<V>(rows[k] + j + t * step) : load_as<V>(level(k, t));
          const V b = span == 1 ? load_as<V>(rows[k + 1] + j + t * step) : load_as<V>(level(k + span, t));
          store_as(level(k, t), a + b);
        }
      span *= 2;
    }
    for (int64_t i = 0; i < n; ++i)
      for (int t = 0; t < N; ++t) store_as(out(i, t), load_as<V>(out(i, t)) / divisor);
  });
}

// res[j] = the extreme of x[j] .. x[j + w - 1] (scipy's rule) for j < count,
// by doubling in `level` (count + w - 1 elements; x and res may not overlap it).
template <bool Minimum, int Bytes, class E>
void doubled_extremes(const E* x, int64_t count, int64_t w, E* res, E* level) {
  using V = typename Simd<E, Bytes>::V;
  constexpr int64_t L = sizeof(V) / sizeof(E);
  int64_t valid = count + w - 1, span = 1;  // level[j]: the extreme of x[j .. j + span)
  const E* from = x;
  while (2 * span <= w) {
    valid -= span;
    int64_t j = 0;
    for (; j + L <= valid; j += L)
      store_as(level + j, extreme_of<Minimum>(load_as<V>(from + j), load_as<V>(from + j + span)));
    for (; j < valid; ++j) level[j] = extreme_of<Minimum>(from[j], from[j + span]);
    from = level;
    span *= 2;
  }
  const int64_t second = w - span;  // the second span's offset
  int64_t j = 0;
  for (; j + L <= count; j += L) {  // the window's head if NaN, else both spans' extreme
    const V first = load_as<V>(x + j);
    const V both = extreme_of<Minimum>(load_as<V>(from + j), load_as<V>(from + j + second));
    store_as(res + j, plain_extreme<Minimum>(first, both));  // a NaN first stays
  }
  for (; j < count; ++j) res[j] = x[j] != x[j] ? x[j] : extreme_of<Minimum>(from[j], from[j + second]);
}

// res[j] = the mean of x[j] .. x[j + w - 1] for j < count: sums of 2, 4, 8
// .. neighbours in `level` (count + w - 1 elements), a window's sum from
// those of the powers of two in w (lowest first), in res, then divided.
template <int Bytes, class E>
void doubled_means(const E* x, int64_t count, int64_t w, E* res, E* level) {
  using V = typename Simd<E, Bytes>::V;
  constexpr int64_t L = sizeof(V) / sizeof(E);
  int64_t valid = count + w - 1, span = 1, done = 0;  // from[j]: the sum of x[j .. j + span)
  const E* from = x;
  for (;;) {
    if (w & span) {  // res[j]: the sum of x[j .. j + done + span)
      int64_t j = 0;
      if (done == 0) {
        std::copy(from, from + count, res);
      } else {
        for (; j + L <= count; j += L) store_as(res + j, load_as<V>(res + j) + load_as<V>(from + j + done));
        for (; j < count; ++j) res[j] += from[j + done];
      }
      done += span;
    }
    if (2 * span > w) break;
    valid -= span;
    int64_t j = 0;
    for (; j + L <= valid; j += L) store_as(level + j, load_as<V>(from + j) + load_as<V>(from + j + span));
    for (; j < valid; ++j) level[j] = from[j] + from[j + span];
    from = level;
    span *= 2;
  }
  const E divisor = (E)w;
  int64_t j = 0;
  for (; j + L <= count; j += L) store_as(res + j, load_as<V>(res + j) / divisor);
  for (; j < count; ++j) res[j] /= divisor;
}

// The kernels above for the workers of the fused chains, compiled for each
// instruction set (cpu_isa.hpp) and chosen at run time; `kind`: Minimum,
// Maximum or Uniform (means: float only).
template <class E>
struct WindowScans {
  // heads: scan_heads_elements<E>(n + w - 1)
  void (*rows)(const E* const* rows, int64_t n, int64_t w, int64_t count, E* const* res, E* heads, LineKind kind);
  // level: min(count, kLineChunk) + w - 1 elements
  void (*line)(const E* x, int64_t count, int64_t w, E* res, E* level, LineKind kind);
};

template <class E, int Bytes>
void scan_rows(const E* const* rows, int64_t n, int64_t w, int64_t count, E* const* res, E* heads, LineKind kind) {
  switch (kind) {
    case LineKind::Minimum: return scan_extremes<true, Bytes>(rows, n, w, count, res, heads);
    case LineKind::Maximum: return scan_extremes<false, Bytes>(rows, n, w, count, res, heads);
    default: return doubled_mean_rows<Bytes>(rows, n, w, count, res, heads);
  }
}
// Lines are taken in chunks of this many outputs, whose levels stay in L1.
constexpr int64_t kLineChunk = 1024;
template <class E, int Bytes>
void scan_line(const E* x, int64_t count, int64_t w, E* res, E* level, LineKind kind) {
  for (int64_t j = 0; j < count; j += kLineChunk) {
    const int64_t n = std::min(kLineChunk, count - j);
    switch (kind) {
      case LineKind::Minimum: doubled_extremes<true, Bytes>(x + j, n, w, res + j, level); break;
      case LineKind::Maximum: doubled_extremes<false, Bytes>(x + j, n, w, res + j, level); break;
      default: doubled_means<Bytes>(x + j, n, w, res + j, level); break;
    }
  }
}
#if defined(GPUFILT_ISA_COPIES)
template <class E>
GF_AVX2 void scan_rows_avx2(const E* const* rows, int64_t n, int64_t w, int64_t count, E* const* res, E* heads,
                            LineKind kind) {
  scan_rows<E, 32>(rows, n, w, count, res, heads, kind);
}
template <class E>
GF_AVX512 void scan_rows_avx512(const E* const* rows, int64_t n, int64_t w, int64_t count, E* const* res,
                                E* heads, LineKind kind) {
  scan_rows<E, 64>(rows, n, w, count, res, heads, kind);
}
template <class E>
GF_AVX2 void scan_line_avx2(const E* x, int64_t count, int64_t w, E* res, E* level, LineKind kind) {
  scan_line<E, 32>(x, count, w, res, level, kind);
}
template <class E>
GF_AVX512 void scan_line_avx512(const E* x, int64_t count, int64_t w, E* res, E* level, LineKind kind) {
  scan_line<E, 64>(x, count, w, res, level, kind);
}
#endif

template <class E>
WindowScans<E> window_scans() {
#if defined(GPUFILT_ISA_COPIES)
  return {for_cpu_isa(&scan_rows<E, 16>, &scan_rows_avx2<E>, &scan_rows_avx512<E>),
          for_cpu_isa(&scan_line<E, 16>, &scan_line_avx2<E>, &scan_line_avx512<E>)};
#else
  return {&scan_rows<E, 16>, &scan_line<E, 16>};
#endif
}

}  // namespace cpu
}  // namespace gpufilt
