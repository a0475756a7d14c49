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

// Cephes' J1, as scipy's ni_fourier.c computes it operation for operation
// (rational approximations up to 5, the asymptotic form beyond, with the C
// library's sin, cos and sqrt): the CPU's 2-D ellipsoid is then scipy's to
// the bit, where the C library's j1 is a few units in the last place apart
// and slower (2048^2 complex64, one thread: 124 ms against scipy's 42).
namespace cephes_j1 {
inline double polevl(double x, const double* coef, int n) {  // coef[0] x^n + ... + coef[n]
  double sum = coef[0];
  for (int i = 1; i <= n; ++i) sum = sum * x + coef[i];
  return sum;
}
inline double p1evl(double x, const double* coef, int n) {  // x^n + coef[0] x^(n-1) + ... + coef[n-1]
  double sum = x + coef[0];
  for (int i = 1; i < n; ++i) sum = sum * x + coef[i];
  return sum;
}

inline double j1(double x) {
  static constexpr double RP[4] = {-8.99971225705559398224E8, 4.52228297998194034323E11,
                                   -7.27494245221818276015E13, 3.68295732863852883286E15};
  static constexpr double RQ[8] = {6.20836478118054335476E2,  2.56987256757748830383E5,
                                   8.35146791431949253037E7,  2.21511595479792499675E10,
                                   4.74914122079991414898E12, 7.84369607876235854894E14,
                                   8.95222336184627338078E16, 5.32278620332680085395E18};
  static constexpr double PP[7] = {7.62125616208173112003E-4, 7.31397056940917570436E-2, 1.12719608129684925192E0,
                                   5.11207951146807644818E0,  8.42404590141772420927E0,  5.21451598682361504063E0,
                                   1.00000000000000000254E0};
  static constexpr double PQ[7] = {5.71323128072548699714E-4, 6.88455908754495404082E-2, 1.10514232634061696926E0,
                                   5.07386386128601488557E0,  8.39985554327604159757E0,  5.20982848682361821619E0,
                                   9.99999999999999997461E-1};
  static constexpr double QP[8] = {5.10862594750176621635E-2, 4.98213872951233449420E0, 7.58238284132545283818E1,
                                   3.66779609360150777800E2,  7.10856304998926107277E2, 5.97489612400613639965E2,
                                   2.11688757100572135698E2,  2.52070205858023719784E1};
  static constexpr double QQ[7] = {7.42373277035675149943E1, 1.05644886038262816351E3, 4.98641058337653607651E3,
                                   9.56231892404756170795E3, 7.99704160447350683650E3, 2.82619278517639096600E3,
                                   3.36093607810698293419E2};
  constexpr double Z1 = 1.46819706421238932572E1, Z2 = 4.92184563216946036703E1;  // J1's first zeros, squared
  constexpr double THPIO4 = 2.35619449019234492885, SQ2OPI = .79788456080286535588;  // 3 pi / 4, sqrt(2 / pi)
  if (std::fabs(x) <= 5.0) {
    const double z = x * x;
    const double w = polevl(z, RP, 3) / p1evl(z, RQ, 8);
    return w * x * (z - Z1) * (z - Z2);
  }
  const double w = 5.0 / x, z = w * w;
  const double p = polevl(z, PP, 6) / polevl(z, PQ, 6);
  const double q = polevl(z, QP, 7) / p1evl(z, QQ, 7);
  const double xn = x - THPIO4;
  return (p * std::cos(xn) - w * q * std::sin(xn)) * SQ2OPI / std::sqrt(x);
}
}  // namespace cephes_j1

// The ellipsoid's factor of the summed squares of a 2-D or 3-D transform's
// axes, in scipy's arithmetic (ni_fourier.c); J1 is Cephes' on the CPU, as
// scipy's, and CUDA's on the GPU (a few units in the last place apart).
GF_HD double ellipsoid_factor(double sum_of_squares, int ndim) {
  const double r = sqrt(sum_of_squares);
  if (!(r > 0.0)) return 1.0;
#if defined(__CUDA_ARCH__)
  if (ndim == 2) return 2.0 * j1(r) / r;
#else
  if (ndim == 2) return 2.0 * cephes_j1::j1(r) / r;
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
