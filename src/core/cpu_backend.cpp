#include "core/cpu_backend.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cpu_extremes.hpp"
#include "core/cpu_isa.hpp"
#include "core/cpu_lines.hpp"
#include "core/parallel.hpp"
#if defined(GPUFILT_OPENMP)
#include <omp.h>
#endif

namespace gpufilt {
namespace {
using namespace cpu;

// Lines are filtered in blocks of up to kLanes neighbours along the most
// contiguous other axis (the lanes), held side by side in one buffer: cell i
// of lane b at ext[i * lanes + b]. Loading cell i of a block then reads one
// contiguous run, and the loops below, written over j = i * lanes + b, are
// unit-stride across the lanes, so they vectorise; each element still sees
// the same operations in the same order as when filtered alone. A pass
// along the most contiguous axis takes its lines one at a time (lanes = 1).
// kLanes doubles (512 bytes a row); blocks of floats take as many bytes.
constexpr int64_t kLanes = 64;
// Results buffered between stores (doubles), small enough to stay in L1.
constexpr int64_t kChunk = 1024;
// The most bytes a thread's extended lines take before lanes give way to one
// line at a time (see run_line_pass).
constexpr int64_t kLaneBufferBytes = 16 << 20;

// Rows of a block are far apart in memory, too far for the hardware
// prefetchers: the row kAhead rows on is requested while one is loaded.
constexpr int64_t kAhead = 8;
// Output rows likewise, for writing, while their results are computed.
template <bool ForWrite = false>
inline void prefetch_row(const char* p, int64_t bytes) {
#if defined(__GNUC__)
  if (bytes < 0) {
    p += bytes;
    bytes = -bytes;
  }
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b, ForWrite ? 1 : 0);
#else
  (void)p, (void)bytes;
#endif
}

// The axis whose lines go side by side with those of `axis`, or -1 when
// `axis` is itself the most contiguous one.
int lane_axis(const ArrayDesc& a, int axis) {
  int best = -1;
  for (int d = 0; d < a.ndim; ++d)
    if (d != axis && a.shape[d] > 1 && (best < 0 || std::llabs(a.strides[d]) < std::llabs(a.strides[best])))
      best = d;
  return best >= 0 && std::llabs(a.strides[best]) < std::llabs(a.strides[axis]) ? best : -1;
}

// Weights of a pass on 8-bit data in float, for sums in float that give
// scipy's results exactly (correlate_int8_in_float, float_weights).
constexpr int64_t kMaxFloatTaps = 128;
struct FloatWeights {
  float w[kMaxFloatTaps];
  float margin;  // |float sum - scipy's double sum| < margin
};

// One pass as the row kernels take it, its weights in the buffer's type E;
// for 8-bit data, its weights in float where they sum exactly in float.
template <class E>
struct RowPass {
  LineKind kind;
  const E* weights;
  int64_t taps, size;
  int symmetry;
  const FloatWeights* in_float = nullptr;
  bool exact_sums = false;  // every sum an integer that E holds: any order gives the same bits
};

// Where the kernels below find tap k of output j: at taps[k] + j. Taps
// evenly spaced (the rows of a line buffer) or anywhere (rows of planes).
template <class E>
struct EvenTaps {
  const E* base;
  int64_t stride;
  GF_INLINE const E* operator[](int64_t k) const { return base + k * stride; }
};
template <class E>
struct TapRows {
  const E* const* rows;
  GF_INLINE const E* operator[](int64_t k) const { return rows[k]; }
};

// A vector V of E from as many values of S at p, converted (exactly: S is
// E or narrower); and back to D, rounded as a scalar cast rounds.
template <class V, class E, class S>
GF_INLINE V load_lanes(const S* p) {
  if constexpr (std::is_same_v<E, S>) {
    return load_as<V>(p);
  } else if constexpr (sizeof(V) == sizeof(E)) {
    return (V)*p;
  } else {
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
    // GCC 12 widens 8 floats to 8 doubles in two halves and an insert, five
    // instructions where one does: a 17-tap pass along axis 1 of 256^3
    // uint16 planes held as floats took 52 ms that way, 32 with this.
    if constexpr (sizeof(V) == 64 && std::is_same_v<E, double> && std::is_same_v<S, float>) {
      V v;
      asm("vcvtps2pd %1, %0" : "=v"(v) : "m"(*reinterpret_cast<const float(*)[8]>(p)));
      return v;
    }
#endif
#if defined(__GNUC__)
    typedef S VS __attribute__((vector_size(sizeof(V) / sizeof(E) * sizeof(S))));
    return __builtin_convertvector(load_as<VS>(p), V);
#endif
  }
}

// i (an int32 or a vector of them) wrapped into the integer type R as a
// cast to R wraps it.
template <class R, class I>
GF_INLINE I wrapped(const I& i) {
  static_assert(sizeof(R) <= 2, "8- and 16-bit integers");
  constexpr int32_t mask = sizeof(R) == 1 ? 0xFF : 0xFFFF, sign = std::is_signed_v<R> ? (mask + 1) / 2 : 0;
  return ((i & mask) ^ sign) - sign;
}

// Integer data held in a float type D (exactly: 8- and 16-bit values) is
// rounded per pass as scipy stores a sum in the integer dtype R: truncated
// towards zero, wrapped (scipy casts through int64; the callers keep sums
// within int32, fuses_integers, where int32 gives the same). R void: a plain
// conversion to D.
template <class E, class R = void, class V, class D>
GF_INLINE void store_lanes(D* p, const V& v) {
  if constexpr (std::is_integral_v<R>) {
    constexpr int n = sizeof(V) / sizeof(E);
    if constexpr (n == 1) {
      *p = (D)wrapped<R>((int32_t)v);
    } else {
      using I = typename Simd<int32_t, n * 4>::V;
      using VD = typename Simd<D, n * sizeof(D)>::V;
      store_as(p, __builtin_convertvector(wrapped<R>(__builtin_convertvector(v, I)), VD));
    }
  } else if constexpr (std::is_same_v<E, D>) {
    store_as(p, v);
  } else if constexpr (sizeof(V) == sizeof(E)) {
    *p = (D)v;
  } else {
#if defined(__GNUC__)
    typedef D VD __attribute__((vector_size(sizeof(V) / sizeof(E) * sizeof(D))));
    store_as(p, __builtin_convertvector(v, VD));
#endif
  }
}

// The sums of Y neighbouring rows of outputs [j, j + N vectors V) into acc:
// output y's tap k is ext[k + y] (a row of results reads taps + Y - 1 rows),
// weights w, each sum in scipy's order (see LinePass::symmetry; Sign: +1
// symmetric, -1 antisymmetric, 0 neither), taps read as E. Two rows share
// their loads: row 1's tap k is row 0's tap k + 1, and the pairs walk
// inwards, so each step loads one row per side for both.
// A sum starts from +0: where float sums fuse multiply-adds, the first
// product is then fused with it (exact: the product rounded) and each later
// one with the sum before it, whatever the code around; from the bare first
// product, the compiler could fuse either of the first two products, and
// kernels that must agree to the bit would not.
template <int Y, int N, int Sign, class V, class E, class Taps>
GF_INLINE void tile_sums(Taps ext, int64_t j, const E* w, int64_t taps, V (*acc)[N]) {
  static_assert(Y == 1 || Y == 2, "one or two rows");
  constexpr int step = sizeof(V) / sizeof(E);
  auto at = [&](int64_t k, int t) { return load_lanes<V, E>(ext[k] + j + t * step); };
  if constexpr (Sign != 0) {
    auto pair = [](const V& a, const V& b) { return Sign > 0 ? a + b : a - b; };
    const int64_t c = taps / 2;
    V near[N], far[N];  // Y == 2: row 0's tap k, row 1's tap 2c - k + 1
    for (int y = 0; y < Y; ++y)
      for (int t = 0; t < N; ++t) acc[y][t] = V{} + at(c + y, t) * w[c];
    if constexpr (Y == 2)
      for (int t = 0; t < N; ++t) near[t] = at(0, t), far[t] = at(2 * c + 1, t);
    for (int64_t k = 0; k < c; ++k) {
      const E wk = w[k];
      for (int t = 0; t < N; ++t) {
        const V a = at(k + Y - 1, t), b = at(2 * c - k, t);
        if constexpr (Y == 1) {
          acc[0][t] += pair(a, b) * wk;
        } else {  // a: tap k + 1 of row 0 (tap k of row 1), b: tap 2c - k of row 0
          acc[0][t] += pair(near[t], b) * wk;
          acc[1][t] += pair(a, far[t]) * wk;
          near[t] = a;
          far[t] = b;
        }
      }
    }
  } else {
    V next[N];  // Y == 2: tap k + 1 of row 0 (tap k of row 1)
    for (int y = 0; y < Y; ++y)
      for (int t = 0; t < N; ++t) acc[y][t] = V{} + at(taps - 1 + y, t) * w[taps - 1];
    if constexpr (Y == 2)
      for (int t = 0; t < N; ++t) next[t] = at(0, t);
    for (int64_t k = 0; k + 1 < taps; ++k) {
      const E wk = w[k];
      for (int t = 0; t < N; ++t) {
        const V x = at(k + Y - 1, t);
        if constexpr (Y == 1) {
          acc[0][t] += x * wk;
        } else {
          acc[0][t] += next[t] * wk;
          acc[1][t] += x * wk;
          next[t] = x;
        }
      }
    }
  }
}

// The sign of tile_sums for weights of LinePass::symmetry s, fixed at compile time.
template <class F>
GF_INLINE void with_sign(int s, F&& f) {
  if (s > 0) f(std::integral_constant<int, 1>{});
  else if (s < 0) f(std::integral_constant<int, -1>{});
  else f(std::integral_constant<int, 0>{});
}

// Outputs [j, j + count) of Y neighbouring rows (tile_sums), stored as D in
// res[y], rounded as R stores them.
template <int Bytes, class R = void, int Y = 1, class E, class Taps, class D>
void correlate_in_order(Taps ext, int64_t count, const RowPass<E>& p, D* const* res) {
  constexpr int Tile = Y == 1 ? kTile : 2;  // vectors per row: accumulators and kept rows fill the registers
  const E* w = p.weights;  // locals: the stores below could alias p's fields
  const int64_t taps = p.taps;
  with_sign(p.symmetry, [&](auto sign) {
    for_tiles<E, Bytes, Tile>(count, [&](int64_t j, auto tiles, auto v) {
      using V = decltype(v);
      constexpr int N = decltype(tiles)::value, step = sizeof(V) / sizeof(E);
      V acc[Y][N];
      tile_sums<Y, N, decltype(sign)::value>(ext, j, w, taps, acc);
      for (int y = 0; y < Y; ++y)
        for (int t = 0; t < N; ++t) store_lanes<E, R>(res[y] + j + t * step, acc[y][t]);
    });
  });
}

template <int Bytes, class R = void, class E, class Taps, class D>
void correlate_rows_in_order(Taps ext, int64_t count, const RowPass<E>& p, D* res) {
  correlate_in_order<Bytes, R, 1>(ext, count, p, &res);
}

// Taps shifted by `row` rows and `offset` outputs: tap k of output j at
// taps[k + row] + offset + j.
template <class Taps>
struct ShiftedTaps {
  Taps taps;
  int64_t row, offset;
  GF_INLINE auto operator[](int64_t k) const { return taps[k + row] + offset; }
};

// ---- 8-bit integer data summed in float, exactly --------------------------------
// (core/separable.hpp: integer_float_margin): twice the values per vector
// of doubles, and multiply-adds fused. cval never reaches these kernels
// (callers sum it in double).
template <class T>
constexpr bool kInt8 = std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>;

template <class R>
bool float_weights(const RowPass<double>& p, FloatWeights& f) {
  if (p.taps > kMaxFloatTaps) return false;
  for (int64_t k = 0; k < p.taps; ++k) f.w[k] = (float)p.weights[k];
  return integer_float_margin(p.weights, p.taps, p.symmetry, integer_magnitude(8, std::is_signed_v<R>), 0x1p29,
                              f.margin);
}

// True when the `bytes` (at most 64) at p are all zero.
GF_INLINE bool all_zero(const void* p, size_t bytes) {
  uint64_t words[8] = {}, any = 0;
  std::memcpy(words, p, bytes);
  for (uint64_t w : words) any |= w;
  return any == 0;
}

// correlate_rows_in_order<Bytes, R> from float data in double, out of line:
// never inlined into the callers compiled with FMA, whose multiply-adds the
// compiler would fuse here too (scipy rounds products and sums apart).
template <int Bytes, class R, class Taps>
__attribute__((noinline, noclone)) void exact_rows(Taps ext, int64_t count, const RowPass<double>& p, float* res) {
  correlate_rows_in_order<Bytes, R>(ext, count, p, res);
}
#if defined(GPUFILT_ISA_COPIES)
template <class R, class Taps>
__attribute__((noinline, noclone)) GF_AVX2 void exact_rows_avx2(Taps ext, int64_t count, const RowPass<double>& p,
                                                               float* res) {
  correlate_rows_in_order<32, R>(ext, count, p, res);
}
template <class R, class Taps>
__attribute__((noinline, noclone)) GF_AVX512 void exact_rows_avx512(Taps ext, int64_t count,
                                                                   const RowPass<double>& p, float* res) {
  correlate_rows_in_order<64, R>(ext, count, p, res);
}
#endif
template <int Bytes, class R, class Taps>
GF_INLINE void exact_rows_of(Taps ext, int64_t count, const RowPass<double>& p, float* res) {
#if defined(GPUFILT_ISA_COPIES)
  if constexpr (Bytes == 64) exact_rows_avx512<R>(ext, count, p, res);
  else if constexpr (Bytes == 32) exact_rows_avx2<R>(ext, count, p, res);
  else
#endif
    exact_rows<Bytes, R>(ext, count, p, res);
}

// res[y][j] for j < count as correlate_in_order<Bytes, R, Y> gives them from
// float data of R (8 bits), into floats.
template <int Bytes, class R, int Y, class Taps>
void correlate_int8_in_float(Taps ext, int64_t count, const RowPass<double>& p, const FloatWeights& f,
                             float* const* res) {
#if defined(__GNUC__)
  constexpr int L = Bytes / 4, Tile = Y == 1 ? kTile : 2;  // floats per vector; vectors per row
  using FV = typename Simd<float, Bytes>::V;
  using IV = typename Simd<int32_t, Bytes>::V;
  const float* w = f.w;  // locals: the stores below could alias f's and p's fields
  const float margin = f.margin;
  const int64_t taps = p.taps;
  auto tile = [&](int64_t j, auto tiles, auto sign) {
    constexpr int N = decltype(tiles)::value;
    FV acc[Y][N];  // in any order: the margin bounds them all
    tile_sums<Y, N, decltype(sign)::value>(ext, j, w, taps, acc);
    IV low[Y][N], high[Y][N], across = {};
    for (int y = 0; y < Y; ++y)
      for (int t = 0; t < N; ++t) {  // truncated, as scipy's casts
        low[y][t] = __builtin_convertvector(acc[y][t] - margin, IV);
        high[y][t] = __builtin_convertvector(acc[y][t] + margin, IV);
        across |= low[y][t] ^ high[y][t];
      }
    const bool exact = all_zero(&across, sizeof across);
    for (int y = 0; y < Y; ++y)
      for (int t = 0; t < N; ++t) {
        const IV differ = low[y][t] ^ high[y][t];
        float* out = res[y] + j + t * L;
        if (exact || all_zero(&differ, sizeof differ))
          store_as(out, __builtin_convertvector(wrapped<R>(low[y][t]), FV));
        else
          exact_rows_of<Bytes, R>(ShiftedTaps<Taps>{ext, y, j + t * L}, L, p, out);
      }
  };
  auto run = [&](auto sign) {
    constexpr int64_t width = Tile * L;
    int64_t j = 0;
    for (; j + width <= count; j += width) tile(j, std::integral_constant<int, Tile>{}, sign);
    for (; j + L <= count; j += L) tile(j, std::integral_constant<int, 1>{}, sign);
    if (j < count)
      for (int y = 0; y < Y; ++y) exact_rows_of<Bytes, R>(ShiftedTaps<Taps>{ext, y, j}, count - j, p, res[y] + j);
  };
  with_sign(p.symmetry, run);
#endif
}

// res[y][j] for j < count, as correlate_in_order gives them; float data of
// 8-bit integers summed in float where the pass has its float weights
// (made once per pass: float_weights costs more than a short row).
template <int Bytes, class R = void, int Y = 1, class E, class Taps, class D>
void correlate_rows(Taps ext, int64_t count, const RowPass<E>& p, D* const* res) {
#if defined(__GNUC__)
  using Src = std::remove_cv_t<std::remove_pointer_t<decltype(ext[0])>>;
  if constexpr (kInt8<R> && std::is_same_v<E, double> && std::is_same_v<Src, float> && std::is_same_v<D, float>) {
    if (p.in_float) return correlate_int8_in_float<Bytes, R, Y>(ext, count, p, *p.in_float, res);
    for (int y = 0; y < Y; ++y) exact_rows_of<Bytes, R>(ShiftedTaps<Taps>{ext, y, 0}, count, p, res[y]);
    return;
  }
#endif
  correlate_in_order<Bytes, R, Y>(ext, count, p, res);
}
template <int Bytes, class R = void, class E, class Taps, class D>
void correlate_rows(Taps ext, int64_t count, const RowPass<E>& p, D* res) {
  correlate_rows<Bytes, R, 1>(ext, count, p, &res);
}

// Rows [i0, i1) of a running sum per lane, as scipy's NI_UniformFilter1D
// computes it; `sums` carries each lane's sum from one chunk to the next.
// In float only where the sums are exact (RowPass::exact_sums).
template <class E>
void uniform_rows(const E* ext, int64_t i0, int64_t i1, int64_t lanes, int64_t size, E* sums, E* res) {
  const E divisor = (E)size;
  if (lanes == 1) {  // the scalar loop, without a loop over one lane inside
    E sum = sums[0];
    for (int64_t i = i0; i < i1; ++i) {
      if (i == 0) {
        sum = 0.0;
        for (int64_t k = 0; k < size; ++k) sum += ext[k];
      } else {
        sum += ext[i + size - 1] - ext[i - 1];
      }
      res[i - i0] = sum / divisor;
    }
    sums[0] = sum;
    return;
  }
  for (int64_t i = i0; i < i1; ++i) {
    if (i == 0) {
      std::fill(sums, sums + lanes, E(0));
      for (int64_t k = 0; k < size; ++k)
        for (int64_t b = 0; b < lanes; ++b) sums[b] += ext[k * lanes + b];
    } else {
      const E *add = ext + (i + size - 1) * lanes, *sub = ext + (i - 1) * lanes;
      for (int64_t b = 0; b < lanes; ++b) sums[b] += add[b] - sub[b];
    }
    E* r = res + (i - i0) * lanes;
    for (int64_t b = 0; b < lanes; ++b) r[b] = sums[b] / divisor;
  }
}

// Exact sums (integers) of windows longer than this run as a running sum
// (across lanes, or along the line: running_means), whose cost does not
// grow with the window.
constexpr int64_t kExactRunningFrom = 8;

// Lanes of v moved up by K (lane i gets lane i - K), zeros below K; and v's
// last lane in every lane.
template <int K, class V, int... I>
GF_INLINE V lanes_up(const V& v, std::integer_sequence<int, I...>) {
  constexpr int L = sizeof...(I);
#if defined(__clang__)
  return __builtin_shufflevector(v, V{}, (I >= K ? I - K : L)...);
#else
  using Lane = std::remove_cv_t<std::remove_reference_t<decltype(v[0])>>;
  using Index = std::conditional_t<sizeof(Lane) == 4, int32_t, int64_t>;
  typedef Index Mask __attribute__((vector_size(sizeof(V))));
  return __builtin_shuffle(v, V{}, Mask{(I >= K ? I - K : L)...});
#endif
}
template <class V, int... I>
GF_INLINE V last_lane(const V& v, std::integer_sequence<int, I...>) {
  constexpr int L = sizeof...(I);
#if defined(__clang__)
  return __builtin_shufflevector(v, v, (I * 0 + L - 1)...);
#else
  using Lane = std::remove_cv_t<std::remove_reference_t<decltype(v[0])>>;
  using Index = std::conditional_t<sizeof(Lane) == 4, int32_t, int64_t>;
  typedef Index Mask __attribute__((vector_size(sizeof(V))));
  return __builtin_shuffle(v, Mask{(I * 0 + L - 1)...});
#endif
}

// Rows [i0, i1) of one line's running mean (lanes == 1) for exact sums
// only (RowPass::exact_sums: any order of addition gives the same sums), a
// vector of L outputs at a time: their sums are the last one carried plus
// the prefix sums of their differences ext[i + size - 1] - ext[i - 1]
// (log2(L) shifted additions), where scipy's running sum adds one
// difference after another. `sums` carries the sum from chunk to chunk.
template <int Bytes, class E>
void running_means(const E* ext, int64_t i0, int64_t i1, int64_t size, E* sums, E* res) {
  using V = typename Simd<E, Bytes>::V;
  constexpr int L = sizeof(V) / sizeof(E);
  using Lanes = std::make_integer_sequence<int, L>;
  const E divisor = (E)size;
  E sum = sums[0];
  int64_t i = i0;
  if (i == 0) {  // the first window's sum, L taps at a time
    V part{};
    int64_t k = 0;
    for (; k + L <= size; k += L) part += load_as<V>(ext + k);
    sum = 0;
    for (int l = 0; l < L; ++l) sum += part[l];
    for (; k < size; ++k) sum += ext[k];
    res[0] = sum / divisor;
    ++i;
  }
  if constexpr (L > 1) {
    V carry = V{} + sum;
    for (; i + L <= i1; i += L) {
      V s = load_as<V>(ext + i + size - 1) - load_as<V>(ext + i - 1);
      s += lanes_up<1>(s, Lanes{});
      if constexpr (L > 2) s += lanes_up<2>(s, Lanes{});
      if constexpr (L > 4) s += lanes_up<4>(s, Lanes{});
      if constexpr (L > 8) s += lanes_up<8>(s, Lanes{});
      s += carry;
      store_as(res + (i - i0), s / divisor);
      carry = last_lane(s, Lanes{});
    }
    sum = carry[0];
  }
  for (; i < i1; ++i) {
    sum += ext[i + size - 1] - ext[i - 1];
    res[i - i0] = sum / divisor;
  }
  sums[0] = sum;
}

// Windows of float data of at most this many taps are summed in float (a
// running sum in float would drift along a long line), whole or by doubling
// (scans_windows: doubled_means, doubled_mean_rows); longer ones run in
// double. Integer sums that float holds exactly have no such bound
// (integers_exact_in_float).
constexpr int64_t kFloatWindow = 32;

// The mean of each window of `size`, summed whole at every output.
template <int Bytes, class Taps>
void window_mean_rows(Taps ext, int64_t count, int64_t size, float* res) {
  const float divisor = (float)size;
  for_tiles<float, Bytes>(count, [&](int64_t j, auto tiles, auto v) {
    using V = decltype(v);
    constexpr int N = decltype(tiles)::value, step = sizeof(V) / sizeof(float);
    V acc[N];
    for (int t = 0; t < N; ++t) acc[t] = load_as<V>(ext[0] + j + t * step);
    for (int64_t k = 1; k < size; ++k)
      for (int t = 0; t < N; ++t) acc[t] += load_as<V>(ext[k] + j + t * step);
    for (int t = 0; t < N; ++t) acc[t] = acc[t] / divisor;
    std::memcpy(res + j, acc, sizeof acc);
  });
}

// G neighbouring window means at once (G = 2 or 4, G <= size), each summed
// as window_mean_rows sums it: res[g] over rows [g, g + size), every row
// loaded once for all G (a pass across planes reads its rows from beyond L2).
// The loops over rows run in three phases so that every index into the
// accumulators is a constant: they stay in registers.
template <int Bytes, int G>
void window_mean_group(const float* const* rows, int64_t count, int64_t size, float* const* res) {
  const float divisor = (float)size;
  constexpr int Tile = G > 2 ? 2 : kTile;
  for_tiles<float, Bytes, Tile>(count, [&](int64_t j, auto tiles, auto v) {
    using V = decltype(v);
    constexpr int N = decltype(tiles)::value, step = sizeof(V) / sizeof(float);
    auto row = [&](int64_t k, int t) { return load_as<V>(rows[k] + j + t * step); };
    V acc[G][N];
    for (int t = 0; t < N; ++t) acc[0][t] = row(0, t);
    for (int k = 1; k < G; ++k)  // row k: the first of window k, and in the windows before it
      for (int t = 0; t < N; ++t) {
        const V x = row(k, t);
        for (int g = 0; g < k; ++g) acc[g][t] += x;
        acc[k][t] = x;
      }
    for (int64_t k = G; k < size; ++k)  // in every window
      for (int t = 0; t < N; ++t) {
        const V x = row(k, t);
        for (int g = 0; g < G; ++g) acc[g][t] += x;
      }
    for (int m = 1; m < G; ++m)  // row size - 1 + m: in windows m .. G - 1
      for (int t = 0; t < N; ++t) {
        const V x = row(size - 1 + m, t);
        for (int g = m; g < G; ++g) acc[g][t] += x;
      }
    for (int g = 0; g < G; ++g) {
      for (int t = 0; t < N; ++t) acc[g][t] = acc[g][t] / divisor;
      std::memcpy(res[g] + j, acc[g], sizeof acc[g]);
    }
  });
}

// Minimum or maximum over each window of `size`, with scipy's comparison
// (a later value replaces the running one only if strictly smaller/larger).
template <bool Minimum, int Bytes, class E, class Taps>
void min_max_rows(Taps ext, int64_t count, int64_t size, E* res) {
  for_tiles<E, Bytes>(count, [&](int64_t j, auto tiles, auto v) {
    using V = decltype(v);
    constexpr int N = decltype(tiles)::value, step = sizeof(V) / sizeof(E);
    V acc[N];
    for (int t = 0; t < N; ++t) acc[t] = load_as<V>(ext[0] + j + t * step);
    for (int64_t k = 1; k < size; ++k)
      for (int t = 0; t < N; ++t) {
        const V x = load_as<V>(ext[k] + j + t * step);
        acc[t] = (Minimum ? x < acc[t] : x > acc[t]) ? x : acc[t];
      }
    std::memcpy(res + j, acc, sizeof acc);
  });
}

// Minima, maxima or (float) means of rows [i0, i1) of a block whose windows
// scan (cpu_extremes.hpp): across the rows of lanes, or along the one line;
// `scratch` holds scan_heads_elements(i1 - i0 + size) or i1 - i0 + size - 1 elements.
template <LineKind K, int Bytes, class E>
void scanned_rows(const E* ext, int64_t i0, int64_t i1, int64_t lanes, int64_t size, E* scratch, E* res) {
  const RowsAt<const E*> rows{ext + i0 * lanes, lanes};
  if constexpr (K == LineKind::Uniform) {
    if (lanes > 1) return doubled_mean_rows<Bytes>(rows, i1 - i0, size, lanes, RowsAt<E*>{res, lanes}, scratch);
  } else {
    if (lanes > 1)
      return scan_extremes<K == LineKind::Minimum, Bytes>(rows, i1 - i0, size, lanes, RowsAt<E*>{res, lanes},
                                                          scratch);
  }
  if constexpr (K == LineKind::Uniform) doubled_means<Bytes>(ext + i0, i1 - i0, size, res, scratch);
  else doubled_extremes<K == LineKind::Minimum, Bytes>(ext + i0, i1 - i0, size, res, scratch);
}

// Results of rows [i0, i1) of a block into res; `sums` carries a running sum
// from one chunk of rows to the next, or is the scratch of scanned_rows.
template <class E, int Bytes>
void filter_rows(const E* ext, int64_t i0, int64_t i1, int64_t lanes, const RowPass<E>& pass, E* sums,
                 E* res) {
  const EvenTaps<E> rows{ext + i0 * lanes, lanes};
  const int64_t count = (i1 - i0) * lanes;
  const bool scans = scans_windows(pass.kind, pass.size, lanes == 1 ? TapSource::Cache : TapSource::Memory);
  switch (pass.kind) {
    case LineKind::Correlate: return correlate_rows<Bytes>(rows, count, pass, res);
    case LineKind::Uniform:
      if (pass.exact_sums && pass.size > kExactRunningFrom) {
        if (lanes == 1) return running_means<Bytes>(ext, i0, i1, pass.size, sums, res);
        return uniform_rows(ext, i0, i1, lanes, pass.size, sums, res);
      }
      if constexpr (std::is_same_v<E, float>) {
        if (scans) return scanned_rows<LineKind::Uniform, Bytes>(ext, i0, i1, lanes, pass.size, sums, res);
        return window_mean_rows<Bytes>(rows, count, pass.size, res);
      } else {
        return uniform_rows(ext, i0, i1, lanes, pass.size, sums, res);
      }
    case LineKind::Minimum:
      if (scans) return scanned_rows<LineKind::Minimum, Bytes>(ext, i0, i1, lanes, pass.size, sums, res);
      return min_max_rows<true, Bytes>(rows, count, pass.size, res);
    case LineKind::Maximum:
      if (scans) return scanned_rows<LineKind::Maximum, Bytes>(ext, i0, i1, lanes, pass.size, sums, res);
      return min_max_rows<false, Bytes>(rows, count, pass.size, res);
  }
}

template <class E>
using FilterRows = void (*)(const E*, int64_t, int64_t, int64_t, const RowPass<E>&, E*, E*);

// The kernels are also compiled for AVX2 and AVX-512 (cpu_isa.hpp): four
// or eight doubles, eight or sixteen floats per instruction. The float ones
// fuse multiply-adds as DESIGN.md's float tolerance allows; the double ones
// never: an FMA rounds once where scipy rounds twice.
#if defined(GPUFILT_ISA_COPIES)
GF_AVX2_FMA void filter_rows_avx2(const float* ext, int64_t i0, int64_t i1, int64_t lanes,
                                  const RowPass<float>& pass, float* sums, float* res) {
  filter_rows<float, 32>(ext, i0, i1, lanes, pass, sums, res);
}
GF_AVX2 void filter_rows_avx2(const double* ext, int64_t i0, int64_t i1, int64_t lanes, const RowPass<double>& pass,
                              double* sums, double* res) {
  filter_rows<double, 32>(ext, i0, i1, lanes, pass, sums, res);
}
GF_AVX512_FMA void filter_rows_avx512(const float* ext, int64_t i0, int64_t i1, int64_t lanes,
                                      const RowPass<float>& pass, float* sums, float* res) {
  filter_rows<float, 64>(ext, i0, i1, lanes, pass, sums, res);
}
GF_AVX512 void filter_rows_avx512(const double* ext, int64_t i0, int64_t i1, int64_t lanes,
                                  const RowPass<double>& pass, double* sums, double* res) {
  filter_rows<double, 64>(ext, i0, i1, lanes, pass, sums, res);
}
#endif

template <class E>
FilterRows<E> row_kernel() {
#if defined(GPUFILT_ISA_COPIES)
  return for_cpu_isa<FilterRows<E>>(&filter_rows<E, 16>, &filter_rows_avx2, &filter_rows_avx512);
#else
  return &filter_rows<E, 16>;
#endif
}

// res[j] for j < count, tap k of output j at rows[k][j]: the kernels of
// filter_rows that carry nothing from one row to the next (not scipy's
// running sum in double, which callers leave to filter_rows). Taps of Src,
// sums in E, results stored as D (rounded as R stores them, store_lanes);
// with mixed types, correlations only. With res1, a second row of results
// too, from rows[1 .. taps]: correlations share their loads
// (correlate_in_order), the other kinds run row by row.
template <class Src, class E, class D, int Bytes, class R = void>
void filter_span(const Src* const* rows, int64_t count, const RowPass<E>& pass, D* res, D* res1) {
  if (res1 && pass.kind == LineKind::Correlate) {
    D* const both[2] = {res, res1};
    return correlate_rows<Bytes, R, 2>(TapRows<Src>{rows}, count, pass, both);
  }
  if (res1) filter_span<Src, E, D, Bytes, R>(rows + 1, count, pass, res1, nullptr);
  const TapRows<Src> taps{rows};
  if constexpr (std::is_same_v<Src, E> && std::is_same_v<D, E> && std::is_void_v<R>) {
    switch (pass.kind) {
      case LineKind::Correlate: return correlate_rows<Bytes>(taps, count, pass, res);
      case LineKind::Uniform:
        if constexpr (std::is_same_v<E, float>) return window_mean_rows<Bytes>(taps, count, pass.size, res);
        else break;
      case LineKind::Minimum: return min_max_rows<true, Bytes>(taps, count, pass.size, res);
      case LineKind::Maximum: return min_max_rows<false, Bytes>(taps, count, pass.size, res);
    }
  } else {
    correlate_rows<Bytes, R>(taps, count, pass, res);
  }
}

template <class Src, class E, class D>
using FilterSpan = void (*)(const Src* const*, int64_t, const RowPass<E>&, D*, D*);

// Sums in float that may fuse multiply-adds: float data, and 8-bit integers
// held in floats (correlate_int8_in_float, whose sums in double run in
// exact_rows, out of line, where nothing fuses).
template <class Src, class E, class D, class R>
constexpr bool kFusesMultiplyAdds = std::is_same_v<E, float> || (kInt8<R> && std::is_same_v<Src, float>);

#if defined(GPUFILT_ISA_COPIES)
// As filter_rows_avx2: FMA for float sums only.
template <class Src, class E, class D, class R>
GF_AVX2_FMA void filter_span_avx2_fma(const Src* const* rows, int64_t count, const RowPass<E>& pass, D* res,
                                      D* res1) {
  filter_span<Src, E, D, 32, R>(rows, count, pass, res, res1);
}
template <class Src, class E, class D, class R>
GF_AVX2 void filter_span_avx2(const Src* const* rows, int64_t count, const RowPass<E>& pass, D* res, D* res1) {
  filter_span<Src, E, D, 32, R>(rows, count, pass, res, res1);
}
template <class Src, class E, class D, class R>
GF_AVX512_FMA void filter_span_avx512_fma(const Src* const* rows, int64_t count, const RowPass<E>& pass, D* res,
                                          D* res1) {
  filter_span<Src, E, D, 64, R>(rows, count, pass, res, res1);
}
template <class Src, class E, class D, class R>
GF_AVX512 void filter_span_avx512(const Src* const* rows, int64_t count, const RowPass<E>& pass, D* res,
                                  D* res1) {
  filter_span<Src, E, D, 64, R>(rows, count, pass, res, res1);
}
#endif

template <class Src, class E, class D, class R = void>
FilterSpan<Src, E, D> span_kernel() {
#if defined(GPUFILT_ISA_COPIES)
  if constexpr (kFusesMultiplyAdds<Src, E, D, R>)
    return for_cpu_isa<FilterSpan<Src, E, D>>(&filter_span<Src, E, D, 16, R>, &filter_span_avx2_fma<Src, E, D, R>,
                                             &filter_span_avx512_fma<Src, E, D, R>);
  else
    return for_cpu_isa<FilterSpan<Src, E, D>>(&filter_span<Src, E, D, 16, R>, &filter_span_avx2<Src, E, D, R>,
                                             &filter_span_avx512<Src, E, D, R>);
#else
  return &filter_span<Src, E, D, 16, R>;
#endif
}

template <int G>
using MeanGroup = void (*)(const float* const*, int64_t, int64_t, float* const*);

#if defined(GPUFILT_ISA_COPIES)
template <int G>
GF_AVX2 void window_mean_group_avx2(const float* const* rows, int64_t count, int64_t size, float* const* res) {
  window_mean_group<32, G>(rows, count, size, res);
}
template <int G>
GF_AVX512 void window_mean_group_avx512(const float* const* rows, int64_t count, int64_t size,
                                        float* const* res) {
  window_mean_group<64, G>(rows, count, size, res);
}
#endif

template <int G>
MeanGroup<G> mean_group_kernel() {
#if defined(GPUFILT_ISA_COPIES)
  return for_cpu_isa<MeanGroup<G>>(&window_mean_group<16, G>, &window_mean_group_avx2<G>,
                                   &window_mean_group_avx512<G>);
#else
  return &window_mean_group<16, G>;
#endif
}

}  // namespace

