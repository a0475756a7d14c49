// How a fused pass sums its taps, rounds its results as the chain stores
// them and stores a run of them: the device code every fused kernel family
// (fused/*.cuh) shares.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <type_traits>

#include "core/border.hpp"
#include "core/cast.hpp"
#include "core/elementwise.hpp"
#include "cuda/api.hpp"
#include "cuda/check.cuh"
#include "cuda/elements.cuh"
#include "cuda/fused/plan.cuh"

namespace gpufilt::cuda::fused {

// How a pass sums. Wide data (8/16-bit and wider integers, float64) is summed
// in double with separately rounded multiplies and adds, in the line
// kernels' order: their results to the last bit (separable.cu,
// correlate_all_rows), so a flat integer image stays flat. float32 and
// float16 chains whose passes cannot cancel (no negative weight:
// LinePass::may_cancel) are summed in float with fused multiply-adds, as
// DESIGN.md allows: within their tolerance of scipy, and cheaper than
// double's conversions and half-rate arithmetic. Derivatives stay in double:
// in float their small results would carry the rounding of their large terms.
template <class Acc>
struct Arith;

template <>
struct Arith<double> {
  static __device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
  static __device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
  static __device__ __forceinline__ double sub(double a, double b) { return __dsub_rn(a, b); }
  // a + sign * b for sign +1 or -1: the product is exact, so one rounding,
  // the very add or sub (signed zeros and NaN included).
  static __device__ __forceinline__ double add_signed(double a, double sign, double b) { return __fma_rn(sign, b, a); }
  static __device__ __forceinline__ double weight(const FusedPass& p, int k) { return p.weights[k]; }
  static __device__ __forceinline__ double pair_sign(const FusedPass& p) { return p.pair_sign; }
};

template <>
struct Arith<float> {  // plain operators: ptxas contracts them into FMAs
  static __device__ __forceinline__ float mul(float a, float b) { return a * b; }
  static __device__ __forceinline__ float add(float a, float b) { return a + b; }
  static __device__ __forceinline__ float sub(float a, float b) { return a - b; }
  static __device__ __forceinline__ float add_signed(float a, float sign, float b) { return __fmaf_rn(sign, b, a); }
  static __device__ __forceinline__ float weight(const FusedPass& p, int k) { return p.weights_f[k]; }
  static __device__ __forceinline__ float pair_sign(const FusedPass& p) { return p.pair_sign_f; }
};

template <>
struct Arith<int32_t> {  // 8-bit and 16-bit integer chains (FusedPlan::int32_chain): exact
  static __device__ __forceinline__ int32_t mul(int32_t a, int32_t b) { return a * b; }
  static __device__ __forceinline__ int32_t add(int32_t a, int32_t b) { return a + b; }
  static __device__ __forceinline__ int32_t sub(int32_t a, int32_t b) { return a - b; }
  static __device__ __forceinline__ int32_t add_signed(int32_t a, int32_t sign, int32_t b) { return a + sign * b; }
  static __device__ __forceinline__ int32_t weight(const FusedPass& p, int k) { return p.weights_i[k]; }
  static __device__ __forceinline__ int32_t pair_sign(const FusedPass& p) { return p.pair_sign_i; }
};

// A pass's kind (and a correlation's symmetry) as a type: kernels that
// compute many outputs of a pass per thread resolve it once a pass (with_kind)
// rather than once an output. That saves the switch's instructions per output
// and keeps each kind's unrolled code in one straight run: a per-output switch
// interleaves every kind's code and thrashes the instruction cache
// (plane_kernel spent half its cycles waiting for instructions that way).
// SYMMETRY kEitherSymmetry: a correlation, symmetric or antisymmetric, its
// sign read at run time (FusedPass::pair_sign): one kernel for chains that
// mix them (sobel, prewitt) without a branch.
constexpr int kEitherSymmetry = 2;

// NON_NEGATIVE (box chains of unsigned integers summed in int32): no sum is
// negative, so that a mean is one multiply's high word (apply_kind).
// IN_RANGE (FusedPass::in_range; with_kind's RANGED): no truncated sum of
// 8-bit data summed in float leaves the dtype, so none is wrapped back into
// it (kKeepsValues).
// PADDED (with_kind's PADDED): the kernel is built for a bucket of TAPS taps
// and the pass has fewer, laid out in it after FusedPass::skip taps that are
// not its own (see pad_pass): those are skipped, never multiplied by a zero
// weight (0 * inf is NaN where scipy's sum is finite).
template <LineKind K, int SYMMETRY = 0, bool NON_NEGATIVE = false, bool IN_RANGE = false, bool PADDED = false>
struct KindOf {
  static constexpr LineKind kind = K;
  static constexpr int symmetry = SYMMETRY;
  static constexpr bool non_negative = NON_NEGATIVE;
  static constexpr bool in_range = IN_RANGE;
  static constexpr bool padded = PADDED;
};

// ceil(2^32 / N) = (2^32 + e) / N with 0 <= e < N, so that s times it,
// over 2^32, is s / N + s e / (N 2^32): for s < 2^32 / N the excess is
// below 1/N, while the fraction of s / N is at most (N - 1) / N, and the
// product's high word is s / N truncated. Sums of N unsigned 16-bit values
// stay below 2^32 / N while N^2 <= 2^16.
template <int N>
constexpr uint32_t kCeilReciprocal = (uint32_t)(((1ull << 32) + N - 1) / N);

// RANGED: the kernel sums 8-bit data in float, and symmetric correlations
// whose sums stay in the dtype get a kind of their own (KindOf::in_range);
// a chain's pass takes one kind or the other, so its loop runs one copy.
// PADDED: the kernel's tap count is a bucket (KindOf::padded).
// EXTREMES: the kernel also takes minima and maxima (the long-pass kernels
// leave most of them to min_max.cuh's).
template <bool RANGED = false, bool PADDED = false, bool EXTREMES = true, class F>
__device__ __forceinline__ void with_kind(const FusedPass& p, const F& f) {
  switch (p.kind) {
    case LineKind::Correlate:
      if constexpr (RANGED) {
        if (p.symmetry > 0 && p.in_range) return f(KindOf<LineKind::Correlate, 1, false, true, PADDED>{});
      }
      if (p.symmetry > 0) return f(KindOf<LineKind::Correlate, 1, false, false, PADDED>{});
      if (p.symmetry < 0) return f(KindOf<LineKind::Correlate, -1, false, false, PADDED>{});
      return f(KindOf<LineKind::Correlate, 0, false, false, PADDED>{});
    case LineKind::Minimum:
      if constexpr (EXTREMES) return f(KindOf<LineKind::Minimum, 0, false, false, PADDED>{});
      [[fallthrough]];
    case LineKind::Maximum:
      if constexpr (EXTREMES) return f(KindOf<LineKind::Maximum, 0, false, false, PADDED>{});
      [[fallthrough]];
    default: return f(KindOf<LineKind::Uniform, 0, false, false, PADDED>{});
  }
}

// Whether tap k of a pass of kind K is the pass's own (KindOf::padded: not
// one of the bucket's first p.skip taps, nor, for a symmetric pass, of its
// last p.skip). Pairs k and taps - 1 - k of a symmetric pass are both or
// neither.
template <class K>
__device__ __forceinline__ bool own_tap(const FusedPass& p, int k) {
  if constexpr (K::padded) return k >= p.skip;
  else return true;
}

// An int32 as a double, exactly: the low word of 2^52 + 2^31 + v, less
// that offset. One double add, where a conversion takes the XU pipe (16
// results a clock an SM on the H100 against the FP64 pipe's 64).
__device__ __forceinline__ double exact_double(int32_t v) {
  return __hiloint2double(0x43300000, v ^ (int32_t)0x80000000) - 0x1.00000800p52;
}

// A tap held as Held (what the ring and A and B keep), in Acc.
template <class Acc, class Held>
__device__ __forceinline__ Acc as_sum(Held v) {
  if constexpr (std::is_integral_v<Held> && std::is_same_v<Acc, double>) return exact_double(v);
  else return (Acc)v;
}

// Taps a and b paired as a symmetric pass of kind K pairs them (sum,
// difference, or either by p's sign), in Acc. The pair is made in the held
// type: integers held in int32 (8-bit and 16-bit data) are paired in int32
// before their one conversion, exact as the double operation on them is.
template <class Acc, class K, class Held>
__device__ __forceinline__ Acc tap_pair(const FusedPass& p, Held a, Held b) {
  static_assert(std::is_integral_v<Held> || std::is_same_v<Held, Acc>, "values held as summed, or as integers");
  using H = Arith<Held>;
  return as_sum<Acc>(K::symmetry == kEitherSymmetry ? H::add_signed(a, H::pair_sign(p), b)
                     : K::symmetry > 0             ? H::add(a, b)
                                                   : H::sub(a, b));
}

// One pass of kind K at one output, tap k read through x(k), in scipy's tap
// order (LinePass::symmetry). TAPS > 0 is the pass's tap count known at
// compile time: the loops unroll, taps and weights become fixed operands.
template <class Acc, int TAPS, class K, class Tap>
__device__ __forceinline__ Acc apply_kind(const FusedPass& p, const Tap& x) {
  using M = Arith<Acc>;
  const int taps = TAPS > 0 ? TAPS : p.taps;
  if constexpr (K::kind == LineKind::Correlate && K::symmetry != 0) {
    const int c = taps / 2;
    Acc sum = M::mul(as_sum<Acc>(x(c)), M::weight(p, c));
#pragma unroll
    for (int k = 0; k < c; ++k)
      if (own_tap<K>(p, k)) sum = M::add(sum, M::mul(tap_pair<Acc, K>(p, x(k), x(2 * c - k)), M::weight(p, k)));
    return sum;
  } else if constexpr (K::kind == LineKind::Correlate) {
    Acc sum = M::mul(as_sum<Acc>(x(taps - 1)), M::weight(p, taps - 1));
#pragma unroll
    for (int k = 0; k + 1 < taps; ++k)
      if (own_tap<K>(p, k)) sum = M::add(sum, M::mul(as_sum<Acc>(x(k)), M::weight(p, k)));
    return sum;
  } else if constexpr (K::kind == LineKind::Uniform) {
    Acc sum = 0;
#pragma unroll
    for (int k = 0; k < taps; ++k)
      if (own_tap<K>(p, k)) sum += x(k);
    // Sums in float are within tolerance, not exact: a multiply by the
    // reciprocal (one rounding more) spares the division's instruction
    // sequence. Sums in double divide, as scipy does, for exact integers.
    // Sums in int32 (8-bit and 16-bit data) divide as integers where TAPS
    // is known, truncating (a multiply and shifts): the integer scipy's
    // quotient truncates to, as a quotient that is not an integer lies
    // 1/size or more from one, far beyond its rounding (H100, uint16 uniform
    // 3: 8192^2 0.220 -> 0.146 ms, 256^3 0.142 -> 0.102; a run-time divisor
    // divided as integers was slower than in double: uniform 5 0.349 ->
    // 0.366).
    // Unsigned data's sums divide by the high word of one multiply (on the
    // FMA pipe), where a signed division takes three instructions, two of
    // them the ALU's.
    if constexpr (std::is_same_v<Acc, float>) {
      return sum * p.inverse_size;
    } else if constexpr (std::is_integral_v<Acc> && TAPS > 0 && !K::padded && K::non_negative) {
      static_assert(TAPS * TAPS <= 65536, "sums of TAPS 16-bit values below 2^32 / TAPS");
      return (Acc)__umulhi((uint32_t)sum, kCeilReciprocal<TAPS>);
    } else if constexpr (std::is_integral_v<Acc> && TAPS > 0 && !K::padded) {
      return sum / TAPS;
    } else {
      return (Acc)(sum / p.size);  // an int32 sum: truncated, as the chain stores it
    }
  } else {  // scipy's rule: replaced only by a strictly smaller (larger) value
    Acc v = x(0);
#pragma unroll
    for (int k = 1; k < taps; ++k) {
      const Acc xk = x(k);
      if (K::padded && k <= p.skip) {  // the window starts at the pass's first own tap
        if (k == p.skip) v = xk;
        continue;
      }
      if (K::kind == LineKind::Minimum ? xk < v : xk > v) v = xk;
    }
    return v;
  }
}

// apply_kind with the kind switched on at run time, for fused_kernel, which
// computes a few outputs of a pass per thread (resolving the kind once a pass
// there made ptxas spill).
template <class Acc, int TAPS, class Tap>
__device__ __forceinline__ Acc apply_pass(const FusedPass& p, const Tap& x) {
  Acc result;
  with_kind(p, [&](auto kind) { result = apply_kind<Acc, TAPS, decltype(kind)>(p, x); });
  return result;
}

// apply_pass, or apply_kind when every pass of the chain is of kind K
// (KindOf; void: switched on at run time).
template <class Acc, int TAPS, class K, class Tap>
__device__ __forceinline__ Acc apply_pass_as(const FusedPass& p, const Tap& x) {
  if constexpr (std::is_void_v<K>) return apply_pass<Acc, TAPS>(p, x);
  else return apply_kind<Acc, TAPS, K>(p, x);
}

template <DType T>
constexpr bool kEightBit = T == DType::UInt8 || T == DType::Int8;
template <DType T>
constexpr bool kSixteenBitInteger = T == DType::UInt16 || T == DType::Int16;
template <DType T>
constexpr bool kSmallInteger = kEightBit<T> || kSixteenBitInteger<T>;
// 8-bit data summed in float (FusedPlan::eight_bit_float): exact by its
// margins (fast_results); its kernels take with_kind's ranged kinds.
template <DType T, class Acc>
constexpr bool kEightBitFloat = kEightBit<T> && std::is_same_v<Acc, float>;

// The type a dtype's passes are summed in (see Arith): double, or where
// NARROW float for float32/float16 chains that may sum in float
// (FusedPlan::float_sums) and int32 for 8-bit and 16-bit integer chains of
// box filters and integer weights (FusedPlan::int32_chain). The tile and long-pass kernels
// also hold 8-bit data in float (with_accumulator).
template <DType T, bool NARROW>
using AccumulatorOf =
    std::conditional_t<NARROW && (T == DType::Float32 || T == DType::Float16), float,
                       std::conditional_t<NARROW && kSmallInteger<T>, int32_t, double>>;

template <DType T, class Acc>
__device__ __forceinline__ Acc as_acc(typename storage<T>::type s) {
  if constexpr (std::is_same_v<Acc, int32_t>) return s;  // 8-bit and 16-bit integers (FusedPlan::int32_chain)
  else if constexpr (std::is_same_v<Acc, float> && T == DType::Float32) return s;
  else if constexpr (std::is_same_v<Acc, float> && T == DType::Float16) return half_bits_to_float(s);
  else if constexpr (kEightBit<T>) return (Acc)s;  // exact, without a detour through double
  else return (Acc)load_as_double<T>(reinterpret_cast<const char*>(&s));
}

// v, a value of T held in Acc (or, for 8-bit T, any integer within int32),
// as T's storage: as store_from_double makes it, without its detour through
// int64 for 8-bit dtypes. 8-bit data summed in float holds integers only
// (every result truncated, or exact), below 2^22 (eight_bit_float_sums):
// the low byte of v + 1.5 * 2^23's bits is v's, two's complement, an add
// instead of a conversion (XU pipe: ncu, 8-bit 2-D tiles, 57% busy).
template <DType T, class Acc>
__device__ __forceinline__ typename storage<T>::type storage_of(Acc v) {
  using S = typename storage<T>::type;
  if constexpr (std::is_same_v<Acc, int32_t>) {
    return (S)v;  // the low 8 or 16 bits, as through int64
  } else if constexpr (kSixteenBitInteger<T> && std::is_same_v<Acc, double>) {
    return (S)__double2loint(v + 0x1.8p52);  // an integer below 2^31: its two's complement, an add
  } else if constexpr (kEightBitFloat<T, Acc>) {
    return (S)__float_as_int(v + 12582912.0f);
  } else if constexpr (kEightBit<T>) {
    return (S)(int32_t)v;
  } else {
    S s;
    store_from_double<T>(reinterpret_cast<char*>(&s), (double)v);
    return s;
  }
}

// An integer v of 8-bit data summed in float (see storage_of) converted to
// T and read back, by the bits of v + 1.5 * 2^23 on both ways.
template <DType T>
__device__ __forceinline__ float wrapped_8bit(float v) {
  const uint32_t byte = (uint8_t)storage_of<T, float>(v);
  if constexpr (T == DType::UInt8) return __int_as_float(0x4B000000 | byte) - 8388608.0f;
  else return __int_as_float(0x4B000000 | (byte ^ 0x80u)) - 8388736.0f;  // int8: (byte ^ 0x80) - 128
}

// v as the chain stores it between passes: converted to T and read back.
template <DType T, class Acc>
__device__ __forceinline__ Acc round_to(Acc v) {
  if constexpr (std::is_same_v<Acc, float> && T == DType::Float32) {
    return v;
  } else if constexpr (std::is_same_v<Acc, int32_t>) {
    return as_acc<T, Acc>(storage_of<T>(v));
  } else if constexpr (std::is_same_v<Acc, float> && T == DType::Float16) {
    return half_bits_to_float(float_to_half_bits(v));
  } else {
    typename storage<T>::type s;
    store_from_double<T>(reinterpret_cast<char*>(&s), (double)v);
    return as_acc<T, Acc>(s);
  }
}

// v, an output of a chain's last pass summed in Acc, stored at p as T:
// integers of int32 sums by their low bits, other sums converted as scipy
// stores them.
template <DType T, class Acc>
__device__ __forceinline__ void store_output(char* p, Acc v) {
  if constexpr (std::is_integral_v<Acc>) *reinterpret_cast<typename storage<T>::type*>(p) = storage_of<T>(v);
  else store_elem<T>(p, v, true);
}

// Pass p at the R outputs down a column whose taps v holds (output r's
// taps: v[r] .. v[r + TAPS - 1]), the first `rows` of them stored from
// `out` on, `step` bytes apart.
template <DType T, int TAPS, int R, class Acc>
__device__ __forceinline__ void store_column(const FusedPass& p, const Acc (&v)[R + TAPS - 1], char* out,
                                             int64_t step, int rows) {
  with_kind(p, [&](auto kind) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= rows) break;
      store_output<T>(out, apply_kind<Acc, TAPS, decltype(kind)>(p, [&](int k) { return v[r + k]; }));
      out += step;
    }
  });
}

