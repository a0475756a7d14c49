// Import of array-likes: numpy and CuPy arrays read from their fields, then
// DLPack, then __cuda_array_interface__, then the buffer protocol. Every
// failure is a Python exception naming the argument; nothing here copies
// data.
#include "bindings/interop.hpp"

#include <cstring>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "bindings/dlpack.hpp"
#include <pybind11/numpy.h>

namespace gpufilt {
namespace {

constexpr const char* kAccepted =
    "bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16, float32, float64, "
    "complex64, complex128 (native byte order) and bfloat16 (through DLPack)";

// The Python strings and tuples every import uses, made once (GIL held) and
// kept for the process. Interned names hit CPython's attribute caches, and
// no str, tuple or kwargs dict is built per call.
struct Names {
  PyObject* dlpack = intern("__dlpack__");
  PyObject* dlpack_device = intern("__dlpack_device__");
  PyObject* cai = intern("__cuda_array_interface__");
  PyObject* module = intern("__module__");
  PyObject* shape = intern("shape");
  PyObject* strides = intern("strides");
  PyObject* typestr = intern("typestr");
  PyObject* data = intern("data");
  PyObject* version = intern("version");
  PyObject* mask = intern("mask");
  PyObject* stream = intern("stream");
  PyObject* dtype = intern("dtype");
  PyObject* ptr = intern("ptr");
  PyObject* device_id = intern("device_id");
  PyObject* cuda = intern("cuda");
  PyObject* ndarray = intern("ndarray");
  PyObject* get_current_stream = intern("get_current_stream");
  PyObject* versioned_kwnames = tuple({"stream", "max_version", "copy"});  // for vectorcall
  PyObject* stream_kwnames = tuple({"stream"});
  PyObject* max_version = built(Py_BuildValue("(ii)", 1, 1));

