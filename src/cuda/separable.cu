// CUDA backend of the separable chains (core/separable.hpp): 1-D correlate,
// uniform, minimum and maximum passes along one axis of an N-D strided
// array, the dtype-casting copy, and stream-ordered temporaries. Results are
// those of the CPU backend (core/cpu_backend.cpp): the same boundary math
// (core/border.hpp), the same conversions (core/cast.hpp), the same
// comparisons for minimum/maximum and, for correlate, the same double
// products summed in the same order without fused multiply-adds.
//
// A pass cuts the array into tiles of W lanes (neighbouring lines, taken
// along the output's most contiguous other axis) by L positions along the
// filtered axis. A block stages its tile plus halo in shared memory as
// doubles, a chunk of taps at a time so that any filter length fits, then
// each thread reduces R outputs of one lane. The N-D position of a tile is
// decoded once per block, so ndim costs nothing per element. Weights travel
// by value in the kernel parameters (no host-to-device copy).
//
// Nothing here synchronises the host: every launch goes on the caller's
// stream and can be captured in a CUDA graph.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cast.hpp"
#include "cuda/api.hpp"
#include "cuda/check.cuh"
#include "cuda/elements.cuh"

namespace gpufilt::cuda {
namespace {

constexpr int kMaxTaps = 2048;     // 16 KiB of weights in the kernel parameters
constexpr int kSmallTaps = 64;     // most filters: a small parameter block launches faster
constexpr int kThreads = 256;      // per block, every kernel
constexpr int kMaxPerThread = 4;   // outputs a thread sums along the axis (R)
constexpr int kStageBytes = 24 * 1024;   // shared memory budget of one tile
constexpr int64_t kShortLine = 64;       // shorter lines are tiled across lanes
constexpr int64_t kMaxBlocks = 1 << 20;  // larger grids stride

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
unsigned grid_for(int64_t blocks) { return (unsigned)std::min(blocks, kMaxBlocks); }


void require_real(const ArrayDesc& a, const char* role) {
  if (is_complex(a.dtype))
    throw std::invalid_argument(std::string(role) + " dtype " + dtype_name(a.dtype) +
                                " is not a real dtype");
}

void require_same_shape(const ArrayDesc& in, const ArrayDesc& out) {
  if (!same_shape(in, out)) throw std::invalid_argument("output shape does not match input shape");
}

// ---- geometry -----------------------------------------------------------------

// One axis as both arrays walk it: length and byte strides.
struct Dim {
  int64_t n, in, out;
};

// The axes other than `skip` (-1: none) with more than one element, outermost
// first by output stride, merged where both arrays allow it so that fewer
// axes are decoded per element.
std::vector<Dim> loop_dims(const ArrayDesc& in, const ArrayDesc& out, int skip) {
  std::vector<Dim> dims;
  for (int d = 0; d < in.ndim; ++d)
    if (d != skip && in.shape[d] > 1) dims.push_back({in.shape[d], in.strides[d], out.strides[d]});
  std::stable_sort(dims.begin(), dims.end(),
                   [](const Dim& a, const Dim& b) { return std::llabs(a.out) > std::llabs(b.out); });
  std::vector<Dim> merged;
  for (const Dim& d : dims) {
    Dim* outer = merged.empty() ? nullptr : &merged.back();
    if (outer && outer->in == d.in * d.n && outer->out == d.out * d.n) {
      *outer = {outer->n * d.n, d.in, d.out};
    } else {
      merged.push_back(d);
    }
  }
  return merged;
}

// Axes decoded from a linear index, innermost last.
struct Loop {
  int ndim = 0;
  int64_t shape[kMaxDims], in[kMaxDims], out[kMaxDims];
};

Loop make_loop(const std::vector<Dim>& dims) {
  Loop loop;
  for (const Dim& d : dims) {
    loop.shape[loop.ndim] = d.n;
    loop.in[loop.ndim] = d.in;
    loop.out[loop.ndim] = d.out;
    ++loop.ndim;
  }
  return loop;
}

// Byte offsets of linear index i of `loop` in the input and the output.
__device__ __forceinline__ void loop_offsets(const Loop& loop, int64_t i, int64_t& in_off,
                                             int64_t& out_off) {
  for (int d = loop.ndim - 1; d >= 0; --d) {
    const int64_t k = i % loop.shape[d];
    i /= loop.shape[d];
    in_off += k * loop.in[d];
    out_off += k * loop.out[d];
  }
}

// ---- line passes --------------------------------------------------------------

struct LineGeometry {
  const char* in;
  char* out;
  DType out_dtype;
  LineKind kind;
  Mode mode;
  bool in_aligned, out_aligned;
  double cval;
  int64_t n, in_step, out_step;      // the filtered axis
  int64_t lanes, in_lane, out_lane;  // the lane axis: 1 lane when there is none
  Loop outer;                        // the remaining axes, one tile row per index
  int64_t taps, left, size;          // size: the uniform divisor
  int symmetry;                      // Correlate: LinePass::symmetry()
  int64_t chunk;                     // taps staged per round
  int per_thread, tile_len;          // R, and L = R * blockDim.y
  int64_t axis_tiles, lane_tiles, tiles;
};

// What the kernel receives by value: geometry and up to Cap weights.
template <int Cap>
struct LineArgs {
  LineGeometry g;
  double weights[Cap];
};

// Kernel parameters may take 32 KiB since CUDA 12.1 (Volta and later); the
// small variant stays within the classic 4 KiB.
static_assert(sizeof(LineArgs<kMaxTaps>) <= 32764, "weights must fit the kernel parameters");
static_assert(sizeof(LineArgs<kSmallTaps>) <= 4096, "small variant must stay small");

// Where one thread's lane of a tile lives.
struct Tile {
  const char* in;
  char* out;
  int64_t start;  // first output position along the axis
  bool live;      // the lane exists (the last lane tile may be partial)
};

__device__ Tile locate_tile(const LineGeometry& g, int64_t t) {
  const int64_t axis_tile = t % g.axis_tiles;
  t /= g.axis_tiles;
  const int64_t lane = (t % g.lane_tiles) * blockDim.x + threadIdx.x;
  t /= g.lane_tiles;
  int64_t in_off = lane * g.in_lane, out_off = lane * g.out_lane;
  loop_offsets(g.outer, t, in_off, out_off);
  return {g.in + in_off, g.out + out_off, axis_tile * g.tile_len, lane < g.lanes};
}

// Stages input positions start - left + k0 + [0, L + c - 1) of this thread's
// lane, boundary-extended, into stage[row * W + lane].
template <DType T>
__device__ void stage_rows(const LineGeometry& g, const Tile& tile, int64_t k0, int64_t c,
                           double* stage) {
  if (!tile.live) return;
  const int64_t rows = g.tile_len + c - 1, first = tile.start - g.left + k0;
  for (int64_t r = threadIdx.y; r < rows; r += blockDim.y) {
    const int64_t j = border_index(first + r, g.n, g.mode);
    stage[r * blockDim.x + threadIdx.x] =
        j < 0 ? g.cval : load_elem<T>(tile.in + j * g.in_step, g.in_aligned);
  }
}

// acc[q] = the correlation over all taps when they are staged at once, in
// scipy's order (LinePass::symmetry), with separately rounded multiplies and
// adds (no FMA): the CPU's sums to the last bit.
template <int Cap>
__device__ void correlate_all_rows(const LineArgs<Cap>& a, const double* stage, double* acc) {
  const int W = blockDim.x, H = blockDim.y, x = threadIdx.x, y = threadIdx.y;
  const int64_t taps = a.g.taps, c = taps / 2;
#pragma unroll
  for (int q = 0; q < kMaxPerThread; ++q) {
    if (q >= a.g.per_thread) continue;
    const double* row = stage + (y + q * H) * W + x;  // row[k * W]: tap k
    double sum;
    if (a.g.symmetry != 0) {
      sum = __dmul_rn(row[c * W], a.weights[c]);
      for (int64_t k = 0; k < c; ++k) {
        const double pair = a.g.symmetry > 0 ? __dadd_rn(row[k * W], row[(2 * c - k) * W])
                                             : __dsub_rn(row[k * W], row[(2 * c - k) * W]);
        sum = __dadd_rn(sum, __dmul_rn(pair, a.weights[k]));
      }
    } else {
      sum = __dmul_rn(row[(taps - 1) * W], a.weights[taps - 1]);
      for (int64_t k = 0; k + 1 < taps; ++k) sum = __dadd_rn(sum, __dmul_rn(row[k * W], a.weights[k]));
    }
    acc[q] = sum;
  }
}

// acc[q] += sum of weights[k0 + k] * stage[q's row + k] over the c staged
// taps, in tap order: filters too long to stage at once (rare) may then
// differ from scipy in the last bit.
template <int Cap>
__device__ void correlate_rows(const LineArgs<Cap>& a, int64_t k0, int64_t c,
                               const double* stage, double* acc) {
  const int W = blockDim.x, H = blockDim.y, x = threadIdx.x, y = threadIdx.y;
  if (c == a.g.taps) return correlate_all_rows(a, stage, acc);
  for (int64_t k = 0; k < c; ++k) {
    const double w = a.weights[k0 + k];
#pragma unroll
    for (int q = 0; q < kMaxPerThread; ++q)
      if (q < a.g.per_thread) acc[q] = __dadd_rn(acc[q], __dmul_rn(w, stage[(y + q * H + k) * W + x]));
  }
}

__device__ void sum_rows(const LineGeometry& g, int64_t c, const double* stage, double* acc) {
  const int W = blockDim.x, H = blockDim.y, x = threadIdx.x, y = threadIdx.y;
  for (int64_t k = 0; k < c; ++k) {
#pragma unroll
    for (int q = 0; q < kMaxPerThread; ++q)
      if (q < g.per_thread) acc[q] += stage[(y + q * H + k) * W + x];
  }
}

// Running minimum (or maximum) from tap 0, replaced only by a strictly
// smaller (larger) value: scipy's rule, which also decides where NaN wins.
template <bool Minimum>
__device__ void extreme_rows(const LineGeometry& g, int64_t k0, int64_t c, const double* stage,
                             double* acc) {
  const int W = blockDim.x, H = blockDim.y, x = threadIdx.x, y = threadIdx.y;
  for (int64_t k = 0; k < c; ++k) {
#pragma unroll
    for (int q = 0; q < kMaxPerThread; ++q) {
      if (q >= g.per_thread) continue;
      const double v = stage[(y + q * H + k) * W + x];
      if ((k0 == 0 && k == 0) || (Minimum ? v < acc[q] : v > acc[q])) acc[q] = v;
    }
  }
}

template <int Cap>
__device__ void reduce_rows(const LineArgs<Cap>& a, int64_t k0, int64_t c, const double* stage,
                            double* acc) {
  switch (a.g.kind) {
    case LineKind::Correlate: return correlate_rows(a, k0, c, stage, acc);
    case LineKind::Uniform: return sum_rows(a.g, c, stage, acc);
    case LineKind::Minimum: return extreme_rows<true>(a.g, k0, c, stage, acc);
    case LineKind::Maximum: return extreme_rows<false>(a.g, k0, c, stage, acc);
  }
}

__device__ void store_outputs(const LineGeometry& g, const Tile& tile, const double* acc) {
  if (!tile.live) return;
#pragma unroll
  for (int q = 0; q < kMaxPerThread; ++q) {
    const int64_t i = tile.start + threadIdx.y + q * blockDim.y;
    if (q < g.per_thread && i < g.n)
      store_any(g.out_dtype, tile.out + i * g.out_step,
                g.kind == LineKind::Uniform ? acc[q] / g.size : acc[q], g.out_aligned);
  }
}

template <DType T, int Cap>
__global__ void __launch_bounds__(kThreads) line_kernel(const __grid_constant__ LineArgs<Cap> a) {
  extern __shared__ double stage[];
  const LineGeometry& g = a.g;
  for (int64_t t = blockIdx.x; t < g.tiles; t += gridDim.x) {  // uniform per block
    const Tile tile = locate_tile(g, t);
    double acc[kMaxPerThread] = {};
    for (int64_t k0 = 0; k0 < g.taps; k0 += g.chunk) {
      const int64_t c = min(g.chunk, g.taps - k0);
      __syncthreads();  // the previous round is read
      stage_rows<T>(g, tile, k0, c, stage);
      __syncthreads();
      if (tile.live) reduce_rows(a, k0, c, stage, acc);
    }
    store_outputs(g, tile, acc);
  }
}

// The smallest power of two >= v, at most `cap`.
int pow2_at_least(int64_t v, int cap) {
  int p = 1;
  while (p < cap && p < v) p *= 2;
  return p;
}

// Tile shape and the rest of a pass's launch.
struct LinePlan {
  LineGeometry g;
  dim3 block;
  size_t shared_bytes;
};

// Lanes go across neighbouring lines when another axis is more contiguous in
// the output than the filtered one (coalesced reads and writes along it), or
// when lines are too short to keep a block busy on their own.
void choose_lanes(std::vector<Dim>& dims, LineGeometry& g) {
  const bool across = !dims.empty() &&
                      (std::llabs(dims.back().out) < std::llabs(g.out_step) || g.n < kShortLine);
  g.lanes = 1;
  g.in_lane = g.out_lane = 0;
  if (!across) return;
  g.lanes = dims.back().n;
  g.in_lane = dims.back().in;
  g.out_lane = dims.back().out;
  dims.pop_back();
}

// Block (W lanes x H rows), outputs per thread and the taps per round, within
// kStageBytes of shared memory.
void choose_tile(LinePlan& p) {
  LineGeometry& g = p.g;
  const int W = pow2_at_least(g.lanes, 32), H = kThreads / W;
  g.per_thread = (int)std::min<int64_t>(kMaxPerThread, ceil_div(g.n, H));
  g.tile_len = g.per_thread * H;
  const int64_t max_rows = kStageBytes / (int64_t)sizeof(double) / W;
  g.chunk = std::min<int64_t>(g.taps, max_rows - g.tile_len + 1);
  g.axis_tiles = ceil_div(g.n, g.tile_len);
  g.lane_tiles = ceil_div(g.lanes, W);
  g.tiles = g.axis_tiles * g.lane_tiles;
  for (int d = 0; d < g.outer.ndim; ++d) g.tiles *= g.outer.shape[d];
  p.block = dim3(W, H);
  p.shared_bytes = (size_t)W * (g.tile_len + g.chunk - 1) * sizeof(double);
}

LinePlan plan_line(const ArrayDesc& in, const ArrayDesc& out, const LinePass& pass, double cval) {
  LinePlan p{};
  LineGeometry& g = p.g;
  g.in = in.data;
  g.out = out.data;
  g.out_dtype = out.dtype;
  g.kind = pass.kind;
  g.mode = pass.mode;
  g.in_aligned = is_aligned(in);
  g.out_aligned = is_aligned(out);
  g.cval = cval;
  g.n = in.shape[pass.axis];
  g.in_step = in.strides[pass.axis];
  g.out_step = out.strides[pass.axis];
  g.taps = pass.taps();
  g.symmetry = pass.symmetry();
  g.left = pass.left();
  g.size = pass.size;
  std::vector<Dim> dims = loop_dims(in, out, pass.axis);
  choose_lanes(dims, g);
  g.outer = make_loop(dims);
  choose_tile(p);
  return p;
}

template <DType T, int Cap>
void launch_line(const LinePlan& p, const std::vector<double>& weights, cudaStream_t stream) {
  LineArgs<Cap> a;
  a.g = p.g;
  std::fill(std::copy(weights.begin(), weights.end(), a.weights), a.weights + Cap, 0.0);
  line_kernel<T, Cap><<<grid_for(p.g.tiles), p.block, p.shared_bytes, stream>>>(a);
  GF_CUDA_CHECK_LAUNCH();
}

// Picks the kernel for input dtype T; only correlate passes carry weights.
template <DType T>
struct LineLauncher {
  static void run(const LinePlan& p, const std::vector<double>& weights, cudaStream_t stream) {
    if (weights.size() <= (size_t)kSmallTaps) launch_line<T, kSmallTaps>(p, weights, stream);
    else launch_line<T, kMaxTaps>(p, weights, stream);
  }
};

void check_line_pass(const ArrayDesc& in, const ArrayDesc& out, const LinePass& pass) {
  require_same_shape(in, out);
  require_real(in, "input");
  require_real(out, "output");
  if (pass.axis < 0 || pass.axis >= in.ndim)
    throw std::out_of_range("axis " + std::to_string(pass.axis) + " is out of range for an array of " +
                            std::to_string(in.ndim) + " dimensions");
  if (pass.taps() < 1) throw std::invalid_argument("filter size must be at least 1");
  if (pass.kind == LineKind::Correlate && pass.taps() > kMaxTaps)
    throw std::invalid_argument("the CUDA backend supports 1-D filters of at most " +
                                std::to_string(kMaxTaps) + " taps, not " +
                                std::to_string(pass.taps()));
}

// ---- copies -------------------------------------------------------------------

struct ElemGeometry {
  const char* in;
  char* out;
  Loop loop;
  int64_t size;
};

// Applies op(in element, out element) to every element, grid-striding.
template <class Op>
__global__ void __launch_bounds__(kThreads) elementwise_kernel(const __grid_constant__ ElemGeometry g,
                                                               const Op op) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < g.size; i += step) {
    int64_t in_off = 0, out_off = 0;
    loop_offsets(g.loop, i, in_off, out_off);
    op(g.in + in_off, g.out + out_off);
  }
}

