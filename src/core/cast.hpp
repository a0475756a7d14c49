// Reading any element type as a double and writing a double back with
// scipy.ndimage's conversion (C casts: truncation toward zero for integers).
// Shared by the CPU and CUDA kernels.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include "core/dtype.hpp"

namespace gpufilt {

// memcpy for element access: on the device a byte loop, because nvcc may
// turn a small memcpy into one wide load that faults on a misaligned view.
GF_HD void copy_element(void* dst, const void* src, size_t n) {
#if defined(__CUDA_ARCH__)
  for (size_t i = 0; i < n; ++i) static_cast<unsigned char*>(dst)[i] = static_cast<const unsigned char*>(src)[i];
#else
  memcpy(dst, src, n);
#endif
}

// Storage type of each dtype; float16 and bfloat16 are kept as their bits.
template <DType T> struct storage;
template <> struct storage<DType::Bool> { using type = uint8_t; };
template <> struct storage<DType::Int8> { using type = int8_t; };
template <> struct storage<DType::UInt8> { using type = uint8_t; };
template <> struct storage<DType::Int16> { using type = int16_t; };
template <> struct storage<DType::UInt16> { using type = uint16_t; };
template <> struct storage<DType::Int32> { using type = int32_t; };
template <> struct storage<DType::UInt32> { using type = uint32_t; };
template <> struct storage<DType::Int64> { using type = int64_t; };
template <> struct storage<DType::UInt64> { using type = uint64_t; };
template <> struct storage<DType::Float16> { using type = uint16_t; };
template <> struct storage<DType::Float32> { using type = float; };
template <> struct storage<DType::Float64> { using type = double; };
template <> struct storage<DType::BFloat16> { using type = uint16_t; };

// Floating-point dtypes, the half-width ones included.
constexpr bool is_float_dtype(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}

template <DType T>
GF_HD double load_as_double(const char* p) {
  using S = typename storage<T>::type;
  S v;
  copy_element(&v, p, sizeof(S));
  if constexpr (T == DType::Float16) return (double)half_bits_to_float(v);
  else if constexpr (T == DType::BFloat16) return (double)bfloat16_bits_to_float(v);
  else return (double)v;
}

// Integers narrower than 64 bits go through int64 so that out-of-range values
// wrap as they do in scipy on x86 instead of being undefined; values beyond
// int64 (and NaN) become INT64_MIN first, as x86's conversion makes them, so
// the CPU (on any processor) and the GPU agree.
template <DType T>
GF_HD void store_from_double(char* p, double v) {
  using S = typename storage<T>::type;
  constexpr bool via_int64 = !is_float_dtype(T) && T != DType::UInt64;
  if (via_int64 && !(v < 9223372036854775808.0 && v >= -9223372036854775808.0)) v = -9223372036854775808.0;
  S s;
  if constexpr (T == DType::Float16) s = float_to_half_bits((float)v);
  else if constexpr (T == DType::BFloat16) s = float_to_bfloat16_bits((float)v);
  else if constexpr (T == DType::Float32 || T == DType::Float64) s = (S)v;
  else if constexpr (T == DType::Bool) s = (int64_t)v != 0;
  else if constexpr (T == DType::UInt64)  // x86: wraps below 0, 0 from 2^64 up (and for NaN)
    s = v >= 0 && v < 18446744073709551616.0 ? (S)v : v < 0 && v >= -9223372036854775808.0 ? (S)(int64_t)v
      : v < 0 ? (S)9223372036854775808ull : (S)0;
  else s = (S)(int64_t)v;
  copy_element(p, &s, sizeof(S));
}

// load_as_double for a dtype known at run time (real dtypes and bfloat16).
GF_HD double load_any_as_double(DType t, const char* p) {
  switch (t) {
    case DType::Bool: return load_as_double<DType::Bool>(p);
    case DType::Int8: return load_as_double<DType::Int8>(p);
    case DType::UInt8: return load_as_double<DType::UInt8>(p);
    case DType::Int16: return load_as_double<DType::Int16>(p);
    case DType::UInt16: return load_as_double<DType::UInt16>(p);
    case DType::Int32: return load_as_double<DType::Int32>(p);
    case DType::UInt32: return load_as_double<DType::UInt32>(p);
    case DType::Int64: return load_as_double<DType::Int64>(p);
    case DType::UInt64: return load_as_double<DType::UInt64>(p);
    case DType::Float16: return load_as_double<DType::Float16>(p);
    case DType::Float32: return load_as_double<DType::Float32>(p);
    case DType::BFloat16: return load_as_double<DType::BFloat16>(p);
    default: return load_as_double<DType::Float64>(p);
  }
}

// store_from_double as a dispatchable functor (host code).
template <DType T>
struct StoreFromDouble {
  static void run(char* p, double v) { store_from_double<T>(p, v); }
};

// A 16-byte element (complex128), moved whole.
struct alignas(16) Word16 {
  uint64_t lo, hi;
};

// Calls f(W{}) with W the plain word type of `bytes` bytes (1, 2, 4, 8 or
// 16): kernels that only move elements (copies, broadcasts, gathers) are
// templated on the element's size, not its dtype.
template <class F>
decltype(auto) with_word(int bytes, F&& f) {
  switch (bytes) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
    default: return f(Word16{});
  }
}

