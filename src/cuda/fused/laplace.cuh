#pragma once
#include "cuda/fused/launch.cuh"
#include "cuda/fused/march.cuh"

namespace gpufilt::cuda::fused {

// ---- laplace ---------------------------------------------------------------------

// scipy's laplace in one pass: the [1, -2, 1] second difference along each
// axis, each rounded to T as generic_laplace stores it, summed in T in axis
// order with numpy's arithmetic (elementwise_value: integers wrap, float16
// rounds through float32). The tile marches along axis 0 as fused_kernel
// does, with a ring of the last three planes; a.pass[k] carries axis k's
// boundary mode (three taps, one left of the centre), a.pass[1].taps == 0
// for a 2-D array. Summed in double (second differences cancel), or where
// NARROW in int32 (8-bit and 16-bit integers and an integer cval within
// their range: exact, as scipy's double sums of integers are).
template <DType T, bool NARROW>
__global__ void __launch_bounds__(kThreads, 3) laplace_kernel(const __grid_constant__ FusedArgs a) {
  using S = typename storage<T>::type;
  using Acc = HeldOf<AccumulatorOf<T, false>, NARROW && kSmallInteger<T>>;
  using M = Arith<Acc>;
  const int HX = a.halo_x, columns = a.halo_y * HX, row_above = a.pass[1].taps ? HX : 0;
  const Acc cval = (Acc)a.cval;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  Acc* ring = reinterpret_cast<Acc*>(shared_bytes);  // [3][columns]: planes z-1, z, z+1 in turn
  const int64_t y0 = (int64_t)blockIdx.y * a.tile_y, x0 = (int64_t)blockIdx.x * a.tile_x;
  const int64_t first = (int64_t)blockIdx.z * a.planes_per_block;
  const int steps = (int)min((int64_t)a.planes_per_block, a.n[0] - first);
  const ThreadMap m = map_thread(a, y0, x0);

  S next[kMaxColumns];
  auto put = [&](int slot, bool loaded) {
#pragma unroll
    for (int j = 0; j < kMaxColumns; ++j) {
      const int c = threadIdx.x + j * kThreads;
      if (c >= columns) break;
      ring[slot * columns + c] = !loaded || (m.cval_rows >> j & 1u) ? cval : as_acc<T, Acc>(next[j]);
    }
  };
  // x[k - 1] + x[k + 1] - 2 x[k] in scipy's order: (-2 x) + (left + right).
  auto second_difference = [](Acc left, Acc centre, Acc right) {
    if constexpr (std::is_integral_v<Acc>) return (left + right) - 2 * centre;  // exact in any order
    else return M::add(M::mul(centre, (Acc)-2), M::mul(M::add(left, right), (Acc)1));
  };
  auto rounded = [](Acc v) {
    if constexpr (std::is_integral_v<Acc>) {
      return storage_of<T>(v);
    } else {
      S r;
      store_from_double<T>(reinterpret_cast<char*>(&r), (double)v);
      return r;
    }
  };
  put(0, fetch_plane<T>(a, first, 0, m.in_offset, columns, next));
  put(1, fetch_plane<T>(a, first, 1, m.in_offset, columns, next));
  bool loaded = fetch_plane<T>(a, first, 2, m.in_offset, columns, next);

  for (int s = 0; s < steps; ++s) {
    const int below = s % 3, centre = (s + 1) % 3, above = (s + 2) % 3;
    if (s > 0) __syncthreads();  // every thread is done with the plane `above` replaces
    put(above, loaded);
    if (s + 1 < steps) loaded = fetch_plane<T>(a, first, s + 3, m.in_offset, columns, next);
    __syncthreads();

    char* plane = a.out + (first + s) * a.out_step[0];
    const Acc* mid = ring + centre * columns;
#pragma unroll
    for (int i = 0; i < kMaxOutputs; ++i) {
      if (m.b_index[i] < 0) continue;
      const int c = m.b_index[i] + row_above + 1;  // the output's own column in the halo
      Acc left = mid[c - 1], right = mid[c + 1];
      if (a.pass[2].mode == Mode::Constant) {  // the same for the whole grid; the division only here
        const int64_t x = x0 + m.b_index[i] % HX;
        if (x == 0) left = cval;
        if (x + 1 == a.n[2]) right = cval;
      }
      S sum = rounded(second_difference(ring[below * columns + c], mid[c], ring[above * columns + c]));
      if (row_above) {
        const S d1 = rounded(second_difference(mid[c - HX], mid[c], mid[c + HX]));
        sum = elementwise_value<T>(Elementwise::Add, sum, d1);
      }
      sum = elementwise_value<T>(Elementwise::Add, sum, rounded(second_difference(left, mid[c], right)));
      *reinterpret_cast<S*>(plane + m.out_offset[i]) = sum;
    }
  }
}

// False for the dtypes laplace's kernel is not built for: they run pass by
// pass. `narrow`: 8-bit and 16-bit integers summed in int32.
template <DType T>
struct LaplaceKernels {
  static bool run(const FusedPlan& plan, bool narrow, cudaStream_t stream) {
    if constexpr (kSmallInteger<T>) {
      if (narrow) {
        launch(laplace_kernel<T, true>, plan, stream);
        return true;
      }
    }
    if constexpr (is_image_dtype(T)) {
      launch(laplace_kernel<T, false>, plan, stream);
      return true;
    }
    return false;
  }
};

template <DType T>
bool LaplaceLauncher<T>::run(const FusedPlan& plan, bool narrow, cudaStream_t stream) {
  return LaplaceKernels<T>::run(plan, narrow, stream);
}

}  // namespace gpufilt::cuda::fused
