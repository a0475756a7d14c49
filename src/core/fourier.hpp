// The Fourier filters' products on the CPU (gpufilt._fourier): every element
// of a transform times a factor built from one small table per axis, in one
// pass, as scipy's C loop computes it.
#pragma once
#include <cstdint>
#include <vector>

namespace gpufilt {

// A strided n-d array of one of the four float dtypes the Fourier filters
// take and give (float32, float64, complex64, complex128).
struct FourierArray {
  char* data;
  std::vector<int64_t> strides;  // bytes
  bool is_double, is_complex;
};

enum class FourierFactor {
  Product,  // the factor is the product of the axes' table entries, in axis order
  Phase,    // the factor is exp(i * the sum of the axes' table entries), summed in axis order
};

// out = in * factor, per element, the factor in double (scipy's order: the
// factor's terms axis by axis, then the element's real and imaginary parts
// each times it; for Phase the element times cos + i sin, a complex product).
// `tables[ax]` has shape[ax] entries, or is empty for an axis the factor
// skips (length 1). A real `out` takes a real `in` (Product only).
void fourier_multiply(const FourierArray& in, const FourierArray& out, const std::vector<int64_t>& shape,
                      const std::vector<std::vector<double>>& tables, FourierFactor factor);

}  // namespace gpufilt
