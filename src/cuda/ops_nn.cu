// CUDA kernels of the neural-network ops (core/ops_nn.hpp shares their math
// and row geometry with the CPU).
//
// Pointwise ops (relu, sigmoid, their gradients) are memory-bound: arrays
// that merge into one contiguous, 16-byte aligned row take 16-byte loads and
// stores in a grid-stride loop; anything else one element per thread.
//
// Row ops (softmax, log_softmax, cross-entropy and its gradient) give each
// row a group of G threads. Unit-stride rows of 65 to 8192 elements (4096
// float64) are held in registers by a warp (up to 1024 elements) or the
// whole block (row_held_kernel): read from memory once, max and sum reduced
// by shuffles (and shared memory across warps), written from registers.
// Other rows take row_kernel: G = 256 for longer rows, 8 for rows of up to
// 64, 1 when rows run along a strided axis (neighbouring threads then read
// neighbouring rows, which is what coalesces); a group makes one pass over
// its row for the online max and sum (merged across the group with
// shuffles), then one pass writing the result. The loss of index labels on
// many unit-stride, aligned rows needs no output row: a warp streams each
// row once (cross_entropy_stream). The cross-entropy gradient never stores
// the softmax. The mean loss is reduced per block, then by one
// block, in a fixed order: the same inputs give the same bits.
//
// Out-of-range index labels: no host wait is allowed inside a call, so the
// kernel cannot raise. It never reads through a bad label; the row's loss and
// gradient become NaN (visible in the result) and the first bad label goes to
// the process-wide record of range_error.cuh.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "core/ops_nn.hpp"
#include "cuda/api.hpp"
#include "cuda/check.cuh"
#include "cuda/range_error.cuh"

namespace gpufilt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSM = 8;  // 2048 resident threads per SM at 256 threads a block

// ---------------------------------------------------------- element access

template <DType T> struct Elem;
// The half-width conversions are core/dtype.hpp's, not cuda_fp16's: those
// hand ptxas the 16-bit results it miscompiles in st's byte stores.
template <> struct Elem<DType::Float16> {
  using S = uint16_t;
  static __device__ __forceinline__ float to(S b) { return half_bits_to_float(b); }
  static __device__ __forceinline__ S from(float v) { return float_to_half_bits(v); }
};
template <> struct Elem<DType::BFloat16> {
  using S = uint16_t;
  static __device__ __forceinline__ float to(S b) { return bfloat16_bits_to_float(b); }
  static __device__ __forceinline__ S from(float v) { return float_to_bfloat16_bits(v); }
};
template <> struct Elem<DType::Float32> {
  using S = float;
  static __device__ __forceinline__ float to(S v) { return v; }
  static __device__ __forceinline__ S from(float v) { return v; }
};
template <> struct Elem<DType::Float64> {
  using S = double;
  static __device__ __forceinline__ double to(S v) { return v; }
  static __device__ __forceinline__ S from(double v) { return v; }
};

// A typed access when `aligned`; bytes otherwise (a misaligned typed access
// would kill the context).
template <DType T> __device__ __forceinline__ acc_t<T> ld(const char* p, bool aligned) {
  typename Elem<T>::S v;
  if (aligned) v = *reinterpret_cast<const typename Elem<T>::S*>(p);
  else copy_element(&v, p, sizeof(v));
  return Elem<T>::to(v);
}
template <DType T> __device__ __forceinline__ void st(char* p, acc_t<T> a, bool aligned) {
  const typename Elem<T>::S v = Elem<T>::from(a);
  if (aligned) *reinterpret_cast<typename Elem<T>::S*>(p) = v;
  else copy_element(p, &v, sizeof(v));
}

// 16 bytes of elements, loaded or stored at once.
template <DType T> union Chunk {
  static constexpr int kSize = 16 / sizeof(typename Elem<T>::S);
  uint4 raw;
  typename Elem<T>::S e[kSize];
};

// Dtypes the kernels are instantiated for; `f` gets a DType constant.
template <class F> void dispatch_float(DType t, F f) {
  switch (t) {
    case DType::Float16: return f(std::integral_constant<DType, DType::Float16>{});
    case DType::BFloat16: return f(std::integral_constant<DType, DType::BFloat16>{});
    case DType::Float32: return f(std::integral_constant<DType, DType::Float32>{});
    case DType::Float64: return f(std::integral_constant<DType, DType::Float64>{});
    default: throw std::invalid_argument(std::string("dtype ") + dtype_name(t) + " is not a float dtype");
  }
}

__device__ double load_scalar(const char* p, DType t) {
  switch (t) {
    case DType::Float16: return ld<DType::Float16>(p, false);
    case DType::BFloat16: return ld<DType::BFloat16>(p, false);
    case DType::Float32: return ld<DType::Float32>(p, false);
    default: return ld<DType::Float64>(p, false);
  }
}

int grid_size(int64_t work_items) {
  return (int)std::max<int64_t>(1, std::min<int64_t>(work_items, (int64_t)multiprocessors() * kBlocksPerSM));
}