// What a kernel holds a chain's values in between passes (ring, A and B)
// when it sums them in Acc: Acc itself, or int32 where INTEGER (8-bit and
// 16-bit integer chains summed in double: FusedPlan::integer_held), whose
// values are integers of the dtype: half the shared memory and its traffic
// of double.
template <class Acc, bool INTEGER>
using HeldOf = std::conditional_t<INTEGER, int32_t, Acc>;

// Whether a pass of kind K (KindOf; void: any) keeps its results values of
// T, so that rounding them to T changes nothing: in a box chain that reads
// only values of T (launch_box_chain), a minimum or maximum is one of its
// taps, and a mean of integers summed in int32, truncated, lies within its
// taps' range; a correlation of kind in_range was proven to (8-bit data
// summed in float, truncated: fast_results).
template <class K, class Acc>
constexpr bool kKeepsValues = [] {
  if constexpr (std::is_void_v<K>) return false;
  else return K::in_range || K::kind == LineKind::Minimum || K::kind == LineKind::Maximum ||
              (K::kind == LineKind::Uniform && std::is_integral_v<Acc>);
}();

// v, a pass's sum in Acc, as the chain stores it (rounded to T), held as Held.
template <DType T, class Held, class Acc>
__device__ __forceinline__ Held held_result(Acc v) {
  if constexpr (std::is_same_v<Held, Acc>) {
    return round_to<T, Acc>(v);
  } else {
    typename storage<T>::type s;
    store_from_double<T>(reinterpret_cast<char*>(&s), (double)v);
    return as_acc<T, Held>(s);
  }
}

