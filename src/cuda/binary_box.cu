// Binary erosion and dilation by a full box (gpufilt.ndimage.binary_*, a
// structuring element with every element set): a box is separable (the
// AND, or the OR, over it is the AND over one axis of the AND over the
// others, the border value standing in beyond the edges at every pass), and
// each pass counts the window's "hits" (clear bytes for erosion, set ones
// for dilation) at a cost that does not grow with the window. The step
// kernel (binary_morphology.cu) reads every tap; the minimum and maximum
// filters, which big boxes took before, cost 1.2 ms for a 31x31 square on
// 8192^2 bytes on an H200, where cupyx took 0.85.
//
// - Along an axis other than the last (column_kernel): a thread owns
//   16 neighbouring bytes of the inner axes (or one, where rows are not
//   whole 16-byte vectors) and walks a segment along the axis, keeping the
//   window's hit count of each byte in a byte of a word (four counters a
//   word, never above 255, so adds and subtracts never carry between them):
//   one entering and one leaving row a step.
// - Along the last axis (row_kernel): a block turns a run of the flattened
//   array into a bitset of hits in shared memory (one warp ballot per 32
//   bytes) and each thread answers its 16 outputs from the bits of their
//   windows, cut at the ends of their row (the border value beyond).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda/check.cuh"

namespace gpufilt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr uint32_t kOnes = 0x01010101u;  // a word of four 1 bytes

// Each byte of w as 1 when it is not 0.
__device__ __forceinline__ uint32_t nonzero_bytes(uint32_t w) {
  w |= w >> 4;
  w |= w >> 2;
  w |= w >> 1;
  return w & kOnes;
}

// One pass of a box: the array as outer x n x inner (C order), the window
// of output i along n the inputs i + lo to i + hi (lo <= 0 <= hi).
struct BoxPass {
  int64_t outer, n, inner;
  int64_t lo, hi;
  int64_t segment;    // outputs a column_kernel thread walks
  bool dilation;      // a hit is a set byte, and the output is set when the window holds one (else: a clear
                      // byte, and the output is set when it holds none)
  bool border_hits;   // the border value is a hit
};

// The hits (1 bytes) of a word of 0/nonzero bytes.
__device__ __forceinline__ uint32_t hits_of(const BoxPass& p, uint32_t word) {
  const uint32_t set = nonzero_bytes(word);
  return p.dilation ? set : set ^ kOnes;
}

// The output bytes (0/1) of a word of hit counts.
__device__ __forceinline__ uint32_t result_of(const BoxPass& p, uint32_t counts) {
  const uint32_t some = nonzero_bytes(counts);
  return p.dilation ? some : some ^ kOnes;
}

// V neighbouring bytes as words: 16 (four words, one vector load), or 1 (the low byte of one word).
template <int V>
struct Lane {
  static constexpr int kWords = V == 16 ? 4 : 1;
  static __device__ __forceinline__ void load(const uint8_t* p, uint32_t* w) {
    if constexpr (V == 16) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
      w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else {
      w[0] = __ldg(p);
    }
  }
  static __device__ __forceinline__ void store(uint8_t* p, const uint32_t* w) {
    if constexpr (V == 16) *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
    else *p = (uint8_t)w[0];
  }
};

// The hits of position j along the column at `column` (stride `inner`):
// the border's beyond the ends.
template <int V>
__device__ __forceinline__ void column_hits(const BoxPass& p, const uint8_t* column, int64_t j, uint32_t* hits) {
  using L = Lane<V>;
  if (j < 0 || j >= p.n) {
#pragma unroll
    for (int k = 0; k < L::kWords; ++k) hits[k] = p.border_hits ? (V == 16 ? kOnes : 1u) : 0u;
    return;
  }
  L::load(column + j * p.inner, hits);
#pragma unroll
  for (int k = 0; k < L::kWords; ++k) hits[k] = hits_of(p, hits[k]) & (V == 16 ? kOnes : 1u);
}

