// CPU footprint filters. Each output line (along the last axis) reads one
// extended input line per distinct offset of the footprint across the other
// axes; the taps then read those buffers at their last-axis shift, so every
// input value is converted once per line and the inner loops are unit-stride.
// Consecutive output lines share most input lines: each is read once per
// thread, not once per output line reading it. Rank filters of a few taps
// run selection networks (selection_network.hpp) over vectors of outputs;
// those of the common boxes, separable ones sharing work between outputs.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cpu_backend.hpp"
#include "core/cpu_isa.hpp"
#include "core/cpu_lines.hpp"
#include "core/parallel.hpp"
#include "core/selection_network.hpp"

namespace gpufilt {
namespace {
using namespace cpu;

// The footprint regrouped for line-wise evaluation.
struct LinePlan {
  int outer_ndim = 0;
  std::vector<std::vector<int64_t>> rows;  // distinct outer offsets
  std::vector<int64_t> tap_row, tap_shift; // per tap: its row, its shift in that row's buffer
  int64_t left = 0, right = 0;             // extension of every buffered line

  explicit LinePlan(const Footprint& f) {
    const int last = f.ndim - 1;
    outer_ndim = last;
    int64_t lo = 0, hi = 0;
    for (int64_t t = 0; t < f.taps(); ++t) {
      lo = std::min(lo, f.offsets[t * f.ndim + last]);
      hi = std::max(hi, f.offsets[t * f.ndim + last]);
    }
    left = -lo;
    right = hi;
    std::map<std::vector<int64_t>, int64_t> index;
    for (int64_t t = 0; t < f.taps(); ++t) {
      std::vector<int64_t> row(f.offsets.begin() + t * f.ndim, f.offsets.begin() + t * f.ndim + last);
      auto it = index.emplace(row, (int64_t)rows.size()).first;
      if (it->second == (int64_t)rows.size()) rows.push_back(row);
      tap_row.push_back(it->second);
      tap_shift.push_back(f.offsets[t * f.ndim + last] + left);
    }
  }
};

// A selection network built at run time, run over many output positions at
// once through memory: for footprints with no network unrolled below.
// Footprints of up to this many taps select by a network on the CPU; larger
// ones by other algorithms.
constexpr int64_t kMaxNetworkTaps = 64;

struct SelectionNetwork {
  std::vector<Exchange> exchanges;
  int64_t rank = 0;
  bool valid = false;

  SelectionNetwork(int64_t taps, int64_t rank_) : rank(rank_) {
    valid = taps >= 1 && taps <= kMaxNetworkTaps && rank >= 0 && rank < taps;
    if (!valid) return;
    const ExchangeList list = selection_exchanges(taps, rank);
    exchanges.assign(list.items, list.items + list.count);
  }
  bool usable() const { return valid; }

