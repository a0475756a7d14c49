#pragma once
#include "cuda/fused/launch.cuh"

namespace gpufilt::cuda::fused {

// ---- 2-D arrays: a tile a block ---------------------------------------------------
//
// A 2-D array has no third axis to march along: fused_kernel's march down the
// rows keeps one row of loads in flight a thread, too few to hide the memory
// latency (8192^2 float32 gaussian sigma 2: 1.36 ms on the H100, cuCIM 1.25).
// Here a block owns a tile of TY x TX outputs of a chain whose passes all have
// TAPS taps (or none) and
//   1. pass 0 (along axis 0): each thread loads a run of kRows + TAPS - 1
//      values down one haloed column, all in flight at once, and computes
//      kRows results from registers into A[TY][HXP] (shared, rounded to T);
//      8-bit data read one byte a load waited on its loads (H100, 8192^2
//      uint8 gaussian sigma 2: 0.61 ms, float32 0.29), so an interior
//      tile's input is first staged in shared memory by 8-byte loads
//      (0.43 ms), and the runs read from there;
//   2. pass 1 (along axis 1): each thread computes kQuad neighbouring outputs
//      of a row from kQuad + TAPS - 1 values of A, read as 16-byte vectors,
//      and stores them (as one vector where the output's rows allow it).
// The same passes (apply_kind), rounding and halo rules as fused_kernel: the
// same results to the bit.
template <DType T, int TAPS, class Acc>
struct PlaneGeometry {
  // 8-bit data is latency bound, not bandwidth bound (ncu: loads waited on
  // at 36% occupancy): shorter runs (16-bit data too: see kStaged), fewer
  // registers, more blocks an SM
  // (with its input staged, H100: 16-row runs 0.432 ms, 32-row 0.56, on
  // 8192^2 uint8 gaussian sigma 2; summed in float, 4 blocks an SM
  // 0.433-0.44, 5 0.415-0.427, 6 0.454-0.463; sums in double keep 4, as
  // they already spill at 64 registers). 16-bit data takes 4 blocks too,
  // spills and all (uint16 in double: 144 bytes): 0.430 -> 0.412 ms,
  // float16 0.272 -> 0.243. Held in int32 instead, as blocked_kernel holds
  // them (48 bytes spilled, 30 KB of shared memory instead of 46), uint16
  // was slower: each pair of taps then takes an integer add and a
  // conversion where doubles take one add (sigma 2: 0.404-0.406 -> 0.424-0.452).
  static constexpr bool kShortRuns = sizeof(Acc) == 8 || sizeof(typename storage<T>::type) <= 2;
  static constexpr int kRows = kShortRuns ? 16 : 32;        // pass-0 results an item computes
  static constexpr int kMinBlocks =
      kEightBit<T> ? (sizeof(Acc) == 4 ? 5 : 4) : sizeof(typename storage<T>::type) == 2 ? 4 : 3;
  static constexpr int TY = 2 * kRows;
  static constexpr int TX = (128 - (TAPS - 1)) / 4 * 4;  // a haloed row of at most 128 columns
  static constexpr int HX = TX + TAPS - 1;
  static constexpr int kQuad = 4;                          // pass-1 outputs a thread computes
  static constexpr int kVec = 16 / (int)sizeof(Acc);       // values of A a vector load reads
  static constexpr int kRowValues = (kQuad + TAPS - 1 + kVec - 1) / kVec * kVec;
  static constexpr int HXP = TX - kQuad + kRowValues;      // A's row length: the last quad's reads fit
  static constexpr int kItems0 = HX * (TY / kRows);
  static constexpr int kQuads = TY * TX / kQuad;
  // 8-bit and 16-bit inputs (short runs, for the shared memory): an interior
  // tile's haloed input, staged in shared memory by 8-byte loads (for 8-bit
  // data 3 a thread instead of 32 of a byte), rows of kStagedCols elements
  // (H100, 2-D gaussian sigma 2 on 8192^2: uint8 0.61 -> 0.43 ms, uint16
  // 0.784-0.793 -> 0.432-0.437, float16 0.99-1.06 -> 0.647-0.649; float16
  // had tiles of twice the rows, whose staged input would pass the default
  // shared memory).
  static constexpr bool kStaged = sizeof(typename storage<T>::type) <= 2;
  static constexpr int kPerWord = 8 / (int)sizeof(typename storage<T>::type);  // elements an 8-byte load reads
  static constexpr int kStagedRows = TY + TAPS - 1, kStagedCols = (HX + kPerWord - 1) / kPerWord * kPerWord;
  static constexpr int kStagedBytes =
      kStaged ? kStagedRows * kStagedCols * (int)sizeof(typename storage<T>::type) : 16;
  static constexpr size_t kSharedBytes = (size_t)TY * HXP * sizeof(Acc) + kStagedBytes;
  static_assert(kItems0 <= kThreads && HXP % kVec == 0 && TX % kQuad == 0, "one pass-0 item a thread");
  static_assert(kSharedBytes <= (size_t)kDefaultShared, "no opt-in");
};

// Whether a plane_kernel block stages its input (PlaneGeometry::kStaged): its
// whole haloed input window lies inside the array, on rows of contiguous,
// 8-byte aligned elements. Other blocks (the array's borders) load as before.
template <class G, class S>
__device__ __forceinline__ bool stages_input(const FusedArgs& a, const char* in, int64_t y0, int64_t x0) {
  if constexpr (!G::kStaged) {
    return false;
  } else {
    const int64_t ys = y0 - a.pass[0].left, xs = x0 - a.pass[2].left;
    const char* first = in + ys * a.in_step[0] + xs * (int64_t)sizeof(S);
    return a.in_step[2] == (int64_t)sizeof(S) && a.in_step[0] % 8 == 0 && reinterpret_cast<uintptr_t>(first) % 8 == 0 &&
           ys >= 0 && ys + G::kStagedRows <= a.n[0] && xs >= 0 && xs + G::kStagedCols <= a.n[2];
  }
}

// Pass 0's outputs near a step (fast_results), summed again in double from
// the staged input (`staged`: the column's first input, rows kStagedCols
// apart) and written to `column` (row r at column[r * HXP]): one output a
// round, each thread its own, so that a warp pays a round for the most any
// of its threads has, and the code is one double sum instead of kRows
// (8-bit gaussian sigma 2: 56 bytes spilled instead of 112; H100, 8192^2
// uint8 0.322-0.328 -> 0.309-0.310 ms). Blocks without staged input settle
// from registers (settle_from_registers).
template <DType T, int TAPS, class K, class G, class Acc, class S>
__device__ __forceinline__ void settle_from_staged(const FusedPass& p, uint32_t near_step, const S* staged,
                                                   Acc* column) {
  while (near_step) {
    const int r = __ffs(near_step) - 1;
    near_step &= near_step - 1;
    column[r * G::HXP] = exact_result<T, TAPS, K, Acc>(p, [&](int k) { return staged[(r + k) * G::kStagedCols]; });
  }
}

// PADDED: as blocked_kernel's.
template <DType T, int TAPS, class Acc, bool PADDED>
__global__ void __launch_bounds__(kThreads, PlaneGeometry<T, TAPS, Acc>::kMinBlocks)
    plane_kernel(const __grid_constant__ FusedArgs a) {
  using S = typename storage<T>::type;
  using G = PlaneGeometry<T, TAPS, Acc>;
  constexpr int TX = G::TX, HX = G::HX, HXP = G::HXP, R = G::kRows, Q = G::kQuad;
  const FusedPass &p0 = a.pass[0], &p1 = a.pass[2];  // a 2-D array's axes are stages 0 and 2
  const Acc cval = (Acc)a.cval;
  __shared__ __align__(16) Acc A[G::TY * HXP];
  __shared__ __align__(16) S staged[G::kStagedBytes / sizeof(S)];
  const int64_t y0 = (int64_t)blockIdx.y * G::TY, x0 = (int64_t)blockIdx.x * TX;
  // A stack of 2-D arrays along stage 1 (the planes of a volume:
  // plan_plane_stack), one a layer of the grid; a 2-D array is one.
  const char* const in = a.in + blockIdx.z * a.in_step[1];
  char* const out = a.out + blockIdx.z * a.out_step[1];

  const bool stage = stages_input<G, S>(a, in, y0, x0);  // the same for the whole block
  if (stage) {
    // All of a thread's loads first, then its stores: one load at a time,
    // each waited on before the next, took 23% of the uint8 tile's stall
    // samples (ncu, H100).
    constexpr int words = G::kStagedCols / G::kPerWord;  // a staged row's
    constexpr int total = G::kStagedRows * words, per_thread = (total + kThreads - 1) / kThreads;
    const char* first = in + (y0 - p0.left) * a.in_step[0] + (x0 - p1.left) * (int64_t)sizeof(S);
    uint2 loaded[per_thread];
#pragma unroll
    for (int j = 0; j < per_thread; ++j) {
      const int i = threadIdx.x + j * kThreads, row = i / words, word = i % words;
      if (i < total) loaded[j] = __ldg(reinterpret_cast<const uint2*>(first + row * a.in_step[0]) + word);
    }
#pragma unroll
    for (int j = 0; j < per_thread; ++j) {
      const int i = threadIdx.x + j * kThreads;
      if (i < total) reinterpret_cast<uint2*>(staged)[i] = loaded[j];
    }
    __syncthreads();
  }

  // 1. pass 0: item (column c of the haloed tile, rows r0 .. r0 + R - 1)
  if (threadIdx.x < G::kItems0) {
    const int c = threadIdx.x % HX, r0 = threadIdx.x / HX * R;
    const int64_t x = x0 - p1.left + c;
    Acc* column = A + r0 * HXP + c;
    if (p1.mode == Mode::Constant && (x < 0 || x >= a.n[2])) {  // pass 1 extends its input with cval
#pragma unroll
      for (int r = 0; r < R; ++r) column[r * HXP] = cval;
    } else {
      const char* column_in = in + border_index(x, a.n[2], p1.mode) * a.in_step[2];
      const int64_t top = y0 + r0 - p0.left;  // the input row of v[0]
      const int loads = p0.taps ? R + TAPS - 1 : R;
      // Three loops, the tests of `stage` and of the rows lying inside the
      // array outside them: inside one loop, nvcc kept a test's results as a
      // 32-bit mask that every warp built before its first load (ncu, 2-D
      // gaussian on 8192^2 uint8: 8% of the kernel's instructions for
      // `stage`, then 7% for `inside`), and loaded and spilled one value at
      // a time.
      Acc v[R + TAPS - 1];
      if (stage) {  // staged row r0 + k is input row top + k
#pragma unroll
        for (int k = 0; k < R + TAPS - 1; ++k) {
          if (k >= loads) break;
          v[k] = as_acc<T, Acc>(staged[(r0 + k) * G::kStagedCols + c]);
        }
      } else if (top >= 0 && top + R + TAPS - 1 <= a.n[0]) {
#pragma unroll
        for (int k = 0; k < R + TAPS - 1; ++k) {
          if (k >= loads) break;
          v[k] = as_acc<T, Acc>(__ldg(reinterpret_cast<const S*>(column_in + (top + k) * a.in_step[0])));
        }
      } else {
#pragma unroll
        for (int k = 0; k < R + TAPS - 1; ++k) {
          if (k >= loads) break;
          const int64_t y = border_index(top + k, a.n[0], p0.mode);
          v[k] = y < 0 ? cval : as_acc<T, Acc>(__ldg(reinterpret_cast<const S*>(column_in + y * a.in_step[0])));
        }
      }
      if (p0.taps) {
        with_kind<kEightBitFloat<T, Acc>, PADDED>(p0, [&](auto kind) {
          using K = decltype(kind);
          Acc results[R];
          auto tap = [&](int r, int k) { return v[r + k]; };
          const uint32_t near_step = fast_results<T, TAPS, K, false>(p0, tap, results);
#pragma unroll
          for (int r = 0; r < R; ++r) column[r * HXP] = results[r];
          if (near_step) {
            if (stage)
              settle_from_staged<T, TAPS, K, G>(p0, near_step, staged + r0 * G::kStagedCols + c, column);
            else
              settle_from_registers<T, TAPS, K, Acc, R>(p0, near_step, tap, [&](int r, Acc v) { column[r * HXP] = v; });
          }
        });
      } else {
#pragma unroll
        for (int r = 0; r < R; ++r) column[r * HXP] = v[r];
      }
    }
  }
  __syncthreads();

  // 2. pass 1: Q outputs of a row, stored
  with_kind<kEightBitFloat<T, Acc>, PADDED>(p1, [&](auto kind) {
    for (int g = threadIdx.x; g < G::kQuads; g += kThreads) {
      const int ty = g / (TX / Q), tx = g % (TX / Q) * Q;
      const int64_t y = y0 + ty, x = x0 + tx;
      if (y >= a.n[0] || x >= a.n[2]) continue;
      Acc v[G::kRowValues];
      load_run<G::kRowValues, G::kVec>(A + ty * HXP + tx, v);
      Acc results[Q];
      if (p1.taps) {
        using K = decltype(kind);
        uint32_t near_step = fast_results<T, TAPS, K, false>(p1, [&](int i, int k) { return v[i + k]; }, results);
        const Acc* row = A + ty * HXP + tx;  // v's values: output i's tap k at row[i + k]
        while (near_step) {  // see settle_from_staged
          const int i = __ffs(near_step) - 1;
          near_step &= near_step - 1;
          const Acc exact = exact_result<T, TAPS, K, Acc>(p1, [&](int k) { return row[i + k]; });
#pragma unroll
          for (int j = 0; j < Q; ++j)
            if (j == i) results[j] = exact;
        }
      } else {
#pragma unroll
        for (int i = 0; i < Q; ++i) results[i] = v[i];
      }
      store_combined<T>(a.combine, out + y * a.out_step[0] + x * a.out_step[2], results, a.out_step[2],
                        a.n[2] - x, a.run_stores);
    }
  });
}

// Runs a 2-D chain whose passes share 3, 9 or 17 taps with plane_kernel
// (see there), or were padded to 9 or 17 (plan_padded); false otherwise.
template <DType T>
struct PlaneKernels {
  template <int TAPS, class Acc, bool PADDED = false>
  static bool launch_tiles(FusedPlan plan, const ArrayDesc& out, cudaStream_t stream) {
    using G = PlaneGeometry<T, TAPS, Acc>;
    FusedArgs& a = plan.args;
    const int64_t gy = (a.n[0] + G::TY - 1) / G::TY;
    a.run_stores = run_stores<T, G::kQuad>(a, out);
    if (gy > kMaxGridYZ || a.n[1] > kMaxGridYZ) return false;
    plane_kernel<T, TAPS, Acc, PADDED>
        <<<dim3((unsigned)((a.n[2] + G::TX - 1) / G::TX), (unsigned)gy, (unsigned)a.n[1]), kThreads, 0, stream>>>(a);
    GF_CUDA_CHECK_LAUNCH();
    return true;
  }

