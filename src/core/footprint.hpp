// Footprint filters: every output element reduces the input values under an
// N-D footprint (correlate with N-D weights, minimum, maximum, rank/median).
// The planner owns the rules every backend shares: aliasing input and output
// is made safe with one copy of the input, and complex data (weighted sums
// only) is filtered one component at a time.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/array.hpp"
#include "core/border.hpp"
#include "core/generic.hpp"

namespace gpufilt {

// Call: a function of the window's values (generic_filter), on the CPU only.
enum class Reduce : int8_t { Sum, Minimum, Maximum, Rank, Call };

inline bool has_negative_weight(const std::vector<double>& weights) {
  return std::any_of(weights.begin(), weights.end(), [](double w) { return w < 0.0; });
}

// True when float holds the weights and cval without overflow (beyond
// FLT_MAX a float sum is infinite where scipy's double sum is not).
inline bool in_float_range(const std::vector<double>& weights, double cval) {
  const auto fits = [](double v) { return std::fabs(v) <= (double)std::numeric_limits<float>::max(); };
  return fits(cval) && std::all_of(weights.begin(), weights.end(), fits);
}

// Weighted sums of float32/float16 data into a float32/float16 output may
// run in float, where scipy sums in double, unless their terms may cancel
// (a negative weight: a derivative): within DESIGN.md's tolerance of scipy,
// with twice the values a vector or the lanes a GPU cycle. The rule of the
// separable chains (the CPU's and fused.cu's) and of the N-D weighted sums
// (the CPU's and the CUDA box sums).
inline bool float_sums_allowed(DType in, DType out, bool may_cancel) {
  auto narrow_float = [](DType t) { return t == DType::Float32 || t == DType::Float16; };
  return narrow_float(in) && narrow_float(out) && !may_cancel;
}

// float_sums_allowed for N-D weights, which float must also hold, with cval
// (the CPU's weighted sums and the CUDA box sums).
inline bool weighted_sums_in_float(DType in, DType out, const std::vector<double>& weights, double cval) {
  return float_sums_allowed(in, out, has_negative_weight(weights)) && in_float_range(weights, cval);
}

struct Footprint {
  Reduce reduce = Reduce::Sum;
  int ndim = 0;
  int64_t ntaps = 0;
  // ntaps x ndim: tap t reads input[i + offsets[t * ndim + d]] along each axis d.
  std::vector<int64_t> offsets;
  std::vector<double> weights;  // Sum: one per tap
  int64_t rank = 0;             // Rank: 0-based position among the taps
  WindowFunction function = nullptr;  // Call: the function and its user data
  void* user_data = nullptr;
  Mode mode = Mode::Reflect;

  int64_t taps() const { return ntaps; }
};

class LineBackend;

// Runs `filter` from `in` into `out` (same shape, dtypes may differ, may
// overlap). cval_imag is used for the imaginary component of complex data.
void run_footprint(LineBackend& backend, ArrayDesc in, const ArrayDesc& out, const Footprint& filter,
                   double cval, double cval_imag = 0.0);

}  // namespace gpufilt
