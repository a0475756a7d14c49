// gpufilt._cuda: built when nvcc is found. The CUDA kernels behind the same
// binding functions as _core, plus the CUDA runtime report for info().
// Host-compiled: it reaches CUDA only through src/cuda/api.hpp.
#include <pybind11/pybind11.h>

#include <optional>

#include "bindings/common.hpp"
#include "bindings/ops_array.hpp"
#include "bindings/ops_nn.hpp"
#include "bindings/ops_matmul.hpp"
#include "cuda/api.hpp"

namespace py = pybind11;
using namespace gpufilt;

namespace {

py::dict runtime_info() {
  cuda::RuntimeInfo r = cuda::runtime_info();
  py::list devices;
  for (const auto& d : r.devices) {
    py::dict dev;
    dev["index"] = d.index;
    dev["name"] = d.name;
    dev["compute_capability"] = py::make_tuple(d.major, d.minor);
    dev["total_memory"] = d.total_memory;
    dev["multiprocessors"] = d.multiprocessors;
    devices.append(dev);
  }
  py::dict info;
  info["driver_version"] = r.driver_version;
  info["runtime_version"] = r.runtime_version;
  info["unusable_reason"] = r.unusable_reason;
  info["devices"] = devices;
  return info;
}

// Decided once per process: drivers and devices do not come and go.
const std::string& unusable_reason() {
  static const std::string reason = cuda::runtime_info().unusable_reason;
  return reason;
}

py::dict build_info() {
  py::dict d;
  d["version"] = GPUFILT_VERSION;
  d["cuda_compiler"] = GPUFILT_CUDA_COMPILER;
  d["cuda_architectures"] = GPUFILT_CUDA_ARCHITECTURES;
  return d;
}

// CUDA calls: run on the input's device, on `stream`, after the producers'
// CAI streams.
struct CudaPolicy {
  static constexpr Device device = Device::CUDA;
  explicit CudaPolicy(intptr_t stream) : stream_(stream), backend_(stream) {}
  ImportOptions options() const {
    ImportOptions o;
    o.stream = stream_;
    o.pointer_device = &cuda::pointer_device;
    return o;
  }
  LineBackend& backend() { return backend_; }
  intptr_t stream() const { return stream_; }
  // The Python side allocates CUDA outputs, with the input's library.
  static py::object new_output(py::handle) { throw py::type_error("output must be an array for a CUDA call"); }
  void enter(CallArrays arrays) {
    guard_.emplace(arrays[0]->desc.device_id);
    for (const ImportedArray* a : arrays)
      if (a->producer_stream) cuda::stream_wait(a->producer_stream, stream_);
  }

 private:
  intptr_t stream_;
  cuda::CudaBackend backend_;
  std::optional<cuda::DeviceGuard> guard_;
};

}  // namespace

PYBIND11_MODULE(_cuda, m) {
  m.doc() = "gpufilt CUDA kernels";
  m.attr("__version__") = GPUFILT_VERSION;
  prepare_import();

  // C++ CudaError -> gpufilt.CudaError (defined in Python, so that no class is
  // registered twice and it exists in CPU-only builds too).
  static py::object cuda_error_type =
      py::module_::import("gpufilt._errors").attr("CudaError");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const cuda::CudaError& e) {
      py::object err = cuda_error_type(e.what(), e.name, e.code, e.file, e.line);
      PyErr_SetObject(cuda_error_type.ptr(), err.ptr());
    }
  });

  register_kernels<CudaPolicy>(m);
  register_array_ops<CudaPolicy>(m);
  register_nn_ops<CudaPolicy>(m);
  register_matmul<CudaPolicy>(m);
  m.def("take_range_error", []() -> py::object {
    const cuda::RangeError e = cuda::take_range_error();
    if (e.kind == cuda::RangeErrorKind::None) return py::none();
    return py::make_tuple(e.kind == cuda::RangeErrorKind::Index ? "index" : "label", e.value, e.bound);
  }, "The first out-of-range index a finished kernel met (gather's index or cross-entropy's label), as "
     "(kind, value, bound), and clears it; None when there is none. Never synchronises.");
  m.def("synchronize_stream", [](intptr_t stream) {
    py::gil_scoped_release nogil;
    cuda::synchronize_stream(stream);
  }, py::arg("stream"), "Waits for the work enqueued on `stream` (for explicit error checks only).");
  m.def("runtime_info", &runtime_info, "CUDA driver, runtime and devices, or why none is usable.");
  m.def("unusable_reason", []() { return unusable_reason(); },
        "Why no CUDA device is usable, or '' when one is.");
  m.def("build_info", &build_info, "How this module was built.");
}
