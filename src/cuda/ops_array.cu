// CUDA kernels of the array operations (core/ops_array.hpp): broadcasting
// copies and fills, sums over any axes, and checked gathers. Everything is
// enqueued on the caller's stream; temporaries are stream-ordered on it
// (allocate_temporary); nothing synchronises the host, so every call can be
// captured in a CUDA graph.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/ops_array.hpp"
#include "cuda/check.cuh"
#include "cuda/range_error.cuh"
#include "cuda/elements.cuh"
#include "cuda/strided.cuh"

namespace gpufilt::cuda {
namespace {

// ---- fill and broadcast_to --------------------------------------------------

struct CopyArgs {
  StridedLoop<2> loop;  // out, src
  char* out;
  const char* src;  // null: the value below
  alignas(16) unsigned char value[16];
};

// One element of W per index; `src` null means the by-value scalar.
template <class W>
__global__ void __launch_bounds__(kLoopThreads) copy_strided(const __grid_constant__ CopyArgs g) {
  W v;
  memcpy(&v, g.value, sizeof(W));
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < g.loop.size; i += step) {
    int64_t off[2];
    g.loop.offsets(i, off);
    *reinterpret_cast<W*>(g.out + off[0]) = g.src ? *reinterpret_cast<const W*>(g.src + off[1]) : v;
  }
}

// A contiguous, 16-byte aligned out filled with one value: 16-byte stores of
// the value repeated (the element size divides 16).
__global__ void __launch_bounds__(kLoopThreads) fill_vector(uint4* out, int64_t vectors, uint4 pattern) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += step) out[v] = pattern;
}

template <class W>
void launch_copy(const CopyArgs& g, cudaStream_t stream) {
  copy_strided<W><<<loop_blocks(g.loop.size), kLoopThreads, 0, stream>>>(g);
  GF_CUDA_CHECK_LAUNCH();
}

void launch_copy_any(const CopyArgs& g, int item, cudaStream_t stream) {
  with_word(item, [&](auto word) { launch_copy<decltype(word)>(g, stream); });
}

// ---- runs copied by teams of threads (broadcast_to and gather fast paths) ------
// When the innermost run of elements is contiguous in out and in the source
// (or a single source element, broadcast along it), a team of threads (a
// power of two from 32 to 256) copies one run: no per-element offset
// decoding, 16-byte words when every run starts on a 16-byte boundary.

constexpr int64_t kMinRunBytes = 64;  // shorter runs: the element loops above

// Byte offsets of run s in each array; one dimension (the usual case) without
// a division.
template <int N>
__device__ __forceinline__ void run_offsets(const StridedLoop<N>& loop, int64_t s, int64_t (&off)[N]) {
  if (loop.ndim == 1) {
    for (int k = 0; k < N; ++k) off[k] = s * loop.strides[k][0];
  } else {
    loop.offsets(s, off);
  }
}

