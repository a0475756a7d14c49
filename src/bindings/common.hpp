// Binding code shared by gpufilt._core and gpufilt._cuda: the kernel entry
// points (separable, footprint, elementwise), defined once and registered in
// each module with that module's device Policy. No pybind11 class is
// registered here, so nothing is registered twice.
//
// A Policy provides:
//   static constexpr Device device;
//   explicit Policy(intptr_t stream);
//   ImportOptions options() const;
//   LineBackend& backend();
//   intptr_t stream() const;                              // 0 on the CPU
//   void enter(CallArrays);  // GIL held: device guard, stream waits
//   static py::object new_output(py::handle input);  // output=None's array
#pragma once
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings/interop.hpp"
#include "core/elementwise.hpp"
#include "core/footprint.hpp"
#include "core/fourier.hpp"
#include "core/separable.hpp"

namespace gpufilt {

// Passes come from Python as (axis, kind, weights, size, origin, mode) tuples,
// kind "correlate", "uniform", "minimum" or "maximum", mode a scipy.ndimage
// filter mode code.
std::vector<LinePass> parse_passes(const py::sequence& passes);

// A footprint comes as (reduce, ndim, ntaps, offsets, weights, rank, mode),
// reduce "sum", "minimum", "maximum" or "rank", offsets flat (ntaps x ndim).
Footprint parse_footprint(const py::tuple& spec);

// The values of an array or sequence of numbers (offsets, weights) as T:
// numpy's int64 or float64 arrays in C order are read as they are, without
// a Python object per value; arrays of other dtypes are cast where numpy
// casts them safely, sequences as np.asarray converts them (these are the
// planners' values, not the caller's). TypeError naming `what` otherwise.
template <class T>
std::vector<T> parse_values(py::handle values, const char* what);
extern template std::vector<int64_t> parse_values<int64_t>(py::handle, const char*);
extern template std::vector<double> parse_values<double>(py::handle, const char*);

Elementwise parse_elementwise(const std::string& op);

// All arrays must be on `device`, and on one device id; ValueError otherwise.
void require_device(CallArrays arrays, const char* const* names,
                    Device device);

// A filter's input and output, imported, checked to share the policy's
// device, and made ready (device guard, producer streams). GIL held.
struct InputOutput {
  ImportedArray in, out;
  template <class Policy>
  InputOutput(py::handle input, py::handle output, Policy& policy)
      : in(import_array(input, "input", Access::Read, policy.options())),
        out(import_array(output, "output", Access::Write, policy.options())) {
    static const char* const names[] = {"input", "output"};
    require_device({&in, &out}, names, Policy::device);
    policy.enter({&in, &out});
  }
};

// py::gil_scoped_release for a kernel's run over `a`, `taps` reads an
// element, except for small CPU work (microseconds): releasing the GIL and
// taking it back costs about a tenth of a call on a tiny array, and no other
// thread gains much from so short a wait.
template <class Policy>
struct ReleaseGilFor {
  static constexpr int64_t kMinCpuReads = 65536;
  ReleaseGilFor(const ArrayDesc& a, int64_t taps) {
    const int64_t t = std::max<int64_t>(taps, 1);  // size * t may overflow: divide instead (UBSan)
    if (Policy::device != Device::CPU || a.size() >= (kMinCpuReads + t - 1) / t) nogil.emplace();
  }
  std::optional<py::gil_scoped_release> nogil;
};

// The Fourier filters' factor by its binding name: "product", "phase" or
// "ellipsoid" (core/fourier.hpp); ValueError otherwise.
inline FourierFactor fourier_factor(const std::string& name) {
  if (name == "product") return FourierFactor::Product;
  if (name == "phase") return FourierFactor::Phase;
  if (name == "ellipsoid") return FourierFactor::Ellipsoid;
  throw pybind11::value_error("factor must be 'product', 'phase' or 'ellipsoid'");
}

// The taps of all passes, saturating at INT64_MAX (windows may be huge).
inline int64_t total_taps(const std::vector<LinePass>& passes) {
  int64_t taps = 0;
  for (const LinePass& p : passes)
    if (__builtin_add_overflow(taps, p.taps(), &taps)) return INT64_MAX;
  return taps;
}

template <class Policy>
void register_kernels(py::module_& m) {
  m.def("separable", [](py::handle input, py::object output, const py::sequence& passes, double cval,
                        double cval_imag, intptr_t stream) {
    std::vector<LinePass> plan = parse_passes(passes);
    Policy policy(stream);
    if (output.is_none()) output = Policy::new_output(input);
    {
      InputOutput io(input, output, policy);
      ReleaseGilFor<Policy> nogil(io.in.desc, total_taps(plan));
      run_separable(policy.backend(), io.in.desc, io.out.desc, std::move(plan), cval, cval_imag);
    }
    return output;
  }, py::arg("input"), py::arg("output"), py::arg("passes"), py::arg("cval"), py::arg("cval_imag"),
     py::arg("stream"), "Runs 1-D passes (axis, kind, weights, size, origin, mode) from input into output "
                        "(None: a new array like the input, on the CPU); returns output.");

  m.def("laplace", [](py::handle input, py::handle output, const py::sequence& mode_codes, double cval,
                      intptr_t stream) {
    std::vector<Mode> modes;
    for (py::handle item : mode_codes) {
      const int code = item.cast<int>();
      if (code < 0 || code > (int)Mode::Constant) throw py::value_error("invalid mode code " + std::to_string(code));
      modes.push_back(static_cast<Mode>(code));
    }
    Policy policy(stream);
    InputOutput io(input, output, policy);
    ReleaseGilFor<Policy> nogil(io.in.desc, 2 * (int64_t)modes.size() + 1);
    return policy.backend().fused_laplace(io.in.desc, io.out.desc, modes, cval);
  }, py::arg("input"), py::arg("output"), py::arg("modes"), py::arg("cval"), py::arg("stream"),
     "scipy's laplace (real input, output of its dtype, every axis) in one pass when the backend has a "
     "kernel for the case; False (nothing written) otherwise.");

  m.def("derivative_sum", [](py::handle input, py::handle output, const py::sequence& chains, double cval,
                             bool square, intptr_t stream) {
    std::vector<std::vector<LinePass>> parsed;
    for (py::handle chain : chains) parsed.push_back(parse_passes(chain.cast<py::sequence>()));
    Policy policy(stream);
    InputOutput io(input, output, policy);
    if (!same_shape(io.in.desc, io.out.desc)) throw py::value_error("output shape does not match input shape");
    ReleaseGilFor<Policy> nogil(io.in.desc, 3 * (int64_t)parsed.size());
    return policy.backend().fused_derivative_sum(io.in.desc, io.out.desc, std::move(parsed), cval, square);
  }, py::arg("input"), py::arg("output"), py::arg("chains"), py::arg("cval"), py::arg("square"),
     py::arg("stream"),
     "gaussian_laplace (square=False) or gaussian_gradient_magnitude from their chains of passes, one per axis, "
     "in one go when the backend has kernels for the case; False (nothing written) otherwise.");

  m.def("footprint", [](py::handle input, py::object output, const py::tuple& spec, double cval,
                        double cval_imag, intptr_t stream) {
    Footprint filter = parse_footprint(spec);
    Policy policy(stream);
    if (output.is_none()) output = Policy::new_output(input);
    {
      InputOutput io(input, output, policy);
      ReleaseGilFor<Policy> nogil(io.in.desc, filter.taps());
      run_footprint(policy.backend(), io.in.desc, io.out.desc, filter, cval, cval_imag);
    }
    return output;
  }, py::arg("input"), py::arg("output"), py::arg("spec"), py::arg("cval"), py::arg("cval_imag"),
     py::arg("stream"), "Runs a footprint filter (reduce, ndim, ntaps, offsets, weights, rank, mode) from input "
                        "into output (None: a new array like the input, on the CPU); returns output.");

  m.def("elementwise", [](const std::string& op_name, py::handle a, py::handle b, py::handle output,
                          intptr_t stream) {
    Elementwise op = parse_elementwise(op_name);
    Policy policy(stream);
    ImportedArray x = import_array(a, "a", Access::Read, policy.options());
    ImportedArray y = import_array(b, "b", Access::Read, policy.options());
    ImportedArray out = import_array(output, "out", Access::Write, policy.options());
    static const char* const names[] = {"a", "b", "out"};
    require_device({&x, &y, &out}, names, Policy::device);
    policy.enter({&x, &y, &out});
    ReleaseGilFor<Policy> nogil(out.desc, 1);
    run_elementwise(policy.backend(), op, x.desc, y.desc, out.desc);
  }, py::arg("op"), py::arg("a"), py::arg("b"), py::arg("out"), py::arg("stream"),
     "out = op(a, b) for op 'add', 'subtract', 'square' (a*a) or 'sqrt'; one dtype and shape.");

  m.def("describe", [](py::handle obj, bool writable, const char* name) {
    return describe_array(import_array(obj, name, writable ? Access::Write : Access::Read, Policy(0).options()));
  }, py::arg("array"), py::arg("writable") = false, py::arg("name") = "array",
     "What the importer sees of `array`: protocol, device, pointer, shape, byte strides, dtype, read-only, "
     "producer stream. writable: also refuse, by `name`, an array that cannot be written or whose elements "
     "overlap each other (the rule for every output).");
}

}  // namespace gpufilt
