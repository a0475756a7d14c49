#pragma once
#include "cuda/fused/launch.cuh"

namespace gpufilt::cuda::fused {

// ---- 2-D chains along the rows first: sobel and prewitt along axis 1 ---------------
//
// scipy filters along a chain's first axis first and rounds each pass to the
// dtype, so a chain along axis 1 and then axis 0 (sobel(image), whose axis
// is -1 by default) is not plane_kernel's chain in another order. Here a
// block owns a tile of TY x TX outputs and, as plane_kernel with its passes
// swapped,
//   1. pass 1 (along axis 1): each thread computes kQuad neighbouring
//      results of a row (the tile's rows and pass 0's halo rows) from
//      kQuad + TAPS - 1 inputs loaded into registers, every item's loads
//      first, -> A[HY][TX] (rounded to T; cval for rows pass 0 extends
//      with it);
//   2. pass 0 (along axis 0): each thread computes kRows outputs down a
//      column of A and stores them (neighbouring threads, neighbouring
//      columns: coalesced).
// Sums in double (LastAxisFirstLauncher), in scipy's order: the same results
// as pass by pass.
template <int TAPS, class Acc>
struct RowsFirstGeometry {
  static constexpr int TX = kThreads / 2;           // outputs of a tile row: a column a thread pair
  static constexpr int HY = 32;                     // rows of A: A in double within the default shared memory
  static constexpr int TY = HY - (TAPS - 1);        // output rows
  static constexpr int kRows = (TY + 1) / 2;        // pass-0 outputs a thread computes
  static constexpr int kQuad = 4;                   // pass-1 results an item computes
  static constexpr int kRun = kQuad + TAPS - 1;     // inputs an item reads
  static constexpr int kRounds = HY * TX / kQuad / kThreads;  // pass-1 items a thread
  static_assert(HY * TX % (kQuad * kThreads) == 0 && kRun <= 8, "whole rounds of items; a byte of cval bits each");
  static_assert(2 * kRows + TAPS - 1 <= HY, "pass 0 reads rows of A only");
  static_assert((size_t)HY * TX * sizeof(Acc) <= (size_t)kDefaultShared, "no opt-in");
};

template <DType T, int TAPS, class Acc>
__global__ void __launch_bounds__(kThreads) rows_first_kernel(const __grid_constant__ FusedArgs a) {
  using S = typename storage<T>::type;
  using G = RowsFirstGeometry<TAPS, Acc>;
  constexpr int TX = G::TX, HY = G::HY, R = G::kRows, Q = G::kQuad, N = G::kRun, ROUNDS = G::kRounds;
  const FusedPass &p0 = a.pass[0], &p1 = a.pass[2];  // a 2-D array's axes are stages 0 and 2
  const Acc cval = (Acc)a.cval;
  __shared__ __align__(16) Acc A[HY * TX];
  const int64_t y0 = (int64_t)blockIdx.y * G::TY, x0 = (int64_t)blockIdx.x * TX;
  const int64_t top = y0 - p0.left, left = x0 - p1.left;  // A row 0's input row; A column 0's first input column
  // A tile whose inputs all lie inside the array reads them without the
  // boundary rules (the same for the whole block).
  const bool interior = top >= 0 && top + HY <= a.n[0] && left >= 0 && left + TX + TAPS - 1 <= a.n[2];

  // 1. pass 1: item g = threadIdx.x + i kThreads, row g / (TX / Q), its
  // quad's first column g % (TX / Q) Q
  S in[ROUNDS][N];
  uint32_t cvals[ROUNDS];  // bit k: input k is cval (constant modes); all: a row pass 0 extends with cval
#pragma unroll
  for (int i = 0; i < ROUNDS; ++i) {
    const int g = threadIdx.x + i * kThreads, r = g / (TX / Q), c = g % (TX / Q) * Q;
    const int64_t y = interior ? top + r : border_index(top + r, a.n[0], p0.mode);
    cvals[i] = y < 0 ? 0xFFu : 0u;
    if (y < 0) continue;
    const char* row = a.in + y * a.in_step[0];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int64_t x = interior ? left + c + k : border_index(left + c + k, a.n[2], p1.mode);
      if (x < 0) cvals[i] |= 1u << k;
      else in[i][k] = __ldg(reinterpret_cast<const S*>(row + x * a.in_step[2]));
    }
  }
  with_kind(p1, [&](auto kind) {
#pragma unroll
    for (int i = 0; i < ROUNDS; ++i) {
      const int g = threadIdx.x + i * kThreads, r = g / (TX / Q), c = g % (TX / Q) * Q;
      Acc* results = A + r * TX + c;
      if (cvals[i] == 0xFFu) {
#pragma unroll
        for (int j = 0; j < Q; ++j) results[j] = cval;
        continue;
      }
      Acc v[N];
#pragma unroll
      for (int k = 0; k < N; ++k) v[k] = cvals[i] >> k & 1u ? cval : as_acc<T, Acc>(in[i][k]);
#pragma unroll
      for (int j = 0; j < Q; ++j)
        results[j] = held_result<T, Acc>(apply_kind<Acc, TAPS, decltype(kind)>(p1, [&](int k) { return v[j + k]; }));
    }
  });
  __syncthreads();