// dst[0, bytes) = src[0, bytes): 16-byte words (four in flight per thread)
// when `words`, then elements of W. Both pointers W-aligned.
template <class W>
__device__ __forceinline__ void copy_run(char* __restrict__ dst, const char* __restrict__ src, int64_t bytes,
                                         int lane, int team, bool words) {
  int64_t done = 0;
  if (words) {
    const int64_t n = bytes / 16;
    uint4* d = reinterpret_cast<uint4*>(dst);
    const uint4* s = reinterpret_cast<const uint4*>(src);
    int64_t i = lane;
    for (; i + 3 * team < n; i += 4 * team) {
      uint4 v[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = s[i + k * team];
#pragma unroll
      for (int k = 0; k < 4; ++k) d[i + k * team] = v[k];
    }
    for (; i < n; i += team) d[i] = s[i];
    done = n * 16;
  }
  const int64_t n = (bytes - done) / (int64_t)sizeof(W);
  W* d = reinterpret_cast<W*>(dst + done);
  const W* s = reinterpret_cast<const W*>(src + done);
  for (int64_t i = lane; i < n; i += team) d[i] = s[i];
}

// dst[0, bytes) filled with `value`: 16-byte words of it repeated when `words`.
template <class W>
__device__ __forceinline__ void fill_run(char* dst, W value, int64_t bytes, int lane, int team, bool words) {
  int64_t done = 0;
  if (words) {
    union {
      uint4 word;
      W e[16 / sizeof(W)];
    } u;
#pragma unroll
    for (int k = 0; k < (int)(16 / sizeof(W)); ++k) u.e[k] = value;
    const int64_t n = bytes / 16;
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (int64_t i = lane; i < n; i += team) d[i] = u.word;
    done = n * 16;
  }
  const int64_t n = (bytes - done) / (int64_t)sizeof(W);
  W* d = reinterpret_cast<W*>(dst + done);
  for (int64_t i = lane; i < n; i += team) d[i] = value;
}

// Threads per run: a power of two between 32 and 256, about one unit each.
int team_size(int64_t units) {
  int team = 32;
  while (team < kLoopThreads && team < units) team *= 2;
  return team;
}

// Blocks for `runs` runs, kLoopThreads / team per block, grid-striding past 2^20.
unsigned run_blocks(int64_t runs, int team) {
  const int64_t per_block = kLoopThreads / team, blocks = (runs + per_block - 1) / per_block;
  return (unsigned)std::max<int64_t>(1, std::min<int64_t>(blocks, int64_t(1) << 20));
}

struct RunCopyArgs {
  StridedLoop<2> loop;  // over runs: out, src
  char* out;
  const char* src;
  int64_t run_bytes;
  int team;
  bool words;
  bool splat;  // src has stride 0 along the run: one element repeated
};

template <class W>
__global__ void __launch_bounds__(kLoopThreads) copy_runs(const __grid_constant__ RunCopyArgs g) {
  const int lane = threadIdx.x & (g.team - 1), per_block = kLoopThreads / g.team;
  const int64_t step = (int64_t)gridDim.x * per_block;
  for (int64_t s = (int64_t)blockIdx.x * per_block + threadIdx.x / g.team; s < g.loop.size; s += step) {
    int64_t off[2];
    run_offsets(g.loop, s, off);
    if (g.splat)
      fill_run<W>(g.out + off[0], *reinterpret_cast<const W*>(g.src + off[1]), g.run_bytes, lane, g.team, g.words);
    else
      copy_run<W>(g.out + off[0], g.src + off[1], g.run_bytes, lane, g.team, g.words);
  }
}

// The run-copy plan of a broadcast (loop over out and src, the innermost
// axis last), or false when the innermost run does not suit it.
bool plan_run_copy(const StridedLoop<2>& loop, const char* out, const char* src, int item, RunCopyArgs& g) {
  if (loop.ndim == 0) return false;
  const int last = loop.ndim - 1;
  const int64_t run = loop.shape[last], src_step = loop.strides[1][last];
  if (loop.strides[0][last] != item || (src_step != item && src_step != 0) || run * item < kMinRunBytes)
    return false;
  g.loop = loop;
  g.loop.ndim = last;
  g.loop.size = loop.size / run;
  g.out = const_cast<char*>(out);
  g.src = src;
  g.run_bytes = run * item;
  g.splat = src_step == 0;
  g.words = reinterpret_cast<uintptr_t>(out) % 16 == 0 && (g.splat || reinterpret_cast<uintptr_t>(src) % 16 == 0);
  for (int d = 0; d < last; ++d)
    g.words = g.words && loop.strides[0][d] % 16 == 0 && (g.splat || loop.strides[1][d] % 16 == 0);
  g.team = team_size(g.words ? g.run_bytes / 16 : run);
  return true;
}

template <class W>
void launch_run_copy(const RunCopyArgs& g, cudaStream_t stream) {
  copy_runs<W><<<run_blocks(g.loop.size, g.team), kLoopThreads, 0, stream>>>(g);
  GF_CUDA_CHECK_LAUNCH();
}

void launch_run_copy_any(const RunCopyArgs& g, int item, cudaStream_t stream) {
  with_word(item, [&](auto word) { launch_run_copy<decltype(word)>(g, stream); });
}

// ---- sum ----------------------------------------------------------------------

constexpr int kSumThreads = 256;
constexpr int64_t kBlockChunk = 8192;   // summands per block in row mode
constexpr int64_t kColumnChunk = 1024;  // reduced rows per thread in column mode
constexpr int64_t kRowMode = 2048;      // row mode from this many summands per output

template <SumClass C>
using Acc = std::conditional_t<C == SumClass::Float, double, uint64_t>;

// Byte offset of reduced element r from an output's base.
__device__ __forceinline__ int64_t reduced_offset(const ReducePlan& p, int64_t r) {
  int64_t off = 0;
  for (int d = p.nred - 1; d >= 0; --d) {
    off += (r % p.red_shape[d]) * p.red_x[d];
    r /= p.red_shape[d];
  }
  return off;
}

__device__ __forceinline__ int64_t kept_offset(const ReducePlan& p, int64_t o, bool out_strides) {
  int64_t off = 0;
  for (int d = p.nkeep - 1; d >= 0; --d) {
    off += (o % p.keep_shape[d]) * (out_strides ? p.keep_out[d] : p.keep_x[d]);
    o /= p.keep_shape[d];
  }
  return off;
}

// Block-wide sum (a tree: warp shuffles, then one warp over the warps'
// results); the same order every run, so results are reproducible.
template <class A>
__device__ A block_sum(A v) {
  __shared__ A warp_sums[kSumThreads / 32];
  for (int s = 16; s > 0; s /= 2) v += __shfl_down_sync(0xffffffffu, v, s);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < kSumThreads / 32 ? warp_sums[threadIdx.x] : A(0);
    for (int s = 16; s > 0; s /= 2) v += __shfl_down_sync(0xffffffffu, v, s);
  }
  return v;  // valid in thread 0
}

template <SumClass C>
__device__ void store_result(DType t, char* p, Acc<C> v) {
  if constexpr (C == SumClass::Float) store_any(t, p, v, false);
  else store_wrapped_int(t, p, v);
}