// held_result of a pass of kind K: v itself where the kind keeps T's values
// (an ALU instruction or two an output spared: the wrap to 8 or 16 bits,
// float16's two conversions).
template <DType T, class Held, class K, class Acc>
__device__ __forceinline__ Held kept_result(Acc v) {
  if constexpr (kKeepsValues<K, Acc> && std::is_same_v<Held, Acc>) return v;
  else return held_result<T, Held>(v);
}

// A correlation of 16-bit integers held in double (FusedPass::fma_sums):
// the terms of scipy's order, each product fused into its add. Within
// p.fma_margin of scipy's sum (core/separable.hpp: integer_fma_margin), and
// two double operations a pair instead of three (the long-pass kernels;
// H100, 8192^2 uint16 gaussian sigma 4: 1.10 -> 1.03 ms).
template <int TAPS, class K, class Tap>
__device__ __forceinline__ double fma_sum(const FusedPass& p, const Tap& x) {
  static_assert(K::symmetry != kEitherSymmetry, "fused_kernel's signed pairs are not summed here");
  const int taps = TAPS > 0 ? TAPS : p.taps;
  if constexpr (K::symmetry != 0) {
    const int c = taps / 2;
    double sum = x(c) * p.weights[c];
#pragma unroll
    for (int k = 0; k < c; ++k) {
      const double pair = K::symmetry > 0 ? x(k) + x(2 * c - k) : x(k) - x(2 * c - k);  // exact
      if (own_tap<K>(p, k)) sum = __fma_rn(pair, p.weights[k], sum);
    }
    return sum;
  } else {
    double sum = x(taps - 1) * p.weights[taps - 1];
#pragma unroll
    for (int k = 0; k + 1 < taps; ++k)
      if (own_tap<K>(p, k)) sum = __fma_rn(x(k), p.weights[k], sum);
    return sum;
  }
}

