#include "core/footprint.hpp"

#include <stdexcept>
#include <string>

#include "core/separable.hpp"

namespace gpufilt {
namespace {

void check_filter(const ArrayDesc& in, const ArrayDesc& out, const Footprint& f) {
  if (!same_shape(in, out)) throw std::invalid_argument("output shape does not match input shape");
  if (f.ndim != in.ndim)
    throw std::invalid_argument("footprint has " + std::to_string(f.ndim) + " dimensions but the input has " +
                                std::to_string(in.ndim));
  if ((int64_t)f.offsets.size() != f.taps() * f.ndim)
    throw std::invalid_argument("footprint offsets do not match its taps");
  if (f.reduce == Reduce::Sum && (int64_t)f.weights.size() != f.taps())
    throw std::invalid_argument("footprint weights do not match its taps");
  if (f.reduce != Reduce::Sum && f.reduce != Reduce::Call && f.taps() == 0)
    throw std::invalid_argument("an all-zero footprint is not supported");
  if (f.reduce == Reduce::Rank && (f.rank < 0 || f.rank >= f.taps()))
    throw std::invalid_argument("rank " + std::to_string(f.rank) + " is not within the footprint's " +
                                std::to_string(f.taps()) + " elements");
  if (is_complex(in.dtype) != is_complex(out.dtype))
    throw std::invalid_argument(std::string("output dtype ") + dtype_name(out.dtype) +
                                " cannot hold the result for input dtype " + dtype_name(in.dtype) +
                                ": complex input needs a complex output and real input a real one");
  if (f.reduce == Reduce::Call && (!f.function || in.device != Device::CPU))
    throw std::invalid_argument("a footprint's function runs on the CPU only");
  if (is_complex(in.dtype) && f.reduce != Reduce::Sum)
    throw std::invalid_argument("minimum, maximum and rank filters do not accept complex data");
}

}  // namespace

void run_footprint(LineBackend& backend, ArrayDesc in, const ArrayDesc& out, const Footprint& filter,
                   double cval, double cval_imag) {
  check_filter(in, out, filter);
  if (in.size() == 0) return;
  // Every output element reads many input elements: any overlap needs a copy.
  std::unique_ptr<TempBuffer> input_copy;
  if (may_overlap(in, out)) in = copy_to_temp(backend, in, input_copy);
  if (!is_complex(in.dtype)) {
    backend.footprint_pass(in, out, filter, cval);
    return;
  }
  backend.footprint_pass(complex_component(in, 0), complex_component(out, 0), filter, cval);
  backend.footprint_pass(complex_component(in, 1), complex_component(out, 1), filter, cval_imag);
}

}  // namespace gpufilt
