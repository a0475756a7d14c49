#include "core/elementwise.hpp"

#include <stdexcept>
#include <string>

#include "core/separable.hpp"

namespace gpufilt {

void run_elementwise(LineBackend& backend, Elementwise op, const ArrayDesc& a, const ArrayDesc& b,
                     const ArrayDesc& out) {
  const bool binary = is_binary(op);
  if (!same_shape(a, out) || (binary && !same_shape(b, out)))
    throw std::invalid_argument("elementwise operands must have one shape");
  if (a.dtype != out.dtype || (binary && b.dtype != out.dtype))
    throw std::invalid_argument(std::string("elementwise operands must share the output dtype ") +
                                dtype_name(out.dtype));
  if (out.size() == 0) return;
  if (!is_complex(out.dtype)) {
    backend.elementwise(op, a, b, out);
    return;
  }
  if (!binary)
    throw std::invalid_argument("only addition and subtraction are supported for complex operands");
  for (int c = 0; c < 2; ++c)
    backend.elementwise(op, complex_component(a, c), complex_component(b, c), complex_component(out, c));
}

}  // namespace gpufilt
