// gpufilt.ops.matmul's binding, written once and registered in _core (CPU:
// the process's BLAS) and _cuda (cuBLAS) with that module's Policy (see
// bindings/common.hpp). The layout plan is shared: core/blas.hpp.
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings/common.hpp"
#include "core/blas.hpp"
#include "cuda/cublas.hpp"

namespace gpufilt {

// TypeError unless a, b and out share one dtype the device's BLAS takes.
template <class Policy>
void require_matmul_dtypes(const ArrayDesc& a, const ArrayDesc& b, const ArrayDesc& out) {
  const bool cpu = Policy::device == Device::CPU;
  const char* accepted = cpu ? "float32 and float64 on the CPU" : "float16, bfloat16, float32 and float64 on CUDA";
  if (a.dtype != b.dtype)
    throw py::type_error(std::string("matmul: a and b must have one dtype, got ") + dtype_name(a.dtype) + " and " +
                         dtype_name(b.dtype) + "; matmul takes " + accepted);
  const DType t = a.dtype;
  const bool ok = t == DType::Float32 || t == DType::Float64 ||
                  (!cpu && (t == DType::Float16 || t == DType::BFloat16));
  if (!ok) throw py::type_error(std::string("matmul: dtype ") + dtype_name(t) + " is not supported; matmul takes " + accepted);
  if (out.dtype != t)
    throw py::type_error(std::string("matmul: out has dtype ") + dtype_name(out.dtype) + " but a and b are " +
                         dtype_name(t) + "; out must have the operands' dtype");
}

template <class Policy>
void register_matmul(py::module_& m) {
  m.def("matmul_shape", &matmul_shape, py::arg("a_shape"), py::arg("b_shape"), py::arg("trans_a"),
        py::arg("trans_b"), "Shape of matmul(a, b); ValueError naming a and b when they do not multiply.");

  m.def("blas_load", [](const std::vector<std::string>& candidates) {
    py::dict info;
    if constexpr (Policy::device == Device::CPU) {
      BlasLibrary blas = load_blas(candidates);
      info["library"] = blas.path;
      info["gemm"] = blas.symbol;
      info["int_bits"] = blas.int_bits;
    } else {
      info["library"] = cuda::load_cublas(candidates);
      info["gemm"] = "cublasGemmEx";
      info["int_bits"] = 32;
    }
    return info;
  }, py::arg("candidates"),
     "Finds the BLAS this module's matmul runs on (already loaded in the process, else the first of `candidates` "
     "that loads); RuntimeError saying how to install one otherwise.");

  m.def("matmul", [](py::handle a, py::handle b, py::handle out, bool trans_a, bool trans_b, intptr_t stream) {
    Policy policy(stream);
    const ImportOptions options = policy.options();
    ImportedArray x = import_array(a, "a", Access::Read, options);
    ImportedArray y = import_array(b, "b", Access::Read, options);
    ImportedArray o = import_array(out, "out", Access::Write, options);
    static const char* const names[] = {"a", "b", "out"};
    require_device({&x, &y, &o}, names, Policy::device);
    require_matmul_dtypes<Policy>(x.desc, y.desc, o.desc);
    if (may_overlap(x.desc, o.desc) || may_overlap(y.desc, o.desc))
      throw py::value_error("matmul: out shares memory with a or b; BLAS reads a and b while it writes out, "
                            "so pass a separate out");
    GemmPlan plan = plan_matmul(x.desc, y.desc, o.desc, trans_a, trans_b);
    policy.enter({&x, &y, &o});
    py::gil_scoped_release nogil;
    if constexpr (Policy::device == Device::CPU)
      cpu_gemm(plan);
    else
      cuda::cublas_gemm(plan, policy.stream());
  }, py::arg("a"), py::arg("b"), py::arg("out"), py::arg("trans_a"), py::arg("trans_b"), py::arg("stream"),
     "out = op(a) @ op(b) on BLAS (op transposes the last two axes when trans_*); call blas_load first.");
}

}  // namespace gpufilt