// fast_results for 16-bit integers summed with fma_sum. The sum is read in
// fixed point with 20 fraction bits from the low 52 bits of sum + 1.5 * 2^32
// ((2^31 + sum) * 2^20, rounded; |sum| < 2^30): the integer below it and the
// fraction from two shifts, one double add instead of a truncation, a
// distance, comparisons and conversions in double.
template <DType T, int TAPS, class K, int N, class Tap>
__device__ __forceinline__ uint32_t fma_results(const FusedPass& p, const Tap& x, double (&result)[N]) {
  static_assert(N <= 32, "one bit an output");
  const uint32_t margin = p.fma_margin;
  uint32_t near_step = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const double shifted = fma_sum<TAPS, K>(p, [&](int k) { return x(i, k); }) + 0x1.8p32;
    const uint32_t lo = __double2loint(shifted), hi = __double2hiint(shifted);
    const int32_t floor = (int32_t)(__funnelshift_r(lo, hi, 20) ^ 0x80000000u);
    const uint32_t part = lo << 12;  // the fraction, in 2^-32 units
    // part < margin or part > 2^32 - margin, in one compare (margin 0: never)
    near_step |= (uint32_t)(part + margin < 2 * margin) << i;
    const int32_t whole = floor + (int32_t)(floor < 0 && part != 0);  // truncated toward 0
    result[i] = as_acc<T, double>(storage_of<T>(whole));
  }
  return near_step;
}

