// Line-buffer helpers of the CPU kernels: reading a strided line of any
// dtype into doubles and back, walking the lines of an array along an axis,
// and extending a buffered line past its ends per the boundary mode.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/array.hpp"
#include "core/border.hpp"
#include "core/cast.hpp"
#include "core/cpu_isa.hpp"

namespace gpufilt {
namespace cpu {

// The vector a kernel works on for line buffers of E: 16 bytes in baseline
// (SSE2) code, 32 in the AVX2 copies of the kernels (four doubles, eight
// floats, 32 uint8). Not 32 everywhere: GCC lowers 32-byte comparisons to
// scalar code where it has no AVX.
template <class E, int Bytes = 16>
struct Simd {
#if defined(__GNUC__)
  typedef E V __attribute__((vector_size(Bytes)));
#else
  typedef E V;
#endif
};

// Always inlined: a 32-byte vector passed by value out of line would change
// the ABI between the baseline and the AVX2 copies of a kernel.
#if defined(__GNUC__)
#define GF_INLINE inline __attribute__((always_inline))
#define GF_INLINE_LAMBDA __attribute__((always_inline))  // after a lambda's parameters
#else
#define GF_INLINE inline
#define GF_INLINE_LAMBDA
#endif
template <class V, class E>
GF_INLINE V load_as(const E* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V, class E>
GF_INLINE void store_as(E* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}

// A tile of results kept in registers while a kernel loops over taps, so
// that a tap costs the loads of its inputs only: kTile vectors (Simd<E>::V).
// Internal linkage, as when cpu_backend.cpp alone held it: as an inline
// function of the namespace, the strip chain's correlations took 2-6% more
// CPU time (within 2% of before, here).
namespace {
#if defined(__GNUC__)
constexpr int kTile = 4;  // vectors per tile
#else
constexpr int kTile = 8;
#endif

// Calls body(j, tiles, v) for tiles [j, j + width) covering [0, count), where
// v is a value-initialised vector type: kTile vectors, then single vectors,
// then single elements.
template <class E, int Bytes, int Tile = kTile, class Body>
inline void for_tiles(int64_t count, Body&& body) {
  using V = typename Simd<E, Bytes>::V;
  constexpr int64_t lanes = sizeof(V) / sizeof(E), width = Tile * lanes;
  int64_t j = 0;
  for (; j + width <= count; j += width) body(j, std::integral_constant<int, Tile>{}, V{});
  if constexpr (lanes > 1)
    for (; j + lanes <= count; j += lanes) body(j, std::integral_constant<int, 1>{}, V{});
  for (; j < count; ++j) body(j, std::integral_constant<int, 1>{}, E{});
}
}  // namespace

// 8- and 16-bit integer dtypes.
template <DType T>
constexpr bool kNarrowInt = T == DType::Int8 || T == DType::UInt8 || T == DType::Int16 || T == DType::UInt16;

// True when a line buffer of E holds dtype T's values as memory stores
// them: moving one is a copy, which is what the conversions give too.
template <DType T, class E>
constexpr bool kVerbatim = std::is_same_v<typename storage<T>::type, E> && T != DType::Bool &&
                           T != DType::Float16 && T != DType::BFloat16;

// Line buffers hold doubles, or floats for float32/float16 data summed in
// float (DESIGN.md's tolerance allows it) and for 8- and 16-bit integers
// where float gives scipy's bits (cpu_backend.cpp, integers_exact_in_float),
// or the data's own type for order statistics; these move one element of
// dtype T in and out of an E, with scipy's conversions (cast.hpp) for the
// doubles.
template <DType T, class E>
inline E load_element(const char* p) {
  if constexpr (kVerbatim<T, E>) {
    E v;
    std::memcpy(&v, p, sizeof v);
    return v;
  } else if constexpr (std::is_same_v<E, float> && T == DType::Float16) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return half_bits_to_float(h);
  } else if constexpr (std::is_same_v<E, float> && kNarrowInt<T>) {
    typename storage<T>::type v;  // exact in float; no detour through double, so loops vectorise
    std::memcpy(&v, p, sizeof v);
    return (float)v;
  } else {
    return (E)load_as_double<T>(p);
  }
}
template <DType T, class E>
inline void store_element(char* p, E v) {
  if constexpr (kVerbatim<T, E>) {
    std::memcpy(p, &v, sizeof v);
  } else if constexpr (std::is_same_v<E, float> && T == DType::Float16) {
    const uint16_t h = float_to_half_bits(v);
    std::memcpy(p, &h, sizeof h);
  } else {
    store_from_double<T>(p, (double)v);
  }
}

// True when lo <= src[i] < hi for every i < n (NaN is not), for double or
// float buffers. The plain loop vectorises, except for doubles without AVX
// (GCC 12 leaves it scalar there): the baseline copy of those (not `Wide`,
// the AVX2 and AVX-512 copies of LineIOAs) takes an SSE2 loop first.
template <class E, bool Wide = false>
inline bool all_within(const E* src, int64_t n, E lo, E hi) {
  int64_t i = 0;
  int outside = 0;
#if defined(__SSE2__)
  if constexpr (!Wide && std::is_same_v<E, double>) {
    const __m128d low = _mm_set1_pd(lo), high = _mm_set1_pd(hi);
    __m128d all = _mm_castsi128_pd(_mm_set1_epi32(-1));
    for (; i + 2 <= n; i += 2) {
      const __m128d v = _mm_loadu_pd(src + i);
      all = _mm_and_pd(all, _mm_and_pd(_mm_cmpge_pd(v, low), _mm_cmplt_pd(v, high)));
    }
    outside = _mm_movemask_pd(all) != 3;
  }
#endif
  for (; i < n; ++i) outside |= !(src[i] >= lo) | !(src[i] < hi);
  return outside == 0;
}

template <class E>
using LoadLineOf = void (*)(const char* src, int64_t stride, int64_t n, E* dst);
template <class E>
using StoreLineOf = void (*)(const E* src, char* dst, int64_t stride, int64_t n);
using LoadLine = LoadLineOf<double>;
using StoreLine = StoreLineOf<double>;

// Unit-stride runs take their own loop, whose constant stride lets the
// compiler vectorise the conversion; run() picks the copy of the widest
// vectors this CPU has (cpu_isa.hpp): the baseline's SSE2 has no widening
// of 16-bit integers, and its conversions took a fifth of a 16-bit pass.
template <class E>
struct LineIOAs {
  template <DType T>
  struct IO {
    static constexpr int64_t item = sizeof(typename storage<T>::type);
    GF_INLINE static void load_body(const char* src, int64_t stride, int64_t n, E* dst) {
      if (stride == item)
        for (int64_t i = 0; i < n; ++i) dst[i] = load_element<T, E>(src + i * item);
      else
        for (int64_t i = 0; i < n; ++i) dst[i] = load_element<T, E>(src + i * stride);
    }
    template <bool Wide>
    GF_INLINE static void store_body(const E* src, char* dst, int64_t stride, int64_t n) {
      if constexpr (kNarrowInt<T> && std::is_floating_point_v<E>) {
        if (stride == item && store_narrow_int<Wide>(src, dst, n)) return;
      }
      if (stride == item)
        for (int64_t i = 0; i < n; ++i) store_element<T, E>(dst + i * item, src[i]);
      else
        for (int64_t i = 0; i < n; ++i) store_element<T, E>(dst + i * stride, src[i]);
    }
    static void load(const char* src, int64_t stride, int64_t n, E* dst) { load_body(src, stride, n, dst); }
    static void store(const E* src, char* dst, int64_t stride, int64_t n) { store_body<false>(src, dst, stride, n); }
#if defined(GPUFILT_ISA_COPIES)
    GF_AVX2 static void load_avx2(const char* src, int64_t stride, int64_t n, E* dst) {
      load_body(src, stride, n, dst);
    }
    GF_AVX512 static void load_avx512(const char* src, int64_t stride, int64_t n, E* dst) {
      load_body(src, stride, n, dst);
    }
    GF_AVX2 static void store_avx2(const E* src, char* dst, int64_t stride, int64_t n) {
      store_body<true>(src, dst, stride, n);
    }
    GF_AVX512 static void store_avx512(const E* src, char* dst, int64_t stride, int64_t n) {
      store_body<true>(src, dst, stride, n);
    }
    static std::pair<LoadLineOf<E>, StoreLineOf<E>> run() {
      return {for_cpu_isa<LoadLineOf<E>>(&load, &load_avx2, &load_avx512),
              for_cpu_isa<StoreLineOf<E>>(&store, &store_avx2, &store_avx512)};
    }
#else
    static std::pair<LoadLineOf<E>, StoreLineOf<E>> run() { return {&load, &store}; }
#endif
    // Values that an int32 holds convert through it to the same 8/16-bit
    // integer as through int64 (store_from_double), in loops that vectorise;
    // false (nothing written) when one of them is beyond, or NaN.
    template <bool Wide>
    GF_INLINE static bool store_narrow_int(const E* src, char* dst, int64_t n) {
      if (!all_within<E, Wide>(src, n, (E)-2147483648.0, (E)2147483648.0)) return false;
      for (int64_t i = 0; i < n; ++i) {
        const auto v = (typename storage<T>::type)(int32_t)src[i];
        std::memcpy(dst + i * item, &v, item);
      }
      return true;
    }
  };
  // kVerbatim for a dtype known at run time (dispatch_real_dtype).
  template <DType T>
  struct Verbatim {
    static bool run() { return kVerbatim<T, E>; }
  };
};
template <DType T>
using LineIO = LineIOAs<double>::IO<T>;

// The lines of an array along one axis: line l starts at base + offset(l).
// With `skip` >= 0 that axis is left out of the walk too (the caller walks it).
struct Lines {
  int64_t count = 1, length = 1;
  int outer_ndim = 0;
  int64_t outer_shape[kMaxDims];
  int64_t outer_strides[2][kMaxDims];  // [array][dim], for input and output

