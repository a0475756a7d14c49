// CUDA kernels of the array operations (core/ops_array.hpp): broadcasting
// copies and fills, sums over any axes, and checked gathers. Everything is
// enqueued on the caller's stream; temporaries come from cudaMallocAsync on
// it; nothing synchronises the host, so every call can be captured in a CUDA
// graph.
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

struct alignas(16) Word16 {
  uint64_t lo, hi;
};

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
  switch (item) {
    case 1: return launch_copy<uint8_t>(g, stream);
    case 2: return launch_copy<uint16_t>(g, stream);
    case 4: return launch_copy<uint32_t>(g, stream);
    case 8: return launch_copy<uint64_t>(g, stream);
    default: return launch_copy<Word16>(g, stream);
  }
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

// Grid over `outputs` blocks: x up to 65535 * y.
dim3 output_grid(int64_t outputs, int64_t x = 1) {
  const int64_t y = std::min<int64_t>(outputs, 65535), z = (outputs + y - 1) / y;
  return dim3((unsigned)x, (unsigned)y, (unsigned)z);
}

template <DType T>
struct SumLaunch {
  template <SumClass C>
  static void launch(const ReducePlan& p, const ArrayDesc& x, const ArrayDesc& out, cudaStream_t stream) {
    const bool rows = !p.column && p.reduced >= kRowMode;
    // Column chunks grow past kColumnChunk only to keep the grid's y under 65536.
    const int64_t chunk = rows ? kBlockChunk : std::max<int64_t>(kColumnChunk, (p.reduced + 65534) / 65535);
    const int64_t chunks = std::max<int64_t>(1, (p.reduced + chunk - 1) / chunk);
    Acc<C>* partial = nullptr;
    if (chunks > 1)
      GF_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&partial),
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
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess && chunks > 1) {
      const dim3 grid(std::min<int64_t>(p.outputs, 65535), (unsigned)((p.outputs + 65534) / 65535));
      sum_partials<C><<<grid, kSumThreads, 0, stream>>>(p, out.data, out.dtype, partial, chunks);
      err = cudaGetLastError();
    }
    if (partial) cudaFreeAsync(partial, stream);
    GF_CUDA_CHECK(err);
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

template <DType I>
struct GatherLaunch {
  template <class W>
  static void launch(const GatherArgs& g, cudaStream_t stream) {
    gather_kernel<I, W><<<loop_blocks(g.loop.size), kLoopThreads, 0, stream>>>(g);
    GF_CUDA_CHECK_LAUNCH();
  }
  static void run(const GatherArgs& g, int item, cudaStream_t stream) {
    switch (item) {
      case 1: return launch<uint8_t>(g, stream);
      case 2: return launch<uint16_t>(g, stream);
      case 4: return launch<uint32_t>(g, stream);
      case 8: return launch<uint64_t>(g, stream);
      default: return launch<Word16>(g, stream);
    }
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