// Row mode: block (chunk, output) sums kBlockChunk summands of one output.
// chunks == 1: the block writes the result; else its partial.
template <DType T, SumClass C>
__global__ void __launch_bounds__(kSumThreads) sum_rows(const __grid_constant__ ReducePlan p, const char* x,
                                                       char* out, DType out_dtype, Acc<C>* partial,
                                                       int64_t chunks) {
  const int64_t chunk = blockIdx.x, o = blockIdx.y + (int64_t)blockIdx.z * gridDim.y;
  if (o >= p.outputs) return;
  const char* base = x + kept_offset(p, o, false);
  const int64_t lo = chunk * kBlockChunk, hi = min(p.reduced, lo + kBlockChunk);
  const bool flat = p.nred == 1;
  Acc<C> v = 0;
  for (int64_t r = lo + threadIdx.x; r < hi; r += kSumThreads)
    v += load_summand<T, C>(base + (flat ? r * p.red_x[0] : reduced_offset(p, r)));
  v = block_sum(v);
  if (threadIdx.x != 0) return;
  if (chunks == 1) store_result<C>(out_dtype, out + kept_offset(p, o, true), v);
  else partial[o * chunks + chunk] = v;
}

// Column mode (and few summands per output): one thread per output, over a
// chunk of chunk_length summands (blockIdx.y), compensated for floats.
template <DType T, SumClass C>
__global__ void __launch_bounds__(kSumThreads) sum_columns(const __grid_constant__ ReducePlan p, const char* x,
                                                          char* out, DType out_dtype, Acc<C>* partial,
                                                          int64_t chunks, int64_t chunk_length) {
  const int64_t o = (int64_t)blockIdx.x * kSumThreads + threadIdx.x, chunk = blockIdx.y;
  if (o >= p.outputs) return;
  const char* base = x + kept_offset(p, o, false);
  const int64_t lo = chunk * chunk_length, hi = min(p.reduced, lo + chunk_length);
  Acc<C> s = 0, c = 0;
  for (int64_t r = lo; r < hi; ++r) {
    const auto v = load_summand<T, C>(base + reduced_offset(p, r));
    if constexpr (C == SumClass::Float) {  // Kahan
      const double y = v - c, t = s + y;
      c = (t - s) - y;
      s = t;
    } else {
      s += v;
    }
  }
  if constexpr (C == SumClass::Float) s -= c;
  if (chunks == 1) store_result<C>(out_dtype, out + kept_offset(p, o, true), s);
  else partial[o * chunks + chunk] = s;
}

// The partials of each output ([output][chunk]) summed by one block each.
template <SumClass C>
__global__ void __launch_bounds__(kSumThreads) sum_partials(const __grid_constant__ ReducePlan p, char* out,
                                                           DType out_dtype, const Acc<C>* partial,
                                                           int64_t chunks) {
  const int64_t o = blockIdx.x + (int64_t)blockIdx.y * gridDim.x;
  if (o >= p.outputs) return;
  Acc<C> v = 0;
  for (int64_t k = threadIdx.x; k < chunks; k += kSumThreads) v += partial[o * chunks + k];
  v = block_sum(v);
  if (threadIdx.x == 0) store_result<C>(out_dtype, out + kept_offset(p, o, true), v);
}

// ---- sum fast paths: layouts read with 16-byte loads -------------------------
// Chosen on the host (SumLaunch) for aligned x; the general kernels above
// decode each summand's offset with 64-bit divisions and read it byte by byte.

// One element, already loaded, as the sum of class C adds it (load_summand's
// conversions, from a register instead of memory).
template <DType T, SumClass C>
__device__ __forceinline__ Acc<C> summand(typename storage<T>::type v) {
  if constexpr (C == SumClass::Integer && !is_float_dtype(T)) return (uint64_t)(int64_t)v;
  else return load_summand<T, C>(reinterpret_cast<const char*>(&v));  // a local: the byte copy folds away
}

// A thread's running sum: compensated (Kahan) in double for floats, wrapping
// 64-bit for integers and bools.
template <SumClass C>
struct Accumulator {
  Acc<C> s = 0, c = 0;
  __device__ __forceinline__ void add(Acc<C> v) {
    if constexpr (C == SumClass::Float) {
      const double y = v - c, t = s + y;
      c = (t - s) - y;
      s = t;
    } else {
      s += v;
    }
  }
  __device__ __forceinline__ Acc<C> value() const {
    if constexpr (C == SumClass::Float) return s - c;
    else return s;
  }
};

// A word (16 bytes unless W says otherwise) seen as its elements.
template <class S, class W = uint4>
union Lanes {
  static constexpr int count = sizeof(W) / sizeof(S);
  W word;
  S e[count];
};

// Loads in flight: each thread of the fast kernels below issues kSumLoads
// 16-byte loads before it adds any of them, and kSumBlocksPerSM blocks of
// kSumThreads stay resident per SM (their launch bounds cap the registers to
// allow it): 128 KB in flight per SM, several times the bytes that cover
// HBM's latency at full bandwidth (about 22 bytes/ns per SM on an H100 for
// about 2 us under load). Grids are sized to one wave of such blocks.
constexpr int kSumLoads = 8;
constexpr int kSumBlocksPerSM = 4;

