#pragma once
// Non-flat grey erosion and dilation on the CPU (scipy.ndimage.grey_erosion
// and grey_dilation with a `structure` of heights): per output element, the
// minimum (maximum) over the footprint's taps of the input plus the tap's
// height, in scipy's own arithmetic (ni_filters.c): the first tap's term in
// double, every later one in the input's type (the height converted to that
// type first, the sum wrapped back into it), each compared with the
// running double result. Where a comparison with NaN fails, the result
// stays.
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/dtype.hpp"
#include "core/hostdevice.hpp"

namespace gpufilt {

// a + b in E, as C computes `E tmp = ...; tmp += (E)h` (integers: in int,
// wrapped back into E; unsigned arithmetic here, where C's would overflow).
// The CPU's and the GPU's non-flat kernels both sum so.
template <class E>
GF_HD E add_in(E a, E b) {
  if constexpr (std::is_integral_v<E> && !std::is_same_v<E, bool>) {
    using U = std::make_unsigned_t<E>;
    return (E)(U)((U)a + (U)b);
  } else {
    return a + b;
  }
}

// `padded`: the input padded by the caller (C order, `padded_strides` in
// elements, the last 1) so that output element i reads padded[base(i) +
// offsets[t]], base(i) its index in the padded array; the caller checks
// that every read falls inside it. `first_height`: tap 0's height;
// `heights`: every tap's height already converted to the input's type (an
// array of that type). `out`: C-order doubles of `shape` (at least 1-d), or
// with `out_float`, for float32 input, floats (each double result cast).
// Throws std::invalid_argument unless every read nonflat_extreme makes for
// an output of `shape` stays inside the padded input (`padded_shape` and
// `padded_strides`, in elements, C order, `padded_size` elements).
void check_nonflat_reads(const std::vector<int64_t>& shape, const std::vector<int64_t>& padded_shape,
                         const std::vector<int64_t>& padded_strides, const std::vector<int64_t>& offsets,
                         int64_t padded_size);

void nonflat_extreme(const void* padded, DType dtype, const std::vector<int64_t>& shape,
                     const std::vector<int64_t>& padded_strides, const std::vector<int64_t>& offsets,
                     double first_height, const void* heights, bool erosion, void* out, bool out_float = false);

}  // namespace gpufilt
