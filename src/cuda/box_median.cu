// Median filters over a dense box footprint on the trailing axes (3x3, 5x5,
// 7x7, 3x3x3, 5x5x5: what median_filter(size=...) asks for), tiled.
//
// A block owns a tile of a plane (8 rows x 64 columns for 3-D boxes, one row
// of 512 for 2-D ones) and walks a run of planes along the box's first axis,
// keeping the box's depth of input planes in a shared-memory ring: each
// input element is read from global memory about once, its boundary
// extension resolved once per plane, and converted once to an order key.
// Each thread takes two neighbouring outputs of a row: their windows share
// all but one column each, and the selection runs on the shared values once.
//
// Selection is forgetful (Paeth; McGuire's "A fast, small-radius GPU median
// filter"): keep a set just large enough that its least and greatest values
// cannot be the answer, drop both, add the next value, repeat. Every size
// and index is a compile-time constant, so the set lives in registers and
// the work is min/max instructions, about 3 per value held per step: 27
// values take ~150 exchanges instead of a 32-sorting network's 240.
//
// Values are compared as order keys: integers as themselves, floats as
// unsigned integers whose order is the numeric one with every NaN greatest,
// so that the NaN semantics of the general kernel (a NaN has no rank; the
// answer is NaN past the other values' count) come free: the median is a NaN
// key exactly when it falls among the NaNs.
#include "cuda/box_median.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/border.hpp"
#include "cuda/check.cuh"
#include "cuda/elements.cuh"

namespace gpufilt::cuda {
namespace {

constexpr int kThreads = 256;

// ------------------------------------------------------------ order keys

enum class KeyKind { Int, UInt, Float, Double };

template <KeyKind K>
struct Keys;

template <>
struct Keys<KeyKind::Int> {  // bool, int8..int32, uint8, uint16
  using type = int32_t;
  static __device__ type from(double v) { return (int32_t)v; }
  static __device__ double value(type k) { return k; }
};

template <>
struct Keys<KeyKind::UInt> {
  using type = uint32_t;
  static __device__ type from(double v) { return (uint32_t)v; }
  static __device__ double value(type k) { return k; }
};

template <>
struct Keys<KeyKind::Float> {  // float16, bfloat16, float32: exact as float
  using type = uint32_t;
  static __device__ type from(double v) {
    const float f = (float)v;
    if (f != f) return ~0u;
    const uint32_t u = __float_as_uint(f);
    return (u >> 31) ? ~u : u | 0x80000000u;
  }
  static __device__ double value(type k) { return __uint_as_float((k >> 31) ? k & 0x7fffffffu : ~k); }
};

template <>
struct Keys<KeyKind::Double> {
  using type = uint64_t;
  static __device__ type from(double v) {
    if (v != v) return ~0ull;
    const uint64_t u = (uint64_t)__double_as_longlong(v);
    return (u >> 63) ? ~u : u | (1ull << 63);
  }
  static __device__ double value(type k) {
    return __longlong_as_double((long long)((k >> 63) ? k & ~(1ull << 63) : ~k));
  }
};

// ---------------------------------------------------- forgetful selection

template <class V>
__host__ __device__ __forceinline__ void exchange(V& lo, V& hi) {
  const V a = lo, b = hi;
  lo = a < b ? a : b;
  hi = a < b ? b : a;
}

// Moves the least of s[0, K) to s[0] and the greatest to s[K-1]: pairs
// first, then the lower halves for the least and the upper for the greatest
// (about 3K/2 exchanges instead of 2K).
template <int K, class V, int Cap>
__host__ __device__ __forceinline__ void min_max_to_ends(V (&s)[Cap]) {
#pragma unroll
  for (int i = 0; i < K / 2; ++i) exchange(s[i], s[K - 1 - i]);
#pragma unroll
  for (int i = 1; i < (K + 1) / 2; ++i) exchange(s[0], s[i]);
#pragma unroll
  for (int i = K / 2; i < K - 1; ++i) exchange(s[i], s[K - 1]);
}

template <int K, class V, int Cap>
__host__ __device__ __forceinline__ void max_to_end(V (&s)[Cap]) {
#pragma unroll
  for (int i = 0; i < K - 1; ++i) exchange(s[i], s[K - 1]);
}

template <int K, class V, int Cap>
__host__ __device__ __forceinline__ void min_to_front(V (&s)[Cap]) {
#pragma unroll
  for (int i = 1; i < K; ++i) exchange(s[0], s[i]);
}

// The value of rank `Rank` (0-based) among N values, taken one at a time.
// A set of `size` values is held; `below` and `above` count the values not
// yet dropped that lie below and above the answer. The set's greatest value
// has size-1 values at or under it, so when size >= below + 2 it lies above
// the answer and can be dropped (likewise the least). The plan of sizes is
// worked out at compile time, and each added value is its own instantiation
// (a fold over an index sequence, not a recursion: no depth limit).
template <int N, int Rank>
struct Forgetful {
  struct Plan {
    int size, below, above;
  };