  // 2. pass 0 down the columns, R outputs from row h R, stored
  const int c = threadIdx.x % TX, h = threadIdx.x / TX;
  const int64_t x = x0 + c;
  if (x >= a.n[2]) return;
  const int r0 = h * R;
  Acc v[R + TAPS - 1];
#pragma unroll
  for (int k = 0; k < R + TAPS - 1; ++k) v[k] = A[(r0 + k) * TX + c];
  const int rows = (int)min((int64_t)min(R, G::TY - r0), a.n[0] - (y0 + r0));
  store_column<T, TAPS, R>(p0, v, a.out + (y0 + r0) * a.out_step[0] + x * a.out_step[2], a.out_step[0], rows);
}

// ---- 3-D chains along the columns first: sobel and prewitt along axis 2 ------------
//
// sobel(volume) filters along axis 2 (its default axis, -1) and then along
// axes 0 and 1, each pass rounded to the dtype: not fused_kernel's order.
// Here a block owns a tile of TY x TX outputs of a plane and marches along
// axis 0 as fused_kernel does, a plane a step:
//   1. the next input plane's haloed tile, fetched into registers a step
//      ahead, is staged in shared memory (the boundary extension of axes 1
//      and 2 applied by the cells' offsets);
//   2. pass 2 (along axis 2) over its rows -> the ring's newest plane
//      [HY][TX] (rounded to T; all cval for a plane pass 0 extends with it);
//   3. pass 0 (along axis 0) over the ring's TAPS planes: each thread
//      computes, into registers, the kRows + TAPS - 1 rows of its column
//      that its outputs read (rounded; cval for rows pass 1 extends with it);
//   4. pass 1 (along axis 1): kRows outputs down that column, stored.
// Sums of any accumulator but 8-bit data's in float, in scipy's order: the
// same results as pass by pass.
template <int TAPS, class Acc>
struct ColumnsFirstGeometry {
  static constexpr int TX = 64, TY = 16;  // outputs of a tile
  static constexpr int kRows = 4;         // pass-1 outputs a thread computes
  static constexpr int HX = TX + TAPS - 1, HY = TY + TAPS - 1;
  static constexpr int kStaged = HY * HX, kPlane = HY * TX;
  static constexpr int kLoads = (kStaged + kThreads - 1) / kThreads;  // staged cells a thread
  static_assert(TX * (TY / kRows) == kThreads, "one pass-1 item a thread");
  static_assert((size_t)(kStaged + TAPS * kPlane) * sizeof(Acc) <= (size_t)kDefaultShared, "no opt-in");
};

