// Elementwise arithmetic with numpy's semantics for the result dtype
// (integers wrap, float16 and bfloat16 round through float32) and numpy's
// broadcasting. The filters built from several passes (generic_laplace,
// generic_gradient_magnitude) combine their partial results with it, and
// gpufilt.ops.add/multiply run on it, on the device the data lives on.
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
  Sqrt,      // out = sqrt(a); integers' computed in double and cast back (numpy's casting='unsafe')
  Multiply,  // out = a * b
};

GF_HD bool is_binary(Elementwise op) {
  return op == Elementwise::Add || op == Elementwise::Subtract || op == Elementwise::Multiply;
}

class LineBackend;

// Checks and runs out = op(a, b). Binary ops broadcast a and b to out's shape
// (numpy's rules, by zero strides) and take operands of any real dtype (or
// bfloat16), converted to out's dtype as they are read, as numpy casts them
// to the result dtype; b may also be a 0-d array in host memory (a scalar,
// which the CUDA backend passes by value). Unary ops and complex dtypes need
// one shape and one dtype; complex Add and Subtract run on each component.
void run_elementwise(LineBackend& backend, Elementwise op, const ArrayDesc& a, const ArrayDesc& b,
                     const ArrayDesc& out);

// On a CUDA backend, a `b` in host memory is such a scalar (broadcast: every
// stride 0); its value travels in the kernel parameters.
inline bool is_host_operand(const ArrayDesc& a) { return a.device == Device::CPU; }

// `op` on two values of dtype T, as numpy computes it in that dtype: integers
// wrap around (in the unsigned type of the same width), float16 and bfloat16
// round through float32, bool adds as logical or and multiplies as logical and.
template <DType T>
GF_HD typename storage<T>::type elementwise_value(Elementwise op, typename storage<T>::type x,
                                                  typename storage<T>::type y) {
  using S = typename storage<T>::type;
  if constexpr (T == DType::Float16 || T == DType::BFloat16 || T == DType::Bool) {
    const float u = (float)load_as_double<T>(reinterpret_cast<const char*>(&x));
    const float v = is_binary(op) ? (float)load_as_double<T>(reinterpret_cast<const char*>(&y)) : u;
    const float f = op == Elementwise::Add ? u + v : op == Elementwise::Subtract ? u - v
                  : op == Elementwise::Multiply ? u * v : op == Elementwise::Square ? u * u : sqrtf(u);
    S r;
    store_from_double<T>(reinterpret_cast<char*>(&r), T == DType::Bool ? (double)(f != 0.0f) : (double)f);
    return r;
  } else if constexpr (T == DType::Float32 || T == DType::Float64) {
    if (!is_binary(op)) y = x;
    if (op == Elementwise::Sqrt) {  // float's own: the double root rounded to float, both correctly rounded
      if constexpr (T == DType::Float32) return sqrtf(x);
      else return sqrt(x);
    }
    return op == Elementwise::Add ? x + y : op == Elementwise::Subtract ? x - y : x * y;
  } else {
    using U = std::make_unsigned_t<S>;
    if (op == Elementwise::Sqrt) {
      S r;
      store_from_double<T>(reinterpret_cast<char*>(&r), sqrt((double)x));
      return r;
    }
    if (!is_binary(op)) y = x;
    return (S)(op == Elementwise::Add ? (U)((U)x + (U)y) : op == Elementwise::Subtract ? (U)((U)x - (U)y)
                                                                                      : (U)((U)x * (U)y));
  }
}

// An operand of dtype `t` read as a value of dtype T (numpy's cast to the
// result dtype; exact for the promotions numpy makes).
template <DType T>
GF_HD typename storage<T>::type load_operand(DType t, const char* p) {
  typename storage<T>::type v;
  if (t == T) {
    copy_element(&v, p, sizeof(v));
  } else {
    store_from_double<T>(reinterpret_cast<char*>(&v), load_any_as_double(t, p));
  }
  return v;
}

// One element of `op` in dtype T: shared by the CPU and CUDA kernels.
template <DType T>
GF_HD void elementwise_apply(Elementwise op, const char* a, const char* b, char* out) {
  using S = typename storage<T>::type;
  S x, y{};
  copy_element(&x, a, sizeof(S));
  if (is_binary(op)) copy_element(&y, b, sizeof(S));
  const S r = elementwise_value<T>(op, x, y);
  copy_element(out, &r, sizeof(S));
}

}  // namespace gpufilt
