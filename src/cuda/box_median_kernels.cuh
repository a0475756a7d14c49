// The median kernels of box_rank.cu's fast path (box_median.cuh declares
// their launchers): a separable median for 3x3, 5x5, 7x7 and 3x3x3 boxes
// (below, "separable box medians") and a tiled median for 5x5x5 ones. Each
// unit that includes this header instantiates only the kernels it launches.
//
// The 5x5x5 median: a block owns a tile of a plane (8 rows x 64 columns)
// and walks a run of planes along the box's first axis, keeping the box's
// depth of input planes in a shared-memory ring: each input element is read
// from global memory about once, its boundary extension resolved once per
// plane, and converted once to an order key. Each thread takes two
// neighbouring outputs of a row: their windows share all but one column
// each, and the selection runs on the shared values once.
//
// Selection: the values the pair shares are sorted by a pruned sorting
// network (core/selection_network.hpp) only at the ranks the median can take
// among them, each output's own values are sorted, and one min-max merge of
// the two gives the median (SharedMedian). Every index is a compile-time
// constant, so the values live in registers and the work is min/max
// instructions: ~1260 an output (a selection over all 125 values needs
// ~2240). Where the shared values would not fit in registers (5x5x5 in
// double), forgetful selection (Paeth; McGuire, "A fast, small-radius GPU
// median filter") keeps a set of about half of them instead.
//
// Values are compared as order keys: integers as themselves, floats as
// integers whose order is the numeric one with every NaN greatest,
// so that the NaN semantics of the general kernel (a NaN has no rank; the
// answer is NaN past the other values' count) come free: the median is a NaN
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "core/border.hpp"
#include "core/selection_network.hpp"
#include "cuda/box_median.cuh"
#include "cuda/box_select.cuh"
#include "cuda/box_tile.cuh"
#include "cuda/elements.cuh"