  static constexpr Plan drop(Plan p) {
    const int drop_max = p.size >= p.below + 2, drop_min = p.size >= p.above + 2;
    return {p.size - drop_max - drop_min, p.below - drop_min, p.above - drop_max};
  }
  // The state once `added` values went in, each followed by the drops it
  // allowed, and then `rounds` more rounds of drops.
  static constexpr Plan plan(int added, int rounds = 0) {
    Plan p{0, Rank, N - 1 - Rank};
    for (int i = 0; i < added; ++i) {
      ++p.size;
      p = drop(p);
    }
    for (int r = 0; r < rounds; ++r) p = drop(p);
    return p;
  }
  static constexpr int capacity() {
    int most = 0;
    for (int i = 0; i < N; ++i) most = std::max(most, plan(i).size + 1);
    return most;
  }
  static constexpr int final_rounds() {
    int r = 0;
    while (plan(N, r).size > 1) ++r;
    return r;
  }
  static constexpr int kCapacity = capacity();

  template <int K, int Below, int Above, class V, int Cap>
  static __host__ __device__ __forceinline__ void drop_at(V (&s)[Cap]) {
    constexpr bool drop_max = K >= Below + 2, drop_min = K >= Above + 2;
    if constexpr (drop_max && drop_min) {
      min_max_to_ends<K>(s);
      s[0] = s[K - 2];  // the last value kept fills the least's slot
    } else if constexpr (drop_max) {
      max_to_end<K>(s);
    } else if constexpr (drop_min) {
      min_to_front<K>(s);
      s[0] = s[K - 1];
    }
  }

  template <int I, class V, int Cap, class Get>
  static __host__ __device__ __forceinline__ void add(V (&s)[Cap], const Get& get) {
    constexpr Plan p = plan(I);
    static_assert(p.size < Cap, "set capacity");
    s[p.size] = get(std::integral_constant<int, I>());
    drop_at<p.size + 1, p.below, p.above>(s);
  }
  template <int First, class V, int Cap, class Get, int... I>
  static __host__ __device__ __forceinline__ void add_each(V (&s)[Cap], const Get& get, std::integer_sequence<int, I...>) {
    (add<First + I>(s, get), ...);
  }
  // Adds values [First, Last) of the N.
  template <int First, int Last, class V, int Cap, class Get>
  static __host__ __device__ __forceinline__ void add_range(V (&s)[Cap], const Get& get) {
    add_each<First>(s, get, std::make_integer_sequence<int, Last - First>());
  }