// s[0] + ... + s[N - 1] (N a power of two), pairwise.
template <int N, class A>
__device__ __forceinline__ A pairwise_sum(A (&s)[N]) {
#pragma unroll
  for (int half = N / 2; half > 0; half /= 2)
#pragma unroll
    for (int k = 0; k < half; ++k) s[k] += s[k + half];
  return s[0];
}

// The sum of one 16-byte word's elements, pairwise in the accumulator type
// (double sums of at most 8 half-width or 4 float elements: no accuracy lost
// that matters against the compensated running sum they go into).
template <DType T, SumClass C>
__device__ __forceinline__ Acc<C> word_sum(uint4 w) {
  using S = typename storage<T>::type;
  Lanes<S> u;
  u.word = w;
  constexpr int L = Lanes<S>::count;
  Acc<C> s[L];
#pragma unroll
  for (int k = 0; k < L; ++k) s[k] = summand<T, C>(u.e[k]);
  return pairwise_sum(s);
}

// Contiguous mode: the summands of each output are one contiguous run (the
// reduced axis has unit stride). Block (chunk, output) sums a contiguous
// share of the run's 16-byte words; chunk 0 also takes the elements before
// the first 16-byte boundary and after the last whole word. Each step, a
// thread loads kSumLoads words (kSumThreads apart: a warp reads 512
// contiguous bytes per load), sums them pairwise and adds that to its
// compensated sum. chunks == 1: the block writes the result; else its
// partial, summed by sum_partials.
template <DType T, SumClass C>
__global__ void __launch_bounds__(kSumThreads, kSumBlocksPerSM)
    sum_contiguous(const __grid_constant__ ReducePlan p, const char* x, char* out, DType out_dtype,
                   Acc<C>* partial, int64_t chunks) {
  using S = typename storage<T>::type;
  constexpr int L = Lanes<S>::count;
  const int64_t chunk = blockIdx.x, o = blockIdx.y + (int64_t)blockIdx.z * gridDim.y;
  if (o >= p.outputs) return;  // the whole block: block_sum's barrier is not split
  const char* base = x + kept_offset(p, o, false);
  const int64_t n = p.reduced;
  const int64_t head = min(n, (int64_t)((16 - reinterpret_cast<uintptr_t>(base) % 16) % 16 / sizeof(S)));
  const int64_t words = (n - head) / L;
  const uint4* w = reinterpret_cast<const uint4*>(base + head * (int64_t)sizeof(S));
  const int64_t share = (words + chunks - 1) / chunks;
  const int64_t lo = min(words, chunk * share), hi = min(words, lo + share);
  Accumulator<C> acc;
  for (int64_t i = lo + threadIdx.x; i < hi; i += kSumLoads * kSumThreads) {
    uint4 v[kSumLoads];  // words past hi (in the last step only) read as zeros
#pragma unroll
    for (int k = 0; k < kSumLoads; ++k) {
      const int64_t at = i + (int64_t)k * kSumThreads;
      v[k] = at < hi ? w[at] : make_uint4(0, 0, 0, 0);
    }
    Acc<C> s[kSumLoads];
#pragma unroll
    for (int k = 0; k < kSumLoads; ++k) s[k] = word_sum<T, C>(v[k]);
    acc.add(pairwise_sum(s));
  }
  if (chunk == 0) {  // head < L and tail < L elements, at most one per thread
    const S* elems = reinterpret_cast<const S*>(base);
    const int64_t tail = head + words * L + threadIdx.x;
    if (threadIdx.x < head) acc.add(summand<T, C>(elems[threadIdx.x]));
    if (tail < n) acc.add(summand<T, C>(elems[tail]));
  }
  const Acc<C> v = block_sum(acc.value());
  if (threadIdx.x != 0) return;
  if (chunks == 1) store_result<C>(out_dtype, out + kept_offset(p, o, true), v);
  else partial[o * chunks + chunk] = v;
}

// Inner-column mode keeps a compensated sum per output a thread owns and
// kColumnBlocksPerSM blocks resident per SM (registers up to 85): with R
// rows of one word a step in flight, 96 KB per SM for 4- and 8-byte
// elements. A thread's word: 16 bytes, but 8 for 1-byte elements (16
// running sums would not fit), and R = kSumLoads rows but 4 for 2-byte
// elements (8 running sums).
constexpr int kColumnBlocksPerSM = 3;
template <class S>
using ColumnWord = std::conditional_t<sizeof(S) == 1, uint2, uint4>;
template <class S>
constexpr int column_rows() {
  return sizeof(S) == 2 ? kSumLoads / 2 : kSumLoads;
}