namespace gpufilt::cuda {
namespace {

constexpr int kThreads = 256;

// True when item threadIdx.x + i kThreads lies below `count` for every
// thread, known at compile time where i and count are: the compiler does
// not know that threadIdx.x < kThreads, and tests and branches around every
// store otherwise.
__device__ constexpr bool every_thread_within(int i, int count) { return (i + 1) * kThreads <= count; }

// ------------------------------------------------------------ order keys


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

// Order keys of a float's bits, held in the high end of a 32-bit word
// (float32: all of it; float16: the high half, the low half zero), as
// signed integers: the bits, all but the sign flipped for negative floats
// (flip_negative: its own inverse), then moved down by kShift, wrapping,
// which takes the negative NaNs (the keys just below -inf's) past every
// other key. Every NaN ranks greatest, and a key maps back to its float's
// very bits. Both ways run on the FMA pipe, by integer multiply-adds, but
// for bits()'s flip (two instructions): a key is made of every input
// element and read back for every output, and the ALU pipe is the one the
// selection's min/max keep busy (ncu, H100, 3x3x3 float32: 77.5%). A NaN
// test and select and the flip took four ALU instructions an input element
// before (float16's, about six); H100, 3x3x3 on 256^3: float32 0.165 ->
// 0.148 ms (with the changes beside it), float16 0.156 -> 0.148.
template <uint32_t kNegativeInfinity>
struct FloatBitKeys {
  static constexpr uint32_t kShift = (kNegativeInfinity ^ 0x7fffffffu) - 0x80000000u;  // -inf's key: INT32_MIN
  static __device__ __forceinline__ int32_t flip_negative(int32_t b) { return b ^ ((b >> 31) & 0x7fffffff); }
  // flip_negative(b) - kShift as b (1 - 2t) + t (2^31 - 1) - kShift, t the
  // sign bit of b (the high word of b x 2).
  static __device__ __forceinline__ int32_t key(uint32_t b) {
    const uint32_t t = __umulhi(b, 2 * kUnit);
    return (int32_t)(b * (1 - 2 * t) + (t * 0x7fffffffu - kShift));
  }
  static __device__ __forceinline__ uint32_t bits(int32_t k) {
    return (uint32_t)flip_negative((int32_t)((uint32_t)k * kUnit + kShift));
  }
};
using Float32Keys = FloatBitKeys<0xff800000u>;
using Float16Keys = FloatBitKeys<0xfc000000u>;  // a float16's bits << 16

template <>
struct Keys<KeyKind::Float> {  // float16, bfloat16, float32: exact as float
  using type = int32_t;
  static __device__ type from_float(float f) { return Float32Keys::key(__float_as_uint(f)); }
  static __device__ float to_float(type k) { return __uint_as_float(Float32Keys::bits(k)); }
  static __device__ type from(double v) { return from_float((float)v); }
  static __device__ double value(type k) { return to_float(k); }
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

// How a median kernel reads its input as keys and stores its results.
// AnyIO: any dtypes, each element through double and a run-time switch on
// its dtype (elements.cuh). SameIO<T>: input and output of dtype T, aligned:
// typed loads, no double, and an output pair in one store where aligned, for
// the dtypes that must keep float32's speed (ncu, H100, 3x3x3 on 256^3
// float32: AnyIO spent ~190 of 274 instructions an output outside the
// selection, and its separate stores of each pair's two outputs made 39% of
// the global sectors excess; 0.29 -> 0.21 ms). float16 is ordered by its
// bits, as float32 is (Keys<Float>), not through a conversion to float.
template <KeyKind Kind>
struct AnyIO {
  using Key = Keys<Kind>;
  using V = typename Key::type;
  using Raw = V;  // what fetch reads: here already the key
  // Input planes box_column_median_kernel keeps in flight: its fetch waits
  // for its loads itself (the conversion), so one.
  static constexpr int kFetchAhead = 1;
  static __device__ __forceinline__ Raw fetch(const BoxArgs& a, const char* p) {
    return Key::from(load_any(a.in_dtype, p, a.in_aligned));
  }
  static __device__ __forceinline__ V key(Raw k) { return k; }
  static __device__ __forceinline__ V cval_key(double cval) { return Key::from(cval); }
  static __device__ __forceinline__ void store(const BoxArgs& a, char* p, V k) {
    store_any(a.out_dtype, p, Key::value(k), a.out_aligned);
  }
  // Outputs x and x + 1 of a row at p, the second only when `both`; in one
  // store where `joined` (joins_pairs), never here.
  static __device__ bool joins_pairs(const BoxArgs&, const char*) { return false; }
  static __device__ __forceinline__ void store_pair(const BoxArgs& a, char* p, V first, V second, bool both, bool) {
    store(a, p, first);
    if (both) store(a, p + a.out_stride[2], second);
  }
};

template <DType T>
struct SameIO {
  static_assert(T == DType::Float32 || T == DType::Float16 || T == DType::UInt8 || T == DType::UInt16 ||
                    T == DType::Int8 || T == DType::Int16,
                "the dtypes below");
  using Key = Keys<T == DType::Float32 ? KeyKind::Float : KeyKind::Int>;
  using V = typename Key::type;
  using S = typename storage<T>::type;
  using Raw = S;  // what fetch reads: the element, made a key only when stored
  // Input planes box_column_median_kernel keeps in flight for 2-D boxes
  // (3-D ones: one, see there). H100, one -> two (3x3x3 on 256^3, before
  // 3-D boxes had their own rule): float32 0.20-0.21 -> 0.18-0.19 ms (5x5
  // on 8192^2 0.67-0.70 -> 0.58-0.59), float16 0.21-0.22 -> 0.20, uint16
  // 0.166-0.176 -> 0.175-0.185, uint8 0.165-0.174 -> 0.19-0.20 (24 bytes
  // spilled): two but for uint8, so that none is slower than float32.
  static constexpr int kFetchAhead = sizeof(S) >= 2 ? 2 : 1;
  struct alignas(2 * sizeof(S)) Pair {
    S first, second;
  };

