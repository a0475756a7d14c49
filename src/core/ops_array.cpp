// CPU kernels of the array operations (core/ops_array.hpp) and the plans the
// CUDA kernels share. Parallel with OpenMP over tasks whose split depends on
// the data's shape only, so that results do not depend on the thread count.
#include "core/ops_array.hpp"

#include "core/parallel.hpp"
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace gpufilt {
namespace {

// Byte offsets of element `index` (C order over `shape`) along two stride sets.
inline void decode(int64_t index, int ndim, const int64_t* shape, const int64_t* s1, const int64_t* s2,
                   int64_t& o1, int64_t& o2) {
  o1 = o2 = 0;
  for (int d = ndim - 1; d >= 0; --d) {
    const int64_t k = index % shape[d];
    index /= shape[d];
    o1 += k * s1[d];
    if (s2) o2 += k * s2[d];
  }
}

bool is_integer_dtype(DType t) { return !is_float_dtype(t) && !is_complex(t) && t != DType::Bool; }

std::string axis_text(int axis) { return "axis " + std::to_string(axis); }

}  // namespace

// ---- fill and broadcast_to --------------------------------------------------

ArrayDesc broadcast_source(const ArrayDesc& src, const ArrayDesc& out) {
  if (src.dtype != out.dtype)
    throw std::invalid_argument(std::string("out has dtype ") + dtype_name(out.dtype) + ", x has " +
                                dtype_name(src.dtype) + "; they must match");
  return broadcast_view(src, out, "x");
}

namespace {

// Copies runs along the last axis as machine words of the element's size.
template <class W>
void copy_runs(const ArrayDesc& src, const ArrayDesc& out) {
  const int last = out.ndim - 1;
  const int64_t n = out.ndim ? out.shape[last] : 1, rows = n ? out.size() / n : 0;
  const int64_t ss = out.ndim ? src.strides[last] : 0, so = out.ndim ? out.strides[last] : 0;
  parallel_for(rows, out.size() > 65536, [&](int64_t r) {
    int64_t os, oo;
    decode(r, std::max(last, 0), out.shape, src.strides, out.strides, os, oo);
    const char* s = src.data + os;
    char* o = out.data + oo;
    if (ss == 0) {  // a broadcast value: one word stored n times
      W v;
      std::memcpy(&v, s, sizeof(W));
      if (so == (int64_t)sizeof(W) && reinterpret_cast<uintptr_t>(o) % alignof(W) == 0)
        std::fill_n(reinterpret_cast<W*>(o), n, v);
      else
        for (int64_t i = 0; i < n; ++i) std::memcpy(o + i * so, &v, sizeof(W));
    } else if (ss == (int64_t)sizeof(W) && so == ss) {
      std::memmove(o, s, (size_t)(n * ss));
    } else {
      for (int64_t i = 0; i < n; ++i) std::memmove(o + i * so, s + i * ss, sizeof(W));
    }
  });
}

}  // namespace

void copy_broadcast(const ArrayDesc& src, const ArrayDesc& out) {
  if (out.size() == 0) return;
  with_word(itemsize(out.dtype), [&](auto word) { copy_runs<decltype(word)>(src, out); });
}

// ---- sum ----------------------------------------------------------------------

namespace {

struct Axis {
  int64_t n, x, out;
};

// Merges neighbours (sorted outermost first) that walk memory as one axis.
std::vector<Axis> merge_axes(std::vector<Axis> axes) {
  std::stable_sort(axes.begin(), axes.end(),
                   [](const Axis& a, const Axis& b) { return std::llabs(a.x) > std::llabs(b.x); });
  std::vector<Axis> merged;
  for (const Axis& a : axes) {
    Axis* outer = merged.empty() ? nullptr : &merged.back();
    if (outer && outer->x == a.x * a.n && outer->out == a.out * a.n) *outer = {outer->n * a.n, a.x, a.out};
    else merged.push_back(a);
  }
  return merged;
}

}  // namespace

ReducePlan plan_reduction(const ArrayDesc& x, const std::vector<int>& axes, const ArrayDesc& out) {
  bool reduced[kMaxDims] = {};
  for (int a : axes) {
    if (a < 0 || a >= x.ndim) throw std::out_of_range(axis_text(a) + " is out of bounds for an array of " +
                                                       std::to_string(x.ndim) + " dimensions");
    if (reduced[a]) throw std::invalid_argument("duplicate value in axis");
    reduced[a] = true;
  }
  const bool keepdims = out.ndim == x.ndim;
  if (!keepdims && out.ndim != x.ndim - (int)axes.size())
    throw std::invalid_argument("out has " + std::to_string(out.ndim) + " dimensions; the sum has " +
                                std::to_string(x.ndim - (int)axes.size()) + " (or " + std::to_string(x.ndim) +
                                " with keepdims)");
  std::vector<Axis> keep, red;
  int k = 0;
  for (int d = 0; d < x.ndim; ++d) {
    const int64_t expect = reduced[d] ? 1 : x.shape[d];
    const bool has_out_axis = keepdims || !reduced[d];
    if (has_out_axis && out.shape[k] != expect)
      throw std::invalid_argument("out has shape " + shape_string(out) + ", which does not match the sum of x " +
                                  shape_string(x));
    const int64_t out_stride = has_out_axis ? out.strides[k] : 0;
    k += has_out_axis;
    if (x.shape[d] == 1) continue;
    (reduced[d] ? red : keep).push_back({x.shape[d], x.strides[d], reduced[d] ? 0 : out_stride});
  }
  keep = merge_axes(keep);
  red = merge_axes(red);
  ReducePlan p;
  for (const Axis& a : keep) {
    p.keep_shape[p.nkeep] = a.n;
    p.keep_x[p.nkeep] = a.x;
    p.keep_out[p.nkeep++] = a.out;
    p.outputs *= a.n;
  }
  for (const Axis& a : red) {
    p.red_shape[p.nred] = a.n;
    p.red_x[p.nred++] = a.x;
    p.reduced *= a.n;
  }
  p.column = p.nkeep > 0 && p.keep_shape[p.nkeep - 1] > 1 &&
             (p.nred == 0 || std::llabs(p.keep_x[p.nkeep - 1]) < std::llabs(p.red_x[p.nred - 1]));
  return p;
}

SumClass sum_class(DType out) {
  if (is_float_dtype(out)) return SumClass::Float;
  return out == DType::Bool ? SumClass::Bool : SumClass::Integer;
}

namespace {

constexpr int64_t kChunk = 1 << 15;  // summands per task along the reduced axes
constexpr int kTile = 512;           // neighbouring outputs per task in column mode

// Compensated (Kahan) double accumulator; plain wrapping uint64 for integers.
struct Kahan {
  double s = 0.0, c = 0.0;
  void add(double v) {
    const double y = v - c, t = s + y;
    c = (t - s) - y;
    s = t;
  }
  double value() const { return s - c; }
};

template <SumClass C>
using Partial = std::conditional_t<C == SumClass::Float, Kahan, uint64_t>;

inline void accumulate(Kahan& k, double v) { k.add(v); }
inline void accumulate(uint64_t& k, uint64_t v) { k += v; }
inline double finish(const Kahan& k) { return k.value(); }
inline uint64_t finish(uint64_t k) { return k; }

// numpy's pairwise summation of a strided run, in double: error growing with
// log(n) rather than n.
template <DType T>
double pairwise(const char* p, int64_t stride, int64_t n) {
  if (n < 8) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += load_as_double<T>(p + i * stride);
    return s;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = load_as_double<T>(p + j * stride);
    int64_t i = 8;
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) r[j] += load_as_double<T>(p + (i + j) * stride);
    double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) s += load_as_double<T>(p + i * stride);
    return s;
  }
  const int64_t half = n / 2 - (n / 2) % 8;
  return pairwise<T>(p, stride, half) + pairwise<T>(p + half * stride, stride, n - half);
}