  Lines(const ArrayDesc& in, const ArrayDesc& out, int axis, int skip = -1) {
    length = in.ndim ? in.shape[axis] : 1;
    for (int d = 0; d < in.ndim; ++d) {
      if (d == axis || d == skip) continue;
      outer_shape[outer_ndim] = in.shape[d];
      outer_strides[0][outer_ndim] = in.strides[d];
      outer_strides[1][outer_ndim] = out.strides[d];
      count *= in.shape[d];
      ++outer_ndim;
    }
  }
  // Byte offsets of line l in the input and the output.
  void offsets(int64_t l, int64_t& in_off, int64_t& out_off) const {
    in_off = out_off = 0;
    for (int d = outer_ndim - 1; d >= 0; --d) {
      int64_t i = l % outer_shape[d];
      l /= outer_shape[d];
      in_off += i * outer_strides[0][d];
      out_off += i * outer_strides[1][d];
    }
  }
};

// Fills the `left` and `right` cells around line[left .. left+n) per `mode`.
// With lanes > 1 the buffer holds `lanes` lines side by side (cell i of lane
// b at ext[i * lanes + b]) and each cell is a row of `lanes` values.
template <class E>
inline void extend_line(E* ext, int64_t n, int64_t left, int64_t right, Mode mode, double cval,
                        int64_t lanes = 1) {
  const E* line = ext + left * lanes;
  auto fill = [&](int64_t j) {
    const int64_t k = border_index(j, n, mode);
    E* cell = ext + (left + j) * lanes;
    for (int64_t b = 0; b < lanes; ++b) cell[b] = k < 0 ? (E)cval : line[k * lanes + b];
  };
  for (int64_t j = -left; j < 0; ++j) fill(j);
  for (int64_t j = n; j < n + right; ++j) fill(j);
}

}  // namespace cpu
}  // namespace gpufilt