// Adds R rows of a thread's Width outputs: each output's R elements summed
// pairwise, that sum added to the output's compensated sum.
template <DType T, SumClass C, int R, int Width, class S>
__device__ __forceinline__ void add_rows(Accumulator<C> (&acc)[Width], const S (&e)[R][Width]) {
#pragma unroll
  for (int j = 0; j < Width; ++j) {
    Acc<C> s[R];
#pragma unroll
    for (int k = 0; k < R; ++k) s[k] = summand<T, C>(e[k][j]);
    acc[j].add(pairwise_sum(s));
  }
}

// Inner-column mode: the last kept axis has unit stride (sum over the
// leading axes of a C-contiguous block). Thread g owns `Width` neighbouring
// outputs of one run of that axis (a ColumnWord when kWords, else one
// element), so that a warp reads whole rows side by side; blockIdx.y picks a
// chunk of chunk_rows reduced positions. Each step, a thread loads R rows
// and adds them (add_rows). While R whole rows remain, with one reduced axis
// and a whole group of outputs, the R loads go out together, unguarded; the
// other steps (the last one, several reduced axes, the partial group at the
// end of a run whose length is not a multiple of Width) read element by
// element with guards.
template <DType T, SumClass C, bool kWords>
__global__ void __launch_bounds__(kSumThreads, kColumnBlocksPerSM)
    sum_inner_columns(const __grid_constant__ ReducePlan p, const char* x, char* out, DType out_dtype,
                      Acc<C>* partial, int64_t chunks, int64_t chunk_rows, int64_t groups) {
  using S = typename storage<T>::type;
  using Word = Lanes<S, ColumnWord<S>>;
  constexpr int Width = kWords ? Word::count : 1, R = kWords ? column_rows<S>() : kSumLoads;
  const int64_t g = (int64_t)blockIdx.x * kSumThreads + threadIdx.x;
  if (g >= groups) return;  // no barrier below
  const int64_t run = p.keep_shape[p.nkeep - 1], per_run = (run + Width - 1) / Width;
  const int64_t in_run = (g % per_run) * Width, first = (g / per_run) * run + in_run;
  const int lanes = (int)min((int64_t)Width, run - in_run);
  const char* base = x + kept_offset(p, first, false);
  const int64_t chunk = blockIdx.y, lo = chunk * chunk_rows, hi = min(p.reduced, lo + chunk_rows);
  Accumulator<C> acc[Width];
  int64_t r0 = lo;
  if (p.nred == 1 && lanes == Width) {
    const int64_t step = p.red_x[0];
    for (; r0 + R <= hi; r0 += R) {
      S e[R][Width];
#pragma unroll
      for (int k = 0; k < R; ++k) {
        const char* row = base + (r0 + k) * step;
        if constexpr (kWords) {
          Word u;
          u.word = *reinterpret_cast<const decltype(u.word)*>(row);
#pragma unroll
          for (int j = 0; j < Width; ++j) e[k][j] = u.e[j];
        } else {
          e[k][0] = *reinterpret_cast<const S*>(row);
        }
      }
      add_rows<T, C>(acc, e);
    }
  }
  for (; r0 < hi; r0 += R) {
    S e[R][Width];  // rows past hi read as zeros
#pragma unroll
    for (int k = 0; k < R; ++k) {
      const int64_t r = r0 + k;
      const S* row = reinterpret_cast<const S*>(base + (r < hi ? reduced_offset(p, r) : 0));
#pragma unroll
      for (int j = 0; j < Width; ++j) e[k][j] = r < hi && j < lanes ? row[j] : S(0);
    }
    add_rows<T, C>(acc, e);
  }
#pragma unroll
  for (int k = 0; k < Width; ++k) {
    if (k >= lanes) break;
    const int64_t o = first + k;
    if (chunks == 1) store_result<C>(out_dtype, out + kept_offset(p, o, true), acc[k].value());
    else partial[o * chunks + chunk] = acc[k].value();
  }
}

// Grid over `outputs` blocks: x up to 65535 * y.
dim3 output_grid(int64_t outputs, int64_t x = 1) {
  const int64_t y = std::min<int64_t>(outputs, 65535), z = (outputs + y - 1) / y;
  return dim3((unsigned)x, (unsigned)y, (unsigned)z);
}

constexpr int64_t kColumnMinRows = 64;  // reduced rows per chunk at least

template <DType T>
struct SumLaunch {
  using S = typename storage<T>::type;

  // Which kernel sums this layout.
  enum class Mode { General, Contiguous, InnerColumns };
  static Mode mode(const ReducePlan& p, const ArrayDesc& x) {
    if (!is_aligned(x) || p.nred == 0) return Mode::General;
    if (!p.column && p.nred == 1 && p.red_x[0] == (int64_t)sizeof(S)) return Mode::Contiguous;
    if (p.column && p.keep_x[p.nkeep - 1] == (int64_t)sizeof(S)) return Mode::InnerColumns;
    return Mode::General;
  }

  // Inner columns read as ColumnWords: every row of every run starts on a
  // word boundary.
  static constexpr int64_t kWordBytes = sizeof(ColumnWord<S>);
  static bool column_words(const ReducePlan& p, const ArrayDesc& x) {
    bool ok = reinterpret_cast<uintptr_t>(x.data) % kWordBytes == 0;
    for (int d = 0; d < p.nred; ++d) ok = ok && p.red_x[d] % kWordBytes == 0;  // negative strides too
    for (int d = 0; d + 1 < p.nkeep; ++d) ok = ok && p.keep_x[d] % kWordBytes == 0;
    return ok;
  }

