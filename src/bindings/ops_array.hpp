// Bindings of the gpufilt.ops array operations (fill, broadcast_to, sum,
// add/multiply, gather), written once and registered in gpufilt._core (CPU)
// and gpufilt._cuda with that module's Policy (see bindings/common.hpp). The
// CPU and CUDA kernels are plain functions (core/ops_array.hpp); the branch
// of the other device is discarded at compile time, so _core links no CUDA.
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <vector>

#include "bindings/common.hpp"
#include "core/elementwise.hpp"
#include "core/ops_array.hpp"

namespace gpufilt {

// A scalar handed over as the bytes of one value and its dtype's name (numpy
// has done the conversion and its range checks), viewed as a 0-d host array
// over `storage` (16 bytes: complex128 fits), converted to `dtype` when it
// differs (bfloat16 comes as float32 bytes when numpy has no bfloat16).
inline ArrayDesc host_scalar(const py::bytes& bytes, const std::string& from, DType dtype, uint64_t storage[2]) {
  const std::string raw = bytes;
  int index = 0;
  while (index < kNumDTypes && from != dtype_name(static_cast<DType>(index))) ++index;
  const DType from_dtype = static_cast<DType>(index < kNumDTypes ? index : 0);
  const bool convertible = from_dtype == dtype || (!is_complex(from_dtype) && !is_complex(dtype));
  if (index == kNumDTypes || !convertible || raw.size() != (size_t)itemsize(from_dtype))
    throw py::value_error("bad scalar: " + std::to_string(raw.size()) + " bytes of dtype '" + from + "' for " +
                          dtype_name(dtype));
  ArrayDesc d;
  d.ndim = 0;
  d.device = Device::CPU;
  d.dtype = dtype;
  d.data = reinterpret_cast<char*>(storage);
  storage[0] = storage[1] = 0;
  std::memcpy(storage, raw.data(), raw.size());
  if (from_dtype != dtype) {
    const double v = load_any_as_double(from_dtype, d.data);
    storage[0] = 0;
    dispatch_real_or_bfloat16<StoreFromDouble>(dtype, d.data, v);
  }
  return d;
}

// `out` may be `in` itself (same elements in the same order) but must not
// otherwise share memory with it: ValueError.
inline void require_no_partial_overlap(const ArrayDesc& in, const char* in_name, const ArrayDesc& out) {
  if (may_overlap(in, out) && !same_layout(in, out))
    throw py::value_error(std::string("out overlaps ") + in_name +
                          " other than as the very same array; pass a separate out");
}

template <class Policy>
void register_array_ops(py::module_& m) {
  m.def("fill", [](py::handle x, const py::bytes& value, const std::string& value_dtype, intptr_t stream) {
    Policy policy(stream);
    ImportedArray a = import_array(x, "x", Access::Write, policy.options());
    static const char* const names[] = {"x"};
    require_device({&a}, names, Policy::device);
    policy.enter({&a});
    uint64_t storage[2];
    const ArrayDesc v = broadcast_source(host_scalar(value, value_dtype, a.desc.dtype, storage), a.desc);
    py::gil_scoped_release nogil;
    if constexpr (Policy::device == Device::CPU) copy_broadcast(v, a.desc);
    else cuda::copy_broadcast(v, a.desc, policy.stream());
  }, py::arg("x"), py::arg("value"), py::arg("value_dtype"), py::arg("stream"),
     "Sets every element of x to the scalar given as bytes of value_dtype.");

  m.def("broadcast_to", [](py::handle x, py::handle out, intptr_t stream) {
    Policy policy(stream);
    ImportedArray a = import_array(x, "x", Access::Read, policy.options());
    ImportedArray o = import_array(out, "out", Access::Write, policy.options());
    static const char* const names[] = {"x", "out"};
    require_device({&a, &o}, names, Policy::device);
    const ArrayDesc src = broadcast_source(a.desc, o.desc);
    require_no_partial_overlap(src, "x", o.desc);
    policy.enter({&a, &o});
    py::gil_scoped_release nogil;
    if constexpr (Policy::device == Device::CPU) copy_broadcast(src, o.desc);
    else cuda::copy_broadcast(src, o.desc, policy.stream());
  }, py::arg("x"), py::arg("out"), py::arg("stream"), "out[...] = x broadcast to out's shape (same dtype).");

  m.def("sum", [](py::handle x, const std::vector<int>& axes, py::handle out, intptr_t stream) {
    Policy policy(stream);
    ImportedArray a = import_array(x, "x", Access::Read, policy.options());
    ImportedArray o = import_array(out, "out", Access::Write, policy.options());
    static const char* const names[] = {"x", "out"};
    require_device({&a, &o}, names, Policy::device);
    if (may_overlap(a.desc, o.desc)) throw py::value_error("out overlaps x; pass a separate out");
    policy.enter({&a, &o});
    py::gil_scoped_release nogil;
    if constexpr (Policy::device == Device::CPU) sum(a.desc, axes, o.desc);
    else cuda::sum(a.desc, axes, o.desc, policy.stream());
  }, py::arg("x"), py::arg("axes"), py::arg("out"), py::arg("stream"),
     "out = x summed over axes (out with or without the reduced axes as length 1).");

  m.def("binary", [](const std::string& op_name, py::handle a, py::handle b, py::handle out, intptr_t stream) {
    const Elementwise op = parse_elementwise(op_name);
    Policy policy(stream);
    ImportedArray x = import_array(a, "a", Access::Read, policy.options());
    ImportedArray y = import_array(b, "b", Access::Read, policy.options());
    ImportedArray o = import_array(out, "out", Access::Write, policy.options());
    static const char* const names[] = {"a", "b", "out"};
    require_device({&x, &y, &o}, names, Policy::device);
    require_no_partial_overlap(broadcast_view(x.desc, o.desc, "a"), "a", o.desc);
    require_no_partial_overlap(broadcast_view(y.desc, o.desc, "b"), "b", o.desc);
    policy.enter({&x, &y, &o});
    py::gil_scoped_release nogil;
    run_elementwise(policy.backend(), op, x.desc, y.desc, o.desc);
  }, py::arg("op"), py::arg("a"), py::arg("b"), py::arg("out"), py::arg("stream"),
     "out = op(a, b) with broadcasting, op 'add' or 'multiply'; a and b are read as out's dtype.");

  m.def("binary_scalar", [](const std::string& op_name, py::handle a, const py::bytes& value,
                            const std::string& value_dtype, py::handle out, intptr_t stream) {
    const Elementwise op = parse_elementwise(op_name);
    Policy policy(stream);
    ImportedArray x = import_array(a, "a", Access::Read, policy.options());
    ImportedArray o = import_array(out, "out", Access::Write, policy.options());
    static const char* const names[] = {"a", "out"};
    require_device({&x, &o}, names, Policy::device);
    require_no_partial_overlap(broadcast_view(x.desc, o.desc, "a"), "a", o.desc);
    uint64_t storage[2];
    const ArrayDesc v = host_scalar(value, value_dtype, o.desc.dtype, storage);
    policy.enter({&x, &o});
    py::gil_scoped_release nogil;
    run_elementwise(policy.backend(), op, x.desc, v, o.desc);
  }, py::arg("op"), py::arg("a"), py::arg("value"), py::arg("value_dtype"), py::arg("out"), py::arg("stream"),
     "out = op(a, value) for a scalar given as bytes of value_dtype (converted to out's dtype).");

  m.def("gather", [](py::handle source, py::handle index, int axis, py::handle out, intptr_t stream) {
    Policy policy(stream);
    ImportedArray s = import_array(source, "source", Access::Read, policy.options());
    ImportedArray i = import_array(index, "index", Access::Read, policy.options());
    ImportedArray o = import_array(out, "out", Access::Write, policy.options());
    static const char* const names[] = {"source", "index", "out"};
    require_device({&s, &i, &o}, names, Policy::device);
    if (may_overlap(s.desc, o.desc) || may_overlap(i.desc, o.desc))
      throw py::value_error("out overlaps source or index; pass a separate out");
    policy.enter({&s, &i, &o});
    py::gil_scoped_release nogil;
    if constexpr (Policy::device == Device::CPU) gather(s.desc, i.desc, axis, o.desc);
    else cuda::gather(s.desc, i.desc, axis, o.desc, policy.stream());
  }, py::arg("source"), py::arg("index"), py::arg("axis"), py::arg("out"), py::arg("stream"),
     "out = numpy.take(source, index, axis); out-of-range indices raise IndexError (on CUDA: see "
     "take_range_error).");
}

}  // namespace gpufilt
