#include "core/cpu_backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/cpu_lines.hpp"
#include "core/parallel.hpp"
#if defined(GPUFILT_OPENMP)
#include <omp.h>
#endif

namespace gpufilt {
namespace {
using namespace cpu;

// Lines are filtered in blocks of up to kLanes neighbours along the most
// contiguous other axis (the lanes), held side by side in one buffer: cell i
// of lane b at ext[i * lanes + b]. Loading cell i of a block then reads one
// contiguous run, and the loops below, written over j = i * lanes + b, are
// unit-stride across the lanes, so they vectorise; each element still sees
// the same operations in the same order as when filtered alone. A pass
// along the most contiguous axis takes its lines one at a time (lanes = 1).
// kLanes doubles (512 bytes a row); blocks of floats take as many bytes.
constexpr int64_t kLanes = 64;
// Results buffered between stores (doubles), small enough to stay in L1.
constexpr int64_t kChunk = 1024;

// Rows of a block are far apart in memory, too far for the hardware
// prefetchers: the row kAhead rows on is requested while one is loaded.
constexpr int64_t kAhead = 8;
// Output rows likewise, for writing, while their results are computed.
template <bool ForWrite = false>
inline void prefetch_row(const char* p, int64_t bytes) {
#if defined(__GNUC__)
  if (bytes < 0) {
    p += bytes;
    bytes = -bytes;
  }
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b, ForWrite ? 1 : 0);
#else
  (void)p, (void)bytes;
#endif
}

// The axis whose lines go side by side with those of `axis`, or -1 when
// `axis` is itself the most contiguous one.
int lane_axis(const ArrayDesc& a, int axis) {
  int best = -1;
  for (int d = 0; d < a.ndim; ++d)
    if (d != axis && a.shape[d] > 1 && (best < 0 || std::llabs(a.strides[d]) < std::llabs(a.strides[best])))
      best = d;
  return best >= 0 && std::llabs(a.strides[best]) < std::llabs(a.strides[axis]) ? best : -1;
}

// A tile of results kept in registers while a kernel loops over taps, so
// that a tap costs the loads of its inputs only: kTile vectors (Simd<E>::V,
// cpu_lines.hpp).
#if defined(__GNUC__)
constexpr int kTile = 4;  // vectors per tile
#else
constexpr int kTile = 8;
#endif

// Calls body(j, tiles, v) for tiles [j, j + width) covering [0, count), where
// v is a value-initialised vector type: kTile vectors, then single elements.
template <class E, int Bytes, class Body>
inline void for_tiles(int64_t count, Body&& body) {
  using V = typename Simd<E, Bytes>::V;
  constexpr int64_t width = kTile * (int64_t)(sizeof(V) / sizeof(E));
  int64_t j = 0;
  for (; j + width <= count; j += width) body(j, std::integral_constant<int, kTile>{}, V{});
  for (; j < count; ++j) body(j, std::integral_constant<int, 1>{}, E{});
}

// One pass as the row kernels take it, its weights in the buffer's type E.
template <class E>
struct RowPass {
  LineKind kind;
  const E* weights;
  int64_t taps, size;
  int symmetry;
};

// res[j] for j < count, in scipy's summation order (see LinePass::symmetry).
template <int Bytes, class E>
void correlate_rows(const E* ext, int64_t count, int64_t lanes, const RowPass<E>& p, E* res) {
  const E* w = p.weights;
  const int64_t taps = p.taps, c = taps / 2;
  auto symmetric = [&](auto sign) {  // sign: +1 symmetric, -1 antisymmetric, fixed at compile time
    const E wc = w[c], *mid = ext + c * lanes;
    for_tiles<E, Bytes>(count, [&](int64_t j, auto tiles, auto v) {
      using V = decltype(v);
      constexpr int N = decltype(tiles)::value, step = sizeof(V) / sizeof(E);
      V acc[N];
      for (int t = 0; t < N; ++t) acc[t] = load_as<V>(mid + j + t * step) * wc;
      for (int64_t k = 0; k < c; ++k) {
        const E wk = w[k], *lo = ext + k * lanes + j, *hi = ext + (2 * c - k) * lanes + j;
        for (int t = 0; t < N; ++t) {
          const V a = load_as<V>(lo + t * step), b = load_as<V>(hi + t * step);
          acc[t] += (decltype(sign)::value > 0 ? a + b : a - b) * wk;
        }
      }
      std::memcpy(res + j, acc, sizeof acc);
    });
  };
  if (p.symmetry > 0) return symmetric(std::integral_constant<int, 1>{});
  if (p.symmetry < 0) return symmetric(std::integral_constant<int, -1>{});
  const E wl = w[taps - 1], *last = ext + (taps - 1) * lanes;
  for_tiles<E, Bytes>(count, [&](int64_t j, auto tiles, auto v) {
    using V = decltype(v);
    constexpr int N = decltype(tiles)::value, step = sizeof(V) / sizeof(E);
    V acc[N];
    for (int t = 0; t < N; ++t) acc[t] = load_as<V>(last + j + t * step) * wl;
    for (int64_t k = 0; k + 1 < taps; ++k) {
      const E wk = w[k], *src = ext + k * lanes + j;
      for (int t = 0; t < N; ++t) acc[t] += load_as<V>(src + t * step) * wk;
    }
    std::memcpy(res + j, acc, sizeof acc);
  });
}

// Rows [i0, i1) of a running sum per lane, as scipy's NI_UniformFilter1D
// computes it; `sums` carries each lane's sum from one chunk to the next.
void uniform_rows(const double* ext, int64_t i0, int64_t i1, int64_t lanes, int64_t size, double* sums,
                  double* res) {
  if (lanes == 1) {  // the scalar loop, without a loop over one lane inside
    double sum = sums[0];
    for (int64_t i = i0; i < i1; ++i) {
      if (i == 0) {
        sum = 0.0;
        for (int64_t k = 0; k < size; ++k) sum += ext[k];
      } else {
        sum += ext[i + size - 1] - ext[i - 1];
      }
      res[i - i0] = sum / size;
    }
    sums[0] = sum;
    return;
  }
  for (int64_t i = i0; i < i1; ++i) {
    if (i == 0) {
      std::fill(sums, sums + lanes, 0.0);
      for (int64_t k = 0; k < size; ++k)
        for (int64_t b = 0; b < lanes; ++b) sums[b] += ext[k * lanes + b];
    } else {
      const double *add = ext + (i + size - 1) * lanes, *sub = ext + (i - 1) * lanes;
      for (int64_t b = 0; b < lanes; ++b) sums[b] += add[b] - sub[b];
    }
    double* r = res + (i - i0) * lanes;
    for (int64_t b = 0; b < lanes; ++b) r[b] = sums[b] / size;
  }
}

// Windows of at most this many taps are summed whole in float (a running
// sum in float would drift along a long line); longer ones run in double.
constexpr int64_t kFloatWindow = 32;

// The mean of each window of `size`, summed whole at every output.
template <int Bytes>
void window_mean_rows(const float* ext, int64_t count, int64_t lanes, int64_t size, float* res) {
  const float divisor = (float)size;
  for_tiles<float, Bytes>(count, [&](int64_t j, auto tiles, auto v) {
    using V = decltype(v);
    constexpr int N = decltype(tiles)::value, step = sizeof(V) / sizeof(float);
    V acc[N];
    for (int t = 0; t < N; ++t) acc[t] = load_as<V>(ext + j + t * step);
    for (int64_t k = 1; k < size; ++k)
      for (int t = 0; t < N; ++t) acc[t] += load_as<V>(ext + k * lanes + j + t * step);
    for (int t = 0; t < N; ++t) acc[t] = acc[t] / divisor;
    std::memcpy(res + j, acc, sizeof acc);
  });
}

// Minimum or maximum over each window of `size`, with scipy's comparison
// (a later value replaces the running one only if strictly smaller/larger).
template <bool Minimum, int Bytes, class E>
void min_max_rows(const E* ext, int64_t count, int64_t lanes, int64_t size, E* res) {
  for_tiles<E, Bytes>(count, [&](int64_t j, auto tiles, auto v) {
    using V = decltype(v);
    constexpr int N = decltype(tiles)::value, step = sizeof(V) / sizeof(E);
    V acc[N];
    for (int t = 0; t < N; ++t) acc[t] = load_as<V>(ext + j + t * step);
    for (int64_t k = 1; k < size; ++k)
      for (int t = 0; t < N; ++t) {
        const V x = load_as<V>(ext + k * lanes + j + t * step);
        acc[t] = (Minimum ? x < acc[t] : x > acc[t]) ? x : acc[t];
      }
    std::memcpy(res + j, acc, sizeof acc);
  });
}

// Results of rows [i0, i1) of a block into res.
template <class E, int Bytes>
void filter_rows(const E* ext, int64_t i0, int64_t i1, int64_t lanes, const RowPass<E>& pass, E* sums,
                 E* res) {
  const E* rows = ext + i0 * lanes;
  const int64_t count = (i1 - i0) * lanes;
  switch (pass.kind) {
    case LineKind::Correlate: return correlate_rows<Bytes>(rows, count, lanes, pass, res);
    case LineKind::Uniform:
      if constexpr (std::is_same_v<E, float>) return window_mean_rows<Bytes>(rows, count, lanes, pass.size, res);
      else return uniform_rows(ext, i0, i1, lanes, pass.size, sums, res);
    case LineKind::Minimum: return min_max_rows<true, Bytes>(rows, count, lanes, pass.size, res);
    case LineKind::Maximum: return min_max_rows<false, Bytes>(rows, count, lanes, pass.size, res);
  }
}

template <class E>
using FilterRows = void (*)(const E*, int64_t, int64_t, int64_t, const RowPass<E>&, E*, E*);

// The kernels are also compiled for AVX2 (four doubles or eight floats per
// instruction) and chosen at run time. The float ones fuse multiply-adds as
// DESIGN.md's float tolerance allows; the double ones never: an FMA rounds
// once where scipy rounds twice. `flatten` inlines the kernels into the copy.
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx2,fma"), flatten)) void filter_rows_avx2(const float* ext, int64_t i0, int64_t i1,
                                                                  int64_t lanes, const RowPass<float>& pass,
                                                                  float* sums, float* res) {
  filter_rows<float, 32>(ext, i0, i1, lanes, pass, sums, res);
}
__attribute__((target("avx2"), flatten)) void filter_rows_avx2(const double* ext, int64_t i0, int64_t i1,
                                                              int64_t lanes, const RowPass<double>& pass,
                                                              double* sums, double* res) {
  filter_rows<double, 32>(ext, i0, i1, lanes, pass, sums, res);
}
#endif