template <class Op>
void launch_elementwise(const ArrayDesc& in, const ArrayDesc& out, const Op& op, cudaStream_t stream) {
  const ElemGeometry g{in.data, out.data, make_loop(loop_dims(in, out, -1)), in.size()};
  elementwise_kernel<<<grid_for(ceil_div(g.size, kThreads)), kThreads, 0, stream>>>(g, op);
  GF_CUDA_CHECK_LAUNCH();
}

// An element moved as `words` machine words of type Word: bit-exact.
template <class Word>
struct CopyWords {
  int words;
  __device__ void operator()(const char* src, char* dst) const {
    for (int w = 0; w < words; ++w)
      reinterpret_cast<Word*>(dst)[w] = reinterpret_cast<const Word*>(src)[w];
  }
};

template <DType T>
struct CastElement {
  DType out_dtype;
  bool in_aligned, out_aligned;
  __device__ void operator()(const char* src, char* dst) const {
    store_any(out_dtype, dst, load_elem<T>(src, in_aligned), out_aligned);
  }
};

template <DType T>
struct CastLauncher {
  static void run(const ArrayDesc& in, const ArrayDesc& out, cudaStream_t stream) {
    launch_elementwise(in, out, CastElement<T>{out.dtype, is_aligned(in), is_aligned(out)}, stream);
  }
};