namespace {
thread_local int call_threads = 0;  // set_cpu_call_threads

// A thread count asked for (threads=, GPUFILT_NUM_THREADS, OMP_NUM_THREADS)
// capped at kThreadsPerCpu per CPU this process may run on: libgomp ends the
// process when it cannot start a thread (threads=10**6, or 1000 under a
// memory limit), and more threads than that only contend.
constexpr int64_t kThreadsPerCpu = 4;
int capped_threads(int64_t asked) {
#if defined(GPUFILT_OPENMP)
  static const int64_t cap = kThreadsPerCpu * std::max(1, omp_get_num_procs());  // the affinity mask's CPUs
#else
  constexpr int64_t cap = 1;
#endif
  return (int)std::clamp<int64_t>(asked, 1, cap);
}
}  // namespace

int64_t set_cpu_call_threads(int64_t threads) {
  const int before = call_threads;
  call_threads = threads > 0 ? capped_threads(threads) : 0;
  return before;
}

int cpu_max_threads() {
#if defined(GPUFILT_OPENMP)
  if (call_threads > 0) return call_threads;
  // Read once: GPUFILT_NUM_THREADS (a positive integer) wins over OpenMP's
  // own count, which follows OMP_NUM_THREADS.
  static const int threads = [] {
    const char* text = std::getenv("GPUFILT_NUM_THREADS");
    const long long n = text ? std::strtoll(text, nullptr, 10) : 0;
    return capped_threads(n > 0 ? n : omp_get_max_threads());
  }();
  return threads;
#else
  return 1;
#endif
}