template <DType T, int TAPS, class Acc>
__global__ void __launch_bounds__(kThreads) columns_first_kernel(const __grid_constant__ FusedArgs a) {
  using S = typename storage<T>::type;
  using G = ColumnsFirstGeometry<TAPS, Acc>;
  constexpr int TX = G::TX, HX = G::HX, L = G::kLoads, PLANE = G::kPlane, R = G::kRows;
  const FusedPass &p0 = a.pass[0], &p1 = a.pass[1], &p2 = a.pass[2];
  const Acc cval = (Acc)a.cval;
  __shared__ __align__(16) Acc staged[G::kStaged];
  __shared__ __align__(16) Acc ring[TAPS * PLANE];  // input plane p's pass 2 in slot p % TAPS
  const int64_t y0 = (int64_t)blockIdx.y * G::TY, x0 = (int64_t)blockIdx.x * TX;
  const int64_t first = (int64_t)blockIdx.z * a.planes_per_block;
  const int steps = (int)min((int64_t)a.planes_per_block, a.n[0] - first);
  const int64_t top = y0 - p1.left;  // staged row 0's and A row 0's row

  // The thread's staged cells (threadIdx.x + j kThreads): byte offsets
  // within a plane, and bit j of `reads` where cell j is read, not cval
  // (pass 2's constant mode; rows outside in pass 1's are never read).
  static_assert(L <= 32, "a bit a cell");
  int32_t offset[L];
  uint32_t reads = 0;
#pragma unroll
  for (int j = 0; j < L; ++j) {
    const int i = threadIdx.x + j * kThreads;
    const int64_t y = border_index(top + i / HX, a.n[1], p1.mode);
    const int64_t x = border_index(x0 - p2.left + i % HX, a.n[2], p2.mode);
    const bool read = i < G::kStaged && y >= 0 && x >= 0;
    reads |= (uint32_t)read << j;
    offset[j] = read ? (int32_t)(y * a.in_step[1] + x * a.in_step[2]) : 0;
  }
  S next[L];
  // Relative input plane p (input plane first - p0.left + p) into next;
  // false for a plane pass 0 extends with cval.
  auto fetch = [&](int p) {
    const int64_t z = border_index(first - p0.left + p, a.n[0], p0.mode);
    if (z < 0) return false;
    const char* plane = a.in + z * a.in_step[0];
#pragma unroll
    for (int j = 0; j < L; ++j)
      if (reads >> j & 1u) next[j] = __ldg(reinterpret_cast<const S*>(plane + offset[j]));
    return true;
  };
  // Relative plane p (fetched: `loaded`) through pass 2 into its ring slot,
  // past one barrier: every thread is then done with the slot's plane and
  // with the staged one.
  auto put = [&](int p, bool loaded) {
    Acc* slot = ring + p % TAPS * PLANE;
    if (loaded) {
#pragma unroll
      for (int j = 0; j < L; ++j) {
        const int i = threadIdx.x + j * kThreads;
        if (i < G::kStaged) staged[i] = reads >> j & 1u ? as_acc<T, Acc>(next[j]) : cval;
      }
    }
    __syncthreads();
    if (!loaded) {
      for (int i = threadIdx.x; i < PLANE; i += kThreads) slot[i] = cval;
      return;
    }
    with_kind(p2, [&](auto kind) {
      for (int i = threadIdx.x; i < PLANE; i += kThreads) {
        const Acc* row = staged + i / TX * HX + i % TX;
        slot[i] = held_result<T, Acc>(apply_kind<Acc, TAPS, decltype(kind)>(p2, [&](int k) { return row[k]; }));
      }
    });
  };

  for (int p = 0; p + 1 < TAPS; ++p) {
    put(p, fetch(p));
    __syncthreads();  // the staged plane read before the next is staged
  }
  bool loaded = fetch(TAPS - 1);
  const int c = threadIdx.x % TX, r0 = threadIdx.x / TX * R;  // R outputs down column c
  const int64_t x = x0 + c;
  for (int s = 0; s < steps; ++s) {
    put(s + TAPS - 1, loaded);
    if (s + 1 < steps) loaded = fetch(s + TAPS);
    __syncthreads();
    if (x >= a.n[2]) continue;

    // pass 0 at the R + TAPS - 1 rows of column c that pass 1 reads,
    // straight from the ring: a third more sums than a shared plane of
    // them would take, and two barriers a step less
    Acc v[R + TAPS - 1];
    with_kind(p0, [&](auto kind) {
#pragma unroll
      for (int k = 0; k < R + TAPS - 1; ++k) {
        const int row = r0 + k;
        const int64_t y = top + row;
        const Acc* column = ring + row * TX + c;
        v[k] = p1.mode == Mode::Constant && (y < 0 || y >= a.n[1])
                   ? cval
                   : held_result<T, Acc>(apply_kind<Acc, TAPS, decltype(kind)>(
                         p0, [&](int t) { return column[(s + t) % TAPS * PLANE]; }));
      }
    });
    char* out = a.out + (first + s) * a.out_step[0] + (y0 + r0) * a.out_step[1] + x * a.out_step[2];
    store_column<T, TAPS, R>(p1, v, out, a.out_step[1], (int)min((int64_t)R, a.n[1] - (y0 + r0)));
    // No barrier here: the next put's comes before it writes the ring.
  }
}