template <class E>
FilterRows<E> row_kernel() {
#if defined(__GNUC__) && defined(__x86_64__)
  static const bool avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  if (avx2) return static_cast<FilterRows<E>>(&filter_rows_avx2);
#endif
  return &filter_rows<E, 16>;
}

}  // namespace

int cpu_max_threads() {
#if defined(GPUFILT_OPENMP)
  // Read once: GPUFILT_NUM_THREADS (a positive integer) wins over OpenMP's
  // own count, which follows OMP_NUM_THREADS.
  static const int threads = [] {
    const char* text = std::getenv("GPUFILT_NUM_THREADS");
    const long n = text ? std::strtol(text, nullptr, 10) : 0;
    return n > 0 ? (int)std::min<long>(n, 4096) : omp_get_max_threads();
  }();
  return threads;
#else
  return 1;
#endif
}

namespace {
// A line pass with line buffers of E (double, or float: see sums_in_float).
template <class E>
void run_line_pass(const ArrayDesc& in, const ArrayDesc& out, const LinePass& pass, double cval) {
  auto [load, _unused] = dispatch_real_dtype<LineIOAs<E>::template IO>(in.dtype);
  auto [_unused2, store] = dispatch_real_dtype<LineIOAs<E>::template IO>(out.dtype);
  const int lane = lane_axis(in, pass.axis);
  const Lines lines(in, out, pass.axis, lane);
  const int64_t n = lines.length, taps = pass.taps(), left = pass.left(), right = taps - 1 - left;
  const int64_t in_stride = in.strides[pass.axis], out_stride = out.strides[pass.axis];
  const int64_t width = lane < 0 ? 1 : in.shape[lane];  // lines side by side along the lane axis
  const int64_t in_lane = lane < 0 ? 0 : in.strides[lane], out_lane = lane < 0 ? 0 : out.strides[lane];
  const int64_t max_lanes = std::min(width, kLanes * 8 / (int64_t)sizeof(E)), blocks = (width + max_lanes - 1) / max_lanes;
  const std::vector<E> weights(pass.weights.begin(), pass.weights.end());
  const RowPass<E> row_pass{pass.kind, weights.data(), taps, pass.size, pass.symmetry()};
  const FilterRows<E> filter_rows = row_kernel<E>();

  // Dynamic chunks of tasks (~16 per thread): a thread that the OS preempts
  // does not hold up the others.
  const int threads = cpu_max_threads();
  const int64_t tasks = lines.count * blocks, grain = std::max<int64_t>(1, tasks / (16 * threads));
  parallel_region(lines.count * width * n > 32768, threads, [&, load = load, store = store] {
    // res holds one chunk of rows, or the whole line where that is shorter
    // (a tiny array's call then allocates a few bytes, not kChunk values).
    const int64_t res_size = std::min(std::max(kChunk, max_lanes), std::max<int64_t>(n, 1) * max_lanes);
    std::vector<E> ext((n + taps - 1) * max_lanes), res(res_size), sums(max_lanes);
#pragma omp for schedule(dynamic, grain)
    for (int64_t t = 0; t < tasks; ++t) {
      int64_t in_off, out_off;
      lines.offsets(t / blocks, in_off, out_off);
      const int64_t first = (t % blocks) * max_lanes, lanes = std::min(max_lanes, width - first);
      const char* src = in.data + in_off + first * in_lane;
      char* dst = out.data + out_off + first * out_lane;
      if (lanes == 1)
        load(src, in_stride, n, ext.data() + left);
      else
        for (int64_t i = 0; i < n; ++i) {
          if (i + kAhead < n) prefetch_row(src + (i + kAhead) * in_stride, lanes * in_lane);
          load(src + i * in_stride, in_lane, lanes, ext.data() + (left + i) * lanes);
        }
      extend_line(ext.data(), n, left, right, pass.mode, cval, lanes);
      const int64_t rows = std::max<int64_t>(1, kChunk / lanes);
      for (int64_t i0 = 0; i0 < n; i0 += rows) {
        const int64_t i1 = std::min(n, i0 + rows);
        if (lanes > 1)
          for (int64_t i = i0; i < i1; ++i) prefetch_row<true>(dst + i * out_stride, lanes * out_lane);
        filter_rows(ext.data(), i0, i1, lanes, row_pass, sums.data(), res.data());
        if (lanes == 1)
          store(res.data(), dst + i0 * out_stride, out_stride, i1 - i0);
        else
          for (int64_t i = i0; i < i1; ++i)
            store(res.data() + (i - i0) * lanes, dst + i * out_stride, out_lane, lanes);
      }
    }
  });
}

// float32 and float16 data (in and out) are summed in float, as the CUDA
// kernels do (fused.cu, Arith), unless the pass may cancel (a derivative:
// LinePass::may_cancel): within DESIGN.md's tolerance of scipy, and twice the
// values per vector. Minima and maxima stay exact: rounding to the output
// commutes with them. Integer and float64 data, outputs of other dtypes and
// derivatives stay in double: scipy's results to the last bit.
bool sums_in_float(const ArrayDesc& in, const ArrayDesc& out, const LinePass& pass) {
  auto narrow_float = [](DType t) { return t == DType::Float32 || t == DType::Float16; };
  return narrow_float(in.dtype) && narrow_float(out.dtype) && !pass.may_cancel() &&
         !(pass.kind == LineKind::Uniform && pass.size > kFloatWindow);
}

}  // namespace

