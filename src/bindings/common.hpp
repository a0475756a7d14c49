// Binding code shared by gpufilt._core and gpufilt._cuda: turning the Python
// description of a filter into core structures and running it on a backend.
// Each module compiles its own copy; no pybind11 class is registered here.
#pragma once
#include <pybind11/pybind11.h>

#include <vector>

#include "bindings/interop.hpp"
#include "core/separable.hpp"

namespace gpufilt {

// Passes come from Python as (axis, kind, weights, size, origin, mode) tuples,
// kind "correlate" or "uniform", mode a scipy.ndimage filter mode code.
std::vector<LinePass> parse_passes(const py::sequence& passes);

// Both arrays must be on `device` (and one device id); raises ValueError
// naming the argument otherwise.
void require_device(const ImportedArray& input, const ImportedArray& output, Device device);

// Imports input and output, then runs the chain with the GIL released.
// `prepare` runs before the work with the GIL held (device guard, stream waits).
template <class Prepare>
void separable_call(LineBackend& backend, py::handle input, py::handle output,
                    const py::sequence& passes, double cval, double cval_imag,
                    const ImportOptions& options, Device device, Prepare&& prepare) {
  std::vector<LinePass> plan = parse_passes(passes);
  ImportedArray in = import_array(input, "input", Access::Read, options);
  ImportedArray out = import_array(output, "output", Access::Write, options);
  require_device(in, out, device);
  auto scope = prepare(in, out);
  py::gil_scoped_release nogil;
  run_separable(backend, in.desc, out.desc, plan, cval, cval_imag);
}

}  // namespace gpufilt
