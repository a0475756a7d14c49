#pragma once
#include <limits>

#include "cuda/fused/launch.cuh"

namespace gpufilt::cuda::fused {

// ---- minimum and maximum passes of any size, at a cost that does not grow with it ----
//
// van Herk / Gil-Werman: the line is cut into blocks of `size` values; each
// value's extreme over the rest of its block (a suffix scan) and over the
// start of its block (a prefix scan) give any window's extreme from one of
// each, so an output costs about three comparisons and a few shared-memory
// accesses whatever the size (the long-pass buckets compare every tap: a
// box of 31 cost twice one of 17, and a box of 65 four times). Neither
// cupyx nor cuCIM does this. Where the buckets measured faster (along the
// last axis up to 33 taps, 8-bit and 16-bit columns up to 17) they take the
// pass (long_pass.cuh: buckets_take_extremes).
//
// Scipy's rule (a running value replaced only by a strictly smaller or
// larger one, from the window's first tap; the CPU backend's min_max_rows)
// gives: a window whose first tap is NaN gives that NaN; otherwise NaN
// loses to every number and the first of equal values (signed zeros) wins.
// That order is associative (extreme_of), so the scans may regroup the
// window: the suffix scan keeps a NaN first tap as it is (the "head" of a
// window), the combination takes it.

// What the passes hold values in, exactly: int32 for 8-bit and 16-bit
// integers (no conversion either way), float for float16 and float32, double
// for float64.
template <DType T>
using ExtremeValue =
    std::conditional_t<kSmallInteger<T>, int32_t, std::conditional_t<T == DType::Float64, double, float>>;

// The first of a and b (a before b) by scipy's order: NaN after every
// number, the earlier of equal values.
template <LineKind K, class V>
__device__ __forceinline__ V extreme_of(V a, V b) {
  const bool b_wins = K == LineKind::Minimum ? b < a : b > a;
  return b_wins || a != a ? b : a;
}

// The extreme of a window from its head (the suffix scan's value at its
// first tap) and the prefix scan's value at its last tap, in the next block.
template <LineKind K, class V>
__device__ __forceinline__ V window_extreme(V head, V prefix) {
  return head != head ? head : extreme_of<K>(head, prefix);
}

// The value at p as ExtremeValue<T> (read-only cache).
template <DType T>
__device__ __forceinline__ ExtremeValue<T> extreme_load(const char* p) {
  return as_acc<T, ExtremeValue<T>>(__ldg(reinterpret_cast<const typename storage<T>::type*>(p)));
}

// v, a value of T, stored at p.
template <DType T>
__device__ __forceinline__ void extreme_store(char* p, ExtremeValue<T> v) {
  using S = typename storage<T>::type;
  if constexpr (T == DType::Float16) *reinterpret_cast<S*>(p) = float_to_half_bits(v);
  else *reinterpret_cast<S*>(p) = (S)v;
}

// The suffix scan of the block of `w` values ending at ring slot `last`
// (slots kThreads apart, `slots` of them, wrapping), in place; each value's
// own where it is NaN (the head of a window). Out of line: it runs once a
// block, and the caller's loop is unrolled.
template <LineKind K, class V>
__device__ __noinline__ void suffix_scan_in_ring(V* ring, int last, int w, int slots, int stride) {
  V suffix = ring[last * stride];
  int s = last;
  for (int k = 1; k < w; ++k) {
    s = s == 0 ? slots - 1 : s - 1;
    V& slot = ring[s * stride];
    const V u = slot;
    suffix = extreme_of<K>(u, suffix);
    slot = u != u ? u : suffix;
  }
}

// Along an axis other than the last (stage 0; the launcher swaps stage 1
// in): a thread owns one position of the last axis (neighbouring threads
// neighbouring positions: coalesced loads and stores) and streams down a
// segment of the filtered axis, kBatch values loaded ahead at a time. Its
// last 2 * size values live in its own slots of a shared-memory ring
// (ring[slot][thread]: no bank conflicts, no barrier): when a block of
// `size` values is complete, its suffix scan replaces it there, and each
// window starting in it is completed by the running prefix of the next
// block.
struct ColumnExtremeGeometry {
  static constexpr int kThreads = 128;
  static constexpr int kSegment = 256;  // outputs a thread streams
  static constexpr int kBatch = 16;     // values a thread loads ahead
};

template <DType T, LineKind K>
__global__ void __launch_bounds__(ColumnExtremeGeometry::kThreads)
    column_extreme_kernel(const __grid_constant__ FusedArgs a) {
  using V = ExtremeValue<T>;
  using G = ColumnExtremeGeometry;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  V* ring = reinterpret_cast<V*>(shared_bytes) + threadIdx.x;  // slot s at ring[s * kThreads]
  const FusedPass& p = a.pass[0];
  const int w = p.taps, slots = 2 * w;
  const int64_t x = (int64_t)blockIdx.x * G::kThreads + threadIdx.x;
  if (x >= a.n[2]) return;  // no barrier below: each thread keeps to its own slots
  const int64_t first = (int64_t)blockIdx.y * G::kSegment, line = blockIdx.z;
  const int64_t n = a.n[0], step = a.in_step[0];
  const char* in = a.in + line * a.in_step[1] + x * a.in_step[2];
  char* out = a.out + line * a.out_step[1] + x * a.out_step[2] + first * a.out_step[0];
  const int64_t top = first - p.left;  // the input position of the segment's first tap
  const int outputs = (int)min((int64_t)G::kSegment, n - first);
  const int total = outputs + w - 1;    // values streamed
  // cval as T stores it (held_result), so that every value compared is one
  // of T: the extreme of values and the stored cval is the stored extreme of
  // values and cval, as storing is monotonic (for integers within the
  // dtype's range: extremes_fit).
  const V cval = held_result<T, V>(a.cval);
  auto load = [&](int t) -> V {
    const int64_t i = top + t;
    if (i >= 0 && i < n) return extreme_load<T>(in + i * step);
    const int64_t j = border_index(i, n, p.mode);
    return j < 0 ? cval : extreme_load<T>(in + j * step);
  };
  int here = 0;  // t's slot: t mod slots
  auto back = [&](int k) -> V& {  // the slot of t - k, for 0 <= k < slots
    const int s = here - k;
    return ring[(s < 0 ? s + slots : s) * G::kThreads];
  };
  V prefix = 0;  // of the current block's values so far
  int j = 0;     // t's place in its block
  V next[G::kBatch];
#pragma unroll
  for (int b = 0; b < G::kBatch; ++b) next[b] = b < total ? load(b) : V(0);
#pragma unroll 1
  for (int t0 = 0; t0 < total; t0 += G::kBatch) {
    V batch[G::kBatch];
#pragma unroll
    for (int b = 0; b < G::kBatch; ++b) batch[b] = next[b];
#pragma unroll
    for (int b = 0; b < G::kBatch; ++b) next[b] = t0 + G::kBatch + b < total ? load(t0 + G::kBatch + b) : V(0);
#pragma unroll
    for (int b = 0; b < G::kBatch; ++b) {
      const int t = t0 + b;
      if (t >= total) break;
      const V v = batch[b];
      back(0) = v;
      prefix = j == 0 ? v : extreme_of<K>(prefix, v);
      if (j == w - 1) suffix_scan_in_ring<K>(ring, here, w, slots, G::kThreads);  // a block complete
      if (t >= w - 1) {  // the window ending at t, which starts at t - (w - 1)
        const V head = back(w - 1);
        const V result = j == w - 1 ? head : window_extreme<K>(head, prefix);
        extreme_store<T>(out + (t - (w - 1)) * a.out_step[0], result);
      }
      if (++j == w) j = 0;
      if (++here == slots) here = 0;
    }
  }
}

// Along the last axis (stage 2): a block stages kRowsAtOnce rows of TX + size
// - 1 values in shared memory, runs the scans over their blocks of `size`
// (a thread a block), then stores TX outputs a row, coalesced; it marches
// down kRows rows.
struct RowExtremeGeometry {
  static constexpr int kThreads = 128;
  static constexpr int TX = 1024;        // outputs a staged row
  static constexpr int kRowsAtOnce = 4;  // rows staged together (scan blocks for every thread)
  static constexpr int kRows = 16;       // rows a block marches over
  // Threads scanning blocks `size` apart fall in different banks where the
  // size is odd; where it is even, a staged row is padded with a word every
  // 32 (pad_mask -1, else 0), which spreads them.
  static __device__ __forceinline__ int padded(int i, int pad_mask) { return i + ((i >> 5) & pad_mask); }
  static int row_stride(int size) { return TX + size + (TX + size) / 32 + 1; }
};

template <DType T, LineKind K>
__global__ void __launch_bounds__(RowExtremeGeometry::kThreads)
    row_extreme_kernel(const __grid_constant__ FusedArgs a, int row_stride) {
  using V = ExtremeValue<T>;
  using G = RowExtremeGeometry;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  V* heads = reinterpret_cast<V*>(shared_bytes);   // values, then their suffix scans
  V* prefixes = heads + G::kRowsAtOnce * row_stride;
  const FusedPass& p = a.pass[2];
  const int w = p.taps;
  const int64_t x0 = (int64_t)blockIdx.x * G::TX, row0 = (int64_t)blockIdx.y * G::kRows;
  const int64_t n_rows = a.n[0] * a.n[1], n = a.n[2];  // stages 0 and 1 flattened
  const int row_count = (int)min((int64_t)G::kRows, n_rows - row0);
  const int width = (int)min((int64_t)G::TX, n - x0);  // outputs a row
  const int staged = width + w - 1;
  const int blocks = (staged + w - 1) / w;  // scan blocks a row
  const int advance = G::kThreads % w;
  const int pad_mask = w % 2 == 0 ? -1 : 0;
  auto at = [&](int i) { return G::padded(i, pad_mask); };
  const V cval = held_result<T, V>(a.cval);  // as column_extreme_kernel's
#pragma unroll 1
  for (int r0 = 0; r0 < row_count; r0 += G::kRowsAtOnce) {
    const int rows = min(G::kRowsAtOnce, row_count - r0);
    for (int q = 0; q < rows; ++q) {
      const int64_t row = row0 + r0 + q, plane = row / a.n[1], line = row - plane * a.n[1];
      const char* in = a.in + plane * a.in_step[0] + line * a.in_step[1];
      V* values = heads + q * row_stride;
#pragma unroll 8
      for (int i = threadIdx.x; i < staged; i += G::kThreads) {
        const int64_t c = x0 - p.left + i;
        const int64_t k = c >= 0 && c < n ? c : border_index(c, n, p.mode);
        values[at(i)] = k < 0 ? cval : extreme_load<T>(in + k * a.in_step[2]);
      }
    }
    __syncthreads();
    // Block b of row q for task q * blocks + b, tasks kThreads apart.
    int q = 0, b = threadIdx.x;
    while (b >= blocks) b -= blocks, ++q;
    for (; q < rows; b += G::kThreads) {
      while (b >= blocks) b -= blocks, ++q;
      if (q >= rows) break;
      const int b0 = b * w, b1 = min(b0 + w, staged);
      V* values = heads + q * row_stride;
      V* prefix = prefixes + q * row_stride;
      V running = values[at(b0)];
      prefix[at(b0)] = running;
      for (int i = b0 + 1; i < b1; ++i) {
        running = extreme_of<K>(running, values[at(i)]);
        prefix[at(i)] = running;
      }
      running = values[at(b1 - 1)];
      for (int i = b1 - 2; i >= b0; --i) {
        const V u = values[at(i)];
        running = extreme_of<K>(u, running);
        values[at(i)] = u != u ? u : running;
      }
    }
    __syncthreads();
    for (int q = 0; q < rows; ++q) {
      const int64_t row = row0 + r0 + q, plane = row / a.n[1], line = row - plane * a.n[1];
      char* out = a.out + plane * a.out_step[0] + line * a.out_step[1] + x0 * a.out_step[2];
      const V* head = heads + q * row_stride;
      const V* prefix = prefixes + q * row_stride;
      for (int i = threadIdx.x, place = threadIdx.x % w; i < width; i += G::kThreads) {  // place: i % w
        const V result = place == 0 ? head[at(i)]
                                    : window_extreme<K>(head[at(i)], prefix[at(i + w - 1)]);
        extreme_store<T>(out + i * a.out_step[2], result);
        place += advance;
        if (place >= w) place -= w;
      }
    }
    __syncthreads();  // the rows are read before the next are staged
  }
}

// Whether the kernels take a pass with this cval: any for floats; for
// integers one within the dtype's range, where storing it is monotonic
// (stored_cval; out of range scipy wraps the extreme, not the cval).
template <DType T>
bool extremes_fit(const FusedPass& p, double cval) {
  if constexpr (kSmallInteger<T>) {
    using S = typename storage<T>::type;
    return p.mode != Mode::Constant ||
           (cval >= (double)std::numeric_limits<S>::min() && cval <= (double)std::numeric_limits<S>::max());
  }
  return true;
}

// Runs minimum or maximum pass `stage` of the plan with column_extreme_kernel
// or row_extreme_kernel; false where the grid or the device's shared memory
// cannot hold it, or extremes_fit does not.
template <DType T>
bool min_max_pass(FusedPlan plan, int stage, cudaStream_t stream) {
  using V = ExtremeValue<T>;
  FusedArgs& a = plan.args;
  if (!extremes_fit<T>(a.pass[stage], a.cval)) return false;
  const bool minimum = a.pass[stage].kind == LineKind::Minimum;
  const int size = a.pass[stage].taps;
  auto launch = [&](auto* kernel, dim3 grid, int threads, size_t shared, auto... args) {
    int device = 0, most = 0;
    GF_CUDA_CHECK(cudaGetDevice(&device));
    GF_CUDA_CHECK(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (shared > (size_t)most || resident_blocks_per_sm(reinterpret_cast<const void*>(kernel), threads, shared) == 0)
      return false;
    kernel<<<grid, threads, shared, stream>>>(a, args...);
    GF_CUDA_CHECK_LAUNCH();
    return true;
  };
  if (stage == 2) {
    using G = RowExtremeGeometry;
    const int64_t gy = (a.n[0] * a.n[1] + G::kRows - 1) / G::kRows;
    if (gy > kMaxGridYZ) return false;
    const dim3 grid((unsigned)((a.n[2] + G::TX - 1) / G::TX), (unsigned)gy);
    const int stride = G::row_stride(size);
    const size_t shared = 2 * G::kRowsAtOnce * (size_t)stride * sizeof(V);
    return minimum ? launch(row_extreme_kernel<T, LineKind::Minimum>, grid, G::kThreads, shared, stride)
                   : launch(row_extreme_kernel<T, LineKind::Maximum>, grid, G::kThreads, shared, stride);
  }
  using G = ColumnExtremeGeometry;
  dim3 grid;
  if (!column_grid(a, stage, G::kThreads, G::kSegment, grid)) return false;
  const size_t shared = 2 * (size_t)size * G::kThreads * sizeof(V);
  return minimum ? launch(column_extreme_kernel<T, LineKind::Minimum>, grid, G::kThreads, shared)
                 : launch(column_extreme_kernel<T, LineKind::Maximum>, grid, G::kThreads, shared);
}

}  // namespace gpufilt::cuda::fused