  template <SumClass C>
  static void launch(const ReducePlan& p, const ArrayDesc& x, const ArrayDesc& out, cudaStream_t stream) {
    const Mode m = mode(p, x);
    int64_t chunks = 1, chunk = 0, groups = 0;
    bool words = false;
    // One wave of resident blocks with work for every thread, split along
    // the reduced axis when the outputs alone do not give it. The split
    // depends on the shape and the device only, so results repeat bit for
    // bit on one device.
    const int64_t sms = multiprocessors();
    if (m == Mode::Contiguous) {
      const int64_t wave = kSumBlocksPerSM * sms;
      // Each block at least one full step (kSumLoads words a thread).
      const int64_t words_each = p.reduced * (int64_t)sizeof(S) / 16;
      if (p.outputs < wave)
        chunks = std::max<int64_t>(1, std::min((wave + p.outputs - 1) / p.outputs,
                                               words_each / (kSumLoads * kSumThreads)));
    } else if (m == Mode::InnerColumns) {
      words = column_words(p, x);
      const int64_t width = words ? kWordBytes / (int64_t)sizeof(S) : 1, run = p.keep_shape[p.nkeep - 1];
      groups = p.outputs / run * ((run + width - 1) / width);
      const int64_t blocks_x = (groups + kSumThreads - 1) / kSumThreads;
      if (blocks_x > 2147483647) return launch_general<C>(p, x, out, stream);
      // Chunks of rows until the busy threads (one per group and chunk) fill
      // the wave; each chunk kColumnMinRows rows at least.
      const int64_t busy = std::min<int64_t>(groups, kSumThreads) * blocks_x;
      chunks = std::max<int64_t>(1, std::min({kColumnBlocksPerSM * sms * kSumThreads / busy,
                                              (p.reduced + kColumnMinRows - 1) / kColumnMinRows, int64_t(65535)}));
      chunk = std::max<int64_t>(1, (p.reduced + chunks - 1) / chunks);
      chunks = std::max<int64_t>(1, (p.reduced + chunk - 1) / chunk);
    } else {
      return launch_general<C>(p, x, out, stream);
    }
    Acc<C>* partial = nullptr;
    if (chunks > 1)
      GF_CUDA_CHECK(allocate_temporary(reinterpret_cast<void**>(&partial),
                                       (size_t)(p.outputs * chunks) * sizeof(Acc<C>), stream));
    if (m == Mode::Contiguous) {
      sum_contiguous<T, C><<<output_grid(p.outputs, chunks), kSumThreads, 0, stream>>>(p, x.data, out.data,
                                                                                     out.dtype, partial, chunks);
    } else {
      const dim3 grid((unsigned)((groups + kSumThreads - 1) / kSumThreads), (unsigned)chunks);
      if (words)
        sum_inner_columns<T, C, true><<<grid, kSumThreads, 0, stream>>>(p, x.data, out.data, out.dtype, partial,
                                                                        chunks, chunk, groups);
      else
        sum_inner_columns<T, C, false><<<grid, kSumThreads, 0, stream>>>(p, x.data, out.data, out.dtype, partial,
                                                                         chunks, chunk, groups);
    }
    finish<C>(p, out, partial, chunks, stream);
  }

  // The second pass over the partials (when there are), then the temporary
  // released on the stream, also when a launch failed.
  template <SumClass C>
  static void finish(const ReducePlan& p, const ArrayDesc& out, Acc<C>* partial, int64_t chunks,
                     cudaStream_t stream) {
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess && chunks > 1) {
      const dim3 grid(std::min<int64_t>(p.outputs, 65535), (unsigned)((p.outputs + 65534) / 65535));
      sum_partials<C><<<grid, kSumThreads, 0, stream>>>(p, out.data, out.dtype, partial, chunks);
      err = cudaGetLastError();
    }
    if (partial) cudaFreeAsync(partial, stream);
    GF_CUDA_CHECK(err);
  }

  // Any layout: offsets decoded per summand.
  template <SumClass C>
  static void launch_general(const ReducePlan& p, const ArrayDesc& x, const ArrayDesc& out, cudaStream_t stream) {
    const bool rows = !p.column && p.reduced >= kRowMode;
    // Column chunks grow past kColumnChunk only to keep the grid's y under 65536.
    const int64_t chunk = rows ? kBlockChunk : std::max<int64_t>(kColumnChunk, (p.reduced + 65534) / 65535);
    const int64_t chunks = std::max<int64_t>(1, (p.reduced + chunk - 1) / chunk);
    Acc<C>* partial = nullptr;
    if (chunks > 1)
      GF_CUDA_CHECK(allocate_temporary(reinterpret_cast<void**>(&partial),
                                       (size_t)(p.outputs * chunks) * sizeof(Acc<C>), stream));
    if (rows) {
      if (chunks > 2147483647) throw std::invalid_argument("sum: too many elements per output");
      sum_rows<T, C><<<output_grid(p.outputs, chunks), kSumThreads, 0, stream>>>(p, x.data, out.data, out.dtype,
                                                                                 partial, chunks);
    } else {
      const int64_t blocks = (p.outputs + kSumThreads - 1) / kSumThreads;
      if (blocks > 2147483647) throw std::invalid_argument("sum: too many outputs");
      sum_columns<T, C><<<dim3((unsigned)blocks, (unsigned)chunks), kSumThreads, 0, stream>>>(
          p, x.data, out.data, out.dtype, partial, chunks, chunk);
    }
    finish<C>(p, out, partial, chunks, stream);
  }
  static void run(const ReducePlan& p, const ArrayDesc& x, const ArrayDesc& out, cudaStream_t stream) {
    switch (sum_class(out.dtype)) {
      case SumClass::Float: return launch<SumClass::Float>(p, x, out, stream);
      case SumClass::Integer: return launch<SumClass::Integer>(p, x, out, stream);
      case SumClass::Bool: return launch<SumClass::Bool>(p, x, out, stream);
    }
  }
};