// Whether every float array of `r` (slots 0 and 2, and 1 unless it holds
// index labels) has all its rows starting on a multiple of `alignment` bytes
// and `step` apart within a row (0: only each element's own alignment).
bool rows_aligned(const Rows& r, int64_t alignment, int64_t step) {
  const int64_t item = itemsize(r.dtype);
  for (int k = 0; k < kRowArrays; ++k) {
    if (!r.data[k] || (k == 1 && r.index_labels)) continue;
    if (reinterpret_cast<uintptr_t>(r.data[k]) % alignment) return false;
    if (step ? r.step[k] != step && r.length > 1 : r.step[k] % item) return false;
    for (int d = 0; d < r.ndim; ++d)
      if (r.strides[k][d] % alignment) return false;
  }
  return true;
}

// --------------------------------------------------------------- pointwise

// One contiguous row, every array 16-byte aligned: 16-byte accesses.
template <DType T, Pointwise Op>
__global__ void __launch_bounds__(kThreads) pointwise_vector(const char* x, const char* grad, char* out, int64_t n) {
  using A = acc_t<T>;
  constexpr int V = Chunk<T>::kSize;
  const int64_t first = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
  const int64_t chunks = n / V;
  for (int64_t i = first; i < chunks; i += stride) {
    Chunk<T> xv, gv, ov;
    xv.raw = reinterpret_cast<const uint4*>(x)[i];
    if constexpr (takes_grad(Op)) gv.raw = reinterpret_cast<const uint4*>(grad)[i];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const A g = takes_grad(Op) ? Elem<T>::to(gv.e[k]) : A(0);
      ov.e[k] = Elem<T>::from(pointwise_apply<Op>(Elem<T>::to(xv.e[k]), g));
    }
    reinterpret_cast<uint4*>(out)[i] = ov.raw;
  }
  const int64_t item = sizeof(typename Elem<T>::S);
  for (int64_t i = chunks * V + first; i < n; i += stride) {
    const A g = takes_grad(Op) ? ld<T>(grad + i * item, true) : A(0);
    st<T>(out + i * item, pointwise_apply<Op>(ld<T>(x + i * item, true), g), true);
  }
}

// Any layout: one element per thread, rows located by index arithmetic.
template <DType T, Pointwise Op>
__global__ void __launch_bounds__(kThreads) pointwise_strided(Rows r, bool aligned) {
  using A = acc_t<T>;
  const int64_t n = r.count * r.length;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t row = i / r.length, j = i - row * r.length;
    int64_t off[kRowArrays];
    r.locate(row, off);
    const A g = takes_grad(Op) ? ld<T>(r.data[1] + off[1] + j * r.step[1], aligned) : A(0);
    const A y = pointwise_apply<Op>(ld<T>(r.data[0] + off[0] + j * r.step[0], aligned), g);
    st<T>(r.data[2] + off[2] + j * r.step[2], y, aligned);
  }
}

template <DType T, Pointwise Op>
void launch_pointwise(const Rows& r, cudaStream_t stream) {
  const int64_t n = r.count * r.length, item = itemsize(r.dtype);
  if (r.count == 1 && rows_aligned(r, 16, item)) {
    const int64_t chunks = (n + Chunk<T>::kSize - 1) / Chunk<T>::kSize;
    pointwise_vector<T, Op><<<grid_size((chunks + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        r.data[0], r.data[1], r.data[2], n);
  } else {
    pointwise_strided<T, Op><<<grid_size((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        r, rows_aligned(r, item, 0));
  }
  GF_CUDA_CHECK_LAUNCH();
}

// --------------------------------------------------------------------- rows

struct RowArgs {
  RowOp op;
  bool aligned;      // every float element takes one access of its own size
  bool vectorized;   // rows unit-stride and 16-byte aligned in every float array
  LossScale scale;   // CrossEntropyGrad: the upstream gradient
  double inv_rows;   // 1 / rows.count
  double* partials;  // CrossEntropy: one loss sum per block
  RangeErrorSlot* bad_label;  // CrossEntropy and its gradient with index labels
};

// For the elements j of a row this lane owns: f(j, x_j, p_j) (p_j = 0
// unless with_p), stored to out_j when Write. 16-byte accesses when the rows
// allow, element accesses for the rest.
template <bool Write, DType T, int G, class F>
__device__ __forceinline__ void for_row(const Rows& r, const RowArgs& a, const char* x, const char* p, char* o,
                                        bool with_p, int lane, F f) {
  using A = acc_t<T>;
  int64_t j0 = lane;
  if (a.vectorized) {
    constexpr int V = Chunk<T>::kSize;
    const int64_t chunks = r.length / V;
    for (int64_t c = lane; c < chunks; c += G) {
      Chunk<T> xv, pv, ov;
      xv.raw = reinterpret_cast<const uint4*>(x)[c];
      if (with_p) pv.raw = reinterpret_cast<const uint4*>(p)[c];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const A pk = with_p ? Elem<T>::to(pv.e[k]) : A(0);
        if constexpr (Write) ov.e[k] = Elem<T>::from(f(c * V + k, Elem<T>::to(xv.e[k]), pk));
        else f(c * V + k, Elem<T>::to(xv.e[k]), pk);
      }
      if constexpr (Write) reinterpret_cast<uint4*>(o)[c] = ov.raw;
    }
    j0 += chunks * V;
  }
  for (int64_t j = j0; j < r.length; j += G) {
    const A pj = with_p ? ld<T>(p + j * r.step[1], a.aligned) : A(0);
    if constexpr (Write) st<T>(o + j * r.step[2], f(j, ld<T>(x + j * r.step[0], a.aligned), pj), a.aligned);
    else f(j, ld<T>(x + j * r.step[0], a.aligned), pj);
  }
}

template <bool WithMass, class A>
__device__ __forceinline__ RowStats<A> shuffle_xor(const RowStats<A>& s, int m) {
  RowStats<A> o;
  o.max = __shfl_xor_sync(0xffffffffu, s.max, m);
  o.sum = __shfl_xor_sync(0xffffffffu, s.sum, m);
  if constexpr (WithMass) {
    o.mass = __shfl_xor_sync(0xffffffffu, s.mass, m);
    o.shifted = __shfl_xor_sync(0xffffffffu, s.shifted, m);
  }
  return o;
}

// Merges the stats of the G lanes of a group; every lane gets the result.
// Called by every thread of the block (shuffles and barriers are uniform).
template <int G, bool WithMass, class A>
__device__ __forceinline__ void group_merge(RowStats<A>& s, RowStats<A>* shared) {
  if constexpr (G > 1) {
#pragma unroll
    for (int m = (G < 32 ? G : 32) / 2; m > 0; m /= 2) s.merge(shuffle_xor<WithMass>(s, m));
  }
  if constexpr (G > 32) {
    if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = s;
    __syncthreads();
    s = shared[0];
    for (int w = 1; w < G / 32; ++w) s.merge(shared[w]);
    __syncthreads();
  }
}

// Sum of `v` over the block, in thread 0 (fixed order). Every thread calls.
__device__ double block_sum(double v, double* shared) {
  for (int m = 16; m > 0; m /= 2) v += __shfl_down_sync(0xffffffffu, v, m);
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0)
    for (int w = 0; w < (int)blockDim.x / 32; ++w) total += shared[w];
  __syncthreads();
  return total;
}