  // values[t * width + m]: tap t of position m; result in values[rank * width + m].
  template <int Bytes, class E>
  void run(E* values, int64_t width) const {
    using V = typename Simd<E, Bytes>::V;
    constexpr int64_t step = sizeof(V) / sizeof(E);
    for (const Exchange& e : exchanges) {
      E *a = values + e.lo * width, *b = values + e.hi * width;
      // keep_min, keep_max: fixed at compile time, out of the loops
      auto sweep = [&](auto keep_min, auto keep_max) {
        auto exchange = [&](int64_t m, auto v) {  // vectors, then single values
          using W = decltype(v);
          const W x = load_as<W>(a + m), y = load_as<W>(b + m);
          if (keep_min) store_as(a + m, W(y < x ? y : x));
          if (keep_max) store_as(b + m, W(y < x ? x : y));
        };
        int64_t m = 0;
        for (; m + step <= width; m += step) exchange(m, V{});
        for (; m < width; ++m) exchange(m, E{});
      };
      using Yes = std::true_type;
      using No = std::false_type;
      if (e.keep_min && e.keep_max) sweep(Yes{}, Yes{});
      else if (e.keep_min) sweep(Yes{}, No{});
      else sweep(No{}, Yes{});
    }
  }
};

// Networks unrolled at compile time: the values stay in registers (or the
// compiler's spills) instead of going through memory at every exchange,
// about twice as fast.
//
// Both halves of a float exchange would share one comparison, and GCC then
// emits a compare and two blends instead of minps and maxps (which compute
// exactly y < x ? y : x and y < x ? x : y): an empty asm hides that the
// max compares the same values.
template <class V, class = void>
struct LaneOf {  // V's element type: V itself for a scalar
  using type = V;
};
template <class V>
struct LaneOf<V, std::void_t<decltype(std::declval<V>()[0])>> {
  using type = std::decay_t<decltype(std::declval<V>()[0])>;
};
template <class V>
GF_INLINE void opaque(V& a, V& b) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  asm("" : "+x"(a), "+x"(b));
#else
  (void)a;
  (void)b;
#endif
}

template <class V, int Lo, int Hi, bool KeepMin, bool KeepMax>
GF_INLINE void exchange(V* v) {
  V x = v[Lo], y = v[Hi];
  if (KeepMin) v[Lo] = V(y < x ? y : x);
  if constexpr (KeepMin && KeepMax && std::is_floating_point_v<typename LaneOf<V>::type>) opaque(x, y);
  if (KeepMax) v[Hi] = V(y < x ? x : y);
}

template <const ExchangeList& List>
struct Unrolled {
  template <class V, size_t... I>
  static GF_INLINE void apply(V* v, std::index_sequence<I...>) {
    (exchange<V, List.items[I].lo, List.items[I].hi, List.items[I].keep_min, List.items[I].keep_max>(v), ...);
  }
  template <class V>
  static GF_INLINE void run(V* v) {
    apply(v, std::make_index_sequence<List.count>{});
  }
};

// The medians of 9, 25 and 27 taps of other footprints than boxes.
template <int Taps, int Rank>
struct FixedSelection {
  static constexpr ExchangeList list = selection_exchanges(Taps, Rank);
  // res[i] for i < n; tap t of position i at taps[t][i].
  template <int Bytes, class E>
  static void run(const E* const* taps, int64_t n, E* res) {
    using V = typename Simd<E, Bytes>::V;
    constexpr int64_t step = sizeof(V) / sizeof(E);
    auto at = [&](int64_t i, auto v) {
      using W = decltype(v);
      W values[Taps];
      for (int t = 0; t < Taps; ++t) values[t] = load_as<W>(taps[t] + i);
      Unrolled<list>::run(values);
      store_as(res + i, values[Rank]);
    };
    int64_t i = 0;
    for (; i + step <= n; i += step) at(i, V{});
    for (; i < n; ++i) at(i, E{});
  }
};

// False when (taps, rank) has no fixed network.
template <int Bytes, class E>
bool fixed_selection(int64_t taps, int64_t rank, const E* const* tap_lines, int64_t n, E* res) {
  if (taps == 9 && rank == 4) return FixedSelection<9, 4>::run<Bytes>(tap_lines, n, res), true;
  if (taps == 25 && rank == 12) return FixedSelection<25, 12>::run<Bytes>(tap_lines, n, res), true;
  if (taps == 27 && rank == 13) return FixedSelection<27, 13>::run<Bytes>(tap_lines, n, res), true;
  return false;
}

// Rank filters of a full box: BoxRankPlan (selection_network.hpp), two
// outputs at a time over `Rows` lines across the other axes (the LinePlan's
// rows) by `Width` shifts along the line. To feed vectors of neighbouring
// pairs, lines are split into even and odd columns.

// Per-thread buffers of the box path, for lines of n values. The lines
// split in even and odd columns are `half` long: the pairs, plus the columns
// they read past them, plus a vector of lanes past the last one read (loops
// run in whole vectors; the extra lanes compute values nobody reads, from
// values set at allocation). The work arrays hold a chunk of kChunk pairs
// (and the columns and a vector past it), small enough to stay in the L1
// cache; even and odd the last vector of outputs of a line.
template <class E>
struct BoxBuffers {
  static constexpr int64_t kMaxLanes = 64 / sizeof(E), kChunk = 512 / sizeof(E);  // lanes: AVX-512's
  int64_t half = 0, columns_read = 0, chunk_len = 0;
  std::vector<E> columns, merged, even, odd, extended;