namespace {
// The values of 8- to 32-bit integer dtypes: false for other dtypes.
bool integer_range(DType t, double& lowest, double& highest) {
  switch (t) {
    case DType::Int8: lowest = -128.0, highest = 127.0; return true;
    case DType::UInt8: lowest = 0.0, highest = 255.0; return true;
    case DType::Int16: lowest = -32768.0, highest = 32767.0; return true;
    case DType::UInt16: lowest = 0.0, highest = 65535.0; return true;
    case DType::Int32: lowest = -0x1p31, highest = 0x1p31 - 1; return true;
    case DType::UInt32: lowest = 0.0, highest = 0x1p32 - 1; return true;
    default: return false;
  }
}

// Whether every sum over a pass's windows, of any of their taps in any
// order, is an integer of magnitude below `limit` (2^24: exact in float;
// 2^53: in double): means of integer data whose windows are short enough,
// cval (which joins them in constant mode) a value of the input dtype.
// Such sums are scipy's whatever the order, which lets the kernels
// vectorise the running sums that scipy adds one after another. Their other
// intermediates are exact too: the differences of two taps, and
// running_means' prefix sums of up to 16 of them, are integers of at most
// 16 x (highest - lowest), far below either limit.
bool window_sums_exact(DType in, const LinePass& pass, double cval, double limit) {
  double lowest, highest;
  return pass.kind == LineKind::Uniform && integer_range(in, lowest, highest) &&
         (pass.mode != Mode::Constant || is_value_of(in, cval)) &&
         std::max(-lowest, highest) * (double)pass.size < limit;
}

// 8- and 16-bit integer data into an integer dtype that holds its values
// run on the float kernels, which vectorise twice as wide as double's, where
// they give scipy's results to the bit:
// * minima and maxima pick one of the values, which float holds exactly;
// * means whose sums float holds exactly (window_sums_exact): scipy stores
//   the double quotient s / n truncated, and float's quotient truncates to
//   the same integer, as a quotient that is no integer lies at least 1 / n
//   from one and float rounds it by at most (s / n) * 2^-24 < 1 / n.
// cval joins the windows: it must be a value of the input dtype.
bool integers_exact_in_float(DType in, DType out, const LinePass& pass, double cval) {
  double lowest, highest;
  if (in != DType::Int8 && in != DType::UInt8 && in != DType::Int16 && in != DType::UInt16) return false;
  integer_range(in, lowest, highest);
  const bool integer_out = out != DType::Bool && out <= DType::UInt64;
  if (!integer_out || !is_value_of(out, lowest) || !is_value_of(out, highest)) return false;
  switch (pass.kind) {
    case LineKind::Minimum:
    case LineKind::Maximum: return pass.mode != Mode::Constant || is_value_of(in, cval);
    case LineKind::Uniform: return window_sums_exact(in, pass, cval, 0x1p24);
    default: return false;
  }
}

// A line pass with line buffers of E (double, or float: see sums_in_float).
template <class E>
void run_line_pass(const ArrayDesc& in, const ArrayDesc& out, const LinePass& pass, double cval) {
  auto [load, _unused] = dispatch_real_dtype<LineIOAs<E>::template IO>(in.dtype);
  auto [_unused2, store] = dispatch_real_dtype<LineIOAs<E>::template IO>(out.dtype);
  const int lane = lane_axis(in, pass.axis);
  const Lines lines(in, out, pass.axis, lane);
  const int64_t n = lines.length, taps = pass.taps(), left = pass.left(), right = taps - 1 - left;
  const int64_t in_stride = in.strides[pass.axis], out_stride = out.strides[pass.axis];
  const int64_t width = lane < 0 ? 1 : in.shape[lane];  // lines side by side along the lane axis
  const int64_t in_lane = lane < 0 ? 0 : in.strides[lane], out_lane = lane < 0 ? 0 : out.strides[lane];
  // Lanes multiply the extended line: where a window much longer than the
  // line makes that large, one lane, so that buffers stay near scipy's (a
  // (4, 5) array's uniform_filter with size 10**8 took 3.9 GB, scipy 0.8).
  const bool long_window = taps > n && n + taps > kLaneBufferBytes / (kLanes * 8);  // divided: no overflow
  const int64_t max_lanes = long_window ? 1 : std::min(width, kLanes * 8 / (int64_t)sizeof(E)),
                blocks = (width + max_lanes - 1) / max_lanes;
  const std::vector<E> weights(pass.weights.begin(), pass.weights.end());
  RowPass<E> row_pass{pass.kind, weights.data(), taps, pass.size, pass.symmetry()};
  // (Float buffers hold integers only where integers_exact_in_float holds.)
  row_pass.exact_sums = window_sums_exact(in.dtype, pass, cval, std::is_same_v<E, float> ? 0x1p24 : 0x1p53);
  const FilterRows<E> filter_rows = row_kernel<E>();

  // Dynamic chunks of tasks (~16 per thread): a thread that the OS preempts
  // does not hold up the others.
  const int threads = cpu_max_threads();
  const int64_t tasks = lines.count * blocks, grain = std::max<int64_t>(1, tasks / (16 * threads));
  // Scanned extremes across rows take chunks of whole blocks, each as long as the window.
  // (Means in double keep scipy's running sum, uniform_rows, or where their
  // sums are exact, its values: running_means.)
  const bool scanning = pass.kind != LineKind::Uniform || std::is_same_v<E, float>;
  const bool scans = scanning && (scans_windows(pass.kind, taps, TapSource::Cache) ||
                                   scans_windows(pass.kind, taps, TapSource::Memory));
  auto chunk_rows = [&](int64_t lanes) {
    const int64_t rows = std::max<int64_t>(1, kChunk / lanes);
    const bool scans_lanes = lanes > 1 && scanning && scans_windows(pass.kind, taps, TapSource::Memory);
    return scans_lanes ? (rows + taps - 1) / taps * taps : rows;
  };
  parallel_region(lines.count * width * n > 32768, threads, [&, load = load, store = store] {
    // res holds one chunk of rows, or the whole line where that is shorter
    // (a tiny array's call then allocates a few bytes, not kChunk values).
    const int64_t line = std::max<int64_t>(n, 1) * max_lanes;
    const int64_t res_size = std::min(std::max(kChunk, max_lanes) + (scans ? taps * max_lanes : 0), line);
    const int64_t scratch = scans ? std::max(scan_heads_elements<E>(chunk_rows(2) + taps), kChunk + taps) : 0;
    std::vector<E> ext((n + taps - 1) * max_lanes), res(res_size), sums(std::max(max_lanes, scratch));
    dynamic_loop(tasks, grain, [&](int64_t t) {
      int64_t in_off, out_off;
      lines.offsets(t / blocks, in_off, out_off);
      const int64_t first = (t % blocks) * max_lanes, lanes = std::min(max_lanes, width - first);
      const char* src = in.data + in_off + first * in_lane;
      char* dst = out.data + out_off + first * out_lane;
      if (lanes == 1)
        load(src, in_stride, n, ext.data() + left);
      else
        for (int64_t i = 0; i < n; ++i) {
          if (i + kAhead < n) prefetch_row(src + (i + kAhead) * in_stride, lanes * in_lane);
          load(src + i * in_stride, in_lane, lanes, ext.data() + (left + i) * lanes);
        }
      extend_line(ext.data(), n, left, right, pass.mode, cval, lanes);
      const int64_t rows = chunk_rows(lanes);
      for (int64_t i0 = 0; i0 < n; i0 += rows) {
        const int64_t i1 = std::min(n, i0 + rows);
        if (lanes > 1)
          for (int64_t i = i0; i < i1; ++i) prefetch_row<true>(dst + i * out_stride, lanes * out_lane);
        filter_rows(ext.data(), i0, i1, lanes, row_pass, sums.data(), res.data());
        if (lanes == 1)
          store(res.data(), dst + i0 * out_stride, out_stride, i1 - i0);
        else
          for (int64_t i = i0; i < i1; ++i)
            store(res.data() + (i - i0) * lanes, dst + i * out_stride, out_lane, lanes);
      }
    });
  });
}

// float32 and float16 data (in and out) are summed in float, as the CUDA
// kernels do (fused.cu, Arith), unless the pass may cancel (a derivative:
// LinePass::may_cancel; float_sums_allowed has the rule). Minima and maxima
// stay exact: rounding to the output commutes with them. So are means and
// extremes of 8- and 16-bit integers where float gives scipy's bits
// (integers_exact_in_float). Other integer and float64 data, outputs of
// other dtypes and derivatives stay in double: scipy's results to the bit.
bool sums_in_float(const ArrayDesc& in, const ArrayDesc& out, const LinePass& pass, double cval) {
  if (float_sums_allowed(in.dtype, out.dtype, pass.may_cancel()))
    return !(pass.kind == LineKind::Uniform && pass.size > kFloatWindow);
  return integers_exact_in_float(in.dtype, out.dtype, pass, cval);
}

// ---- Chains fused plane by plane ------------------------------------------------
// A chain on a volume in one sweep through memory instead of one a pass:
// output planes across the outermost axis (the march axis) are produced in
// turn; the passes along the two other axes (plane passes) run on planes
// held in cache, as rows of the dtype's own type; the one pass along the
// march axis combines a window of planes. Passes before it run on each input
// plane into a ring of planes; passes after it on the output plane. Every
// element sees the same operations in the same order as pass by pass, and
// each intermediate is rounded to the output dtype as scipy stores it.
// Taken for float32 and float64 volumes, and 8- and 16-bit integer ones whose
// correlations fuses_integers admits (input and output of one dtype), whose
// passes all sum in one type; others run pass by pass.

// Fused only for arrays at least this large (smaller ones fit in cache anyway).
constexpr int64_t kFusedMinSize = 32768;
// The planes one thread's march pass reads at once stay under this (L3).
constexpr int64_t kFusedWindowBytes = 8 << 20;

// A pass along axis 0 (across rows) or 1 (along each row) of a plane buffer,
// or along the march axis.
template <class E>
struct PlanePass {
  int axis = 0;
  LineKind kind = LineKind::Correlate;
  Mode mode = Mode::Reflect;
  int64_t taps = 1, left = 0, size = 1;
  int symmetry = 0;
  std::vector<E> weights;
  std::shared_ptr<FloatWeights> in_float;  // 8-bit data whose sums may run in float
  RowPass<E> row_pass() const { return RowPass<E>{kind, weights.data(), taps, size, symmetry, in_float.get()}; }
};

template <class E, class R = void>
PlanePass<E> plane_pass(const LinePass& p, int axis) {
  PlanePass<E> q;
  q.axis = axis;
  q.kind = p.kind;
  q.mode = p.mode;
  q.taps = p.taps();
  q.left = p.left();
  q.size = p.size;
  q.symmetry = p.symmetry();
  q.weights.assign(p.weights.begin(), p.weights.end());
  if constexpr (kInt8<R> && std::is_same_v<E, double>) {
    auto f = std::make_shared<FloatWeights>();
    if (float_weights<R>(q.row_pass(), *f)) q.in_float = std::move(f);
  }
  return q;
}

// Rows of a plane: row y at base + y * stride (elements).
template <class S>
struct PlaneRows {
  S* base;
  int64_t stride;
  S* row(int64_t y) const { return base + y * stride; }
};

// What every thread shares of a fused chain.
template <class E>
struct PlaneChain {
  const ArrayDesc *in, *out;
  int march, outer, inner;  // array axes: planes along march; rows along outer, cells along inner
  int64_t nz, ny, nx;
  std::vector<PlanePass<E>> before, after;
  bool has_across = false;
  PlanePass<E> across;
  bool read_direct, write_direct;  // input / output rows unit-stride and aligned: used in place
  bool copy_to_ring = false;       // the march pass reads input planes copied into its ring
  // Output planes whose march pass is computed together (PlaneWorker::group_rows): where it reads
  // the input in place, each input row is then loaded from beyond L2 once for several of them.
  int group = 1;
  double cval;
  bool uses_ring() const { return !before.empty() || !read_direct || copy_to_ring; }
};

// The fused chain's work on one thread: planes [z0, z1) with its own
// buffers. Planes are held as S, the storage of the dtype (so each pass's
// results are rounded to it as scipy stores them), and summed in E; or, for
// integers of R (8 or 16 bits), as floats holding their values (exactly),
// each pass's results rounded as R stores them (store_lanes).
template <class S, class E, class R = void>
class PlaneWorker {
 public:
  explicit PlaneWorker(const PlaneChain<E>& c) : c_(c), plane_(c.ny * c.nx), slot_(ring_slot(plane_)) {
    int64_t taps = c.has_across ? c.across.taps : 1;
    for (const auto& p : c.before) taps = std::max(taps, p.taps);
    for (const auto& p : c.after) taps = std::max(taps, p.taps);
    a_.resize(plane_);
    b_.resize(plane_);
    ext_.resize(std::max(c.nx + taps, taps * c.nx));
    ends_.resize(2 * taps);
    cval_row_.assign(c.nx, (E)c.cval);
    rows_.resize(taps);
    e_rows_.resize(taps);
    taps_row_.resize(taps);
    heads_.resize(scan_heads_elements<S>(std::max(2 * taps, c.ny + taps)));  // outputs + taps rows
    level_.resize(c.nx + taps);
    if (c.has_across) {
      if (!(c.after.empty() && c.write_direct)) ahead_.resize(c.group - 1, std::vector<S>(plane_));
      wanted_.resize(c.across.taps + c.group - 1);
      if (uses_ring()) {
        ring_.resize(c.across.taps * slot_);
        tags_.assign(c.across.taps, -1);
        slots_.resize(c.across.taps);
      }
    }
  }