// Sum of class C of reduced elements [lo, hi) from `base` (row mode).
template <DType T, SumClass C>
Partial<C> sum_range(const ReducePlan& p, const char* base, int64_t lo, int64_t hi) {
  Partial<C> acc{};
  if (p.nred == 0) {
    if (lo < hi) accumulate(acc, load_summand<T, C>(base));
    return acc;
  }
  const int inner = p.nred - 1;
  const int64_t run_len = p.red_shape[inner], stride = p.red_x[inner];
  for (int64_t pos = lo; pos < hi;) {
    int64_t off, unused;
    decode(pos / run_len, inner, p.red_shape, p.red_x, nullptr, off, unused);
    const int64_t start = pos % run_len, n = std::min(run_len - start, hi - pos);
    const char* run = base + off + start * stride;
    if constexpr (C == SumClass::Float) {
      acc.add(pairwise<T>(run, stride, n));
    } else {
      for (int64_t i = 0; i < n; ++i) acc += load_summand<T, C>(run + i * stride);
    }
    pos += n;
  }
  return acc;
}

// Column mode: sums of class C over reduced elements [lo, hi) for `width`
// neighbouring outputs along the last kept axis, into acc[0..width). The
// float sums keep their running values and compensations in separate arrays
// so that the loop over the outputs vectorises.
template <DType T, SumClass C>
void sum_columns(const ReducePlan& p, const char* base, int64_t lo, int64_t hi, int width, Partial<C>* acc) {
  const int64_t step = p.keep_x[p.nkeep - 1];
  double s[kTile] = {}, comp[kTile] = {};
  uint64_t n[kTile] = {};
  for (int64_t pos = lo; pos < hi; ++pos) {
    int64_t off, unused;
    decode(pos, p.nred, p.red_shape, p.red_x, nullptr, off, unused);
    const char* row = base + off;
    if constexpr (C == SumClass::Float) {
      using S = typename storage<T>::type;
      constexpr bool plain = T == DType::Float32 || T == DType::Float64;
      if (plain && step == (int64_t)sizeof(S) && reinterpret_cast<uintptr_t>(row) % alignof(S) == 0) {
        const S* r = reinterpret_cast<const S*>(row);  // unit stride: vectorises
        for (int j = 0; j < width; ++j) {
          const double y = (double)r[j] - comp[j], t = s[j] + y;
          comp[j] = (t - s[j]) - y;
          s[j] = t;
        }
        continue;
      }
      for (int j = 0; j < width; ++j) {
        const double y = load_as_double<T>(row + j * step) - comp[j], t = s[j] + y;
        comp[j] = (t - s[j]) - y;
        s[j] = t;
      }
    } else {
      for (int j = 0; j < width; ++j) n[j] += load_summand<T, C>(row + j * step);
    }
  }
  for (int j = 0; j < width; ++j) {
    if constexpr (C == SumClass::Float) acc[j] = Kahan{s[j], comp[j]};
    else acc[j] = n[j];
  }
}