  BoxBuffers() = default;
  BoxBuffers(int64_t n, int64_t rows, int64_t width) {
    const int64_t runs = (width - 1) / 2;
    columns_read = (n + 1) / 2 + runs;
    half = (columns_read + 2 * kMaxLanes) / kMaxLanes * kMaxLanes;
    chunk_len = (kChunk + runs + 2 * kMaxLanes) / kMaxLanes * kMaxLanes;
    columns.assign(2 * rows * chunk_len, E{});
    merged.assign(2 * rows * chunk_len, E{});  // a merged column pair's ranks, at most all
    even.assign(kMaxLanes, E{});
    odd.assign(kMaxLanes, E{});
    extended.assign(2 * half, E{});
  }
  // An extended line split into even and odd columns: ext[2j] to row[j],
  // ext[2j+1] to row[half + j].
  void split(const E* __restrict ext, E* __restrict row) const {
    E* __restrict odd_row = row + half;
    for (int64_t j = 0, count = columns_read; j < count; ++j) {  // a local count: the loop vectorises
      row[j] = ext[2 * j];
      odd_row[j] = ext[2 * j + 1];
    }
  }
};

// f(std::integral_constant<int, i>) for i < N, unrolled: indices known at
// compile time keep arrays of vectors in registers.
template <int N, class F, int... I>
GF_INLINE void unroll(const F& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
GF_INLINE void unroll(const F& f) {
  unroll<N>(f, std::make_integer_sequence<int, N>{});
}

// The lanes of a and b interleaved, a0 b0 a1 b1 ...: the first half into
// lo, the second into hi.
template <class V, int... I>
GF_INLINE void zip(const V& a, const V& b, V& lo, V& hi, std::integer_sequence<int, I...>) {
  constexpr int S = sizeof...(I);
#if defined(__clang__)
  lo = __builtin_shufflevector(a, b, (I % 2 ? S + I / 2 : I / 2)...);
  hi = __builtin_shufflevector(a, b, (I % 2 ? S + S / 2 + I / 2 : S / 2 + I / 2)...);
#elif defined(__GNUC__)
  using Lane = decltype(a[0]);
  using Index = std::conditional_t<sizeof(Lane) == 1, int8_t, std::conditional_t<sizeof(Lane) == 2, int16_t,
                std::conditional_t<sizeof(Lane) == 4, int32_t, int64_t>>>;
  typedef Index Mask __attribute__((vector_size(sizeof(V))));
  lo = __builtin_shuffle(a, b, Mask{(I % 2 ? S + I / 2 : I / 2)...});
  hi = __builtin_shuffle(a, b, Mask{(I % 2 ? S + S / 2 + I / 2 : S / 2 + I / 2)...});
#else
  lo = a;  // one lane (Simd without vector extensions)
  hi = b;
#endif
}

// One output line of a box rank filter: rows[r] the split extended line of
// row r (see BoxBuffers::split), result in res[0..n). Every pointer is read
// into a local first: stores of uint8 may alias anything, and the compiler
// would read them again after each one.
template <class Plan, int Bytes, class E>
void box_rank_line(const E* const* rows, int64_t n, BoxBuffers<E>& b, E* res) {
  using V = typename Simd<E, Bytes>::V;
  constexpr int64_t step = sizeof(V) / sizeof(E);
  constexpr int R = Plan::kRows, runs = Plan::kRuns, kept = Plan::kKept;
  const int64_t pairs = (n + 1) / 2, len = b.chunk_len;
  const E* split[2][R];  // even and odd columns of each row
  E* sorted[2][R];       // the sorted columns of a chunk, even and odd
  unroll<R>([&](auto r) GF_INLINE_LAMBDA {
    split[0][r] = rows[r];
    split[1][r] = rows[r] + b.half;
    sorted[0][r] = b.columns.data() + r * len;
    sorted[1][r] = b.columns.data() + (R + r) * len;
  });
  E* merged[kept];
  unroll<kept>([&](auto q) GF_INLINE_LAMBDA { merged[q] = b.merged.data() + q * len; });
  E *even = b.even.data(), *odd = b.odd.data();
  // Column 2j (parity 0) or 2j+1 (1) sorted, its values ascending into
  // v[0..R), and stored.
  auto sort_column = [&](int parity, int64_t j, V* v) GF_INLINE_LAMBDA {
    V u[R];
    unroll<R>([&](auto r) GF_INLINE_LAMBDA { u[r] = load_as<V>(split[parity][r] + j); });
    Unrolled<Plan::column_net>::run(u);
    unroll<R>([&](auto r) GF_INLINE_LAMBDA { v[r] = u[Plan::column_out.at[r]]; });
  };
  auto store_column = [&](int parity, int64_t j, const V* v) GF_INLINE_LAMBDA {
    unroll<R>([&](auto r) GF_INLINE_LAMBDA { store_as(sorted[parity][r] + j, v[r]); });
  };

  for (int64_t c = 0; c < pairs; c += b.kChunk) {
    const int64_t count = std::min(b.kChunk, pairs - c);
    V v[2 * R];
    sort_column(0, c, v);
    store_column(0, 0, v);
    for (int64_t j = 0; j < count + runs; j += step) {  // columns 2j+1 and 2j+2 sorted, merged
      sort_column(1, c + j, v);
      sort_column(0, c + j + 1, v + R);
      store_column(1, j, v);
      store_column(0, j + 1, v + R);
      Unrolled<Plan::pair_net>::run(v);
      unroll<kept>([&](auto q) GF_INLINE_LAMBDA { store_as(merged[q] + j, v[Plan::pair_out.at[q]]); });
    }
    const int64_t whole = std::min(count, n / 2 - c);  // pairs with both outputs in the line
    for (int64_t p = 0; p < count; p += step) {  // outputs 2p and 2p+1
      V w[runs * kept + 2 * R];
      unroll<runs * kept>([&](auto i) GF_INLINE_LAMBDA { w[i] = load_as<V>(merged[i % kept] + p + i / kept); });
      unroll<R>([&](auto r) GF_INLINE_LAMBDA {
        w[runs * kept + r] = load_as<V>(sorted[0][r] + p);
        w[runs * kept + R + r] = load_as<V>(sorted[1][r] + p + runs);
      });
      Unrolled<Plan::output_net>::run(w);
      const V first = w[Plan::output_out.at[0]], second = w[Plan::output_out.at[1]];
      E* out = res + 2 * (c + p);
      if (p + step <= whole) {
        V lo, hi;
        zip(first, second, lo, hi, std::make_integer_sequence<int, step>{});
        store_as(out, lo);
        store_as(out + step, hi);
        continue;
      }
      store_as(even, first);  // the line's end
      store_as(odd, second);
      for (int64_t i = 0; i < std::min(step, count - p); ++i) {
        out[2 * i] = even[i];
        if (2 * (c + p + i) + 1 < n) out[2 * i + 1] = odd[i];
      }
    }
  }
}

template <class E>
using BoxRankLine = void (*)(const E* const* rows, int64_t n, BoxBuffers<E>& b, E* res);

// The AVX2 and AVX-512 copies (32 and 64 bytes per compare) where the CPU
// has them. Moves and comparisons only: the results are the same. `flatten`
// inlines the kernel into the copy.
#if defined(GPUFILT_ISA_COPIES)
template <class Plan, class E>
GF_AVX2 void box_rank_line_avx2(const E* const* rows, int64_t n, BoxBuffers<E>& b, E* res) {
  box_rank_line<Plan, 32>(rows, n, b, res);
}
template <class Plan, class E>
GF_AVX512 void box_rank_line_avx512(const E* const* rows, int64_t n, BoxBuffers<E>& b, E* res) {
  box_rank_line<Plan, 64>(rows, n, b, res);
}
#endif

template <class Plan, class E>
BoxRankLine<E> box_rank_line_for_cpu() {
#if defined(GPUFILT_ISA_COPIES)
  return for_cpu_isa<BoxRankLine<E>>(&box_rank_line<Plan, 16, E>, &box_rank_line_avx2<Plan, E>,
                                     &box_rank_line_avx512<Plan, E>);
#else
  return &box_rank_line<Plan, 16, E>;
#endif
}

// The box kernel for `rows` x `width` taps and `rank`, or null: the medians
// of 3x3, 5x5 and 3x3x3 boxes are compiled.
template <class E>
BoxRankLine<E> box_rank_kernel(int64_t rows, int64_t width, int64_t rank) {
  if (rows == 3 && width == 3 && rank == 4) return box_rank_line_for_cpu<BoxRankPlan<3, 3, 4>, E>();
  if (rows == 5 && width == 5 && rank == 12) return box_rank_line_for_cpu<BoxRankPlan<5, 5, 12>, E>();
  if (rows == 9 && width == 3 && rank == 13) return box_rank_line_for_cpu<BoxRankPlan<9, 3, 13>, E>();
  return nullptr;
}

// Output positions a selection network handles at once: 512 bytes of them,
// so that each exchange loops over several vectors.
template <class E>
constexpr int64_t kNetworkWidth = 512 / sizeof(E);

// Which input line a buffered row holds: its byte offset in the input, or
// kOutside (a row outside the array in constant mode: all cval).
using RowKey = int64_t;
constexpr RowKey kOutside = INT64_MIN, kNoRow = INT64_MAX;  // kNoRow: a buffer never filled

// The extended input lines of the current output line, one per plan row.
// A thread's output lines come in order, and the next one reads mostly the
// same input lines: those already buffered are kept, not read again.
template <class E>
struct RowCache {
  int64_t size;             // elements per buffered line
  std::vector<E> storage;   // one line per plan row
  std::vector<RowKey> held;  // per buffer
  std::vector<char> used;
  std::vector<size_t> found;  // per plan row: the buffer found holding its line
  std::vector<const E*> row;  // per plan row: the buffer holding its line

  RowCache(int64_t rows, int64_t size_)
      : size(size_), storage(rows * size_), held(rows, kNoRow), used(rows), found(rows), row(rows) {}

  // The buffer holding `key`, or held.size().
  size_t find(RowKey key) const { return std::find(held.begin(), held.end(), key) - held.begin(); }
  bool holds(RowKey key) const { return find(key) < held.size(); }
  // Points row[r] at a buffer holding line wanted[r], reading the missing
  // ones with fill(wanted[r], buffer) into buffers no wanted line is in.
  template <class Fill>
  void fetch(const RowKey* wanted, const Fill& fill) {
    const size_t count = row.size();
    std::fill(used.begin(), used.end(), 0);
    for (size_t r = 0; r < count; ++r) {
      found[r] = find(wanted[r]);
      if (found[r] < count) used[found[r]] = 1;
    }
    for (size_t r = 0; r < count; ++r) {
      size_t b = found[r] < count ? found[r] : find(wanted[r]);  // perhaps read for an earlier row
      if (b == count) {
        b = std::find(used.begin(), used.end(), 0) - used.begin();
        fill(wanted[r], storage.data() + b * size);
        held[b] = wanted[r];
        used[b] = 1;
      }
      row[r] = storage.data() + b * size;
    }
  }
};

// Per-thread buffers: the input lines (split in even and odd columns for a
// box kernel), the box kernel's buffers, the result, rank scratch, and the
// input lines one after another for the sliding histogram.
template <class E>
struct Scratch {
  BoxBuffers<E> box;
  RowCache<E> rows;
  std::vector<E> result, values, block;
  // rank_values: what a rank's selection sorts, or a Call's window (reduce_line): 0 for other reductions.
  Scratch(const LinePlan& plan, int64_t n, int64_t rank_values, bool box_kernel)
      : box(box_kernel ? BoxBuffers<E>(n, plan.rows.size(), plan.left + plan.right + 1) : BoxBuffers<E>()),
        rows(plan.rows.size(), box_kernel ? 2 * box.half : n + plan.left + plan.right),
        result(n),
        values(box_kernel ? 0 : rank_values) {}
};

// The value of rank `rank` in each window of a box footprint over uint8 data
// by a sliding histogram (Huang's algorithm, as OpenCV's medianBlur for large
// windows): moving one position removes a column of `rows` values and adds
// one, and the answer moves from the last one by a few bins; `below` counts
// the window's values under it. Exact. res[i]'s window: lines[r * stride +
// i .. i + width) for each row r: rows a fixed stride apart, so that their
// addresses are arithmetic, not loads (~12% faster than a pointer per row).
void box_rank_uint8(const uint8_t* lines, int64_t stride, int64_t rows, int64_t width, int64_t n,
                    int64_t rank, uint8_t* res) {
  int64_t hist[256] = {};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < width; ++k) ++hist[lines[r * stride + k]];
  int value = 0;
  int64_t below = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0)
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t gone = lines[r * stride + i - 1], added = lines[r * stride + i + width - 1];
        --hist[gone];
        below -= gone < value;
        ++hist[added];
        below += added < value;
      }
    while (below > rank) below -= hist[--value];
    while (below + hist[value] <= rank) below += hist[value++];
    res[i] = (uint8_t)value;
  }
}

