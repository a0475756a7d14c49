// scipy's laplace on the CPU in one sweep (CpuBackend::fused_laplace): what
// generic_laplace computes pass by pass (the [1, -2, 1] correlation along
// each axis, summed in double and stored in the output dtype, the stored
// results added up in the output dtype in axis order), row by row, without
// the temporary and the extra passes. src/cuda/fused.cu's laplace_kernel
// does the same on the GPU.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/cpu_backend.hpp"
#include "core/cpu_isa.hpp"
#include "core/cpu_lines.hpp"
#include "core/elementwise.hpp"
#include "core/parallel.hpp"

namespace gpufilt {
namespace {
using namespace cpu;

// The axes of `a` by increasing stride (length-1 axes last).
std::vector<int> axes_by_stride(const ArrayDesc& a) {
  std::vector<int> axes(a.ndim);
  for (int d = 0; d < a.ndim; ++d) axes[d] = d;
  std::stable_sort(axes.begin(), axes.end(), [&](int x, int y) {
    if ((a.shape[x] == 1) != (a.shape[y] == 1)) return a.shape[y] == 1;
    return std::llabs(a.strides[x]) < std::llabs(a.strides[y]);
  });
  return axes;
}

template <DType T>
struct LaplaceRows {
  using S = typename storage<T>::type;

  static GF_INLINE S rounded(double v) {
    S r;
    store_from_double<T>(reinterpret_cast<char*>(&r), v);
    return r;
  }
  // An element of a row of the input (S) or of a buffer (double).
  template <class P>
  static GF_INLINE double value(const P* p) {
    if constexpr (std::is_same_v<P, double>) return *p;
    else return load_as_double<T>(reinterpret_cast<const char*>(p));
  }

  // Elements [i0, i1) of a row: lo[d][i], hi[d][i] are the neighbours of
  // mid[i] along axis d. The second difference x[k-1] + x[k+1] - 2 x[k] in
  // scipy's order for symmetric weights (LinePass::symmetry: w[1] * x[k],
  // then += (x[k-1] + x[k+1]) * w[0]), in double, rounded to S; added in
  // axis order with numpy's arithmetic (elementwise_value).
  template <int ND, class P>
  static GF_INLINE void span(const P* const* lo, const P* mid, const P* const* hi, int64_t i0, int64_t i1,
                             S* result) {
    for (int64_t i = i0; i < i1; ++i) {
      const double c = value(mid + i);
      S sum = rounded(c * -2.0 + (value(lo[0] + i) + value(hi[0] + i)) * 1.0);
      for (int d = 1; d < ND; ++d)
        sum = elementwise_value<T>(Elementwise::Add, sum,
                                   rounded(c * -2.0 + (value(lo[d] + i) + value(hi[d] + i)) * 1.0));
      result[i] = sum;
    }
  }
  using Span = void (*)(const S* const*, const S*, const S* const*, int64_t, int64_t, S*);
  template <int ND>
  static void plain_span(const S* const* lo, const S* mid, const S* const* hi, int64_t i0, int64_t i1, S* result) {
    span<ND>(lo, mid, hi, i0, i1, result);
  }
#if defined(GPUFILT_ISA_COPIES)
  // Four or eight doubles per instruction (cpu_isa.hpp); no FMA (-2 x is
  // exact, so it would not change a result, but the rule of the other
  // kernels stays simple).
  template <int ND>
  GF_AVX2 static void avx2_span(const S* const* lo, const S* mid, const S* const* hi, int64_t i0, int64_t i1,
                                S* result) {
    span<ND>(lo, mid, hi, i0, i1, result);
  }
  template <int ND>
  GF_AVX512 static void avx512_span(const S* const* lo, const S* mid, const S* const* hi, int64_t i0, int64_t i1,
                                    S* result) {
    span<ND>(lo, mid, hi, i0, i1, result);
  }
#endif
  template <int ND>
  static Span span_kernel() {
#if defined(GPUFILT_ISA_COPIES)
    return for_cpu_isa<Span>(&plain_span<ND>, &avx2_span<ND>, &avx512_span<ND>);
#else
    return &plain_span<ND>;
#endif
  }

  static void run(const ArrayDesc& in, const ArrayDesc& out, const std::vector<Mode>& modes, double cval) {
    if (in.ndim == 2) return run_nd<2>(in, out, modes, cval);
    run_nd<3>(in, out, modes, cval);
  }

