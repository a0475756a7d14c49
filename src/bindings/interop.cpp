// Import of array-likes: DLPack first, then __cuda_array_interface__, then
// the buffer protocol. Every failure is a Python exception naming the
// argument; nothing here copies data.
#include "bindings/interop.hpp"

#include <cstring>
#include <limits>
#include <string>

#include "bindings/dlpack.hpp"
#include <pybind11/numpy.h>

namespace gpufilt {
namespace {

constexpr const char* kAccepted =
    "bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16, float32, float64, "
    "complex64, complex128 (native byte order) and bfloat16 (through DLPack)";

std::string arg(const char* name) { return std::string(name); }

// The dtype the object says it has, for error messages ("" if none).
std::string claimed_dtype(py::handle obj) {
  try {
    if (py::hasattr(obj, "dtype")) return " " + py::str(obj.attr("dtype")).cast<std::string>();
  } catch (py::error_already_set&) {
  }
  return "";
}

[[noreturn]] void unsupported_dtype(const char* name, const std::string& what) {
  throw py::type_error(arg(name) + " has unsupported dtype " + what + "; gpufilt accepts " + kAccepted);
}

DType dtype_from_kind(char kind, int64_t bytes, const char* name, const std::string& what) {
  switch (kind) {
    case 'b':
      if (bytes == 1) return DType::Bool;
      break;
    case 'i':
      if (bytes == 1) return DType::Int8;
      if (bytes == 2) return DType::Int16;
      if (bytes == 4) return DType::Int32;
      if (bytes == 8) return DType::Int64;
      break;
    case 'u':
      if (bytes == 1) return DType::UInt8;
      if (bytes == 2) return DType::UInt16;
      if (bytes == 4) return DType::UInt32;
      if (bytes == 8) return DType::UInt64;
      break;
    case 'f':
      if (bytes == 2) return DType::Float16;
      if (bytes == 4) return DType::Float32;
      if (bytes == 8) return DType::Float64;
      break;
    case 'c':
      if (bytes == 8) return DType::Complex64;
      if (bytes == 16) return DType::Complex128;
      break;
  }
  unsupported_dtype(name, what);
}

// Shape and byte strides into `d`, with the checks every protocol shares.
void set_geometry(ArrayDesc& d, int64_t ndim, const int64_t* shape, const int64_t* strides,
                  const char* name) {
  if (ndim < 0 || ndim > kMaxDims)
    throw py::value_error(arg(name) + " has " + std::to_string(ndim) + " dimensions; gpufilt accepts 0 to " +
                          std::to_string(kMaxDims));
  d.ndim = (int)ndim;
  const int64_t item = itemsize(d.dtype);
  int64_t elements = 1, contiguous = item;
  for (int64_t i = ndim - 1; i >= 0; --i) {
    if (shape[i] < 0) throw py::value_error(arg(name) + " has a negative dimension " + std::to_string(shape[i]));
    d.shape[i] = shape[i];
    d.strides[i] = strides ? strides[i] : contiguous;
    if (d.strides[i] % item != 0)
      throw py::value_error(arg(name) + " has stride " + std::to_string(d.strides[i]) +
                            " bytes, not a multiple of its item size " + std::to_string(item));
    if (shape[i] > 0 && contiguous > std::numeric_limits<int64_t>::max() / shape[i])
      throw py::value_error(arg(name) + " has a shape whose size overflows 64 bits");
    contiguous *= shape[i] > 0 ? shape[i] : 1;
  }
  for (int64_t i = 0; i < ndim; ++i) {
    if (shape[i] > 0 && elements > std::numeric_limits<int64_t>::max() / shape[i])
      throw py::value_error(arg(name) + " has a shape whose size overflows 64 bits");
    elements *= shape[i];
  }
}

[[noreturn]] void read_only(const char* name) {
  throw py::value_error(arg(name) + " is read-only; pass a writable array (jax arrays are immutable)");
}

// ---------------------------------------------------------------- DLPack ----

DType dtype_from_dlpack(const dlpack::DataType& t, const char* name) {
  std::string what = "(DLPack code " + std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits, " +
                     std::to_string(t.lanes) + " lanes)";
  if (t.lanes != 1) unsupported_dtype(name, what);
  const int64_t bytes = t.bits / 8;
  if (t.bits % 8) unsupported_dtype(name, what);
  switch (t.code) {
    case dlpack::kInt: return dtype_from_kind('i', bytes, name, what);
    case dlpack::kUInt: return dtype_from_kind('u', bytes, name, what);
    case dlpack::kFloat: return dtype_from_kind('f', bytes, name, what);
    case dlpack::kComplex: return dtype_from_kind('c', bytes, name, what);
    case dlpack::kBool: return dtype_from_kind('b', bytes, name, what);
    case dlpack::kBfloat:
      if (t.bits == 16) return DType::BFloat16;
      unsupported_dtype(name, what);
    default: unsupported_dtype(name, what);
  }
}

void fill_from_dltensor(ImportedArray& a, const dlpack::Tensor& t, const char* name) {
  switch (t.device.device_type) {
    case dlpack::kCPU:
    case dlpack::kCUDAHost:  // pinned host memory: the CPU reads it directly
      a.desc.device = Device::CPU;
      a.desc.device_id = 0;
      break;
    case dlpack::kCUDA:
    case dlpack::kCUDAManaged:
      a.desc.device = Device::CUDA;
      a.desc.device_id = t.device.device_id;
      break;
    default:
      throw py::type_error(arg(name) + " lives on DLPack device type " + std::to_string(t.device.device_type) +
                           "; gpufilt accepts CPU (1), CUDA (2), CUDA host (3) and CUDA managed (13) memory");
  }
  a.desc.dtype = dtype_from_dlpack(t.dtype, name);
  int64_t byte_strides[kMaxDims];
  if (t.strides && t.ndim <= kMaxDims)
    for (int i = 0; i < t.ndim; ++i) byte_strides[i] = t.strides[i] * itemsize(a.desc.dtype);
  set_geometry(a.desc, t.ndim, t.shape, t.strides ? byte_strides : nullptr, name);
  a.desc.data = static_cast<char*>(t.data) + t.byte_offset;
}

// Takes ownership of a "dltensor" or "dltensor_versioned" capsule: renames it
// "used_*" (so its destructor leaves the tensor alone) and calls the deleter
// when `a` is released.
void consume_capsule(ImportedArray& a, py::handle capsule, const char* name) {
  const char* cname = PyCapsule_GetName(capsule.ptr());
  std::string cap_name = cname ? cname : "";
  if (cap_name == "dltensor_versioned") {
    auto* mt = static_cast<dlpack::ManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), cname));
    if (!mt) throw py::error_already_set();
    PyCapsule_SetName(capsule.ptr(), "used_dltensor_versioned");
    a.release = std::shared_ptr<void>(mt, [](void* p) {
      auto* m = static_cast<dlpack::ManagedTensorVersioned*>(p);
      if (m->deleter) m->deleter(m);
    });
    if (mt->version.major != dlpack::kMajorVersion)
      throw py::type_error(arg(name) + " is a DLPack " + std::to_string(mt->version.major) + "." +
                           std::to_string(mt->version.minor) + " tensor; gpufilt reads major version 1");
    a.readonly = (mt->flags & dlpack::kFlagReadOnly) != 0;
    fill_from_dltensor(a, mt->dl_tensor, name);
  } else if (cap_name == "dltensor") {
    auto* mt = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), cname));
    if (!mt) throw py::error_already_set();
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");
    a.release = std::shared_ptr<void>(mt, [](void* p) {
      auto* m = static_cast<dlpack::ManagedTensor*>(p);
      if (m->deleter) m->deleter(m);
    });
    fill_from_dltensor(a, mt->dl_tensor, name);
  } else if (cap_name.rfind("used_", 0) == 0) {
    throw py::value_error(arg(name) + " is a DLPack capsule that was already consumed ('" + cap_name +
                          "'); a capsule can be imported only once");
  } else {
    throw py::type_error(arg(name) + " is a capsule named '" + cap_name +
                         "'; gpufilt accepts 'dltensor' and 'dltensor_versioned' capsules");
  }
  a.protocol = "dlpack";
}

