// CUDA footprint filters (N-D weighted sums, minimum, maximum, rank). One
// thread per output element; the footprint travels by value in the kernel
// parameters (no host-to-device copy per call), in one of two forms:
// - a tap table (footprints of <= 512 taps along <= 4 axes): per-tap offsets
//   along the axes it spans and, for the interior, byte offsets that skip the
//   boundary arithmetic;
// - a bounding box (anything larger, along up to every axis): the box's
//   extent and lowest offset per spanned axis and a bitset of its cells (C
//   order, rows along the last spanned axis padded to 32 bits), walked in C
//   order so that sums round and min/max break ties as the CPU and scipy do;
//   weights follow the bits.
// Rank filters of up to 32 taps select in registers; larger ones by
// bisection on an order-preserving integer key of the values (no per-tap
// storage), in both forms.
#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "core/border.hpp"
#include "core/cast.hpp"
#include "cuda/box_rank.cuh"
#include "cuda/box_sum.cuh"
#include "cuda/check.cuh"
#include "cuda/elements.cuh"

namespace gpufilt::cuda {
namespace {

constexpr int kMaxTaps = 512;       // taps of the table form
constexpr int kMaxSpanDims = 4;     // axes the table form may extend along
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

// Coordinates of element `index` (C order) and its byte offsets in both
// arrays. Index arithmetic of type I: 32-bit divisions where the array's
// size allows (a 64-bit one is several times dearer).
template <class I>
__device__ __forceinline__ void locate_as(const Geometry& g, I index, int64_t* coord, int64_t& in_off,
                                          int64_t& out_off) {
  in_off = out_off = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const I n = (I)g.shape[d], c = index % n;
    index /= n;
    coord[d] = c;
    in_off += (int64_t)c * g.in_strides[d];
    out_off += (int64_t)c * g.out_strides[d];
  }
}

__device__ void locate(const Geometry& g, int64_t index, int64_t* coord, int64_t& in_off, int64_t& out_off) {
  if (g.size <= (int64_t)UINT32_MAX) locate_as<uint32_t>(g, (uint32_t)index, coord, in_off, out_off);
  else locate_as<int64_t>(g, index, coord, in_off, out_off);
}

// True when every tap of the element at `coord` lies inside the array
// (p: FootprintParams or BoxParams), so no boundary arithmetic is needed.
template <class Params>
__device__ __forceinline__ bool is_interior(const Params& p, const int64_t* coord) {
  bool interior = true;
  for (int k = 0; k < p.nspan; ++k) {
    const int64_t c = coord[p.span_dim[k]];
    interior = interior && c >= p.lo[k] && c < p.hi[k];
  }
  return interior;
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

// An unsigned key of a double whose order is the numeric order (-0 < +0;
// NaNs beyond the infinities), and back.
__device__ __forceinline__ uint64_t order_key(double v) {
  const uint64_t u = (uint64_t)__double_as_longlong(v);
  return (u >> 63) ? ~u : u | (1ull << 63);
}
__device__ __forceinline__ double from_order_key(uint64_t k) {
  return __longlong_as_double((long long)((k >> 63) ? k & ~(1ull << 63) : ~k));
}

// The rank-th smallest (0-based) of the values that visit_all(f) passes to
// f, without storing them: bisection on their order keys. lo <= key of the
// answer <= hi and `below` values have keys under lo; each pass counts the
// values within [lo, mid] and snaps the range to keys that occur, so it ends
// after at most 64 passes, and after a few for clustered or 8-bit data.
// Local memory for a gathered copy would be reserved for every resident
// thread; re-reading the taps (cached) is faster.
template <class VisitAll>
__device__ double select_by_bisection(int64_t rank, VisitAll&& visit_all) {
  uint64_t lo = ~0ull, hi = 0;
  visit_all([&](double v) {
    const uint64_t k = order_key(v);
    lo = k < lo ? k : lo;
    hi = k > hi ? k : hi;
  });
  int64_t below = 0;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    int64_t count = 0;
    uint64_t max_le = 0, min_gt = ~0ull;
    visit_all([&](double v) {
      const uint64_t k = order_key(v);
      if (k < lo || k > hi) return;
      if (k <= mid) {
        ++count;
        max_le = k > max_le ? k : max_le;
      } else {
        min_gt = k < min_gt ? k : min_gt;
      }
    });
    if (below + count > rank) {
      hi = max_le;
    } else {
      below += count;
      lo = min_gt;
    }
  }
  return from_order_key(lo);
}

template <DType In>
__global__ void footprint_kernel(const char* __restrict__ in, char* __restrict__ out, DType out_dtype,
                                 bool aligned, const Geometry g, const __grid_constant__ FootprintParams p) {
  int64_t coord[kMaxDims];
  for (int64_t index = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; index < g.size;
       index += (int64_t)gridDim.x * blockDim.x) {
    int64_t in_off, out_off;
    locate(g, index, coord, in_off, out_off);
    const bool interior = is_interior(p, coord);
    double result;
    if (p.reduce == Reduce::Sum) {
      result = 0.0;
      for (int t = 0; t < p.ntaps; ++t)  // no FMA: the CPU's (and scipy's) rounding
        result = __dadd_rn(result, __dmul_rn(tap_value<In>(in, g, p, coord, in_off, interior, t), p.weight[t]));
    } else if (p.reduce == Reduce::Rank) {  // more than kSmallRank taps
      result = select_by_bisection(p.rank, [&](auto&& visit) {
        for (int t = 0; t < p.ntaps; ++t) visit(tap_value<In>(in, g, p, coord, in_off, interior, t));
      });
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

// Rank filters of at most kSmallRank taps (3x3, 5x5, 3x3x3...): the values
// stay in registers (fully unrolled loops) in the narrowest type that holds
// them exactly, are sorted by a fixed network, and the answer is v[rank]. No
// local memory, no data-dependent branches.
constexpr int kSmallRank = 32;

template <DType In>
using rank_value_t = std::conditional_t<In == DType::Float64 || In == DType::Int32 || In == DType::UInt32 ||
                                            In == DType::Int64 || In == DType::UInt64,
                                        double, float>;

// Sorts v ascending with a bitonic network: 240 compare-exchanges of
// min/max on registers, fully unrolled (every index is a compile-time
// constant, so v stays in registers), instead of counting each value's rank
// (n^2 comparisons). NaN must not be present.
template <class V>
__device__ __forceinline__ void sort_network(V (&v)[kSmallRank]) {
#pragma unroll
  for (int k = 2; k <= kSmallRank; k *= 2) {
#pragma unroll
    for (int j = k / 2; j > 0; j /= 2) {
#pragma unroll
      for (int i = 0; i < kSmallRank; ++i) {
        const int l = i ^ j;
        if (l > i) {
          const V a = v[i], b = v[l];
          const bool ascending = (i & k) == 0;
          v[i] = ascending ? min(a, b) : max(a, b);
          v[l] = ascending ? max(a, b) : min(a, b);
        }
      }
    }
  }
}

template <DType In>
__global__ void small_rank_kernel(const char* __restrict__ in, char* __restrict__ out, DType out_dtype,
                                  bool aligned, const Geometry g, const __grid_constant__ FootprintParams p) {
  using V = rank_value_t<In>;
  int64_t coord[kMaxDims];
  for (int64_t index = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; index < g.size;
       index += (int64_t)gridDim.x * blockDim.x) {
    int64_t in_off, out_off;
    locate(g, index, coord, in_off, out_off);
    const bool interior = is_interior(p, coord);
    // A NaN has no rank (its comparisons are false): the rank is taken among
    // the other values, and is NaN past their count. NaNs and the unused
    // slots sort last as infinities.
    V v[kSmallRank];
    int nans = 0;
#pragma unroll
    for (int t = 0; t < kSmallRank; ++t) {
      v[t] = (V)INFINITY;
      if (t < p.ntaps) {
        const V x = (V)tap_value<In>(in, g, p, coord, in_off, interior, t);
        if (x != x) ++nans;
        else v[t] = x;
      }
    }
    sort_network(v);
    V result = (V)NAN;
#pragma unroll
    for (int i = 0; i < kSmallRank; ++i)
      if (i == p.rank && i < p.ntaps - nans) result = v[i];
    store_any(out_dtype, out + out_off, (double)result, aligned);
  }
}

// ---------------------------------------------------------------- box form

// 32-bit words of the box form's bitset and weights: with the geometry and
// the other arguments, the kernel parameters stay under CUDA's 32764 bytes.
constexpr int kBoxWords = 7424;

struct BoxParams {
  int ntaps, nspan;
  int nrows, row_words;                  // rows: cells of the box's outer axes; words per row
  int weight_word;                       // Sum: weight t is store[weight_word + 2t .. +1]
  int span_dim[kMaxDims];                // the axes the footprint extends along, increasing
  int32_t box_lo[kMaxDims], extent[kMaxDims];  // per spanned axis: lowest offset, cells
  int64_t lo[kMaxDims], hi[kMaxDims];    // interior: lo <= coord < hi
  int64_t rank;
  double cval;
  Reduce reduce;
  Mode mode;
  bool in_aligned;
  uint32_t store[kBoxWords];             // bits of each row (C order), then the weights
};

// The arguments of box_kernel other than BoxParams, generously.
static_assert(sizeof(BoxParams) + sizeof(Geometry) + 64 <= 32764, "kernel parameters over CUDA's limit");

// Calls visit(value, t) for every tap t of the footprint, in C order.
template <DType In, class Visit>
__device__ __forceinline__ void walk_box(const char* in, const Geometry& g, const BoxParams& p,
                                         const int64_t* coord, int64_t in_off, bool interior, Visit&& visit) {
  const int last = p.nspan - 1, dl = p.span_dim[last];
  const int64_t sl = g.in_strides[dl], cl = coord[dl], nl = g.shape[dl], lo_l = p.box_lo[last];
  int t = 0;
  for (int r = 0; r < p.nrows; ++r) {
    int64_t off = in_off;
    bool outside = false;
    for (int k = last - 1, rem = r; k >= 0; --k) {
      const int e = p.extent[k], d = p.span_dim[k];
      const int64_t o = rem % e + p.box_lo[k];
      rem /= e;
      if (interior) {
        off += o * g.in_strides[d];
      } else {
        const int64_t j = border_index(coord[d] + o, g.shape[d], p.mode);
        if (j < 0) outside = true;
        else off += (j - coord[d]) * g.in_strides[d];
      }
    }
    const uint32_t* words = p.store + r * p.row_words;
    for (int w = 0; w < p.row_words; ++w) {
      for (uint32_t bits = words[w]; bits; bits &= bits - 1) {
        const int64_t o = w * 32 + (__ffs(bits) - 1) + lo_l;
        double v;
        if (interior) {
          v = load_elem<In>(in + off + o * sl, p.in_aligned);
        } else if (outside) {
          v = p.cval;
        } else {
          const int64_t j = border_index(cl + o, nl, p.mode);
          v = j < 0 ? p.cval : load_elem<In>(in + off + (j - cl) * sl, p.in_aligned);
        }
        visit(v, t++);
      }
    }
  }
}

template <DType In>
__global__ void box_kernel(const char* __restrict__ in, char* __restrict__ out, DType out_dtype, bool aligned,
                           const Geometry g, const __grid_constant__ BoxParams p) {
  int64_t coord[kMaxDims];
  for (int64_t index = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; index < g.size;
       index += (int64_t)gridDim.x * blockDim.x) {
    int64_t in_off, out_off;
    locate(g, index, coord, in_off, out_off);
    const bool interior = is_interior(p, coord);
    double result = 0.0;
    if (p.reduce == Reduce::Sum) {
      walk_box<In>(in, g, p, coord, in_off, interior, [&](double v, int t) {
        const double w = __hiloint2double((int)p.store[p.weight_word + 2 * t + 1], (int)p.store[p.weight_word + 2 * t]);
        result = __dadd_rn(result, __dmul_rn(v, w));  // no FMA: the CPU's (and scipy's) rounding
      });
    } else if (p.reduce == Reduce::Rank) {
      result = select_by_bisection(p.rank, [&](auto&& visit) {
        walk_box<In>(in, g, p, coord, in_off, interior, [&](double v, int) { visit(v); });
      });
    } else {  // scipy's comparison: a later value wins only if strictly smaller/larger
      const bool minimum = p.reduce == Reduce::Minimum;
      walk_box<In>(in, g, p, coord, in_off, interior, [&](double v, int t) {
        if (t == 0 || (minimum ? v < result : v > result)) result = v;
      });
    }
    store_any(out_dtype, out + out_off, result, aligned);
  }
}

// ------------------------------------------------------------ host side

// The axes a footprint extends along and its offsets' range on each.
struct Span {
  int nspan = 0;
  int dim[kMaxDims];
  int64_t lo[kMaxDims], hi[kMaxDims];  // lowest and highest offset
};

Span footprint_span(const Footprint& f) {
  Span s;
  for (int d = 0; d < f.ndim; ++d) {
    int64_t lo = 0, hi = 0;
    for (int64_t t = 0; t < f.taps(); ++t) {
      lo = std::min(lo, f.offsets[t * f.ndim + d]);
      hi = std::max(hi, f.offsets[t * f.ndim + d]);
    }
    if (lo == 0 && hi == 0) continue;
    s.dim[s.nspan] = d;
    s.lo[s.nspan] = lo;
    s.hi[s.nspan] = hi;
    ++s.nspan;
  }
  return s;
}

bool fits_table(const Footprint& f, const Span& s) { return f.taps() <= kMaxTaps && s.nspan <= kMaxSpanDims; }

// The footprint as a tap table (fits_table is true).
FootprintParams make_params(const ArrayDesc& in, const Footprint& f, const Span& s, double cval) {
  FootprintParams p{};
  p.ntaps = (int)f.taps();
  p.reduce = f.reduce;
  p.mode = f.mode;
  p.cval = cval;
  p.rank = f.rank;
  p.in_aligned = is_aligned(in);
  p.nspan = s.nspan;
  for (int k = 0; k < s.nspan; ++k) {
    const int d = s.dim[k];
    p.span_dim[k] = d;
    p.lo[k] = -s.lo[k];
    p.hi[k] = in.shape[d] - s.hi[k];
    for (int64_t t = 0; t < f.taps(); ++t) p.offset[t][k] = (int32_t)f.offsets[t * f.ndim + d];
  }
  for (int64_t t = 0; t < f.taps(); ++t) {
    p.byte_offset[t] = 0;
    for (int d = 0; d < f.ndim; ++d) p.byte_offset[t] += f.offsets[t * f.ndim + d] * in.strides[d];
    p.weight[t] = f.reduce == Reduce::Sum ? f.weights[t] : 0.0;
  }
  return p;
}

// The footprint as a bounding box and bitset; throws when it does not fit.
// Built on the heap: BoxParams is ~30 KB.
std::unique_ptr<BoxParams> make_box_params(const ArrayDesc& in, const Footprint& f, const Span& s, double cval) {
  auto p = std::make_unique<BoxParams>();
  std::memset(p.get(), 0, sizeof(BoxParams));
  p->ntaps = (int)f.taps();
  p->nspan = s.nspan;
  p->reduce = f.reduce;
  p->mode = f.mode;
  p->cval = cval;
  p->rank = f.rank;
  p->in_aligned = is_aligned(in);
  if (s.nspan == 0)  // more than kMaxTaps taps, all at offset 0
    throw std::invalid_argument("the CUDA footprint filters take footprints with each tap once");
  const std::string too_big = "the footprint's bounding box ";
  int64_t rows = 1;
  for (int k = 0; k < s.nspan; ++k) {
    const int d = s.dim[k];
    const int64_t extent = s.hi[k] - s.lo[k] + 1;
    if (extent > int64_t(kBoxWords) * 32)
      throw std::invalid_argument(too_big + "is " + std::to_string(extent) + " elements long along axis " +
                                  std::to_string(d) + "; the CUDA footprint filters take at most " +
                                  std::to_string(int64_t(kBoxWords) * 32));
    p->span_dim[k] = d;
    p->box_lo[k] = (int32_t)s.lo[k];
    p->extent[k] = (int32_t)extent;
    p->lo[k] = -s.lo[k];
    p->hi[k] = in.shape[d] - s.hi[k];
    if (k < s.nspan - 1) rows = std::min<int64_t>(rows * extent, int64_t(kBoxWords) + 1);
  }
  const int last = s.nspan - 1;
  const int64_t row_words = (p->extent[last] + 31) / 32, words = rows * row_words;
  if (words > kBoxWords)
    throw std::invalid_argument(too_big + "is too large for the CUDA footprint filters: they take boxes of at "
                                "most " + std::to_string(int64_t(kBoxWords) * 32) + " elements (rows along "
                                "the last axis padded to multiples of 32)");
  p->nrows = (int)rows;
  p->row_words = (int)row_words;
  // Cells in C order over the spanned axes; the taps must come in that order
  // (gpufilt.ndimage lists them so), each once.
  int64_t previous = -1;
  for (int64_t t = 0; t < f.taps(); ++t) {
    int64_t row = 0;
    for (int k = 0; k < last; ++k) row = row * p->extent[k] + (f.offsets[t * f.ndim + s.dim[k]] - s.lo[k]);
    const int64_t col = f.offsets[t * f.ndim + s.dim[last]] - s.lo[last];
    const int64_t cell = row * row_words * 32 + col;
    if (cell <= previous)
      throw std::invalid_argument("the CUDA footprint filters take footprints of more than " +
                                  std::to_string(kMaxTaps) + " elements (or extending along more than " +
                                  std::to_string(kMaxSpanDims) + " axes) with their taps in C order, each once");
    previous = cell;
    p->store[cell / 32] |= 1u << (cell % 32);
  }
  p->weight_word = (int)words;
  if (f.reduce == Reduce::Sum) {
    const int64_t max_weights = (kBoxWords - words) / 2;
    if (f.taps() > max_weights)
      throw std::invalid_argument(
          "the weights have " + std::to_string(f.taps()) + " nonzero elements; CUDA correlate and convolve take "
          "at most " + std::to_string(max_weights) + " for this footprint's bounding box (about " +
          std::to_string((kBoxWords - 2) / 2) + " for a small box): the weights travel in the kernel "
          "parameters, which CUDA limits to 32 KB. N-D weights this large are rare; run the filter on the CPU "
          "(numpy input), or split it into separable 1-D passes");
    for (int64_t t = 0; t < f.taps(); ++t) {
      uint64_t bits;
      std::memcpy(&bits, &f.weights[t], sizeof bits);
      p->store[words + 2 * t] = (uint32_t)bits;
      p->store[words + 2 * t + 1] = (uint32_t)(bits >> 32);
    }
  }
  return p;
}

unsigned blocks_for(int64_t n) { return (unsigned)std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks); }

template <DType In>
struct FootprintLaunch {
  static void run(const ArrayDesc& in, const ArrayDesc& out, const Geometry& g, const FootprintParams& p,
                  cudaStream_t s) {
    if (p.reduce == Reduce::Rank && p.ntaps <= kSmallRank)
      small_rank_kernel<In><<<blocks_for(g.size), kThreads, 0, s>>>(in.data, out.data, out.dtype, is_aligned(out),
                                                                      g, p);
    else
      footprint_kernel<In><<<blocks_for(g.size), kThreads, 0, s>>>(in.data, out.data, out.dtype, is_aligned(out),
                                                                     g, p);
  }
};

template <DType In>
struct BoxLaunch {
  static void run(const ArrayDesc& in, const ArrayDesc& out, const Geometry& g, const BoxParams& p,
                  cudaStream_t s) {
    box_kernel<In><<<blocks_for(g.size), kThreads, 0, s>>>(in.data, out.data, out.dtype, is_aligned(out), g, p);
  }
};

}  // namespace

void CudaBackend::footprint_pass(const ArrayDesc& in, const ArrayDesc& out, const Footprint& filter,
                                 double cval) {
  if (out.size() == 0) return;
  const cudaStream_t stream = as_stream(stream_);
  if (box_rank_pass(in, out, filter, cval, stream) || box_sum_pass(in, out, filter, cval, stream)) return;
  const Span span = footprint_span(filter);
  const Geometry g = make_geometry(in, out);
  if (fits_table(filter, span)) {
    const FootprintParams params = make_params(in, filter, span, cval);
    dispatch_real_dtype<FootprintLaunch>(in.dtype, in, out, g, params, as_stream(stream_));
  } else {
    const std::unique_ptr<BoxParams> params = make_box_params(in, filter, span, cval);
    dispatch_real_dtype<BoxLaunch>(in.dtype, in, out, g, *params, as_stream(stream_));
  }
  GF_CUDA_CHECK_LAUNCH();
}

}  // namespace gpufilt::cuda
