// The Fourier filters' products (gpufilt._fourier): every element of a
// transform times a factor built from one small table per axis, in one pass,
// as scipy's C loop computes it. The CPU pass is fourier.cpp; the CUDA one,
// cuda/fourier.cu, shares the arithmetic below.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/hostdevice.hpp"

namespace gpufilt {

// A strided n-d array of one of the four float dtypes the Fourier filters
// take and give (float32, float64, complex64, complex128).
struct FourierArray {
  char* data;
  std::vector<int64_t> strides;  // bytes
  bool is_double, is_complex;
};

enum class FourierFactor {
  Product,    // the product of the axes' table entries, in axis order
  Phase,      // exp(i * the sum of the axes' table entries), summed in axis order
  Ellipsoid,  // of r, the square root of the sum of the entries (squares): 2 J1(r) / r in 2-D,
              // 3 (sin r - r cos r) / r^3 in 3-D, 1 where r is 0
};

// The factor's terms before any axis (scipy's start), and after one more
// axis's table entry.
GF_HD double factor_start(FourierFactor f) { return f == FourierFactor::Product ? 1.0 : 0.0; }
GF_HD double factor_with(FourierFactor f, double terms, double entry) {
  return f == FourierFactor::Product ? terms * entry : terms + entry;
}

// a * b - c * d, rounded as C rounds each operation (nvcc would otherwise
// fuse a product into the subtraction, which scipy's C does not).
GF_HD double products_difference(double a, double b, double c, double d) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(__dmul_rn(a, b), __dmul_rn(c, d));
#else
  return a * b - c * d;
#endif
}

// a - b * c, likewise.
GF_HD double minus_product(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, __dmul_rn(b, c));
#else
  return a - b * c;
#endif
}

// The element (re, im) times exp(i * phase): a complex product with cos + i sin.
GF_HD void rotate(double phase, double& re, double& im) {
  const double c = cos(phase), s = sin(phase);
  const double rotated_re = products_difference(re, c, im, s);
#if defined(__CUDA_ARCH__)
  im = __dadd_rn(__dmul_rn(re, s), __dmul_rn(im, c));
#else
  im = re * s + im * c;
#endif
  re = rotated_re;
}

// The ellipsoid's factor of the summed squares of a 2-D or 3-D transform's
// axes, in scipy's arithmetic (ni_fourier.c); J1 is the C library's (CUDA's
// on the GPU), where scipy has its own copy of Cephes': a few units in the
// last place apart.
GF_HD double ellipsoid_factor(double sum_of_squares, int ndim) {
  const double r = sqrt(sum_of_squares);
  if (!(r > 0.0)) return 1.0;
#if defined(_WIN32) && !defined(__CUDA_ARCH__)
  if (ndim == 2) return 2.0 * _j1(r) / r;
#else
  if (ndim == 2) return 2.0 * j1(r) / r;
#endif
  return 3.0 * minus_product(sin(r), r, cos(r)) / (r * r * r);
}

// out = in * factor, per element, the factor in double (scipy's order: the
// factor's terms axis by axis, then the element's real and imaginary parts
// each times it; for Phase the element times cos + i sin, a complex product).
// `tables[ax]` has shape[ax] entries, or is empty for an axis the factor
// skips (length 1). A real `out` takes a real `in` (Product and Ellipsoid;
// Ellipsoid for 2-D and 3-D only). Rows are shared among the call's threads.
void fourier_multiply(const FourierArray& in, const FourierArray& out, const std::vector<int64_t>& shape,
                      const std::vector<std::vector<double>>& tables, FourierFactor factor);

}  // namespace gpufilt