// ---- Weighted sums (correlate, convolve) ------------------------------------
// res[i] = the sum over the taps t, in C order from 0, of weight[t] *
// src[t][i]. A block of outputs stays in registers through all the taps:
// one load a tap and vector, one store a block (a loop a tap streamed the
// line's sums through memory: two loads and a store a tap, and the baseline
// copy's 16-byte vectors). In double (E) products and sums round apart, as
// scipy's do: its results to the bit. In float (weighted_sums_in_float) the
// AVX2/AVX-512 copies fuse them, and runs of at most kFloatRunTaps taps of
// one footprint row (one input line) are summed on their own before the
// run sums are added: an error within (longest run + runs + 1) float units
// of the sum of |weight * value| (5 + 25 + 1 for 5x5x5, 16 + 63 + 1 for
// 1001 taps in a row), as the CUDA box sums (box_sum.cu). Footprints of
// more than kMaxFloatRuns runs sum in double: the bound stays within 167
// units, under 1e-5.
constexpr int64_t kFloatRunTaps = 16, kMaxFloatRuns = 150;

// One past each run's last tap (taps in C order: a row's are consecutive,
// with the same offsets across the outer axes).
std::vector<int64_t> float_run_ends(const Footprint& f) {
  std::vector<int64_t> ends;
  const int outer = f.ndim - 1;
  for (int64_t t = 1, start = 0; t <= f.taps(); ++t) {
    const int64_t* at = f.offsets.data() + t * f.ndim;
    if (t == f.taps() || t - start == kFloatRunTaps || !std::equal(at, at + outer, at - f.ndim)) {
      ends.push_back(t);
      start = t;
    }
  }
  return ends;
}

