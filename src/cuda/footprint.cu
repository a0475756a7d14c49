// CUDA footprint filters (N-D weighted sums, minimum, maximum, rank). One
// thread per output element; the footprint travels by value in the kernel parameters (no host-to-device copy per call), as
// per-tap offsets along the axes it spans and, for the interior, as byte
// offsets that skip the boundary arithmetic.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/border.hpp"
#include "core/cast.hpp"
#include "cuda/check.cuh"
#include "cuda/elements.cuh"

namespace gpufilt::cuda {
namespace {

constexpr int kMaxTaps = 512;       // taps a footprint may have on the GPU
constexpr int kMaxSpanDims = 4;     // axes a footprint may extend along
constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535 * 8;

// The output's shape and both arrays' strides, for index decomposition.
struct Geometry {
  int ndim;
  int64_t shape[kMaxDims];
  int64_t in_strides[kMaxDims];
  int64_t out_strides[kMaxDims];
  int64_t size;
};

struct FootprintParams {
  int ntaps, nspan;
  int span_dim[kMaxSpanDims];     // the axes the footprint extends along
  int64_t lo[kMaxSpanDims], hi[kMaxSpanDims];  // interior: lo <= coord < hi
  int32_t offset[kMaxTaps][kMaxSpanDims];      // per tap, along span_dim
  int64_t byte_offset[kMaxTaps];               // per tap, in the interior
  double weight[kMaxTaps];                     // Sum only
  int64_t rank;
  Reduce reduce;
  Mode mode;
  bool in_aligned;
  double cval;
};

Geometry make_geometry(const ArrayDesc& in, const ArrayDesc& out) {
  Geometry g{};
  g.ndim = out.ndim;
  for (int d = 0; d < out.ndim; ++d) {
    g.shape[d] = out.shape[d];
    g.in_strides[d] = in.strides[d];
    g.out_strides[d] = out.strides[d];
  }
  g.size = out.size();
  return g;
}

// Coordinates of element `index` (C order) and its byte offsets in both arrays.
__device__ void locate(const Geometry& g, int64_t index, int64_t* coord, int64_t& in_off, int64_t& out_off) {
  in_off = out_off = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    int64_t c = index % g.shape[d];
    index /= g.shape[d];
    coord[d] = c;
    in_off += c * g.in_strides[d];
    out_off += c * g.out_strides[d];
  }
}

// Input value of tap t for the element at `coord` (cval outside in Constant mode).
template <DType In>
__device__ double tap_value(const char* in, const Geometry& g, const FootprintParams& p, const int64_t* coord,
                            int64_t in_off, bool interior, int t) {
  if (interior) return load_elem<In>(in + in_off + p.byte_offset[t], p.in_aligned);
  int64_t off = in_off;
  for (int k = 0; k < p.nspan; ++k) {
    const int d = p.span_dim[k];
    const int64_t j = border_index(coord[d] + p.offset[t][k], g.shape[d], p.mode);
    if (j < 0) return p.cval;
    off += (j - coord[d]) * g.in_strides[d];
  }
  return load_elem<In>(in + off, p.in_aligned);
}

// k-th smallest of v[0..n) (Hoare's selection; reorders v).
__device__ double select_kth(double* v, int n, int k) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const double pivot = v[(lo + hi) / 2];
    int i = lo, j = hi;
    while (i <= j) {
      while (v[i] < pivot) ++i;
      while (pivot < v[j]) --j;
      if (i <= j) {
        const double t = v[i];
        v[i] = v[j];
        v[j] = t;
        ++i;
        --j;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else break;
  }
  return v[k];
}

// Rank filters gather the taps in local memory; Capacity bounds it per
// instantiation (local memory is reserved for every resident thread).
template <DType In, int Capacity>
__global__ void footprint_kernel(const char* __restrict__ in, char* __restrict__ out, DType out_dtype,
                                 bool aligned, const Geometry g, const __grid_constant__ FootprintParams p) {
  int64_t coord[kMaxDims];
  double values[Capacity];
  for (int64_t index = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; index < g.size;
       index += (int64_t)gridDim.x * blockDim.x) {
    int64_t in_off, out_off;
    locate(g, index, coord, in_off, out_off);
    bool interior = true;
    for (int k = 0; k < p.nspan; ++k) {
      const int64_t c = coord[p.span_dim[k]];
      interior = interior && c >= p.lo[k] && c < p.hi[k];
    }
    double result;
    if (p.reduce == Reduce::Sum) {
      result = 0.0;
      for (int t = 0; t < p.ntaps; ++t)  // no FMA: the CPU's (and scipy's) rounding
        result = __dadd_rn(result, __dmul_rn(tap_value<In>(in, g, p, coord, in_off, interior, t), p.weight[t]));
    } else if (Capacity > 1 && p.reduce == Reduce::Rank) {
      for (int t = 0; t < p.ntaps; ++t) values[t] = tap_value<In>(in, g, p, coord, in_off, interior, t);
      result = select_kth(values, p.ntaps, (int)p.rank);
    } else {  // scipy's comparison: a later value wins only if strictly smaller/larger
      const bool minimum = p.reduce == Reduce::Minimum;
      result = tap_value<In>(in, g, p, coord, in_off, interior, 0);
      for (int t = 1; t < p.ntaps; ++t) {
        const double v = tap_value<In>(in, g, p, coord, in_off, interior, t);
        if (minimum ? v < result : v > result) result = v;
      }
    }
    store_any(out_dtype, out + out_off, result, aligned);
  }
}

// The footprint in kernel-parameter form; throws when it does not fit.
FootprintParams make_params(const ArrayDesc& in, const Footprint& f, double cval) {
  if (f.taps() > kMaxTaps)
    throw std::invalid_argument("the footprint has " + std::to_string(f.taps()) + " elements; the CUDA footprint "
                                "filters take at most " + std::to_string(kMaxTaps));
  FootprintParams p{};
  p.ntaps = (int)f.taps();
  p.reduce = f.reduce;
  p.mode = f.mode;
  p.cval = cval;
  p.rank = f.rank;
  p.in_aligned = is_aligned(in);
  for (int d = 0; d < f.ndim; ++d) {
    int64_t lo = 0, hi = 0;
    for (int64_t t = 0; t < f.taps(); ++t) {
      lo = std::min(lo, f.offsets[t * f.ndim + d]);
      hi = std::max(hi, f.offsets[t * f.ndim + d]);
    }
    if (lo == 0 && hi == 0) continue;
    if (p.nspan == kMaxSpanDims)
      throw std::invalid_argument("the CUDA footprint filters take footprints extending along at most " +
                                  std::to_string(kMaxSpanDims) + " axes");
    const int k = p.nspan++;
    p.span_dim[k] = d;
    p.lo[k] = -lo;
    p.hi[k] = in.shape[d] - hi;
    for (int64_t t = 0; t < f.taps(); ++t) p.offset[t][k] = (int32_t)f.offsets[t * f.ndim + d];
  }
  for (int64_t t = 0; t < f.taps(); ++t) {
    p.byte_offset[t] = 0;
    for (int d = 0; d < f.ndim; ++d) p.byte_offset[t] += f.offsets[t * f.ndim + d] * in.strides[d];
    p.weight[t] = f.reduce == Reduce::Sum ? f.weights[t] : 0.0;
  }
  return p;
}

unsigned blocks_for(int64_t n) { return (unsigned)std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks); }