  static PyObject* intern(const char* s) {
    PyObject* o = PyUnicode_InternFromString(s);
    if (!o) throw py::error_already_set();
    return o;
  }
  static PyObject* built(PyObject* o) {
    if (!o) throw py::error_already_set();
    return o;
  }
  static PyObject* tuple(std::initializer_list<const char*> items) {
    PyObject* t = PyTuple_New((Py_ssize_t)items.size());
    if (!t) throw py::error_already_set();
    Py_ssize_t i = 0;
    for (const char* item : items) PyTuple_SET_ITEM(t, i++, intern(item));
    return t;
  }
};

const Names& names() {
  static const Names n;
  return n;
}

// obj.<name> (an interned str), or a null object when it has none. Like
// hasattr, any error while looking it up counts as "has none".
py::object optional_attr(py::handle obj, PyObject* name) {
  PyObject* found = nullptr;
#if PY_VERSION_HEX >= 0x030D0000
  const int status = PyObject_GetOptionalAttr(obj.ptr(), name, &found);
#else
  const int status = _PyObject_LookupAttr(obj.ptr(), name, &found);
#endif
  if (status < 0) PyErr_Clear();
  return py::reinterpret_steal<py::object>(found);
}

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

// The DType of numpy kind `kind` ('b', 'i', 'u', 'f', 'c') and `bytes`, or
// false when gpufilt has none. Callers build their error text only on
// failure (it costs more than the import).
bool dtype_of_kind(char kind, int64_t bytes, DType& out) {
  switch (kind) {
    case 'b':
      if (bytes == 1) return out = DType::Bool, true;
      break;
    case 'i':
      if (bytes == 1) return out = DType::Int8, true;
      if (bytes == 2) return out = DType::Int16, true;
      if (bytes == 4) return out = DType::Int32, true;
      if (bytes == 8) return out = DType::Int64, true;
      break;
    case 'u':
      if (bytes == 1) return out = DType::UInt8, true;
      if (bytes == 2) return out = DType::UInt16, true;
      if (bytes == 4) return out = DType::UInt32, true;
      if (bytes == 8) return out = DType::UInt64, true;
      break;
    case 'f':
      if (bytes == 2) return out = DType::Float16, true;
      if (bytes == 4) return out = DType::Float32, true;
      if (bytes == 8) return out = DType::Float64, true;
      break;
    case 'c':
      if (bytes == 8) return out = DType::Complex64, true;
      if (bytes == 16) return out = DType::Complex128, true;
      break;
  }
  return false;
}

// Shape, byte strides and data pointer into `d`: the one place where a
// foreign descriptor is checked before any of its memory is touched. Every
// size, stride and offset product is computed in 64 bits with overflow
// checks; a non-empty array needs a non-null pointer, and the bytes it
// reaches (from `base` + `byte_offset`) must lie within the address space,
// their span within int64. Errors are ValueError naming `name`.
void set_geometry(ArrayDesc& d, int64_t ndim, const int64_t* shape, const int64_t* strides, const void* base,
                  uint64_t byte_offset, const char* name) {
  if (ndim < 0 || ndim > kMaxDims)
    throw py::value_error(arg(name) + " has " + std::to_string(ndim) + " dimensions; gpufilt accepts 0 to " +
                          std::to_string(kMaxDims));
  if (ndim > 0 && !shape)
    throw py::value_error(arg(name) + " has " + std::to_string(ndim) + " dimensions and no shape");
  auto overflow = [&](const char* what) { return py::value_error(arg(name) + " has " + what + " 64 bits"); };
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
    if (__builtin_mul_overflow(contiguous, shape[i] > 0 ? shape[i] : 1, &contiguous) ||
        __builtin_mul_overflow(elements, shape[i], &elements))
      throw overflow("a shape whose size overflows");
  }
  // The byte range [lo, hi) relative to the first element; none when empty.
  int64_t lo = 0, hi = item;
  for (int64_t i = 0; i < ndim && elements > 0; ++i) {
    int64_t span;
    if (__builtin_mul_overflow(shape[i] - 1, d.strides[i], &span) ||
        __builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi))
      throw overflow("strides whose byte offsets overflow");
  }
  int64_t extent;
  if (__builtin_sub_overflow(hi, lo, &extent)) throw overflow("strides whose byte span overflows");
  const uintptr_t address = reinterpret_cast<uintptr_t>(base);
  uintptr_t first, high;
  if (byte_offset > (uint64_t)std::numeric_limits<int64_t>::max() ||
      __builtin_add_overflow(address, byte_offset, &first))
    throw py::value_error(arg(name) + " has a byte offset " + std::to_string(byte_offset) +
                          " that overflows its pointer");
  if (elements > 0) {
    if (first == 0) throw py::value_error(arg(name) + " has a null data pointer for a non-empty array");
    if ((uintptr_t)0 - (uintptr_t)lo > first || __builtin_add_overflow(first, (uintptr_t)hi, &high))
      throw py::value_error(arg(name) + " has strides that reach outside the address space from its pointer");
  }
  d.data = reinterpret_cast<char*>(first);
}

[[noreturn]] void read_only(const char* name) {
  throw py::value_error(arg(name) + " is read-only; pass a writable array (jax arrays are immutable)");
}

// What every array imported for writing must be: writable, and with no two
// elements in the same memory (a stride-0 or self-overlapping view), which
// no filter can write correctly. Overlap with the inputs stays allowed.
void check_writable(const ImportedArray& a, const char* name) {
  if (a.readonly) read_only(name);
  if (may_self_overlap(a.desc))
    throw py::value_error(arg(name) + " has elements that overlap each other in memory (shape " +
                          shape_string(a.desc) + ", strides " + strides_string(a.desc) +
                          "); pass an array whose elements are distinct, such as a contiguous one");
}

// ---------------------------------------------------------------- DLPack ----

