// What the planner (fused.cu) and the fused kernel families (fused/*.cuh)
// share: the chain as the kernels take it (FusedArgs), the plan of its
// launch (FusedPlan), the host helpers the launchers ask, and each family's
// entry point. The families are compiled once per dtype, in the translation
// units cmake/cuda_instances.cmake lists, so that the build spreads over every
// core and an edit recompiles only the family it touches.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/array.hpp"
#include "core/dtype.hpp"
#include "core/separable.hpp"

namespace gpufilt::cuda::fused {

constexpr int kThreads = 256;
constexpr int kLongBuckets[] = {17, 33, 65};  // tap counts the long-pass kernels are built for (65: sums in float)
constexpr int kMaxLongTaps = 65;
constexpr int kMaxTaps = 17;         // per axis in the fused tiles: radius 8, gaussian sigma 2
constexpr int kMaxColumns = 8;       // haloed columns a thread loads per plane
constexpr int kMaxBEntries = 8;      // pass-1 results a thread computes per plane
constexpr int kMaxOutputs = 4;       // outputs a thread stores per plane
constexpr int kSharedBudget = 64 * 1024;
constexpr int kDefaultShared = 48 * 1024;  // more needs an opt-in per kernel
constexpr int kMaxGridYZ = 65535;

// One pass of the chain, or none (taps == 0: the axis is copied through).
struct FusedPass {
  int taps = 0, left = 0, symmetry = 0;
  int skip = 0;               // taps of a long-pass bucket before the pass's own (pad_pass)
  LineKind kind = LineKind::Correlate;
  Mode mode = Mode::Nearest;  // for no pass: clamps the tile's overhang
  double size = 1.0;          // the uniform divisor
  float inverse_size = 1.0f;  // 1 / size, for data summed in float (apply_kind)
  double weights[kMaxLongTaps] = {};
  float weights_f[kMaxLongTaps] = {};  // the same, for data summed in float
  int32_t weights_i[kMaxLongTaps] = {};  // the same where integers, for int32 sums (FusedPlan::int32_chain)
  float margin = 0;                // 8-bit data summed in float: see fast_results
  float far_margin = 1.0f;         // 1 - margin, rounded down (fast_results)
  bool in_range = false;           // and no truncated sum leaves the dtype (eight_bit_float_sums)
  // 16-bit integer data summed in double with fused multiply-adds
  // (fma_results), and its margin in 2^-32 units (integer_fma_margin)
  bool fma_sums = false;
  uint32_t fma_margin = 0;
  double pair_sign = 1.0;          // symmetry as a factor: +1 or -1 (KindOf<Correlate, kEitherSymmetry>)
  float pair_sign_f = 1.0f;
  int32_t pair_sign_i = 1;
};

// How plane_kernel puts its results into the output: stored, or first
// squared and / or added to what the output holds, the sum square-rooted
// last: the sums of gaussian_laplace and gaussian_gradient_magnitude
// (fused_derivative_sum), in the output dtype with numpy's arithmetic, each
// operation rounded (store_combined).
enum class Combine : uint8_t { Store, Square, Add, SquareAdd, SquareAddRoot };

struct FusedArgs {
  const char* in;
  char* out;
  int64_t n[3], in_step[3], out_step[3];  // plane, row and column axes; bytes
  FusedPass pass[3];
  double cval;
  int tile_y, tile_x, halo_y, halo_x;  // halo_*: tile plus taps - 1
  int planes_per_block;
  bool run_stores;  // plane_kernel: kQuad outputs of a row go out in one aligned store
  Combine combine = Combine::Store;  // plane_kernel only
};
static_assert(sizeof(FusedArgs) <= 4096, "fused arguments must stay a small parameter block");

struct FusedPlan {
  FusedArgs args;
  dim3 grid;
  size_t shared_bytes;
  bool float_sums;       // float32/float16 summed in float (no pass may_cancel)
  bool small_integers;   // 8/16-bit integer data reading integers of the dtype only (small_integer_values)
  bool eight_bit_float;  // 8-bit data summed in float, exactly (pass_results; 2-D tiles, long passes, blocked_kernel)
  bool int32_chain;      // 8/16-bit integer chains of box passes and integer weights summed in int32 (int32_sums)
  bool integer_held;     // other chains of small_integers: held in int32, summed in double
  bool cval_is_value;    // no pass reads cval, or cval is a value of the dtype (box_chain_keeps_values)
};

// The dtypes images and volumes come in: the fused kernels are built for
// them only; other dtypes take the line kernels of separable.cu (a smaller
// build). int8 is one: without the
// tile kernels its 2-D gaussian (sigma 2, 8192^2) took 1.97 ms on the H100,
// six times uint8's.
constexpr bool is_image_dtype(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::Float64 || t == DType::UInt8 ||
         t == DType::Int8 || t == DType::UInt16 || t == DType::Int16;
}

// The tap count every pass of a chain shares, else 0.
int shared_taps(const FusedArgs& a);

// The tap count every pass of the chain shares when the tiles are built for
// it (3, 9 or 17: sobel, prewitt, gaussian sigma 1 and 2, uniform, minimum
// and maximum filters of size 3 and 9), else 0.
int specialised_taps(const FusedArgs& a);

// The kind every pass of the chain shares when fused_kernel is also built
// for it (uniform, minimum, maximum), else Correlate.
LineKind shared_box_kind(const FusedArgs& a);

// True when every pass is a symmetric or antisymmetric correlation (sobel, prewitt).
bool signed_pairs(const FusedArgs& a);

// True when every pass is a symmetric correlation (gaussian filters).
bool symmetric_pairs(const FusedArgs& a);

// True when some pass of the chain was padded to a bucket (pad_pass): the
// kernel must skip the taps that are not its own (KindOf::padded).
bool padded(const FusedArgs& a);

// Lays pass p out in a kernel built for `bucket` >= p.taps taps
// (KindOf::padded): a symmetric correlation centred in it (p.skip taps that
// are not its own before and after), any other pass at its end (p.skip
// before); its weights and window move with it.
void pad_pass(FusedPass& p, int bucket);

// Planes a block marches along axis 0 when `tiles` blocks cover a plane and
// `resident` blocks run at once, the first `halo` of them read for the halo
// only: the length that minimises waves x (planes + halo).
int64_t march_planes(int64_t n0, int64_t tiles, int64_t resident, int64_t halo);

// The families' entry points, for every real dtype (dispatch_real_dtype);
// each defined in its family's header. False: no kernel of the family takes
// the chain.
template <DType T>
struct FusedLauncher {  // fused/tile.cuh: any chain plan_fused planned (tiles_built_for)
  static void run(const FusedPlan& plan, cudaStream_t stream);
};
template <DType T>
struct BlockedLauncher {  // fused/blocked.cuh: 3-D chains of three 9-tap passes, or padded to 9
  static bool run(FusedPlan plan, const ArrayDesc& out, cudaStream_t stream);
};
template <DType T>
struct PlaneLauncher {  // fused/plane.cuh: 2-D chains (of 3, 9 or 17 taps, or padded to 9 or 17)
  static bool run(const FusedPlan& plan, const ArrayDesc& out, cudaStream_t stream);
};
template <DType T>
struct LastAxisFirstLauncher {  // fused/last_axis.cuh: sobel and prewitt along the last axis
  static bool run(FusedPlan plan, int ndim, cudaStream_t stream);
};
template <DType T>
struct LongPassLauncher {  // fused/long_pass.cuh: single passes of up to 65 taps, in buckets
  static bool run(const FusedPlan& plan, int stage, const ArrayDesc& out, cudaStream_t stream);
};
template <DType T>
struct LaplaceLauncher {  // fused/laplace.cuh
  static bool run(const FusedPlan& plan, bool narrow, cudaStream_t stream);
};

}  // namespace gpufilt::cuda::fused
