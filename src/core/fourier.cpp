#include "core/fourier.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/array.hpp"
#include "core/parallel.hpp"

namespace gpufilt {
namespace {

// One row along the last axis, of `n` elements of In (PartsIn values each:
// 1 real, 2 complex) into Out: the outer axes' part of the factor is `outer`
// (a product, or a sum of phases or squares), the last axis's table `last`;
// `ndim` the transform's, for the ellipsoid. Strides in elements of In / Out;
// unit rows vectorise.
template <class In, int PartsIn, class Out, int PartsOut>
void row(const In* src, int64_t si, Out* dst, int64_t so, int64_t n, const double* last, double outer,
         FourierFactor factor, int ndim) {
  auto one = [&](int64_t x, const In* a, Out* b) {
    double out_re = (double)a[0], out_im = PartsIn == 2 ? (double)a[1] : 0.0;
    const double terms = last ? factor_with(factor, outer, last[x]) : outer;
    if (factor == FourierFactor::Phase) {
      rotate(terms, out_re, out_im);
    } else {
      const double f = factor == FourierFactor::Product ? terms : ellipsoid_factor(terms, ndim);
      out_re *= f;
      out_im *= f;
    }
    b[0] = (Out)out_re;
    if (PartsOut == 2) b[1] = (Out)out_im;
  };
  if (si == PartsIn && so == PartsOut) {
    for (int64_t x = 0; x < n; ++x) one(x, src + x * PartsIn, dst + x * PartsOut);
  } else {
    for (int64_t x = 0; x < n; ++x) one(x, src + x * si, dst + x * so);
  }
}

template <class In, int PartsIn, class Out, int PartsOut>
void run(const FourierArray& in, const FourierArray& out, const std::vector<int64_t>& shape,
         const std::vector<std::vector<double>>& tables, FourierFactor factor) {
  const size_t ndim = shape.size();
  const double start = factor_start(factor);
  if (ndim == 0) {  // one element; no axis has a table
    row<In, PartsIn, Out, PartsOut>(reinterpret_cast<const In*>(in.data), PartsIn, reinterpret_cast<Out*>(out.data),
                                    PartsOut, 1, nullptr, start, factor, 0);
    return;
  }
  int64_t rows = 1;
  for (size_t ax = 0; ax + 1 < ndim; ++ax) rows *= shape[ax];
  const std::vector<double>& last = tables[ndim - 1];
  const int64_t n = shape[ndim - 1];
  // Threads take rows from about a million element-operations: a product counts one, a phase's or an
  // ellipsoid's factor (cos, sin, sqrt) sixteen.
  const int threads = cpu_max_threads();
  const int64_t work = rows * n * (factor == FourierFactor::Product ? 1 : 16);
  parallel_region(threads > 1 && work > (1 << 20), threads, [&] {
    dynamic_loop(rows, std::max<int64_t>(1, rows / (16 * threads)), [&](int64_t r) {
      // The row's index along each outer axis, then their part of the factor: scipy's start, then each
      // axis's entry in axis order.
      int64_t index[kMaxDims];
      for (int64_t rest = r, ax = (int64_t)ndim - 2; ax >= 0; --ax) {
        index[ax] = rest % shape[ax];
        rest /= shape[ax];
      }
      double outer = start;
      const char* src = in.data;
      char* dst = out.data;
      for (size_t ax = 0; ax + 1 < ndim; ++ax) {
        if (!tables[ax].empty()) outer = factor_with(factor, outer, tables[ax][index[ax]]);
        src += index[ax] * in.strides[ax];
        dst += index[ax] * out.strides[ax];
      }
      row<In, PartsIn, Out, PartsOut>(reinterpret_cast<const In*>(src), in.strides[ndim - 1] / (int64_t)sizeof(In),
                                      reinterpret_cast<Out*>(dst), out.strides[ndim - 1] / (int64_t)sizeof(Out), n,
                                      last.empty() ? nullptr : last.data(), outer, factor, (int)ndim);
    });
  });
}

template <class In, int PartsIn>
void run_into(const FourierArray& in, const FourierArray& out, const std::vector<int64_t>& shape,
              const std::vector<std::vector<double>>& tables, FourierFactor factor) {
  if (out.is_double) {
    if (out.is_complex) run<In, PartsIn, double, 2>(in, out, shape, tables, factor);
    else run<In, PartsIn, double, 1>(in, out, shape, tables, factor);
  } else {
    if (out.is_complex) run<In, PartsIn, float, 2>(in, out, shape, tables, factor);
    else run<In, PartsIn, float, 1>(in, out, shape, tables, factor);
  }
}

}  // namespace

void fourier_multiply(const FourierArray& in, const FourierArray& out, const std::vector<int64_t>& shape,
                      const std::vector<std::vector<double>>& tables, FourierFactor factor) {
  if (shape.size() > (size_t)kMaxDims) throw std::invalid_argument("the Fourier filters take at most 32 axes");
  if (factor == FourierFactor::Ellipsoid && shape.size() != 2 && shape.size() != 3)
    throw std::invalid_argument("the ellipsoid factor is for 2-D and 3-D transforms");
  if (factor == FourierFactor::Phase && !out.is_complex) throw std::invalid_argument("the phase needs a complex output");
  for (int64_t n : shape)
    if (n == 0) return;
  const int64_t in_part = in.is_double ? 8 : 4, out_part = out.is_double ? 8 : 4;
  if ((uintptr_t)in.data % in_part || (uintptr_t)out.data % out_part)
    throw std::invalid_argument("the Fourier filters' arrays must be aligned");
  for (size_t ax = 0; ax < shape.size(); ++ax)
    if (in.strides[ax] % in_part || out.strides[ax] % out_part)
      throw std::invalid_argument("the Fourier filters' arrays must be aligned");
  if (in.is_double) {
    if (in.is_complex) run_into<double, 2>(in, out, shape, tables, factor);
    else run_into<double, 1>(in, out, shape, tables, factor);
  } else {
    if (in.is_complex) run_into<float, 2>(in, out, shape, tables, factor);
    else run_into<float, 1>(in, out, shape, tables, factor);
  }
}

}  // namespace gpufilt