__device__ __forceinline__ bool label_ok(int64_t label, int64_t classes) { return label >= 0 && label < classes; }

template <DType T, int G>
__global__ void __launch_bounds__(kThreads) row_kernel(Rows r, RowArgs a) {
  using A = acc_t<T>;
  constexpr int kGroups = kThreads / G;
  __shared__ alignas(16) unsigned char shared_raw[sizeof(RowStats<A>) * (kThreads / 32)];
  RowStats<A>* shared = reinterpret_cast<RowStats<A>*>(shared_raw);
  const int lane = threadIdx.x % G, group = threadIdx.x / G;
  const bool probabilities = !r.index_labels && (a.op == RowOp::CrossEntropy || a.op == RowOp::CrossEntropyGrad);
  A scale = A(0);
  if (a.op == RowOp::CrossEntropyGrad)
    scale = (A)((a.scale.data ? load_scalar(a.scale.data, a.scale.dtype) : a.scale.value) * a.inv_rows);
  double loss_sum = 0.0;

  // The loop bound is uniform across the block, so that every thread takes
  // part in every shuffle and barrier; rows past the end are skipped.
  for (int64_t first = (int64_t)blockIdx.x * kGroups; first < r.count; first += (int64_t)gridDim.x * kGroups) {
    const int64_t row = first + group;
    const bool valid = row < r.count;
    int64_t off[kRowArrays] = {};
    if (valid) r.locate(row, off);
    const char* x = r.data[0] + off[0];
    const char* p = r.data[1] + off[1];
    char* o = r.data[2] + off[2];

    BlockedRowStats<A> lane_stats;
    RowStats<A> s;
    if (a.op == RowOp::CrossEntropy && probabilities) {
      if (valid)
        for_row<false, T, G>(r, a, x, p, o, true, lane, [&](int64_t, A xv, A pv) { lane_stats.add(xv, pv); });
      s = lane_stats.result();
      group_merge<G, true>(s, shared);
    } else {
      if (valid)
        for_row<false, T, G>(r, a, x, p, o, false, lane, [&](int64_t, A xv, A) { lane_stats.add(xv); });
      s = lane_stats.result();
      group_merge<G, false>(s, shared);
    }
    if (!valid) continue;

    const A inv_sum = A(1) / s.sum;
    switch (a.op) {
      case RowOp::Softmax:
        for_row<true, T, G>(r, a, x, p, o, false, lane,
                            [&](int64_t, A xv, A) { return exp_of(xv - s.max) * inv_sum; });
        break;
      case RowOp::LogSoftmax: {
        const A log_sum = log_of(s.sum);  // (x - max) - log(sum): see SoftmaxCpu
        for_row<true, T, G>(r, a, x, p, o, false, lane,
                            [&](int64_t, A xv, A) { return (xv - s.max) - log_sum; });
        break;
      }
      case RowOp::CrossEntropy:
        if (lane != 0) break;
        if (probabilities) {
          loss_sum += (double)s.probability_loss();
        } else {
          const int64_t label = load_label(p, r.label_dtype);
          if (label_ok(label, r.length)) {
            loss_sum += (double)s.index_loss(ld<T>(x + label * r.step[0], a.aligned));
          } else {
            loss_sum += (double)NAN;
            record_range_error(a.bad_label, RangeErrorKind::Label, label, r.length);
          }
        }
        break;
      case RowOp::CrossEntropyGrad: {
        const int64_t label = probabilities ? 0 : load_label(p, r.label_dtype);
        const bool ok = probabilities || label_ok(label, r.length);
        if (!ok && lane == 0) record_range_error(a.bad_label, RangeErrorKind::Label, label, r.length);
        const A bad = ok ? A(0) : A(NAN);  // NaN marks the row of a bad label
        for_row<true, T, G>(r, a, x, p, o, probabilities, lane, [&](int64_t j, A xv, A pv) {
          const A target = probabilities ? pv : A(j == label);
          return (exp_of(xv - s.max) * inv_sum - target) * scale + bad;
        });
        break;
      }
    }
  }
  if (a.op == RowOp::CrossEntropy) {
    const double total = block_sum(loss_sum, reinterpret_cast<double*>(shared_raw));
    if (threadIdx.x == 0) a.partials[blockIdx.x] = total;
  }
}

