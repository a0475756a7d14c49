// Fused separable chains: up to three 1-D passes of a chain (core/separable.hpp),
// one per axis of a 2-D or 3-D array, computed with one read of the input and
// one write of the output instead of a read and a write per pass. This file
// plans a chain (which arrays, passes, sums and tile) and picks the kernel
// family that runs it; the families live in fused/:
//   tile.cuh       fused_kernel: chains in axis order, a tile marching along axis 0
//   blocked.cuh    blocked_kernel: 3-D chains of three 9-tap passes, register-blocked
//   plane.cuh      plane_kernel: 2-D chains
//   last_axis.cuh  sobel and prewitt along the last axis (rows or columns first)
//   long_pass.cuh  single passes of up to 65 taps, in buckets of 17, 33 and 65
//   laplace.cuh    scipy's laplace in one pass
// with what they share in sums.cuh (how a pass sums and rounds), march.cuh,
// launch.cuh and plan.cuh. Each family is compiled once per dtype, in the
// translation units cmake/cuda_instances.cmake lists.
//
// Chains this does not cover (tap counts the tiles are not built for:
// tiles_built_for; more axes, other orders, tiles too large for shared
// memory, dtype conversions, overlapping arrays, layouts whose last axis is
// not the most contiguous) run pass by pass, and each pass of a 2-D or 3-D
// array is again tried here alone (CudaBackend::line_pass), in a tile or a
// long-pass kernel, before the line kernels of separable.cu take it.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "core/cast.hpp"
#include "cuda/api.hpp"
#include "cuda/check.cuh"
#include "cuda/elements.cuh"
#include "cuda/fused/plan.cuh"

