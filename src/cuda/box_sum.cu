// correlate/convolve with N-D weights that fill a dense box on the trailing
// axes (3x3, 5x5, 7x7, 3x3x3, 5x5x5, 7x7x7 with no zero weight), tiled.
//
// A block owns a tile of a plane and walks a run of planes along the box's
// first axis, keeping the planes its window needs in a shared-memory ring,
// converted once to the accumulator type. Each thread computes OM outputs
// stacked along the walked axis: an input value read from shared memory
// serves every one of them whose window holds it (about KM + OM - 1 reads
// for OM outputs instead of KM * OM), while neighbouring threads read
// neighbouring columns (no bank conflicts). The weights are kernel
// parameters indexed by compile-time constants: operands of the multiplies,
// not loads.
//
// Two accumulators (box_sum_pass chooses):
// - double: the loops run over input planes, then rows, then columns, so
//   each output meets its taps in C order, summed without FMA from 0.0: the
//   CPU's (and scipy's) rounding, bit for bit;
// - float, for float32/float16 data into a float32/float16 output with no
//   negative weight (a smoothing: the separable chains' rule,
//   weighted_sums_in_float, with weights and cval within float's range):
//   FMAs on twice the lanes and half the shared-memory bytes. Each plane's
//   taps are summed on their own and the plane sums added after, so an
//   output's rounding error stays within KP * KX + KM + 1 float units (the
//   last for the weights' own rounding) of the sum of |weight * value|: 57
//   for 7x7x7, 31 for 5x5x5, under 3.4e-6 of it, inside DESIGN.md's 1e-5
//   for float32.
#include "cuda/box_sum.cuh"

#include <cstdint>
#include <optional>
#include <type_traits>

#include "cuda/box_tile.cuh"

namespace gpufilt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxWeights = 7 * 7 * 7;

template <class Acc>
struct BoxWeights {
  Acc w[kMaxWeights];  // C order over the box
};

template <int KM_, int KP_, int KX_, int OM_, class Acc>
struct SumShape {
  static constexpr int KM = KM_, KP = KP_, KX = KX_, OM = OM_;
  static constexpr int tile_rows = KP > 1 ? 4 : 1, tile_cols = kThreads / tile_rows;  // outputs
  static constexpr int rows = tile_rows + KP - 1, cols = tile_cols + KX - 1;           // inputs
  static constexpr int plane = rows * cols;
  static constexpr int ring = KM + OM - 1;  // planes a step reads
  static constexpr int loads = (plane + kThreads - 1) / kThreads;
  static_assert(ring * plane * sizeof(Acc) <= 48 * 1024, "static shared memory");
};

// acc + v * w in Acc's rule (see the top of this file).
__device__ __forceinline__ double add_product(double acc, double v, double w) {
  return __dadd_rn(acc, __dmul_rn(v, w));  // no FMA: the CPU's (and scipy's) rounding
}
__device__ __forceinline__ float add_product(float acc, float v, float w) { return fmaf(v, w, acc); }

