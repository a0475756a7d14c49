#include "core/fourier.hpp"

#include <cmath>
#include <complex>

namespace gpufilt {
namespace {

template <class T>
void load(const char* p, bool is_complex, double& re, double& im) {
  const T* v = reinterpret_cast<const T*>(p);
  re = (double)v[0];
  im = is_complex ? (double)v[1] : 0.0;
}

template <class T>
void store(char* p, bool is_complex, double re, double im) {
  T* v = reinterpret_cast<T*>(p);
  v[0] = (T)re;
  if (is_complex) v[1] = (T)im;
}

// One row along the last axis: the outer axes' part of the factor is
// `outer` (a product, or a sum of phases), the last axis's table `last`.
template <class In, class Out>
void row(const FourierArray& in, const FourierArray& out, const char* src, char* dst, int64_t n,
         const std::vector<double>& last, double outer, FourierFactor factor) {
  const int64_t si = in.strides.empty() ? 0 : in.strides.back(), so = out.strides.empty() ? 0 : out.strides.back();
  for (int64_t x = 0; x < n; ++x, src += si, dst += so) {
    double re, im;
    load<In>(src, in.is_complex, re, im);
    if (factor == FourierFactor::Product) {
      const double f = last.empty() ? outer : outer * last[x];
      store<Out>(dst, out.is_complex, f * re, f * im);
    } else {
      const double phase = last.empty() ? outer : outer + last[x];
      const double c = std::cos(phase), s = std::sin(phase);
      store<Out>(dst, out.is_complex, re * c - im * s, re * s + im * c);
    }
  }
}

template <class In, class Out>
void run(const FourierArray& in, const FourierArray& out, const std::vector<int64_t>& shape,
         const std::vector<std::vector<double>>& tables, FourierFactor factor) {
  const size_t ndim = shape.size();
  if (ndim == 0) {  // one element; no axis has a table
    row<In, Out>(in, out, in.data, out.data, 1, {}, factor == FourierFactor::Product ? 1.0 : 0.0, factor);
    return;
  }
  int64_t rows = 1;
  for (size_t ax = 0; ax + 1 < ndim; ++ax) rows *= shape[ax];
  std::vector<int64_t> at(ndim, 0);
  for (int64_t r = 0; r < rows; ++r) {
    // scipy starts from 1.0 (a product) or 0.0 (a phase) and takes each
    // axis's entry in order: the outer axes' part is the same start.
    double outer = factor == FourierFactor::Product ? 1.0 : 0.0;
    const char* src = in.data;
    char* dst = out.data;
    for (size_t ax = 0; ax + 1 < ndim; ++ax) {
      if (!tables[ax].empty()) outer = factor == FourierFactor::Product ? outer * tables[ax][at[ax]]
                                                                        : outer + tables[ax][at[ax]];
      src += at[ax] * in.strides[ax];
      dst += at[ax] * out.strides[ax];
    }
    row<In, Out>(in, out, src, dst, shape[ndim - 1], tables[ndim - 1], outer, factor);
    for (size_t ax = ndim - 1; ax-- > 0 && ++at[ax] == shape[ax];) at[ax] = 0;
  }
}

template <class In>
void run_into(const FourierArray& in, const FourierArray& out, const std::vector<int64_t>& shape,
              const std::vector<std::vector<double>>& tables, FourierFactor factor) {
  if (out.is_double) run<In, double>(in, out, shape, tables, factor);
  else run<In, float>(in, out, shape, tables, factor);
}

}  // namespace

void fourier_multiply(const FourierArray& in, const FourierArray& out, const std::vector<int64_t>& shape,
                      const std::vector<std::vector<double>>& tables, FourierFactor factor) {
  for (int64_t n : shape)
    if (n == 0) return;
  if (in.is_double) run_into<double>(in, out, shape, tables, factor);
  else run_into<float>(in, out, shape, tables, factor);
}

}  // namespace gpufilt