// Pass p of kind K at N outputs summed as the chain's accumulator sums, each
// rounded to T as the chain stores it: result[i] from taps read through x(i, k).
template <DType T, int TAPS, class K, class Acc, int N, class Tap>
__device__ __forceinline__ uint32_t rounded_results(const FusedPass& p, const Tap& x, Acc (&result)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) result[i] = round_to<T, Acc>(apply_kind<Acc, TAPS, K>(p, [&](int k) { return x(i, k); }));
  return 0;
}

// Pass p of kind K at N outputs, as the chain stores them (rounded to T):
// result[i] from taps read through x(i, k). For 8-bit data summed in float
// (FusedPlan::eight_bit_float), a correlation whose float sum lies within
// p.margin of an integer is to be summed again in double in scipy's order
// (exact_result): the result is scipy's to the bit either way
// (core/separable.hpp, integer_float_margin: scipy's sum lies within less
// than the margin of the float sum, so its truncation is the float sum's
// unless an integer lies that near). 16-bit integers summed with fused
// multiply-adds likewise (fma_results), where FMA_SUMS: the long-pass
// kernels; in plane_kernel's tiles ptxas moved each weight into registers
// for every fused multiply-add, and uint16 went 0.39 -> 0.44 ms (H100);
// in blocked_kernel the settling of each output's bit, inlined, spilled
// (256^3 uint16 sigma 1: 0.260 -> 0.266-0.273 ms).
// Returns those outputs as bits (bit i: output i), result[i] holding the
// fast sum's value meanwhile. The test is made for the N outputs at once,
// one branch for all, instead of a branch an output (ncu: a sixth of an
// 8-bit tile's instructions were those branches; 2-D gaussian on 8192^2
// uint8 0.629 -> 0.609 ms on the H100); one truncation an output, the
// distance to the integers from it, and its wrap back into the byte unless
// the pass's kind is in_range (gaussians: H100, uint8 sigma 2 on 8192^2
// 0.271-0.275 -> 0.250-0.260 ms, sigma 1 on 256^3 0.164-0.172 -> 0.149-0.159).
template <DType T, int TAPS, class K, bool FMA_SUMS = true, class Acc, int N, class Tap>
__device__ __forceinline__ uint32_t fast_results(const FusedPass& p, const Tap& x, Acc (&result)[N]) {
  if constexpr (kEightBitFloat<T, Acc> && K::kind == LineKind::Correlate) {
    static_assert(N <= 32, "one bit an output");
    uint32_t near_step = 0;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const float sum = apply_kind<Acc, TAPS, K>(p, [&](int k) { return x(i, k); });
      const float whole = truncf(sum), part = fabsf(sum - whole);  // exact: |whole| <= |sum| < |whole| + 1
      near_step |= (uint32_t)(part < p.margin || part > p.far_margin) << i;
      if constexpr (kKeepsValues<K, Acc>) result[i] = whole;  // a value of T already: four instructions spared
      else result[i] = wrapped_8bit<T>(whole);
    }
    return near_step;
  } else if constexpr (FMA_SUMS && kSixteenBitInteger<T> && std::is_same_v<Acc, double> &&
                       K::kind == LineKind::Correlate) {
    return p.fma_sums ? fma_results<T, TAPS, K>(p, x, result) : rounded_results<T, TAPS, K>(p, x, result);
  } else {
    return rounded_results<T, TAPS, K>(p, x, result);
  }
}

