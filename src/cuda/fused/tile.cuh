// fused_kernel, the general tile of the fused separable chains: up to three
// 1-D passes of a chain (core/separable.hpp), one per axis of a 2-D or 3-D
// array and in axis order, computed with one read of the input and one write
// of the output instead of a read and a write per pass.
//
// A block owns a tile of TY x TX output columns (the last two axes; a 2-D
// array has one row) and marches along axis 0, one plane per step:
//   1. the input plane the pass along axis 0 needs next is loaded for the
//      tile and its halo (ring[slot][column], the last taps0 planes kept);
//   2. pass 0 over the ring -> A[halo rows][halo columns]   (shared memory)
//   3. pass 1 over A's rows  -> B[rows][halo columns]
//   4. pass 2 over B's columns -> the output plane.
// Every intermediate is rounded to the output dtype exactly as the chain
// stores it between passes, the taps are summed in scipy's order, and the
// halo takes the boundary extension of each pass along its own axis: data
// summed in double (integers, float64) gets the pass-by-pass results to the
// last bit; float32 and float16 smoothing in float (see Arith). The next
// plane's loads are issued before the current plane is computed, to keep
// them in flight.
//
// Chains of three 9-tap passes summed in float take blocked_kernel, the same
// march with register-blocked passes (fused/blocked.cuh).
#pragma once
#include "cuda/fused/launch.cuh"
#include "cuda/fused/march.cuh"