void CpuBackend::line_pass(const ArrayDesc& in, const ArrayDesc& out, const LinePass& pass, double cval) {
  if (sums_in_float(in, out, pass)) return run_line_pass<float>(in, out, pass, cval);
  run_line_pass<double>(in, out, pass, cval);
}

void CpuBackend::copy(const ArrayDesc& in, const ArrayDesc& out) {
  if (in.size() == 0) return;
  const int axis = in.ndim ? in.ndim - 1 : 0;
  const Lines lines(in, out, axis);
  const int64_t n = lines.length;
  const int64_t in_stride = in.ndim ? in.strides[axis] : 0, out_stride = out.ndim ? out.strides[axis] : 0;
  if (in.dtype == out.dtype) {  // exact, whatever the dtype
    const int64_t item = itemsize(in.dtype);
    const bool runs = in_stride == item && out_stride == item;  // each line one memmove
    parallel_region(in.size() > 65536, cpu_max_threads(), [&] {
#pragma omp for schedule(static)
      for (int64_t l = 0; l < lines.count; ++l) {
        int64_t in_off, out_off;
        lines.offsets(l, in_off, out_off);
        if (runs) {
          std::memmove(out.data + out_off, in.data + in_off, n * item);
          continue;
        }
        for (int64_t i = 0; i < n; ++i)
          std::memmove(out.data + out_off + i * out_stride, in.data + in_off + i * in_stride, item);
      }
    });
    return;
  }
  auto [load, _unused] = dispatch_real_dtype<LineIO>(in.dtype);
  auto [_unused2, store] = dispatch_real_dtype<LineIO>(out.dtype);
  std::vector<double> buf(n);
  for (int64_t l = 0; l < lines.count; ++l) {
    int64_t in_off, out_off;
    lines.offsets(l, in_off, out_off);
    load(in.data + in_off, in_stride, n, buf.data());
    store(buf.data(), out.data + out_off, out_stride, n);
  }
}