// ------------------------------------------------- rows held in registers
//
// A row that fits is read from memory once: its group of G threads (a warp,
// or the whole block) holds it in registers, V 16-byte chunks' worth of
// elements a thread, and the max, the sum and the output all come from
// there. Vectorized rows: chunk c of the row is the thread's chunk c / G of
// lane c % G; other unit-stride rows: element j is its element j / G of lane
// j % G (neighbouring lanes, neighbouring elements: coalesced).

// The most chunks a thread holds: 32 elements of 16 or 32 bits (held as
// float), 16 of 64: 32 or 64 registers, rows up to 8192 elements (4096
// float64) with 256 threads, while at least two blocks fit on an SM.
template <DType T> constexpr int max_held() { return sizeof(typename Elem<T>::S) == 2 ? 4 : 8; }

template <DType T, int G, int V> struct Held {
  using A = acc_t<T>;
  static constexpr int K = Chunk<T>::kSize, N = V * K;

  // The index in the row of this lane's element n (int: held rows are short).
  static __device__ __forceinline__ int index(int n, int lane, bool vectorized) {
    return vectorized ? ((n / K) * G + lane) * K + n % K : n * G + lane;
  }

  // v[n] = element index(n) of the row at `base` (0 past the row's end).
  static __device__ __forceinline__ void load(A (&v)[N], const char* base, int64_t step, int length,
                                              const RowArgs& a, int lane) {
    if (a.vectorized) {
      const int full = length / K;  // chunks wholly inside the row
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const int c = i * G + lane;
        if (c < full) {
          Chunk<T> chunk;
          chunk.raw = reinterpret_cast<const uint4*>(base)[c];
#pragma unroll
          for (int k = 0; k < K; ++k) v[i * K + k] = Elem<T>::to(chunk.e[k]);
        } else {
#pragma unroll
          for (int k = 0; k < K; ++k) {
            const int j = c * K + k;
            v[i * K + k] = j < length ? ld<T>(base + (int64_t)j * step, true) : A(0);
          }
        }
      }
    } else {
#pragma unroll
      for (int n = 0; n < N; ++n) {
        const int j = n * G + lane;
        v[n] = j < length ? ld<T>(base + (int64_t)j * step, a.aligned) : A(0);
      }
    }
  }

  // The row at `base` = v (the elements inside the row only).
  static __device__ __forceinline__ void store(const A (&v)[N], char* base, int64_t step, int length,
                                               const RowArgs& a, int lane) {
    if (a.vectorized) {
      const int full = length / K;
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const int c = i * G + lane;
        if (c < full) {
          Chunk<T> chunk;
#pragma unroll
          for (int k = 0; k < K; ++k) chunk.e[k] = Elem<T>::from(v[i * K + k]);
          reinterpret_cast<uint4*>(base)[c] = chunk.raw;
        } else {
#pragma unroll
          for (int k = 0; k < K; ++k) {
            const int j = c * K + k;
            if (j < length) st<T>(base + (int64_t)j * step, v[i * K + k], true);
          }
        }
      }
    } else {
#pragma unroll
      for (int n = 0; n < N; ++n) {
        const int j = n * G + lane;
        if (j < length) st<T>(base + (int64_t)j * step, v[n], a.aligned);
      }
    }
  }
};

// NaN never wins (as in RowStats::add, it turns the sum NaN instead).
struct MaxOf {
  template <class A> __device__ __forceinline__ A operator()(A a, A b) const { return b > a ? b : a; }
};
struct SumOf {
  template <class A> __device__ __forceinline__ A operator()(A a, A b) const { return a + b; }
};

