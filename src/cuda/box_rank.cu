// Rank filters over a dense box footprint on the trailing axes (what
// median_filter, rank_filter and percentile_filter with size=... ask for),
// in three forms: a separable median for 3x3, 5x5, 7x7 and 3x3x3 boxes and a
// tiled median for 5x5x5 ones (box_median_kernels.cuh, launched from units
// of their own: box_median.cuh), and a sliding histogram for 8-bit data and
// any box or rank (below).
#include "cuda/box_rank.cuh"

#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>

#include "core/border.hpp"
#include "cuda/box_median.cuh"
#include "cuda/box_tile.cuh"
#include "cuda/check.cuh"
#include "cuda/elements.cuh"

namespace gpufilt::cuda {
namespace {

// ---------------------------------------------------------- histogram form
//
// 8-bit data (bool, int8, uint8), any box on the trailing axes and any rank:
// each thread owns one output row of the plane and column, walks along axis
// 0 and keeps a histogram of its window in shared memory. A step removes
// the window's trailing slab of values and adds the leading one, and the
// answer moves from the last one by the few bins the counts say (the count
// of values below it is kept), instead of a scan of 256 bins or a sort of
// the window: about 2 x rows x columns of the box updates an output
// (30 for 15x15) instead of the 225 values a selection must see.

constexpr int kHistogramThreads = 64, kBins = 256;

// The bin range of an 8-bit dtype ({0, 0} for others).
std::pair<int, int> histogram_range(DType t) {
  switch (t) {
    case DType::Bool: return {0, 1};
    case DType::Int8: return {-128, 127};
    case DType::UInt8: return {0, 255};
    default: return {0, 0};
  }
}

template <DType In>
__device__ __forceinline__ int bin_of(const char* p) {
  if constexpr (In == DType::Int8) return *reinterpret_cast<const int8_t*>(p) + 128;
  else if constexpr (In == DType::Bool) return *reinterpret_cast<const uint8_t*>(p) != 0;
  else return *reinterpret_cast<const uint8_t*>(p);
}

template <DType In>
__global__ void __launch_bounds__(kHistogramThreads) box_histogram_kernel(const __grid_constant__ BoxArgs a) {
  // Bin b of thread t: hist[b * kHistogramThreads + lane * 2 + warp], so
  // that a warp's 32 threads touch 32 different banks whatever their bins.
  __shared__ uint16_t hist[kBins * kHistogramThreads];
  for (int i = threadIdx.x; i < kBins * kHistogramThreads / 8; i += kHistogramThreads)
    reinterpret_cast<uint4*>(hist)[i] = make_uint4(0, 0, 0, 0);
  __syncthreads();
  const BlockOrigin o = block_origin(a, 1, kHistogramThreads);
  const int64_t x = o.x0 + threadIdx.x, row = o.row0;
  if (x >= a.n[2] || row >= a.n[1]) return;  // no barrier follows
  uint16_t* count = hist + (threadIdx.x % 32) * 2 + threadIdx.x / 32;
  constexpr int stride = kHistogramThreads;
  const int offset = In == DType::Int8 ? 128 : 0;
  const int cval_bin = (int)a.cval + offset;

  // Calls f(bin) for the KP x KX values of input plane m of the window.
  auto visit_slab = [&](int64_t m, auto&& f) {
    const int64_t jm = border_index(m, a.n[0], a.mode);
    for (int jr = 0; jr < a.extent[1]; ++jr) {
      const int64_t r = border_index(row + a.lo[1] + jr, a.n[1], a.mode);
      const bool outside = jm < 0 || r < 0;
      const char* line = a.in + o.in_base + jm * a.in_stride[0] + r * a.in_stride[1];
      for (int jx = 0; jx < a.extent[2]; ++jx) {
        const int64_t c = border_index(x + a.lo[2] + jx, a.n[2], a.mode);
        f(outside || c < 0 ? cval_bin : bin_of<In>(line + c * a.in_stride[2]));
      }
    }
  };
  int answer = 0, below = 0;  // below: values of the window in bins under answer
  const auto add = [&](int b) {
    ++count[b * stride];
    below += b < answer;
  };
  const auto remove = [&](int b) {
    --count[b * stride];
    below -= b < answer;
  };
  for (int j = 0; j < a.extent[0] - 1; ++j) visit_slab(o.m0 + a.lo[0] + j, add);
  for (int64_t m = o.m0; m < o.m_end; ++m) {
    if (m > o.m0) visit_slab(m - 1 + a.lo[0], remove);
    visit_slab(m + a.lo[0] + a.extent[0] - 1, add);
    while (below > a.rank) below -= count[--answer * stride];
    while (below + count[answer * stride] <= a.rank) below += count[answer++ * stride];
    store_any(a.out_dtype, a.out + o.out_base + m * a.out_stride[0] + row * a.out_stride[1] + x * a.out_stride[2],
              answer - offset, a.out_aligned);
  }
}

// ------------------------------------------------------------ host side

std::optional<KeyKind> key_kind(DType t) {
  switch (t) {
    case DType::Bool: case DType::Int8: case DType::UInt8: case DType::Int16: case DType::UInt16:
    case DType::Int32:
      return KeyKind::Int;
    case DType::UInt32: return KeyKind::UInt;
    case DType::Float16: case DType::BFloat16: case DType::Float32: return KeyKind::Float;
    case DType::Float64: return KeyKind::Double;
    default: return std::nullopt;  // 64-bit integers: not exact as doubles, the general kernel's way
  }
}

// True when cval compares with the keys of `kind` as it does in double.
bool cval_is_exact(KeyKind kind, double cval) {
  switch (kind) {
    case KeyKind::Int: return cval >= INT32_MIN && cval <= INT32_MAX && cval == std::trunc(cval);
    case KeyKind::UInt: return cval >= 0 && cval <= UINT32_MAX && cval == std::trunc(cval);
    case KeyKind::Float: return std::isnan(cval) || (double)(float)cval == cval;
    default: return true;
  }
}

bool run_median(const BoxArgs& a, cudaStream_t stream) {
  const std::optional<KeyKind> kind = key_kind(a.in_dtype);
  if (a.rank != (int64_t)a.extent[0] * a.extent[1] * a.extent[2] / 2 || !kind) return false;
  if (a.mode == Mode::Constant && !cval_is_exact(*kind, a.cval)) return false;
  if (a.n[0] > INT32_MAX - 64) return false;  // plane indices in int32, halo included (PlaneKeys::fetch, the walk)
  return launch_column_median(*kind, a, stream) || launch_cube_median_int32_keys(*kind, a, stream) ||
         launch_cube_median_other_keys(*kind, a, stream);
}

bool run_histogram(BoxArgs a, cudaStream_t stream) {
  const int64_t taps = (int64_t)a.extent[0] * a.extent[1] * a.extent[2];
  const auto [lowest, highest] = histogram_range(a.in_dtype);
  if (lowest == highest || taps > UINT16_MAX) return false;
  if (a.mode == Mode::Constant && !(a.cval >= lowest && a.cval <= highest && a.cval == std::trunc(a.cval)))
    return false;
  const int64_t blocks = tile(a, 1, kHistogramThreads, 256);
  if (!blocks) return false;
  switch (a.in_dtype) {
    case DType::Bool: box_histogram_kernel<DType::Bool><<<(unsigned)blocks, kHistogramThreads, 0, stream>>>(a); break;
    case DType::Int8: box_histogram_kernel<DType::Int8><<<(unsigned)blocks, kHistogramThreads, 0, stream>>>(a); break;
    default: box_histogram_kernel<DType::UInt8><<<(unsigned)blocks, kHistogramThreads, 0, stream>>>(a); break;
  }
  return true;
}

}  // namespace

bool box_rank_pass(const ArrayDesc& in, const ArrayDesc& out, const Footprint& f, double cval,
                   cudaStream_t stream) {
  if (f.reduce != Reduce::Rank) return false;
  const std::optional<Box> box = dense_box(f);
  const std::optional<BoxArgs> a = box ? box_view(in, out, *box, f, cval) : std::nullopt;
  if (!a || !(run_median(*a, stream) || run_histogram(*a, stream))) return false;
  GF_CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace gpufilt::cuda