template <int V>
__global__ void __launch_bounds__(kThreads)
column_kernel(const uint8_t* __restrict__ in, uint8_t* __restrict__ out, const __grid_constant__ BoxPass p) {
  using L = Lane<V>;
  constexpr int K = L::kWords;
  const int64_t lanes = p.inner / V, segments = (p.n + p.segment - 1) / p.segment;
  const int64_t items = p.outer * segments * lanes, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < items; g += stride) {
    const int64_t lane = g % lanes, rest = g / lanes, segment = rest % segments, o = rest / segments;
    const int64_t base = o * p.n * p.inner + lane * V;
    const uint8_t* column = in + base;
    const int64_t first = segment * p.segment, last = min(p.n, first + p.segment);
    uint32_t count[K] = {}, hits[K];
    for (int64_t j = first + p.lo; j < first + p.hi; ++j) {  // the first window but its last input
      column_hits<V>(p, column, j, hits);
#pragma unroll
      for (int k = 0; k < K; ++k) count[k] += hits[k];
    }
#pragma unroll 4
    for (int64_t i = first; i < last; ++i) {
      column_hits<V>(p, column, i + p.hi, hits);
      uint32_t result[K];
#pragma unroll
      for (int k = 0; k < K; ++k) {
        count[k] += hits[k];
        result[k] = result_of(p, count[k]) & (V == 16 ? kOnes : 1u);
      }
      L::store(out + base + i * p.inner, result);
      column_hits<V>(p, column, i + p.lo, hits);
#pragma unroll
      for (int k = 0; k < K; ++k) count[k] -= hits[k];
    }
  }
}

// row_kernel: kRowOutputs outputs a thread, a run of kThreads * kRowOutputs
// flattened positions a block; windows up to kMaxBoxLength.
constexpr int kRowOutputs = 16;
constexpr int kRowRun = kThreads * kRowOutputs;
constexpr int kRowWords = (kRowRun + kMaxBoxLength - 1 + 31) / 32;

// True when a bit in [a, b] (b >= a) of `bits` is set.
__device__ __forceinline__ bool any_bit(const uint32_t* bits, int a, int b) {
  const int first = a >> 5, last = b >> 5;
  const uint32_t head = ~0u << (a & 31), tail = ~0u >> (31 - (b & 31));
  if (first == last) return bits[first] & head & tail;
  bool any = bits[first] & head || bits[last] & tail;
  for (int w = first + 1; w < last && !any; ++w) any = bits[w] != 0;
  return any;
}

__global__ void __launch_bounds__(kThreads)
row_kernel(const uint8_t* __restrict__ in, uint8_t* __restrict__ out, const __grid_constant__ BoxPass p) {
  constexpr int kWarps = kThreads / 32, kWordsPerWarp = (kRowWords + kWarps - 1) / kWarps;
  __shared__ uint32_t bits[kRowWords];  // bit b: the hit of flattened position start + lo + b
  const int64_t size = p.outer * p.n, start = (int64_t)blockIdx.x * kRowRun, from = start + p.lo;
  const int words = (kRowRun + (int)(p.hi - p.lo) + 31) / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  bool hits[kWordsPerWarp];  // all of a thread's loads first, in flight together, then the ballots
#pragma unroll
  for (int k = 0; k < kWordsPerWarp; ++k) {
    const int64_t q = from + 32 * (warp + k * kWarps) + lane;
    hits[k] = warp + k * kWarps < words && q >= 0 && q < size && ((__ldg(in + q) != 0) == p.dilation);
  }
#pragma unroll
  for (int k = 0; k < kWordsPerWarp; ++k) {
    const uint32_t ballot = __ballot_sync(0xFFFFFFFFu, hits[k]);
    if (lane == 0 && warp + k * kWarps < words) bits[warp + k * kWarps] = ballot;
  }
  __syncthreads();
  const int64_t first = start + (int64_t)threadIdx.x * kRowOutputs;
  int64_t c = first % p.n;  // the output's place in its row
  uint8_t result[kRowOutputs];
#pragma unroll
  for (int m = 0; m < kRowOutputs; ++m) {
    // the window of output first + m cut at its row's ends, as bits from the run's start
    const int64_t row_from = first + m - c - from;
    const int64_t a = max(c + p.lo, (int64_t)0), b = min(c + p.hi, p.n - 1);
    const bool cut = a != c + p.lo || b != c + p.hi;
    bool hit = cut && p.border_hits;
    if (!hit && a <= b) hit = any_bit(bits, (int)(row_from + a), (int)(row_from + b));
    result[m] = hit == p.dilation;
    c = c + 1 == p.n ? 0 : c + 1;
  }
  if (first + kRowOutputs <= size && reinterpret_cast<uintptr_t>(out + first) % 16 == 0) {
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      w[k] = result[4 * k] | result[4 * k + 1] << 8 | result[4 * k + 2] << 16 | (uint32_t)result[4 * k + 3] << 24;
    *reinterpret_cast<uint4*>(out + first) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
    for (int m = 0; m < kRowOutputs && first + m < size; ++m) out[first + m] = result[m];
  }
}

