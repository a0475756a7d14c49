#include "core/cpu_backend.hpp"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/cast.hpp"
#if defined(GPUFILT_OPENMP)
#include <omp.h>
#endif

namespace gpufilt {
namespace {

using LoadLine = void (*)(const char* src, int64_t stride, int64_t n, double* dst);
using StoreLine = void (*)(const double* src, char* dst, int64_t stride, int64_t n);

template <DType T>
struct LineIO {
  static void load(const char* src, int64_t stride, int64_t n, double* dst) {
    for (int64_t i = 0; i < n; ++i) dst[i] = load_as_double<T>(src + i * stride);
  }
  static void store(const double* src, char* dst, int64_t stride, int64_t n) {
    for (int64_t i = 0; i < n; ++i) store_from_double<T>(dst + i * stride, src[i]);
  }
  static std::pair<LoadLine, StoreLine> run() { return {&load, &store}; }
};

// The lines of an array along one axis: line l starts at base + offset(l).
struct Lines {
  int64_t count = 1, length = 1;
  int outer_ndim = 0;
  int64_t outer_shape[kMaxDims];
  int64_t outer_strides[2][kMaxDims];  // [array][dim], for input and output

  Lines(const ArrayDesc& in, const ArrayDesc& out, int axis) {
    length = in.ndim ? in.shape[axis] : 1;
    for (int d = 0; d < in.ndim; ++d) {
      if (d == axis) continue;
      outer_shape[outer_ndim] = in.shape[d];
      outer_strides[0][outer_ndim] = in.strides[d];
      outer_strides[1][outer_ndim] = out.strides[d];
      count *= in.shape[d];
      ++outer_ndim;
    }
  }
  // Byte offsets of line l in the input and the output.
  void offsets(int64_t l, int64_t& in_off, int64_t& out_off) const {
    in_off = out_off = 0;
    for (int d = outer_ndim - 1; d >= 0; --d) {
      int64_t i = l % outer_shape[d];
      l /= outer_shape[d];
      in_off += i * outer_strides[0][d];
      out_off += i * outer_strides[1][d];
    }
  }
};

// Fills the `left` and `right` cells around line[left .. left+n) per `mode`.
void extend_line(double* ext, int64_t n, int64_t left, int64_t right, Mode mode, double cval) {
  const double* line = ext + left;
  for (int64_t j = -left; j < 0; ++j) {
    int64_t k = border_index(j, n, mode);
    ext[left + j] = k < 0 ? cval : line[k];
  }
  for (int64_t j = n; j < n + right; ++j) {
    int64_t k = border_index(j, n, mode);
    ext[left + j] = k < 0 ? cval : line[k];
  }
}

void correlate_line(const double* ext, int64_t n, const std::vector<double>& w, double* res) {
  for (int64_t i = 0; i < n; ++i) res[i] = 0.0;
  for (size_t k = 0; k < w.size(); ++k) {
    const double wk = w[k];
    const double* src = ext + k;
    for (int64_t i = 0; i < n; ++i) res[i] += wk * src[i];
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

#pragma omp parallel if (lines.count * n > 32768)
  {
    std::vector<double> ext(n + taps - 1), res(n);
#pragma omp for schedule(static)
    for (int64_t l = 0; l < lines.count; ++l) {
      int64_t in_off, out_off;
      lines.offsets(l, in_off, out_off);
      load(in.data + in_off, in_stride, n, ext.data() + left);
      extend_line(ext.data(), n, left, right, pass.mode, cval);
      if (pass.kind == LineKind::Correlate) correlate_line(ext.data(), n, pass.weights, res.data());
      else uniform_line(ext.data(), n, pass.size, res.data());
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
