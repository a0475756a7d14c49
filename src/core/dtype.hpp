// Element types gpufilt understands, their sizes and names, and the float16
// bit conversions shared by the CPU and CUDA kernels.
#pragma once
#include <cstdint>
#include <cstring>
#include "core/hostdevice.hpp"

namespace gpufilt {

// Order matters only for dispatch tables; names follow numpy (and ml_dtypes
// for bfloat16, which only kernels that opt in accept: ImportOptions).
enum class DType : int8_t {
  Bool, Int8, UInt8, Int16, UInt16, Int32, UInt32, Int64, UInt64,
  Float16, Float32, Float64, Complex64, Complex128, BFloat16,
};
constexpr int kNumDTypes = 15;

inline int itemsize(DType t) {
  static constexpr int sizes[kNumDTypes] = {1, 1, 1, 2, 2, 4, 4, 8, 8, 2, 4, 8, 8, 16, 2};
  return sizes[static_cast<int>(t)];
}
inline const char* dtype_name(DType t) {
  static constexpr const char* names[kNumDTypes] = {
      "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
      "uint64", "float16", "float32", "float64", "complex64", "complex128", "bfloat16"};
  return names[static_cast<int>(t)];
}
inline bool is_complex(DType t) { return t == DType::Complex64 || t == DType::Complex128; }
// The real dtype of one component of a complex dtype.
inline DType component_dtype(DType t) {
  return t == DType::Complex64 ? DType::Float32 : t == DType::Complex128 ? DType::Float64 : t;
}

// IEEE binary16 <-> binary32, round to nearest even; host and device alike.
GF_HD float half_bits_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while (!(man & 0x400u)) { man <<= 1; --exp; }
      bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

GF_HD uint16_t float_to_half_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // inf or nan
    return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  if (absx >= 0x477ff000u)  // rounds to >= 65520: overflow to inf
    return (uint16_t)(sign | 0x7c00u);
  if (absx < 0x38800000u) {  // below the smallest normal half: subnormal or 0
    if (absx < 0x33000000u) return (uint16_t)sign;  // < 2^-25 rounds to 0
    uint32_t exp = absx >> 23, man = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;  // value / 2^-24 == man * 2^(exp - 126)
    uint32_t half_man = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_man & 1u))) ++half_man;
    return (uint16_t)(sign | half_man);
  }
  uint32_t r = absx - 0x38000000u;  // rebias exponent 127 -> 15
  uint32_t half = r >> 13, rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return (uint16_t)(sign | half);
}

}  // namespace gpufilt
