#include "core/nonflat.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/cpu_backend.hpp"
#include "core/cpu_isa.hpp"
#include "core/parallel.hpp"

namespace gpufilt {
namespace {

// The extreme that any term replaces: the largest (smallest) value of E, an
// infinity for floats, which NaN never replaces either.
template <class E, bool Erosion>
constexpr E unmatched() {
  using L = std::numeric_limits<E>;
  if constexpr (L::has_infinity) return Erosion ? L::infinity() : -L::infinity();
  else return Erosion ? L::max() : L::lowest();
}

// GCC's unroll-and-jam would take row's taps in pairs, in a loop it leaves
// scalar (float32, 3x3x3 on 128^3: 18.6 ms against 8.8): one tap at a time.
#if defined(__GNUC__) && !defined(__clang__)
#define GF_ONE_TAP_AT_A_TIME __attribute__((optimize("no-loop-unroll-and-jam")))
#else
#define GF_ONE_TAP_AT_A_TIME
#endif

// One output row. scipy compares each later tap's term (in E) with the
// running double result, from the first tap's (in double). The extreme of
// the later terms is found in E first, in vectors of E's width, then
// compared once with the first term: the same value, as converting E to
// double keeps order (every term's double is no more than the next one's),
// a strict comparison keeps the earliest of equal terms either way, and a
// NaN term replaces nothing in either order.
template <class E, bool Erosion, class O>
GF_ONE_TAP_AT_A_TIME void row(const E* base, int64_t n, const std::vector<int64_t>& offsets, double first_height,
                              const E* heights, E* __restrict extreme, O* __restrict out) {
  std::fill(extreme, extreme + n, unmatched<E, Erosion>());
  for (size_t t = 1; t < offsets.size(); ++t) {
    const E* __restrict src = base + offsets[t];
    const E h = heights[t];
    for (int64_t i = 0; i < n; ++i) {
      const E v = add_in<E>(src[i], h);
      extreme[i] = (Erosion ? v < extreme[i] : v > extreme[i]) ? v : extreme[i];
    }
  }
  const E* first = base + offsets[0];
  for (int64_t i = 0; i < n; ++i) {
    const double f = (double)first[i] + first_height, later = (double)extreme[i];
    out[i] = (O)((Erosion ? later < f : later > f) ? later : f);
  }
}

template <class E, class O>
using RowFn = void (*)(const E*, int64_t, const std::vector<int64_t>&, double, const E*, E*, O*);

#if GPUFILT_ISA_COPIES
// row's copies for wider vectors: its inner loop (an add, a compare and a
// blend an element, in E) vectorises. 128^3, 3x3x3 heights, one thread of a
// 2-core Xeon: float32 4.2 ms, uint8 1.9 (with terms compared in double
// each: 8.8 and 8.4; scipy 49).
template <class E, bool Erosion, class O>
GF_AVX2 GF_ONE_TAP_AT_A_TIME void row_avx2(const E* base, int64_t n, const std::vector<int64_t>& offsets,
                                           double first_height, const E* heights, E* extreme, O* out) {
  row<E, Erosion, O>(base, n, offsets, first_height, heights, extreme, out);
}
template <class E, bool Erosion, class O>
GF_AVX512 GF_ONE_TAP_AT_A_TIME void row_avx512(const E* base, int64_t n, const std::vector<int64_t>& offsets,
                                               double first_height, const E* heights, E* extreme, O* out) {
  row<E, Erosion, O>(base, n, offsets, first_height, heights, extreme, out);
}
#endif

// The copy of row for this call's CPU level.
template <class E, bool Erosion, class O>
RowFn<E, O> row_kernel() {
#if GPUFILT_ISA_COPIES
  return for_cpu_isa<RowFn<E, O>>(&row<E, Erosion, O>, &row_avx2<E, Erosion, O>, &row_avx512<E, Erosion, O>);
#else
  return &row<E, Erosion, O>;
#endif
}

template <class E, class O>
void run(const E* padded, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
         const std::vector<int64_t>& offsets, double first_height, const E* h, bool erosion, O* out) {
  const size_t ndim = shape.size();
  const int64_t n = shape[ndim - 1];
  int64_t rows = 1;
  for (size_t ax = 0; ax + 1 < ndim; ++ax) rows *= shape[ax];
  const int64_t work = rows * n * (int64_t)offsets.size();
  const int threads = cpu_max_threads();
  const RowFn<E, O> one_row = erosion ? row_kernel<E, true, O>() : row_kernel<E, false, O>();
  parallel_region(threads > 1 && work > (1 << 18), threads, [&] {
    std::vector<E> extreme(n);  // the row's extreme of the later taps, this thread's
    dynamic_loop(rows, std::max<int64_t>(1, rows / (16 * threads)), [&](int64_t r) {
      const E* base = padded;
      for (int64_t rem = r, ax = (int64_t)ndim - 2; ax >= 0; --ax) {
        base += (rem % shape[ax]) * strides[ax];
        rem /= shape[ax];
      }
      one_row(base, n, offsets, first_height, h, extreme.data(), out + r * n);
    });
  });
}

}  // namespace

void check_nonflat_reads(const std::vector<int64_t>& shape, const std::vector<int64_t>& padded_shape,
                         const std::vector<int64_t>& padded_strides, const std::vector<int64_t>& offsets,
                         int64_t padded_size) {
  const size_t ndim = shape.size();
  int64_t last_base = 0;  // the largest base(i): every read must stay inside `padded`
  for (size_t ax = 0; ax < ndim; ++ax) {
    if (shape[ax] > padded_shape[ax]) throw std::invalid_argument("out must be no larger than padded");
    if (shape[ax] > 0 && ax + 1 < ndim) last_base += (shape[ax] - 1) * padded_strides[ax];
  }
  for (int64_t off : offsets)
    if (off < 0 || off > padded_size - shape[ndim - 1] - last_base)  // (no sum that can overflow)
      throw std::invalid_argument("an offset reads outside padded");
}

void nonflat_extreme(const void* padded, DType dtype, const std::vector<int64_t>& shape,
                     const std::vector<int64_t>& padded_strides, const std::vector<int64_t>& offsets,
                     double first_height, const void* heights, bool erosion, void* out, bool out_float) {
  if (shape.empty() || padded_strides.size() != shape.size() || offsets.empty())
    throw std::invalid_argument("nonflat_extreme: at least one axis, one stride per axis and one tap");
  for (int64_t n : shape)
    if (n == 0) return;
  if (out_float && dtype != DType::Float32)
    throw std::invalid_argument("nonflat_extreme: float out for float32 only");
  auto go = [&](auto tag) {
    using E = decltype(tag);
    const auto* p = static_cast<const E*>(padded);
    const auto* h = static_cast<const E*>(heights);
    if constexpr (std::is_same_v<E, float>)
      if (out_float)
        return run<E>(p, shape, padded_strides, offsets, first_height, h, erosion, static_cast<float*>(out));
    run<E>(p, shape, padded_strides, offsets, first_height, h, erosion, static_cast<double*>(out));
  };
  switch (dtype) {
    case DType::Bool:
    case DType::UInt8: return go(uint8_t{});
    case DType::Int8: return go(int8_t{});
    case DType::Int16: return go(int16_t{});
    case DType::UInt16: return go(uint16_t{});
    case DType::Int32: return go(int32_t{});
    case DType::UInt32: return go(uint32_t{});
    case DType::Int64: return go(int64_t{});
    case DType::UInt64: return go(uint64_t{});
    case DType::Float32: return go(float{});
    case DType::Float64: return go(double{});
    default: throw std::invalid_argument(std::string("nonflat_extreme: no kernel for ") + dtype_name(dtype));
  }
}

}  // namespace gpufilt