// Calls Fn<t>::run(args...) for the runtime real dtype t: one switch, so that
// kernels are templated on the dtype and nothing else.
template <template <DType> class Fn, class... Args>
decltype(auto) dispatch_real_dtype(DType t, Args&&... args) {
  switch (t) {
    case DType::Bool: return Fn<DType::Bool>::run(static_cast<Args&&>(args)...);
    case DType::Int8: return Fn<DType::Int8>::run(static_cast<Args&&>(args)...);
    case DType::UInt8: return Fn<DType::UInt8>::run(static_cast<Args&&>(args)...);
    case DType::Int16: return Fn<DType::Int16>::run(static_cast<Args&&>(args)...);
    case DType::UInt16: return Fn<DType::UInt16>::run(static_cast<Args&&>(args)...);
    case DType::Int32: return Fn<DType::Int32>::run(static_cast<Args&&>(args)...);
    case DType::UInt32: return Fn<DType::UInt32>::run(static_cast<Args&&>(args)...);
    case DType::Int64: return Fn<DType::Int64>::run(static_cast<Args&&>(args)...);
    case DType::UInt64: return Fn<DType::UInt64>::run(static_cast<Args&&>(args)...);
    case DType::Float16: return Fn<DType::Float16>::run(static_cast<Args&&>(args)...);
    case DType::Float32: return Fn<DType::Float32>::run(static_cast<Args&&>(args)...);
    case DType::Float64: return Fn<DType::Float64>::run(static_cast<Args&&>(args)...);
    default: throw std::invalid_argument(std::string("dtype ") + dtype_name(t) + " is not a real dtype");
  }
}

// dispatch_real_dtype, and bfloat16 too: for the kernels that take it (the
// array ops), kept apart so that the filters are not compiled for it.
template <template <DType> class Fn, class... Args>
decltype(auto) dispatch_real_or_bfloat16(DType t, Args&&... args) {
  if (t == DType::BFloat16) return Fn<DType::BFloat16>::run(static_cast<Args&&>(args)...);
  return dispatch_real_dtype<Fn>(t, static_cast<Args&&>(args)...);
}

// True when v is exactly a value of dtype t (a real dtype or bfloat16):
// stored as t, as scipy casts, and read back, it is v (never for NaN).
inline bool is_value_of(DType t, double v) {
  alignas(16) char element[16];
  dispatch_real_or_bfloat16<StoreFromDouble>(t, element, v);
  return load_any_as_double(t, element) == v;
}

}  // namespace gpufilt
