#pragma once
#include "cuda/fused/launch.cuh"
#include "cuda/fused/min_max.cuh"

namespace gpufilt::cuda::fused {

// ---- long single passes: along one axis of a 2-D or 3-D array ---------------------
//
// A pass alone (chains the fused tiles are not built for run pass by pass;
// most minima and maxima in min_max.cuh's kernels, whose cost does not grow
// with the size: buckets_take_extremes), of any length up to kMaxLongTaps, in the
// kernel built for the smallest
// bucket of kLongBuckets that holds it: a cost that follows the bucket, not
// a cliff at every length no kernel was built for. Along an axis other than
// the last, column_kernel: a thread owns one position of the last axis
// (neighbouring threads neighbouring positions: coalesced) and marches down
// the filtered axis over a segment of kSegment outputs, kChunk at a time,
// with the window of kChunk + TAPS - 1 inputs in registers; the next chunk's
// inputs are loaded while the current one is computed, so every warp keeps
// loads in flight all along its march instead of loading everything, then
// computing (ncu: that left the H100's DRAM 79% idle at 25% occupancy). Along
// the last axis, row_kernel: a block marches down rows the same way, each
// row staged (plus halo) in shared memory, where each thread computes four
// neighbouring outputs from values read as 16-byte vectors. column_kernel
// filters stage 0 of FusedArgs' axes and walks stage 1 (the launcher swaps
// them for a pass along stage 1): fixed indices keep the weights constant
// operands of the multiply-adds, not registers hoisted out of the march
// (which spilled); row_kernel filters stage 2.
// Whether the bucket kernels, rather than min_max_pass, run a minimum or
// maximum of `taps` (along the last axis or another): the one rule for the
// routing (LongPassKernels::run) and for which buckets are built with
// minima and maxima (with_kind's EXTREMES). Measured on the H200, one pass
// over a 512^3 volume (ms): along axis 0 or 1, float32,
// column_extreme_kernel 0.50-0.53 up to 31 taps where the buckets took
// 0.53-0.97, 0.83 at 65 where they took 1.93; uint16, maximum_filter up to
// 17 (three passes) 1.32-1.38 where the buckets' int32 columns took 1.24,
// 21-65 1.69-2.90 where they took 2.21-15.6. Along the last axis, float32,
// row_extreme_kernel 1.24-1.32 up to 31 where the buckets took 0.65-1.12,
// 1.56 at 65 where they took 2.05.
template <DType T>
constexpr bool buckets_take_extremes(bool last_axis, int taps) {
  return last_axis ? taps <= kLongBuckets[1] : kSmallInteger<T> && taps <= kLongBuckets[0];
}

template <int TAPS, class Acc>
struct ColumnGeometry {
  static constexpr int kThreads = 128;
  static constexpr int kChunk = sizeof(Acc) == 4 ? 8 : 4;  // outputs a step
  static constexpr int kSegment = 128;                     // outputs a thread: 1.25 reads an input (33 taps)
  // registers for the window (kChunk + TAPS - 1 values), without spills
  static constexpr int kMinBlocks = sizeof(Acc) == 4 && TAPS <= 33 ? 6 : 3;
};

template <DType T, int TAPS, class Acc>
__global__ void __launch_bounds__(ColumnGeometry<TAPS, Acc>::kThreads, ColumnGeometry<TAPS, Acc>::kMinBlocks)
    column_kernel(const __grid_constant__ FusedArgs a) {
  using S = typename storage<T>::type;
  using G = ColumnGeometry<TAPS, Acc>;
  constexpr int C = G::kChunk, W = C + TAPS - 1;
  const FusedPass& p = a.pass[0];
  const int64_t x = (int64_t)blockIdx.x * G::kThreads + threadIdx.x;
  if (x >= a.n[2]) return;
  const int64_t first = (int64_t)blockIdx.y * G::kSegment, line = blockIdx.z;
  const int64_t n = a.n[0], step = a.in_step[0];
  const char* in = a.in + line * a.in_step[1] + x * a.in_step[2];
  char* out = a.out + line * a.out_step[1] + x * a.out_step[2] + first * a.out_step[0];
  const int64_t top = first - p.left;  // the input position of window[0]
  // values[k] = the input at position i0 + k; the border rules only where
  // those positions leave the axis (a branch uniform across the warp).
  auto load = [&](int64_t i0, auto& values) {
    constexpr int K = sizeof(values) / sizeof(Acc);
    if (i0 >= 0 && i0 + K <= n) {
#pragma unroll
      for (int k = 0; k < K; ++k) values[k] = as_acc<T, Acc>(__ldg(reinterpret_cast<const S*>(in + (i0 + k) * step)));
    } else {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t i = border_index(i0 + k, n, p.mode);
        values[k] = i < 0 ? (Acc)a.cval : as_acc<T, Acc>(__ldg(reinterpret_cast<const S*>(in + i * step)));
      }
    }
  };
  Acc window[W];
  load(top, window);
  const int outputs = (int)min((int64_t)G::kSegment, n - first);
  with_kind<kEightBitFloat<T, Acc>, true, buckets_take_extremes<T>(false, TAPS)>(p, [&](auto kind) {
#pragma unroll 1
    for (int c0 = 0; c0 < outputs; c0 += C) {
      Acc next[C];
      if (c0 + C < outputs) load(top + c0 + W, next);
      Acc results[C];
      pass_results<T, TAPS, decltype(kind), Acc>(p, [&](int r, int k) { return window[r + k]; }, results);
#pragma unroll
      for (int r = 0; r < C; ++r) {
        if (c0 + r >= outputs) break;
        *reinterpret_cast<S*>(out + (c0 + r) * a.out_step[0]) = storage_of<T>(results[r]);
      }
#pragma unroll
      for (int k = 0; k < TAPS - 1; ++k) window[k] = window[k + C];
#pragma unroll
      for (int j = 0; j < C; ++j) window[TAPS - 1 + j] = next[j];
    }
  });
}