// The widest word (up to 16 bytes) that divides the item size and every
// address either array touches.
int copy_word(const ArrayDesc& in, const ArrayDesc& out) {
  uint64_t bits = (uint64_t)itemsize(in.dtype) | reinterpret_cast<uintptr_t>(in.data) |
                  reinterpret_cast<uintptr_t>(out.data);
  for (int d = 0; d < in.ndim; ++d)
    if (in.shape[d] > 1) bits |= (uint64_t)in.strides[d] | (uint64_t)out.strides[d];
  int word = 16;
  while (bits % word) word /= 2;
  return word;
}

void copy_bits(const ArrayDesc& in, const ArrayDesc& out, cudaStream_t stream) {
  const int word = copy_word(in, out), words = itemsize(in.dtype) / word;
  with_word(word, [&](auto w) { launch_elementwise(in, out, CopyWords<decltype(w)>{words}, stream); });
}

// ---- temporaries --------------------------------------------------------------

// Stream-ordered device memory (allocate_temporary), released on the stream
// it came from.
class StreamBuffer final : public TempBuffer {
 public:
  StreamBuffer(int64_t bytes, cudaStream_t stream) : stream_(stream) {
    if (bytes > 0) GF_CUDA_CHECK(allocate_temporary(reinterpret_cast<void**>(&data), (size_t)bytes, stream));
  }
  ~StreamBuffer() override {
    if (data && cudaFreeAsync(data, stream_) != cudaSuccess) cudaGetLastError();  // never throw here
  }