// Calls obj.__dlpack__ the way DESIGN.md asks: versioned with the stream we
// run on, then the pre-1.0 signature when the producer refuses max_version.
py::object export_dlpack(py::handle obj, const ImportOptions& options) {
  py::object stream = py::none();
  if (py::hasattr(obj, "__dlpack_device__")) {
    auto dev = obj.attr("__dlpack_device__")().cast<py::tuple>();
    int type = dev[0].cast<int>();
    if (type == dlpack::kCUDA || type == dlpack::kCUDAManaged)
      stream = py::int_(options.stream == 0 ? 1 : options.stream);  // 1: legacy default
  }
  using namespace pybind11::literals;
  py::object method = obj.attr("__dlpack__");
  try {
    return method("stream"_a = stream, "max_version"_a = py::make_tuple(1, 1), "copy"_a = false);
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;
  }
  return method("stream"_a = stream);
}

// True for producers whose exported memory must not be written (jax arrays
// are immutable, yet their unversioned capsules carry no read-only flag).
bool immutable_producer(py::handle obj) {
  std::string module = py::str(py::type::of(obj).attr("__module__")).cast<std::string>();
  return module.rfind("jax", 0) == 0;
}

// -------------------------------------------------- CUDA Array Interface ----

int64_t as_int(py::handle v, const char* name, const char* field) {
  if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v))
    throw py::type_error(arg(name) + ".__cuda_array_interface__['" + field + "'] must be an int, not " +
                         py::str(py::type::of(v).attr("__name__")).cast<std::string>());
  try {
    return v.cast<int64_t>();
  } catch (py::cast_error&) {
    throw py::value_error(arg(name) + ".__cuda_array_interface__['" + field + "'] overflows 64 bits");
  }
}