// `op` over the G lanes of a group (G = 32 or the block); every lane gets
// the same bits (a butterfly: each pair combines the same two values).
// Called by every thread of the group (the whole block when G > 32).
template <int G, class A, class Op>
__device__ __forceinline__ A group_reduce(A v, A* shared, Op op) {
#pragma unroll
  for (int m = 16; m > 0; m /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, m));
  if constexpr (G > 32) {
    if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
    __syncthreads();
    v = shared[0];
#pragma unroll
    for (int w = 1; w < G / 32; ++w) v = op(v, shared[w]);
    __syncthreads();  // shared is free again for the next reduction
  }
  return v;
}

// The row ops on rows held in registers; the same math as row_kernel with
// the exact max known before the sum: sum exp(x - max), an element equal to
// the max counting 1 (RowStats::rescale: rows of -inf or +inf).
template <DType T, RowOp Op, int G, int V>
__global__ void __launch_bounds__(kThreads) row_held_kernel(Rows r, RowArgs a) {
  using H = Held<T, G, V>;
  using A = acc_t<T>;
  constexpr int kGroups = kThreads / G;
  constexpr bool kCrossEntropy = Op == RowOp::CrossEntropy || Op == RowOp::CrossEntropyGrad;
  __shared__ A shared[kThreads / 32];
  __shared__ double loss_shared[kThreads / 32];
  const int lane = threadIdx.x % G;
  const int length = (int)r.length;  // at most kThreads * max_held * 16 bytes
  const bool probabilities = kCrossEntropy && !r.index_labels;
  A scale = A(0);
  if constexpr (Op == RowOp::CrossEntropyGrad)
    scale = (A)((a.scale.data ? load_scalar(a.scale.data, a.scale.dtype) : a.scale.value) * a.inv_rows);
  double loss_sum = 0.0;

  // `first` is uniform across the block; a group past the last row is a
  // whole warp (G = 32), which skips the row and its shuffles together.
  for (int64_t first = (int64_t)blockIdx.x * kGroups; first < r.count; first += (int64_t)gridDim.x * kGroups) {
    const int64_t row = first + threadIdx.x / G;
    if (row >= r.count) continue;
    int64_t off[kRowArrays];
    r.locate(row, off);
    const char* x = r.data[0] + off[0];
    const char* p = r.data[1] + off[1];
    char* o = r.data[2] + off[2];

    A v[H::N];
    H::load(v, x, r.step[0], length, a, lane);
    A max = -INFINITY;
#pragma unroll
    for (int n = 0; n < H::N; ++n)
      if (H::index(n, lane, a.vectorized) < length && v[n] > max) max = v[n];
    max = group_reduce<G>(max, shared, MaxOf{});
    // Softmax and the gradient keep exp(x - max) in v; the others keep x.
    constexpr bool kKeepExp = Op == RowOp::Softmax || Op == RowOp::CrossEntropyGrad;
    A sum = A(0);
#pragma unroll
    for (int n = 0; n < H::N; ++n) {
      if (H::index(n, lane, a.vectorized) >= length) continue;
      const A e = exp_of(v[n] - max);
      sum += v[n] == max ? A(1) : e;
      if constexpr (kKeepExp) v[n] = e;
    }
    sum = group_reduce<G>(sum, shared, SumOf{});

    if constexpr (Op == RowOp::Softmax) {
      const A inv_sum = A(1) / sum;
#pragma unroll
      for (int n = 0; n < H::N; ++n) v[n] *= inv_sum;
      H::store(v, o, r.step[2], length, a, lane);
    } else if constexpr (Op == RowOp::LogSoftmax) {
      const A log_sum = log_of(sum);  // (x - max) - log(sum): see SoftmaxCpu
#pragma unroll
      for (int n = 0; n < H::N; ++n) v[n] = (v[n] - max) - log_sum;
      H::store(v, o, r.step[2], length, a, lane);
    } else if constexpr (Op == RowOp::CrossEntropy) {
      if (probabilities) {
        // -sum p (x - max - log(sum)) = mass log(sum) - shifted.
        A q[H::N];
        H::load(q, p, r.step[1], length, a, lane);
        A mass = A(0), shifted = A(0);
#pragma unroll
        for (int n = 0; n < H::N; ++n) {
          if (H::index(n, lane, a.vectorized) >= length) continue;
          mass += q[n];
          shifted += q[n] * (v[n] - max);
        }
        mass = group_reduce<G>(mass, shared, SumOf{});
        shifted = group_reduce<G>(shifted, shared, SumOf{});
        if (lane == 0) loss_sum += (double)(mass * log_of(sum) - shifted);
      } else if (lane == 0) {
        const int64_t label = load_label(p, r.label_dtype);
        if (label_ok(label, r.length)) {
          loss_sum += (double)(log_of(sum) - (ld<T>(x + label * r.step[0], a.aligned) - max));
        } else {
          loss_sum += (double)NAN;
          record_range_error(a.bad_label, RangeErrorKind::Label, label, r.length);
        }
      }
    } else {  // CrossEntropyGrad
      const A inv_sum = A(1) / sum;
      if (probabilities) {
        A q[H::N];
        H::load(q, p, r.step[1], length, a, lane);
#pragma unroll
        for (int n = 0; n < H::N; ++n) v[n] = (v[n] * inv_sum - q[n]) * scale;
      } else {
        const int64_t label = load_label(p, r.label_dtype);
        const bool ok = label_ok(label, r.length);
        if (!ok && lane == 0) record_range_error(a.bad_label, RangeErrorKind::Label, label, r.length);
        const A bad = ok ? A(0) : A(NAN);  // NaN marks the row of a bad label
#pragma unroll
        for (int n = 0; n < H::N; ++n)
          v[n] = (v[n] * inv_sum - A(H::index(n, lane, a.vectorized) == label)) * scale + bad;
      }
      H::store(v, o, r.step[2], length, a, lane);
    }
  }
  if constexpr (Op == RowOp::CrossEntropy) {
    const double total = block_sum(loss_sum, loss_shared);
    if (threadIdx.x == 0) a.partials[blockIdx.x] = total;
  }
}

