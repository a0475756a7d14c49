// gpufilt._core: always built. Array import (describe) and the CPU kernels.
#include <pybind11/pybind11.h>

#include "bindings/common.hpp"
#include "core/cpu_backend.hpp"

namespace py = pybind11;
using namespace gpufilt;

namespace {

py::dict build_info() {
  py::dict d;
  d["version"] = GPUFILT_VERSION;
  d["cxx_compiler"] = GPUFILT_CXX_COMPILER;
#if defined(GPUFILT_OPENMP)
  d["openmp"] = std::string("OpenMP ") + GPUFILT_OPENMP_VERSION;
#else
  d["openmp"] = py::none();
#endif
  d["cpu_threads"] = cpu_max_threads();
  return d;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "gpufilt CPU kernels and array import";
  m.attr("__version__") = GPUFILT_VERSION;

  m.def("describe", [](py::handle obj) {
    return describe_array(import_array(obj, "array", Access::Read, ImportOptions{}));
  }, py::arg("array"), R"pbdoc(What the importer sees of `array` (protocol, device, pointer, shape, byte strides, dtype, read-only).)pbdoc");

  m.def("separable", [](py::handle input, py::handle output, const py::sequence& passes, double cval,
                        double cval_imag) {
    CpuBackend backend;
    separable_call(backend, input, output, passes, cval, cval_imag, ImportOptions{}, Device::CPU,
                   [](const ImportedArray&, const ImportedArray&) { return 0; });
  }, py::arg("input"), py::arg("output"), py::arg("passes"), py::arg("cval"), py::arg("cval_imag") = 0.0,
     R"pbdoc(Runs 1-D passes (axis, kind, weights, size, origin, mode) from input into output on the CPU.)pbdoc");

  m.def("build_info", &build_info, "How this module was built.");
}