  void planes(int64_t z0, int64_t z1) {
    for (int64_t z = z0; z < z1; ++z) {
      if (c_.has_across) across_plane(z, z1);
      else finish_plane(z, first_source(z), c_.after);
    }
  }

 private:
  bool uses_ring() const { return c_.uses_ring(); }

  // Elements between ring slots: a plane rounded up to whole cache lines,
  // an odd number of them, so that the rows that one output reads from
  // different slots fall in different sets of the L1 cache (planes a power
  // of two apart in memory all fall in one set, more than its ways).
  static int64_t ring_slot(int64_t plane) {
    constexpr int64_t line = 64 / sizeof(S) ? 64 / sizeof(S) : 1;
    const int64_t lines = (plane + line - 1) / line;
    return (lines | 1) * line;
  }

  PlaneRows<S> rows_of(const ArrayDesc& a, int64_t z) const {
    return {reinterpret_cast<S*>(a.data + z * a.strides[c_.march]), a.strides[c_.outer] / (int64_t)sizeof(S)};
  }
  PlaneRows<S> buffer(S* p) const { return {p, c_.nx}; }

  // Input plane q as rows of S: in place, or converted into `to`.
  PlaneRows<S> load_plane(int64_t q, S* to) {
    if (c_.read_direct) return rows_of(*c_.in, q);
    const ArrayDesc& a = *c_.in;
    const auto load = dispatch_real_dtype<LineIOAs<S>::template IO>(a.dtype).first;
    for (int64_t y = 0; y < c_.ny; ++y)
      load(a.data + q * a.strides[c_.march] + y * a.strides[c_.outer], a.strides[c_.inner], c_.nx, to + y * c_.nx);
    return buffer(to);
  }
  void store_plane(const S* from, int64_t z) {
    const ArrayDesc& a = *c_.out;
    const auto store = dispatch_real_dtype<LineIOAs<S>::template IO>(a.dtype).second;
    for (int64_t y = 0; y < c_.ny; ++y)
      store(from + y * c_.nx, a.data + z * a.strides[c_.march] + y * a.strides[c_.outer], a.strides[c_.inner], c_.nx);
  }

