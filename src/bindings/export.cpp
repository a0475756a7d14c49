// DLPack export of foreign memory. The managed tensor's manager_ctx holds a
// strong reference to the exporting Python object, so the memory (and the
// owner the object keeps) outlives every consumer; the deleter drops that
// reference with the GIL held, whichever thread the consumer calls it from.
#include "bindings/export.hpp"

#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "bindings/dlpack.hpp"

namespace gpufilt {
namespace {

constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kLegacyName = "dltensor";

// Everything one exported tensor points into, freed by its deleter.
template <class Managed>
struct Export {
  Managed managed{};
  std::vector<int64_t> shape, strides;
  PyObject* exporter = nullptr;  // strong reference
};

template <class Managed>
void delete_export(Managed* m) {
  if (!m) return;
  auto* e = static_cast<Export<Managed>*>(m->manager_ctx);
  PyGILState_STATE gil = PyGILState_Ensure();
  Py_XDECREF(e->exporter);
  delete e;
  PyGILState_Release(gil);
}

// Capsule destructor: deletes the tensor unless a consumer took it (renamed
// the capsule "used_*"). Keeps any pending Python error intact.
template <class Managed>
void capsule_destructor(PyObject* capsule) {
  const char* name = std::is_same_v<Managed, dlpack::ManagedTensorVersioned> ? kVersionedName : kLegacyName;
  if (!PyCapsule_IsValid(capsule, name)) return;  // consumed
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  auto* m = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (m && m->deleter) m->deleter(m);
  PyErr_Restore(type, value, trace);
}

template <class Managed>
py::capsule make_capsule(py::handle exporter, uintptr_t ptr, const std::vector<int64_t>& shape,
                         const std::vector<int64_t>& strides, int code, int bits, int device_type,
                         int device_id, bool readonly, int minor_version) {
  auto* e = new Export<Managed>();
  e->shape = shape;
  e->strides = strides;
  dlpack::Tensor& t = e->managed.dl_tensor;
  t.data = reinterpret_cast<void*>(ptr);
  t.device = {device_type, device_id};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = {static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
  t.shape = e->shape.empty() ? nullptr : e->shape.data();
  t.strides = e->strides.empty() ? nullptr : e->strides.data();
  t.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = &delete_export<Managed>;
  if constexpr (std::is_same_v<Managed, dlpack::ManagedTensorVersioned>) {
    e->managed.version = {dlpack::kMajorVersion, static_cast<uint32_t>(minor_version)};
    e->managed.flags = readonly ? dlpack::kFlagReadOnly : 0;
  }
  e->exporter = exporter.ptr();
  Py_INCREF(e->exporter);
  const char* name = std::is_same_v<Managed, dlpack::ManagedTensorVersioned> ? kVersionedName : kLegacyName;
  PyObject* capsule = PyCapsule_New(&e->managed, name, &capsule_destructor<Managed>);
  if (!capsule) {
    delete_export(&e->managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

}  // namespace

void register_export(py::module_& m) {
  m.def("dlpack_capsule",
        [](py::handle exporter, uintptr_t ptr, const std::vector<int64_t>& shape,
           const std::vector<int64_t>& strides, int code, int bits, int device_type, int device_id,
           bool readonly, int minor_version) -> py::capsule {
          if (!strides.empty() && strides.size() != shape.size())
            throw py::value_error("dlpack_capsule: strides must be empty or have one entry per dimension");
          if (minor_version < 0)  // legacy capsule: no version, no read-only flag
            return make_capsule<dlpack::ManagedTensor>(exporter, ptr, shape, strides, code, bits, device_type,
                                                       device_id, readonly, minor_version);
          return make_capsule<dlpack::ManagedTensorVersioned>(exporter, ptr, shape, strides, code, bits,
                                                              device_type, device_id, readonly, minor_version);
        },
        py::arg("exporter"), py::arg("ptr"), py::arg("shape"), py::arg("strides"), py::arg("code"),
        py::arg("bits"), py::arg("device_type"), py::arg("device_id"), py::arg("readonly"),
        py::arg("minor_version"),
        "A DLPack capsule over foreign memory that keeps `exporter` alive until the consumer deletes it. "
        "strides in elements (empty: C order); minor_version < 0 makes a legacy 'dltensor' capsule, "
        "else a 'dltensor_versioned' one of version 1.minor_version.");
}

}  // namespace gpufilt