// out (0-d) = sum of the blocks' partial sums / rows, in a fixed order.
template <DType T>
__global__ void __launch_bounds__(kThreads) mean_kernel(const double* partials, int blocks, double inv_rows,
                                                       char* out, bool aligned) {
  __shared__ double shared[kThreads / 32];
  double v = 0.0;
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) v += partials[i];
  const double total = block_sum(v, shared);
  if (threadIdx.x == 0) st<T>(out, (acc_t<T>)(total * inv_rows), aligned);
}

// ----------------------------------- cross-entropy loss streamed by warps
//
// The loss of index labels writes no row, so a row needs neither to be held
// nor to be read twice: each warp streams its rows on its own, no barrier
// until the block's final loss sum. Per step a lane issues stream_chunks<T>
// 16-byte loads (32 lanes x 8 x 16 = 4 KB a warp in flight), then folds them
// into its running max and sum of exp(x - max) (rescaled once per step, so
// the sum's rounding grows with the steps, as BlockedRowStats' blocks); the
// lane whose chunk holds the label keeps that logit (the label is read with
// the row's first loads, not after the row as a dependent load); the lanes'
// stats merge by shuffles. Rows: unit stride, 16-byte aligned (vectorized),
// at least one chunk a lane, and kStreamMinRows of them at least (a warp a
// row leaves a GPU idle with few rows: those take the block-wide kernels).
constexpr int kStreamBlocksPerSM = 3;  // 24 warps an SM (registers up to 85): 96 KB in flight

// Chunks a lane loads per step: 8, but 4 for float64 (its doubles and
// double exp would not fit the registers with 8).
template <DType T> constexpr int stream_chunks() { return T == DType::Float64 ? 4 : 8; }
constexpr int64_t kStreamMinRows = 1024;

// RowStats::rescale(x, m) = exp(x - m), 1 where x == m, computed whole and
// then selected: the per-element branch of the ternary would split the
// step's straight-line code.
template <class A> __device__ __forceinline__ A rescale_select(A x, A m) {
  const A e = exp_of(x - m);  // NaN for -inf - -inf: replaced below
  return x == m ? A(1) : e;
}

template <DType T>
__global__ void __launch_bounds__(kThreads, kStreamBlocksPerSM) cross_entropy_stream(Rows r, RowArgs a) {
  using A = acc_t<T>;
  constexpr int K = Chunk<T>::kSize, U = stream_chunks<T>(), kWarps = kThreads / 32;
  __shared__ double loss_shared[kWarps];
  const int lane = threadIdx.x % 32;
  const int64_t full = r.length / K, tail = r.length - full * K;  // whole chunks; elements after them
  const int64_t item = sizeof(typename Elem<T>::S);
  double loss_sum = 0.0;
  for (int64_t row = (int64_t)blockIdx.x * kWarps + threadIdx.x / 32; row < r.count;
       row += (int64_t)gridDim.x * kWarps) {  // a whole warp takes or skips a row: its shuffles stay whole
    int64_t off[kRowArrays];
    r.locate(row, off);
    const char* x = r.data[0] + off[0];
    const int64_t label = load_label(r.data[1] + off[1], r.label_dtype);
    const bool ok = label_ok(label, r.length);
    const int64_t label_chunk = ok ? label / K : -1;
    const int label_k = ok ? (int)(label - label_chunk * K) : 0;
    A max = -INFINITY, sum = A(0), picked = A(0);
    bool mine = false;  // this lane holds the label's logit in `picked`
    for (int64_t c0 = lane; c0 < full; c0 += 32 * U) {
      Chunk<T> v[U];  // chunks past the row's whole ones read as zeros, then skipped
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t c = c0 + u * 32;
        v[u].raw = c < full ? reinterpret_cast<const uint4*>(x)[c] : make_uint4(0, 0, 0, 0);
      }
      A step_max = -INFINITY;
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (c0 + u * 32 < full)
#pragma unroll
          for (int k = 0; k < K; ++k) step_max = MaxOf{}(step_max, Elem<T>::to(v[u].e[k]));
      const A m = MaxOf{}(max, step_max);
      A step_sum = A(0);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (c0 + u * 32 >= full) continue;
#pragma unroll
        for (int k = 0; k < K; ++k) step_sum += rescale_select(Elem<T>::to(v[u].e[k]), m);
        if (c0 + u * 32 == label_chunk) {
#pragma unroll
          for (int k = 0; k < K; ++k)
            if (k == label_k) picked = Elem<T>::to(v[u].e[k]);
          mine = true;
        }
      }
      sum = sum * rescale_select(max, m) + step_sum;
      max = m;
    }
    if (lane < tail) {  // fewer than K elements after the whole chunks
      const int64_t j = full * K + lane;
      const A xv = ld<T>(x + j * item, true);
      RowStats<A> one;
      one.max = max;
      one.sum = sum;
      one.add(xv);
      max = one.max;
      sum = one.sum;
      if (j == label) {
        picked = xv;
        mine = true;
      }
    }
    RowStats<A> stats;
    stats.max = max;
    stats.sum = sum;
    group_merge<32, false>(stats, static_cast<RowStats<A>*>(nullptr));
    if (mine) loss_sum += (double)stats.index_loss(picked);
    if (!ok && lane == 0) {
      loss_sum += (double)NAN;
      record_range_error(a.bad_label, RangeErrorKind::Label, label, r.length);
    }
  }
  const double total = block_sum(loss_sum, loss_shared);
  if (threadIdx.x == 0) a.partials[blockIdx.x] = total;
}