// One output of pass p summed in double in scipy's order, x(k) its tap k,
// as the chain stores it.
template <DType T, int TAPS, class K, class Acc, class Tap>
__device__ __forceinline__ Acc exact_result(const FusedPass& p, const Tap& x) {
  const double exact = apply_kind<double, TAPS, K>(p, [&](int k) { return (double)x(k); });
  typename storage<T>::type s;
  store_from_double<T>(reinterpret_cast<char*>(&s), exact);
  return as_acc<T, Acc>(s);
}

// The N outputs near a step (fast_results' bits) summed again from the
// registers x reads, output i handed to put(i, value): each such bit costs
// the warp a double sum if any of its threads has it.
template <DType T, int TAPS, class K, class Acc, int N, class Tap, class Put>
__device__ __forceinline__ void settle_from_registers(const FusedPass& p, uint32_t near_step, const Tap& x,
                                                      const Put& put) {
#pragma unroll  // x(i, k) must index registers with constants
  for (int i = 0; i < N; ++i)
    if (near_step >> i & 1) put(i, exact_result<T, TAPS, K, Acc>(p, [&](int k) { return x(i, k); }));
}

// fast_results with the outputs near a step summed again.
template <DType T, int TAPS, class K, class Acc, int N, class Tap>
__device__ __forceinline__ void pass_results(const FusedPass& p, const Tap& x, Acc (&result)[N]) {
  const uint32_t near_step = fast_results<T, TAPS, K>(p, x, result);
  if (near_step) settle_from_registers<T, TAPS, K, Acc, N>(p, near_step, x, [&](int i, Acc v) { result[i] = v; });
}