template <SumClass C>
void store_sum(DType t, char* p, const Partial<C>& acc) {
  if constexpr (C == SumClass::Float) dispatch_real_or_bfloat16<StoreFromDouble>(t, p, finish(acc));
  else store_wrapped_int(t, p, acc);
}

template <DType T, SumClass C>
void run_sum(const ReducePlan& p, const ArrayDesc& x, const ArrayDesc& out) {
  const int64_t lanes = p.column ? p.keep_shape[p.nkeep - 1] : 1;  // outputs summed side by side
  const int64_t tiles = p.column ? (lanes + kTile - 1) / kTile : 1, groups = p.outputs / lanes;
  const int64_t chunk = p.column ? std::max<int64_t>(1, kChunk / kTile) : kChunk;
  const int64_t chunks = std::max<int64_t>(1, (p.reduced + chunk - 1) / chunk);
  const int group_ndim = p.column ? p.nkeep - 1 : p.nkeep;
  std::vector<Partial<C>> partial((size_t)(p.outputs * chunks));  // [output][chunk]
  const int64_t tasks = groups * tiles * chunks;
  parallel_for(tasks, x.size() > 65536, [&](int64_t t) {
    const int64_t c = t % chunks, tile = t / chunks % tiles, g = t / chunks / tiles;
    int64_t xoff, unused;
    decode(g, group_ndim, p.keep_shape, p.keep_x, nullptr, xoff, unused);
    const int64_t lo = c * chunk, hi = std::min(p.reduced, lo + chunk);
    if (!p.column) {
      partial[(size_t)(g * chunks + c)] = sum_range<T, C>(p, x.data + xoff, lo, hi);
      return;
    }
    const int64_t first = tile * kTile;
    const int width = (int)std::min<int64_t>(kTile, lanes - first);
    Partial<C> acc[kTile] = {};
    sum_columns<T, C>(p, x.data + xoff + first * p.keep_x[p.nkeep - 1], lo, hi, width, acc);
    for (int j = 0; j < width; ++j) partial[(size_t)((g * lanes + first + j) * chunks + c)] = acc[j];
  });
  parallel_for(p.outputs, p.outputs * chunks > 4096, [&](int64_t o) {
    Partial<C> total{};
    for (int64_t c = 0; c < chunks; ++c) accumulate(total, finish(partial[(size_t)(o * chunks + c)]));
    int64_t unused, ooff;
    decode(o, p.nkeep, p.keep_shape, p.keep_x, p.keep_out, unused, ooff);
    store_sum<C>(out.dtype, out.data + ooff, total);
  });
}