// Runs a chain of 3-tap passes whose first pass is along the last axis
// (sobel and prewitt along it): a 2-D one with rows_first_kernel, a 3-D one
// along axes 2, 0, 1 with columns_first_kernel; false for other chains, for
// 8-bit data summed in float and for 2-D chains not summed in double.
template <DType T>
struct LastAxisFirstKernels {
  static bool run(FusedPlan plan, int ndim, cudaStream_t stream) {
    if constexpr (is_image_dtype(T)) {
      if (shared_taps(plan.args) != 3) return false;
      return with_accumulator<T>(plan, [&](auto acc) {
        using Acc = decltype(acc);
        if constexpr (kEightBitFloat<T, Acc>) return false;
        else return ndim == 2 ? launch_2d<Acc>(plan.args, stream) : launch_3d<Acc>(plan, stream);
      });
    }
    return false;
  }

  // Sums in double only (derivatives of floats; 16-bit data with weights
  // int32 does not sum): those in int32 ran slower than pass by pass (H100,
  // 8192^2 uint8 sobel along axis 1: 0.34 ms against 0.19).
  template <class Acc>
  static bool launch_2d(const FusedArgs& a, cudaStream_t stream) {
    if constexpr (!std::is_same_v<Acc, double>) {
      return false;
    } else {
      using G = RowsFirstGeometry<3, Acc>;
      const int64_t gy = (a.n[0] + G::TY - 1) / G::TY;
      if (gy > kMaxGridYZ) return false;
      rows_first_kernel<T, 3, Acc><<<dim3((unsigned)((a.n[2] + G::TX - 1) / G::TX), (unsigned)gy), kThreads, 0,
                                      stream>>>(a);
      GF_CUDA_CHECK_LAUNCH();
      return true;
    }
  }

  template <class Acc>
  static bool launch_3d(FusedPlan& plan, cudaStream_t stream) {
    using G = ColumnsFirstGeometry<3, Acc>;
    FusedArgs& a = plan.args;
    const int64_t gx = (a.n[2] + G::TX - 1) / G::TX, gy = (a.n[1] + G::TY - 1) / G::TY;
    if (gy > kMaxGridYZ) return false;
    const auto kernel = columns_first_kernel<T, 3, Acc>;
    const int64_t resident =
        (int64_t)resident_blocks_per_sm(reinterpret_cast<const void*>(kernel), kThreads, 0) * multiprocessors();
    a.planes_per_block = (int)march_planes(a.n[0], gx * gy, std::max<int64_t>(resident, 1), 2);
    kernel<<<dim3((unsigned)gx, (unsigned)gy, (unsigned)((a.n[0] + a.planes_per_block - 1) / a.planes_per_block)),
             kThreads, 0, stream>>>(a);
    GF_CUDA_CHECK_LAUNCH();
    return true;
  }
};

template <DType T>
bool LastAxisFirstLauncher<T>::run(FusedPlan plan, int ndim, cudaStream_t stream) {
  return LastAxisFirstKernels<T>::run(plan, ndim, stream);
}

}  // namespace gpufilt::cuda::fused
