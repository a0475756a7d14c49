// CUDA Fourier filters: core/fourier.hpp's product in one pass over a
// strided transform. A thread takes elements along the last axis; the grid's
// y covers the axis before it and z the rest, so each thread builds the outer
// axes' part of the factor once a row.
#include <algorithm>
#include <stdexcept>

#include "core/fourier.hpp"
#include "cuda/check.cuh"

namespace gpufilt::cuda {
namespace {

constexpr int kPerThread = 4;  // elements along the last axis a thread reads at once

struct FourierParams {
  int ndim;
  FourierFactor factor;
  int64_t shape[kMaxDims];
  int64_t in_strides[kMaxDims], out_strides[kMaxDims];  // bytes
  int64_t table_at[kMaxDims];    // where an axis's entries start in `tables`; -1: none
  int64_t plane_step[kMaxDims];  // for the axes before the last two: z's step from one index to the next
  int64_t planes;                // the product of those axes' lengths: the grid's z covers them
};

// The index along axis `ax` (before the last two) of plane z: z itself for
// 3-D data, else by division (in 32 bits where the planes allow: 64-bit
// division costs a hundred instructions).
__device__ __forceinline__ int64_t plane_index(const FourierParams& p, int64_t z, int ax) {
  if (p.ndim == 3) return z;
  if (p.planes <= UINT32_MAX) return (uint32_t)z / (uint32_t)p.plane_step[ax] % (uint32_t)p.shape[ax];
  return z / p.plane_step[ax] % p.shape[ax];
}

// An element of In (PartsIn values: 1 real, 2 complex) read at once; the
// caller checks the alignment.
template <class In, int PartsIn>
struct alignas(sizeof(In) * PartsIn) Element {
  In part[PartsIn];
};

template <class In, int PartsIn, class Out, int PartsOut>
__global__ void fourier_kernel(const char* in, char* out,  // out may be in itself
                               const double* __restrict__ tables,
                               const __grid_constant__ FourierParams p) {
  const int nd = p.ndim, last = nd - 1;
  const int64_t width = p.shape[last], rows = nd >= 2 ? p.shape[last - 1] : 1;
  for (int64_t z = blockIdx.z; z < p.planes; z += gridDim.z) {
    // The outer axes' offsets and their part of the factor, in axis order as scipy's loop.
    double plane_terms = factor_start(p.factor);
    int64_t in_plane = 0, out_plane = 0;
    for (int ax = 0; ax + 2 < nd; ++ax) {
      const int64_t i = plane_index(p, z, ax);
      in_plane += i * p.in_strides[ax];
      out_plane += i * p.out_strides[ax];
      if (p.table_at[ax] >= 0) plane_terms = factor_with(p.factor, plane_terms, tables[p.table_at[ax] + i]);
    }
    for (int64_t y = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; y < rows; y += (int64_t)gridDim.y * blockDim.y) {
      double row_terms = plane_terms;
      int64_t in_row = in_plane, out_row = out_plane;
      if (nd >= 2) {
        if (p.table_at[last - 1] >= 0) row_terms = factor_with(p.factor, row_terms, tables[p.table_at[last - 1] + y]);
        in_row += y * p.in_strides[last - 1];
        out_row += y * p.out_strides[last - 1];
      }
      // kPerThread elements a thread, all read before any is written: loads in
      // flight to cover the memory's latency (the compiler may not hoist a read
      // above a write, as out may be in itself).
      const int64_t span = (int64_t)blockDim.x * kPerThread;
      for (int64_t first = blockIdx.x * span + threadIdx.x; first < width; first += gridDim.x * span) {
        Element<In, PartsIn> value[kPerThread];
        double terms[kPerThread];
#pragma unroll
        for (int k = 0; k < kPerThread; ++k) {
          const int64_t x = first + k * (int64_t)blockDim.x;
          if (x >= width) break;
          value[k] = *reinterpret_cast<const Element<In, PartsIn>*>(in + in_row + x * p.in_strides[last]);
          terms[k] = p.table_at[last] >= 0 ? factor_with(p.factor, row_terms, tables[p.table_at[last] + x])
                                           : row_terms;
        }
#pragma unroll
        for (int k = 0; k < kPerThread; ++k) {
          const int64_t x = first + k * (int64_t)blockDim.x;
          if (x >= width) break;
          double re = (double)value[k].part[0], im = PartsIn == 2 ? (double)value[k].part[1] : 0.0;
          if (p.factor == FourierFactor::Phase) {
            rotate(terms[k], re, im);
          } else {
            const double f = p.factor == FourierFactor::Product ? terms[k] : ellipsoid_factor(terms[k], nd);
            re *= f;
            im *= f;
          }
          Element<Out, PartsOut> result;
          result.part[0] = (Out)re;
          if constexpr (PartsOut == 2) result.part[1] = (Out)im;
          *reinterpret_cast<Element<Out, PartsOut>*>(out + out_row + x * p.out_strides[last]) = result;
        }
      }
    }
  }
}

template <class In, int PartsIn, class Out, int PartsOut>
void launch(const ArrayDesc& in, const ArrayDesc& out, const double* tables, const FourierParams& p,
            cudaStream_t stream) {
  const int nd = p.ndim;
  const int64_t width = p.shape[nd - 1], rows = nd >= 2 ? p.shape[nd - 2] : 1;
  // 256 threads a block: along the last axis as many as cover it (32 to 256), the rest along the rows.
  int bx = 32;
  while (bx < 256 && bx * kPerThread < width) bx *= 2;
  const dim3 block(bx, 256 / bx);
  const int64_t span = (int64_t)bx * kPerThread;
  const dim3 grid((unsigned)std::min<int64_t>((width + span - 1) / span, 1 << 16),
                  (unsigned)std::min<int64_t>((rows + block.y - 1) / block.y, 65535),
                  (unsigned)std::min<int64_t>(p.planes, 65535));
  fourier_kernel<In, PartsIn, Out, PartsOut><<<grid, block, 0, stream>>>(in.data, out.data, tables, p);
  GF_CUDA_CHECK_LAUNCH();
}

template <class In, int PartsIn>
void launch_into(const ArrayDesc& in, const ArrayDesc& out, const double* tables, const FourierParams& p,
                 cudaStream_t stream) {
  switch (out.dtype) {
    case DType::Complex128: return launch<In, PartsIn, double, 2>(in, out, tables, p, stream);
    case DType::Complex64: return launch<In, PartsIn, float, 2>(in, out, tables, p, stream);
    default: break;
  }
  if constexpr (PartsIn == 1) {
    if (out.dtype == DType::Float64) return launch<In, 1, double, 1>(in, out, tables, p, stream);
    if (out.dtype == DType::Float32) return launch<In, 1, float, 1>(in, out, tables, p, stream);
  }
  throw std::invalid_argument("fourier_multiply: out must be complex for complex input, else float32, float64, "
                              "complex64 or complex128");
}

}  // namespace

void fourier_multiply(const ArrayDesc& in, const ArrayDesc& out, const double* tables,
                      const std::vector<int64_t>& table_at, FourierFactor factor, intptr_t stream) {
  if (in.ndim < 1 || in.ndim != out.ndim || (int)table_at.size() != in.ndim)
    throw std::invalid_argument("fourier_multiply: in and out of one rank (at least 1), a table start an axis");
  if (factor == FourierFactor::Ellipsoid && in.ndim != 2 && in.ndim != 3)
    throw std::invalid_argument("fourier_multiply: the ellipsoid factor is for 2-D and 3-D transforms");
  if (factor == FourierFactor::Phase && out.dtype != DType::Complex64 && out.dtype != DType::Complex128)
    throw std::invalid_argument("fourier_multiply: the phase factor needs a complex out");
  FourierParams p{};
  p.ndim = in.ndim;
  p.factor = factor;
  p.planes = 1;
  for (int ax = in.ndim; ax-- > 0;) {
    if (in.shape[ax] != out.shape[ax]) throw std::invalid_argument("fourier_multiply: out must have in's shape");
    if (in.shape[ax] == 0) return;
    p.shape[ax] = in.shape[ax];
    p.in_strides[ax] = in.strides[ax];
    p.out_strides[ax] = out.strides[ax];
    p.table_at[ax] = table_at[ax];
    if (ax + 2 < in.ndim) {
      p.plane_step[ax] = p.planes;
      p.planes *= in.shape[ax];
    }
  }
  const cudaStream_t s = as_stream(stream);
  switch (in.dtype) {
    case DType::Float32: return launch_into<float, 1>(in, out, tables, p, s);
    case DType::Float64: return launch_into<double, 1>(in, out, tables, p, s);
    case DType::Complex64: return launch_into<float, 2>(in, out, tables, p, s);
    case DType::Complex128: return launch_into<double, 2>(in, out, tables, p, s);
    default: throw std::invalid_argument("fourier_multiply: in must be float32, float64, complex64 or complex128");
  }
}

}  // namespace gpufilt::cuda
