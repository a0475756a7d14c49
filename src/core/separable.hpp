// Separable filtering: a chain of 1-D passes along axes (correlate, uniform),
// planned once for any backend. The plan owns the rules every backend shares:
// intermediates are stored in the output dtype (as scipy.ndimage does), input
// and output may alias, complex data is filtered one component at a time, and
// at most one temporary the size of the output is used.
#pragma once
#include <memory>
#include <vector>
#include "core/array.hpp"
#include "core/border.hpp"
#include "core/elementwise.hpp"
#include "core/footprint.hpp"

namespace gpufilt {

enum class LineKind : int8_t { Correlate, Uniform, Minimum, Maximum };

struct LinePass {
  int axis = 0;
  LineKind kind = LineKind::Correlate;
  std::vector<double> weights;  // Correlate: taps, weights[0] reads furthest left
  int64_t size = 1;             // Uniform, Minimum, Maximum: window length
  int64_t origin = 0;
  Mode mode = Mode::Reflect;
  bool in_derivative_chain = false;  // set by run_separable: see may_cancel

  // Taps left of the centre: output[i] reads input[i - left() .. i - left() + taps() - 1].
  int64_t taps() const { return kind == LineKind::Correlate ? (int64_t)weights.size() : size; }
  int64_t left() const { return taps() / 2 + origin; }
  // True when the origin keeps the window over its output: -(taps / 2) <= origin <= (taps - 1) / 2.
  bool origin_in_window() const { return origin >= -(taps() / 2) && origin <= (taps() - 1) / 2; }
  // Correlate: +1 for symmetric, -1 for antisymmetric odd-length weights, else 0.
  int symmetry() const;
  // True for a correlation with a negative weight (a derivative), and for
  // every pass of a chain that has one (smoothing a derivative cancels too):
  // the terms may cancel to a result far smaller than they are, so the
  // backends sum these in double even for float32 data, as scipy does.
  bool may_cancel() const;
};

// ---- 8-bit integer data summed in float, exactly ----
// scipy sums integer data in double and truncates each pass's results to the
// output dtype. For 8-bit data a float sum is within a known margin of that
// double sum: where the margin's both ends truncate to one integer, so does
// scipy's sum, and the float result is scipy's to the bit; the few outputs
// with an end across an integer (scipy's sum within the margin of one: flat
// regions, for instance) are summed again in double, in scipy's order.
//
// The margin. With u = 2^-24 and M = max|x| * sum|w| (no term, and no
// partial sum in any order, is larger), the float sum of n terms (n = c + 1
// pairs x[k] +- x[2c-k], exact in float, and the centre for (anti)symmetric
// weights, else n = taps) is off the exact sum by at most: u * M for the
// weights rounded to float, u * M for the products rounded (none where
// multiply-adds fuse), (n - 1) * u * M for the sums; scipy's double sum by
// far less than u * M. The margin's ends, rounded to float themselves, may
// move by u * (M + margin) each: (n + 3) * u * M covers all of it. The
// absolute term covers weights and products of subnormal size. Every x is an
// integer of at most `magnitude` (the dtype's, or a cval within it: 255 for
// uint8, 128 for int8; the pairs are then exact in float).
// The margin is 0 when every weight is a multiple of one power of two 2^-s
// whose multiples up to M are all floats (integer weights such as sobel's,
// dyadic ones such as 0.25): every product and partial sum is then exact in
// float, as in double.
// Returns false when the sums could reach `limit` (or a weight is not
// finite): 2^29 keeps them within int32; the GPU's byte trick needs 2^22.
bool integer_float_margin(const double* weights, int64_t taps, int symmetry, double magnitude, double limit,
                          float& margin);

// ---- 16-bit integer data summed in double with fused multiply-adds (the GPU) ----
// The same proof for a double sum whose products are fused into its adds:
// with u = 2^-53 and n terms it is off the exact sum by at most n * u * M
// (the pairs are exact), scipy's sum by at most 2n * u * M. The kernels
// read the sum in fixed point with 20 fraction bits, rounded: 2^-21 more.
// `margin`, in units of 2^-32 (the fraction's bits as they test them), is
// all of that plus one unit; 0 when every weight is a multiple of 2^-20
// (every product and partial sum, ours and scipy's, is then exact in double
// and on the grid). Returns false when the sums could reach 2^30 (the
// kernels' fixed point) or a weight is not finite.
bool integer_fma_margin(const double* weights, int64_t taps, int symmetry, double magnitude, uint32_t& margin);

// The largest magnitude of an integer dtype of `bits` bits (at most 16).
constexpr double integer_magnitude(int bits, bool is_signed) {
  return is_signed ? (double)(1 << (bits - 1)) : (double)((1 << bits) - 1);
}

// The order scipy's NI_Correlate1D sums taps in, which every backend follows
// so that results agree to the last bit (a flat integer image must stay flat
// after truncation). With c = taps / 2 and x[k] the input under tap k:
//   symmetric:      w[c]*x[c], then += (x[k] + x[2c-k]) * w[k] for k = 0..c-1
//   antisymmetric:  w[c]*x[c], then += (x[k] - x[2c-k]) * w[k] for k = 0..c-1
//   otherwise:      w[T-1]*x[T-1], then += x[k] * w[k] for k = 0..T-2

// Memory a backend hands out for temporaries; released when destroyed.
class TempBuffer {
 public:
  virtual ~TempBuffer() = default;
  char* data = nullptr;
};

// What a device must provide to run separable chains and footprint filters.
class LineBackend {
 public:
  virtual ~LineBackend() = default;
  // out = pass(in). `in` and `out` never overlap unless filters_in_place().
  virtual void line_pass(const ArrayDesc& in, const ArrayDesc& out, const LinePass& pass,
                         double cval) = 0;
  // out = in, converting the dtype (exact when the dtypes are equal).
  virtual void copy(const ArrayDesc& in, const ArrayDesc& out) = 0;
  virtual std::unique_ptr<TempBuffer> allocate(int64_t bytes) = 0;
  // True when a pass may read and write the very same array (line buffered).
  virtual bool filters_in_place() const = 0;
  // Runs a whole real chain in one go when the backend has a fused kernel for
  // it (same results as pass by pass); false leaves it to line_pass.
  virtual bool fused_chain(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& passes,
                           double cval) {
    return false;
  }
  // scipy's laplace (the [1, -2, 1] second difference along every axis, each
  // in the output dtype, summed in it in axis order) in one go when the
  // backend has a kernel for it; false leaves it to the caller.
  virtual bool fused_laplace(const ArrayDesc& in, const ArrayDesc& out, const std::vector<Mode>& modes,
                             double cval) {
    return false;
  }
  // The sum over the axes of chains[k] (one chain per axis, each a pass along
  // every axis in axis order, chains 1 and 2 sharing their pass along axis
  // 0: gaussian_laplace), each chain's result squared first and the sum
  // square-rooted when `square` (gaussian_gradient_magnitude), as
  // generic_laplace and generic_gradient_magnitude compute it from the
  // chains' results in the output dtype, in one go when the backend has
  // kernels for the case; false (nothing written) leaves it to the caller.
  virtual bool fused_derivative_sum(const ArrayDesc& in, const ArrayDesc& out,
                                    std::vector<std::vector<LinePass>> chains, double cval, bool square) {
    return false;
  }
  // out = filter(in); real dtypes; `in` and `out` never overlap.
  virtual void footprint_pass(const ArrayDesc& in, const ArrayDesc& out, const Footprint& filter,
                              double cval) = 0;
  // out = op(a, b); one real dtype, one shape; out may alias a or b exactly.
  virtual void elementwise(Elementwise op, const ArrayDesc& a, const ArrayDesc& b,
                           const ArrayDesc& out) = 0;
};

// A C-contiguous copy of `in` in a temporary that `holder` keeps alive: what
// a filter reads when writing its output could clobber its input.
ArrayDesc copy_to_temp(LineBackend& backend, const ArrayDesc& in, std::unique_ptr<TempBuffer>& holder);

// Runs `passes` in order from `in` into `out` (same shape; dtypes may differ;
// they may overlap). No passes copies `in` into `out`. cval_imag is used for
// the imaginary component of complex data.
void run_separable(LineBackend& backend, ArrayDesc in, const ArrayDesc& out,
                   std::vector<LinePass> passes, double cval, double cval_imag = 0.0);

}  // namespace gpufilt