  // One row of results from tap rows of S (nullptr: cval, which is an E).
  void filter_row(const S* const* taps, int64_t count, const RowPass<E>& rp, S* dst) {
    bool any_cval = false;
    for (int64_t k = 0; k < rp.taps; ++k) any_cval |= taps[k] == nullptr;
    if constexpr (std::is_same_v<S, E>) {
      if (any_cval)
        for (int64_t k = 0; k < rp.taps; ++k) rows_[k] = taps[k] ? taps[k] : cval_row_.data();
      return direct_(any_cval ? rows_.data() : taps, count, rp, dst, nullptr);
    } else {
      if (!any_cval) return direct_(taps, count, rp, dst, nullptr);
      for (int64_t k = 0; k < rp.taps; ++k) {  // in E, where cval has its full precision
        E* row = ext_.data() + k * count;
        if (taps[k]) std::copy(taps[k], taps[k] + count, row);
        else std::fill(row, row + count, (E)c_.cval);
        e_rows_[k] = row;
      }
      from_e_(e_rows_.data(), count, rp, dst, nullptr);
    }
  }

  // dst = pass(src) on a whole plane; src and dst differ. Where both hold
  // their rows end to end (stride nx), the outputs whose taps all lie in the
  // plane's interior are one run of the plane read as one long row, computed
  // in one call: a call per row had cost more than the row's work (256
  // floats). Only the rows (axis 0) or row ends (axis 1) near the plane's
  // borders then take the border modes, row by row.
  void run_pass(const PlanePass<E>& p, PlaneRows<S> src, PlaneRows<S> dst) {
    if constexpr (std::is_same_v<S, E>)
      if (scans_windows(p.kind, p.taps, TapSource::Cache)) return scanned_pass(p, src, dst);
    const RowPass<E> rp = p.row_pass();
    const int64_t nx = c_.nx, ny = c_.ny;
    const bool packed = src.stride == nx && dst.stride == nx;
    if (p.axis == 1) {
      if (!packed || nx - p.taps + 1 < 8) {
        for (int64_t y = 0; y < ny; ++y) along_row(p, rp, src.row(y), dst.row(y));
        return;
      }
      // Outputs [left, nx * ny - right) of the plane as one row: those of
      // each row's interior, and the row ends, whose taps run into the next
      // row, overwritten below.
      for (int64_t k = 0; k < p.taps; ++k) taps_row_[k] = src.base + k;
      direct_(taps_row_.data(), nx * ny - p.taps + 1, rp, dst.base + p.left, nullptr);
      for (int64_t y = 0; y < ny; ++y) row_ends(p, rp, src.row(y), dst.row(y));
      return;
    }
    std::vector<const S*>& taps = taps_;
    taps.resize(p.taps);
    int64_t inner0 = ny, inner1 = ny;  // rows [inner0, inner1) computed in one call
    if (packed && ny >= p.taps) {      // those whose taps are all rows of the plane
      inner0 = p.left;
      inner1 = p.left + ny - p.taps + 1;
      for (int64_t k = 0; k < p.taps; ++k) taps[k] = src.row(k);
      direct_(taps.data(), (inner1 - inner0) * nx, rp, dst.row(inner0), nullptr);
    }
    auto border_row = [&](int64_t y) {
      for (int64_t k = 0; k < p.taps; ++k) {
        const int64_t q = border_index(y - p.left + k, ny, p.mode);
        taps[k] = q < 0 ? nullptr : src.row(q);
      }
      filter_row(taps.data(), nx, rp, dst.row(y));
    };
    for (int64_t y = 0; y < inner0; ++y) border_row(y);
    for (int64_t y = inner1; y < ny; ++y) border_row(y);
  }

  // run_pass for minima, maxima and means that scan (cpu_extremes.hpp; S is E):
  // across the rows, every output row from the plane's rows or cval's; along
  // each row, from the row extended.
  void scanned_pass(const PlanePass<E>& p, PlaneRows<S> src, PlaneRows<S> dst) {
    const int64_t nx = c_.nx, ny = c_.ny;
    if (p.axis == 1) {
      for (int64_t y = 0; y < ny; ++y) {
        extend_row(p, src.row(y), -p.left, nx + p.taps - 1, ext_.data());
        scans_.line(ext_.data(), nx, p.taps, dst.row(y), level_.data(), p.kind);
      }
      return;
    }
    taps_.resize(ny + p.taps - 1);
    out_rows_.resize(ny);
    for (int64_t k = 0; k < ny + p.taps - 1; ++k) {
      const int64_t q = border_index(k - p.left, ny, p.mode);
      taps_[k] = q < 0 ? cval_row_.data() : src.row(q);
    }
    for (int64_t y = 0; y < ny; ++y) out_rows_[y] = dst.row(y);
    scans_.rows(taps_.data(), ny, p.taps, nx, out_rows_.data(), heads_.data(), p.kind);
  }

  // to[m] = the row src at position first + m, extended past its ends, in E
  // (cval in full), for m < count: the positions inside the row copied, the
  // others mapped (border_index).
  void extend_row(const PlanePass<E>& p, const S* src, int64_t first, int64_t count, E* to) const {
    const int64_t nx = c_.nx;
    const int64_t lo = std::clamp<int64_t>(-first, 0, count), hi = std::clamp<int64_t>(nx - first, lo, count);
    auto outside = [&](int64_t m) {
      const int64_t q = border_index(first + m, nx, p.mode);
      to[m] = q < 0 ? (E)c_.cval : (E)src[q];
    };
    for (int64_t m = 0; m < lo; ++m) outside(m);
    for (int64_t m = lo; m < hi; ++m) to[m] = (E)src[first + m];
    for (int64_t m = hi; m < count; ++m) outside(m);
  }

  // Outputs [first, first + count) of a pass along one row, from the row
  // extended past its ends.
  void extended_run(const PlanePass<E>& p, const RowPass<E>& rp, const S* src, S* dst, int64_t first,
                    int64_t count) {
    extend_row(p, src, first - p.left, count + p.taps - 1, ext_.data());
    for (int64_t k = 0; k < p.taps; ++k) e_rows_[k] = ext_.data() + k;
    from_e_(e_rows_.data(), count, rp, dst + first, nullptr);
  }

  // The outputs near the ends of a row, whose taps reach past them, in one
  // call: the windows of the left end's outputs and of the right end's lie
  // end to end in ext_, and the outputs between the two ends' (taps - 1 of
  // them, read from both) are computed and dropped. Two calls of one vector
  // each had cost a third of a 33-tap pass along 256-element rows.
  void row_ends(const PlanePass<E>& p, const RowPass<E>& rp, const S* src, S* dst) {
    const int64_t nx = c_.nx, right = p.taps - 1 - p.left, second = p.left + p.taps - 1;  // right end's window
    extend_row(p, src, -p.left, second, ext_.data());
    extend_row(p, src, nx - right - p.left, right + p.taps - 1, ext_.data() + second);
    for (int64_t k = 0; k < p.taps; ++k) e_rows_[k] = ext_.data() + k;
    from_e_(e_rows_.data(), second + right, rp, ends_.data(), nullptr);
    std::copy(ends_.data(), ends_.data() + p.left, dst);
    std::copy(ends_.data() + second, ends_.data() + second + right, dst + nx - right);
  }

  // A pass along one row: outputs whose taps all lie in the row read it in
  // place; those near its ends read the row extended.
  void along_row(const PlanePass<E>& p, const RowPass<E>& rp, const S* src, S* dst) {
    const int64_t inside = c_.nx - p.taps + 1;  // outputs [left, nx - right)
    if (inside < 8) return extended_run(p, rp, src, dst, 0, c_.nx);
    for (int64_t k = 0; k < p.taps; ++k) taps_row_[k] = src + k;
    direct_(taps_row_.data(), inside, rp, dst + p.left, nullptr);
    row_ends(p, rp, src, dst);
  }

  // `passes` from `src` into output plane z, through the buffers a_ and b_.
  void finish_plane(int64_t z, PlaneRows<S> src, const std::vector<PlanePass<E>>& passes) {
    for (size_t i = 0; i < passes.size(); ++i) {
      const bool last = i + 1 == passes.size();
      PlaneRows<S> dst = last && c_.write_direct ? rows_of(*c_.out, z)
                                                : buffer(src.base == a_.data() ? b_.data() : a_.data());
      run_pass(passes[i], src, dst);
      src = dst;
    }
    if (passes.empty() || !c_.write_direct) store_plane(src.base, z);
  }

  // The plane the first pass of a chain without a march pass reads.
  PlaneRows<S> first_source(int64_t z) { return load_plane(z, b_.data()); }  // the first pass writes a_

  // Input plane q after the passes before the march pass, from the ring.
  const S* ring_plane(int64_t q) {
    const int64_t taps = c_.across.taps;
    int64_t s = std::find(tags_.begin(), tags_.end(), q) - tags_.begin();
    if (s < taps) return ring_.data() + s * slot_;
    s = 0;  // an empty slot, or one that no tap of this output plane reads
    const auto wanted_end = wanted_.begin() + taps;  // (a ring computes one plane at a time)
    while (tags_[s] >= 0 && std::find(wanted_.begin(), wanted_end, tags_[s]) != wanted_end) ++s;
    tags_[s] = q;
    S* slot = ring_.data() + s * slot_;
    const size_t m = c_.before.size();
    PlaneRows<S> src = load_plane(q, m ? a_.data() : slot);
    if (m == 0 && src.base != slot)
      for (int64_t y = 0; y < c_.ny; ++y) std::memcpy(slot + y * c_.nx, src.row(y), c_.nx * sizeof(S));
    for (size_t i = 0; i < m; ++i) {  // ends in the slot
      PlaneRows<S> dst = buffer((m - 1 - i) % 2 == 0 ? slot : b_.data());
      run_pass(c_.before[i], src, dst);
      src = dst;
    }
    return slot;
  }

  // Rows of output planes z .. z + n - 1 (n = 2 or 4; 4 for float window
  // means only) from the taps + n - 1 rows of input that their windows span
  // (nullptr: cval), each row loaded once for all.
  void group_rows(const S** taps, const RowPass<E>& rp, int64_t n, S* const* dst) {
    const int64_t rows = rp.taps + n - 1;
    const bool any_cval = std::find(taps, taps + rows, nullptr) != taps + rows;
    if constexpr (std::is_same_v<S, E>) {
      for (int64_t k = 0; k < rows; ++k)
        if (!taps[k]) taps[k] = cval_row_.data();
    } else if (any_cval) {  // in E, where cval has its full precision: row by row
      for (int64_t i = 0; i < n; ++i) filter_row(taps + i, c_.nx, rp, dst[i]);
      return;
    }
    if constexpr (std::is_same_v<S, float> && std::is_same_v<E, float>)
      if (rp.kind == LineKind::Uniform)
        return n == 4 ? mean_quad_(taps, c_.nx, rp.size, dst) : mean_pair_(taps, c_.nx, rp.size, dst);
    direct_(taps, c_.nx, rp, dst[0], dst[1]);
  }

