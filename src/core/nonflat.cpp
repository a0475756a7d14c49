#include "core/nonflat.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/cpu_backend.hpp"
#include "core/cpu_isa.hpp"
#include "core/parallel.hpp"

namespace gpufilt {
namespace {

// One output row: the first tap's terms, then each later tap's.
template <class E, bool Erosion>
void row(const E* base, int64_t n, const std::vector<int64_t>& offsets, double first_height, const E* heights,
         double* out) {
  const E* first = base + offsets[0];
  for (int64_t i = 0; i < n; ++i) out[i] = (double)first[i] + first_height;
  for (size_t t = 1; t < offsets.size(); ++t) {
    const E* __restrict src = base + offsets[t];
    const E h = heights[t];
    double* __restrict o = out;
    for (int64_t i = 0; i < n; ++i) {
      const double v = (double)add_in<E>(src[i], h);
      o[i] = (Erosion ? v < o[i] : v > o[i]) ? v : o[i];
    }
  }
}

template <class E>
using RowFn = void (*)(const E*, int64_t, const std::vector<int64_t>&, double, const E*, double*);

#if GPUFILT_ISA_COPIES
// row's copies for wider vectors: its inner loop (a conversion, a compare
// and a blend an element) vectorises. float32 128^3, 3x3x3 heights, one
// thread of a 2-core AMD EPYC, medians: 15.6 ms baseline, 7.4 AVX2, 7.8
// AVX-512 (scipy 30.2); uint8 10.3, 8.8, 6.0 (scipy 34.5).
template <class E, bool Erosion>
GF_AVX2 void row_avx2(const E* base, int64_t n, const std::vector<int64_t>& offsets, double first_height,
                      const E* heights, double* out) {
  row<E, Erosion>(base, n, offsets, first_height, heights, out);
}
template <class E, bool Erosion>
GF_AVX512 void row_avx512(const E* base, int64_t n, const std::vector<int64_t>& offsets, double first_height,
                          const E* heights, double* out) {
  row<E, Erosion>(base, n, offsets, first_height, heights, out);
}
#endif

// The copy of row for this call's CPU level.
template <class E, bool Erosion>
RowFn<E> row_kernel() {
#if GPUFILT_ISA_COPIES
  return for_cpu_isa<RowFn<E>>(&row<E, Erosion>, &row_avx2<E, Erosion>, &row_avx512<E, Erosion>);
#else
  return &row<E, Erosion>;
#endif
}

template <class E>
void run(const E* padded, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
         const std::vector<int64_t>& offsets, double first_height, const E* h, bool erosion, double* out) {
  const size_t ndim = shape.size();
  const int64_t n = shape[ndim - 1];
  int64_t rows = 1;
  for (size_t ax = 0; ax + 1 < ndim; ++ax) rows *= shape[ax];
  const int64_t work = rows * n * (int64_t)offsets.size();
  const int threads = cpu_max_threads();
  const RowFn<E> one_row = erosion ? row_kernel<E, true>() : row_kernel<E, false>();
  parallel_region(threads > 1 && work > (1 << 18), threads, [&] {
    dynamic_loop(rows, std::max<int64_t>(1, rows / (16 * threads)), [&](int64_t r) {
      const E* base = padded;
      for (int64_t rem = r, ax = (int64_t)ndim - 2; ax >= 0; --ax) {
        base += (rem % shape[ax]) * strides[ax];
        rem /= shape[ax];
      }
      one_row(base, n, offsets, first_height, h, out + r * n);
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
                     double first_height, const void* heights, bool erosion, double* out) {
  if (shape.empty() || padded_strides.size() != shape.size() || offsets.empty())
    throw std::invalid_argument("nonflat_extreme: at least one axis, one stride per axis and one tap");
  for (int64_t n : shape)
    if (n == 0) return;
  auto go = [&](auto tag) {
    using E = decltype(tag);
    run<E>(static_cast<const E*>(padded), shape, padded_strides, offsets, first_height, static_cast<const E*>(heights),
           erosion, out);
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