template <class Shape, class Acc>
__global__ void __launch_bounds__(kThreads) box_sum_kernel(const __grid_constant__ BoxArgs a,
                                                           const __grid_constant__ BoxWeights<Acc> weights) {
  constexpr int KM = Shape::KM, KP = Shape::KP, KX = Shape::KX, OM = Shape::OM, R = Shape::ring;
  constexpr int cols = Shape::cols;
  // Float sums add each plane's partial sum to the output's (bounding the
  // rounding error); double sums run on in C order.
  constexpr bool kPlaneSums = std::is_same_v<Acc, float>;
  __shared__ Acc ring[R][Shape::plane];
  const BlockOrigin o = block_origin(a, Shape::tile_rows, Shape::tile_cols);

  // This thread's elements of every input plane: offsets within the plane
  // (kOutside: cval), the same for each plane. Offsets may be negative.
  constexpr int64_t kOutside = INT64_MIN;
  int64_t plane_offset[Shape::loads];
#pragma unroll
  for (int l = 0; l < Shape::loads; ++l) {
    const int e = threadIdx.x + l * kThreads;
    const int64_t r = border_index(o.row0 + e / cols + a.lo[1], a.n[1], a.mode);
    const int64_t c = border_index(o.x0 + e % cols + a.lo[2], a.n[2], a.mode);
    plane_offset[l] = r < 0 || c < 0 ? kOutside : r * a.in_stride[1] + c * a.in_stride[2];
  }
  // Plane i of the block's run (input plane m0 + lo + i) goes to slot i % R.
  auto load_plane = [&](int64_t i) {
    const int64_t jm = border_index(o.m0 + a.lo[0] + i, a.n[0], a.mode);
    const char* plane = a.in + o.in_base + jm * a.in_stride[0];
    Acc* dst = ring[i % R];
#pragma unroll
    for (int l = 0; l < Shape::loads; ++l) {
      const int e = threadIdx.x + l * kThreads;
      if (e < Shape::plane)
        dst[e] = (Acc)(jm < 0 || plane_offset[l] == kOutside
                           ? a.cval
                           : load_any(a.in_dtype, plane + plane_offset[l], a.in_aligned));
    }
  };

  const int col = threadIdx.x % Shape::tile_cols, row = threadIdx.x / Shape::tile_cols;
  const int64_t x = o.x0 + col, r = o.row0 + row;
  const int base = row * cols + col;  // the window's first row and column in a plane
  int64_t loaded = 0;
#pragma unroll 1
  for (int64_t m = o.m0; m < o.m_end; m += OM) {
    const int64_t first = m - o.m0;  // the step's first plane of the run
#pragma unroll 1
    for (; loaded < first + R; ++loaded) load_plane(loaded);
    __syncthreads();
    Acc acc[OM];
#pragma unroll
    for (int k = 0; k < OM; ++k) acc[k] = 0;
    int slot = (int)(first % R);
#pragma unroll
    for (int p = 0; p < R; ++p) {
      const Acc* plane = ring[slot] + base;
      Acc plane_sum[OM];  // kPlaneSums: output m + k's taps in plane p
#pragma unroll
      for (int k = 0; k < OM; ++k) plane_sum[k] = 0;
      slot = slot + 1 == R ? 0 : slot + 1;
      // Rows unrolled too for small boxes; for larger ones the compiler
      // would hoist hundreds of loads and spill.
#pragma unroll(KP < 5 ? KP : 1)
      for (int jr = 0; jr < KP; ++jr) {
#pragma unroll
        for (int jx = 0; jx < KX; ++jx) {
          const Acc v = plane[jr * cols + jx];
#pragma unroll
          for (int k = 0; k < OM; ++k) {
            const int jm = p - k;  // output m + k reads plane p as its plane jm
            if (jm < 0 || jm >= KM) continue;
            Acc& sum = kPlaneSums ? plane_sum[k] : acc[k];
            sum = add_product(sum, v, weights.w[(jm * KP + jr) * KX + jx]);
          }
        }
      }
      if constexpr (kPlaneSums) {
#pragma unroll
        for (int k = 0; k < OM; ++k) acc[k] += plane_sum[k];
      }
    }
    if (r < a.n[1] && x < a.n[2]) {
#pragma unroll
      for (int k = 0; k < OM; ++k)
        if (m + k < o.m_end)
          store_any(a.out_dtype, a.out + o.out_base + (m + k) * a.out_stride[0] + r * a.out_stride[1] +
                                     x * a.out_stride[2],
                    (double)acc[k], a.out_aligned);
    }
    __syncthreads();
  }
}

// Calls f(SumShape<...>{}) for a box the kernel is compiled for; false for
// others. Float sums take twice the outputs a step: the ring's planes of
// half the bytes fit, and each value read from shared memory serves more
// outputs.
template <class Acc, class F>
bool with_sum_shape(const int (&extent)[3], F&& f) {
  constexpr int k = sizeof(double) / sizeof(Acc);
  const auto is = [&](int m, int p, int x) { return extent[0] == m && extent[1] == p && extent[2] == x; };
  if (is(3, 1, 3)) f(SumShape<3, 1, 3, 4 * k, Acc>());
  else if (is(5, 1, 5)) f(SumShape<5, 1, 5, 4 * k, Acc>());
  else if (is(7, 1, 7)) f(SumShape<7, 1, 7, 4 * k, Acc>());
  else if (is(3, 3, 3)) f(SumShape<3, 3, 3, 4 * k, Acc>());
  else if (is(5, 5, 5)) f(SumShape<5, 5, 5, 4 * k, Acc>());
  else if (is(7, 7, 7)) f(SumShape<7, 7, 7, 2 * k, Acc>());
  else return false;
  return true;
}

// The footprint's weights in C order over its box.
template <class Acc>
BoxWeights<Acc> box_weights(const Footprint& f, const Box& box) {
  BoxWeights<Acc> w{};
  for (int64_t t = 0; t < f.taps(); ++t) w.w[box.cell[t]] = (Acc)f.weights[t];
  return w;
}

// Launches the kernel for the box `a` spans with accumulator Acc; false
// when none is compiled for it or its grid would be too large.
template <class Acc>
bool launch_box_sum(BoxArgs a, const Footprint& f, const Box& box, cudaStream_t stream) {
  bool launched = false;
  with_sum_shape<Acc>(a.extent, [&](auto shape) {
    using Shape = decltype(shape);
    if (const int64_t blocks = tile(a, Shape::tile_rows, Shape::tile_cols, 32)) {
      box_sum_kernel<Shape, Acc><<<(unsigned)blocks, kThreads, 0, stream>>>(a, box_weights<Acc>(f, box));
      launched = true;
    }
  });
  return launched;
}

}  // namespace

bool box_sum_pass(const ArrayDesc& in, const ArrayDesc& out, const Footprint& f, double cval,
                  cudaStream_t stream) {
  if (f.reduce != Reduce::Sum || f.taps() > kMaxWeights) return false;
  const std::optional<Box> box = dense_box(f);
  std::optional<BoxArgs> a = box ? box_view(in, out, *box, f, cval) : std::nullopt;
  if (!a) return false;
  const bool launched = weighted_sums_in_float(in.dtype, out.dtype, f.weights, cval)
                            ? launch_box_sum<float>(*a, f, *box, stream)
                            : launch_box_sum<double>(*a, f, *box, stream);
  if (!launched) return false;
  GF_CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace gpufilt::cuda