DType dtype_from_dlpack(const dlpack::DataType& t, const char* name) {
  DType dtype;
  if (t.lanes == 1 && t.bits % 8 == 0) {
    const int64_t bytes = t.bits / 8;
    switch (t.code) {
      case dlpack::kInt: if (dtype_of_kind('i', bytes, dtype)) return dtype; break;
      case dlpack::kUInt: if (dtype_of_kind('u', bytes, dtype)) return dtype; break;
      case dlpack::kFloat: if (dtype_of_kind('f', bytes, dtype)) return dtype; break;
      case dlpack::kComplex: if (dtype_of_kind('c', bytes, dtype)) return dtype; break;
      case dlpack::kBool: if (dtype_of_kind('b', bytes, dtype)) return dtype; break;
      case dlpack::kBfloat: if (t.bits == 16) return DType::BFloat16; break;
    }
  }
  unsupported_dtype(name, "(DLPack code " + std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits, " +
                              std::to_string(t.lanes) + " lanes)");
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
    for (int i = 0; i < t.ndim; ++i)
      if (__builtin_mul_overflow(t.strides[i], itemsize(a.desc.dtype), &byte_strides[i]))
        throw py::value_error(arg(name) + " has DLPack stride " + std::to_string(t.strides[i]) +
                              " elements, whose bytes overflow 64 bits");
  set_geometry(a.desc, t.ndim, t.shape, t.strides ? byte_strides : nullptr, t.data, t.byte_offset, name);
}

// Takes ownership of a "dltensor" or "dltensor_versioned" capsule: renames it
// "used_*" (so its destructor leaves the tensor alone) and calls the deleter
// when `a` is released.
void consume_capsule(ImportedArray& a, py::handle capsule, const char* name) {
  if (!PyCapsule_CheckExact(capsule.ptr()))
    throw py::type_error(arg(name) + ".__dlpack__() returned a " +
                         py::str(py::type::of(capsule).attr("__name__")).cast<std::string>() +
                         ", not a DLPack capsule");
  const char* cname = PyCapsule_GetName(capsule.ptr());
  const char* cap_name = cname ? cname : "";
  if (std::strcmp(cap_name, "dltensor_versioned") == 0) {
    auto* mt = static_cast<dlpack::ManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), cname));
    if (!mt) throw py::error_already_set();
    // Checked before taking ownership: another major version may lay out the
    // rest (the deleter too) differently; the capsule's own destructor frees it.
    if (mt->version.major != dlpack::kMajorVersion)
      throw py::type_error(arg(name) + " is a DLPack " + std::to_string(mt->version.major) + "." +
                           std::to_string(mt->version.minor) + " tensor; gpufilt reads major version 1");
    PyCapsule_SetName(capsule.ptr(), "used_dltensor_versioned");
    a.release = Release([](void* p) {
      auto* m = static_cast<dlpack::ManagedTensorVersioned*>(p);
      if (m->deleter) m->deleter(m);
    }, mt);
    a.readonly = (mt->flags & dlpack::kFlagReadOnly) != 0;
    fill_from_dltensor(a, mt->dl_tensor, name);
  } else if (std::strcmp(cap_name, "dltensor") == 0) {
    auto* mt = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), cname));
    if (!mt) throw py::error_already_set();
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");
    a.release = Release([](void* p) {
      auto* m = static_cast<dlpack::ManagedTensor*>(p);
      if (m->deleter) m->deleter(m);
    }, mt);
    fill_from_dltensor(a, mt->dl_tensor, name);
  } else if (std::strncmp(cap_name, "used_", 5) == 0) {
    throw py::value_error(arg(name) + " is a DLPack capsule that was already consumed ('" + cap_name +
                          "'); a capsule can be imported only once");
  } else {
    throw py::type_error(arg(name) + " is a capsule named '" + cap_name +
                         "'; gpufilt accepts 'dltensor' and 'dltensor_versioned' capsules");
  }
  a.protocol = "dlpack";
}

// True when obj.__dlpack_device__() names CUDA (or managed) memory.
bool on_cuda_device(py::handle device_fn) {
  PyObject* dev = PyObject_CallNoArgs(device_fn.ptr());
  if (!dev) throw py::error_already_set();
  auto owned = py::reinterpret_steal<py::object>(dev);
  long type;
  if (PyTuple_CheckExact(dev) && PyTuple_GET_SIZE(dev) >= 1 && PyLong_CheckExact(PyTuple_GET_ITEM(dev, 0))) {
    type = PyLong_AsLong(PyTuple_GET_ITEM(dev, 0));
    if (type == -1 && PyErr_Occurred()) throw py::error_already_set();
  } else {  // anything else: pybind11's casts and their errors
    type = owned.cast<py::tuple>()[0].cast<long>();
  }
  return type == dlpack::kCUDA || type == dlpack::kCUDAManaged;
}

