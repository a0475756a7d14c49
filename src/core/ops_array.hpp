// The array operations of gpufilt.ops that are not elementwise arithmetic
// (add and multiply are Elementwise ops, core/elementwise.hpp): filling and
// broadcasting copies, sums over any set of axes, and gathers along an axis.
// The plans and per-element conversions here are shared by the CPU kernels
// (core/ops_array.cpp) and the CUDA kernels (cuda/ops_array.cu), whose entry
// points are declared below without CUDA headers (the stream as intptr_t).
#pragma once
#include <cstdint>
#include <vector>

#include "core/array.hpp"
#include "core/cast.hpp"

namespace gpufilt {

// ---- fill and broadcast_to --------------------------------------------------

// Checks that `src` broadcasts to `out` with the same dtype; returns it viewed
// with out's shape (zero strides where broadcast). A 0-d `src` fills out.
ArrayDesc broadcast_source(const ArrayDesc& src, const ArrayDesc& out);

// out[...] = src, src already viewed with out's shape (broadcast_source); the
// bits are copied, whatever the dtype.
void copy_broadcast(const ArrayDesc& src, const ArrayDesc& out);

// ---- sum ----------------------------------------------------------------------

// A reduction as two loops: over the outputs (kept axes) and over the
// elements summed into each (reduced axes). Axes of length 1 are dropped,
// axes that walk memory as one are merged, and both lists are ordered
// outermost first by |stride in x|, so the last reduced axis is the most
// contiguous one. Plain data: CUDA kernels take it by value.
struct ReducePlan {
  int nkeep = 0, nred = 0;
  int64_t keep_shape[kMaxDims], keep_x[kMaxDims], keep_out[kMaxDims];
  int64_t red_shape[kMaxDims], red_x[kMaxDims];
  int64_t outputs = 1, reduced = 1;  // element counts
  // The last kept axis is more contiguous in x than every reduced axis: the
  // outputs are then summed side by side (a tile of neighbouring outputs per
  // task) so that reads stay contiguous.
  bool column = false;
};

// The plan summing x over `axes` (distinct, in range) into out, whose shape is
// x's without those axes (keepdims=false) or with them of length 1.
ReducePlan plan_reduction(const ArrayDesc& x, const std::vector<int>& axes, const ArrayDesc& out);

// How elements are summed, decided by the output dtype as numpy does with
// dtype=: floats in double (compensated), integers in wrapping 64-bit
// arithmetic after numpy's cast of each element, bool as "any nonzero".
enum class SumClass : int8_t { Float, Integer, Bool };
SumClass sum_class(DType out);

// numpy's cast of an element to int64 (floats truncate; x86's INT64_MIN for
// NaN and out-of-range values), as the uint64 bits the wrapping sum adds.
template <DType T>
GF_HD uint64_t load_as_wrapped_int(const char* p) {
  using S = typename storage<T>::type;
  if constexpr (is_float_dtype(T)) {
    int64_t r;
    store_from_double<DType::Int64>(reinterpret_cast<char*>(&r), load_as_double<T>(p));
    return (uint64_t)r;
  } else {
    S v;
    copy_element(&v, p, sizeof(S));
    return (uint64_t)(int64_t)v;  // sign-extends signed types; unsigned ones zero-extend
  }
}

// One element as the sum of class C adds it: a double or 64-bit integer bits.
template <DType T, SumClass C>
GF_HD auto load_summand(const char* p) {
  if constexpr (C == SumClass::Float) return load_as_double<T>(p);
  else if constexpr (C == SumClass::Integer) return load_as_wrapped_int<T>(p);
  else return (uint64_t)(load_as_double<T>(p) != 0.0);
}

// Writes a finished integer-class sum: its low bytes (numpy's wraparound),
// or nonzero-ness for bool.
GF_HD void store_wrapped_int(DType t, char* p, uint64_t v) {
  if (t == DType::Bool) {
    const uint8_t b = v != 0;
    copy_element(p, &b, 1);
  } else {
    const size_t n = t == DType::Int8 || t == DType::UInt8 ? 1 : t == DType::Int16 || t == DType::UInt16 ? 2
                   : t == DType::Int32 || t == DType::UInt32 ? 4 : 8;
    copy_element(p, &v, n);  // little-endian: the low bytes
  }
}

// Sums x over `axes` into out (any real dtype or bfloat16 each).
void sum(const ArrayDesc& x, const std::vector<int>& axes, const ArrayDesc& out);

// ---- gather -------------------------------------------------------------------

// numpy.take(source, index, axis) as one loop over out's elements: `source`
// and `index` are viewed with out's shape (source.shape[:axis] + index.shape
// + source.shape[axis+1:]), source without its `axis` (stride 0 along the
// index axes), index with stride 0 along the source axes; the element read
// is source_view + index_value * axis_stride.
struct GatherPlan {
  ArrayDesc source, index;
  int64_t axis_length = 0, axis_stride = 0;
};

// Checks shapes, dtypes (index: any integer dtype; out: source's dtype) and
// axis; throws std::invalid_argument naming the argument.
GatherPlan plan_gather(const ArrayDesc& source, const ArrayDesc& index, int axis, const ArrayDesc& out);

// An index value as int64, with numpy's wraparound of negative values
// applied; `n` (the axis length) or more when it is out of range.
template <DType T>
GF_HD int64_t load_index(const char* p, int64_t n) {
  using S = typename storage<T>::type;
  S v;
  copy_element(&v, p, sizeof(S));
  if constexpr (T == DType::UInt64) return v < (uint64_t)n ? (int64_t)v : n;
  else {
    const int64_t i = (int64_t)v;
    return i < 0 ? (i + n >= 0 ? i + n : n) : (i < n ? i : n);
  }
}

// out = take(source, index, axis); every index is checked before anything is
// written; an out-of-range one throws std::out_of_range.
void gather(const ArrayDesc& source, const ArrayDesc& index, int axis, const ArrayDesc& out);

// ---- the CUDA versions (cuda/ops_array.cu) -----------------------------------

namespace cuda {

void copy_broadcast(const ArrayDesc& src, const ArrayDesc& out, intptr_t stream);
void sum(const ArrayDesc& x, const std::vector<int>& axes, const ArrayDesc& out, intptr_t stream);

// The gather kernel checks every index. It cannot raise (src/cuda/
// range_error.cuh): an element whose index is out of range is written as
// zero bits (never read out of bounds) and the index is recorded for
// take_range_error (cuda/api.hpp).
void gather(const ArrayDesc& source, const ArrayDesc& index, int axis, const ArrayDesc& out, intptr_t stream);

}  // namespace cuda
}  // namespace gpufilt
