// Element types gpufilt understands, their sizes and names, and the float16
// and bfloat16 bit conversions shared by the CPU and CUDA kernels.
#pragma once
#include <cstdint>
#include <cstring>
#include "core/hostdevice.hpp"

namespace gpufilt {

// Order matters only for dispatch tables (new dtypes go last so that existing
// tables keep their indices); names follow numpy (bfloat16: torch, ml_dtypes).
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
// On the device the hardware converts (one instruction each way instead of
// a dozen with branches: float16 filters ran 2.3x slower than float32).
GF_HD float half_bits_to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
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
#endif
}

GF_HD uint16_t float_to_half_bits(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // The pair form, into a 32-bit register: ptxas (CUDA 13.0) compiles a byte
  // store of cvt.rn.f16.f32's 16-bit result (or cvt.rn.bf16.f32's) as a
  // float-to-integer conversion of the half (F2I.U8.F16: the low byte of
  // -3.72 stored as 0), which copy_element's byte stores hit.
  uint32_t pair;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(pair) : "f"(0.0f), "f"(f));
  return (uint16_t)pair;
#else
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
#endif
}

// bfloat16 is the upper half of a binary32: widening is exact; narrowing
// rounds to nearest even and keeps NaN a (quiet) NaN instead of letting the
// rounding carry turn it into infinity.
GF_HD float bfloat16_bits_to_float(uint16_t h) {
  const uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

GF_HD uint16_t float_to_bfloat16_bits(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t pair;  // the pair form, as float_to_half_bits does and for the same reason
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(pair) : "f"(0.0f), "f"(f));
  return (uint16_t)pair;
#else
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);  // NaN, quieted
  const uint32_t round = 0x7fffu + ((x >> 16) & 1u);  // ties to even
  return (uint16_t)((x + round) >> 16);
#endif
}

}  // namespace gpufilt