template <class E>
struct WeightedTaps {
  std::vector<E> weight;
  std::vector<int64_t> run_end;  // float sums: float_run_ends (double sums take no runs)

  explicit WeightedTaps(const Footprint& f) : weight(f.weights.begin(), f.weights.end()) {
    if constexpr (std::is_same_v<E, float>) run_end = float_run_ends(f);
  }
};

// Outputs i0 .. i0 + Vectors * lanes of weighted_sum_line, in vectors of
// `Bytes` (GCC vector extensions: left to itself, GCC vectorised across the
// taps, with gathers, instead of across the outputs).
template <class E, int Bytes, int Vectors>
GF_INLINE void weighted_sum_block(const WeightedTaps<E>& w, const E* const* src, int64_t i0, E* res) {
  using V = typename Simd<E, Bytes>::V;
  constexpr int kLanes = Bytes / (int)sizeof(E);
  constexpr bool kRunSums = std::is_same_v<E, float>;
  V acc[Vectors] = {};
  auto add_taps = [&](int64_t t, int64_t end, V(&sum)[Vectors]) GF_INLINE_LAMBDA {
    for (; t < end; ++t) {
      const E* x = src[t] + i0;
      const E weight = w.weight[t];
      for (int j = 0; j < Vectors; ++j) sum[j] += weight * load_as<V>(x + j * kLanes);
    }
  };
  if constexpr (kRunSums) {
    int64_t t = 0;
    for (const int64_t end : w.run_end) {
      V run_sum[Vectors] = {};
      add_taps(t, end, run_sum);
      for (int j = 0; j < Vectors; ++j) acc[j] += run_sum[j];
      t = end;
    }
  } else {
    add_taps(0, (int64_t)w.weight.size(), acc);
  }
  for (int j = 0; j < Vectors; ++j) store_as(res + i0 + j * kLanes, acc[j]);
}

// src[t]: tap t's input, the line buffer at its shift. Blocks of four
// vectors of `Bytes`, then of one, then one more ending at the line's end
// (it recomputes a few outputs, to the same bits: an output's operations do
// not depend on its block); lines shorter than a vector one output at a
// time (vectors of one lane).
template <class E, int Bytes>
void weighted_sum_line(const WeightedTaps<E>& w, const E* const* src, int64_t n, E* res) {
  constexpr int kLanes = Bytes / (int)sizeof(E), kBlock = 4 * kLanes;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) weighted_sum_block<E, Bytes, 4>(w, src, i, res);
  for (; i + kLanes <= n; i += kLanes) weighted_sum_block<E, Bytes, 1>(w, src, i, res);
  if (i < n && n >= kLanes) weighted_sum_block<E, Bytes, 1>(w, src, n - kLanes, res);
  else
    for (; i < n; ++i) weighted_sum_block<E, (int)sizeof(E), 1>(w, src, i, res);
}

template <class E>
using WeightedSumLine = void (*)(const WeightedTaps<E>&, const E* const*, int64_t, E*);

