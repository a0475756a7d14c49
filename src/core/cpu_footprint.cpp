// CPU footprint filters. Each output line (along the last axis) reads one
// extended input line per distinct offset of the footprint across the other
// axes; the taps then read those buffers at their last-axis shift, so every
// input value is converted once per line and the inner loops are unit-stride.
#include <algorithm>
#include <limits>
#include <map>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cpu_backend.hpp"
#include "core/cpu_lines.hpp"
#include "core/parallel.hpp"

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

// A selection network: compare-exchanges that leave the value of rank
// `rank` among `taps` values at position `rank`. It is Batcher's odd-even
// merge sort of the next power of two (padding taps that hold +infinity
// never move, so exchanges touching them are dropped), keeping only the
// exchanges the output depends on, and of those only the half (minimum or
// maximum) that is read later. Exact: it moves values, never computes any.
// Run over many output positions at once, its loops vectorise, unlike a
// selection per position.
struct Exchange {
  int32_t lo, hi;  // lo < hi: lo gets the minimum, hi the maximum
  bool keep_min, keep_max;
};

// The network's exchanges in order, computed at compile time for the fixed
// networks below and at run time for the others.
struct ExchangeList {
  static constexpr int64_t kMaxTaps = 64;      // beyond, other algorithms
  static constexpr int kCapacity = 1024;       // Batcher's 64-input sort has 543
  Exchange items[kCapacity] = {};
  int count = 0;
};

constexpr ExchangeList selection_exchanges(int64_t taps, int64_t rank) {
  ExchangeList all, kept;
  if (taps < 1 || taps > ExchangeList::kMaxTaps || rank < 0 || rank >= taps) return kept;
  int64_t n = 1;
  while (n < taps) n *= 2;
  for (int64_t p = 1; p < n; p *= 2)
    for (int64_t k = p; k >= 1; k /= 2)
      for (int64_t j = k % p; j + k < n; j += 2 * k)
        for (int64_t i = 0; i < std::min(k, n - j - k); ++i)
          if ((i + j) / (2 * p) == (i + j + k) / (2 * p) && i + j + k < taps)
            all.items[all.count++] = {(int32_t)(i + j), (int32_t)(i + j + k), false, false};
  bool needed[ExchangeList::kMaxTaps] = {};
  needed[rank] = true;
  for (int x = all.count - 1; x >= 0; --x) {  // backwards: what the result depends on
    Exchange e = all.items[x];
    e.keep_min = needed[e.lo];
    e.keep_max = needed[e.hi];
    if (e.keep_min || e.keep_max) {
      needed[e.lo] = needed[e.hi] = true;
      kept.items[kept.count++] = e;
    }
  }
  for (int x = 0; x < kept.count / 2; ++x) {  // back in the order they run
    const Exchange e = kept.items[x];
    kept.items[x] = kept.items[kept.count - 1 - x];
    kept.items[kept.count - 1 - x] = e;
  }
  return kept;
}

struct SelectionNetwork {
  std::vector<Exchange> exchanges;
  int64_t rank = 0;
  bool valid = false;