  // Output plane z: the march pass, then the passes after it. Planes after z
  // in the run whose march pass was computed with it (c_.group) wait in ahead_.
  void across_plane(int64_t z, int64_t z1) {
    const PlanePass<E>& p = c_.across;
    const bool last = c_.after.empty();
    if (z > group_z_ && z < group_z_ + group_n_) {
      if (!ahead_.empty()) a_.swap(ahead_[z - group_z_ - 1]);  // else written to the output already
    } else {
      // (With a ring, groups of one plane: the means' bits must not depend on the path.)
      const bool scans = std::is_same_v<S, E> && scans_windows(p.kind, p.taps, TapSource::Memory);
      const int64_t n = scans ? std::min<int64_t>(c_.group, z1 - z)
                        : c_.group >= 4 && z1 - z >= 4 ? 4
                        : c_.group >= 2 && z1 - z >= 2 ? 2
                                                       : 1;
      const int64_t taps = p.taps + n - 1;
      for (int64_t k = 0; k < taps; ++k) wanted_[k] = border_index(z - p.left + k, c_.nz, p.mode);
      if (uses_ring())
        for (int64_t k = 0; k < taps; ++k) slots_[k] = wanted_[k] < 0 ? nullptr : ring_plane(wanted_[k]);
      dst_.resize(n);
      for (int64_t i = 0; i < n; ++i)
        dst_[i] = last && c_.write_direct ? rows_of(*c_.out, z + i) : buffer(i ? ahead_[i - 1].data() : a_.data());
      const RowPass<E> rp = p.row_pass();
      taps_.resize(taps);
      out_rows_.resize(n);
      S** rows = out_rows_.data();
      const S* cval_row = nullptr;  // where the rows read cval: scanned extremes read it as S, which is E
      if constexpr (std::is_same_v<S, E>)
        if (scans) cval_row = cval_row_.data();
      for (int64_t y = 0; y < c_.ny; ++y) {
        for (int64_t k = 0; k < taps; ++k)
          taps_[k] = wanted_[k] < 0 ? cval_row
                     : uses_ring() ? slots_[k] + y * c_.nx
                                   : rows_of(*c_.in, wanted_[k]).row(y);
        for (int64_t i = 0; i < n; ++i) rows[i] = dst_[i].row(y);
        if constexpr (std::is_same_v<S, E>)
          if (scans) {
            scans_.rows(taps_.data(), n, p.taps, c_.nx, rows, heads_.data(), p.kind);
            continue;
          }
        if (n > 1) group_rows(taps_.data(), rp, n, rows);
        else filter_row(taps_.data(), c_.nx, rp, rows[0]);
      }
      group_z_ = z;
      group_n_ = n;
    }
    if (!last) finish_plane(z, buffer(a_.data()), c_.after);
    else if (!c_.write_direct) store_plane(a_.data(), z);
  }

  const PlaneChain<E>& c_;
  const int64_t plane_, slot_;
  const FilterSpan<S, E, S> direct_ = span_kernel<S, E, S, R>();
  const FilterSpan<E, E, S> from_e_ = span_kernel<E, E, S, R>();
  const MeanGroup<2> mean_pair_ = mean_group_kernel<2>();
  const MeanGroup<4> mean_quad_ = mean_group_kernel<4>();
  const WindowScans<S> scans_ = window_scans<S>();
  int64_t group_z_ = -1, group_n_ = 0;  // the last such group: planes [group_z_, group_z_ + group_n_)
  std::vector<S> a_, b_, ring_, ends_;  // ends_: row_ends' results
  std::vector<S> heads_, level_;        // scratch of the scanned extremes
  std::vector<PlaneRows<S>> dst_;       // the output planes of a group
  std::vector<S*> out_rows_;
  std::vector<std::vector<S>> ahead_;  // the march pass of planes group_z_ + 1 ...
  std::vector<E> ext_, cval_row_;
  std::vector<int64_t> tags_, wanted_;
  std::vector<const S*> slots_, taps_, taps_row_;
  std::vector<const E*> rows_, e_rows_;
};

// Rows of `a` along `inner`, rows after rows along `outer`, planes along
// `march`: all of S (a's own storage), unit-stride, aligned.
template <class S>
bool rows_in_place(const ArrayDesc& a, int march, int outer, int inner) {
  constexpr int64_t item = sizeof(S);
  return a.dtype == (std::is_same_v<S, float> ? DType::Float32 : DType::Float64) && a.strides[inner] == item &&
         a.strides[outer] % item == 0 && a.strides[march] % item == 0 &&
         reinterpret_cast<uintptr_t>(a.data) % alignof(S) == 0;
}

template <class S, class E, class R = void>
void run_plane_chain(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& passes, double cval,
                     int march, int threads) {
  PlaneChain<E> c;
  c.in = &in;
  c.out = &out;
  c.march = march;
  int others[2], n = 0;
  for (int d = 0; d < 3; ++d)
    if (d != march) others[n++] = d;
  const bool swap = std::llabs(in.strides[others[0]]) < std::llabs(in.strides[others[1]]);
  c.outer = swap ? others[1] : others[0];
  c.inner = swap ? others[0] : others[1];
  c.nz = in.shape[march];
  c.ny = in.shape[c.outer];
  c.nx = in.shape[c.inner];
  for (const LinePass& p : passes) {
    if (p.axis == march) {
      c.has_across = true;
      c.across = plane_pass<E, R>(p, 0);
    } else {
      (c.has_across ? c.after : c.before).push_back(plane_pass<E, R>(p, p.axis == c.outer ? 0 : 1));
    }
  }
  if (!c.has_across) std::swap(c.before, c.after);  // no march pass: all run on the output plane
  c.read_direct = rows_in_place<S>(in, march, c.outer, c.inner);
  c.write_direct = rows_in_place<S>(out, march, c.outer, c.inner);
  c.cval = cval;
  c.copy_to_ring = c.has_across && c.ny == 1;
  if (c.has_across && !c.uses_ring()) {  // four planes of float window means, two of correlations
    const bool float_mean = std::is_same_v<S, float> && std::is_same_v<E, float> &&
                            c.across.kind == LineKind::Uniform && c.across.taps >= 4;
    // Scanned extremes: blocks of as many planes as the window (cpu_extremes.hpp).
    c.group = scans_windows(c.across.kind, c.across.taps, TapSource::Memory) ? c.across.taps
              : float_mean                                  ? 4
              : c.across.kind == LineKind::Correlate       ? 2
                                                           : 1;
  }
  // Contiguous runs of planes, taken dynamically: a thread that the OS
  // preempts does not hold up the others. With a ring, a run's first planes
  // are computed twice: two runs per thread; without, about sixteen, each of
  // at least one group where the planes allow that and a run per thread.
  // (Runs of two groups, two a thread, balanced worse: uniform 9 on 256^3
  // with 16 threads 3.55-4.22 ms, with runs of one group 3.04-3.66.)
  const bool ring = c.has_across && c.uses_ring();
  const int64_t grouped = c.group > 1 ? c.nz / c.group : c.nz;
  const int64_t wanted = std::max<int64_t>(threads, std::min<int64_t>(grouped, (ring ? 2 : 16) * threads));
  const int64_t runs = threads > 1 ? std::min<int64_t>(c.nz, wanted) : 1;
  parallel_region(runs > 1, threads, [&] {
    PlaneWorker<S, E, R> worker(c);
    dynamic_loop(runs, 1, [&](int64_t r) { worker.planes(c.nz * r / runs, c.nz * (r + 1) / runs); });
  });
}

// ---- 2-D chains in one sweep -----------------------------------------------------
// A 2-D array's chain of one pass across its rows (along the march axis, the
// outer one in memory) and at most one along them, before or after it, in one
// sweep: output rows are produced in blocks, from a ring of the rows the pass
// across reads (after the pass along them, when that comes first). Rows too
// long for the ring to stay in cache are taken in strips of columns, whose
// segments reach past the strip by the pass along the rows' reach: those
// columns are read through border_index, so a segment holds exactly what
// that pass reads of its line, as pass by pass. Every element sees the same
// operations in the same order as pass by pass, each intermediate rounded as
// scipy stores it. (Narrow strips, to keep the ring in L1, were slower:
// memory is then read and written in short pieces.)

// The ring of one worker stays under this (L2 caches are 0.5-2 MiB).
constexpr int64_t kStripBytes = 1 << 20;
// Strips are at least this many columns wide.
constexpr int64_t kMinStrip = 256;
// Input rows are requested this many rows before the ring reads them.
constexpr int64_t kRowsAhead = 4;
// Output rows computed together, from taps + kBlockRows - 1 rows of the ring
// (fewer were slower; so were chunks of columns sized for L1).
constexpr int64_t kBlockRows = 8;

template <class E>
struct StripChain {
  const ArrayDesc *in, *out;
  int march, inner;  // array axes: rows along march, columns along inner
  int64_t nz, nx;
  PlanePass<E> across, along;
  bool has_along = false, along_first = false;
  double cval;
  int64_t strip;              // columns per strip
  int64_t block = kBlockRows;  // output rows computed together (scanned extremes: the window's length)
  bool scans = false;         // the pass across: scanned extremes (cpu_extremes.hpp)
};

// Runs of n values between the array's storage St and buffers of S: exact
// (S holds every St value; results of S are values of St, store_lanes).
// Unit-stride runs take their own loop, whose constant stride vectorises.
template <class St, class S>
void load_run(const char* src, int64_t stride, int64_t n, S* dst) {
  auto at = [](const char* p) {
    St v;
    std::memcpy(&v, p, sizeof v);
    return (S)v;
  };
  if (stride == (int64_t)sizeof(St))
    for (int64_t i = 0; i < n; ++i) dst[i] = at(src + i * sizeof(St));
  else
    for (int64_t i = 0; i < n; ++i) dst[i] = at(src + i * stride);
}
template <class St, class S>
void store_run(const S* src, char* dst, int64_t stride, int64_t n) {
  auto put = [](char* p, S x) {
    St v;
    if constexpr (std::is_integral_v<St>) v = (St)(int32_t)x;
    else v = (St)x;
    std::memcpy(p, &v, sizeof v);
  };
  if (stride == (int64_t)sizeof(St))
    for (int64_t i = 0; i < n; ++i) put(dst + i * sizeof(St), src[i]);
  else
    for (int64_t i = 0; i < n; ++i) put(dst + i * stride, src[i]);
}

template <class S>
using LoadRun = void (*)(const char*, int64_t, int64_t, S*);
template <class S>
using StoreRun = void (*)(const S*, char*, int64_t, int64_t);
#if defined(GPUFILT_ISA_COPIES)
// The conversions of 8-bit data take twice the values per instruction.
template <class St, class S>
GF_AVX2 void load_run_avx2(const char* src, int64_t stride, int64_t n, S* dst) {
  load_run<St>(src, stride, n, dst);
}
template <class St, class S>
GF_AVX2 void store_run_avx2(const S* src, char* dst, int64_t stride, int64_t n) {
  store_run<St>(src, dst, stride, n);
}
#endif
template <class St, class S>
std::pair<LoadRun<S>, StoreRun<S>> run_kernels() {
#if defined(GPUFILT_ISA_COPIES)
  if (cpu_isa() >= CpuIsa::Avx2) return {&load_run_avx2<St, S>, &store_run_avx2<St, S>};
#endif
  return {&load_run<St, S>, &store_run<St, S>};
}

// One thread's rows [z0, z1), strip after strip, with its own buffers. S, E
// and R as PlaneWorker's; St is the array's storage.
template <class S, class E, class R = void>
class StripWorker {
  using St = std::conditional_t<std::is_void_v<R>, S, R>;

 public:
  explicit StripWorker(const StripChain<E>& c)
      : c_(c), reach_(c.has_along ? c.along.taps - 1 : 0), slot_(ring_slot(c.strip + reach_)),
        stride_(c.strip + reach_) {
    const int64_t slots = c.across.taps + c.block - 1;  // the rows that a block of outputs reads
    ring_.reset(new S[slots * slot_]);
    cval_slot_.assign(slots, false);
    segment_.reset(new S[c.block * stride_]);
    result_.reset(new S[c.block * stride_]);
    columns_.resize(stride_);
    rows_.resize(std::max(slots, c.has_along ? c.along.taps : 1));
    e_rows_.resize(rows_.size());
    out_rows_.resize(c.block);
    heads_.resize(scan_heads_elements<S>(2 * c.across.taps));  // a block's outputs + taps rows
    level_.resize(stride_);
  }

  void rows(int64_t z0, int64_t z1) {
    for (int64_t x0 = 0; x0 < c_.nx; x0 += c_.strip) strip(x0, std::min(c_.nx, x0 + c_.strip), z0, z1);
  }

 private:
  // Elements between ring slots: whole cache lines, an odd number of them,
  // so that the rows one output reads fall in different sets of the cache.
  static int64_t ring_slot(int64_t n) {
    constexpr int64_t line = 64 / sizeof(S);
    return (((n + line - 1) / line) | 1) * line;
  }

