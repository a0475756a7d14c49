// The host side every fused kernel family shares: launching a kernel over a
// plan, the grid of a column kernel, the stores a row allows, and the type
// a chain is summed in.
#pragma once
#include <utility>

#include "cuda/fused/sums.cuh"

namespace gpufilt::cuda::fused {

// Launches `kernel` over the plan, opting in to more than the default shared
// memory when its tile needs it (a per-kernel, per-device setting).
template <class Kernel>
void launch(Kernel* kernel, const FusedPlan& plan, cudaStream_t stream) {
  if (plan.shared_bytes > (size_t)kDefaultShared)
    GF_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)plan.shared_bytes));
  kernel<<<plan.grid, kThreads, plan.shared_bytes, stream>>>(plan.args);
  GF_CUDA_CHECK_LAUNCH();
}

// True when Q outputs of a row of `out` can be stored with one aligned
// access (FusedArgs::run_stores): contiguous rows, each aligned to Q elements.
template <DType T, int Q>
bool run_stores(const FusedArgs& a, const ArrayDesc& out) {
  const int64_t item = sizeof(typename storage<T>::type), run = Q * item;
  return a.out_step[2] == item && a.out_step[0] % run == 0 && a.out_step[1] % run == 0 &&
         reinterpret_cast<uintptr_t>(out.data) % run == 0;
}

// The grid of a column kernel (long_pass.cuh, min_max.cuh) for the pass
// along `stage` 0 or 1 of `a`: such a kernel filters stage 0, so a pass along
// stage 1 swaps the two in `a`. A block holds `threads` positions of the
// last axis and a segment of `segment` outputs along the filtered one; false
// where the grid's y or z would exceed the device's limit.
inline bool column_grid(FusedArgs& a, int stage, int threads, int segment, dim3& grid) {
  if (stage == 1) {
    std::swap(a.n[0], a.n[1]);
    std::swap(a.in_step[0], a.in_step[1]);
    std::swap(a.out_step[0], a.out_step[1]);
    std::swap(a.pass[0], a.pass[1]);
  }
  const int64_t gy = (a.n[0] + segment - 1) / segment, gz = a.n[1];
  if (gy > kMaxGridYZ || gz > kMaxGridYZ) return false;
  grid = dim3((unsigned)((a.n[2] + threads - 1) / threads), (unsigned)gy, (unsigned)gz);
  return true;
}

// Calls f(Acc{}) with the type the chain is held in: float, int32 or
// double. 16-bit correlations keep double (with fused multiply-adds where
// they may: fma_results): summed in float with a margin (0.047 for a
// uint16 gaussian of sigma 2) about one output in ten needed the double sum
// again, which cost more than the double sums saved (H100, 8192^2 uint16:
// 0.414 -> 0.583 ms); summed exactly in 64-bit fixed point, their widening
// multiply-adds cost more than double's (0.39 -> 0.52 ms). 8-bit
// correlations summed exactly in int32 fixed point (two shifts for the
// integer part and the fraction instead of a truncation, a distance and a
// conversion back) were slower too where the taps are many: IMAD has half
// of the FMA pipe, FFMA all of it (H100, uint8 gaussian: 256^3 sigma 1
// 0.159 -> 0.171 ms, 8192^2 sigma 2 0.270 -> 0.287; faster only with 9
// taps on 8192^2, 0.207 -> 0.19, and in the long passes, 0.297 -> 0.282).
template <DType T, class F>
bool with_accumulator(const FusedPlan& plan, const F& f) {
  if constexpr (T == DType::Float32 || T == DType::Float16) {
    if (plan.float_sums) return f(float{});
  }
  if constexpr (kEightBit<T>) {
    if (plan.eight_bit_float) return f(float{});  // correlations, minima and maxima
  }
  if constexpr (kSmallInteger<T>) {
    if (plan.int32_chain) return f(int32_t{});  // 8-bit: chains with uniform passes or integer weights
  }
  return f(double{});
}

}  // namespace gpufilt::cuda::fused