template <DType T>
struct SumKernel {
  static void run(const ReducePlan& p, const ArrayDesc& x, const ArrayDesc& out) {
    switch (sum_class(out.dtype)) {
      case SumClass::Float: return run_sum<T, SumClass::Float>(p, x, out);
      case SumClass::Integer: return run_sum<T, SumClass::Integer>(p, x, out);
      case SumClass::Bool: return run_sum<T, SumClass::Bool>(p, x, out);
    }
  }
};

void require_real_or_bfloat16(DType t, const char* name) {
  if (is_complex(t))
    throw std::invalid_argument(std::string(name) + " has dtype " + dtype_name(t) +
                                "; gpufilt.ops takes bool, integer and float dtypes");
}

}  // namespace

void sum(const ArrayDesc& x, const std::vector<int>& axes, const ArrayDesc& out) {
  require_real_or_bfloat16(x.dtype, "x");
  require_real_or_bfloat16(out.dtype, "out");
  const ReducePlan plan = plan_reduction(x, axes, out);
  if (plan.outputs == 0) return;
  dispatch_real_or_bfloat16<SumKernel>(x.dtype, plan, x, out);
}

// ---- gather -------------------------------------------------------------------

GatherPlan plan_gather(const ArrayDesc& source, const ArrayDesc& index, int axis, const ArrayDesc& out) {
  if (axis < 0 || axis >= source.ndim)
    throw std::out_of_range(axis_text(axis) + " is out of bounds for a source of " + std::to_string(source.ndim) +
                            " dimensions");
  if (!is_integer_dtype(index.dtype))
    throw std::invalid_argument(std::string("index has dtype ") + dtype_name(index.dtype) +
                                "; it must have an integer dtype");
  if (out.dtype != source.dtype)
    throw std::invalid_argument(std::string("out has dtype ") + dtype_name(out.dtype) + "; take of source gives " +
                                dtype_name(source.dtype));
  const int nd = source.ndim - 1 + index.ndim;
  if (nd > kMaxDims) throw std::invalid_argument("the result would have more than 32 dimensions");
  GatherPlan p;
  p.source = out;
  p.source.data = source.data;
  p.source.dtype = source.dtype;
  p.index = out;
  p.index.data = index.data;
  p.index.dtype = index.dtype;
  bool ok = out.ndim == nd;
  for (int d = 0; ok && d < nd; ++d) {
    const bool in_index = d >= axis && d < axis + index.ndim;
    const int sd = d < axis ? d : d - index.ndim + 1;  // source axis of out axis d
    const int64_t want = in_index ? index.shape[d - axis] : source.shape[sd];
    ok = out.shape[d] == want;
    p.source.strides[d] = in_index ? 0 : source.strides[sd];
    p.index.strides[d] = in_index ? index.strides[d - axis] : 0;
  }
  if (!ok) {
    ArrayDesc want = out;
    want.ndim = nd;
    for (int d = 0; d < nd; ++d)
      want.shape[d] = d < axis ? source.shape[d] : d < axis + index.ndim ? index.shape[d - axis]
                                                                         : source.shape[d - index.ndim + 1];
    throw std::invalid_argument("out has shape " + shape_string(out) + "; take gives " + shape_string(want));
  }
  p.axis_length = source.shape[axis];
  p.axis_stride = source.strides[axis];
  return p;
}