  template <int ND>
  static void run_nd(const ArrayDesc& in, const ArrayDesc& out, const std::vector<Mode>& modes, double cval) {
    // Rows run along the axis of the smallest stride; the others, the one of
    // the largest stride first, number the rows.
    constexpr int n_outer = ND - 1;
    const std::vector<int> axes = axes_by_stride(in);
    const int row = axes[0];
    int outer[2] = {0, 0};
    for (int k = 0; k < n_outer; ++k) outer[k] = axes[ND - 1 - k];
    const int64_t n = in.shape[row], n0 = in.shape[outer[0]], n1 = n_outer > 1 ? in.shape[outer[1]] : 1;
    const LoadLine load = LineIO<T>::load;
    const int64_t in_stride = in.strides[row], out_stride = out.strides[row];
    const bool unit = in_stride == (int64_t)sizeof(S) && n > 2;  // rows read in place
    const Span fast = span_kernel<ND>();
    const int threads = cpu_max_threads();
    const int64_t grain = std::max<int64_t>(1, n0 * n1 / (16 * threads));

    parallel_region(threads > 1 && in.size() > 32768, threads, [&] {
      // Rows as doubles where they cannot be read in place: the centre row
      // with one extra cell at each end, its neighbours along the others.
      std::vector<double> centre(n + 2), lo_rows[2], hi_rows[2];
      for (int k = 0; k < n_outer; ++k) lo_rows[k].resize(n), hi_rows[k].resize(n);
      std::vector<S> buffer(n);
      // Rows in C order of (outer[0], outer[1]), in dynamic runs of
      // neighbouring rows (about 16 per thread): their neighbours stay in
      // cache, and a thread that the OS preempts does not hold up the others.
      dynamic_loop(n0 * n1, grain, [&](int64_t r) {
        const int64_t index[2] = {r / n1, r % n1};
        const char* src = in.data;
        char* dst = out.data;
        for (int k = 0; k < n_outer; ++k) {
          src += index[k] * in.strides[outer[k]];
          dst += index[k] * out.strides[outer[k]];
        }
        S* result = out_stride == (int64_t)sizeof(S) ? reinterpret_cast<S*>(dst) : buffer.data();
        // The neighbour rows along each outer axis (nullptr: all cval).
        const char* lo_src[2] = {nullptr, nullptr};
        const char* hi_src[2] = {nullptr, nullptr};
        bool inside = true;
        for (int k = 0; k < n_outer; ++k) {
          const int axis = outer[k];
          const int64_t len = in.shape[axis], i = index[k];
          const int64_t below = border_index(i - 1, len, modes[axis]), above = border_index(i + 1, len, modes[axis]);
          if (below >= 0) lo_src[k] = src + (below - i) * in.strides[axis];
          if (above >= 0) hi_src[k] = src + (above - i) * in.strides[axis];
          inside &= below >= 0 && above >= 0;
        }
        load(src, in_stride, n, centre.data() + 1);
        extend_line(centre.data(), n, 1, 1, modes[row], cval);
        for (int k = 0; k < n_outer; ++k) {
          auto fill = [&](const char* from, std::vector<double>& to) {
            if (from) load(from, in_stride, n, to.data());
            else std::fill(to.begin(), to.end(), cval);
          };
          if (!inside || !unit) {
            fill(lo_src[k], lo_rows[k]);
            fill(hi_src[k], hi_rows[k]);
          } else {  // only the two end cells are needed as doubles
            lo_rows[k][0] = value(reinterpret_cast<const S*>(lo_src[k]));
            hi_rows[k][0] = value(reinterpret_cast<const S*>(hi_src[k]));
            lo_rows[k][n - 1] = value(reinterpret_cast<const S*>(lo_src[k]) + n - 1);
            hi_rows[k][n - 1] = value(reinterpret_cast<const S*>(hi_src[k]) + n - 1);
          }
        }
        // Per axis, in axis order: the neighbour rows as doubles.
        const double* lo[ND];
        const double* hi[ND];
        for (int d = 0; d < ND; ++d) {
          if (d == row) {
            lo[d] = centre.data();
            hi[d] = centre.data() + 2;
          } else {
            const int k = outer[0] == d ? 0 : 1;
            lo[d] = lo_rows[k].data();
            hi[d] = hi_rows[k].data();
          }
        }
        if (inside && unit) {  // the interior straight from the input, the two ends from the buffers
          const S* mid = reinterpret_cast<const S*>(src);
          const S* lo_s[ND];
          const S* hi_s[ND];
          for (int d = 0; d < ND; ++d) {
            const int k = d == row ? -1 : outer[0] == d ? 0 : 1;
            lo_s[d] = k < 0 ? mid - 1 : reinterpret_cast<const S*>(lo_src[k]);
            hi_s[d] = k < 0 ? mid + 1 : reinterpret_cast<const S*>(hi_src[k]);
          }
          fast(lo_s, mid, hi_s, 1, n - 1, result);
          span<ND>(lo, centre.data() + 1, hi, 0, 1, result);
          span<ND>(lo, centre.data() + 1, hi, n - 1, n, result);
        } else {
          span<ND>(lo, centre.data() + 1, hi, 0, n, result);
        }
        if (result == buffer.data()) store_row(result, dst, out_stride, n);
      });
    });
  }

  static void store_row(const S* result, char* dst, int64_t stride, int64_t n) {
    for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * stride, result + i, sizeof(S));
  }
};

}  // namespace

bool CpuBackend::fused_laplace(const ArrayDesc& in, const ArrayDesc& out, const std::vector<Mode>& modes,
                               double cval) {
  if ((int)modes.size() != in.ndim || in.ndim < 2 || in.ndim > 3 || in.dtype != out.dtype ||
      is_complex(in.dtype) || !same_shape(in, out) || may_overlap(in, out))
    return false;
  if (in.size() == 0) return true;
  dispatch_real_dtype<LaplaceRows>(in.dtype, in, out, modes, cval);
  return true;
}

}  // namespace gpufilt