// N elements read or stored with one access: aligned to their size.
template <class S, int N>
struct alignas(N * sizeof(S)) Run {
  S v[N];
};

// v[0 .. N) from shared memory at p (aligned to VEC values), VEC values a load.
template <int N, int VEC, class Acc>
__device__ __forceinline__ void load_run(const Acc* p, Acc (&v)[N]) {
  const Run<Acc, VEC>* run = reinterpret_cast<const Run<Acc, VEC>*>(p);
#pragma unroll
  for (int k = 0; k < N / VEC; ++k) {
    const Run<Acc, VEC> w = run[k];
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[k * VEC + i] = w.v[i];
  }
}

// Stores the Q outputs of `out` at p, a row's elements `step` bytes apart of
// which `remaining` are left: with one access where `whole` (the rows allow
// it: FusedArgs::run_stores) and all Q are there, else element by element.
template <class S, int Q>
__device__ __forceinline__ void store_run(char* p, const Run<S, Q>& out, int64_t step, int64_t remaining,
                                         bool whole) {
  if (whole && remaining >= Q) {
    *reinterpret_cast<Run<S, Q>*>(p) = out;
  } else {
    for (int i = 0; i < Q && i < remaining; ++i) *reinterpret_cast<S*>(p + i * step) = out.v[i];
  }
}

