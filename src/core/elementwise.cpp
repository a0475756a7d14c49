#include "core/elementwise.hpp"

#include <stdexcept>
#include <string>

#include "core/separable.hpp"

namespace gpufilt {

namespace {

bool takes_dtype(DType t) { return !is_complex(t); }

void check_binary_dtypes(const ArrayDesc& a, const ArrayDesc& b, const ArrayDesc& out) {
  if (!is_complex(out.dtype)) {
    if (!takes_dtype(a.dtype) || !takes_dtype(b.dtype))
      throw std::invalid_argument(std::string("elementwise operands of dtype ") + dtype_name(a.dtype) + " and " +
                                  dtype_name(b.dtype) + " cannot be read as " + dtype_name(out.dtype));
    return;
  }
  if (a.dtype != out.dtype || b.dtype != out.dtype)
    throw std::invalid_argument(std::string("complex elementwise operands must share the output dtype ") +
                                dtype_name(out.dtype));
}

}  // namespace

void run_elementwise(LineBackend& backend, Elementwise op, const ArrayDesc& a, const ArrayDesc& b,
                     const ArrayDesc& out) {
  if (!is_binary(op)) {
    if (!same_shape(a, out)) throw std::invalid_argument("elementwise operands must have one shape");
    if (a.dtype != out.dtype)
      throw std::invalid_argument(std::string("elementwise operands must share the output dtype ") +
                                  dtype_name(out.dtype));
    if (out.size() == 0) return;
    if (is_complex(out.dtype)) throw std::invalid_argument("only addition and subtraction are supported for complex operands");
    backend.elementwise(op, a, a, out);
    return;
  }
  check_binary_dtypes(a, b, out);
  const ArrayDesc x = broadcast_view(a, out, "a"), y = broadcast_view(b, out, "b");
  if (out.size() == 0) return;
  if (!is_complex(out.dtype)) {
    backend.elementwise(op, x, y, out);
    return;
  }
  if (op == Elementwise::Multiply)
    throw std::invalid_argument("only addition and subtraction of complex arrays are supported");
  for (int c = 0; c < 2; ++c)
    backend.elementwise(op, complex_component(x, c), complex_component(y, c), complex_component(out, c));
}

}  // namespace gpufilt
