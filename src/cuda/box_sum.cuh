// Weighted sums over dense boxes on the trailing axes (box_sum.cu), the fast
// path of footprint.cu's correlate and convolve.
#pragma once
#include <cuda_runtime.h>

#include "core/array.hpp"
#include "core/footprint.hpp"

namespace gpufilt::cuda {

// Runs `filter` from `in` into `out` and returns true when it is a weighted
// sum whose weights fill a dense 3x3, 5x5, 7x7, 3x3x3, 5x5x5 or 7x7x7 box
// (no zero weight) on the trailing two or three axes; returns false, having
// done nothing, otherwise. Bit for bit the general kernel's results, except
// smoothings of float32/float16 data into float outputs, summed in float
// (box_sum.cu says how closely).
bool box_sum_pass(const ArrayDesc& in, const ArrayDesc& out, const Footprint& filter, double cval,
                  cudaStream_t stream);

}  // namespace gpufilt::cuda