namespace gpufilt::cuda::fused {
namespace {

FusedPass fused_pass(const LinePass& pass) {
  FusedPass p;
  p.taps = (int)pass.taps();
  p.left = (int)pass.left();
  p.symmetry = pass.symmetry();
  p.pair_sign = p.pair_sign_f = p.symmetry < 0 ? -1.0f : 1.0f;
  p.pair_sign_i = p.symmetry < 0 ? -1 : 1;
  p.kind = pass.kind;
  p.mode = pass.mode;
  p.size = (double)pass.size;
  p.inverse_size = (float)(1.0 / p.size);
  if (pass.kind == LineKind::Correlate) {
    std::copy(pass.weights.begin(), pass.weights.end(), p.weights);
    std::copy(pass.weights.begin(), pass.weights.end(), p.weights_f);
  }
  return p;
}

// True when the last axis is the most contiguous one of `a`: the tile's rows
// are then read and written in coalesced runs.
bool last_axis_innermost(const ArrayDesc& a) {
  const int64_t inner = std::llabs(a.strides[a.ndim - 1]);
  for (int d = 0; d + 1 < a.ndim; ++d)
    if (a.shape[d] > 1 && std::llabs(a.strides[d]) < inner) return false;
  return true;
}

// True when every byte offset within one plane (all axes but the first)
// fits in 32 bits: the kernel keeps them in half the registers.
bool plane_fits_int32(const ArrayDesc& a) {
  int64_t span = 0;
  for (int d = 1; d < a.ndim; ++d) span += (a.shape[d] - 1) * std::llabs(a.strides[d]);
  return span < INT32_MAX;
}

bool fusable(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& passes, int max_taps) {
  if (in.ndim < 2 || in.ndim > 3 || in.dtype != out.dtype || is_complex(in.dtype)) return false;
  if (!same_shape(in, out) || in.size() == 0 || may_overlap(in, out)) return false;
  if (!is_aligned(in) || !is_aligned(out) || !last_axis_innermost(in) || !last_axis_innermost(out))
    return false;
  if (in.ndim == 3 && (!plane_fits_int32(in) || !plane_fits_int32(out))) return false;
  if (passes.empty() || passes.size() > (size_t)in.ndim) return false;
  for (size_t k = 0; k < passes.size(); ++k) {
    const LinePass& p = passes[k];
    if (p.axis < 0 || p.axis >= in.ndim || p.taps() < 1 || p.taps() > max_taps) return false;
    if (k > 0 && p.axis <= passes[k - 1].axis) return false;  // one per axis, in axis order
  }
  return true;
}

// The largest magnitude of an 8-bit or 16-bit integer dtype; 0 for others.
double small_integer_magnitude(DType t) {
  switch (t) {
    case DType::UInt8: return integer_magnitude(8, false);
    case DType::Int8: return integer_magnitude(8, true);
    case DType::UInt16: return integer_magnitude(16, false);
    case DType::Int16: return integer_magnitude(16, true);
    default: return 0;
  }
}

// True when pass p extends its lines with cval.
bool extends_with_cval(const FusedPass& p) { return p.taps && p.mode == Mode::Constant; }

// True when some pass of the chain does.
bool extends_with_cval(const FusedArgs& a) {
  return std::any_of(a.pass, a.pass + 3, [](const FusedPass& p) { return extends_with_cval(p); });
}

// True for 8-bit and 16-bit integer data whose chain `a` reads integers of
// at most the dtype's magnitude only: a cval, where a pass extends with it,
// that is such an integer. What int32 holds exactly, and what the margins
// of float and fused sums are bounded by.
bool small_integer_values(DType dtype, double cval, const FusedArgs& a) {
  const double magnitude = small_integer_magnitude(dtype);
  return magnitude > 0 && (!extends_with_cval(a) || (cval == std::floor(cval) && std::fabs(cval) <= magnitude));
}

// True when a box chain of this dtype reads only values of the dtype: no
// pass extends with cval, or cval is one (float32: any, as its chains never
// round between passes). Its minima, maxima and integer means are then
// values of the dtype too, kept without a rounding (kKeepsValues), and
// unsigned data's sums are never negative (KindOf::non_negative).
bool box_chain_keeps_values(DType dtype, double cval, const FusedArgs& a) {
  return !extends_with_cval(a) || dtype == DType::Float32 || is_value_of(dtype, cval);
}

// True when no truncated sum of correlation p, over values in [lo, hi],
// leaves the dtype's range [least, most]: the exact sum lies between the
// sums of each weight's smaller and larger product, the float sum within
// p.margin of it (and these sums within far less than the slack of theirs).
bool sums_stay_in_range(const FusedPass& p, double lo, double hi, double least, double most) {
  double low = 0, high = 0, total = 0;
  for (int k = 0; k < p.taps; ++k) {
    low += std::min(p.weights[k] * lo, p.weights[k] * hi);
    high += std::max(p.weights[k] * lo, p.weights[k] * hi);
    total += std::fabs(p.weights[k]);
  }
  const double slack = p.margin + 0x1p-30 * (1.0 + total * std::max(std::fabs(lo), std::fabs(hi)));
  return std::trunc(low - slack) >= least && std::trunc(high + slack) <= most;  // false for NaN
}

// True when a chain over 8-bit data of small_integer_values may be summed
// in float (pass_results): correlations with a margin whose sums stay below
// 2^22 (storage_of), minima and maxima (exact in float). Sets each
// correlation's margins, and whether its sums stay in the dtype (values of
// the dtype, and cval where the pass extends with it: FusedPass::in_range).
bool eight_bit_float_sums(DType dtype, FusedArgs& a) {
  if (dtype != DType::UInt8 && dtype != DType::Int8) return false;
  for (FusedPass& p : a.pass) {
    if (p.taps == 0) continue;
    if (p.kind == LineKind::Uniform) return false;
    if (p.kind != LineKind::Correlate) continue;
    if (!integer_float_margin(p.weights, p.taps, p.symmetry, small_integer_magnitude(dtype), 0x1p22, p.margin))
      return false;
    // Flagged from the far side when the distance to the next integer,
    // 1 - part, is below the margin: part > 1 - margin, rounded down so as
    // to flag at least those (a margin of 0, exact sums, flags none).
    p.far_margin = p.margin > 0 ? std::nextafter((float)(1.0 - p.margin), 0.0f) : 1.0f;
    const double least = dtype == DType::UInt8 ? 0 : -128, most = dtype == DType::UInt8 ? 255 : 127;
    const bool with_cval = extends_with_cval(p);
    p.in_range = sums_stay_in_range(p, with_cval ? std::min(least, a.cval) : least,
                                    with_cval ? std::max(most, a.cval) : most, least, most);
  }
  return true;
}

// Sets p.weights_i to the weights of correlation p and returns true when
// int32 sums them exactly over integers of up to `magnitude`: integer
// weights whose sums stay within int32 (sobel's and prewitt's). scipy's
// double sums of such terms are exact too, so the two agree to the bit.
bool int32_weights(FusedPass& p, double magnitude) {
  double total = 0;
  for (int k = 0; k < p.taps; ++k) {
    const double w = p.weights[k];
    if (!(std::fabs(w) <= 0x1p16) || w != std::floor(w)) return false;
    total += std::fabs(w);
  }
  if (!(2 * magnitude * total < 0x1p31)) return false;  // 2: a pair's sum before its weight
  for (int k = 0; k < p.taps; ++k) p.weights_i[k] = (int32_t)p.weights[k];
  return true;
}

// How a chain over 8-bit or 16-bit integers (small_integer_values) sums:
// in int32 (true) where every pass is a uniform, minimum or maximum filter
// or a correlation with int32_weights: exact there, and half the registers
// and shared memory of double (H100, 8192^2 uint16: uniform 3 0.266 ->
// 0.216 ms, maximum 3 0.185 -> 0.125). Other 16-bit correlations in the
// long passes sum with fused multiply-adds (fma_results, where
// integer_fma_margin takes the weights; sets their margins).
bool int32_sums(DType dtype, FusedArgs& a) {
  const bool sixteen = dtype == DType::UInt16 || dtype == DType::Int16;
  const double magnitude = small_integer_magnitude(dtype);
  bool exact = true;
  for (FusedPass& p : a.pass) {
    if (p.taps == 0 || p.kind != LineKind::Correlate || int32_weights(p, magnitude)) continue;
    exact = false;
    p.fma_sums = sixteen && integer_fma_margin(p.weights, p.taps, p.symmetry, magnitude, p.fma_margin);
  }
  return exact;
}

// True when a pass of the chain sums (a uniform filter or a correlation).
bool sums_values(const FusedArgs& a) {
  return std::any_of(a.pass, a.pass + 3, [](const FusedPass& p) {
    return p.taps && (p.kind == LineKind::Uniform || p.kind == LineKind::Correlate);
  });
}

// A, B and the ring, in elements of the accumulator (`item` bytes).
size_t shared_bytes_for(const FusedArgs& a, size_t item) {
  const size_t columns = (size_t)a.halo_y * a.halo_x;
  const size_t ring_len = std::max(a.pass[0].taps, 1);
  return (columns * (1 + ring_len) + (size_t)a.tile_y * a.halo_x) * item;
}

// Picks the largest tile whose halo and ring fit the shared-memory budget.
bool choose_fused_tile(FusedArgs& a, size_t item, bool has_rows, size_t& shared) {
  static const int kTiles3[][2] = {{16, 64}, {8, 64}, {8, 32}, {4, 32}};
  static const int kTiles2[][2] = {{1, 256}, {1, 128}};
  const int (*tiles)[2] = has_rows ? kTiles3 : kTiles2;
  const int count = has_rows ? 4 : 2;
  for (int t = 0; t < count; ++t) {
    a.tile_y = tiles[t][0];
    a.tile_x = tiles[t][1];
    a.halo_y = a.tile_y + std::max(a.pass[1].taps, 1) - 1;
    a.halo_x = a.tile_x + std::max(a.pass[2].taps, 1) - 1;
    shared = shared_bytes_for(a, item);
    if (a.halo_y * a.halo_x <= kMaxColumns * kThreads && a.tile_y * a.halo_x <= kMaxBEntries * kThreads &&
        a.tile_y * a.tile_x <= kMaxOutputs * kThreads && shared <= (size_t)kSharedBudget)
      return true;
  }
  return false;
}

// The chain's arrays and passes as the kernels take them, and how they sum;
// false when no kernel here takes it (passes of up to max_taps).
bool describe_chain(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& passes, double cval,
                    int max_taps, FusedPlan& plan) {
  if (!fusable(in, out, passes, max_taps)) return false;
  FusedArgs& a = plan.args;
  a = FusedArgs{};
  a.in = in.data;
  a.out = out.data;
  a.cval = cval;
  // Array axes onto the plane, row and column stages; a 2-D array has one row.
  const int stage_of_axis[2][3] = {{0, 2, -1}, {0, 1, 2}};
  const int* stage = stage_of_axis[in.ndim - 2];
  for (int s = 0; s < 3; ++s) a.n[s] = 1;
  for (int d = 0; d < in.ndim; ++d) {
    a.n[stage[d]] = in.shape[d];
    a.in_step[stage[d]] = in.strides[d];
    a.out_step[stage[d]] = out.strides[d];
  }
  for (const LinePass& p : passes) a.pass[stage[p.axis]] = fused_pass(p);

  const bool may_cancel = std::any_of(passes.begin(), passes.end(), [](const LinePass& p) { return p.may_cancel(); });
  plan.float_sums = float_sums_allowed(in.dtype, out.dtype, may_cancel);
  plan.small_integers = small_integer_values(in.dtype, cval, a);
  plan.int32_chain = plan.small_integers && int32_sums(in.dtype, a);
  // 8-bit chains that int32 sums exactly sum there, without float's margin
  // test; those of minima and maxima only stay in float.
  plan.eight_bit_float =
      plan.small_integers && !(plan.int32_chain && sums_values(a)) && eight_bit_float_sums(in.dtype, a);
  plan.integer_held = plan.small_integers && !plan.int32_chain;
  plan.cval_is_value = box_chain_keeps_values(in.dtype, cval, a);
  return true;
}

// True when the tile kernels are built for the chain's tap counts (FusedLauncher,
// PlaneLauncher, BlockedLauncher): every pass of 3 or 9 taps, or of 17 on a
// 2-D array (plane_kernel), or a box chain of 5 or 7 held narrow that reads
// only values of its dtype (launch_box_chain). Other chains are padded into
// a tile's taps where one holds them (plan_padded), else run pass by pass,
// each pass in the long-pass kernel of its bucket, whose cost follows its
// taps (fused_kernel with the taps known at run time cost 3-8 times that:
// H200, 512^3 float32 gaussian sigma 1.5 5.40 ms, sigma 1 0.72).
bool tiles_built_for(DType dtype, int ndim, const FusedPlan& plan) {
  if (!is_image_dtype(dtype)) return false;
  const int taps = shared_taps(plan.args);
  if (taps == 3 || taps == 9 || (taps == 17 && ndim == 2)) return true;
  const bool narrow_float = dtype == DType::Float32 || dtype == DType::Float16;
  const bool narrow = narrow_float ? plan.float_sums : small_integer_magnitude(dtype) > 0 && plan.int32_chain;
  return (taps == 5 || taps == 7) && narrow && plan.cval_is_value &&
         shared_box_kind(plan.args) != LineKind::Correlate;
}

bool plan_fused(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& passes,
                double cval, FusedPlan& plan) {
  if (!describe_chain(in, out, passes, cval, kMaxTaps, plan) || !tiles_built_for(in.dtype, in.ndim, plan))
    return false;
  FusedArgs& a = plan.args;
  const bool narrow = plan.float_sums || plan.int32_chain || plan.integer_held;  // see launch_fused
  const size_t item = narrow ? sizeof(float) : sizeof(double);
  if (!choose_fused_tile(a, item, in.ndim == 3, plan.shared_bytes)) return false;
  // Long marches amortise the ring's first planes; enough of them fill the
  // GPU. 64 planes where that still leaves eight blocks an SM: H100, 512^3
  // float32, marches of 32/64/128/256 planes: uniform 3 0.611/0.603/0.609/
  // 0.620 ms, sobel 0.754/0.747/0.750/0.752, laplace 0.640/0.632/0.633/0.729
  // (blocked_kernel chooses its own: march_planes).
  const int64_t gx = (a.n[2] + a.tile_x - 1) / a.tile_x, gy = (a.n[1] + a.tile_y - 1) / a.tile_y;
  const bool long_marches = gx * gy * ((a.n[0] + 63) / 64) >= 8LL * multiprocessors();
  a.planes_per_block = (int)std::min<int64_t>(a.n[0], std::max(long_marches ? 64 : 32, 8 * (a.pass[0].taps - 1)));
  const int64_t gz = (a.n[0] + a.planes_per_block - 1) / a.planes_per_block;
  if (gy > kMaxGridYZ || gz > kMaxGridYZ || gx > INT32_MAX) return false;
  plan.grid = dim3((unsigned)gx, (unsigned)gy, (unsigned)gz);
  return true;
}

// The taps a chain is padded to (pad_pass): a 3-D chain of three passes of
// up to 9 taps blocked_kernel's 9 (gaussian sigma 0.4 to 1.1, box sizes 2 to
// 8, different sizes per axis), a 2-D chain plane_kernel's 3, 9 or 17
// (passes that already have them stay as they are); 0 where no tile holds
// the chain. Every tap of the bucket costs time, skipped or not (the loops
// unroll over the bucket), but one fused kernel reads and writes the data
// once, where pass by pass reads and writes it once a pass.
int padded_taps(int ndim, const FusedArgs& a) {
  int passes = 0, most = 0;
  for (const FusedPass& p : a.pass)
    if (p.taps) ++passes, most = std::max(most, p.taps);
  if (ndim == 3) return passes == 3 && most <= 9 ? 9 : 0;
  if (const int built = specialised_taps(a)) return built;
  return most <= 9 ? 9 : most <= 17 ? 17 : 0;
}

void pad_chain(FusedArgs& a, int bucket) {
  for (FusedPass& p : a.pass)
    if (p.taps) pad_pass(p, bucket);
}

// True for 16-bit data summed in double (with_accumulator), for which
// plane_kernel spills already (PlaneGeometry): padded to 17 taps or run over
// a volume's planes after its split, it costs more than the passes it saves
// (H100, 16384^2 uint16 gaussian sigma 1.5: 2.85 ms pass by pass, 5.65
// padded; 512^3 sigma 1.5: 2.21 pass by pass, 3.71 split). Others gain
// (16384^2 float64 3.31 -> 3.22, float32 gaussian_laplace 6.81 -> 5.20).
bool spills_in_plane_kernel(DType dtype, const FusedPlan& plan) {
  return itemsize(dtype) == 2 && !(plan.float_sums || plan.eight_bit_float || plan.int32_chain);
}

// Plans a chain in axis order that plan_fused does not take into the tile
// kernel whose taps hold it, each pass padded (pad_pass); false where none
// does (or where it would spill: spills_in_plane_kernel).
bool plan_padded(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& passes, double cval,
                 FusedPlan& plan) {
  if (!is_image_dtype(in.dtype) || !describe_chain(in, out, passes, cval, kMaxTaps, plan)) return false;
  const int bucket = padded_taps(in.ndim, plan.args);
  if (bucket == 0 || (bucket == 17 && spills_in_plane_kernel(in.dtype, plan))) return false;
  pad_chain(plan.args, bucket);
  return true;
}

// Plans the passes along axes 1 and 2 of a 3-D array (`rest`) as a stack of
// 2-D chains for plane_kernel, each plane of axis 0 a layer of its grid
// (stage 1, which a 2-D array leaves unused), the passes padded to its taps;
// false where plane_kernel does not take them.
bool plan_plane_stack(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& rest, double cval,
                      FusedPlan& plan) {
  if (in.ndim != 3 || rest.empty() || rest[0].axis == 0 || !is_image_dtype(in.dtype) ||
      !describe_chain(in, out, rest, cval, kMaxTaps, plan))
    return false;
  FusedArgs& a = plan.args;  // rows on stage 0, planes on stage 1, as plane_kernel takes them
  std::swap(a.n[0], a.n[1]);
  std::swap(a.in_step[0], a.in_step[1]);
  std::swap(a.out_step[0], a.out_step[1]);
  std::swap(a.pass[0], a.pass[1]);
  const int bucket = padded_taps(2, a);
  // within the grid's limits: tiles of 32 rows or more, a plane a layer
  if (bucket == 0 || (a.n[0] + 31) / 32 > kMaxGridYZ || a.n[1] > kMaxGridYZ) return false;
  pad_chain(a, bucket);
  return true;
}

}  // namespace

// The host helpers plan.cuh declares for the launchers (their comments are there).

bool padded(const FusedArgs& a) {
  return std::any_of(a.pass, a.pass + 3, [](const FusedPass& p) { return p.skip > 0; });
}

int shared_taps(const FusedArgs& a) {
  int taps = 0;
  for (const FusedPass& p : a.pass) {
    if (p.taps == 0) continue;
    if (taps != 0 && p.taps != taps) return 0;
    taps = p.taps;
  }
  return taps;
}

int specialised_taps(const FusedArgs& a) {
  const int taps = shared_taps(a);
  return taps == 3 || taps == 9 || taps == 17 ? taps : 0;
}

LineKind shared_box_kind(const FusedArgs& a) {
  LineKind kind = LineKind::Correlate;
  for (const FusedPass& p : a.pass) {
    if (p.taps == 0) continue;
    if (p.kind == LineKind::Correlate || (kind != LineKind::Correlate && p.kind != kind)) return LineKind::Correlate;
    kind = p.kind;
  }
  return kind;
}

bool signed_pairs(const FusedArgs& a) {
  return std::all_of(a.pass, a.pass + 3, [](const FusedPass& p) {
    return p.taps == 0 || (p.kind == LineKind::Correlate && p.symmetry != 0);
  });
}

bool symmetric_pairs(const FusedArgs& a) {
  return std::all_of(a.pass, a.pass + 3, [](const FusedPass& p) {
    return p.taps == 0 || (p.kind == LineKind::Correlate && p.symmetry > 0);
  });
}

// Planes a block marches along axis 0 when `tiles` blocks cover a plane and
// `resident` blocks run at once. A block reads its first `halo` planes for
// the halo only, so marches are as long as the waves of blocks allow: the
// length minimises waves x (planes + halo). H100, 512^3 float32, gaussian
// sigma 1 (blocked_kernel, 512 tiles): marches of 32 planes 0.89 ms, 64
// 0.81, 128 0.765, 256 0.741, 512 0.73.
int64_t march_planes(int64_t n0, int64_t tiles, int64_t resident, int64_t halo) {
  int64_t best = n0, best_cost = INT64_MAX;
  const int64_t waves4 = 4 * ((resident + tiles - 1) / tiles);  // marches enough for four waves
  for (int64_t gz = 1; gz <= std::min<int64_t>({n0, (int64_t)kMaxGridYZ, std::max<int64_t>(64, waves4)}); ++gz) {
    const int64_t planes = (n0 + gz - 1) / gz, blocks = tiles * ((n0 + planes - 1) / planes);
    const int64_t cost = (blocks + resident - 1) / resident * (planes + halo);
    if (cost < best_cost) best = planes, best_cost = cost;
  }
  return best;
}

void pad_pass(FusedPass& p, int bucket) {
  const bool centred = p.kind == LineKind::Correlate && p.symmetry != 0;
  const int skip = centred ? (bucket - p.taps) / 2 : bucket - p.taps;
  std::copy_backward(p.weights, p.weights + p.taps, p.weights + p.taps + skip);
  std::copy_backward(p.weights_f, p.weights_f + p.taps, p.weights_f + p.taps + skip);
  std::copy_backward(p.weights_i, p.weights_i + p.taps, p.weights_i + p.taps + skip);
  std::fill(p.weights, p.weights + skip, 0.0);
  std::fill(p.weights_f, p.weights_f + skip, 0.0f);
  std::fill(p.weights_i, p.weights_i + skip, 0);
  p.left += skip;
  p.skip = skip;
  p.taps = bucket;
}

}  // namespace gpufilt::cuda::fused

