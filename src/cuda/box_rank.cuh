// Rank filters over dense boxes on the trailing axes (box_rank.cu), the fast
// path of footprint.cu's rank filters.
#pragma once
#include <cuda_runtime.h>

#include "core/array.hpp"
#include "core/footprint.hpp"

namespace gpufilt::cuda {

// Runs `filter` from `in` into `out` and returns true when it is a rank
// filter over a dense box on the trailing two or three axes that one of the
// box kernels takes: the median of a 3x3, 5x5, 7x7, 3x3x3 or 5x5x5 box on
// any dtype but 64-bit integers, or any rank of any box on 8-bit data (with
// a cval those orders hold exactly). Returns false, having done nothing,
// otherwise.
bool box_rank_pass(const ArrayDesc& in, const ArrayDesc& out, const Footprint& filter, double cval,
                   cudaStream_t stream);

}  // namespace gpufilt::cuda