  static bool applies(const BoxArgs& a) {
    const bool cval_exact =
        T != DType::Float16 || a.mode != Mode::Constant || std::isnan(a.cval) || is_value_of(T, a.cval);
    return a.in_dtype == T && a.out_dtype == T && a.in_aligned && a.out_aligned && cval_exact;
  }
  static __device__ __forceinline__ V key(S s) {
    if constexpr (T == DType::Float32) {
      return Key::from_float(s);
    } else if constexpr (T == DType::Float16) {
      return Float16Keys::key((uint32_t)s << 16);
    } else {
      return s;
    }
  }
  static __device__ __forceinline__ S value(V k) {
    if constexpr (T == DType::Float32) return Key::to_float(k);
    else if constexpr (T == DType::Float16) return (S)(Float16Keys::bits(k) >> 16);
    else return (S)k;
  }
  static __device__ __forceinline__ V cval_key(double cval) {
    if constexpr (T == DType::Float16) return key(float_to_half_bits((float)cval));
    else return Key::from(cval);
  }
  static __device__ __forceinline__ Raw fetch(const BoxArgs&, const char* p) {
    return __ldg(reinterpret_cast<const S*>(p));
  }
  static __device__ __forceinline__ void store(const BoxArgs&, char* p, V k) { *reinterpret_cast<S*>(p) = value(k); }
  // Whether the output pairs of a thread that walks along axis 0 from p
  // can each go out in one aligned store (store_pair's `joined`).
  static __device__ bool joins_pairs(const BoxArgs& a, const char* p) {
    return a.out_stride[2] == sizeof(S) && a.out_stride[0] % sizeof(Pair) == 0 &&
           reinterpret_cast<uintptr_t>(p) % sizeof(Pair) == 0;
  }
  static __device__ __forceinline__ void store_pair(const BoxArgs& a, char* p, V first, V second, bool both,
                                                    bool joined) {
    if (both && joined) {
      *reinterpret_cast<Pair*>(p) = Pair{value(first), value(second)};
      return;
    }
    store(a, p, first);
    if (both) store(a, p + a.out_stride[2], second);
  }
};

// A block's input planes as order keys in shared memory, Plane elements a
// plane (rows of Cols), Loads a thread: each thread's elements located once
// (their byte offsets within any plane; offsets may be negative), then any
// plane m fetched into registers and later stored, as keys, into dst (or
// both at once: load). Elements outside the array (cval) and past Plane
// read the plane's first element, unused: every load is made, without a
// branch around it (ncu, 3x3x3 median: the checks and branches of the
// fetch were 7% of the kernel's instructions).
template <class IO, int Loads, int Plane, int Cols>
struct PlaneKeys {
  using Key = typename IO::Key;
  using V = typename Key::type;
  struct Fetched {
    typename IO::Raw raw[Loads];
    uint32_t cval_mask;  // bit l: element l lies outside the array (cval)
  };
  int64_t offset[Loads];
  uint32_t outside = 0;  // bit l: element l lies outside the plane's rows and columns, or past Plane
  V cval;

