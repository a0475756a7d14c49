// A loop over the elements of N arrays of one shape (out first), for the
// elementwise-style CUDA kernels (cuda/elementwise.cu, cuda/ops_array.cu):
// axes of length 1 dropped, neighbouring axes that every array walks as one
// merged, so that most calls decode one or two axes per element.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/array.hpp"

namespace gpufilt::cuda {

template <int N>
struct StridedLoop {
  int ndim = 0;
  int64_t size = 0;
  int64_t shape[kMaxDims];
  int64_t strides[N][kMaxDims];  // bytes, per array

  // Byte offsets of element i (C order) in each array.
  __device__ __forceinline__ void offsets(int64_t i, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t c = i % shape[d];
      i /= shape[d];
      for (int k = 0; k < N; ++k) off[k] += c * strides[k][d];
    }
  }
  // True when every array is walked with unit element stride (`item` bytes).
  bool contiguous(int k, int64_t item) const { return ndim == 0 || (ndim == 1 && strides[k][0] == item); }
};

// The loop over `arrays` (all of arrays[0]'s shape).
template <int N>
StridedLoop<N> make_loop(const ArrayDesc* const (&arrays)[N]) {
  StridedLoop<N> loop;
  const ArrayDesc& out = *arrays[0];
  loop.size = out.size();
  for (int d = 0; d < out.ndim; ++d) {
    if (out.shape[d] == 1) continue;
    const int m = loop.ndim - 1;
    bool merge = m >= 0;
    for (int k = 0; merge && k < N; ++k) merge = loop.strides[k][m] == arrays[k]->strides[d] * out.shape[d];
    if (merge) {
      loop.shape[m] *= out.shape[d];
      for (int k = 0; k < N; ++k) loop.strides[k][m] = arrays[k]->strides[d];
      continue;
    }
    loop.shape[loop.ndim] = out.shape[d];
    for (int k = 0; k < N; ++k) loop.strides[k][loop.ndim] = arrays[k]->strides[d];
    ++loop.ndim;
  }
  return loop;
}

constexpr int kLoopThreads = 256;

// Blocks for a grid-stride loop over n items: enough to fill the device,
// capped so that the grid is valid and each thread strides.
inline unsigned loop_blocks(int64_t n) {
  const int64_t blocks = (n + kLoopThreads - 1) / kLoopThreads;
  return (unsigned)(blocks < 1 ? 1 : blocks > 65536 ? 65536 : blocks);
}

}  // namespace gpufilt::cuda