py::tuple as_tuple(py::handle v, const char* name, const char* field) {
  if (!py::isinstance<py::tuple>(v))
    throw py::type_error(arg(name) + ".__cuda_array_interface__['" + field + "'] must be a tuple");
  return py::reinterpret_borrow<py::tuple>(v);
}

DType dtype_from_typestr(const std::string& typestr, const char* name) {
  if (typestr.size() < 3) unsupported_dtype(name, "'" + typestr + "'");
  char order = typestr[0], kind = typestr[1];
  int64_t bytes = 0;
  try {
    bytes = std::stoll(typestr.substr(2));
  } catch (...) {
    unsupported_dtype(name, "'" + typestr + "'");
  }
  if (order == '>' && bytes > 1)
    throw py::type_error(arg(name) + " has non-native (big-endian) byte order '" + typestr +
                         "'; gpufilt accepts native byte order only");
  if (order != '<' && order != '|' && order != '=') unsupported_dtype(name, "'" + typestr + "'");
  return dtype_from_kind(kind, bytes, name, "'" + typestr + "'");
}

void import_cai(ImportedArray& a, py::handle obj, const char* name, const ImportOptions& options) {
  py::object cai_obj = obj.attr("__cuda_array_interface__");
  if (!py::isinstance<py::dict>(cai_obj))
    throw py::type_error(arg(name) + ".__cuda_array_interface__ must be a dict");
  py::dict cai = cai_obj;
  for (const char* key : {"shape", "typestr", "data", "version"})
    if (!cai.contains(key))
      throw py::value_error(arg(name) + ".__cuda_array_interface__ lacks the required key '" + key + "'");
  int64_t version = as_int(cai["version"], name, "version");
  if (version < 2 || version > 3)
    throw py::value_error(arg(name) + ".__cuda_array_interface__ has version " + std::to_string(version) +
                          "; gpufilt reads versions 2 and 3");
  if (cai.contains("mask") && !cai["mask"].is_none())
    throw py::value_error(arg(name) + ".__cuda_array_interface__ has a mask; masked arrays are not supported");
  if (!py::isinstance<py::str>(cai["typestr"]))
    throw py::type_error(arg(name) + ".__cuda_array_interface__['typestr'] must be a str");
  a.desc.dtype = dtype_from_typestr(cai["typestr"].cast<std::string>(), name);

  py::tuple shape = as_tuple(cai["shape"], name, "shape");
  int64_t ndim = (int64_t)shape.size();
  if (ndim > kMaxDims)
    throw py::value_error(arg(name) + " has " + std::to_string(ndim) + " dimensions; gpufilt accepts 0 to " +
                          std::to_string(kMaxDims));
  int64_t dims[kMaxDims], strides[kMaxDims];
  for (int64_t i = 0; i < ndim; ++i) dims[i] = as_int(shape[i], name, "shape");
  bool has_strides = cai.contains("strides") && !cai["strides"].is_none();
  if (has_strides) {
    py::tuple st = as_tuple(cai["strides"], name, "strides");
    if ((int64_t)st.size() != ndim)
      throw py::value_error(arg(name) + ".__cuda_array_interface__['strides'] has " + std::to_string(st.size()) +
                            " entries for " + std::to_string(ndim) + " dimensions");
    for (int64_t i = 0; i < ndim; ++i) strides[i] = as_int(st[i], name, "strides");
  }
  set_geometry(a.desc, ndim, dims, has_strides ? strides : nullptr, name);

  py::tuple data = as_tuple(cai["data"], name, "data");
  if (data.size() != 2)
    throw py::value_error(arg(name) + ".__cuda_array_interface__['data'] must be (pointer, read_only)");
  int64_t ptr = as_int(data[0], name, "data");
  if (ptr == 0 && a.desc.size() != 0)
    throw py::value_error(arg(name) + ".__cuda_array_interface__ has a null pointer for a non-empty array");
  a.desc.data = reinterpret_cast<char*>(static_cast<intptr_t>(ptr));
  a.readonly = py::bool_(data[1]);

  if (cai.contains("stream") && !cai["stream"].is_none()) {
    int64_t stream = as_int(cai["stream"], name, "stream");
    if (stream == 0)
      throw py::value_error(arg(name) + ".__cuda_array_interface__['stream'] is 0, which the protocol disallows");
    a.producer_stream = stream;
  }
  a.desc.device = Device::CUDA;
  a.desc.device_id = options.pointer_device && ptr ? options.pointer_device(a.desc.data) : -1;
  a.protocol = "cuda_array_interface";
}