template <DType In>
struct FootprintLaunch {
  template <int Capacity>
  static void launch(const ArrayDesc& in, const ArrayDesc& out, const Geometry& g, const FootprintParams& p,
                     cudaStream_t s) {
    footprint_kernel<In, Capacity><<<blocks_for(g.size), kThreads, 0, s>>>(in.data, out.data, out.dtype,
                                                                             is_aligned(out), g, p);
  }
  static void run(const ArrayDesc& in, const ArrayDesc& out, const Geometry& g, const FootprintParams& p,
                  cudaStream_t s) {
    if (p.reduce != Reduce::Rank) launch<1>(in, out, g, p, s);
    else if (p.ntaps <= 32) launch<32>(in, out, g, p, s);
    else if (p.ntaps <= 128) launch<128>(in, out, g, p, s);
    else launch<kMaxTaps>(in, out, g, p, s);
  }
};

}  // namespace

void CudaBackend::footprint_pass(const ArrayDesc& in, const ArrayDesc& out, const Footprint& filter,
                                 double cval) {
  if (out.size() == 0) return;
  const FootprintParams params = make_params(in, filter, cval);
  const Geometry g = make_geometry(in, out);
  dispatch_real_dtype<FootprintLaunch>(in.dtype, in, out, g, params, as_stream(stream_));
  GF_CUDA_CHECK_LAUNCH();
}

}  // namespace gpufilt::cuda
