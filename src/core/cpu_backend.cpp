#include "core/cpu_backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/cpu_lines.hpp"
#if defined(GPUFILT_OPENMP)
#include <omp.h>
#endif

namespace gpufilt {
namespace {
using namespace cpu;

// In scipy's summation order (see LinePass::symmetry); the loops over i are
// unit-stride, so they vectorise without changing any element's order.
void correlate_line(const double* ext, int64_t n, const std::vector<double>& w, int symmetry,
                    double* res) {
  const int64_t taps = (int64_t)w.size(), c = taps / 2;
  if (symmetry != 0) {
    for (int64_t i = 0; i < n; ++i) res[i] = ext[i + c] * w[c];
    for (int64_t k = 0; k < c; ++k) {
      const double wk = w[k];
      const double *lo = ext + k, *hi = ext + 2 * c - k;
      if (symmetry > 0)
        for (int64_t i = 0; i < n; ++i) res[i] += (lo[i] + hi[i]) * wk;
      else
        for (int64_t i = 0; i < n; ++i) res[i] += (lo[i] - hi[i]) * wk;
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) res[i] = ext[i + taps - 1] * w[taps - 1];
  for (int64_t k = 0; k + 1 < taps; ++k) {
    const double wk = w[k];
    const double* src = ext + k;
    for (int64_t i = 0; i < n; ++i) res[i] += src[i] * wk;
  }
}

// A running sum, as scipy's NI_UniformFilter1D computes it.
void uniform_line(const double* ext, int64_t n, int64_t size, double* res) {
  double sum = 0.0;
  for (int64_t k = 0; k < size; ++k) sum += ext[k];
  res[0] = sum / size;
  for (int64_t i = 1; i < n; ++i) {
    sum += ext[i + size - 1] - ext[i - 1];
    res[i] = sum / size;
  }
}

// Minimum or maximum over each window of `size`, with scipy's comparison
// (a later value replaces the running one only if strictly smaller/larger).
template <bool Minimum>
void min_max_line(const double* ext, int64_t n, int64_t size, double* res) {
  for (int64_t i = 0; i < n; ++i) {
    double v = ext[i];
    for (int64_t k = 1; k < size; ++k) {
      double x = ext[i + k];
      if (Minimum ? x < v : x > v) v = x;
    }
    res[i] = v;
  }
}

void filter_line(const double* ext, int64_t n, const LinePass& pass, int symmetry, double* res) {
  switch (pass.kind) {
    case LineKind::Correlate: return correlate_line(ext, n, pass.weights, symmetry, res);
    case LineKind::Uniform: return uniform_line(ext, n, pass.size, res);
    case LineKind::Minimum: return min_max_line<true>(ext, n, pass.size, res);
    case LineKind::Maximum: return min_max_line<false>(ext, n, pass.size, res);
  }
}

}  // namespace

int cpu_max_threads() {
#if defined(GPUFILT_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void CpuBackend::line_pass(const ArrayDesc& in, const ArrayDesc& out, const LinePass& pass,
                           double cval) {
  auto [load, _unused] = dispatch_real_dtype<LineIO>(in.dtype);
  auto [_unused2, store] = dispatch_real_dtype<LineIO>(out.dtype);
  const Lines lines(in, out, pass.axis);
  const int64_t n = lines.length, taps = pass.taps(), left = pass.left(), right = taps - 1 - left;
  const int64_t in_stride = in.strides[pass.axis], out_stride = out.strides[pass.axis];
  const int symmetry = pass.symmetry();

#pragma omp parallel if (lines.count * n > 32768)
  {
    std::vector<double> ext(n + taps - 1), res(n);
#pragma omp for schedule(static)
    for (int64_t l = 0; l < lines.count; ++l) {
      int64_t in_off, out_off;
      lines.offsets(l, in_off, out_off);
      load(in.data + in_off, in_stride, n, ext.data() + left);
      extend_line(ext.data(), n, left, right, pass.mode, cval);
      filter_line(ext.data(), n, pass, symmetry, res.data());
      store(res.data(), out.data + out_off, out_stride, n);
    }
  }
}

void CpuBackend::copy(const ArrayDesc& in, const ArrayDesc& out) {
  if (in.size() == 0) return;
  const int axis = in.ndim ? in.ndim - 1 : 0;
  const Lines lines(in, out, axis);
  const int64_t n = lines.length;
  const int64_t in_stride = in.ndim ? in.strides[axis] : 0, out_stride = out.ndim ? out.strides[axis] : 0;
  if (in.dtype == out.dtype) {  // exact, whatever the dtype
    const int64_t item = itemsize(in.dtype);
    for (int64_t l = 0; l < lines.count; ++l) {
      int64_t in_off, out_off;
      lines.offsets(l, in_off, out_off);
      for (int64_t i = 0; i < n; ++i)
        std::memmove(out.data + out_off + i * out_stride, in.data + in_off + i * in_stride, item);
    }
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
#pragma omp parallel for schedule(static) if (out.size() > 65536)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t row = t / pieces, start = (t % pieces) * kRunLength, first = row * n + start;
    dispatch_real_or_bfloat16<ElementwiseRun>(out.dtype, op, a, b, a.data + element_offset(a, first), sa,
                                              b.data + element_offset(b, first), sb,
                                              out.data + element_offset(out, first), so,
                                              std::min(kRunLength, n - start));
  }
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