// The AVX2 and AVX-512 copies: sums in double never fused (GF_AVX2,
// GF_AVX512), sums in float fused (the _FMA attributes; cpu_isa.hpp).
#if defined(GPUFILT_ISA_COPIES)
GF_AVX2 void weighted_sum_line_avx2(const WeightedTaps<double>& w, const double* const* src, int64_t n,
                                    double* res) {
  weighted_sum_line<double, 32>(w, src, n, res);
}
GF_AVX512 void weighted_sum_line_avx512(const WeightedTaps<double>& w, const double* const* src, int64_t n,
                                        double* res) {
  weighted_sum_line<double, 64>(w, src, n, res);
}
GF_AVX2_FMA void weighted_sum_line_avx2(const WeightedTaps<float>& w, const float* const* src, int64_t n,
                                        float* res) {
  weighted_sum_line<float, 32>(w, src, n, res);
}
GF_AVX512_FMA void weighted_sum_line_avx512(const WeightedTaps<float>& w, const float* const* src, int64_t n,
                                            float* res) {
  weighted_sum_line<float, 64>(w, src, n, res);
}
#endif

template <class E>
WeightedSumLine<E> weighted_sum_kernel() {
#if defined(GPUFILT_ISA_COPIES)
  return for_cpu_isa<WeightedSumLine<E>>(&weighted_sum_line<E, 16>, &weighted_sum_line_avx2,
                                         &weighted_sum_line_avx512);
#else
  return &weighted_sum_line<E, 16>;
#endif
}

// Outputs whose windows a Call gathers at once: 64, fewer for windows so
// large that 64 of them would leave the L2 cache (256 KiB at most).
inline int64_t call_block(int64_t taps) {
  return std::max<int64_t>(1, std::min<int64_t>(64, 32768 / std::max<int64_t>(taps, 1)));
}

template <class E, int Bytes>
void reduce_line(const Footprint& f, const LinePlan& plan, const SelectionNetwork& network, int64_t n,
                 Scratch<E>& s, E* res) {
  const int64_t taps = f.taps();
  const E* const* lines = s.rows.row.data();
  auto tap = [&](int64_t t) { return lines[plan.tap_row[t]] + plan.tap_shift[t]; };
  switch (f.reduce) {
    case Reduce::Sum:  // weighted_sum_line
      break;
    case Reduce::Minimum:
    case Reduce::Maximum: {
      // A select stored unconditionally (vectorises), keeping res unless
      // src is smaller (larger): where NaN is, the first tap's value stays.
      E* __restrict out = res;
      std::copy(tap(0), tap(0) + n, out);
      for (int64_t t = 1; t < taps; ++t) {
        const E* __restrict src = tap(t);
        if (f.reduce == Reduce::Minimum)
          for (int64_t i = 0; i < n; ++i) out[i] = src[i] < out[i] ? src[i] : out[i];
        else
          for (int64_t i = 0; i < n; ++i) out[i] = src[i] > out[i] ? src[i] : out[i];
      }
      break;
    }
    case Reduce::Rank: {
      E* v = s.values.data();
      if (network.usable()) {
        const E* tap_lines[kMaxNetworkTaps];
        for (int64_t t = 0; t < taps; ++t) tap_lines[t] = tap(t);
        if (fixed_selection<Bytes>(taps, f.rank, tap_lines, n, res)) break;
        for (int64_t i0 = 0; i0 < n; i0 += kNetworkWidth<E>) {
          const int64_t width = std::min(kNetworkWidth<E>, n - i0);
          for (int64_t t = 0; t < taps; ++t) std::copy(tap(t) + i0, tap(t) + i0 + width, v + t * width);
          network.run<Bytes>(v, width);
          std::copy(v + f.rank * width, v + (f.rank + 1) * width, res + i0);
        }
        break;
      }
      const int64_t width = plan.left + plan.right + 1, rows = (int64_t)plan.rows.size();
      if constexpr (std::is_same_v<E, uint8_t>) {
        if (taps == rows * width) {  // a full box: every row holds every shift
          const int64_t stride = n + width - 1;
          s.block.resize(rows * stride);
          for (int64_t r = 0; r < rows; ++r) std::copy(lines[r], lines[r] + stride, s.block.data() + r * stride);
          box_rank_uint8(s.block.data(), stride, rows, width, n, f.rank, res);
          break;
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t t = 0; t < taps; ++t) v[t] = tap(t)[i];
        std::nth_element(v, v + f.rank, v + taps);
        res[i] = v[f.rank];
      }
      break;
    }
    case Reduce::Call: {  // generic_filter: lines of double only (CpuBackend::footprint_pass)
      if constexpr (std::is_same_v<E, double>) {
        // The windows of a block of outputs gathered tap by tap (unit-stride
        // reads of each tap's line), then passed to the function one by one.
        const int64_t block = call_block(taps);
        double* v = s.values.data();
        for (int64_t i0 = 0; i0 < n; i0 += block) {
          const int64_t width = std::min(block, n - i0);
          for (int64_t t = 0; t < taps; ++t) {
            const double* src = tap(t) + i0;
            for (int64_t j = 0; j < width; ++j) v[j * taps + t] = src[j];
          }
          for (int64_t j = 0; j < width; ++j) {
            res[i0 + j] = 0.0;  // scipy's value where the function sets none
            if (!f.function(v + j * taps, (intptr_t)taps, res + i0 + j, f.user_data))
              throw CallbackFailed("unknown error in filter function");
          }
        }
      }
      break;
    }
  }
}