// Outputs a column_kernel thread walks: twice its window at least (the
// first window's reads), 64 at least.
int64_t column_segment(int64_t window) { return std::max<int64_t>(64, 2 * window); }

void launch_pass(const uint8_t* in, uint8_t* out, BoxPass p, cudaStream_t stream) {
  if (p.inner == 1) {
    const int64_t blocks = (p.outer * p.n + kRowRun - 1) / kRowRun;
    if (blocks > INT32_MAX) throw std::invalid_argument("binary_box: too many elements");
    row_kernel<<<(unsigned)blocks, kThreads, 0, stream>>>(in, out, p);
  } else {
    const bool vectors = p.inner % 16 == 0 && reinterpret_cast<uintptr_t>(in) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(out) % 16 == 0;
    const int64_t lanes = p.outer * (vectors ? p.inner / 16 : p.inner);
    p.segment = column_segment(p.hi - p.lo + 1);
    const int64_t items = lanes * ((p.n + p.segment - 1) / p.segment);
    if (vectors) {
      column_kernel<16><<<grid_stride_blocks((const void*)column_kernel<16>, kThreads, items), kThreads, 0,
                          stream>>>(in, out, p);
    } else {
      column_kernel<1><<<grid_stride_blocks((const void*)column_kernel<1>, kThreads, items), kThreads, 0, stream>>>(
          in, out, p);
    }
  }
  GF_CUDA_CHECK_LAUNCH();
}

}  // namespace

void binary_box(const ArrayDesc& source, const ArrayDesc& out, const ArrayDesc& scratch,
                const std::vector<int64_t>& lo, const std::vector<int64_t>& hi, bool dilation, bool border,
                intptr_t stream) {
  const int ndim = source.ndim;
  if ((int)lo.size() != ndim || (int)hi.size() != ndim)
    throw std::invalid_argument("binary_box: lo and hi need one value per axis");
  std::vector<int> axes;  // those the box is longer than 1 along
  for (int d = 0; d < ndim; ++d) {
    if (lo[d] > 0 || hi[d] < 0 || hi[d] - lo[d] + 1 > kMaxBoxLength)
      throw std::invalid_argument("binary_box: each axis needs lo <= 0 <= hi, at most " +
                                  std::to_string(kMaxBoxLength) + " elements");
    if (hi[d] > lo[d]) axes.push_back(d);
  }
  if (axes.empty()) throw std::invalid_argument("binary_box: the box must be longer than 1 along some axis");
  if (source.size() == 0) return;
  const cudaStream_t s = as_stream(stream);
  const auto* in = reinterpret_cast<const uint8_t*>(source.data);
  uint8_t* const buffers[2] = {reinterpret_cast<uint8_t*>(out.data), reinterpret_cast<uint8_t*>(scratch.data)};
  const int passes = (int)axes.size();
  for (int j = 0; j < passes; ++j) {
    const int d = axes[j];
    BoxPass p{};
    p.outer = p.inner = 1;
    for (int e = 0; e < d; ++e) p.outer *= source.shape[e];
    for (int e = d + 1; e < ndim; ++e) p.inner *= source.shape[e];
    p.n = source.shape[d];
    p.lo = lo[d];
    p.hi = hi[d];
    p.dilation = dilation;
    p.border_hits = border == dilation;  // erosion: a clear border hits; dilation: a set one
    uint8_t* target = buffers[(passes - 1 - j) % 2];  // the last pass into `out`
    launch_pass(in, target, p, s);
    in = target;
  }
}

}  // namespace gpufilt::cuda
