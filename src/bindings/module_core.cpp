// gpufilt._core: always built. Array import (describe) and the CPU kernels.
#include <pybind11/pybind11.h>

#include "bindings/common.hpp"
#include "bindings/ops_array.hpp"
#include "bindings/ops_nn.hpp"
#include "bindings/export.hpp"
#include "bindings/ops_matmul.hpp"
#include "core/cpu_backend.hpp"

namespace py = pybind11;
using namespace gpufilt;

namespace {

// CPU calls: no device to set, no stream (the argument is ignored).
struct CpuPolicy {
  static constexpr Device device = Device::CPU;
  explicit CpuPolicy(intptr_t) {}
  ImportOptions options() const { return {}; }
  LineBackend& backend() { return backend_; }
  intptr_t stream() const { return 0; }
  void enter(CallArrays) {}
  CpuBackend backend_;
};

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
  prepare_import();
  register_kernels<CpuPolicy>(m);
  register_array_ops<CpuPolicy>(m);
  register_nn_ops<CpuPolicy>(m);
  register_matmul<CpuPolicy>(m);
  register_export(m);
  m.def("build_info", &build_info, "How this module was built.");
}