namespace {

// The first out-of-range entry of `index` (any layout), or -1 and `bad` untouched.
template <DType T>
struct FindBadIndex {
  static bool run(const ArrayDesc& index, int64_t n, int64_t& bad) {
    const int64_t count = index.size();
    for (int64_t i = 0; i < count; ++i) {
      int64_t off, unused;
      decode(i, index.ndim, index.shape, index.strides, nullptr, off, unused);
      if (load_index<T>(index.data + off, n) >= n) {
        using S = typename storage<T>::type;
        S v;
        std::memcpy(&v, index.data + off, sizeof(S));
        bad = (int64_t)v;
        return true;
      }
    }
    return false;
  }
};

// Copies runs along out's last axis; per element of a run, the source row
// is source + index value * axis stride.
template <DType T, class W>
void gather_runs(const GatherPlan& p, const ArrayDesc& out) {
  const int last = out.ndim - 1;
  const int64_t len = out.ndim ? out.shape[last] : 1, rows = len ? out.size() / len : 0, n = p.axis_length;
  const int64_t ss = out.ndim ? p.source.strides[last] : 0, is = out.ndim ? p.index.strides[last] : 0,
                os = out.ndim ? out.strides[last] : 0;
  parallel_for(rows, out.size() > 65536, [&](int64_t r) {
    int64_t so, oo, io, unused;
    decode(r, std::max(last, 0), out.shape, p.source.strides, out.strides, so, oo);
    decode(r, std::max(last, 0), out.shape, p.index.strides, nullptr, io, unused);
    const char* src = p.source.data + so;
    const char* idx = p.index.data + io;
    char* dst = out.data + oo;
    if (is == 0) {  // one index for the whole run: a strided row copy
      src += load_index<T>(idx, n) * p.axis_stride;
      for (int64_t k = 0; k < len; ++k) std::memcpy(dst + k * os, src + k * ss, sizeof(W));
    } else {
      for (int64_t k = 0; k < len; ++k)
        std::memcpy(dst + k * os, src + k * ss + load_index<T>(idx + k * is, n) * p.axis_stride, sizeof(W));
    }
  });
}

template <DType T>
struct GatherKernel {
  static void run(const GatherPlan& p, const ArrayDesc& out) {
    with_word(itemsize(out.dtype), [&](auto word) { gather_runs<T, decltype(word)>(p, out); });
  }
};

}  // namespace

void gather(const ArrayDesc& source, const ArrayDesc& index, int axis, const ArrayDesc& out) {
  const GatherPlan p = plan_gather(source, index, axis, out);
  int64_t bad = 0;
  if (index.size() && dispatch_real_dtype<FindBadIndex>(index.dtype, index, p.axis_length, bad))
    throw std::out_of_range("index " + std::to_string(bad) + " is out of bounds for axis " +
                            std::to_string(axis) + " with size " + std::to_string(p.axis_length));
  if (out.size() == 0) return;
  dispatch_real_dtype<GatherKernel>(index.dtype, p, out);
}

}  // namespace gpufilt