template <class E>
using ReduceLine = void (*)(const Footprint&, const LinePlan&, const SelectionNetwork&, int64_t, Scratch<E>&, E*);

// For the narrow types the kernels are also compiled for AVX2 (32 bytes per
// compare) and chosen at run time. Moves and comparisons only: the results
// are the same. `flatten` inlines the kernels into the AVX2 copy.
#if defined(GPUFILT_ISA_COPIES)
template <class E>
GF_AVX2 void reduce_line_avx2(const Footprint& f, const LinePlan& plan, const SelectionNetwork& network,
                              int64_t n, Scratch<E>& s, E* res) {
  reduce_line<E, 32>(f, plan, network, n, s, res);
}
#endif

template <class E>
ReduceLine<E> line_reducer() {
#if defined(GPUFILT_ISA_COPIES)
  if constexpr (!std::is_same_v<E, double>) {
    if (cpu_isa() >= CpuIsa::Avx2) return &reduce_line_avx2<E>;
  }
#endif
  return &reduce_line<E, 16>;
}

// A 0-d array as a 1-d array of one element, so that one code path serves all.
ArrayDesc at_least_1d(ArrayDesc a) {
  if (a.ndim == 0) {
    a.ndim = 1;
    a.shape[0] = 1;
    a.strides[0] = itemsize(a.dtype);
  }
  return a;
}

}  // namespace

namespace {
// The input lines that output line l reads, one per plan row.
void row_keys(const Lines& lines, const LinePlan& plan, Mode mode, int64_t l, RowKey* keys) {
  int64_t outer_index[kMaxDims];
  for (int64_t rem = l, d = lines.outer_ndim - 1; d >= 0; --d) {
    outer_index[d] = rem % lines.outer_shape[d];
    rem /= lines.outer_shape[d];
  }
  for (size_t r = 0; r < plan.rows.size(); ++r) {
    RowKey key = 0;
    for (int d = 0; d < lines.outer_ndim && key != kOutside; ++d) {
      const int64_t k = border_index(outer_index[d] + plan.rows[r][d], lines.outer_shape[d], mode);
      key = k < 0 ? kOutside : key + k * lines.outer_strides[0][d];
    }
    keys[r] = key;
  }
}

// Asks for bytes [p, p + bytes) to be brought into the cache.
inline void prefetch(const char* p, int64_t bytes) {
#if defined(__GNUC__)
  for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(p + i);
#else
  (void)p;
  (void)bytes;
#endif
}

// The weighted-sum kernel for this CPU, for sums in E; null for other E.
template <class E>
WeightedSumLine<E> weighted_sum_kernel_of(const Footprint& f) {
  if constexpr (std::is_floating_point_v<E>) {
    if (f.reduce == Reduce::Sum) return weighted_sum_kernel<E>();
  }
  return nullptr;
}

// The footprint pass with line buffers of E (CpuBackend::footprint_pass
// chooses it).
template <class E>
void run_footprint_pass(const ArrayDesc& in, const ArrayDesc& out, const Footprint& f, double cval) {
  auto [load, _unused] = dispatch_real_dtype<LineIOAs<E>::template IO>(in.dtype);
  auto [_unused2, store] = dispatch_real_dtype<LineIOAs<E>::template IO>(out.dtype);
  const int last = in.ndim - 1;
  const LinePlan plan(f);
  const SelectionNetwork network(f.reduce == Reduce::Rank ? f.taps() : 0, f.rank);
  const Lines lines(in, out, last);
  const ReduceLine<E> reduce_line = line_reducer<E>();
  const int64_t n = lines.length, rows = (int64_t)plan.rows.size(), width = plan.left + plan.right + 1;
  const bool full_box = f.taps() == rows * width;  // every row holds every shift
  const BoxRankLine<E> box = f.reduce == Reduce::Rank && full_box ? box_rank_kernel<E>(rows, width, f.rank) : nullptr;
  const WeightedSumLine<E> weighted_sum = weighted_sum_kernel_of<E>(f);
  const std::optional<WeightedTaps<E>> weighted =
      weighted_sum ? std::optional<WeightedTaps<E>>(std::in_place, f) : std::nullopt;
  // The box kernel reads one column past an odd line's extension.
  const int64_t right = plan.right + (box ? n % 2 : 0), extended = n + plan.left + right;
  // Results go straight to an output of E's own dtype along unit strides.
  const bool direct = dispatch_real_dtype<LineIOAs<E>::template Verbatim>(out.dtype) &&
                      out.strides[last] == (int64_t)sizeof(E);

  // Dynamic chunks of consecutive lines (~16 per thread): a thread that the
  // OS preempts does not hold up the others, and within a chunk each input
  // line is read once.
  // A rank sorts the taps of kNetworkWidth outputs at once through a
  // selection network, else of one output at a time (a 3000 x 3000 median
  // had taken 512 bytes a tap a thread: 10.4 GB on a 4 x 5 array).
  const int64_t rank_values = f.reduce == Reduce::Call   ? f.taps() * call_block(f.taps())
                              : f.reduce != Reduce::Rank ? 0
                              : network.usable()         ? f.taps() * kNetworkWidth<E>
                                                         : f.taps();
  const int threads = cpu_max_threads();
  const int64_t grain = std::max<int64_t>(1, lines.count / (16 * threads));
  parallel_region(lines.count * n * f.taps() > 32768, threads, [&, load = load, store = store] {
    Scratch<E> s(plan, n, rank_values, box != nullptr);
    std::vector<RowKey> wanted(rows), next(rows);
    std::vector<const E*> tap_src(weighted_sum ? f.taps() : 0);  // weighted_sum_line's inputs
    auto read_row = [&](RowKey key, E* buffer) {
      E* ext = box ? s.box.extended.data() : buffer;
      if (key == kOutside) {
        std::fill(ext, ext + extended, (E)cval);
      } else {
        load(in.data + key, in.strides[last], n, ext + plan.left);
        extend_line(ext, n, plan.left, right, f.mode, cval);
      }
      if (box) s.box.split(ext, buffer);
    };
    // (lines that stay in the L2 cache the while)
    const bool prefetched = in.strides[last] == itemsize(in.dtype) && n * itemsize(in.dtype) <= 65536;
    int64_t next_line = -1;  // the line whose keys `next` holds
    dynamic_loop(lines.count, grain, [&](int64_t l) {
      int64_t in_off, out_off;
      lines.offsets(l, in_off, out_off);
      if (next_line == l) std::swap(wanted, next);
      else row_keys(lines, plan, f.mode, l, wanted.data());
      s.rows.fetch(wanted.data(), read_row);
      if (l + 1 < lines.count) {
        row_keys(lines, plan, f.mode, l + 1, next.data());
        next_line = l + 1;
        // The next line's new input lines, read while this one is filtered:
        // the hardware prefetcher does not cross into their 4 KiB pages.
        for (RowKey key : next)
          if (prefetched && key != kOutside && !s.rows.holds(key)) prefetch(in.data + key, n * itemsize(in.dtype));
      }
      char* dst = out.data + out_off;
      E* res = direct && (uintptr_t)dst % alignof(E) == 0 ? reinterpret_cast<E*>(dst) : s.result.data();
      if (box) {
        box(s.rows.row.data(), n, s.box, res);
      } else if (weighted_sum) {
        for (size_t t = 0; t < tap_src.size(); ++t) tap_src[t] = s.rows.row[plan.tap_row[t]] + plan.tap_shift[t];
        weighted_sum(*weighted, tap_src.data(), n, res);
      } else {
        reduce_line(f, plan, network, n, s, res);
      }
      if (res == s.result.data()) store(res, dst, out.strides[last], n);
    });
  });
}


// Minima, maxima and ranks only move values: they are exact in the input's
// own type, where a vector holds 4 to 16 times more of them than of doubles.
// The type must hold cval exactly in constant mode, and for float16/float32
// data, whose results are rounded to the output, the output must be
// float16/float32 too (rounding commutes with the order, so a rounded cval
// takes the same place). Weighted sums run in double, or in float where
// weighted_sums_in_float (CpuBackend::footprint_pass).
template <class E>
bool holds(const ArrayDesc& out, const Footprint& f, double cval) {
  if constexpr (std::is_floating_point_v<E>) {
    if (out.dtype != DType::Float32 && out.dtype != DType::Float16) return false;
    return true;
  } else {
    return f.mode != Mode::Constant ||
           (cval >= (double)std::numeric_limits<E>::min() && cval <= (double)std::numeric_limits<E>::max() &&
            (double)(E)cval == cval);
  }
}

template <class E>
bool run_in(const ArrayDesc& in, const ArrayDesc& out, const Footprint& f, double cval) {
  if (!holds<E>(out, f, cval)) return false;
  run_footprint_pass<E>(in, out, f, cval);
  return true;
}

}  // namespace