  template <int TAPS, bool PADDED = false>
  static bool launch_taps(const FusedPlan& plan, const ArrayDesc& out, cudaStream_t stream) {
    return with_accumulator<T>(plan, [&](auto acc) {
      return launch_tiles<TAPS, decltype(acc), PADDED>(plan, out, stream);
    });
  }

  // Box chains held narrow (float or int32), TAPS taps a pass; false for others.
  template <int TAPS>
  static bool launch_box_taps(const FusedPlan& plan, const ArrayDesc& out, cudaStream_t stream) {
    if (shared_box_kind(plan.args) == LineKind::Correlate) return false;
    return with_accumulator<T>(plan, [&](auto acc) {
      if constexpr (std::is_same_v<decltype(acc), double>) return false;
      else return launch_tiles<TAPS, decltype(acc)>(plan, out, stream);
    });
  }

  static bool run(const FusedPlan& plan, const ArrayDesc& out, cudaStream_t stream) {
    if constexpr (is_image_dtype(T)) {
      if (padded(plan.args)) {
        switch (shared_taps(plan.args)) {
          case 9: return launch_taps<9, true>(plan, out, stream);
          case 17: return launch_taps<17, true>(plan, out, stream);
          default: return false;
        }
      }
      switch (specialised_taps(plan.args)) {
        case 3: return launch_taps<3>(plan, out, stream);
        case 9: return launch_taps<9>(plan, out, stream);
        case 17: return launch_taps<17>(plan, out, stream);
        default: break;
      }
      // Box filters of sizes 5 and 7 too (H100, 8192^2 float32 uniform:
      // size 3 0.203 ms, size 5 by fused_kernel's rows 0.597).
      switch (shared_taps(plan.args)) {
        case 5: return launch_box_taps<5>(plan, out, stream);
        case 7: return launch_box_taps<7>(plan, out, stream);
        default: break;
      }
    }
    return false;
  }
};

template <DType T>
bool PlaneLauncher<T>::run(const FusedPlan& plan, const ArrayDesc& out, cudaStream_t stream) {
  return PlaneKernels<T>::run(plan, out, stream);
}

}  // namespace gpufilt::cuda::fused