  SelectionNetwork(int64_t taps, int64_t rank_) : rank(rank_) {
    const ExchangeList list = selection_exchanges(taps, rank);
    valid = taps >= 1 && taps <= ExchangeList::kMaxTaps && rank >= 0 && rank < taps;
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

// The medians of 3x3, 5x5 and 3x3x3 boxes by networks unrolled at compile
// time: the values stay in registers (or the compiler's spills) instead of
// going through memory at every exchange, about twice as fast.
template <class V, int Lo, int Hi, bool KeepMin, bool KeepMax>
inline void exchange(V* v) {
  const V x = v[Lo], y = v[Hi];
  if (KeepMin) v[Lo] = V(y < x ? y : x);
  if (KeepMax) v[Hi] = V(y < x ? x : y);
}

template <int Taps, int Rank>
struct FixedSelection {
  static constexpr ExchangeList list = selection_exchanges(Taps, Rank);
  template <class V, size_t... I>
  static void apply(V* v, std::index_sequence<I...>) {
    (exchange<V, list.items[I].lo, list.items[I].hi, list.items[I].keep_min, list.items[I].keep_max>(v), ...);
  }
  // res[i] for i < n; tap t of position i at taps[t][i].
  template <int Bytes, class E>
  static void run(const E* const* taps, int64_t n, E* res) {
    using V = typename Simd<E, Bytes>::V;
    constexpr int64_t step = sizeof(V) / sizeof(E);
    auto at = [&](int64_t i, auto v) {
      using W = decltype(v);
      W values[Taps];
      for (int t = 0; t < Taps; ++t) values[t] = load_as<W>(taps[t] + i);
      apply(values, std::make_index_sequence<list.count>{});
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

// Output positions a selection network handles at once: 512 bytes of them,
// so that each exchange loops over several vectors.
template <class E>
constexpr int64_t kNetworkWidth = 512 / sizeof(E);

// Per-thread buffers: one extended line per row, the result, rank scratch.
template <class E>
struct Scratch {
  std::vector<E> lines, result, values;
  Scratch(const LinePlan& plan, int64_t n, int64_t taps)
      : lines(plan.rows.size() * (n + plan.left + plan.right)), result(n), values(taps * kNetworkWidth<E>) {}
};

// The value of rank `rank` in each window of a box footprint over uint8 data
// by a sliding histogram (Huang's algorithm, as OpenCV's medianBlur for large
// windows): moving one position removes a column of `rows` values and adds
// one, and the answer moves from the last one by a few bins; `below` counts
// the window's values under it. Exact. res[i]'s window: lines[r * stride +
// i .. i + width) for each row r.
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

template <class E, int Bytes>
void reduce_line(const Footprint& f, const LinePlan& plan, const SelectionNetwork& network, int64_t n,
                 Scratch<E>& s) {
  const int64_t stride = n + plan.left + plan.right, taps = f.taps();
  const E* lines = s.lines.data();
  E* res = s.result.data();
  auto tap = [&](int64_t t) { return lines + plan.tap_row[t] * stride + plan.tap_shift[t]; };
  switch (f.reduce) {
    case Reduce::Sum:
      if constexpr (std::is_same_v<E, double>) {  // sums are always run in double (element_type)
        std::fill(res, res + n, 0.0);
        for (int64_t t = 0; t < taps; ++t) {
          const double w = f.weights[t], *src = tap(t);
          for (int64_t i = 0; i < n; ++i) res[i] += w * src[i];
        }
      }
      break;
    case Reduce::Minimum:
    case Reduce::Maximum: {
      const bool minimum = f.reduce == Reduce::Minimum;
      std::copy(tap(0), tap(0) + n, res);
      for (int64_t t = 1; t < taps; ++t) {
        const E* src = tap(t);
        for (int64_t i = 0; i < n; ++i)
          if (minimum ? src[i] < res[i] : src[i] > res[i]) res[i] = src[i];
      }
      break;
    }
    case Reduce::Rank: {
      E* v = s.values.data();
      if (network.usable()) {
        const E* tap_lines[ExchangeList::kMaxTaps];
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
          box_rank_uint8(lines, stride, rows, width, n, f.rank, res);
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
  }
}

template <class E>
using ReduceLine = void (*)(const Footprint&, const LinePlan&, const SelectionNetwork&, int64_t, Scratch<E>&);

// For the narrow types the kernels are also compiled for AVX2 (32 bytes per
// compare) and chosen at run time. Moves and comparisons only: the results
// are the same. `flatten` inlines the kernels into the AVX2 copy.
#if defined(__GNUC__) && defined(__x86_64__)
template <class E>
__attribute__((target("avx2"), flatten)) void reduce_line_avx2(const Footprint& f, const LinePlan& plan,
                                                              const SelectionNetwork& network, int64_t n,
                                                              Scratch<E>& s) {
  reduce_line<E, 32>(f, plan, network, n, s);
}
#endif

template <class E>
ReduceLine<E> line_reducer() {
#if defined(__GNUC__) && defined(__x86_64__)
  if constexpr (!std::is_same_v<E, double>) {
    static const bool avx2 = [] {
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2");
    }();
    if (avx2) return &reduce_line_avx2<E>;
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
// The footprint pass with line buffers of E (see element_type).
template <class E>
void run_footprint_pass(const ArrayDesc& in, const ArrayDesc& out, const Footprint& f, double cval) {
  auto [load, _unused] = dispatch_real_dtype<LineIOAs<E>::template IO>(in.dtype);
  auto [_unused2, store] = dispatch_real_dtype<LineIOAs<E>::template IO>(out.dtype);
  const int last = in.ndim - 1;
  const LinePlan plan(f);
  const SelectionNetwork network(f.reduce == Reduce::Rank ? f.taps() : 0, f.rank);
  const Lines lines(in, out, last);
  const ReduceLine<E> reduce_line = line_reducer<E>();
  const int64_t n = lines.length, row_len = n + plan.left + plan.right;

  parallel_region(lines.count * n * f.taps() > 32768, cpu_max_threads(), [&, load = load, store = store] {
    Scratch<E> s(plan, n, f.taps());
    int64_t outer_index[kMaxDims];
#pragma omp for schedule(static)
    for (int64_t l = 0; l < lines.count; ++l) {
      int64_t in_off, out_off;
      lines.offsets(l, in_off, out_off);
      for (int64_t rem = l, d = lines.outer_ndim - 1; d >= 0; --d) {
        outer_index[d] = rem % lines.outer_shape[d];
        rem /= lines.outer_shape[d];
      }
      for (size_t r = 0; r < plan.rows.size(); ++r) {
        E* ext = s.lines.data() + r * row_len;
        int64_t src = 0;
        bool outside = false;
        for (int d = 0; d < lines.outer_ndim && !outside; ++d) {
          int64_t k = border_index(outer_index[d] + plan.rows[r][d], lines.outer_shape[d], f.mode);
          outside = k < 0;
          src += k * lines.outer_strides[0][d];
        }
        if (outside) {
          std::fill(ext, ext + row_len, (E)cval);
          continue;
        }
        load(in.data + src, in.strides[last], n, ext + plan.left);
        extend_line(ext, n, plan.left, plan.right, f.mode, cval);
      }
      reduce_line(f, plan, network, n, s);
      store(s.result.data(), out.data + out_off, out.strides[last], n);
    }
  });
}


// Minima, maxima and ranks only move values: they are exact in the input's
// own type, where a vector holds 4 to 16 times more of them than of doubles.
// The type must hold cval exactly in constant mode, and for float16/float32
// data, whose results are rounded to the output, the output must be
// float16/float32 too (rounding commutes with the order, so a rounded cval
// takes the same place). Weighted sums stay in double.
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
  if (f.reduce != Reduce::Sum) {
    switch (in.dtype) {
      case DType::UInt8: if (run_in<uint8_t>(in, out, f, cval)) return; break;
      case DType::Int8: if (run_in<int8_t>(in, out, f, cval)) return; break;
      case DType::UInt16: if (run_in<uint16_t>(in, out, f, cval)) return; break;
      case DType::Int16: if (run_in<int16_t>(in, out, f, cval)) return; break;
      case DType::Float16:
      case DType::Float32: if (run_in<float>(in, out, f, cval)) return; break;
      default: break;
    }
  }
  run_footprint_pass<double>(in, out, f, cval);
}

}  // namespace gpufilt
