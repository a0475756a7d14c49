// gpufilt._core: always built. Array import (describe) and the CPU kernels.
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <tuple>

#include "bindings/common.hpp"
#include "bindings/ops_array.hpp"
#include "bindings/ops_nn.hpp"
#include "bindings/export.hpp"
#include "bindings/ops_matmul.hpp"
#include "core/cpu_backend.hpp"
#include "core/cpu_isa.hpp"
#include "core/host_pool.hpp"

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

// A block of HostPool memory as a Python buffer: numpy arrays made on it keep
// it alive, and it goes back to the pool when the last of them is dropped.
struct PooledBlock {
  void* data;
  size_t bytes;
  explicit PooledBlock(size_t n) { std::tie(data, bytes) = HostPool::instance().take(n); }
  PooledBlock(const PooledBlock&) = delete;
  PooledBlock& operator=(const PooledBlock&) = delete;
  ~PooledBlock() { HostPool::instance().give_back(data, bytes); }
};

void register_host_pool(py::module_& m) {
  py::class_<PooledBlock>(m, "_PooledBlock", py::buffer_protocol())
      .def_buffer([](PooledBlock& b) { return py::buffer_info(static_cast<unsigned char*>(b.data), (py::ssize_t)b.bytes); });
  m.def("_pooled_block", [](size_t bytes) { return std::make_unique<PooledBlock>(bytes); }, py::arg("bytes"),
        "A writable buffer of at least `bytes` from the CPU result pool (core/host_pool.hpp).");
  m.attr("POOL_MIN_BYTES") = HostPool::kMinBytes;
  m.def("free_cpu_pool", [] { HostPool::instance().free_all(); },
        "Returns the CPU result pool's free blocks to the system.");
  m.def("cpu_pool_info", [] {
    py::dict d;
    d["free_bytes"] = HostPool::instance().free_bytes();
    d["limit_bytes"] = HostPool::instance().limit();
    return d;
  }, "Bytes the CPU result pool holds free, and the most it keeps (GPUFILT_CPU_POOL_BYTES).");
}

// The vector instructions of the CPU kernels (core/cpu_isa.hpp).
py::dict cpu_isa_info() {
  py::dict d;
  d["isa"] = cpu_isa_name(cpu_isa());
  d["isa_supported"] = cpu_isa_name(cpu_isa_supported());
  return d;
}

// Caps the instructions the CPU kernels use (tests run each copy); returns
// the cap's name before.
std::string set_cpu_isa(const std::string& name) {
  CpuIsa isa;
  if (!cpu_isa_from_name(name.c_str(), isa))
    throw py::value_error("isa must be 'baseline', 'avx2' or 'avx512', got '" + name + "'");
  const std::string before = cpu_isa_name(cpu_isa_cap());
  set_cpu_isa_cap(isa);
  return before;
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
  register_host_pool(m);
  m.def("cpu_isa_info", &cpu_isa_info, "The vector instructions the CPU kernels use and the CPU supports.");
  m.def("_set_cpu_isa", &set_cpu_isa, py::arg("isa"),
        "Caps the vector instructions of the CPU kernels ('baseline', 'avx2', 'avx512'); returns the cap before.");
}