void CpuBackend::footprint_pass(const ArrayDesc& in0, const ArrayDesc& out0, const Footprint& f0,
                                double cval) {
  const ArrayDesc in = at_least_1d(in0), out = at_least_1d(out0);
  Footprint f = f0;
  if (f.ndim == 0) {
    f.ndim = 1;
    f.offsets.assign(f.ntaps, 0);
  }
  if (f.reduce == Reduce::Call) {  // the function takes doubles
    run_footprint_pass<double>(in, out, f, cval);
    return;
  }
  if (f.reduce == Reduce::Sum) {
    if (weighted_sums_in_float(in.dtype, out.dtype, f.weights, cval) &&
        (int64_t)float_run_ends(f).size() <= kMaxFloatRuns)
      run_footprint_pass<float>(in, out, f, cval);
    else
      run_footprint_pass<double>(in, out, f, cval);
    return;
  }
  switch (in.dtype) {
    case DType::UInt8: if (run_in<uint8_t>(in, out, f, cval)) return; break;
    case DType::Int8: if (run_in<int8_t>(in, out, f, cval)) return; break;
    case DType::UInt16: if (run_in<uint16_t>(in, out, f, cval)) return; break;
    case DType::Int16: if (run_in<int16_t>(in, out, f, cval)) return; break;
    case DType::Float16:
    case DType::Float32: if (run_in<float>(in, out, f, cval)) return; break;
    default: break;
  }
  run_footprint_pass<double>(in, out, f, cval);
}

}  // namespace gpufilt
