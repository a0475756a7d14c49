#pragma once
#include "cuda/fused/launch.cuh"
#include "cuda/fused/march.cuh"

namespace gpufilt::cuda::fused {

// ---- register-blocked chains of three passes over a 3-D array --------------------
//
// Gaussian sigma 1 and uniform size 9 filters of a 3-D array are chains of
// three 9-tap passes: float32 and float16 summed in float, 8-bit and 16-bit
// integers held in int32 (box chains summed there too, correlations in
// double; 8-bit correlations in float with their outputs near a step summed
// again: blocked_results. H100, 256^3, gaussian sigma 1 from fused_kernel's
// int32-held double sums: uint8 0.328 -> 0.218 ms (double) -> 0.160 (float),
// uint16 0.331 -> 0.193; float32 0.109; uniform 9 uint8 0.120). For them the
// geometry is known at compile time and each thread computes several results
// from values it holds in registers, instead of re-reading every tap from
// shared memory:
//   pass 0: Z output planes at once from the Z + TAPS - 1 ring planes of a
//           column (read once each, not TAPS times per plane);
//   pass 1: kRows1 consecutive rows of a column of B from kRows1 + TAPS - 1
//           values of A;
//   pass 2: kQuad neighbouring outputs of a B row from kQuad + TAPS - 1
//           values read as 16-byte vectors (one output a thread, each tap
//           its own shared load, was 9 of the 18 shared loads an output).
// Results are those of fused_kernel to the bit: the same apply_kind, the same
// rounding between passes, the same halo rules (map_blocked_thread mirrors
// map_thread). Measured on the H100 (512^3 float32): gaussian sigma 1 2.08 ->
// 1.70 ms, uniform 9 2.28 -> 1.81 ms; 3-tap chains (uniform 3, sobel,
// maximum 3) were slower this way (1.0 -> 1.1 to 1.3 ms) and stay with
// fused_kernel, as do chains of float32 and float16 summed in double (not
// measured this way).
template <int TAPS, class Held>
struct BlockedGeometry {
  static constexpr int TX = 64, TY = 8;  // output columns and rows of a tile
  static constexpr int Z = 4;            // output planes a step
  static constexpr int HX = TX + TAPS - 1, HY = TY + TAPS - 1;
  static constexpr int kColumns = HX * HY;     // haloed columns of the tile
  static constexpr int kRing = TAPS + Z - 1;   // input planes a step reads
  static constexpr int kColumnRounds = (kColumns + kThreads - 1) / kThreads;
  static constexpr int rows1() {  // B rows a pass-1 item computes: enough items for the block
    int r = TY;
    while (r > 1 && Z * HX * (TY / r) < 240) r /= 2;
    return r;
  }
  static constexpr int kRows1 = rows1();
  static constexpr int kItems1 = Z * HX * (TY / kRows1);
  static constexpr int kRounds1 = (kItems1 + kThreads - 1) / kThreads;
  static constexpr int kQuad = 4;                         // pass-2 outputs a thread computes at once
  static constexpr int kVec = 16 / (int)sizeof(Held);      // values of B a vector load reads
  static constexpr int kRowValues = kQuad + TAPS - 1;      // B values a quad reads
  static constexpr int kRounds2 = Z * TY * TX / kQuad / kThreads;
  static constexpr size_t kSharedBytes = ((size_t)kColumns * (kRing + Z) + (size_t)Z * TY * HX) * sizeof(Held);
  static_assert(Z * TY * TX % (kQuad * kThreads) == 0, "pass 2: whole rounds of quads");
  static_assert(kRowValues % kVec == 0 && HX % kVec == 0 && TX % kQuad == 0, "aligned vectors of B");
  static_assert(kSharedBytes <= 100 * 1024, "two blocks an SM at least");
};

template <class G>
struct BlockedMap {
  int32_t in_offset[G::kColumnRounds];  // column j's input byte offset within a plane
  uint32_t cval_rows = 0;               // bit j: column j lies in a constant-mode row
  uint32_t cval_b = 0;                  // bit i: pass-1 item i lies in a constant-mode column
};

template <class G>
__device__ BlockedMap<G> map_blocked_thread(const FusedArgs& a, int64_t y0, int64_t x0) {
  const FusedPass &p1 = a.pass[1], &p2 = a.pass[2];
  BlockedMap<G> m;
#pragma unroll
  for (int j = 0; j < G::kColumnRounds; ++j) {
    const int c = threadIdx.x + j * kThreads;
    int64_t y = border_index(y0 - p1.left + c / G::HX, a.n[1], p1.mode);
    int64_t x = border_index(x0 - p2.left + c % G::HX, a.n[2], p2.mode);
    if (y < 0) m.cval_rows |= 1u << j;
    y = max(y, (int64_t)0);  // constant-mode cells are loaded from anywhere and replaced
    x = max(x, (int64_t)0);
    m.in_offset[j] = c < G::kColumns ? (int32_t)(y * a.in_step[1] + x * a.in_step[2]) : 0;
  }
#pragma unroll
  for (int i = 0; i < G::kRounds1; ++i) {
    const int64_t x = x0 - p2.left + (threadIdx.x + i * kThreads) % G::HX;
    if (p2.mode == Mode::Constant && (x < 0 || x >= a.n[2])) m.cval_b |= 1u << i;
  }
  return m;
}

// blocked_kernel sums in double only 8-bit and 16-bit integers, held in int32.
template <class Acc>
using BlockedHeld = HeldOf<Acc, std::is_same_v<Acc, double>>;

// Pass p of kind K at N outputs, tap k of output i read through x(i, k), as
// the chain stores them (rounded to T), held as Held: 8-bit data summed in
// float with its outputs near a step summed again (pass_results), others
// summed in Acc and rounded.
template <DType T, int TAPS, class K, class Acc, class Held, int N, class Tap>
__device__ __forceinline__ void blocked_results(const FusedPass& p, const Tap& x, Held (&result)[N]) {
  if constexpr (kEightBitFloat<T, Acc>) {
    pass_results<T, TAPS, K>(p, x, result);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i)
      result[i] = held_result<T, Held>(apply_kind<Acc, TAPS, K>(p, [&](int k) { return x(i, k); }));
  }
}