 private:
  cudaStream_t stream_;
};

}  // namespace

void CudaBackend::line_pass(const ArrayDesc& in, const ArrayDesc& out, const LinePass& pass,
                            double cval) {
  check_line_pass(in, out, pass);
  if (in.size() == 0) return;
  if (fused_chain(in, out, {pass}, cval)) return;  // one pass of a 2-D/3-D array (fused.cu)
  const LinePlan plan = plan_line(in, out, pass, cval);
  static const std::vector<double> no_weights;
  const auto& weights = pass.kind == LineKind::Correlate ? pass.weights : no_weights;
  dispatch_real_dtype<LineLauncher>(in.dtype, plan, weights, as_stream(stream_));
}

void CudaBackend::copy(const ArrayDesc& in, const ArrayDesc& out) {
  require_same_shape(in, out);
  if (in.size() == 0) return;
  const cudaStream_t stream = as_stream(stream_);
  if (in.dtype == out.dtype) return copy_bits(in, out, stream);
  if (is_complex(in.dtype) && is_complex(out.dtype)) {  // component by component
    for (int c = 0; c < 2; ++c) copy(complex_component(in, c), complex_component(out, c));
    return;
  }
  require_real(in, "input");
  require_real(out, "output");
  dispatch_real_dtype<CastLauncher>(in.dtype, in, out, stream);
}

std::unique_ptr<TempBuffer> CudaBackend::allocate(int64_t bytes) {
  if (bytes < 0) throw std::invalid_argument("cannot allocate a negative number of bytes");
  return std::make_unique<StreamBuffer>(bytes, as_stream(stream_));
}

}  // namespace gpufilt::cuda
