// The tiled median of footprint.cu's dense boxes (box_median.cu).
#pragma once
#include <cuda_runtime.h>

#include "core/array.hpp"
#include "core/footprint.hpp"

namespace gpufilt::cuda {

// Runs `filter` from `in` into `out` with the tiled median kernel when it
// applies (a median over a dense 3x3, 5x5, 7x7, 3x3x3 or 5x5x5 box on the
// trailing axes, a dtype it orders exactly, cval exact in that order) and
// returns true; returns false, having done nothing, otherwise.
bool box_median_pass(const ArrayDesc& in, const ArrayDesc& out, const Footprint& filter, double cval,
                     cudaStream_t stream);

}  // namespace gpufilt::cuda