// Whether the loss of `r` takes cross_entropy_stream.
bool streams_loss(const Rows& r, const RowArgs& a) {
  const int64_t k = 16 / itemsize(r.dtype);
  return r.index_labels && a.vectorized && r.length >= 32 * k && r.count >= kStreamMinRows;
}

int stream_blocks(const Rows& r) {
  constexpr int64_t kWarps = kThreads / 32;
  return (int)std::min<int64_t>((r.count + kWarps - 1) / kWarps, (int64_t)kStreamBlocksPerSM * multiprocessors());
}

// How a row job runs: `group` threads a row, and `held` chunks a thread
// when the row is held in registers (row_held_kernel), 0 for row_kernel.
struct RowPath {
  int group = 256, held = 0;
};

// See the file's opening comment. Unit-stride rows of 65 elements up to 256
// threads x max_held chunks are held: by a warp while 32 threads hold them,
// else by the block; held counts are powers of two.
template <DType T> RowPath row_path(const Rows& r) {
  constexpr int64_t K = Chunk<T>::kSize, kMax = max_held<T>();
  const bool unit_rows = r.step[0] == itemsize(r.dtype) || r.length == 1;
  if (!unit_rows && r.count >= 4096) return {1, 0};
  if (r.length <= 64) return {8, 0};
  if (unit_rows && r.length <= kThreads * kMax * K) {
    const int group = r.length <= 32 * kMax * K ? 32 : kThreads;
    int held = 1;
    while ((int64_t)group * held * K < r.length) held *= 2;
    return {group, held};
  }
  return {r.length <= 1024 ? 32 : 256, 0};
}

RowPath path_of(const Rows& r) {
  RowPath path;
  dispatch_float(r.dtype, [&](auto t) { path = row_path<decltype(t)::value>(r); });
  return path;
}

// The number of blocks each row kernel launch uses, for sizing the partial sums.
int row_blocks(const Rows& r) {
  const int groups = kThreads / path_of(r).group;
  return grid_size((r.count + groups - 1) / groups);
}

using RowKernel = void (*)(Rows, RowArgs);

template <DType T, RowOp Op> RowKernel held_kernel(const RowPath& path) {
  constexpr int kMax = max_held<T>();
  switch (path.group * 16 + path.held) {  // held < 16
    case 32 * 16 + 1: return row_held_kernel<T, Op, 32, 1>;
    case 32 * 16 + 2: return row_held_kernel<T, Op, 32, 2>;
    case 32 * 16 + 4: return row_held_kernel<T, Op, 32, 4>;
    case kThreads * 16 + 1:  // 16-bit rows of 1025 to 2048 elements
      if constexpr (kMax < 8) return row_held_kernel<T, Op, kThreads, 1>;
      break;
    case kThreads * 16 + 2: return row_held_kernel<T, Op, kThreads, 2>;
    case kThreads * 16 + 4: return row_held_kernel<T, Op, kThreads, 4>;
    case 32 * 16 + 8:
      if constexpr (kMax >= 8) return row_held_kernel<T, Op, 32, 8>;
      break;
    case kThreads * 16 + 8:
      if constexpr (kMax >= 8) return row_held_kernel<T, Op, kThreads, 8>;
      break;
  }
  throw std::logic_error("ops_nn: no held-row kernel for this row length");
}

template <DType T> RowKernel held_kernel(RowOp op, const RowPath& path) {
  switch (op) {
    case RowOp::Softmax: return held_kernel<T, RowOp::Softmax>(path);
    case RowOp::LogSoftmax: return held_kernel<T, RowOp::LogSoftmax>(path);
    case RowOp::CrossEntropy: return held_kernel<T, RowOp::CrossEntropy>(path);
    default: return held_kernel<T, RowOp::CrossEntropyGrad>(path);
  }
}