template <int TAPS, class Acc>
struct RowGeometry {
  static constexpr int kThreads = 128;
  static constexpr int kRows = 16;                         // rows a block marches over
  static constexpr int kQuad = 4;                          // outputs a thread computes a row
  static constexpr int TX = kThreads * kQuad;              // outputs a row
  static constexpr int HX = TX + TAPS - 1;
  static constexpr int kVec = 16 / (int)sizeof(Acc);
  static constexpr int kRowValues = (kQuad + TAPS - 1 + kVec - 1) / kVec * kVec;
  static constexpr int HXP = TX - kQuad + kRowValues;      // a staged row's length: the last quad's reads fit
  static constexpr int kLoads = (HX + kThreads - 1) / kThreads;  // staged values a thread loads a row
  static constexpr int kMinBlocks = sizeof(Acc) == 4 && TAPS <= 33 ? 6 : 3;  // registers without spills
  static_assert(TX % kQuad == 0 && HXP % kVec == 0, "aligned quads");
};

// A block owns TX columns of kRows rows and marches down them: while it
// computes one row from shared memory, the next row's values are in flight
// into registers, and are staged in the other half of a double buffer
// (one barrier a row). The columns' border rules are resolved once.
template <DType T, int TAPS, class Acc>
__global__ void __launch_bounds__(RowGeometry<TAPS, Acc>::kThreads, RowGeometry<TAPS, Acc>::kMinBlocks)
    row_kernel(const __grid_constant__ FusedArgs a) {
  using S = typename storage<T>::type;
  using G = RowGeometry<TAPS, Acc>;
  constexpr int HXP = G::HXP, Q = G::kQuad, L = G::kLoads;
  const FusedPass& p = a.pass[2];
  __shared__ __align__(16) Acc rows[2][HXP];
  const int64_t x0 = (int64_t)blockIdx.x * G::TX, row0 = (int64_t)blockIdx.y * G::kRows;
  const int64_t n_rows = a.n[0] * a.n[1];  // stages 0 and 1 flattened
  const int row_count = (int)min((int64_t)G::kRows, n_rows - row0);
  int64_t column[L];  // staged column threadIdx.x + j * kThreads: its input byte offset in a row, -1 for cval
#pragma unroll
  for (int j = 0; j < L; ++j) {
    const int64_t x = border_index(x0 - p.left + threadIdx.x + j * G::kThreads, a.n[2], p.mode);
    column[j] = x < 0 ? -1 : x * a.in_step[2];
  }
  auto staged = [&](int j) { return threadIdx.x + j * G::kThreads < G::HX; };
  Acc values[L];
  int64_t fetched_out = 0;  // the output byte offset of the row fetch loaded last
  auto fetch = [&](int64_t row) {
    const int64_t plane = row / a.n[1], line = row - plane * a.n[1];  // one division a row
    fetched_out = plane * a.out_step[0] + line * a.out_step[1];
    const char* in = a.in + plane * a.in_step[0] + line * a.in_step[1];
#pragma unroll
    for (int j = 0; j < L; ++j)
      if (staged(j))
        values[j] = column[j] < 0 ? (Acc)a.cval : as_acc<T, Acc>(__ldg(reinterpret_cast<const S*>(in + column[j])));
  };
  auto stash = [&](Acc* row) {
#pragma unroll
    for (int j = 0; j < L; ++j)
      if (staged(j)) row[threadIdx.x + j * G::kThreads] = values[j];
  };
  fetch(row0);
  stash(rows[0]);
  __syncthreads();

  const int tx = threadIdx.x * Q;
  const int64_t x = x0 + tx;
  with_kind<kEightBitFloat<T, Acc>, true, buckets_take_extremes<T>(true, TAPS)>(p, [&](auto kind) {
#pragma unroll 1
    for (int r = 0; r < row_count; ++r) {
      const int64_t out_row = fetched_out;  // row r's, before fetch moves on to row r + 1
      if (r + 1 < row_count) fetch(row0 + r + 1);
      if (x < a.n[2]) {
        Acc v[G::kRowValues];
        load_run<G::kRowValues, G::kVec>(rows[r & 1] + tx, v);
        Acc results[Q];
        pass_results<T, TAPS, decltype(kind), Acc>(p, [&](int i, int k) { return v[i + k]; }, results);
        store_results<T>(a.out + out_row + x * a.out_step[2], results, a.out_step[2], a.n[2] - x, a.run_stores);
      }
      if (r + 1 < row_count) stash(rows[(r + 1) & 1]);  // read last at row r - 1, before the barrier
      __syncthreads();
    }
  });
}