// ---- gather -------------------------------------------------------------------

struct GatherArgs {
  StridedLoop<3> loop;  // out, source (without the axis), index
  char* out;
  const char* source;
  const char* index;
  int64_t axis_length, axis_stride;
  RangeErrorSlot* error;
};

template <DType I, class W>
__global__ void __launch_bounds__(kLoopThreads) gather_kernel(const __grid_constant__ GatherArgs g) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < g.loop.size; e += step) {
    int64_t off[3];
    g.loop.offsets(e, off);
    const int64_t i = load_index<I>(g.index + off[2], g.axis_length);
    W v{};
    if (i < g.axis_length) {
      v = *reinterpret_cast<const W*>(g.source + off[1] + i * g.axis_stride);
    } else {
      using S = typename storage<I>::type;
      S raw;
      copy_element(&raw, g.index + off[2], sizeof(S));
      record_range_error(g.error, RangeErrorKind::Index, (int64_t)raw, g.axis_length);
    }
    *reinterpret_cast<W*>(g.out + off[0]) = v;
  }
}

// Fast path: the slab after the axis (source.shape[axis+1:]) is contiguous in
// source and out. Team s copies out's slab s from source's row index[s];
// the index is read and checked once per slab.
struct GatherRunArgs {
  StridedLoop<3> loop;  // over slabs: out, source (without the axis), index
  char* out;
  const char* source;
  const char* index;
  int64_t axis_length, axis_stride, run_bytes;
  int team;
  bool words;
  RangeErrorSlot* error;
};

template <DType I, class W>
__global__ void __launch_bounds__(kLoopThreads) gather_runs(const __grid_constant__ GatherRunArgs g) {
  const int lane = threadIdx.x & (g.team - 1), per_block = kLoopThreads / g.team;
  const int64_t step = (int64_t)gridDim.x * per_block;
  for (int64_t s = (int64_t)blockIdx.x * per_block + threadIdx.x / g.team; s < g.loop.size; s += step) {
    int64_t off[3];
    run_offsets(g.loop, s, off);
    const int64_t i = load_index<I>(g.index + off[2], g.axis_length);
    if (i < g.axis_length) {
      copy_run<W>(g.out + off[0], g.source + off[1] + i * g.axis_stride, g.run_bytes, lane, g.team, g.words);
    } else {
      if (lane == 0) {
        using S = typename storage<I>::type;
        S raw;
        copy_element(&raw, g.index + off[2], sizeof(S));
        record_range_error(g.error, RangeErrorKind::Index, (int64_t)raw, g.axis_length);
      }
      fill_run<W>(g.out + off[0], W{}, g.run_bytes, lane, g.team, g.words);
    }
  }
}

// The slab plan of a gather, or false when the slabs are not contiguous (or
// too short to pay for a team).
bool plan_gather_runs(const GatherPlan& p, const ArrayDesc& source, const ArrayDesc& index, int axis,
                      const ArrayDesc& out, GatherRunArgs& g) {
  const int inner = source.ndim - axis - 1, lead = out.ndim - inner, item = itemsize(out.dtype);
  int64_t run = 1;
  for (int d = out.ndim - 1; d >= lead; --d) {
    if (out.shape[d] != 1 && (out.strides[d] != run * item || p.source.strides[d] != run * item)) return false;
    run *= out.shape[d];
  }
  if (run * item < kMinRunBytes) return false;
  ArrayDesc o = out, s = p.source, x = p.index;
  o.ndim = s.ndim = x.ndim = lead;
  const ArrayDesc* const arrays[3] = {&o, &s, &x};
  g.loop = make_loop<3>(arrays);
  g.out = out.data;
  g.source = source.data;
  g.index = index.data;
  g.axis_length = p.axis_length;
  g.axis_stride = p.axis_stride;
  g.run_bytes = run * item;
  g.words = reinterpret_cast<uintptr_t>(out.data) % 16 == 0 && reinterpret_cast<uintptr_t>(source.data) % 16 == 0 &&
            p.axis_stride % 16 == 0;
  for (int d = 0; d < g.loop.ndim; ++d) g.words = g.words && g.loop.strides[0][d] % 16 == 0 &&
                                                  g.loop.strides[1][d] % 16 == 0;
  g.team = team_size(g.words ? g.run_bytes / 16 : run);
  g.error = range_error_slot();
  return true;
}

