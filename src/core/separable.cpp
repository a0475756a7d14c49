#include "core/separable.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace gpufilt {

int LinePass::symmetry() const {
  const int64_t n = (int64_t)weights.size(), c = n / 2;
  if (kind != LineKind::Correlate || n % 2 == 0) return 0;
  // scipy's test: equal within DBL_EPSILON
  auto all = [&](auto pair_ok) {
    for (int64_t k = 1; k <= c; ++k)
      if (!pair_ok(weights[c + k], weights[c - k])) return false;
    return true;
  };
  const double eps = 2.220446049250313e-16;
  if (all([&](double a, double b) { return std::fabs(a - b) <= eps; })) return 1;
  if (all([&](double a, double b) { return std::fabs(a + b) <= eps; })) return -1;
  return 0;
}

bool LinePass::may_cancel() const {
  return in_derivative_chain || (kind == LineKind::Correlate && has_negative_weight(weights));
}

namespace {
// True when every weight is a multiple of 2^-s.
bool multiples_of(const double* weights, int64_t taps, int s) {
  for (int64_t k = 0; k < taps; ++k) {
    const double scaled = std::ldexp(weights[k], s);
    if (scaled != std::floor(scaled)) return false;
  }
  return true;
}

// True when every weight is a multiple of one power of two 2^-s whose
// multiples up to `bound` are all floats (see integer_float_margin).
bool exact_in_float(const double* weights, int64_t taps, double bound) {
  for (int s = 0; s <= 24 && bound * std::ldexp(1.0, s) < 0x1p24; ++s)
    if (multiples_of(weights, taps, s)) return true;
  return false;
}

// M of the margins: no term, and no partial sum in any order, is larger.
double largest_sum(const double* weights, int64_t taps, double magnitude) {
  double total = 0.0;
  for (int64_t k = 0; k < taps; ++k) total += std::fabs(weights[k]);
  return magnitude * total;
}

// The terms a sum in scipy's order adds: pairs and the centre, or every tap.
int64_t summed_terms(int64_t taps, int symmetry) { return symmetry != 0 ? taps / 2 + 1 : taps; }
}  // namespace

bool integer_float_margin(const double* weights, int64_t taps, int symmetry, double magnitude, double limit,
                          float& margin) {
  const double bound = largest_sum(weights, taps, magnitude);
  if (!(bound < limit)) return false;  // also NaN
  const double error = (double)(summed_terms(taps, symmetry) + 3) * 0x1p-24 * bound + 0x1p-100;
  margin = exact_in_float(weights, taps, bound) ? 0.0f : (float)error;
  return true;
}

bool integer_fma_margin(const double* weights, int64_t taps, int symmetry, double magnitude, uint32_t& margin) {
  const double bound = largest_sum(weights, taps, magnitude);
  if (!(bound < 0x1p30)) return false;  // also NaN and infinities
  const double error = 0x1p-21 + (double)(3 * summed_terms(taps, symmetry)) * 0x1p-53 * bound;
  margin = multiples_of(weights, taps, 20) ? 0 : (uint32_t)std::ceil(std::ldexp(error, 32)) + 1;
  return true;
}