  template <class V, int Cap, int... R>
  static __host__ __device__ __forceinline__ void drop_rounds(V (&s)[Cap], std::integer_sequence<int, R...>) {
    (drop_at<plan(N, R).size, plan(N, R).below, plan(N, R).above>(s), ...);
  }
  // Once all N are in: the answer.
  template <class V, int Cap>
  static __host__ __device__ __forceinline__ V finish(V (&s)[Cap]) {
    drop_rounds(s, std::make_integer_sequence<int, final_rounds()>());
    return s[0];
  }
};

// ------------------------------------------------------------ the kernel

// The box's extents: KM along the axis the block walks, KP along the plane's
// rows (1 for a 2-D box), KX along its columns (the last axis).
template <int KM_, int KP_, int KX_>
struct BoxShape {
  static constexpr int KM = KM_, KP = KP_, KX = KX_;
  static constexpr int taps = KM * KP * KX;
  static constexpr int tile_rows = KP > 1 ? 8 : 1;              // outputs
  static constexpr int tile_cols = 2 * kThreads / tile_rows;    // outputs, two a thread
  static constexpr int rows = tile_rows + KP - 1, cols = tile_cols + KX - 1;  // inputs
  static constexpr int plane = rows * cols;
  static constexpr int loads = (plane + kThreads - 1) / kThreads;  // a thread's per plane
  static constexpr int shared_taps = KM * KP * (KX - 1);  // the two outputs' common values
};

// Axis 0 is the walked one, 1 the rows, 2 the columns; the leading axes
// before them (batch) have no extent in the box.
struct BoxMedianArgs {
  const char* in;
  char* out;
  DType in_dtype, out_dtype;
  bool in_aligned, out_aligned;
  Mode mode;
  double cval;
  int lead_ndim;
  int64_t lead_shape[kMaxDims], lead_in_stride[kMaxDims], lead_out_stride[kMaxDims];
  int64_t n[3], in_stride[3], out_stride[3];
  int lo[3];  // the box's lowest offset along each
  int64_t chunk;  // outputs along axis 0 per block
  int64_t tiles_x, tiles_rows, chunks;
};

template <KeyKind Kind, class Shape>
__global__ void __launch_bounds__(kThreads) box_median_kernel(const __grid_constant__ BoxMedianArgs a) {
  using Key = Keys<Kind>;
  using V = typename Key::type;
  using Select = Forgetful<Shape::taps, Shape::taps / 2>;
  constexpr int KM = Shape::KM, KP = Shape::KP, KX = Shape::KX, cols = Shape::cols;
  __shared__ V ring[KM][Shape::plane];

  int64_t block = blockIdx.x;
  const int64_t tile_x = block % a.tiles_x;
  block /= a.tiles_x;
  const int64_t tile_row = block % a.tiles_rows;
  block /= a.tiles_rows;
  const int64_t chunk = block % a.chunks;
  block /= a.chunks;
  int64_t in_base = 0, out_base = 0;
  for (int d = a.lead_ndim - 1; d >= 0; --d) {
    const int64_t c = block % a.lead_shape[d];
    block /= a.lead_shape[d];
    in_base += c * a.lead_in_stride[d];
    out_base += c * a.lead_out_stride[d];
  }
  const int64_t x0 = tile_x * Shape::tile_cols, row0 = tile_row * Shape::tile_rows;
  const int64_t m0 = chunk * a.chunk, m_end = m0 + a.chunk < a.n[0] ? m0 + a.chunk : a.n[0];

  // This thread's elements of every input plane: their offsets within the
  // plane (-1: cval), the same for each plane.
  int64_t plane_offset[Shape::loads];
#pragma unroll
  for (int l = 0; l < Shape::loads; ++l) {
    const int e = threadIdx.x + l * kThreads;
    const int64_t in_row = border_index(row0 + e / cols + a.lo[1], a.n[1], a.mode);
    const int64_t in_col = border_index(x0 + e % cols + a.lo[2], a.n[2], a.mode);
    plane_offset[l] = in_row < 0 || in_col < 0 ? -1 : in_row * a.in_stride[1] + in_col * a.in_stride[2];
  }
  const V cval_key = Key::from(a.cval);
  auto load_plane = [&](int64_t m, V* dst) {
    const int64_t jm = border_index(m, a.n[0], a.mode);
    const char* plane = a.in + in_base + jm * a.in_stride[0];
#pragma unroll
    for (int l = 0; l < Shape::loads; ++l) {
      const int e = threadIdx.x + l * kThreads;
      if (e < Shape::plane)
        dst[e] = jm < 0 || plane_offset[l] < 0 ? cval_key
                                               : Key::from(load_any(a.in_dtype, plane + plane_offset[l], a.in_aligned));
    }
  };

  const int pair = threadIdx.x % (Shape::tile_cols / 2), row = threadIdx.x / (Shape::tile_cols / 2);
  const int64_t x = x0 + 2 * pair, r = row0 + row;
  const int base = row * cols + 2 * pair;  // the window's first row and column in a plane
  // The pair reads columns 0..KX of its window: 1..KX-1 are common, column
  // 0 is the left output's own and column KX the right one's. The order
  // the planes sit in the ring does not matter: the median is of a set.
  auto common = [&](auto i) {
    constexpr int t = decltype(i)::value, jx = 1 + t % (KX - 1), jr = t / (KX - 1) % KP, jm = t / ((KX - 1) * KP);
    return ring[jm][base + jr * cols + jx];
  };
  auto own = [&](int column) {
    return [&, column](auto i) {
      constexpr int t = decltype(i)::value - Shape::shared_taps, jr = t % KP, jm = t / KP;
      return ring[jm][base + jr * cols + column];
    };
  };
  auto store = [&](int64_t m, int64_t xo, V key) {
    if (r < a.n[1] && xo < a.n[2])
      store_any(a.out_dtype, a.out + out_base + m * a.out_stride[0] + r * a.out_stride[1] + xo * a.out_stride[2],
                Key::value(key), a.out_aligned);
  };

#pragma unroll 1
  for (int j = 0; j < KM - 1; ++j) load_plane(m0 + a.lo[0] + j, ring[j]);
  int slot = KM - 1;  // the ring's slot for the next plane
#pragma unroll 1
  for (int64_t m = m0; m < m_end; ++m) {
    load_plane(m + a.lo[0] + KM - 1, ring[slot]);
    slot = slot + 1 == KM ? 0 : slot + 1;
    __syncthreads();
    V common_set[Select::kCapacity];
    Select::template add_range<0, Shape::shared_taps>(common_set, common);
    V set[Select::kCapacity];
#pragma unroll
    for (int k = 0; k < Select::kCapacity; ++k) set[k] = common_set[k];
    Select::template add_range<Shape::shared_taps, Shape::taps>(set, own(0));
    store(m, x, Select::finish(set));
    Select::template add_range<Shape::shared_taps, Shape::taps>(common_set, own(KX));
    store(m, x + 1, Select::finish(common_set));
    __syncthreads();
  }
}

// ------------------------------------------------------------ host side

std::optional<KeyKind> key_kind(DType t) {
  switch (t) {
    case DType::Bool: case DType::Int8: case DType::UInt8: case DType::Int16: case DType::UInt16:
    case DType::Int32:
      return KeyKind::Int;
    case DType::UInt32: return KeyKind::UInt;
    case DType::Float16: case DType::BFloat16: case DType::Float32: return KeyKind::Float;
    case DType::Float64: return KeyKind::Double;
    default: return std::nullopt;  // 64-bit integers: not exact as doubles, the general kernel's way
  }
}

// True when cval compares with the keys of `kind` as it does in double.
bool cval_is_exact(KeyKind kind, double cval) {
  switch (kind) {
    case KeyKind::Int: return cval >= INT32_MIN && cval <= INT32_MAX && cval == std::trunc(cval);
    case KeyKind::UInt: return cval >= 0 && cval <= UINT32_MAX && cval == std::trunc(cval);
    case KeyKind::Float: return std::isnan(cval) || (double)(float)cval == cval;
    default: return true;
  }
}

// The box a footprint fills, when it fills one: lowest offset and extent per axis.
struct Box {
  std::vector<int64_t> lo, extent;
};

std::optional<Box> dense_box(const Footprint& f) {
  Box b{std::vector<int64_t>(f.ndim, 0), std::vector<int64_t>(f.ndim, 1)};
  std::vector<int64_t> hi(f.ndim, 0);
  for (int d = 0; d < f.ndim; ++d) {
    b.lo[d] = hi[d] = f.offsets[d];
    for (int64_t t = 1; t < f.taps(); ++t) {
      b.lo[d] = std::min(b.lo[d], f.offsets[t * f.ndim + d]);
      hi[d] = std::max(hi[d], f.offsets[t * f.ndim + d]);
    }
    b.extent[d] = hi[d] - b.lo[d] + 1;
  }
  int64_t cells = 1;
  for (int d = 0; d < f.ndim; ++d) cells *= b.extent[d];
  if (cells != f.taps() || cells > 1024) return std::nullopt;
  std::vector<bool> seen(cells, false);  // each cell once
  for (int64_t t = 0; t < f.taps(); ++t) {
    int64_t cell = 0;
    for (int d = 0; d < f.ndim; ++d) cell = cell * b.extent[d] + (f.offsets[t * f.ndim + d] - b.lo[d]);
    if (seen[cell]) return std::nullopt;
    seen[cell] = true;
  }
  return b;
}

template <KeyKind Kind, class Shape>
void launch(const BoxMedianArgs& a, int64_t blocks, cudaStream_t stream) {
  box_median_kernel<Kind, Shape><<<(unsigned)blocks, kThreads, 0, stream>>>(a);
}

template <class Shape>
void launch_kind(KeyKind kind, const BoxMedianArgs& a, int64_t blocks, cudaStream_t stream) {
  switch (kind) {
    case KeyKind::Int: return launch<KeyKind::Int, Shape>(a, blocks, stream);
    case KeyKind::UInt: return launch<KeyKind::UInt, Shape>(a, blocks, stream);
    case KeyKind::Float: return launch<KeyKind::Float, Shape>(a, blocks, stream);
    case KeyKind::Double: return launch<KeyKind::Double, Shape>(a, blocks, stream);
  }
}

// Calls launch_kind<Shape> for the box's extents; false for a box it has no kernel for.
bool launch_shape(int km, int kp, int kx, KeyKind kind, const BoxMedianArgs& a, int64_t blocks,
                  cudaStream_t stream) {
  const auto is = [&](int m, int p, int x) { return km == m && kp == p && kx == x; };
  if (is(3, 1, 3)) launch_kind<BoxShape<3, 1, 3>>(kind, a, blocks, stream);
  else if (is(5, 1, 5)) launch_kind<BoxShape<5, 1, 5>>(kind, a, blocks, stream);
  else if (is(7, 1, 7)) launch_kind<BoxShape<7, 1, 7>>(kind, a, blocks, stream);
  else if (is(3, 3, 3)) launch_kind<BoxShape<3, 3, 3>>(kind, a, blocks, stream);
  else if (is(5, 5, 5)) launch_kind<BoxShape<5, 5, 5>>(kind, a, blocks, stream);
  else return false;
  return true;
}

}  // namespace

bool box_median_pass(const ArrayDesc& in, const ArrayDesc& out, const Footprint& f, double cval,
                     cudaStream_t stream) {
  const int nd = in.ndim;
  const std::optional<KeyKind> kind = key_kind(in.dtype);
  if (f.reduce != Reduce::Rank || f.rank != f.taps() / 2 || nd < 2 || !kind) return false;
  if (f.mode == Mode::Constant && !cval_is_exact(*kind, cval)) return false;
  const std::optional<Box> box = dense_box(f);
  if (!box) return false;
  // The box spans the last three axes, or the last two (a 2-D box).
  const int walked = nd >= 3 && box->extent[nd - 3] > 1 ? nd - 3 : nd - 2;
  const bool flat = walked == nd - 2;
  for (int d = 0; d < walked; ++d)
    if (box->extent[d] != 1 || box->lo[d] != 0) return false;
  const int axis[3] = {walked, flat ? -1 : nd - 2, nd - 1};

  BoxMedianArgs a{};
  a.in = in.data;
  a.out = out.data;
  a.in_dtype = in.dtype;
  a.out_dtype = out.dtype;
  a.in_aligned = is_aligned(in);
  a.out_aligned = is_aligned(out);
  a.mode = f.mode;
  a.cval = cval;
  int extent[3];
  for (int k = 0; k < 3; ++k) {
    const int d = axis[k];
    a.n[k] = d < 0 ? 1 : in.shape[d];
    a.in_stride[k] = d < 0 ? 0 : in.strides[d];
    a.out_stride[k] = d < 0 ? 0 : out.strides[d];
    a.lo[k] = d < 0 ? 0 : (int)box->lo[d];
    extent[k] = d < 0 ? 1 : (int)box->extent[d];
  }
  int64_t lead = 1;
  a.lead_ndim = walked;
  for (int d = 0; d < a.lead_ndim; ++d) {
    a.lead_shape[d] = in.shape[d];
    a.lead_in_stride[d] = in.strides[d];
    a.lead_out_stride[d] = out.strides[d];
    lead *= in.shape[d];
  }
  const int tile_rows = extent[1] > 1 ? 8 : 1, tile_cols = 2 * kThreads / tile_rows;
  a.tiles_x = (a.n[2] + tile_cols - 1) / tile_cols;
  a.tiles_rows = (a.n[1] + tile_rows - 1) / tile_rows;
  // Long runs along the walked axis share the ring's reads; short ones make
  // enough blocks to fill the device.
  const int64_t tiles = lead * a.tiles_x * a.tiles_rows, enough = 8LL * multiprocessors();
  a.chunk = 32;
  while (a.chunk > 4 && tiles * ((a.n[0] + a.chunk - 1) / a.chunk) < enough) a.chunk /= 2;
  a.chunks = (a.n[0] + a.chunk - 1) / a.chunk;
  const int64_t blocks = tiles * a.chunks;
  if (blocks > INT32_MAX) return false;
  if (!launch_shape(extent[0], extent[1], extent[2], *kind, a, blocks, stream)) return false;
  GF_CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace gpufilt::cuda