template <DType I>
struct GatherLaunch {
  template <class W>
  static void launch(const GatherArgs& g, cudaStream_t stream) {
    gather_kernel<I, W><<<loop_blocks(g.loop.size), kLoopThreads, 0, stream>>>(g);
    GF_CUDA_CHECK_LAUNCH();
  }
  template <class W>
  static void launch(const GatherRunArgs& g, cudaStream_t stream) {
    gather_runs<I, W><<<run_blocks(g.loop.size, g.team), kLoopThreads, 0, stream>>>(g);
    GF_CUDA_CHECK_LAUNCH();
  }
  template <class Args>
  static void run(const Args& g, int item, cudaStream_t stream) {
    with_word(item, [&](auto word) { launch<decltype(word)>(g, stream); });
  }
};

void require_aligned(const ArrayDesc& a, const char* name) {
  if (!is_aligned(a))
    throw std::invalid_argument(std::string(name) + " is not aligned to its element size; the CUDA array ops "
                                "need aligned data");
}

}  // namespace

void copy_broadcast(const ArrayDesc& src, const ArrayDesc& out, intptr_t stream_value) {
  if (out.size() == 0) return;
  require_aligned(out, "out");
  const cudaStream_t stream = as_stream(stream_value);
  const int item = itemsize(out.dtype);
  const bool by_value = src.device == Device::CPU;
  if (!by_value) require_aligned(src, "x");
  CopyArgs g{};
  const ArrayDesc* const arrays[2] = {&out, by_value ? &out : &src};
  g.loop = make_loop<2>(arrays);
  g.out = out.data;
  g.src = by_value ? nullptr : src.data;
  if (by_value) std::memcpy(g.value, src.data, (size_t)item);
  const bool out_contiguous = g.loop.contiguous(0, item);
  if (!by_value && out_contiguous && g.loop.contiguous(1, item)) {  // a plain copy
    GF_CUDA_CHECK(cudaMemcpyAsync(out.data, src.data, (size_t)(g.loop.size * item), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  RunCopyArgs runs{};
  if (!by_value && plan_run_copy(g.loop, out.data, src.data, item, runs))  // inner runs, no per-element decode
    return launch_run_copy_any(runs, item, stream);
  if (by_value && out_contiguous && reinterpret_cast<uintptr_t>(out.data) % 16 == 0) {
    uint4 pattern;
    for (int k = 0; k < 16; ++k) reinterpret_cast<unsigned char*>(&pattern)[k] = g.value[k % item];
    const int64_t vectors = g.loop.size * item / 16;
    if (vectors) {
      fill_vector<<<loop_blocks(vectors), kLoopThreads, 0, stream>>>(reinterpret_cast<uint4*>(out.data), vectors,
                                                                     pattern);
      GF_CUDA_CHECK_LAUNCH();
    }
    const int64_t done = vectors * 16 / item;
    if (done == g.loop.size) return;
    g.out += done * item;  // the tail, element by element
    g.loop.size -= done;
  }
  launch_copy_any(g, item, stream);
}

void sum(const ArrayDesc& x, const std::vector<int>& axes, const ArrayDesc& out, intptr_t stream) {
  if (is_complex(x.dtype) || is_complex(out.dtype))
    throw std::invalid_argument("gpufilt.ops.sum takes bool, integer and float dtypes");
  const ReducePlan plan = plan_reduction(x, axes, out);
  if (plan.outputs == 0) return;
  dispatch_real_or_bfloat16<SumLaunch>(x.dtype, plan, x, out, as_stream(stream));
}

void gather(const ArrayDesc& source, const ArrayDesc& index, int axis, const ArrayDesc& out, intptr_t stream) {
  const GatherPlan p = plan_gather(source, index, axis, out);
  if (out.size() == 0) return;
  require_aligned(source, "source");
  require_aligned(out, "out");
  GatherRunArgs runs{};
  if (plan_gather_runs(p, source, index, axis, out, runs))
    return dispatch_real_dtype<GatherLaunch>(index.dtype, runs, itemsize(out.dtype), as_stream(stream));
  GatherArgs g{};
  const ArrayDesc* const arrays[3] = {&out, &p.source, &p.index};
  g.loop = make_loop<3>(arrays);
  g.out = out.data;
  g.source = source.data;
  g.index = index.data;
  g.axis_length = p.axis_length;
  g.axis_stride = p.axis_stride;
  g.error = range_error_slot();
  dispatch_real_dtype<GatherLaunch>(index.dtype, g, itemsize(out.dtype), as_stream(stream));
}


}  // namespace gpufilt::cuda