namespace gpufilt::cuda {

using namespace fused;

bool CudaBackend::fused_laplace(const ArrayDesc& in, const ArrayDesc& out, const std::vector<Mode>& modes,
                                double cval) {
  if ((int)modes.size() != in.ndim) return false;
  std::vector<LinePass> passes(in.ndim);  // the [1, -2, 1] pass along each axis: tile, halo, modes
  for (int d = 0; d < in.ndim; ++d) {
    passes[d].axis = d;
    passes[d].weights = {1.0, -2.0, 1.0};
    passes[d].mode = modes[d];
  }
  FusedPlan plan;
  if (!plan_fused(in, out, passes, cval, plan)) return false;
  // 8-bit and 16-bit data in int32: H100, 256^3, uint8 0.116 -> 0.088 ms,
  // uint16 0.118 -> 0.089 (float32 0.108).
  const bool narrow = plan.small_integers;
  // the ring of three planes
  plan.shared_bytes = 3 * (size_t)plan.args.halo_y * plan.args.halo_x * (narrow ? sizeof(int32_t) : sizeof(double));
  return dispatch_real_dtype<LaplaceLauncher>(in.dtype, plan, narrow, as_stream(stream_));
}

namespace {

bool in_axis_order(const std::vector<LinePass>& passes) {
  for (size_t k = 1; k < passes.size(); ++k)
    if (passes[k].axis <= passes[k - 1].axis) return false;
  return true;
}

// Runs a planned chain (plan_fused) with the tile kernel made for it; false
// where only fused_kernel takes it (launch_planned).
bool launch_tiled(const FusedPlan& plan, const ArrayDesc& in, const ArrayDesc& out, cudaStream_t stream) {
  if (in.ndim == 2 && dispatch_real_dtype<PlaneLauncher>(in.dtype, plan, out, stream)) return true;
  return dispatch_real_dtype<BlockedLauncher>(in.dtype, plan, out, stream);
}

// Runs a planned chain (plan_fused) with the kernel made for it.
void launch_planned(const FusedPlan& plan, const ArrayDesc& in, const ArrayDesc& out, cudaStream_t stream) {
  if (!launch_tiled(plan, in, out, stream)) dispatch_real_dtype<FusedLauncher>(in.dtype, plan, stream);
}

// Plans `passes` in axis order where that gives the same results: 8-bit and
// 16-bit data under correlations int32 sums (FusedPlan::int32_chain), whose
// every pass is linear over the integers modulo 2^bits (its wrap to the
// dtype keeps that), and whose boundary extensions along different axes
// commute but for a constant mode with a cval other than 0 (an affine
// pass). Bit for bit scipy's results in its order (sobel and prewitt of
// images: H100, 8192^2 uint8 along axis 1, 0.19 ms pass by pass, 0.10 so).
bool commuting_chain(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& passes, double cval,
                     FusedPlan& plan) {
  const bool affine = cval != 0 && std::any_of(passes.begin(), passes.end(),
                                               [](const LinePass& p) { return p.mode == Mode::Constant; });
  if (small_integer_magnitude(in.dtype) == 0 || affine || !std::all_of(passes.begin(), passes.end(),
                             [](const LinePass& p) { return p.kind == LineKind::Correlate; }))
    return false;
  std::vector<LinePass> by_axis = passes;
  std::sort(by_axis.begin(), by_axis.end(), [](const LinePass& a, const LinePass& b) { return a.axis < b.axis; });
  return plan_fused(in, out, by_axis, cval, plan) && plan.int32_chain;
}

ArrayDesc with_leading_axes_swapped(ArrayDesc a) {
  std::swap(a.shape[0], a.shape[1]);
  std::swap(a.strides[0], a.strides[1]);
  return a;
}

// A chain whose first pass is out of axis order (sobel and prewitt along an
// axis other than 0): one along the last axis first and then the others in
// order by LastAxisFirstLauncher's kernels; a 3-D one along axis 1 first
// over its axes 0 and 1 swapped; else its first pass alone into a
// temporary and the rest fused from there, two reads and writes of the
// volume instead of three. False when no kernel here takes it.
bool out_of_order_chain(CudaBackend& backend, const ArrayDesc& in, const ArrayDesc& out,
                        const std::vector<LinePass>& passes, double cval, cudaStream_t stream) {
  const std::vector<LinePass> rest(passes.begin() + 1, passes.end());
  if (rest.empty() || !in_axis_order(rest)) return false;
  FusedPlan plan;
  if (commuting_chain(in, out, passes, cval, plan)) {
    launch_planned(plan, in, out, stream);
    return true;
  }
  if (passes[0].axis == in.ndim - 1 && (int)passes.size() == in.ndim) {
    std::vector<LinePass> by_axis = rest;
    by_axis.push_back(passes[0]);
    if (describe_chain(in, out, by_axis, cval, 3, plan) &&
        dispatch_real_dtype<LastAxisFirstLauncher>(in.dtype, plan, in.ndim, stream))
      return true;
  }
  if (in.ndim == 2) return false;
  // Along axis 1 first and then axes 0 and 2: the chain in axis order over
  // the volume with axes 0 and 1 swapped (fused_kernel marching along axis
  // 1, each step a plane of rows along axis 2: coalesced as before).
  std::vector<LinePass> swapped = passes;
  for (LinePass& p : swapped) p.axis = p.axis < 2 ? 1 - p.axis : p.axis;
  if (in_axis_order(swapped)) {
    const ArrayDesc in_swapped = with_leading_axes_swapped(in), out_swapped = with_leading_axes_swapped(out);
    if (plan_fused(in_swapped, out_swapped, swapped, cval, plan)) {
      launch_planned(plan, in_swapped, out_swapped, stream);
      return true;
    }
  }
  std::unique_ptr<TempBuffer> holder = backend.allocate(out.size() * itemsize(out.dtype));
  const ArrayDesc first = contiguous_like(out, out.dtype, holder->data);
  if (!plan_fused(first, out, rest, cval, plan)) return false;
  backend.line_pass(in, first, passes[0], cval);
  launch_planned(plan, first, out, stream);
  return true;
}

// A 3-D chain that neither the tiles nor blocked_kernel's padding take
// (passes of 10 to 17 taps: gaussian sigma 1.2 to 2): its pass along axis 0
// alone into a temporary (in a long-pass kernel), then the others over each
// plane of it in plane_kernel, two reads and writes of the volume instead of
// one a pass (H100, 512^3 float32 gaussian sigma 1.5: 1.30 -> 0.92 ms;
// chains summed in double too: float64 sigma 0.5 2.45 -> 1.54,
// gaussian_laplace sigma 2 7.41 -> 5.48; not spills_in_plane_kernel). False
// when no kernel here takes the chain.
bool split_volume_chain(CudaBackend& backend, const ArrayDesc& in, const ArrayDesc& out,
                        const std::vector<LinePass>& passes, double cval, cudaStream_t stream) {
  if (in.ndim != 3 || passes.size() < 2 || passes[0].axis != 0) return false;
  const std::vector<LinePass> rest(passes.begin() + 1, passes.end());
  std::unique_ptr<TempBuffer> holder = backend.allocate(out.size() * itemsize(out.dtype));
  const ArrayDesc first = contiguous_like(out, out.dtype, holder->data);
  FusedPlan plan;
  if (!plan_plane_stack(first, out, rest, cval, plan) || spills_in_plane_kernel(out.dtype, plan)) return false;
  backend.line_pass(in, first, passes[0], cval);
  return dispatch_real_dtype<PlaneLauncher>(out.dtype, plan, out, stream);  // (if not, pass by pass from `in`)
}

// A 3-D chain along axes 1 and 2 only (a gaussian of sigma (0, s, s): a
// stack of images filtered one by one) over each plane in plane_kernel.
// False when plane_kernel does not take it.
bool plane_stack_chain(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& passes, double cval,
                       cudaStream_t stream) {
  FusedPlan plan;
  return plan_plane_stack(in, out, passes, cval, plan) && !spills_in_plane_kernel(in.dtype, plan) &&
         dispatch_real_dtype<PlaneLauncher>(in.dtype, plan, out, stream);
}

// True for a lone pass that the long-pass kernel of its bucket runs faster
// than the tile kernel planned for it: a 9-tap pass of a volume along any
// axis, which only fused_kernel takes of the tiles (blocked_kernel takes
// chains of three), with a ring of nine planes. H100, 512^3 (ms), along axis
// 0 or 1: correlations float32 0.82-0.89 -> 0.41-0.42, float64 1.50 ->
// 0.81-0.83, uint16 1.24-1.29 -> 0.81-0.82, uint8 1.22-1.28 -> 0.39. The
// tiles' other 9-tap passes of a volume, against 11 taps in the long-pass
// kernels: along axis 2, correlations 0.80 / 0.46 float32, 1.42 / 0.89
// float64; uniform 0.77-0.88 / 0.42-0.52; maximum 0.73-0.92 / 0.52-0.65.
bool long_pass_beats_tiles(int ndim, const FusedArgs& a) { return ndim == 3 && shared_taps(a) == 9; }

// A pass alone: in the tile kernel built for its taps, unless the long-pass
// kernel of its bucket beats it; else in the long-pass kernel. False when
// neither takes it.
bool lone_pass(const ArrayDesc& in, const ArrayDesc& out, const LinePass& pass, double cval, cudaStream_t stream) {
  FusedPlan tiles;
  const bool tiled = plan_fused(in, out, {pass}, cval, tiles);
  if (tiled && !long_pass_beats_tiles(in.ndim, tiles.args)) {
    launch_planned(tiles, in, out, stream);
    return true;
  }
  FusedPlan plan;
  if (describe_chain(in, out, {pass}, cval, kMaxLongTaps, plan)) {
    const FusedPass* p = std::find_if(plan.args.pass, plan.args.pass + 3, [](const FusedPass& q) { return q.taps; });
    if (dispatch_real_dtype<LongPassLauncher>(in.dtype, plan, (int)(p - plan.args.pass), out, stream)) return true;
  }
  if (tiled) launch_planned(tiles, in, out, stream);
  return tiled;
}

}  // namespace

bool CudaBackend::fused_chain(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& passes,
                              double cval) {
  const cudaStream_t stream = as_stream(stream_);
  if (passes.size() == 1) return lone_pass(in, out, passes[0], cval, stream);
  FusedPlan plan;
  if (!in_axis_order(passes)) return out_of_order_chain(*this, in, out, passes, cval, stream);
  if (in.ndim == 3 && passes.size() == 2 && passes[0].axis != 0 && plane_stack_chain(in, out, passes, cval, stream))
    return true;
  if (plan_fused(in, out, passes, cval, plan)) {
    // 3-D chains of 9 taps that blocked_kernel does not take (summed in
    // double: derivative chains, float64) run split where that takes them:
    // fused_kernel's ring of nine planes of doubles leaves it small tiles.
    if (launch_tiled(plan, in, out, stream) ||
        (shared_taps(plan.args) == 9 && split_volume_chain(*this, in, out, passes, cval, stream)))
      return true;
    dispatch_real_dtype<FusedLauncher>(in.dtype, plan, stream);
    return true;
  }
  // Padded chains take only the kernels that skip the padding (a launcher
  // that declines launches nothing).
  if (plan_padded(in, out, passes, cval, plan) &&
      (in.ndim == 2 ? dispatch_real_dtype<PlaneLauncher>(in.dtype, plan, out, stream)
                    : dispatch_real_dtype<BlockedLauncher>(in.dtype, plan, out, stream)))
    return true;
  return split_volume_chain(*this, in, out, passes, cval, stream);
}

namespace {

// A correlation along `axis` whose window lies around each output (run_separable's rule).
bool correlation_along(const LinePass& p, int axis) {
  return p.axis == axis && p.kind == LineKind::Correlate && p.taps() >= 1 && p.origin_in_window();
}

bool same_pass(const LinePass& a, const LinePass& b) {
  return a.axis == b.axis && a.kind == b.kind && a.weights == b.weights && a.origin == b.origin && a.mode == b.mode;
}

// True when `chains` are a derivative sum's that fused_derivative_sum takes:
// a 3-D float32 or float64 array into an output of its dtype, one chain per
// axis, each a correlation along every axis in axis order, chains 1 and 2
// sharing their pass along axis 0. Marks every pass in_derivative_chain
// (summed in double, as run_separable would).
bool derivative_chains_share_first_pass(const ArrayDesc& in, const ArrayDesc& out,
                                        std::vector<std::vector<LinePass>>& chains) {
  if (in.ndim != 3 || chains.size() != 3 || in.dtype != out.dtype || !same_shape(in, out) || in.size() == 0 ||
      (in.dtype != DType::Float32 && in.dtype != DType::Float64))
    return false;
  for (std::vector<LinePass>& chain : chains) {
    if (chain.size() != 3) return false;
    for (int d = 0; d < 3; ++d)
      if (!correlation_along(chain[d], d)) return false;
  }
  if (!same_pass(chains[1][0], chains[2][0])) return false;
  for (std::vector<LinePass>& chain : chains)
    for (LinePass& pass : chain) pass.in_derivative_chain = true;
  return true;
}

// fused_derivative_sum in plane_kernel (see there); false (nothing written)
// where it does not take the chains.
bool derivative_sum_in_plane_kernel(CudaBackend& backend, const ArrayDesc& in, const ArrayDesc& out,
                                    const std::vector<std::vector<LinePass>>& chains, double cval, bool square,
                                    cudaStream_t stream) {
  for (const std::vector<LinePass>& chain : chains)  // (before allocating: sigma above 2 is declined here)
    if (chain[1].taps() > kMaxTaps || chain[2].taps() > kMaxTaps) return false;
  const int64_t bytes = out.size() * itemsize(out.dtype);
  std::unique_ptr<TempBuffer> derivative_holder = backend.allocate(bytes), smoothed_holder = backend.allocate(bytes);
  const ArrayDesc derivative = contiguous_like(out, out.dtype, derivative_holder->data);
  const ArrayDesc smoothed = contiguous_like(out, out.dtype, smoothed_holder->data);
  const Combine first = square ? Combine::Square : Combine::Store, later = square ? Combine::SquareAdd : Combine::Add;
  const Combine last = square ? Combine::SquareAddRoot : Combine::Add;
  FusedPlan plans[3];
  for (int k = 0; k < 3; ++k) {
    const std::vector<LinePass> rest(chains[k].begin() + 1, chains[k].end());
    if (!plan_plane_stack(k == 0 ? derivative : smoothed, out, rest, cval, plans[k])) return false;
    plans[k].args.combine = k == 0 ? first : k == 1 ? later : last;
  }
  backend.line_pass(in, derivative, chains[0][0], cval);  // every read of `in` first: `out` may be it
  backend.line_pass(in, smoothed, chains[1][0], cval);
  for (const FusedPlan& plan : plans)  // (planned above: plane_kernel takes them)
    if (!dispatch_real_dtype<PlaneLauncher>(out.dtype, plan, out, stream))
      throw std::logic_error("fused_derivative_sum: a planned stack of planes was declined");
  return true;
}

}  // namespace

// 3-D float32 and float64 volumes: chain 0's pass along axis 0 (the
// derivative) and the smoothing pass along it that chains 1 and 2 share,
// each once (line_pass), into two temporaries; then each chain's passes
// along axes 1 and 2 over the planes of its temporary in plane_kernel, the
// first storing its result, the others adding theirs to the output
// (Combine), squares and root included. The same values as chain by chain
// with the sums after them (each pass summed in double and rounded to the
// dtype; numpy's arithmetic for the sums), without the third first pass,
// the temporaries of the chains' results and the elementwise passes over
// them. False for chains that plane_kernel does not take (more than 17
// taps along axis 1 or 2: sigma above 2). (The CPU's chains sweep their
// three passes at once: sharing the first pass there, without the fused
// sums, took longer.)
bool CudaBackend::fused_derivative_sum(const ArrayDesc& in, const ArrayDesc& out,
                                       std::vector<std::vector<LinePass>> chains, double cval, bool square) {
  return derivative_chains_share_first_pass(in, out, chains) &&
         derivative_sum_in_plane_kernel(*this, in, out, chains, cval, square, as_stream(stream_));
}

}  // namespace gpufilt::cuda