// PADDED: the chain's passes were padded to TAPS taps (plan_padded: pad_pass),
// their extra taps skipped (KindOf::padded).
template <DType T, int TAPS, class Acc, bool PADDED>
__global__ void __launch_bounds__(kThreads, 2) blocked_kernel(const __grid_constant__ FusedArgs a) {
  using S = typename storage<T>::type;
  using Held = BlockedHeld<Acc>;
  using G = BlockedGeometry<TAPS, Held>;
  constexpr int HX = G::HX, TY = G::TY, Z = G::Z, R = G::kRing, C = G::kColumns, J = G::kColumnRounds;
  const FusedPass &p0 = a.pass[0], &p1 = a.pass[1], &p2 = a.pass[2];
  const Held cval = (Held)a.cval;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  Held* ring = reinterpret_cast<Held*>(shared_bytes);  // [R][C]: input planes; column c is thread c % kThreads's
  Held* A = ring + R * C;                              // [Z][C]: pass 0, rounded
  Held* B = A + Z * C;                                 // [Z][TY][HX]: pass 1, rounded

  const int64_t y0 = (int64_t)blockIdx.y * TY, x0 = (int64_t)blockIdx.x * G::TX;
  const int64_t first = (int64_t)blockIdx.z * a.planes_per_block;
  const int planes = (int)min((int64_t)a.planes_per_block, a.n[0] - first);
  const int steps = (planes + Z - 1) / Z;
  const BlockedMap<G> m = map_blocked_thread<G>(a, y0, x0);
  auto owns = [](int j) { return j + 1 < J || threadIdx.x + j * kThreads < C; };

  S next[Z][J];
  bool loaded[Z];
  auto put = [&](int slot_offset, int dz) {  // slot_offset: the slot's first column
#pragma unroll
    for (int j = 0; j < J; ++j)
      if (owns(j)) ring[slot_offset + threadIdx.x + j * kThreads] = loaded[dz] ? as_acc<T, Held>(next[dz][j]) : cval;
  };
  auto fetch = [&](int plane, int dz) { loaded[dz] = fetch_plane<T, J>(a, first, plane, m.in_offset, C, next[dz]); };

  for (int p = 0; p + 1 < TAPS; ++p) {  // the ring's first planes (slots 0 .. TAPS - 2)
    fetch(p, 0);
    put(p * C, 0);
  }
#pragma unroll
  for (int dz = 0; dz < Z; ++dz) fetch(TAPS - 1 + dz, dz);

  for (int s = 0; s < steps; ++s) {
    // The first column of the step's d-th input plane in the ring (plane
    // s * Z + d sits in slot (s * Z + d) % R).
    int slot[R];
    const int base = (s * Z) % R;
#pragma unroll
    for (int d = 0; d < R; ++d) slot[d] = (base + d < R ? base + d : base + d - R) * C;
#pragma unroll
    for (int dz = 0; dz < Z; ++dz) put(slot[TAPS - 1 + dz], dz);
    if (s + 1 < steps) {
#pragma unroll
      for (int dz = 0; dz < Z; ++dz) fetch((s + 1) * Z + TAPS - 1 + dz, dz);
    }

    // pass 0: Z planes of the thread's own columns
    with_kind<kEightBitFloat<T, Acc>, PADDED>(p0, [&](auto kind) {
#pragma unroll
      for (int j = 0; j < J; ++j) {
        if (!owns(j)) continue;
        const int c = threadIdx.x + j * kThreads;
        Held v[R];
#pragma unroll
        for (int d = 0; d < R; ++d) v[d] = ring[slot[d] + c];
        Held r[Z];
        blocked_results<T, TAPS, decltype(kind), Acc>(p0, [&](int dz, int k) { return v[dz + k]; }, r);
#pragma unroll
        for (int dz = 0; dz < Z; ++dz) A[dz * C + c] = (m.cval_rows >> j & 1u) ? cval : r[dz];
      }
    });
    __syncthreads();

    // pass 1: item (plane dz, row segment, column hx) -> kRows1 rows of B
    with_kind<kEightBitFloat<T, Acc>, PADDED>(p1, [&](auto kind) {
#pragma unroll
      for (int i = 0; i < G::kRounds1; ++i) {
        const int e = threadIdx.x + i * kThreads;
        if (G::kItems1 % kThreads != 0 && e >= G::kItems1) break;
        const int hx = e % HX, segment = e / HX;  // segment: dz * (TY / kRows1) + row block
        const int row0 = segment % (TY / G::kRows1) * G::kRows1, dz = segment / (TY / G::kRows1);
        const Held* column = A + dz * C + row0 * HX + hx;
        Held* b = B + (dz * TY + row0) * HX + hx;
        if (m.cval_b >> i & 1u) {
#pragma unroll
          for (int r = 0; r < G::kRows1; ++r) b[r * HX] = cval;
          continue;
        }
        Held v[G::kRows1 + TAPS - 1];
#pragma unroll
        for (int k = 0; k < G::kRows1 + TAPS - 1; ++k) v[k] = column[k * HX];
        Held r[G::kRows1];
        blocked_results<T, TAPS, decltype(kind), Acc>(p1, [&](int row, int k) { return v[row + k]; }, r);
#pragma unroll
        for (int row = 0; row < G::kRows1; ++row) b[row * HX] = r[row];
      }
    });
    __syncthreads();

    // pass 2: quads of kQuad neighbouring outputs of a row (dz * TY + ty),
    // each from values of B read as 16-byte vectors, stored as one vector
    // where the rows allow it (a.run_stores)
    with_kind<kEightBitFloat<T, Acc>, PADDED>(p2, [&](auto kind) {
#pragma unroll
      for (int i = 0; i < G::kRounds2; ++i) {
        const int g = threadIdx.x + i * kThreads, zy = g / (G::TX / G::kQuad), qx = g % (G::TX / G::kQuad) * G::kQuad;
        const int dz = zy / TY, ty = zy % TY;
        const int64_t z = first + (int64_t)s * Z + dz, y = y0 + ty, x = x0 + qx;
        if (s * Z + dz >= planes || y >= a.n[1] || x >= a.n[2]) continue;
        Held v[G::kRowValues];
        load_run<G::kRowValues, G::kVec>(B + zy * HX + qx, v);
        // float32 and float16 sums are stored as they are, other results
        // first rounded to T (storage_of takes integers of double).
        Held results[G::kQuad];
        if constexpr ((T == DType::Float32 || T == DType::Float16) && std::is_same_v<Acc, float>) {
#pragma unroll
          for (int q = 0; q < G::kQuad; ++q)
            results[q] = apply_kind<Acc, TAPS, decltype(kind)>(p2, [&](int k) { return v[q + k]; });
        } else {
          blocked_results<T, TAPS, decltype(kind), Acc>(p2, [&](int q, int k) { return v[q + k]; }, results);
        }
        store_results<T>(a.out + z * a.out_step[0] + y * a.out_step[1] + x * a.out_step[2], results, a.out_step[2],
                         a.n[2] - x, a.run_stores);
      }
    });
  }
}

