// Elementwise arithmetic on arrays of one dtype, with numpy's semantics for
// that dtype (integers wrap, float16 rounds through float32). The filters
// built from several passes (generic_laplace, generic_gradient_magnitude)
// combine their partial results with it, on the device the data lives on.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/array.hpp"
#include "core/cast.hpp"

namespace gpufilt {

enum class Elementwise : int8_t {
  Add,       // out = a + b
  Subtract,  // out = a - b
  Square,    // out = a * a
  Sqrt,      // out = sqrt(a), computed in double and cast back (numpy's casting='unsafe')
};

GF_HD bool is_binary(Elementwise op) { return op == Elementwise::Add || op == Elementwise::Subtract; }

class LineBackend;

// Checks shapes and dtypes (a, b and out share both; b is ignored by unary
// ops) and runs `op`; complex Add and Subtract run on each component.
void run_elementwise(LineBackend& backend, Elementwise op, const ArrayDesc& a, const ArrayDesc& b,
                     const ArrayDesc& out);

// One element of `op` in dtype T: shared by the CPU and CUDA kernels.
template <DType T>
GF_HD void elementwise_apply(Elementwise op, const char* a, const char* b, char* out) {
  using S = typename storage<T>::type;
  S x, y, r;
  copy_element(&x, a, sizeof(S));
  if constexpr (T == DType::Float16 || T == DType::Bool) {
    const float u = (float)load_as_double<T>(a), v = is_binary(op) ? (float)load_as_double<T>(b) : u;
    const float f = op == Elementwise::Add ? u + v : op == Elementwise::Subtract ? u - v
                  : op == Elementwise::Square ? u * u : sqrtf(u);
    if constexpr (T == DType::Bool) r = f != 0.0f;
    else r = float_to_half_bits(f);
  } else if constexpr (T == DType::Float32 || T == DType::Float64) {
    copy_element(&y, is_binary(op) ? b : a, sizeof(S));
    r = op == Elementwise::Add ? x + y : op == Elementwise::Subtract ? x - y
      : op == Elementwise::Square ? x * x : (S)sqrt((double)x);
  } else {  // integers: wrap around in the unsigned type of the same width
    using U = std::make_unsigned_t<S>;
    copy_element(&y, is_binary(op) ? b : a, sizeof(S));
    if (op == Elementwise::Sqrt) {
      store_from_double<T>(out, sqrt((double)x));
      return;
    }
    r = (S)(op == Elementwise::Add ? (U)((U)x + (U)y) : op == Elementwise::Subtract ? (U)((U)x - (U)y)
                                                                                   : (U)((U)x * (U)x));
  }
  copy_element(out, &r, sizeof(S));
}

}  // namespace gpufilt
