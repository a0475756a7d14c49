// generic_filter1d on the CPU (generic.hpp): each line is read into a buffer
// of doubles, extended per the mode (cpu_lines.hpp, as every CPU line pass),
// passed to the caller's function with an output line, and stored with
// scipy's conversions. Lines are shared out among the threads.
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <vector>

#include "core/cpu_backend.hpp"
#include "core/cpu_lines.hpp"
#include "core/parallel.hpp"

namespace gpufilt {

void generic_filter1d(const ArrayDesc& in0, const ArrayDesc& out, int axis, int64_t size, int64_t origin,
                      Mode mode, double cval, LineFunction function, void* user_data) {
  if (!same_shape(in0, out)) throw std::invalid_argument("output shape does not match input shape");
  if (size < 1) throw std::invalid_argument("invalid filter size");
  if (size / 2 + origin < 0 || size / 2 + origin >= size) throw std::invalid_argument("invalid origin");
  if (in0.size() == 0) return;
  // Lines of other layouts may read what another thread has written: a copy.
  ArrayDesc in = in0;
  std::unique_ptr<TempBuffer> input_copy;
  CpuBackend backend;
  if (may_overlap(in, out) && !same_layout(in, out)) in = copy_to_temp(backend, in, input_copy);
  auto [load, _unused] = dispatch_real_dtype<cpu::LineIO>(in.dtype);
  auto [_unused2, store] = dispatch_real_dtype<cpu::LineIO>(out.dtype);
  const bool scalar = in.ndim == 0;  // a 0-d array: one line of one element
  const cpu::Lines lines(in, out, scalar ? 0 : axis);
  const int64_t n = lines.length, left = size / 2 + origin, right = size - 1 - left;
  const int64_t in_stride = scalar ? 0 : in.strides[axis], out_stride = scalar ? 0 : out.strides[axis];
  const int threads = cpu_max_threads();
  const int64_t grain = std::max<int64_t>(1, lines.count / (16 * threads));
  parallel_region(lines.count * n * size > 32768, threads, [&, load = load, store = store] {
    std::vector<double> ext(n + size - 1), res(n);
    dynamic_loop(lines.count, grain, [&](int64_t l) {
      int64_t in_off, out_off;
      lines.offsets(l, in_off, out_off);
      load(in.data + in_off, in_stride, n, ext.data() + left);
      cpu::extend_line(ext.data(), n, left, right, mode, cval);
      std::fill(res.begin(), res.end(), 0.0);
      if (!function(ext.data(), (intptr_t)(n + size - 1), res.data(), (intptr_t)n, user_data))
        throw CallbackFailed("unknown error in line processing function");
      store(res.data(), out.data + out_off, out_stride, n);
    });
  });
}

}  // namespace gpufilt