namespace gpufilt::cuda::fused {

// TAPS > 0: every pass of the chain has exactly TAPS taps (see apply_pass).
// K: the kind every pass shares, or void (apply_pass_as). A kind switched on
// at run time costs branches at every result: ncu counted 22 branch and 18
// compare instructions an output of a 3-D uniform filter of size 3, a third
// of its instructions. Without the switch the kernel fits 64 registers (no
// spills): four blocks an SM instead of three (H100 512^3 float32: uniform
// 3 0.64 -> 0.59 ms, sobel 0.81 -> 0.73).
// INTEGER_HELD: values held in int32, summed in double (HeldOf).
template <DType T, int TAPS, bool NARROW, class K = void, bool INTEGER_HELD = false>
__global__ void __launch_bounds__(kThreads, std::is_void_v<K> ? 3 : 4) fused_kernel(const __grid_constant__ FusedArgs a) {
  using S = typename storage<T>::type;
  using Acc = AccumulatorOf<T, NARROW>;
  using Held = HeldOf<Acc, INTEGER_HELD>;
  const FusedPass &p0 = a.pass[0], &p1 = a.pass[1], &p2 = a.pass[2];
  const int HX = a.halo_x, TY = a.tile_y, columns = a.halo_y * HX;
  const int ring_len = max(p0.taps, 1);
  const Held cval = (Held)a.cval;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  Held* A = reinterpret_cast<Held*>(shared_bytes);  // [halo_y][HX]: pass 0, rounded
  Held* B = A + columns;                             // [TY][HX]: pass 1, rounded
  Held* ring = B + TY * HX;                          // [ring_len][columns]: input planes

  const int64_t y0 = (int64_t)blockIdx.y * TY, x0 = (int64_t)blockIdx.x * a.tile_x;
  const int64_t first = (int64_t)blockIdx.z * a.planes_per_block;
  const int steps = (int)min((int64_t)a.planes_per_block, a.n[0] - first);
  const ThreadMap m = map_thread(a, y0, x0);
  Held* const my_ring = ring + threadIdx.x;  // column j of slot s: my_ring[s * columns + j * kThreads]

  S next[kMaxColumns];
  // An all-cval plane (pass 0's constant mode) is stored as cval.
  auto put = [&](int slot, bool loaded) {
#pragma unroll
    for (int j = 0; j < kMaxColumns; ++j) {
      if (threadIdx.x + j * kThreads >= columns) break;
      my_ring[slot * columns + j * kThreads] = loaded ? as_acc<T, Held>(next[j]) : cval;
    }
  };
  for (int p = 0; p + 1 < ring_len; ++p) put(p, fetch_plane<T>(a, first, p, m.in_offset, columns, next));
  bool loaded = fetch_plane<T>(a, first, ring_len - 1, m.in_offset, columns, next);

  for (int s = 0; s < steps; ++s) {
    const int base = s % ring_len;  // slot of tap 0
    put(base == 0 ? ring_len - 1 : base - 1, loaded);
    if (s + 1 < steps) loaded = fetch_plane<T>(a, first, s + ring_len, m.in_offset, columns, next);

    // 2. pass 0 along the planes, for the thread's own columns of the ring
    int tap_slot[TAPS > 0 ? TAPS : 1];  // per tap: its slot's offset in the ring
    if constexpr (TAPS > 0) {
#pragma unroll
      for (int k = 0; k < TAPS; ++k) {
        const int slot = base + k < ring_len ? base + k : base + k - ring_len;
        tap_slot[k] = slot * columns;
      }
    }
#pragma unroll
    for (int j = 0; j < kMaxColumns; ++j) {
      if (threadIdx.x + j * kThreads >= columns) break;
      auto tap = [&](int k) {
        if constexpr (TAPS > 0) {
          return my_ring[tap_slot[k] + j * kThreads];
        } else {
          const int slot = base + k < ring_len ? base + k : base + k - ring_len;
          return my_ring[slot * columns + j * kThreads];
        }
      };
      const Held v = p0.taps ? kept_result<T, Held, K>(apply_pass_as<Acc, TAPS, K>(p0, tap)) : tap(0);
      A[threadIdx.x + j * kThreads] = (m.cval_rows >> j & 1u) ? cval : v;
    }
    __syncthreads();

    // 3. pass 1 along the rows; a constant-mode column halo is cval
#pragma unroll
    for (int i = 0; i < kMaxBEntries; ++i) {
      const int e = threadIdx.x + i * kThreads;
      if (e >= TY * HX) break;
      const Held* column = A + e;  // A[(ty + k) * HX + cx] = column[k * HX]
      Held v;
      if (m.cval_b >> i & 1u) v = cval;
      else if (p1.taps) v = kept_result<T, Held, K>(apply_pass_as<Acc, TAPS, K>(p1, [&](int k) { return column[k * HX]; }));
      else v = column[0];
      B[e] = v;
    }
    __syncthreads();

    // 4. pass 2 along the columns, stored
    char* plane = a.out + (first + s) * a.out_step[0];
#pragma unroll
    for (int i = 0; i < kMaxOutputs; ++i) {
      if (m.b_index[i] < 0) continue;
      const Held* row = B + m.b_index[i];
      const Acc v = p2.taps ? apply_pass_as<Acc, TAPS, K>(p2, [&](int k) { return row[k]; }) : as_sum<Acc>(row[0]);
      store_output<T>(plane + m.out_offset[i], v);
    }
    // No barrier here: A is next written after every thread has read it
    // (the barrier above), B after the next step's first barrier.
  }
}

// Box chains (every pass uniform, or every pass a minimum or a maximum) of
// float32, float16 and 8-bit and 16-bit integers held narrow that read only
// values of their dtype (FusedPlan::cval_is_value), TAPS taps a pass (0:
// known at run time), by fused_kernel with their kind fixed: no kind
// switched on at each output, no rounding between passes (kKeepsValues);
// false for other chains.
template <DType T, int TAPS>
bool launch_box_chain(const FusedPlan& plan, cudaStream_t stream) {
  constexpr bool narrow_float = T == DType::Float32 || T == DType::Float16;
  if constexpr (narrow_float || kSmallInteger<T>) {
    if (!(narrow_float ? plan.float_sums : plan.int32_chain) || !plan.cval_is_value) return false;
    switch (shared_box_kind(plan.args)) {
      case LineKind::Uniform: {
        constexpr bool unsigned_sums = T == DType::UInt8 || T == DType::UInt16;
        launch(fused_kernel<T, TAPS, true, KindOf<LineKind::Uniform, 0, unsigned_sums>>, plan, stream);
        return true;
      }
      case LineKind::Minimum: launch(fused_kernel<T, TAPS, true, KindOf<LineKind::Minimum>>, plan, stream); return true;
      case LineKind::Maximum: launch(fused_kernel<T, TAPS, true, KindOf<LineKind::Maximum>>, plan, stream); return true;
      default: break;
    }
  }
  return false;
}

// Chains held narrow (AccumulatorOf): float32/float16 summed in float,
// 8-bit and 16-bit integer chains of box filters and integer weights in
// int32; other 8-bit and 16-bit integer chains held in int32 and summed in
// double (HeldOf). Box chains of size 3 or a size known at run time
// (launch_box_chain), gaussians and derivatives with their kind fixed.
template <DType T, int TAPS>
void launch_fused(const FusedPlan& plan, cudaStream_t stream) {
  if constexpr (TAPS == 3) {
    if (launch_box_chain<T, TAPS>(plan, stream)) return;
  }
  constexpr bool narrow_float = T == DType::Float32 || T == DType::Float16;
  if constexpr (narrow_float || kSmallInteger<T>) {
    if (narrow_float ? plan.float_sums : plan.int32_chain) {
      if constexpr (kSmallInteger<T> && TAPS == 3) {  // sobel, prewitt: integer weights
        if (signed_pairs(plan.args))
          return launch(fused_kernel<T, 3, true, KindOf<LineKind::Correlate, kEitherSymmetry>>, plan, stream);
      }
      return launch(fused_kernel<T, TAPS, true>, plan, stream);
    }
  }
  if constexpr (kSmallInteger<T>) {
    if (plan.integer_held) {
      using Symmetric = KindOf<LineKind::Correlate, 1>;
      using Signed = KindOf<LineKind::Correlate, kEitherSymmetry>;
      if (symmetric_pairs(plan.args)) return launch(fused_kernel<T, TAPS, false, Symmetric, true>, plan, stream);
      if constexpr (TAPS == 3) {
        if (signed_pairs(plan.args)) return launch(fused_kernel<T, 3, false, Signed, true>, plan, stream);
      }
      return launch(fused_kernel<T, TAPS, false, void, true>, plan, stream);
    }
  }
  if constexpr ((T == DType::Float32 || T == DType::Float16) && TAPS == 3) {  // derivatives, summed in double
    if (signed_pairs(plan.args))
      return launch(fused_kernel<T, 3, false, KindOf<LineKind::Correlate, kEitherSymmetry>>, plan, stream);
  }
  launch(fused_kernel<T, TAPS, false>, plan, stream);
}

template <DType T>
struct FusedKernels {
  static void run(const FusedPlan& plan, cudaStream_t stream) {
    if constexpr (is_image_dtype(T)) {
      switch (shared_taps(plan.args)) {
        case 3: return launch_fused<T, 3>(plan, stream);
        case 9: return launch_fused<T, 9>(plan, stream);
        case 17: return launch_fused<T, 17>(plan, stream);
        // Box filters of sizes 5 and 7 as those of size 3 (H100, 256^3
        // float32 uniform: size 3 0.092 ms, size 5 with the taps known at
        // run time 0.19-0.20).
        case 5: if (launch_box_chain<T, 5>(plan, stream)) return; break;
        case 7: if (launch_box_chain<T, 7>(plan, stream)) return; break;
        default: break;
      }
    }
    throw std::logic_error("fused_kernel is not built for this chain (tiles_built_for should have said so)");
  }
};

template <DType T>
void FusedLauncher<T>::run(const FusedPlan& plan, cudaStream_t stream) {
  FusedKernels<T>::run(plan, stream);
}

}  // namespace gpufilt::cuda::fused