namespace {
using namespace cpu;

// A run of n elements of out = op(a, b) in dtype T; sa == 0 or sb == 0 for a
// broadcast operand. Unit-stride runs of one dtype take typed loops that the
// compiler vectorises, with the operation fixed at compile time.
template <DType T, Elementwise Op>
void typed_run(const char* a, int64_t sa, const char* b, int64_t sb, char* out, int64_t n) {
  using S = typename storage<T>::type;
  const S* x = reinterpret_cast<const S*>(a);
  const S* y = reinterpret_cast<const S*>(b);
  S* r = reinterpret_cast<S*>(out);
  if (sb == 0) {
    const S v = *y;
    for (int64_t i = 0; i < n; ++i) r[i] = elementwise_value<T>(Op, x[i], v);
  } else {
    for (int64_t i = 0; i < n; ++i) r[i] = elementwise_value<T>(Op, x[i], y[i]);
  }
}

template <DType T>
struct ElementwiseRun {
  static void run(Elementwise op, const ArrayDesc& a, const ArrayDesc& b, const char* pa, int64_t sa,
                  const char* pb, int64_t sb, char* po, int64_t so, int64_t n) {
    using S = typename storage<T>::type;
    constexpr int64_t item = sizeof(S);
    const bool aligned = reinterpret_cast<uintptr_t>(pa) % alignof(S) == 0 &&
                         reinterpret_cast<uintptr_t>(pb) % alignof(S) == 0 &&
                         reinterpret_cast<uintptr_t>(po) % alignof(S) == 0;
    if (a.dtype == T && b.dtype == T && aligned && sa == item && so == item && (sb == item || sb == 0)) {
      switch (op) {
        case Elementwise::Add: return typed_run<T, Elementwise::Add>(pa, sa, pb, sb, po, n);
        case Elementwise::Multiply: return typed_run<T, Elementwise::Multiply>(pa, sa, pb, sb, po, n);
        case Elementwise::Subtract: return typed_run<T, Elementwise::Subtract>(pa, sa, pb, sb, po, n);
        case Elementwise::Square: return typed_run<T, Elementwise::Square>(pa, sa, pa, sa, po, n);
        case Elementwise::Sqrt: break;
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      const S x = load_operand<T>(a.dtype, pa + i * sa), y = load_operand<T>(b.dtype, pb + i * sb);
      const S r = elementwise_value<T>(op, x, y);
      copy_element(po + i * so, &r, sizeof(S));
    }
  }
};

// Byte offset of element `index` (C order) of `a`.
int64_t element_offset(const ArrayDesc& a, int64_t index) {
  int64_t off = 0;
  for (int d = a.ndim - 1; d >= 0; --d) {
    off += (index % a.shape[d]) * a.strides[d];
    index /= a.shape[d];
  }
  return off;
}

constexpr int64_t kRunLength = 16384;  // elements per parallel task along the last axis

}  // namespace

void CpuBackend::elementwise(Elementwise op, const ArrayDesc& a, const ArrayDesc& b, const ArrayDesc& out) {
  // Runs along the last axis, cut into tasks of kRunLength; a 0-d array is
  // one run of one element.
  const int last = out.ndim - 1;
  const int64_t n = out.ndim ? out.shape[last] : 1, rows = n ? out.size() / n : 0;
  const int64_t pieces = (n + kRunLength - 1) / kRunLength, tasks = rows * pieces;
  const int64_t sa = out.ndim ? a.strides[last] : 0, sb = out.ndim ? b.strides[last] : 0,
                so = out.ndim ? out.strides[last] : 0;
  parallel_region(out.size() > 65536, cpu_max_threads(), [&] {
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t row = t / pieces, start = (t % pieces) * kRunLength, first = row * n + start;
      dispatch_real_or_bfloat16<ElementwiseRun>(out.dtype, op, a, b, a.data + element_offset(a, first), sa,
                                                b.data + element_offset(b, first), sb,
                                                out.data + element_offset(out, first), so,
                                                std::min(kRunLength, n - start));
    }
  });
}

namespace {
class HostBuffer final : public TempBuffer {
 public:
  explicit HostBuffer(int64_t bytes) : storage_(new double[(size_t)bytes / 8 + 1]) {
    data = reinterpret_cast<char*>(storage_.get());
  }
 private:
  std::unique_ptr<double[]> storage_;  // uninitialised, 8-byte aligned
};
}  // namespace

std::unique_ptr<TempBuffer> CpuBackend::allocate(int64_t bytes) {
  return std::make_unique<HostBuffer>(bytes);
}

}  // namespace gpufilt