// ------------------------------------------------------- buffer protocol ----

DType dtype_from_format(const char* format, int64_t item, const char* name) {
  std::string f = format ? format : "B";
  std::string what = "'" + f + "' (buffer format)";
  size_t i = 0;
  if (i < f.size() && (f[i] == '@' || f[i] == '=' || f[i] == '<' || f[i] == '>' || f[i] == '!')) {
    bool big = f[i] == '>' || f[i] == '!';
    ++i;
    if (big && item > 1)
      throw py::type_error(arg(name) + " has non-native (big-endian) byte order " + what +
                           "; gpufilt accepts native byte order only");
  }
  std::string code = f.substr(i);
  if (code == "?") return dtype_from_kind('b', item, name, what);
  if (code.size() == 1 && std::strchr("bhilq", code[0])) return dtype_from_kind('i', item, name, what);
  if (code.size() == 1 && std::strchr("BHILQ", code[0])) return dtype_from_kind('u', item, name, what);
  if (code == "n") return dtype_from_kind('i', item, name, what);
  if (code == "N") return dtype_from_kind('u', item, name, what);
  if (code == "e" || code == "f" || code == "d") return dtype_from_kind('f', item, name, what);
  if (code == "Zf" || code == "Zd") return dtype_from_kind('c', item, name, what);
  unsupported_dtype(name, what);
}

void import_buffer(ImportedArray& a, py::handle obj, const char* name, Access access) {
  auto view = std::make_shared<Py_buffer>();
  int flags = PyBUF_RECORDS_RO | (access == Access::Write ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj.ptr(), view.get(), flags) != 0) {
    PyErr_Clear();
    if (access == Access::Write && PyObject_GetBuffer(obj.ptr(), view.get(), PyBUF_RECORDS_RO) == 0) {
      PyBuffer_Release(view.get());
      read_only(name);
    }
    PyErr_Clear();
    std::string dtype = claimed_dtype(obj);
    if (!dtype.empty()) unsupported_dtype(name, dtype.substr(1));
    throw py::type_error(arg(name) + " of type " +
                         py::str(py::type::of(obj).attr("__name__")).cast<std::string>() +
                         " is not an array: gpufilt accepts objects with __dlpack__, "
                         "__cuda_array_interface__ or the buffer protocol");
  }
  a.release = std::shared_ptr<void>(view.get(), [view](void*) { PyBuffer_Release(view.get()); });
  a.desc.dtype = dtype_from_format(view->format, view->itemsize, name);
  int64_t shape[kMaxDims], strides[kMaxDims];
  if (view->ndim > kMaxDims)
    throw py::value_error(arg(name) + " has too many dimensions");
  if (view->suboffsets)
    throw py::type_error(arg(name) + " is an indirect (PIL-style) buffer with suboffsets; gpufilt reads "
                         "strided buffers only");
  // Exporters may leave shape NULL (one dimension) and strides NULL (C order).
  for (int i = 0; i < view->ndim; ++i) {
    shape[i] = view->shape ? view->shape[i] : view->len / view->itemsize;
    strides[i] = view->strides ? view->strides[i] : 0;
  }
  set_geometry(a.desc, view->ndim, shape, view->strides ? strides : nullptr, name);
  a.desc.data = static_cast<char*>(view->buf);
  a.desc.device = Device::CPU;
  a.readonly = view->readonly != 0;
  a.protocol = "buffer";
}

}  // namespace

// ----------------------------------------------------------- numpy.ndarray ----