// Calls obj.__dlpack__ (`method`) the way DESIGN.md asks: versioned with the
// stream we run on, then the pre-1.0 signature when the producer refuses
// max_version. Vectorcall with cached keyword names: no kwargs dict per call.
py::object export_dlpack(py::handle obj, py::handle method, const ImportOptions& options) {
  const Names& n = names();
  py::object stream = py::none();
  if (py::object device_fn = optional_attr(obj, n.dlpack_device))
    if (on_cuda_device(device_fn)) stream = py::int_(options.stream == 0 ? 1 : options.stream);  // 1: legacy default
  // Slot 0 is scratch for the callee (PY_VECTORCALL_ARGUMENTS_OFFSET); the
  // keyword values follow, in kwnames' order.
  PyObject* args[] = {nullptr, stream.ptr(), n.max_version, Py_False};
  constexpr size_t kNoPositional = 0 | PY_VECTORCALL_ARGUMENTS_OFFSET;
  PyObject* capsule = PyObject_Vectorcall(method.ptr(), args + 1, kNoPositional, n.versioned_kwnames);
  if (!capsule) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
    PyErr_Clear();
    capsule = PyObject_Vectorcall(method.ptr(), args + 1, kNoPositional, n.stream_kwnames);
    if (!capsule) throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

// True for producers whose exported memory must not be written (jax arrays
// are immutable, yet their unversioned capsules carry no read-only flag).
bool immutable_producer(py::handle obj) {
  PyObject* module = PyObject_GetAttr((PyObject*)Py_TYPE(obj.ptr()), names().module);
  if (!module) throw py::error_already_set();
  auto text = py::reinterpret_steal<py::object>(module);
  if (!PyUnicode_Check(module)) text = py::str(text);
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(text.ptr(), &size);  // the str's own buffer when ASCII
  if (!utf8) throw py::error_already_set();
  return size >= 3 && std::strncmp(utf8, "jax", 3) == 0;
}

// -------------------------------------------------- CUDA Array Interface ----

int64_t as_int(py::handle v, const char* name, const char* field) {
  if (!PyLong_Check(v.ptr()) || PyBool_Check(v.ptr()))
    throw py::type_error(arg(name) + ".__cuda_array_interface__['" + field + "'] must be an int, not " +
                         py::str(py::type::of(v).attr("__name__")).cast<std::string>());
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (overflow)
    throw py::value_error(arg(name) + ".__cuda_array_interface__['" + field + "'] overflows 64 bits");
  if (value == -1 && PyErr_Occurred()) throw py::error_already_set();
  return value;
}

py::tuple as_tuple(py::handle v, const char* name, const char* field) {
  if (!py::isinstance<py::tuple>(v))
    throw py::type_error(arg(name) + ".__cuda_array_interface__['" + field + "'] must be a tuple");
  return py::reinterpret_borrow<py::tuple>(v);
}

// cai[key] (an interned str), or a null handle when absent.
py::handle cai_item(const py::dict& cai, PyObject* key) {
  PyObject* v = PyDict_GetItemWithError(cai.ptr(), key);
  if (!v && PyErr_Occurred()) throw py::error_already_set();
  return v;
}

// A typestr such as "<f4": byte order, kind, item size in bytes.
DType dtype_from_typestr(const char* typestr, Py_ssize_t length, const char* name) {
  auto what = [&] { return "'" + std::string(typestr, (size_t)length) + "'"; };
  if (length < 3) unsupported_dtype(name, what());
  const char order = typestr[0], kind = typestr[1];
  int64_t bytes = 0;
  for (Py_ssize_t i = 2; i < length; ++i) {
    if (typestr[i] < '0' || typestr[i] > '9' || bytes > (int64_t(1) << 40)) unsupported_dtype(name, what());
    bytes = bytes * 10 + (typestr[i] - '0');
  }
  if (order == '>' && bytes > 1)
    throw py::type_error(arg(name) + " has non-native (big-endian) byte order " + what() +
                         "; gpufilt accepts native byte order only");
  DType dtype;
  if ((order != '<' && order != '|' && order != '=') || !dtype_of_kind(kind, bytes, dtype))
    unsupported_dtype(name, what());
  return dtype;
}

// `cai_obj`: the object's __cuda_array_interface__.
void import_cai(ImportedArray& a, py::handle cai_obj, const char* name, const ImportOptions& options) {
  const Names& n = names();
  if (!py::isinstance<py::dict>(cai_obj))
    throw py::type_error(arg(name) + ".__cuda_array_interface__ must be a dict");
  auto cai = py::reinterpret_borrow<py::dict>(cai_obj);
  const std::pair<PyObject*, const char*> required[] = {
      {n.shape, "shape"}, {n.typestr, "typestr"}, {n.data, "data"}, {n.version, "version"}};
  for (const auto& [key, text] : required)
    if (!cai_item(cai, key))
      throw py::value_error(arg(name) + ".__cuda_array_interface__ lacks the required key '" + text + "'");
  int64_t version = as_int(cai_item(cai, n.version), name, "version");
  if (version < 2 || version > 3)
    throw py::value_error(arg(name) + ".__cuda_array_interface__ has version " + std::to_string(version) +
                          "; gpufilt reads versions 2 and 3");
  py::handle mask = cai_item(cai, n.mask);
  if (mask && !mask.is_none())
    throw py::value_error(arg(name) + ".__cuda_array_interface__ has a mask; masked arrays are not supported");
  py::handle typestr = cai_item(cai, n.typestr);
  if (!PyUnicode_Check(typestr.ptr()))
    throw py::type_error(arg(name) + ".__cuda_array_interface__['typestr'] must be a str");
  Py_ssize_t typestr_length = 0;
  const char* typestr_utf8 = PyUnicode_AsUTF8AndSize(typestr.ptr(), &typestr_length);
  if (!typestr_utf8) throw py::error_already_set();
  a.desc.dtype = dtype_from_typestr(typestr_utf8, typestr_length, name);

  py::tuple shape = as_tuple(cai_item(cai, n.shape), name, "shape");
  int64_t ndim = (int64_t)shape.size();
  if (ndim > kMaxDims)
    throw py::value_error(arg(name) + " has " + std::to_string(ndim) + " dimensions; gpufilt accepts 0 to " +
                          std::to_string(kMaxDims));
  int64_t dims[kMaxDims], strides[kMaxDims];
  for (int64_t i = 0; i < ndim; ++i) dims[i] = as_int(PyTuple_GET_ITEM(shape.ptr(), i), name, "shape");
  py::handle strides_item = cai_item(cai, n.strides);
  const bool has_strides = strides_item && !strides_item.is_none();
  if (has_strides) {
    py::tuple st = as_tuple(strides_item, name, "strides");
    if ((int64_t)st.size() != ndim)
      throw py::value_error(arg(name) + ".__cuda_array_interface__['strides'] has " + std::to_string(st.size()) +
                            " entries for " + std::to_string(ndim) + " dimensions");
    for (int64_t i = 0; i < ndim; ++i) strides[i] = as_int(PyTuple_GET_ITEM(st.ptr(), i), name, "strides");
  }
  py::tuple data = as_tuple(cai_item(cai, n.data), name, "data");
  if (data.size() != 2)
    throw py::value_error(arg(name) + ".__cuda_array_interface__['data'] must be (pointer, read_only)");
  int64_t ptr = as_int(PyTuple_GET_ITEM(data.ptr(), 0), name, "data");
  set_geometry(a.desc, ndim, dims, has_strides ? strides : nullptr,
               reinterpret_cast<const void*>(static_cast<intptr_t>(ptr)), 0, name);
  const int readonly = PyObject_IsTrue(PyTuple_GET_ITEM(data.ptr(), 1));
  if (readonly < 0) throw py::error_already_set();
  a.readonly = readonly != 0;

  py::handle stream_item = cai_item(cai, n.stream);
  if (stream_item && !stream_item.is_none()) {
    int64_t stream = as_int(stream_item, name, "stream");
    if (stream == 0)
      throw py::value_error(arg(name) + ".__cuda_array_interface__['stream'] is 0, which the protocol disallows");
    a.producer_stream = stream;
  }
  a.desc.device = Device::CUDA;
  a.desc.device_id = options.pointer_device && ptr ? options.pointer_device(a.desc.data) : -1;
  a.protocol = "cuda_array_interface";
}

// ------------------------------------------------------- buffer protocol ----

// A struct-module format such as "<f" or "Zd" (one item) and its item size.
DType dtype_from_format(const char* format, int64_t item, const char* name) {
  const char* f = format ? format : "B";
  auto what = [&] { return "'" + std::string(f) + "' (buffer format)"; };
  const char* code = f;
  if (*code && std::strchr("@=<>!", *code)) {
    const bool big = *code == '>' || *code == '!';
    ++code;
    if (big && item > 1)
      throw py::type_error(arg(name) + " has non-native (big-endian) byte order " + what() +
                           "; gpufilt accepts native byte order only");
  }
  char kind = 0;
  if (code[0] && !code[1]) {  // one character
    if (code[0] == '?') kind = 'b';
    else if (std::strchr("bhilqn", code[0])) kind = 'i';
    else if (std::strchr("BHILQN", code[0])) kind = 'u';
    else if (std::strchr("efd", code[0])) kind = 'f';
  } else if (code[0] == 'Z' && (code[1] == 'f' || code[1] == 'd') && !code[2]) {
    kind = 'c';
  }
  DType dtype;
  if (!kind || !dtype_of_kind(kind, item, dtype)) unsupported_dtype(name, what());
  return dtype;
}

void release_buffer(void* view) {
  PyBuffer_Release(static_cast<Py_buffer*>(view));
  delete static_cast<Py_buffer*>(view);
}

void import_buffer(ImportedArray& a, py::handle obj, const char* name, Access access) {
  // On the heap: exporters may point shape at the view's own len field.
  auto view = std::make_unique<Py_buffer>();
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
  const Py_buffer* v = view.get();
  a.release = Release(release_buffer, view.release());
  a.desc.dtype = dtype_from_format(v->format, v->itemsize, name);
  int64_t shape[kMaxDims], strides[kMaxDims];
  if (v->ndim > kMaxDims)
    throw py::value_error(arg(name) + " has too many dimensions");
  if (v->suboffsets)
    throw py::type_error(arg(name) + " is an indirect (PIL-style) buffer with suboffsets; gpufilt reads "
                         "strided buffers only");
  // Exporters may leave shape NULL (one dimension) and strides NULL (C order).
  for (int i = 0; i < v->ndim; ++i) {
    shape[i] = v->shape ? v->shape[i] : v->len / v->itemsize;
    strides[i] = v->strides ? v->strides[i] : 0;
  }
  set_geometry(a.desc, v->ndim, shape, v->strides ? strides : nullptr, v->buf, 0, name);
  a.desc.device = Device::CPU;
  a.readonly = v->readonly != 0;
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
// A numpy dtype (numpy's or CuPy's) of native byte order that gpufilt
// takes, as a DType and item size; false for any other.
bool native_numpy_dtype(py::handle descr, DType& dtype, int64_t& item) {
  const auto d = py::reinterpret_borrow<py::dtype>(descr);
  const char order = d.byteorder(), kind = d.kind();
  item = d.itemsize();
  if (order != '=' && order != '|') return false;
  const bool whole_ints = item == 1 || item == 2 || item == 4 || item == 8;
  const bool supported = kind == 'b'                 ? item == 1
                         : kind == 'i' || kind == 'u' ? whole_ints
                         : kind == 'f'                ? item == 2 || item == 4 || item == 8
                         : kind == 'c'                ? item == 8 || item == 16
                                                      : false;
  return supported && dtype_of_kind(kind, item, dtype);
}

bool import_numpy(ImportedArray& a, py::handle obj, const char* name) {
  auto& api = py::detail::npy_api::get();
  if (Py_TYPE(obj.ptr()) != api.PyArray_Type_) return false;
  const auto* arr = py::detail::array_proxy(obj.ptr());
  constexpr int kAligned = py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  constexpr int kWriteable = py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  int64_t item = 0;
  if (!(arr->flags & kAligned) || arr->nd > kMaxDims || !native_numpy_dtype(arr->descr, a.desc.dtype, item))
    return false;
  int64_t shape[kMaxDims], strides[kMaxDims];
  for (int d = 0; d < arr->nd; ++d) {
    shape[d] = arr->dimensions[d];
    strides[d] = arr->strides[d];
    if (strides[d] % item) return false;
  }
  a.desc.device = Device::CPU;
  a.desc.device_id = 0;
  set_geometry(a.desc, arr->nd, shape, strides, arr->data, 0, name);
  a.readonly = !(arr->flags & kWriteable);
  a.protocol = "numpy";
  return true;
}

// ----------------------------------------------------------------- CuPy ----

// cupy.ndarray and cupy.cuda.get_current_stream, looked up once cupy has
// been imported (gpufilt never imports it); null before.
struct CuPy {
  PyObject* ndarray = nullptr;
  PyObject* get_current_stream = nullptr;

  static const CuPy* loaded() {
    static CuPy cupy;
    if (!cupy.ndarray && !cupy.look_up()) return nullptr;
    return &cupy;
  }

 private:
  bool look_up() {
    PyObject* module = PyDict_GetItemString(PyImport_GetModuleDict(), "cupy");  // borrowed
    if (!module) return false;
    const Names& n = names();
    py::object cuda = optional_attr(module, n.cuda);
    py::object ndarray_type = optional_attr(module, n.ndarray);
    py::object current = cuda ? optional_attr(cuda, n.get_current_stream) : py::object();
    if (!ndarray_type || !current || !PyType_Check(ndarray_type.ptr())) return false;
    get_current_stream = current.release().ptr();
    ndarray = ndarray_type.release().ptr();  // set last: loaded() tests it
    return true;
  }
};

// An int attribute of obj; false (error cleared) if it has none.
bool int_attr(py::handle obj, PyObject* name, int64_t& value) {
  py::object v = optional_attr(obj, name);
  if (!v || !PyLong_Check(v.ptr())) return false;
  value = PyLong_AsLongLong(v.ptr());
  if (value == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
}

// A tuple attribute of obj of at most kMaxDims ints into dims; its length, or -1.
int64_t dims_attr(py::handle obj, PyObject* name, int64_t (&dims)[kMaxDims]) {
  py::object t = optional_attr(obj, name);
  if (!t || !PyTuple_Check(t.ptr()) || PyTuple_GET_SIZE(t.ptr()) > kMaxDims) return -1;
  const int64_t n = PyTuple_GET_SIZE(t.ptr());
  for (int64_t i = 0; i < n; ++i) {
    dims[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(t.ptr(), i));
    if (dims[i] == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return -1;
    }
  }
  return n;
}

// A cupy.ndarray (the class itself: a subclass may change what its
// protocols export) read from its attributes: what its CAI v3 export says,
// CuPy's current stream as the producer's, without CuPy building the dict or
// a DLPack capsule (describe() of a cupy array on a slow lease of the H100's
// host: 2.48 us through DLPack, 0.88 so). False for anything unusual, which
// the protocols then import, with their errors.
bool import_cupy(ImportedArray& a, py::handle obj, const char* name) {
  const CuPy* cupy = CuPy::loaded();
  if (!cupy || Py_TYPE(obj.ptr()) != (PyTypeObject*)cupy->ndarray) return false;
  const Names& n = names();
  int64_t item = 0, shape[kMaxDims], strides[kMaxDims], ptr = 0, device_id = 0;
  py::object dtype = optional_attr(obj, n.dtype), memory = optional_attr(obj, n.data);
  if (!dtype || !memory || !native_numpy_dtype(dtype, a.desc.dtype, item)) return false;
  const int64_t ndim = dims_attr(obj, n.shape, shape);
  if (ndim < 0 || dims_attr(obj, n.strides, strides) != ndim) return false;
  if (!int_attr(memory, n.ptr, ptr) || !int_attr(memory, n.device_id, device_id)) return false;
  py::object stream = py::reinterpret_steal<py::object>(PyObject_CallNoArgs(cupy->get_current_stream));
  int64_t stream_ptr = 0;
  if (!stream || !int_attr(stream, n.ptr, stream_ptr)) {
    PyErr_Clear();
    return false;
  }
  set_geometry(a.desc, ndim, shape, strides, reinterpret_cast<const void*>(static_cast<intptr_t>(ptr)), 0, name);
  a.desc.device = Device::CUDA;
  a.desc.device_id = (int)device_id;
  a.producer_stream = stream_ptr;  // 0, the legacy default stream, as CAI's 1 (stream_wait takes both)
  a.protocol = "cupy";
  return true;
}

void prepare_import() { names(); }

ImportedArray import_array(py::handle obj, const char* name, Access access, const ImportOptions& options) {
  ImportedArray a;
  a.owner = py::reinterpret_borrow<py::object>(obj);
  if (import_numpy(a, obj, name) || import_cupy(a, obj, name)) {
    if (access == Access::Write) check_writable(a, name);
    return a;
  }
  if (PyCapsule_CheckExact(obj.ptr())) {
    consume_capsule(a, obj, name);
  } else {
    // A producer's export can fail for reasons another protocol explains
    // better (numpy: big-endian, read-only without max_version): try those.
    const Names& n = names();
    py::object dlpack_failure;
    if (py::object method = optional_attr(obj, n.dlpack)) {
      try {
        py::object capsule = export_dlpack(obj, method, options);
        consume_capsule(a, capsule, name);
        if (!a.readonly && immutable_producer(obj)) a.readonly = true;
      } catch (py::error_already_set& e) {
        dlpack_failure = py::str(e.value());
        a = ImportedArray{};
        a.owner = py::reinterpret_borrow<py::object>(obj);
      }
    }
    if (!*a.protocol) {
      if (py::object cai = optional_attr(obj, n.cai)) {
        import_cai(a, cai, name, options);
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
  if (access == Access::Write) check_writable(a, name);
  return a;
}

py::dict describe_array(const ImportedArray& a) {
  // Keys interned once: hashed already, and no str built per call.
  static PyObject* const keys[] = {
      Names::intern("protocol"), Names::intern("device"),   Names::intern("device_id"),
      Names::intern("data"),     Names::intern("shape"),    Names::intern("strides"),
      Names::intern("dtype"),    Names::intern("itemsize"), Names::intern("readonly"),
      Names::intern("stream")};
  static PyObject* const devices[] = {Names::intern("cpu"), Names::intern("cuda")};
  static PyObject* const* const dtypes = [] {
    static PyObject* table[kNumDTypes];
    for (int i = 0; i < kNumDTypes; ++i) table[i] = Names::intern(dtype_name(static_cast<DType>(i)));
    return table;
  }();
  py::tuple shape(a.desc.ndim), strides(a.desc.ndim);
  for (int i = 0; i < a.desc.ndim; ++i) {
    PyTuple_SET_ITEM(shape.ptr(), i, py::int_(a.desc.shape[i]).release().ptr());
    PyTuple_SET_ITEM(strides.ptr(), i, py::int_(a.desc.strides[i]).release().ptr());
  }
  const py::object values[] = {
      py::str(a.protocol),
      py::reinterpret_borrow<py::object>(devices[a.desc.device == Device::CPU ? 0 : 1]),
      py::int_(a.desc.device_id),
      py::int_(reinterpret_cast<uintptr_t>(a.desc.data)),
      std::move(shape),
      std::move(strides),
      py::reinterpret_borrow<py::object>(dtypes[static_cast<int>(a.desc.dtype)]),
      py::int_(itemsize(a.desc.dtype)),
      py::bool_(a.readonly),
      a.producer_stream ? py::object(py::int_(a.producer_stream)) : py::object(py::none())};
  py::dict d;
  for (size_t i = 0; i < std::size(keys); ++i) {
    if (PyDict_SetItem(d.ptr(), keys[i], values[i].ptr()) != 0) throw py::error_already_set();
  }
  return d;
}

}  // namespace gpufilt