// store_run of Q neighbouring results held in Acc, each converted to T.
template <DType T, int Q, class Acc>
__device__ __forceinline__ void store_results(char* p, const Acc (&results)[Q], int64_t step, int64_t remaining,
                                              bool whole) {
  Run<typename storage<T>::type, Q> out;
#pragma unroll
  for (int i = 0; i < Q; ++i) out.v[i] = storage_of<T>(results[i]);
  store_run(p, out, step, remaining, whole);
}

// a op b in float32 or float64, rounded whatever follows: nvcc would fuse
// a square and the add after it into one multiply-add (numpy rounds the
// square first).
template <DType T>
__device__ __forceinline__ typename storage<T>::type rounded_op(Elementwise op, typename storage<T>::type a,
                                                                typename storage<T>::type b) {
  static_assert(T == DType::Float32 || T == DType::Float64, "store_combined's dtypes");
  if constexpr (T == DType::Float32)
    return op == Elementwise::Add ? __fadd_rn(a, b) : op == Elementwise::Multiply ? __fmul_rn(a, b) : __fsqrt_rn(a);
  else
    return op == Elementwise::Add ? __dadd_rn(a, b) : op == Elementwise::Multiply ? __dmul_rn(a, b) : __dsqrt_rn(a);
}

// store_results, the results combined with what the output holds first
// (Combine): as numpy's square, add and sqrt of the stored results would.
// Built for the chains fused_derivative_sum takes only (float32 and float64
// summed in double): the other kernels are as they were.
template <DType T, int Q, class Acc>
__device__ __forceinline__ void store_combined(Combine combine, char* p, const Acc (&results)[Q], int64_t step,
                                               int64_t remaining, bool whole) {
  if constexpr (!((T == DType::Float32 || T == DType::Float64) && std::is_same_v<Acc, double>)) {
    store_results<T>(p, results, step, remaining, whole);
  } else {
    if (combine == Combine::Store) return store_results<T>(p, results, step, remaining, whole);
    using S = typename storage<T>::type;
    Run<S, Q> before{}, out;
    if (combine != Combine::Square) {
      if (whole && remaining >= Q) before = *reinterpret_cast<const Run<S, Q>*>(p);
      else
        for (int i = 0; i < Q && i < remaining; ++i) before.v[i] = *reinterpret_cast<const S*>(p + i * step);
    }
#pragma unroll
    for (int i = 0; i < Q; ++i) {
      S r = storage_of<T>(results[i]);
      if (combine != Combine::Add) r = rounded_op<T>(Elementwise::Multiply, r, r);
      if (combine != Combine::Square) r = rounded_op<T>(Elementwise::Add, before.v[i], r);
      if (combine == Combine::SquareAddRoot) r = rounded_op<T>(Elementwise::Sqrt, r, r);
      out.v[i] = r;
    }
    store_run(p, out, step, remaining, whole);
  }
}

}  // namespace gpufilt::cuda::fused