// Runs a single pass of up to kMaxLongTaps taps over a 2-D or 3-D array:
// minima and maxima with min_max_pass unless buckets_take_extremes, other
// passes with column_kernel or row_kernel (see there), built for the
// smallest bucket of kLongBuckets that holds it (pad_pass lays the pass out
// in it); false otherwise. Buckets of 65 taps only for sums in float: a
// window of 68 doubles spills.
template <DType T>
struct LongPassKernels {
  template <int TAPS, class Acc>
  static bool launch(FusedPlan plan, int stage, const ArrayDesc& out, cudaStream_t stream) {
    FusedArgs& a = plan.args;
    pad_pass(a.pass[stage], TAPS);
    if (stage == 2) {
      using G = RowGeometry<TAPS, Acc>;
      const int64_t gy = (a.n[0] * a.n[1] + G::kRows - 1) / G::kRows;
      if (gy > kMaxGridYZ) return false;
      a.run_stores = run_stores<T, G::kQuad>(a, out);
      row_kernel<T, TAPS, Acc><<<dim3((unsigned)((a.n[2] + G::TX - 1) / G::TX), (unsigned)gy), G::kThreads, 0,
                                stream>>>(a);
    } else {
      using G = ColumnGeometry<TAPS, Acc>;
      dim3 grid;
      if (!column_grid(a, stage, G::kThreads, G::kSegment, grid)) return false;
      column_kernel<T, TAPS, Acc><<<grid, G::kThreads, 0, stream>>>(a);
    }
    GF_CUDA_CHECK_LAUNCH();
    return true;
  }

  static bool run(const FusedPlan& plan, int stage, const ArrayDesc& out, cudaStream_t stream) {
    if constexpr (is_image_dtype(T)) {
      const LineKind kind = plan.args.pass[stage].kind;
      const int taps = plan.args.pass[stage].taps;
      if ((kind == LineKind::Minimum || kind == LineKind::Maximum) && !buckets_take_extremes<T>(stage == 2, taps))
        return min_max_pass<T>(plan, stage, stream);
      return with_accumulator<T>(plan, [&](auto acc) {
        using Acc = decltype(acc);
        if (taps <= kLongBuckets[0]) return launch<kLongBuckets[0], Acc>(plan, stage, out, stream);
        if (taps <= kLongBuckets[1]) return launch<kLongBuckets[1], Acc>(plan, stage, out, stream);
        if constexpr (std::is_same_v<Acc, float>) {
          if (taps <= kLongBuckets[2]) return launch<kLongBuckets[2], Acc>(plan, stage, out, stream);
        }
        return false;
      });
    }
    return false;
  }
};

template <DType T>
bool LongPassLauncher<T>::run(const FusedPlan& plan, int stage, const ArrayDesc& out, cudaStream_t stream) {
  return LongPassKernels<T>::run(plan, stage, out, stream);
}

}  // namespace gpufilt::cuda::fused