// An exact numpy.ndarray read from its own fields: the zero-copy view that
// numpy's DLPack export describes, without building and consuming a capsule
// (a few microseconds per array, most of a small call). Only the plain case
// (native byte order, aligned, strides in whole items, a dtype gpufilt
// takes); anything else returns false and the DLPack path decides, errors
// included. Subclasses keep the protocols (they may override them).
bool import_numpy(ImportedArray& a, py::handle obj, const char* name) {
  auto& api = py::detail::npy_api::get();
  if (Py_TYPE(obj.ptr()) != api.PyArray_Type_) return false;
  const auto* arr = py::detail::array_proxy(obj.ptr());
  const auto dtype = py::reinterpret_borrow<py::dtype>(arr->descr);
  const char order = dtype.byteorder(), kind = dtype.kind();
  const int64_t item = dtype.itemsize();
  constexpr int kAligned = py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  constexpr int kWriteable = py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  if ((order != '=' && order != '|') || !(arr->flags & kAligned) || arr->nd > kMaxDims) return false;
  const bool whole_ints = item == 1 || item == 2 || item == 4 || item == 8;
  const bool supported = kind == 'b'                 ? item == 1
                         : kind == 'i' || kind == 'u' ? whole_ints
                         : kind == 'f'                ? item == 2 || item == 4 || item == 8
                         : kind == 'c'                ? item == 8 || item == 16
                                                      : false;
  if (!supported) return false;
  int64_t shape[kMaxDims], strides[kMaxDims];
  for (int d = 0; d < arr->nd; ++d) {
    shape[d] = arr->dimensions[d];
    strides[d] = arr->strides[d];
    if (strides[d] % item) return false;
  }
  a.desc.dtype = dtype_from_kind(kind, item, name, "");
  a.desc.device = Device::CPU;
  a.desc.device_id = 0;
  set_geometry(a.desc, arr->nd, shape, strides, name);
  a.desc.data = arr->data;
  a.readonly = !(arr->flags & kWriteable);
  a.protocol = "numpy";
  return true;
}

ImportedArray import_array(py::handle obj, const char* name, Access access, const ImportOptions& options) {
  ImportedArray a;
  a.owner = py::reinterpret_borrow<py::object>(obj);
  if (import_numpy(a, obj, name)) {
    if (access == Access::Write && a.readonly) read_only(name);
    return a;
  }
  if (PyCapsule_CheckExact(obj.ptr())) {
    consume_capsule(a, obj, name);
  } else {
    // A producer's export can fail for reasons another protocol explains
    // better (numpy: big-endian, read-only without max_version): try those.
    py::object dlpack_failure;
    if (py::hasattr(obj, "__dlpack__")) {
      try {
        py::object capsule = export_dlpack(obj, options);
        consume_capsule(a, capsule, name);
        if (immutable_producer(obj)) a.readonly = true;
      } catch (py::error_already_set& e) {
        dlpack_failure = py::str(e.value());
        a = ImportedArray{};
        a.owner = py::reinterpret_borrow<py::object>(obj);
      }
    }
    if (!*a.protocol) {
      if (py::hasattr(obj, "__cuda_array_interface__")) {
        import_cai(a, obj, name, options);
      } else if (PyObject_CheckBuffer(obj.ptr())) {
        import_buffer(a, obj, name, access);
      } else if (dlpack_failure) {
        std::string dtype = claimed_dtype(obj);
        throw py::type_error(arg(name) + " could not be exported through DLPack (" +
                             dlpack_failure.cast<std::string>() + ")" +
                             (dtype.empty() ? "" : "; its dtype is" + dtype));
      } else {
        import_buffer(a, obj, name, access);  // raises the "not an array" error
      }
    }
  }
  if (access == Access::Write && a.readonly) read_only(name);
  return a;
}

py::dict describe_array(const ImportedArray& a) {
  py::tuple shape(a.desc.ndim), strides(a.desc.ndim);
  for (int i = 0; i < a.desc.ndim; ++i) {
    shape[i] = py::int_(a.desc.shape[i]);
    strides[i] = py::int_(a.desc.strides[i]);
  }
  py::dict d;
  d["protocol"] = a.protocol;
  d["device"] = a.desc.device == Device::CPU ? "cpu" : "cuda";
  d["device_id"] = a.desc.device_id;
  d["data"] = py::int_(reinterpret_cast<uintptr_t>(a.desc.data));
  d["shape"] = shape;
  d["strides"] = strides;
  d["dtype"] = dtype_name(a.desc.dtype);
  d["itemsize"] = itemsize(a.desc.dtype);
  d["readonly"] = a.readonly;
  d["stream"] = a.producer_stream ? py::object(py::int_(a.producer_stream)) : py::object(py::none());
  return d;
}

}  // namespace gpufilt