namespace {

// Real data. Line-buffered backends run pass 1 in -> out and the rest in place.
void chain_in_place(LineBackend& backend, const ArrayDesc& in, const ArrayDesc& out,
                    const std::vector<LinePass>& passes, double cval) {
  const ArrayDesc* src = &in;
  for (const LinePass& pass : passes) {
    backend.line_pass(*src, out, pass, cval);
    src = &out;
  }
}

// Real data, backends whose passes must not read what they write: ping-pong
// between `out` and one temporary, ordered so that the last pass lands in `out`.
// When `in` aliases `out` the first pass must go to the temporary, and an odd
// chain then ends with a copy.
void chain_ping_pong(LineBackend& backend, const ArrayDesc& in, const ArrayDesc& out,
                     const std::vector<LinePass>& passes, double cval) {
  size_t n = passes.size();
  bool aliased = may_overlap(in, out);
  if (n == 1 && !aliased) {
    backend.line_pass(in, out, passes[0], cval);
    return;
  }
  auto holder = backend.allocate(out.size() * itemsize(out.dtype));
  ArrayDesc tmp = contiguous_like(out, out.dtype, holder->data);
  bool final_copy = aliased && n % 2 == 1;
  // Pass k writes `out` when an even number of writes follow it.
  const ArrayDesc* src = &in;
  for (size_t k = 0; k < n; ++k) {
    size_t writes_after = n - 1 - k + (final_copy ? 1 : 0);
    const ArrayDesc* dst = writes_after % 2 == 0 ? &out : &tmp;
    backend.line_pass(*src, *dst, passes[k], cval);
    src = dst;
  }
  if (final_copy) backend.copy(tmp, out);
}

void chain_real(LineBackend& backend, const ArrayDesc& in, const ArrayDesc& out,
                const std::vector<LinePass>& passes, double cval) {
  if (passes.empty()) {
    backend.copy(in, out);
  } else if (backend.fused_chain(in, out, passes, cval)) {
    return;
  } else if (backend.filters_in_place()) {
    chain_in_place(backend, in, out, passes, cval);
  } else {
    chain_ping_pong(backend, in, out, passes, cval);
  }
}

void check_pass(const ArrayDesc& a, const LinePass& pass) {
  if (pass.axis < 0 || pass.axis >= a.ndim)
    throw std::out_of_range("axis " + std::to_string(pass.axis) + " is out of range for an array of " +
                            std::to_string(a.ndim) + " dimensions");
  int64_t taps = pass.taps();
  if (taps < 1) throw std::invalid_argument("filter size must be at least 1");
  if (!pass.origin_in_window())
    throw std::invalid_argument("invalid origin " + std::to_string(pass.origin) +
                                "; origin must satisfy -(size // 2) <= origin <= (size - 1) // 2");
}

// A minimum or maximum whose window reaches further past a line of n
// elements than any mode's extension takes to repeat itself (a period of at
// most 2n: reflect 2n, mirror 2n - 2, wrap n; nearest and constant repeat
// one value) sees every value of the line and its extension either way, as
// does a window reaching 2n to that side: that one is used, so that buffers
// follow the line, not the window (size=10**9 on 256 lines had asked for
// gigabytes per thread; scipy raises MemoryError).
void bound_window(LinePass& pass, int64_t n) {
  if (pass.kind != LineKind::Minimum && pass.kind != LineKind::Maximum) return;
  const int64_t left = pass.left(), right = pass.taps() - 1 - left;
  if (left <= 2 * n && right <= 2 * n) return;
  const int64_t new_left = std::min(left, 2 * n);
  pass.size = new_left + std::min(right, 2 * n) + 1;
  pass.origin = new_left - pass.size / 2;  // keeps left() at new_left
}

}  // namespace

ArrayDesc copy_to_temp(LineBackend& backend, const ArrayDesc& in, std::unique_ptr<TempBuffer>& holder) {
  holder = backend.allocate(in.size() * itemsize(in.dtype));
  ArrayDesc copy = contiguous_like(in, in.dtype, holder->data);
  backend.copy(in, copy);
  return copy;
}

void run_separable(LineBackend& backend, ArrayDesc in, const ArrayDesc& out,
                   std::vector<LinePass> passes, double cval, double cval_imag) {
  if (!same_shape(in, out)) throw std::invalid_argument("output shape does not match input shape");
  if (is_complex(in.dtype) != is_complex(out.dtype))
    throw std::invalid_argument(std::string("output dtype ") + dtype_name(out.dtype) +
                                " cannot hold the result for input dtype " + dtype_name(in.dtype) +
                                ": complex input needs a complex output and real input a real one");
  for (const LinePass& pass : passes) check_pass(in, pass);
  if (in.size() == 0) return;
  for (LinePass& pass : passes) bound_window(pass, in.shape[pass.axis]);
  if (std::any_of(passes.begin(), passes.end(), [](const LinePass& p) { return p.may_cancel(); }))
    for (LinePass& pass : passes) pass.in_derivative_chain = true;

  // A partial overlap (a shifted or transposed view of the input) could be
  // overwritten before it is read: filter from a copy. Exact aliasing is
  // handled by the chains themselves.
  std::unique_ptr<TempBuffer> input_copy;
  if (may_overlap(in, out) && !same_layout(in, out)) in = copy_to_temp(backend, in, input_copy);

  if (!is_complex(in.dtype)) {
    chain_real(backend, in, out, passes, cval);
    return;
  }
  // Real weights act on each component alone.
  chain_real(backend, complex_component(in, 0), complex_component(out, 0), passes, cval);
  chain_real(backend, complex_component(in, 1), complex_component(out, 1), passes, cval_imag);
}

}  // namespace gpufilt