  __device__ PlaneKeys(const BoxArgs& a, const BlockOrigin& o) : cval(IO::cval_key(a.cval)) {
#pragma unroll
    for (int l = 0; l < Loads; ++l) {
      const int e = threadIdx.x + l * kThreads;
      const int64_t in_row = border_index(o.row0 + e / Cols + a.lo[1], a.n[1], a.mode);
      const int64_t in_col = border_index(o.x0 + e % Cols + a.lo[2], a.n[2], a.mode);
      const bool unused = e >= Plane || in_row < 0 || in_col < 0;
      outside |= (uint32_t)unused << l;
      offset[l] = unused ? 0 : in_row * a.in_stride[1] + in_col * a.in_stride[2];
    }
  }
  // Plane indices in int32 (run_median), whose tests are one instruction
  // each: the ALU's, which the selection's min/max keep busy.
  __device__ __forceinline__ Fetched fetch(const BoxArgs& a, const BlockOrigin& o, int32_t m) const {
    const int32_t n = (int32_t)a.n[0];  // < 0: a plane of cval, read from plane 0
    const int32_t jm = (uint32_t)m < (uint32_t)n ? (int32_t)m : (int32_t)border_index(m, n, a.mode);
    const char* plane = a.in + o.in_base + (uint64_t)(uint32_t)max(jm, 0) * (uint64_t)a.in_stride[0];
    Fetched f;
    f.cval_mask = jm < 0 ? ~0u : outside;
#pragma unroll
    for (int l = 0; l < Loads; ++l) f.raw[l] = IO::fetch(a, plane + offset[l]);
    return f;
  }
  // Keys into dst; the cval test only where some element of this thread's
  // needs it (the blocks at the border of a constant mode).
  __device__ __forceinline__ void store(const Fetched& f, V* dst) const {
    if (f.cval_mask == 0) {
#pragma unroll
      for (int l = 0; l < Loads; ++l) {
        const int e = threadIdx.x + l * kThreads;
        if (every_thread_within(l, Plane) || e < Plane) dst[e] = IO::key(f.raw[l]);
      }
      return;
    }
#pragma unroll
    for (int l = 0; l < Loads; ++l) {
      const int e = threadIdx.x + l * kThreads;
      if (every_thread_within(l, Plane) || e < Plane) dst[e] = f.cval_mask >> l & 1 ? cval : IO::key(f.raw[l]);
    }
  }
  __device__ __forceinline__ void load(const BoxArgs& a, const BlockOrigin& o, int32_t m, V* dst) const {
    store(fetch(a, o, m), dst);
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

// ------------------------------------------------------ sorting networks

// Runs core/selection_network.hpp's sorting network for positions [First,
// Last] of N values, every exchange its own instantiation: indices are
// compile-time constants, so the values stay in registers.
template <int N, int First, int Last>
struct Network {
  static constexpr ExchangeList list = sorting_exchanges(N, First, Last);

  template <class V, int Cap>
  static __host__ __device__ __forceinline__ void run(V (&v)[Cap]) {
    static_assert(Cap >= N && list.count > 0 || N == 1, "network arguments");
    Exchanges<list>::run(v);
  }
};

// Fills v[i] = get(i) for i < N, i a compile-time constant.
template <class V, int N, class Get, int... I>
__host__ __device__ __forceinline__ void fill_each(V (&v)[N], const Get& get, std::integer_sequence<int, I...>) {
  ((v[I] = get(std::integral_constant<int, I>())), ...);
}
template <class V, int N, class Get>
__host__ __device__ __forceinline__ void fill(V (&v)[N], const Get& get) {
  fill_each(v, get, std::make_integer_sequence<int, N>());
}

// The median of two outputs' windows of Common + 2 Own values, Common of
// them shared (NO = Own, R = (Common + Own) / 2, the median's rank): the
// answer has R values under it, so among the shared values it ranks between
// R - NO and R; sorting only those positions of the shared values (S, NO + 1
// of them) leaves each output the median of S and its own sorted values
// (T), which is min over i + j = NO + 1 of max(S_i, T_j) (1-based; T_0 =
// -infinity): NO exchanges instead of a selection over all of them.
template <int Common, int Own>
struct SharedMedian {
  static constexpr int R = (Common + Own) / 2;
  static_assert(R >= Own && R < Common, "the median of an odd box");

  template <class V, class Get>
  static __host__ __device__ __forceinline__ void prepare(V (&s)[Common], const Get& get_common) {
    fill(s, get_common);
    Network<Common, R - Own, R>::run(s);
  }
  template <class V, class Get>
  static __host__ __device__ __forceinline__ V finish(const V (&s)[Common], const Get& get_own) {
    V t[Own];
    fill(t, get_own);
    Network<Own, 0, Own - 1>::run(t);
    V answer = s[R];
#pragma unroll
    for (int i = 1; i <= Own; ++i) {
      const V a = s[R - Own + i - 1], b = t[Own - i];
      const V m = a < b ? b : a;
      answer = m < answer ? m : answer;
    }
    return answer;
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

// Two blocks an SM for 32-bit keys: 128 registers (52 bytes spilled) instead
// of 175 at one block; H100, 5x5x5 on 256^3 float32: 2.06 -> 1.66 ms.
template <class IO>
constexpr int kMedianMinBlocks = sizeof(typename IO::V) == 8 ? 1 : 2;

template <class IO, class Shape>
__global__ void __launch_bounds__(kThreads, kMedianMinBlocks<IO>) box_median_kernel(const __grid_constant__ BoxArgs a) {
  using V = typename IO::V;
  using Select = Forgetful<Shape::taps, Shape::taps / 2>;
  // Sorting networks need all the shared values in registers at once: for
  // up to 128 registers of them; forgetful selection (a set of half the
  // values) beyond.
  constexpr bool kNetwork = Shape::shared_taps * sizeof(V) <= 128 * 4;
  constexpr int KM = Shape::KM, KP = Shape::KP, KX = Shape::KX, cols = Shape::cols;
  __shared__ V ring[KM][Shape::plane];

  const BlockOrigin o = block_origin(a, Shape::tile_rows, Shape::tile_cols);
  const int64_t x0 = o.x0, row0 = o.row0, m0 = o.m0, m_end = o.m_end, out_base = o.out_base;

  const PlaneKeys<IO, Shape::loads, Shape::plane, cols> planes(a, o);
  auto load_plane = [&](int32_t m, V* dst) { planes.load(a, o, m, dst); };

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
  auto own = [&](int column) {  // value i of the KM x KP in the column
    return [&, column](auto i) {
      constexpr int t = decltype(i)::value, jr = t % KP, jm = t / KP;
      return ring[jm][base + jr * cols + column];
    };
  };
  auto after_common = [](auto get) {  // value i of the window, i >= shared_taps, an own one
    return [get](auto i) { return get(std::integral_constant<int, decltype(i)::value - Shape::shared_taps>()); };
  };
  // One output at a time: holding the first for a store of both spilled
  // (5x5x5: 348 bytes, against 52).
  auto store = [&](int64_t m, int64_t xo, V key) {
    if (r < a.n[1] && xo < a.n[2])
      IO::store(a, a.out + out_base + m * a.out_stride[0] + r * a.out_stride[1] + xo * a.out_stride[2], key);
  };

#pragma unroll 1
  for (int j = 0; j < KM - 1; ++j) load_plane(m0 + a.lo[0] + j, ring[j]);
  int slot = KM - 1;  // the ring's slot for the next plane
#pragma unroll 1
  for (int64_t m = m0; m < m_end; ++m) {
    load_plane(m + a.lo[0] + KM - 1, ring[slot]);
    slot = slot + 1 == KM ? 0 : slot + 1;
    __syncthreads();
    if constexpr (kNetwork) {
      using Median = SharedMedian<Shape::shared_taps, KM * KP>;
      V common_sorted[Shape::shared_taps];
      Median::prepare(common_sorted, common);
      store(m, x, Median::finish(common_sorted, own(0)));
      store(m, x + 1, Median::finish(common_sorted, own(KX)));
    } else {
      V common_set[Select::kCapacity];
      Select::template add_range<0, Shape::shared_taps>(common_set, common);
      V set[Select::kCapacity];
#pragma unroll
      for (int k = 0; k < Select::kCapacity; ++k) set[k] = common_set[k];
      Select::template add_range<Shape::shared_taps, Shape::taps>(set, after_common(own(0)));
      store(m, x, Select::finish(set));
      Select::template add_range<Shape::shared_taps, Shape::taps>(common_set, after_common(own(KX)));
      store(m, x + 1, Select::finish(common_set));
    }
    __syncthreads();
  }
}

// ------------------------------------------------- separable box medians
//
// The 3x3, 5x5, 7x7 and 3x3x3 boxes, after Adams (core/selection_network.hpp's
// BoxRankPlan, the CPU's box path): a "column" is the KM x KP values of the
// box at one position along the last axis, and an output's window is KX
// neighbouring columns. A block owns a tile of outputs of a plane (8 rows x
// 64 for 3-D boxes, one row of 512 - (KX - 1) for 2-D ones: ColumnShape)
// and walks a run of planes:
//   1. each thread owns two columns for the whole walk. Per plane it sorts
//      the KP values the new plane adds to each (once, not once per output
//      reading them), keeps the sorted runs of the last KM - 1 planes in
//      registers, merges the KM runs into the sorted column and writes it to
//      shared memory: every column of the tile is sorted once (in 3-D
//      tiles, the KX - 1 columns a row past its outputs fall to a few
//      threads as a third column);
//   2. each thread then takes two neighbouring outputs of a row, merges the
//      columns they share in pairs, keeps the ranks the median can take,
//      and selects each output's median from these and its own column.
// Min/max per output (before: the pair kernel above):
//            column  pairs  outputs  total   before
//   3x3x3    42      24     18       ~85     157
//   3x3       6       5      6       ~17      23
//   5x5      18      26     28       ~73     112
//   7x7      32      63    105      ~201     308
// (a column's share grows by 66/64 or 512/(512 - (KX - 1)) for the columns
// past a tile's outputs; with KX > 3, each merged pair is merged again by
// each output pair reading it).

// A sorted column in shared memory: its values and padding to whole 16-byte
// words, an odd number of them, so that neighbouring threads' 16-byte loads
// of neighbouring columns fall in different banks.
template <class V, int Rows>
struct alignas(16) SortedColumn {
  static constexpr int words = ((int)(Rows * sizeof(V)) + 15) / 16;
  static constexpr int padded = words % 2 ? words : words + 1;
  uint4 word[padded];

  __device__ __forceinline__ void store(const V (&v)[Rows]) {
    uint4 w[words] = {};
    memcpy(w, v, sizeof(v));
#pragma unroll
    for (int i = 0; i < words; ++i) word[i] = w[i];
  }
  __device__ __forceinline__ void load(V (&v)[Rows]) const {
    uint4 w[words];
#pragma unroll
    for (int i = 0; i < words; ++i) w[i] = word[i];
    memcpy(v, w, sizeof(v));
  }
};

template <int KM_, int KP_, int KX_>
struct ColumnShape {
  static constexpr int KM = KM_, KP = KP_, KX = KX_;
  static constexpr int tile_rows = KP > 1 ? 8 : 1;                   // outputs
  // Outputs a tile row: 3-D boxes 64, with the halo 66 columns, a third one
  // for a few threads of warp 0; 2-D boxes one row of 512 less the halo,
  // two columns a thread. H100, 8192^2 float32 against rows of 512 (a third
  // column for 2 to 6 threads, which every warp waited for at the step's
  // barrier): 5x5 0.522-0.526 -> 0.488-0.498 ms, 7x7 1.098-1.101 ->
  // 1.056-1.083, 3x3 unchanged. 3-D tiles of 62 went the other way (256^3,
  // 3x3x3: 0.170 -> 0.19-0.20): five blocks a row of 256 instead of four.
  static constexpr int tile_cols = KP > 1 ? 2 * kThreads / tile_rows : 2 * kThreads - (KX - 1);
  static constexpr int pairs = tile_cols / 2;                        // output pairs a row
  static constexpr int row_cols = tile_cols + KX - 1;                // columns a row
  static constexpr int columns = tile_rows * row_cols;
  static constexpr int thread_columns = (columns + kThreads - 1) / kThreads;  // 3-D: 2, or 3 for a few threads
  static constexpr bool every_thread_has_outputs = tile_rows * pairs == kThreads;
  static_assert(tile_cols % 2 == 0 && tile_rows * pairs <= kThreads, "outputs in pairs, a pair a thread");
  static constexpr int plane_rows = tile_rows + KP - 1;
  static constexpr int plane = plane_rows * row_cols;                // inputs
  static constexpr int loads = (plane + kThreads - 1) / kThreads;    // a thread's per plane
};

// Blocks a multiprocessor is to hold: 4 (64 registers a thread) where the
// 32-bit keys of boxes up to 27 values fit in them without spilling. ncu on
// the H100, 3x3x3 float32 at 72 registers (3 blocks): issue slots 46% busy,
// 0.95 eligible warps a scheduler, latency bound; at 64 registers and 4
// blocks, 256^3 took 0.318 ms against 0.334 (within the run-to-run spread:
// occupancy is not the whole story either). 7x7 boxes and 64-bit keys keep
// their registers (they spill at 64).
template <class IO, class Shape>
constexpr int kColumnMinBlocks = sizeof(typename IO::V) == 4 && Shape::KM * Shape::KP * Shape::KX <= 27 ? 4 : 1;

// Whether the column merges of 3-D boxes split their exchanges between the
// ALU and FMA pipes (ColumnMedian's SPLIT_COLUMN), for 32-bit keys. ncu, H100,
// 3x3x3 float32: the ALU pipe was 77.5% busy with 110 of the kernel's 189
// instructions an output (84 of them min/max), the FMA pipe mostly idle.
// H100, 256^3, split / not: float32 0.1618 / 0.1674 ms, uint8 0.1453 /
// 0.1539, uint16 0.1533 / 0.1594. Splitting the run sorts too, or every
// stage's exchanges, gained less (float32 0.162-0.165): issue slots then bound.
template <class IO, class Shape>
constexpr bool kSplitColumn = sizeof(typename IO::V) == 4 && Shape::KP > 1;

template <class IO, class Shape>
__global__ void __launch_bounds__(kThreads, kColumnMinBlocks<IO, Shape>) box_column_median_kernel(const __grid_constant__ BoxArgs a) {
  using V = typename IO::V;
  constexpr int KM = Shape::KM, KP = Shape::KP, KX = Shape::KX, row_cols = Shape::row_cols;
  using Median = ColumnMedian<KM, KP, KX, kSplitColumn<IO, Shape>>;
  constexpr int rows = Median::rows, half = row_cols / 2;
  using Column = SortedColumn<V, rows>;
  __shared__ V plane[Shape::plane];
  // Column 2h + parity of tile row r at sorted[parity].at[r][h]. The 16-byte
  // stores of 8 neighbouring threads go to both parities, so the second
  // starts 64 bytes further on in the banks than the first (ncu, H100:
  // without, the stores of 3x3x3 took two-way bank conflicts).
  constexpr int skew_words = (4 - Shape::tile_rows * half * Column::padded % 8 + 8) % 8;
  struct ParityColumns {
    Column at[Shape::tile_rows][half];
    uint4 skew[skew_words ? skew_words : 8];
  };
  __shared__ ParityColumns sorted[2];

  const BlockOrigin o = block_origin(a, Shape::tile_rows, Shape::tile_cols);
  const int64_t x0 = o.x0, row0 = o.row0, m0 = o.m0, m_end = o.m_end, out_base = o.out_base;

  // Input planes are fetched into registers kAhead steps before
  // they are stored into `plane` and sorted: their loads are in flight
  // through the steps before. ncu, H100, 3x3x3 on 256^3, loads at the top
  // of each step: 5.5 of ~14 cycles between a warp's instructions waited on
  // them. One step ahead: uint16 0.196 -> 0.17 ms, uint8 0.183 -> 0.17,
  // float16 0.234 -> 0.215, float32 0.21 either way (its 64 MiB come from
  // DRAM every call, uint16's stay in the 50 MB L2). How many: kAhead
  // below. Blocks of 32 planes instead of 16 changed nothing.
  const PlaneKeys<IO, Shape::loads, Shape::plane, row_cols> planes(a, o);
  auto fetch_plane = [&](int32_t m) { return planes.fetch(a, o, m); };

  // This thread's columns: e = threadIdx.x + c kThreads below
  // Shape::columns, at tile row e / row_cols and column e % row_cols (the
  // tile's last few columns fall to a few threads of warp 0). held[c]: the
  // sorted runs of the last KM - 1 planes, oldest first, then room for the
  // new one.
  constexpr int thread_columns = Shape::thread_columns;
  V held[thread_columns][rows];
  auto has_column = [&](int c) {
    return every_thread_within(c, Shape::columns) || c * kThreads + (int)threadIdx.x < Shape::columns;
  };
  auto sort_new_run = [&](int c) {
    const int e = threadIdx.x + c * kThreads;  // plane[e]: the column's first value
    V run[KP];
#pragma unroll
    for (int j = 0; j < KP; ++j) run[j] = plane[e + j * row_cols];
    Median::sort_run(run);
#pragma unroll
    for (int j = 0; j < KP; ++j) held[c][(KM - 1) * KP + j] = run[j];
  };
  auto drop_oldest_run = [&](int c) {
#pragma unroll
    for (int i = 0; i < (KM - 1) * KP; ++i) held[c][i] = held[c][i + KP];
  };

  // The pair of outputs this thread selects: tile row `row`, columns 2 pair,
  // 2 pair + 1, of plane m0, then of each next plane. Whether and how they
  // are stored is decided once, outside the walk: the tests took ALU
  // instructions every step, and the ALU pipe is the one the selection's
  // min/max keep busy.
  const int pair = threadIdx.x % Shape::pairs, row = threadIdx.x / Shape::pairs;
  const int64_t x = x0 + 2 * pair, r = row0 + row;
  const bool has_outputs = r < a.n[1] && x < a.n[2], both = x + 1 < a.n[2];
  char* out = a.out + out_base + m0 * a.out_stride[0] + r * a.out_stride[1] + x * a.out_stride[2];
  const bool joined = IO::joins_pairs(a, out);
  auto store_outputs = [&](V first, V second) {
    if (has_outputs) IO::store_pair(a, out, first, second, both, joined);
    out += a.out_stride[0];
  };
  auto column = [&](int c, V (&v)[rows]) {  // column 2 pair + c of this thread's row
    sorted[c % 2].at[row][pair + c / 2].load(v);
  };

  // ahead[i]: input plane k + i, k the next one stored (the block's
  // first plane m0 + lo[0], then one more a step). 3-D boxes fetch one
  // plane ahead, whose loads are in flight through a whole step: two
  // cost four moves a step to pass the planes along and the registers
  // for a second one (H100, 3x3x3 float32 on 256^3: 0.155 -> 0.148 ms).
  constexpr int kAhead = Shape::KP > 1 ? 1 : IO::kFetchAhead;
  decltype(fetch_plane(0)) ahead[kAhead];
#pragma unroll
  for (int i = 0; i < kAhead; ++i) ahead[i] = fetch_plane(m0 + a.lo[0] + i);
  auto store_next_plane = [&](int32_t k, int32_t end) {  // plane k into `plane`; plane k + kAhead fetched
    planes.store(ahead[0], plane);
    __syncthreads();
#pragma unroll
    for (int i = 0; i + 1 < kAhead; ++i) ahead[i] = ahead[i + 1];
    if (k + kAhead < end) ahead[kAhead - 1] = fetch_plane(k + kAhead);
  };
  // Plane indices in int32 (run_median): their tests take one ALU instruction each.
  const int32_t planes_end = (int32_t)m_end + a.lo[0] + KM - 1;  // one past the last input plane read
#pragma unroll
  for (int j = 0; j < KM - 1; ++j) {  // the first KM - 1 planes' runs
    store_next_plane((int32_t)m0 + a.lo[0] + j, planes_end);
#pragma unroll
    for (int c = 0; c < thread_columns; ++c) {
      if (!has_column(c)) continue;
      sort_new_run(c);
      drop_oldest_run(c);
    }
    __syncthreads();
  }
#pragma unroll 1
  for (int32_t m = (int32_t)m0; m < (int32_t)m_end; ++m) {  // run_median: n[0] <= INT32_MAX
    store_next_plane(m + a.lo[0] + KM - 1, planes_end);
#pragma unroll
    for (int c = 0; c < thread_columns; ++c) {
      if (!has_column(c)) continue;
      sort_new_run(c);
      V col[rows];
      Median::merge_column(held[c], col);
      const int e = threadIdx.x + c * kThreads, cx = e % row_cols;
      sorted[cx % 2].at[e / row_cols][cx / 2].store(col);
      drop_oldest_run(c);
    }
    __syncthreads();
    if (Shape::every_thread_has_outputs || row < Shape::tile_rows) {  // 2-D: the last few threads have none
      V first, second;
      Median::medians(column, first, second);
      store_outputs(first, second);
    }
  }
}

// ------------------------------------------------------------ launchers

template <class Shape>
constexpr bool kByColumns = false;
template <int KM, int KP, int KX>
constexpr bool kByColumns<ColumnShape<KM, KP, KX>> = true;

bool is_box(const BoxArgs& a, int km, int kp, int kx) {
  return a.extent[0] == km && a.extent[1] == kp && a.extent[2] == kx;
}

template <class IO, class Shape>
bool launch_median(BoxArgs a, cudaStream_t stream) {
  const int64_t blocks = tile(a, Shape::tile_rows, Shape::tile_cols, 32);
  if (!blocks) return false;
  if constexpr (kByColumns<Shape>) box_column_median_kernel<IO, Shape><<<(unsigned)blocks, kThreads, 0, stream>>>(a);
  else box_median_kernel<IO, Shape><<<(unsigned)blocks, kThreads, 0, stream>>>(a);
  return true;
}

// The typed kernels, where one applies; false where none does.
template <class Shape>
bool launch_same_io_median(const BoxArgs& a, cudaStream_t stream) {
  if (SameIO<DType::Float32>::applies(a)) return launch_median<SameIO<DType::Float32>, Shape>(a, stream);
  if (SameIO<DType::Float16>::applies(a)) return launch_median<SameIO<DType::Float16>, Shape>(a, stream);
  if (SameIO<DType::UInt8>::applies(a)) return launch_median<SameIO<DType::UInt8>, Shape>(a, stream);
  if (SameIO<DType::UInt16>::applies(a)) return launch_median<SameIO<DType::UInt16>, Shape>(a, stream);
  if (SameIO<DType::Int16>::applies(a)) return launch_median<SameIO<DType::Int16>, Shape>(a, stream);
  if (SameIO<DType::Int8>::applies(a)) return launch_median<SameIO<DType::Int8>, Shape>(a, stream);
  return false;
}

// The kernels that compare as one of Kinds, where `kind` is one; false otherwise.
template <class Shape, KeyKind... Kinds>
bool launch_any_io_median(KeyKind kind, const BoxArgs& a, cudaStream_t stream) {
  bool launched = false;
  ((kind == Kinds && (launched = launch_median<AnyIO<Kinds>, Shape>(a, stream))) || ...);
  return launched;
}

}  // namespace
}  // namespace gpufilt::cuda
