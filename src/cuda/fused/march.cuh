// The plane march of fused_kernel and laplace_kernel: what a thread of a
// tile touches, decoded once per block, and the loads of one input plane.
#pragma once
#include "cuda/fused/sums.cuh"

namespace gpufilt::cuda::fused {

// What a thread touches, decoded once per block. Haloed column c (of the
// ring and A) is threadIdx.x + j * kThreads; B entry e and output entry o
// likewise with i.
struct ThreadMap {
  int32_t in_offset[kMaxColumns];  // column j's input byte offset within a plane (plane_fits_int32)
  uint32_t cval_rows = 0;          // bit j: column j lies in a constant-mode row
  uint32_t cval_b = 0;             // bit i: B entry i lies in a constant-mode column
  int32_t out_offset[kMaxOutputs]; // output entry i's byte offset within a plane
  int b_index[kMaxOutputs];        // and its B index; -1 outside the array
};

__device__ inline ThreadMap map_thread(const FusedArgs& a, int64_t y0, int64_t x0) {
  const FusedPass &p1 = a.pass[1], &p2 = a.pass[2];
  const int HX = a.halo_x, columns = a.halo_y * HX;
  ThreadMap m;
#pragma unroll
  for (int j = 0; j < kMaxColumns; ++j) {
    const int c = threadIdx.x + j * kThreads;
    if (c >= columns) break;
    int64_t y = border_index(y0 - p1.left + c / HX, a.n[1], p1.mode);
    int64_t x = border_index(x0 - p2.left + c % HX, a.n[2], p2.mode);
    if (y < 0) m.cval_rows |= 1u << j;
    y = max(y, (int64_t)0);  // constant-mode cells are loaded from anywhere and replaced
    x = max(x, (int64_t)0);
    m.in_offset[j] = (int32_t)(y * a.in_step[1] + x * a.in_step[2]);
  }
#pragma unroll
  for (int i = 0; i < kMaxBEntries; ++i) {
    const int e = threadIdx.x + i * kThreads;
    const int64_t x = x0 - p2.left + e % HX;
    if (e < a.tile_y * HX && p2.mode == Mode::Constant && (x < 0 || x >= a.n[2])) m.cval_b |= 1u << i;
  }
#pragma unroll
  for (int i = 0; i < kMaxOutputs; ++i) {
    const int o = threadIdx.x + i * kThreads, ty = o / a.tile_x, tx = o % a.tile_x;
    const int64_t y = y0 + ty, x = x0 + tx;
    const bool inside = o < a.tile_y * a.tile_x && y < a.n[1] && x < a.n[2];
    m.b_index[i] = inside ? ty * HX + tx : -1;
    m.out_offset[i] = inside ? (int32_t)(y * a.out_step[1] + x * a.out_step[2]) : 0;
  }
  return m;
}

// Loads relative plane p of this block (its first plane minus pass 0's left
// taps, plus p) for the thread's columns (byte offsets within a plane); false
// when the plane is all cval.
template <DType T, int J>
__device__ bool fetch_plane(const FusedArgs& a, int64_t first, int p, const int32_t (&offset)[J], int columns,
                            typename storage<T>::type (&reg)[J]) {
  using S = typename storage<T>::type;
  const int64_t z = border_index(first - a.pass[0].left + p, a.n[0], a.pass[0].mode);
  if (z < 0) return false;
  const char* plane = a.in + z * a.in_step[0];
#pragma unroll
  for (int j = 0; j < J; ++j) {
    if (threadIdx.x + j * kThreads >= columns) break;
    reg[j] = __ldg(reinterpret_cast<const S*>(plane + offset[j]));
  }
  return true;
}

}  // namespace gpufilt::cuda::fused