// Runs the chain with blocked_kernel when it is one of those it is faster
// for (see there); false otherwise.
template <DType T>
struct BlockedKernels {
  static bool run(FusedPlan plan, const ArrayDesc& out, cudaStream_t stream) {
    if constexpr (T == DType::Float32 || T == DType::Float16) {
      if (plan.float_sums) return launch_blocked<float>(plan, out, stream);
    }
    if constexpr (kSmallInteger<T>) {
      if (plan.int32_chain) return launch_blocked<int32_t>(plan, out, stream);
      if constexpr (kEightBit<T>) {
        if (plan.eight_bit_float) return launch_blocked<float>(plan, out, stream);
      }
      if (plan.integer_held) return launch_blocked<double>(plan, out, stream);
    }
    return false;
  }

  template <class Acc>
  static bool launch_blocked(FusedPlan& plan, const ArrayDesc& out, cudaStream_t stream) {
    constexpr int kTaps = 9;
    using G = BlockedGeometry<kTaps, BlockedHeld<Acc>>;
    FusedArgs& a = plan.args;
    const bool nine_taps_each = std::all_of(a.pass, a.pass + 3, [](const FusedPass& p) { return p.taps == kTaps; });
    if (!nine_taps_each || (a.n[1] + G::TY - 1) / G::TY > kMaxGridYZ) return false;
    a.tile_y = G::TY;
    a.tile_x = G::TX;
    a.halo_y = G::HY;
    a.halo_x = G::HX;
    plan.shared_bytes = G::kSharedBytes;
    a.run_stores = run_stores<T, G::kQuad>(a, out);
    const int64_t gx = (a.n[2] + G::TX - 1) / G::TX, gy = (a.n[1] + G::TY - 1) / G::TY;
    const auto kernel = padded(a) ? blocked_kernel<T, kTaps, Acc, true> : blocked_kernel<T, kTaps, Acc, false>;
    const int64_t resident =
        (int64_t)resident_blocks_per_sm(reinterpret_cast<const void*>(kernel), kThreads, G::kSharedBytes) *
        multiprocessors();
    a.planes_per_block = (int)march_planes(a.n[0], gx * gy, std::max<int64_t>(resident, 1), kTaps - 1);
    plan.grid = dim3((unsigned)gx, (unsigned)gy, (unsigned)((a.n[0] + a.planes_per_block - 1) / a.planes_per_block));
    launch(kernel, plan, stream);
    return true;
  }
};

template <DType T>
bool BlockedLauncher<T>::run(FusedPlan plan, const ArrayDesc& out, cudaStream_t stream) {
  return BlockedKernels<T>::run(plan, out, stream);
}

}  // namespace gpufilt::cuda::fused