// A held kernel's grid: no more blocks than are resident at once (their
// registers allow fewer than kBlocksPerSM), so that no late partial wave
// leaves SMs idle at the end. At most row_blocks(r).
int resident_grid(RowKernel kernel, const Rows& r) {
  const int per_sm = resident_blocks_per_sm(reinterpret_cast<const void*>(kernel), kThreads);
  return std::max(1, std::min(row_blocks(r), multiprocessors() * std::max(per_sm, 1)));
}

// Launches the row job; returns its number of blocks (<= row_blocks(r)).
template <DType T>
int launch_rows(const Rows& r, const RowArgs& args, cudaStream_t stream) {
  const RowPath path = row_path<T>(r);
  int blocks = row_blocks(r);
  if (path.held) {
    const RowKernel kernel = held_kernel<T>(args.op, path);
    blocks = resident_grid(kernel, r);
    kernel<<<blocks, kThreads, 0, stream>>>(r, args);
  } else {
    switch (path.group) {
      case 1: row_kernel<T, 1><<<blocks, kThreads, 0, stream>>>(r, args); break;
      case 8: row_kernel<T, 8><<<blocks, kThreads, 0, stream>>>(r, args); break;
      case 32: row_kernel<T, 32><<<blocks, kThreads, 0, stream>>>(r, args); break;
      default: row_kernel<T, 256><<<blocks, kThreads, 0, stream>>>(r, args); break;
    }
  }
  GF_CUDA_CHECK_LAUNCH();
  return blocks;
}

RowArgs row_args(RowOp op, const Rows& r) {
  RowArgs a{};
  a.op = op;
  a.aligned = rows_aligned(r, itemsize(r.dtype), 0);
  a.vectorized = r.length > 1 && rows_aligned(r, 16, itemsize(r.dtype));
  a.inv_rows = 1.0 / (double)r.count;
  return a;
}

}  // namespace

void pointwise(Pointwise op, const Rows& rows, intptr_t stream) {
  if (!rows.count || !rows.length) return;
  const cudaStream_t s = as_stream(stream);
  dispatch_float(rows.dtype, [&](auto t) {
    constexpr DType T = decltype(t)::value;
    switch (op) {
      case Pointwise::Relu: return launch_pointwise<T, Pointwise::Relu>(rows, s);
      case Pointwise::ReluGrad: return launch_pointwise<T, Pointwise::ReluGrad>(rows, s);
      case Pointwise::Sigmoid: return launch_pointwise<T, Pointwise::Sigmoid>(rows, s);
      case Pointwise::SigmoidGrad: return launch_pointwise<T, Pointwise::SigmoidGrad>(rows, s);
    }
  });
}

void softmax(const Rows& rows, bool log, intptr_t stream) {
  if (!rows.count || !rows.length) return;
  const RowArgs args = row_args(log ? RowOp::LogSoftmax : RowOp::Softmax, rows);
  dispatch_float(rows.dtype, [&](auto t) { launch_rows<decltype(t)::value>(rows, args, as_stream(stream)); });
}

void cross_entropy(const Rows& rows, const ArrayDesc& loss, intptr_t stream) {
  const cudaStream_t s = as_stream(stream);
  RowArgs args = row_args(RowOp::CrossEntropy, rows);
  if (rows.index_labels) args.bad_label = range_error_slot();
  const bool streamed = rows.count && streams_loss(rows, args);
  const int most_blocks = !rows.count ? 0 : streamed ? stream_blocks(rows) : row_blocks(rows);
  CudaBackend backend(stream);
  std::unique_ptr<TempBuffer> partials = backend.allocate((int64_t)std::max(most_blocks, 1) * sizeof(double));
  args.partials = reinterpret_cast<double*>(partials->data);
  const bool out_aligned = reinterpret_cast<uintptr_t>(loss.data) % itemsize(loss.dtype) == 0;
  dispatch_float(rows.dtype, [&](auto t) {
    constexpr DType T = decltype(t)::value;
    int blocks = most_blocks;
    if (streamed) {
      cross_entropy_stream<T><<<blocks, kThreads, 0, s>>>(rows, args);
      GF_CUDA_CHECK_LAUNCH();
    } else if (blocks) {
      blocks = launch_rows<T>(rows, args, s);
    }
    // No rows: 0 * inf = NaN, as torch's mean of nothing.
    mean_kernel<T><<<1, kThreads, 0, s>>>(args.partials, blocks, blocks ? args.inv_rows : (double)NAN,
                                          loss.data, out_aligned);
    GF_CUDA_CHECK_LAUNCH();
  });
}

void cross_entropy_grad(const Rows& rows, const LossScale& grad, intptr_t stream) {
  if (!rows.count) return;
  RowArgs args = row_args(RowOp::CrossEntropyGrad, rows);
  args.scale = grad;
  if (rows.index_labels) args.bad_label = range_error_slot();
  dispatch_float(rows.dtype, [&](auto t) { launch_rows<decltype(t)::value>(rows, args, as_stream(stream)); });
}

}  // namespace gpufilt::cuda
