// CPU footprint filters. Each output line (along the last axis) reads one
// extended input line per distinct offset of the footprint across the other
// axes; the taps then read those buffers at their last-axis shift, so every
// input value is converted once per line and the inner loops are unit-stride.
#include <algorithm>
#include <map>
#include <vector>

#include "core/cpu_backend.hpp"
#include "core/cpu_lines.hpp"

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

// Per-thread buffers: one extended line per row, the result, rank scratch.
struct Scratch {
  std::vector<double> lines, result, values;
  Scratch(const LinePlan& plan, int64_t n, int64_t taps)
      : lines(plan.rows.size() * (n + plan.left + plan.right)), result(n), values(taps) {}
};

void reduce_line(const Footprint& f, const LinePlan& plan, int64_t n, Scratch& s) {
  const int64_t stride = n + plan.left + plan.right, taps = f.taps();
  const double* lines = s.lines.data();
  double* res = s.result.data();
  auto tap = [&](int64_t t) { return lines + plan.tap_row[t] * stride + plan.tap_shift[t]; };
  switch (f.reduce) {
    case Reduce::Sum:
      std::fill(res, res + n, 0.0);
      for (int64_t t = 0; t < taps; ++t) {
        const double w = f.weights[t], *src = tap(t);
        for (int64_t i = 0; i < n; ++i) res[i] += w * src[i];
      }
      break;
    case Reduce::Minimum:
    case Reduce::Maximum: {
      const bool minimum = f.reduce == Reduce::Minimum;
      std::copy(tap(0), tap(0) + n, res);
      for (int64_t t = 1; t < taps; ++t) {
        const double* src = tap(t);
        for (int64_t i = 0; i < n; ++i)
          if (minimum ? src[i] < res[i] : src[i] > res[i]) res[i] = src[i];
      }
      break;
    }
    case Reduce::Rank: {
      double* v = s.values.data();
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t t = 0; t < taps; ++t) v[t] = tap(t)[i];
        std::nth_element(v, v + f.rank, v + taps);
        res[i] = v[f.rank];
      }
      break;
    }
  }
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

void CpuBackend::footprint_pass(const ArrayDesc& in0, const ArrayDesc& out0, const Footprint& f0,
                                double cval) {
  const ArrayDesc in = at_least_1d(in0), out = at_least_1d(out0);
  Footprint f = f0;
  if (f.ndim == 0) {
    f.ndim = 1;
    f.offsets.assign(f.ntaps, 0);
  }
  auto [load, _unused] = dispatch_real_dtype<LineIO>(in.dtype);
  auto [_unused2, store] = dispatch_real_dtype<LineIO>(out.dtype);
  const int last = in.ndim - 1;
  const LinePlan plan(f);
  const Lines lines(in, out, last);
  const int64_t n = lines.length, row_len = n + plan.left + plan.right;

#pragma omp parallel if (lines.count * n * f.taps() > 32768)
  {
    Scratch s(plan, n, f.taps());
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
        double* ext = s.lines.data() + r * row_len;
        int64_t src = 0;
        bool outside = false;
        for (int d = 0; d < lines.outer_ndim && !outside; ++d) {
          int64_t k = border_index(outer_index[d] + plan.rows[r][d], lines.outer_shape[d], f.mode);
          outside = k < 0;
          src += k * lines.outer_strides[0][d];
        }
        if (outside) {
          std::fill(ext, ext + row_len, cval);
          continue;
        }
        load(in.data + src, in.strides[last], n, ext + plan.left);
        extend_line(ext, n, plan.left, plan.right, f.mode, cval);
      }
      reduce_line(f, plan, n, s);
      store(s.result.data(), out.data + out_off, out.strides[last], n);
    }
  }
}

}  // namespace gpufilt