  void strip(int64_t x0, int64_t x1, int64_t z0, int64_t z1) {
    const PlanePass<E>& p = c_.across;
    const int64_t width = x1 - x0;
    left_ = c_.has_along ? c_.along.left : 0;
    segment_width_ = width + reach_;
    // The segment's columns: those the pass along the rows reads, through its mode.
    edge_cval_ = false;
    for (int64_t m = 0; m < segment_width_; ++m) {
      const int64_t x = x0 - left_ + m;
      columns_[m] = x >= 0 && x < c_.nx ? x : border_index(x, c_.nx, c_.has_along ? c_.along.mode : Mode::Nearest);
      edge_cval_ |= columns_[m] < 0;
    }
    first_ = std::max<int64_t>(0, std::min(segment_width_, left_ - x0));  // columns_ in place: [first_, end_)
    end_ = std::max(first_, std::min(segment_width_, c_.nx - (x0 - left_)));
    slot_width_ = c_.along_first ? width : segment_width_;
    const int64_t taps = p.taps;
    for (int64_t j = z0 - p.left; j < z0 - p.left + taps - 1; ++j) fill_slot(j);
    const RowPass<E> rp = p.row_pass();
    const bool after = c_.has_along && !c_.along_first;
    for (int64_t z = z0; z < z1; z += c_.block) {
      const int64_t n = std::min(c_.block, z1 - z);
      for (int64_t i = 0; i < n; ++i) fill_slot(z - p.left + taps - 1 + i);
      for (int64_t i = 0; i < n; ++i) prefetch_input(z - p.left + taps - 1 + n + kRowsAhead + i);
      across_block(z, n, rp, after ? segment_.get() : result_.get());
      for (int64_t i = 0; i < n; ++i) {
        S* result = result_.get() + i * stride_;
        if (after) along(segment_.get() + i * stride_, width, result);
        char* row = c_.out->data + (z + i) * c_.out->strides[c_.march] + x0 * c_.out->strides[c_.inner];
        runs_.second(result, row, c_.out->strides[c_.inner], width);
      }
    }
  }

  // The pass across for output rows [z, z + n) into out (rows stride_
  // apart), two rows at a time: their taps share loads.
  void across_block(int64_t z, int64_t n, const RowPass<E>& rp, S* out) {
    const PlanePass<E>& p = c_.across;
    if constexpr (std::is_same_v<S, E>)
      if (c_.scans) {  // cval read as S, which is E
        for (int64_t k = 0; k < p.taps + n - 1; ++k) {
          const int64_t s = slot_of(z - p.left + k);
          rows_[k] = cval_slot_[s] ? cval_row() : ring_.get() + s * slot_;
        }
        for (int64_t i = 0; i < n; ++i) out_rows_[i] = out + i * stride_;
        return scans_.rows(rows_.data(), n, p.taps, slot_width_, out_rows_.data(), heads_.data(), p.kind);
      }
    bool any_cval = false;
    for (int64_t k = 0; k < p.taps + n - 1; ++k) {
      const int64_t s = slot_of(z - p.left + k);
      rows_[k] = ring_.get() + s * slot_;
      any_cval |= cval_slot_[s];
    }
    if (any_cval) {  // the first and last rows only
      for (int64_t i = 0; i < n; ++i) across_in_e(z + i, rp, out + i * stride_);
      return;
    }
    int64_t i = 0;
    for (; i + 2 <= n; i += 2) direct_(rows_.data() + i, slot_width_, rp, out + i * stride_, out + (i + 1) * stride_);
    if (i < n) direct_(rows_.data() + i, slot_width_, rp, out + i * stride_, nullptr);
  }

  int64_t slot_of(int64_t j) const {
    const int64_t slots = c_.across.taps + c_.block - 1, s = j % slots;
    return s < 0 ? s + slots : s;
  }

  // Rows of E (for the passes that read cval), made at the first use.
  E* e_buffer() {
    if (e_segment_.empty()) e_segment_.resize(c_.across.taps * stride_);
    return e_segment_.data();
  }
  const E* cval_row() {
    if (cval_row_.empty()) cval_row_.assign(stride_, (E)c_.cval);
    return cval_row_.data();
  }

  // The pass across for output row z, in E, where cval has its full precision.
  void across_in_e(int64_t z, const RowPass<E>& rp, S* dst) {
    const PlanePass<E>& p = c_.across;
    for (int64_t k = 0; k < p.taps; ++k) {
      const int64_t s = slot_of(z - p.left + k);
      E* row = e_buffer() + k * slot_width_;
      const S* slot = ring_.get() + s * slot_;
      if (cval_slot_[s]) e_rows_[k] = cval_row();
      else std::copy(slot, slot + slot_width_, row), e_rows_[k] = row;
    }
    from_e_(e_rows_.data(), slot_width_, rp, dst, nullptr);
  }

  // The slot of extended row j: its input row's segment (after the pass along
  // the rows when that comes first), or cval.
  void fill_slot(int64_t j) {
    const int64_t s = slot_of(j), q = border_index(j, c_.nz, c_.across.mode);
    cval_slot_[s] = q < 0;
    if (q < 0) return;
    S* slot = ring_.get() + s * slot_;
    S* dst = c_.along_first ? segment_.get() : slot;
    load_segment(q, dst);
    if (c_.along_first) along(segment_.get(), slot_width_, slot);
  }

  void load_segment(int64_t q, S* dst) {
    const ArrayDesc& a = *c_.in;
    const char* row = a.data + q * a.strides[c_.march];
    const int64_t stride = a.strides[c_.inner];
    if (end_ > first_) runs_.first(row + columns_[first_] * stride, stride, end_ - first_, dst + first_);
    auto mapped = [&](int64_t m) {  // cval columns: the pass along reads them in E
      if (columns_[m] >= 0) load_run<St>(row + columns_[m] * stride, stride, 1, dst + m);
      else dst[m] = S{};
    };
    for (int64_t m = 0; m < first_; ++m) mapped(m);
    for (int64_t m = end_; m < segment_width_; ++m) mapped(m);
  }

  void prefetch_input(int64_t j) {
    const int64_t q = border_index(j, c_.nz, c_.across.mode);
    if (q < 0 || end_ <= first_) return;
    const ArrayDesc& a = *c_.in;
    const int64_t stride = a.strides[c_.inner];
    prefetch_row(a.data + q * a.strides[c_.march] + columns_[first_] * stride, (end_ - first_) * stride);
  }

  // The pass along the rows: `count` outputs from segment `src`, whose
  // columns the pass reads start at output 0's first tap.
  void along(const S* src, int64_t count, S* dst) {
    const PlanePass<E>& p = c_.along;
    const RowPass<E> rp = p.row_pass();
    if constexpr (std::is_same_v<S, E>)
      if (scans_windows(p.kind, p.taps, TapSource::Cache)) {  // cval read as S, which is E
        if (edge_cval_) {
          E* e = e_buffer();
          for (int64_t m = 0; m < count + p.taps - 1; ++m) e[m] = columns_[m] < 0 ? (E)c_.cval : src[m];
          src = e;
        }
        return scans_.line(src, count, p.taps, dst, level_.data(), p.kind);
      }
    if (!edge_cval_) {
      for (int64_t k = 0; k < p.taps; ++k) rows_[k] = src + k;
      return direct_(rows_.data(), count, rp, dst, nullptr);
    }
    E* e = e_buffer();  // in E, where cval has its full precision
    for (int64_t m = 0; m < count + p.taps - 1; ++m) e[m] = columns_[m] < 0 ? (E)c_.cval : (E)src[m];
    for (int64_t k = 0; k < p.taps; ++k) e_rows_[k] = e + k;
    from_e_(e_rows_.data(), count, rp, dst, nullptr);
  }

  const StripChain<E>& c_;
  const int64_t reach_, slot_, stride_;  // stride_: between the rows of segment_ and of result_
  int64_t left_ = 0, segment_width_ = 0, slot_width_ = 0, first_ = 0, end_ = 0;
  bool edge_cval_ = false;
  const FilterSpan<S, E, S> direct_ = span_kernel<S, E, S, R>();
  const FilterSpan<E, E, S> from_e_ = span_kernel<E, E, S, R>();
  const std::pair<LoadRun<S>, StoreRun<S>> runs_ = run_kernels<St, S>();
  const WindowScans<S> scans_ = window_scans<S>();
  std::unique_ptr<S[]> ring_, segment_, result_;  // uninitialised
  std::vector<S> heads_, level_;                   // scratch of the scanned extremes
  std::vector<S*> out_rows_;
  std::vector<E> e_segment_, cval_row_;            // made when a pass reads cval
  std::vector<bool> cval_slot_;
  std::vector<int64_t> columns_;
  std::vector<const S*> rows_;
  std::vector<const E*> e_rows_;
};

template <class S, class E, class R = void>
void run_strip_chain(const StripChain<E>& c, int threads) {
  // Contiguous runs of rows, taken dynamically (a thread that the OS
  // preempts does not hold up the others): up to sixteen per thread, each at
  // least eight times the rows its ring first reads again.
  const int64_t runs = threads > 1 ? std::clamp<int64_t>(c.nz / (8 * c.across.taps), 1, 16 * threads) : 1;
  parallel_region(runs > 1, threads, [&] {
    StripWorker<S, E, R> worker(c);
    dynamic_loop(runs, 1, [&](int64_t r) { worker.rows(c.nz * r / runs, c.nz * (r + 1) / runs); });
  });
}

template <class S, class E, class R>
void run_strip_chain(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& passes, double cval,
                     int march, int threads) {
  StripChain<E> c;
  c.in = &in;
  c.out = &out;
  c.march = march;
  c.inner = 1 - march;
  c.nz = in.shape[march];
  c.nx = in.shape[c.inner];
  c.cval = cval;
  bool across_seen = false;
  for (const LinePass& p : passes) {
    if (p.axis == march) {
      c.across = plane_pass<E, R>(p, 0);
      across_seen = true;
    } else {
      c.has_along = true;
      c.along_first = !across_seen;
      c.along = plane_pass<E, R>(p, 1);
    }
  }
  c.scans = std::is_same_v<S, E> && scans_windows(c.across.kind, c.across.taps, TapSource::Ring);
  if (c.scans) c.block = c.across.taps;
  const int64_t reach = c.has_along ? c.along.taps - 1 : 0;
  const int64_t fits = kStripBytes / ((c.across.taps + c.block - 1) * (int64_t)sizeof(S)) - reach;
  c.strip = std::min(c.nx, std::max<int64_t>(kMinStrip, fits / 64 * 64));
  run_strip_chain<S, E, R>(c, threads);
}

// The march axis: the largest stride among axes longer than 1.
int march_axis(const ArrayDesc& a) {
  int best = 0;
  for (int d = 1; d < a.ndim; ++d)
    if (a.shape[d] > 1 && (a.shape[best] == 1 || std::llabs(a.strides[d]) > std::llabs(a.strides[best]))) best = d;
  return best;
}

// 8- and 16-bit integers: correlations summed in double as scipy sums them,
// whose results (each pass's, truncated to the dtype as scipy stores them)
// stay within int32 whatever the data, so that vectors convert them.
bool fuses_integers(const ArrayDesc& in, const std::vector<LinePass>& passes, double cval) {
  double largest = 0.0;
  switch (in.dtype) {
    case DType::Int8: largest = 128.0; break;
    case DType::UInt8: largest = 255.0; break;
    case DType::Int16: largest = 32768.0; break;
    case DType::UInt16: largest = 65535.0; break;
    default: return false;
  }
  for (const LinePass& p : passes) {
    if (p.kind != LineKind::Correlate) return false;
    const double x = p.mode == Mode::Constant ? std::max(largest, std::fabs(cval)) : largest;
    double total = 0.0;
    for (double w : p.weights) total += std::fabs(w);
    if (!(x * total < 0x1p30)) return false;  // also NaN and infinite weights or cval
  }
  return true;
}

// Volumes whose pass across planes is a correlation of more taps than this
// run pass by pass: the fused sweep reads the pass's window of planes
// again for every pair of output planes, which costs more than a sweep a
// pass once the window is long. Xeon (the GPU machine's), fused against pass
// by pass, one thread and 16: gaussian sigma 3 (25 taps) on 256^3 110.9 and
// 9.05 ms against 63.6 and 6.32, on 256x160x160 32.2 and 2.48 against 30.2
// and 2.64; sigma 4 (33) on 256x128x128 31.0 and 2.71 against 23.2 and
// 2.17; sigma 2 (17) on 256^3 63.2 and 5.22 against 55.9 and 5.40, on
// 256x200x200 37.4 and 2.85 against 41.2 and 3.58; sigma 1 (9) 1.3-1.6x
// faster fused, also with 7 MiB windows.
constexpr int64_t kMaxFusedMarchTaps = 17;
// The same for 16-bit integers, held as floats and summed in double: their
// march pass converts every tap it loads, where a pass along the axis
// converts each element once. This 2-core Xeon, one thread, uint16
// gaussian_filter on 256^3, fused against pass by pass: sigma 0.75 (7 taps)
// 47.1 and 47.4 ms, sigma 1 (9) 60.2 and 52.5, sigma 2 (17) 105.8 and 82.6.
// (8-bit data, summed in float, are faster fused at every sigma up to 2.)
constexpr int64_t kMaxFusedMarchTaps16 = 7;

template <class T>
struct Tag {
  using type = T;
};

// Calls f(Tag<S>, Tag<E>, Tag<R>) with the types a fused chain of dtype t
// runs in (PlaneWorker): false for the dtypes that none runs in.
template <class F>
bool with_chain_types(DType t, bool in_float, F&& f) {
  switch (t) {
    case DType::Float32:
      if (in_float) f(Tag<float>{}, Tag<float>{}, Tag<void>{});
      else f(Tag<float>{}, Tag<double>{}, Tag<void>{});
      return true;
    case DType::Float64: f(Tag<double>{}, Tag<double>{}, Tag<void>{}); return true;
    case DType::Int8: f(Tag<float>{}, Tag<double>{}, Tag<int8_t>{}); return true;
    case DType::UInt8: f(Tag<float>{}, Tag<double>{}, Tag<uint8_t>{}); return true;
    case DType::Int16: f(Tag<float>{}, Tag<double>{}, Tag<int16_t>{}); return true;
    case DType::UInt16: f(Tag<float>{}, Tag<double>{}, Tag<uint16_t>{}); return true;
    default: return false;
  }
}

// Whether a chain runs plane by plane, and then in float (else double).
// `rows`: the planes are the rows of a 2-D array (as_volume), whose windows
// of rows stay in cache whatever the pass's length.
// In place (`in` is `out`) only without a pass across planes and with two
// passes or more: each plane is then read whole by the first pass before the
// last one writes it, and no other plane reads it.
bool plan_plane_chain(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& passes, double cval,
                      bool rows, int& march, bool& in_float) {
  if (in.ndim != 3 || in.size() < kFusedMinSize || in.dtype != out.dtype || passes.empty()) return false;
  march = march_axis(in);
  if (in.dtype != DType::Float32 && in.dtype != DType::Float64 && !fuses_integers(in, passes, cval)) return false;
  in_float = sums_in_float(in, out, passes[0], cval);
  int across = 0;
  int64_t across_taps = 1;
  for (const LinePass& p : passes) {
    if (sums_in_float(in, out, p, cval) != in_float) return false;
    // scipy's running sum in double carries along the whole line: pass by pass.
    if (p.kind == LineKind::Uniform && !in_float) return false;
    // float32 data summed in double: correlations only (filter_span).
    if (in.dtype == DType::Float32 && !in_float && p.kind != LineKind::Correlate) return false;
    if (p.axis == march) {
      ++across, across_taps = p.taps();
      const bool int16 = in.dtype == DType::Int16 || in.dtype == DType::UInt16;
      if (!rows && p.kind == LineKind::Correlate && across_taps > (int16 ? kMaxFusedMarchTaps16 : kMaxFusedMarchTaps))
        return false;
    }
  }
  if (across > 1) return false;
  if (may_overlap(in, out) && (!same_layout(in, out) || across || passes.size() < 2)) return false;
  // The window of planes the march pass reads, held as the worker's S.
  int64_t held = 0;
  with_chain_types(in.dtype, in_float, [&](auto s, auto, auto) { held = sizeof(typename decltype(s)::type); });
  const int64_t plane = in.size() / in.shape[march];
  return across_taps * plane * held <= kFusedWindowBytes;
}

// A 2-D array as a volume of planes that are single rows, (n0, 1, n1): its
// chain then runs row by row in one sweep, the pass along the rows' axis
// combining a window of rows held in cache. The unit axis gets a stride
// larger than any other, so it is never the march or the inner axis.
ArrayDesc as_volume(const ArrayDesc& a) {
  ArrayDesc v = a;
  v.ndim = 3;
  v.shape[1] = 1;
  v.shape[2] = a.shape[1];
  v.strides[2] = a.strides[1];
  const int64_t item = itemsize(a.dtype);
  v.strides[1] = (std::max(std::llabs(a.strides[0]), std::llabs(a.strides[1])) / item + 1) * item;
  return v;
}

std::vector<LinePass> as_volume(std::vector<LinePass> passes) {
  for (LinePass& p : passes) p.axis = p.axis == 0 ? 0 : 2;
  return passes;
}

// 2-D arrays whose rows are shorter than this are left to the line passes:
// a row's fixed costs would outweigh its work.
constexpr int64_t kFusedMinRow = 64;

// Whether a 2-D chain (as_volume's view, `march` 0 or 2) runs in column
// strips: one pass across the rows, at most one along them.
bool fits_strips(const std::vector<LinePass>& passes, int march) {
  int across = 0, along = 0;
  for (const LinePass& p : passes) ++(p.axis == march ? across : along);
  return across == 1 && along <= 1;
}

}  // namespace

