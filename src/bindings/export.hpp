// DLPack export: turns a (pointer, shape, strides, dtype, device) held by a
// Python object into a "dltensor_versioned" or legacy "dltensor" capsule.
// Used by gpufilt._external.ExternalArray.__dlpack__ (wrapped foreign memory).
#pragma once
#include <pybind11/pybind11.h>

namespace gpufilt {
namespace py = pybind11;

// Adds _core.dlpack_capsule(...) to `m`.
void register_export(py::module_& m);

}  // namespace gpufilt
