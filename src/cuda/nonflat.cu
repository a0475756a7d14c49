// CUDA non-flat grey erosion and dilation: core/nonflat.hpp's arithmetic
// (scipy's), one thread per output element, the taps' offsets and heights by
// value in the kernel parameters.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "core/nonflat.hpp"
#include "cuda/check.cuh"

namespace gpufilt::cuda {
namespace {

constexpr int kThreads = 256;

struct NonflatParams {
  int ndim, ntaps;
  int64_t size;
  int64_t shape[kMaxDims];    // the output's
  int64_t strides[kMaxDims];  // the padded input's, in elements
  int64_t offset[kMaxNonflatTaps];
  uint64_t height[kMaxNonflatTaps];  // the bits of each height in the input's type (tap 0: first_height)
  double first_height;
  bool erosion;
};

// Output O: double, or float for float input (a double's C conversion to
// float is its cast).
template <class E, class I, class O>
__global__ void __launch_bounds__(kThreads)
nonflat_kernel(const E* __restrict__ padded, O* __restrict__ out, const __grid_constant__ NonflatParams p) {
  const I size = (I)p.size, stride = (I)gridDim.x * blockDim.x;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < size; i += stride) {
    int64_t base = 0;
    I rest = i;
    for (int d = p.ndim - 1; d >= 0; --d) {
      base += (int64_t)(rest % (I)p.shape[d]) * p.strides[d];
      rest /= (I)p.shape[d];
    }
    double result = (double)padded[base + p.offset[0]] + p.first_height;
    for (int t = 1; t < p.ntaps; ++t) {
      E h;
      memcpy(&h, &p.height[t], sizeof(E));
      const double v = (double)add_in<E>(padded[base + p.offset[t]], h);
      result = (p.erosion ? v < result : v > result) ? v : result;  // NaN: the result stays
    }
    out[i] = (O)result;
  }
}

template <class E, class O>
void launch_as(const E* in, const NonflatParams& p, O* out, cudaStream_t stream) {
  const bool narrow = p.size <= (int64_t)INT32_MAX;  // (then i + the grid's stride cannot wrap)
  const void* kernel =
      narrow ? (const void*)nonflat_kernel<E, uint32_t, O> : (const void*)nonflat_kernel<E, int64_t, O>;
  const int blocks = grid_stride_blocks(kernel, kThreads, p.size);
  if (narrow) nonflat_kernel<E, uint32_t, O><<<blocks, kThreads, 0, stream>>>(in, out, p);
  else nonflat_kernel<E, int64_t, O><<<blocks, kThreads, 0, stream>>>(in, out, p);
  GF_CUDA_CHECK_LAUNCH();
}

template <class E>
void launch(const ArrayDesc& padded, const NonflatParams& p, const ArrayDesc& out, cudaStream_t stream) {
  const auto* in = reinterpret_cast<const E*>(padded.data);
  if constexpr (std::is_same_v<E, float>) {
    if (out.dtype == DType::Float32) return launch_as(in, p, reinterpret_cast<float*>(out.data), stream);
  }
  if (out.dtype != DType::Float64) throw std::invalid_argument("nonflat_extreme: out must be float64 (or float32 "
                                                               "for float32 input)");
  launch_as(in, p, reinterpret_cast<double*>(out.data), stream);
}

}  // namespace

void nonflat_extreme(const ArrayDesc& padded, const std::vector<int64_t>& offsets, const void* heights,
                     double first_height, bool erosion, const ArrayDesc& out, intptr_t stream) {
  if (offsets.empty() || offsets.size() > (size_t)kMaxNonflatTaps)
    throw std::invalid_argument("nonflat_extreme: 1 to " + std::to_string(kMaxNonflatTaps) + " taps are accepted");
  NonflatParams p{};
  p.ndim = out.ndim;
  p.ntaps = (int)offsets.size();
  p.size = out.size();
  const int item = itemsize(padded.dtype);
  for (int d = 0; d < out.ndim; ++d) {
    p.shape[d] = out.shape[d];
    p.strides[d] = padded.strides[d] / item;
  }
  for (int t = 0; t < p.ntaps; ++t) {
    p.offset[t] = offsets[t];
    memcpy(&p.height[t], static_cast<const char*>(heights) + (size_t)t * item, item);
  }
  p.first_height = first_height;
  p.erosion = erosion;
  if (p.size == 0) return;
  const ArrayDesc& result = out;
  const cudaStream_t s = as_stream(stream);
  switch (padded.dtype) {
    case DType::Int8: return launch<int8_t>(padded, p, result, s);
    case DType::UInt8: return launch<uint8_t>(padded, p, result, s);
    case DType::Int16: return launch<int16_t>(padded, p, result, s);
    case DType::UInt16: return launch<uint16_t>(padded, p, result, s);
    case DType::Int32: return launch<int32_t>(padded, p, result, s);
    case DType::UInt32: return launch<uint32_t>(padded, p, result, s);
    case DType::Int64: return launch<int64_t>(padded, p, result, s);
    case DType::UInt64: return launch<uint64_t>(padded, p, result, s);
    case DType::Float32: return launch<float>(padded, p, result, s);
    case DType::Float64: return launch<double>(padded, p, result, s);
    default: throw std::invalid_argument("nonflat_extreme: no kernel for the padded input's dtype");
  }
}

}  // namespace gpufilt::cuda