void CpuBackend::line_pass(const ArrayDesc& in, const ArrayDesc& out, const LinePass& pass, double cval) {
  if (sums_in_float(in, out, pass, cval)) return run_line_pass<float>(in, out, pass, cval);
  run_line_pass<double>(in, out, pass, cval);
}

bool CpuBackend::fused_chain(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& passes,
                             double cval) {
  if ((in.ndim != 2 && in.ndim != 3) || in.size() < kFusedMinSize) return false;  // before the copies below
  return whole_chain_fused(in, out, passes, cval) || fused_after_march_pass(in, out, passes, cval);
}

// An 8-bit volume chain whose first pass crosses the planes with too many
// taps to fuse (plan_plane_chain): that pass alone, into `out`, then the rest
// fused in place, as chain_in_place would run them pass by pass: one sweep
// through memory instead of one a pass after the first, and their planes
// converted to floats once. This 2-core Xeon, one thread, gaussian on 256^3,
// best of three runs alternating, pass by pass against split: uint8 sigma 3
// 111 and 82 ms, sigma 6 173 and 146. Not taken for others: uint16 sigma 2
// 86 and 92, sigma 4 132 and 149; float32 sigma 3.5 72 and 74; float32 in
// double (order 1, sigma 2.5) 104 and 111.
bool CpuBackend::fused_after_march_pass(const ArrayDesc& in, const ArrayDesc& out,
                                        const std::vector<LinePass>& passes, double cval) {
  if (in.ndim != 3 || in.dtype != out.dtype || itemsize(in.dtype) != 1 || passes.size() < 3 ||
      passes[0].axis != march_axis(out))
    return false;
  const std::vector<LinePass> rest(passes.begin() + 1, passes.end());
  int march;
  bool in_float;
  if (!plan_plane_chain(out, out, rest, cval, false, march, in_float)) return false;
  line_pass(in, out, passes[0], cval);
  return whole_chain_fused(out, out, rest, cval);
}

bool CpuBackend::whole_chain_fused(const ArrayDesc& in2, const ArrayDesc& out2, const std::vector<LinePass>& passes2,
                                   double cval) {
  const bool plane2d = in2.ndim == 2;
  const ArrayDesc in = plane2d ? as_volume(in2) : in2, out = plane2d ? as_volume(out2) : out2;
  const std::vector<LinePass> passes = plane2d ? as_volume(passes2) : passes2;
  int march;
  bool in_float;
  if (!plan_plane_chain(in, out, passes, cval, plane2d, march, in_float)) return false;
  if (plane2d && in.shape[march == 0 ? 2 : 0] < kFusedMinRow) return false;
  const bool strips = plane2d && fits_strips(passes, march);
  const int threads = cpu_max_threads();
  return with_chain_types(in.dtype, in_float, [&](auto s, auto e, auto r) {
    using S = typename decltype(s)::type;
    using E = typename decltype(e)::type;
    using R = typename decltype(r)::type;
    if (strips) run_strip_chain<S, E, R>(in2, out2, passes2, cval, march == 0 ? 0 : 1, threads);
    else run_plane_chain<S, E, R>(in, out, passes, cval, march, threads);
  });
}

void CpuBackend::copy(const ArrayDesc& in, const ArrayDesc& out) {
  if (in.size() == 0) return;
  const int axis = in.ndim ? in.ndim - 1 : 0;
  const Lines lines(in, out, axis);
  const int64_t n = lines.length;
  const int64_t in_stride = in.ndim ? in.strides[axis] : 0, out_stride = out.ndim ? out.strides[axis] : 0;
  if (in.dtype == out.dtype) {  // exact, whatever the dtype
    const int64_t item = itemsize(in.dtype);
    const bool runs = in_stride == item && out_stride == item;  // each line one memmove
    parallel_region(in.size() > 65536, cpu_max_threads(), [&] {
      static_loop(lines.count, [&](int64_t l) {
        int64_t in_off, out_off;
        lines.offsets(l, in_off, out_off);
        if (runs) {
          std::memmove(out.data + out_off, in.data + in_off, n * item);
          return;
        }
        for (int64_t i = 0; i < n; ++i)
          std::memmove(out.data + out_off + i * out_stride, in.data + in_off + i * in_stride, item);
      });
    });
    return;
  }
  auto [load, _unused] = dispatch_real_dtype<LineIO>(in.dtype);
  auto [_unused2, store] = dispatch_real_dtype<LineIO>(out.dtype);
  std::vector<double> buf(n);
  for (int64_t l = 0; l < lines.count; ++l) {
    int64_t in_off, out_off;
    lines.offsets(l, in_off, out_off);
    load(in.data + in_off, in_stride, n, buf.data());
    store(buf.data(), out.data + out_off, out_stride, n);
  }
}

namespace {
using namespace cpu;

// A run of n elements of out = op(a, b) in dtype T; sa == 0 or sb == 0 for a
// broadcast operand. Unit-stride runs of one dtype take typed loops that the
// compiler vectorises, with the operation fixed at compile time.
template <DType T, Elementwise Op>
void typed_run(const char* a, int64_t sa, const char* b, int64_t sb, char* out, int64_t n) {
  using S = typename storage<T>::type;
  const S* x = reinterpret_cast<const S*>(a);
  const S* y = reinterpret_cast<const S*>(b);
  S* r = reinterpret_cast<S*>(out);
  if (sb == 0) {
    const S v = *y;
    for (int64_t i = 0; i < n; ++i) r[i] = elementwise_value<T>(Op, x[i], v);
  } else {
    for (int64_t i = 0; i < n; ++i) r[i] = elementwise_value<T>(Op, x[i], y[i]);
  }
}

template <DType T>
struct ElementwiseRun {
  static void run(Elementwise op, const ArrayDesc& a, const ArrayDesc& b, const char* pa, int64_t sa,
                  const char* pb, int64_t sb, char* po, int64_t so, int64_t n) {
    using S = typename storage<T>::type;
    constexpr int64_t item = sizeof(S);
    const bool aligned = reinterpret_cast<uintptr_t>(pa) % alignof(S) == 0 &&
                         reinterpret_cast<uintptr_t>(pb) % alignof(S) == 0 &&
                         reinterpret_cast<uintptr_t>(po) % alignof(S) == 0;
    if (a.dtype == T && b.dtype == T && aligned && sa == item && so == item && (sb == item || sb == 0)) {
      switch (op) {
        case Elementwise::Add: return typed_run<T, Elementwise::Add>(pa, sa, pb, sb, po, n);
        case Elementwise::Multiply: return typed_run<T, Elementwise::Multiply>(pa, sa, pb, sb, po, n);
        case Elementwise::Subtract: return typed_run<T, Elementwise::Subtract>(pa, sa, pb, sb, po, n);
        case Elementwise::Square: return typed_run<T, Elementwise::Square>(pa, sa, pa, sa, po, n);
        case Elementwise::Sqrt:
          if constexpr (T == DType::Float32 || T == DType::Float64)
            return typed_run<T, Elementwise::Sqrt>(pa, sa, pa, sa, po, n);
          break;
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      const S x = load_operand<T>(a.dtype, pa + i * sa), y = load_operand<T>(b.dtype, pb + i * sb);
      const S r = elementwise_value<T>(op, x, y);
      copy_element(po + i * so, &r, sizeof(S));
    }
  }
};

// Byte offset of element `index` (C order) of `a`.
int64_t element_offset(const ArrayDesc& a, int64_t index) {
  int64_t off = 0;
  for (int d = a.ndim - 1; d >= 0; --d) {
    off += (index % a.shape[d]) * a.strides[d];
    index /= a.shape[d];
  }
  return off;
}

constexpr int64_t kRunLength = 16384;  // elements per parallel task along the last axis

}  // namespace

void CpuBackend::elementwise(Elementwise op, const ArrayDesc& a, const ArrayDesc& b, const ArrayDesc& out) {
  // Runs along the last axis, cut into tasks of kRunLength; a 0-d array is
  // one run of one element.
  const int last = out.ndim - 1;
  const int64_t n = out.ndim ? out.shape[last] : 1, rows = n ? out.size() / n : 0;
  const int64_t pieces = (n + kRunLength - 1) / kRunLength, tasks = rows * pieces;
  const int64_t sa = out.ndim ? a.strides[last] : 0, sb = out.ndim ? b.strides[last] : 0,
                so = out.ndim ? out.strides[last] : 0;
  parallel_region(out.size() > 65536, cpu_max_threads(), [&] {
    static_loop(tasks, [&](int64_t t) {
      const int64_t row = t / pieces, start = (t % pieces) * kRunLength, first = row * n + start;
      dispatch_real_or_bfloat16<ElementwiseRun>(out.dtype, op, a, b, a.data + element_offset(a, first), sa,
                                                b.data + element_offset(b, first), sb,
                                                out.data + element_offset(out, first), so,
                                                std::min(kRunLength, n - start));
    });
  });
}

namespace {
class HostBuffer final : public TempBuffer {
 public:
  explicit HostBuffer(int64_t bytes) : storage_(new double[(size_t)bytes / 8 + 1]) {
    data = reinterpret_cast<char*>(storage_.get());
  }
 private:
  std::unique_ptr<double[]> storage_;  // uninitialised, 8-byte aligned
};
}  // namespace

std::unique_ptr<TempBuffer> CpuBackend::allocate(int64_t bytes) {
  return std::make_unique<HostBuffer>(bytes);
}

}  // namespace gpufilt
