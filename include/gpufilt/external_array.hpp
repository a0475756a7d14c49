// gpufilt/external_array.hpp: zero-copy hand-off between a C++ program's
// buffers and Python code (header-only, C++17, pybind11; link
// gpufilt::headers, and pybind11::embed when embedding the interpreter).
//
//   wrap_host / wrap_device  a pointer + shape (+ byte strides, dtype, owner)
//                            as a gpufilt.ExternalArray: numpy views host
//                            memory through __array_interface__; cupy, torch,
//                            jax take device memory through
//                            __cuda_array_interface__ v3 or DLPack. No copy.
//   read_array               any array a Python function returns (numpy,
//                            cupy, torch, ...) as pointer, shape, byte
//                            strides, dtype and device; the ArrayView keeps
//                            the array alive while the C++ side holds it.
//   c_strides / f_strides    byte strides of C- and Fortran-ordered arrays:
//                            layouts are always explicit, never guessed.
//
// Every function needs the GIL (an embedded interpreter or a running Python)
// and `import gpufilt` to work; bad arguments (null pointer with elements,
// negative dimensions, strides not a multiple of the item size, unknown
// dtypes, CUDA devices that do not exist) throw gpufilt::invalid_argument;
// other Python failures propagate as pybind11::error_already_set.
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <complex>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpufilt {
namespace py = pybind11;

// A bad argument, detected in C++ or by gpufilt.from_pointer (its message).
class invalid_argument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Memory order of a dense array: C (last index fastest) or Fortran (first).
enum class Order { C, F };

// numpy dtype name of a C++ element type ("float32", ...).
template <class T>
constexpr const char* dtype_name() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, bool>) return "bool";
  else if constexpr (std::is_same_v<U, float>) return "float32";
  else if constexpr (std::is_same_v<U, double>) return "float64";
  else if constexpr (std::is_same_v<U, std::complex<float>>) return "complex64";
  else if constexpr (std::is_same_v<U, std::complex<double>>) return "complex128";
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) {
    static_assert(sizeof(U) <= 8, "no numpy dtype for this integer");
    return sizeof(U) == 1 ? "int8" : sizeof(U) == 2 ? "int16" : sizeof(U) == 4 ? "int32" : "int64";
  } else if constexpr (std::is_integral_v<U>) {
    static_assert(sizeof(U) <= 8, "no numpy dtype for this integer");
    return sizeof(U) == 1 ? "uint8" : sizeof(U) == 2 ? "uint16" : sizeof(U) == 4 ? "uint32" : "uint64";
  } else {
    static_assert(sizeof(U) == 0, "gpufilt: no numpy dtype for this element type");
    return "";
  }
}

// Byte strides of a dense array of `shape` in `order`.
inline std::vector<int64_t> strides_for(const std::vector<int64_t>& shape, int64_t itemsize, Order order) {
  const size_t n = shape.size();
  std::vector<int64_t> strides(n);
  int64_t step = itemsize;
  for (size_t k = 0; k < n; ++k) {
    size_t i = order == Order::C ? n - 1 - k : k;
    if (shape[i] < 0) throw invalid_argument("shape has a negative dimension " + std::to_string(shape[i]));
    strides[i] = step;
    step *= shape[i] > 0 ? shape[i] : 1;
  }
  return strides;
}
inline std::vector<int64_t> c_strides(const std::vector<int64_t>& shape, int64_t itemsize) {
  return strides_for(shape, itemsize, Order::C);
}
inline std::vector<int64_t> f_strides(const std::vector<int64_t>& shape, int64_t itemsize) {
  return strides_for(shape, itemsize, Order::F);
}

// A Python object that keeps `keep` (and what it owns) alive until Python
// drops it: pass it as `owner` to tie a C++ buffer's lifetime to the views.
inline py::object owner_of(std::shared_ptr<void> keep) {
  auto* held = new std::shared_ptr<void>(std::move(keep));
  return py::capsule(held, "gpufilt.cpp_owner", [](void* p) { delete static_cast<std::shared_ptr<void>*>(p); });
}

namespace detail {

// Runs `f`, turning Python ValueError/TypeError into gpufilt::invalid_argument.
template <class F>
auto checked(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (py::error_already_set& e) {
    if (e.matches(PyExc_ValueError) || e.matches(PyExc_TypeError))
      throw invalid_argument(py::str(e.value()).cast<std::string>());
    throw;
  }
}

inline py::object wrap(void* ptr, const std::vector<int64_t>& shape, const std::string& dtype,
                       const std::vector<int64_t>& strides, const std::string& device, std::intptr_t stream,
                       bool readonly, py::object owner) {
  using namespace pybind11::literals;
  return checked([&] {
    py::object from_pointer = py::module_::import("gpufilt").attr("from_pointer");
    return from_pointer(py::int_(reinterpret_cast<std::uintptr_t>(ptr)), py::tuple(py::cast(shape)), dtype,
                        "strides"_a = strides.empty() ? py::object(py::none()) : py::object(py::tuple(py::cast(strides))),
                        "device"_a = device, "readonly"_a = readonly, "owner"_a = owner,
                        "stream"_a = stream ? py::object(py::int_(stream)) : py::object(py::none()));
  });
}

}  // namespace detail

// Host memory at `ptr` as a gpufilt.ExternalArray (numpy: np.asarray views it).
// strides in bytes, empty = C order; dtype a numpy name ("float32").
inline py::object wrap_host(void* ptr, const std::vector<int64_t>& shape, const std::string& dtype,
                            const std::vector<int64_t>& strides = {}, bool readonly = false,
                            py::object owner = py::none()) {
  return detail::wrap(ptr, shape, dtype, strides, "cpu", 0, readonly, std::move(owner));
}

// Device memory of CUDA device `device_id` at `ptr` (CAI v3 and DLPack).
// `stream`: the cudaStream_t the data is ready on, 0 = already complete.
inline py::object wrap_device(void* ptr, const std::vector<int64_t>& shape, const std::string& dtype,
                              int device_id, const std::vector<int64_t>& strides = {}, std::intptr_t stream = 0,
                              bool readonly = false, py::object owner = py::none()) {
  if (device_id < 0) throw invalid_argument("device_id " + std::to_string(device_id) + " is negative");
  return detail::wrap(ptr, shape, dtype, strides, "cuda:" + std::to_string(device_id), stream, readonly,
                      std::move(owner));
}

// Typed forms: dtype and strides from T and `order`; const T* is read-only.
template <class T>
py::object wrap_host(T* ptr, const std::vector<int64_t>& shape, Order order, py::object owner = py::none()) {
  return wrap_host(const_cast<std::remove_const_t<T>*>(ptr), shape, dtype_name<T>(),
                   strides_for(shape, sizeof(T), order), std::is_const_v<T>, std::move(owner));
}
template <class T>
py::object wrap_device(T* ptr, const std::vector<int64_t>& shape, Order order, int device_id,
                       std::intptr_t stream = 0, py::object owner = py::none()) {
  return wrap_device(const_cast<std::remove_const_t<T>*>(ptr), shape, dtype_name<T>(), device_id,
                     strides_for(shape, sizeof(T), order), stream, std::is_const_v<T>, std::move(owner));
}

// What read_array saw of a Python array. `owner` keeps the array (and its
// memory) alive: destroy ArrayViews with the GIL held.
struct ArrayView {
  void* data = nullptr;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // bytes; may be negative or zero
  std::string dtype;             // numpy name: "float32", "int16", ...
  int64_t itemsize = 0;
  std::string device;            // "cpu" or "cuda"
  int device_id = 0;
  bool readonly = false;
  std::intptr_t stream = 0;      // CAI producer stream to wait on, 0 = none
  py::object owner;

  int ndim() const { return static_cast<int>(shape.size()); }
  bool on_device() const { return device == "cuda"; }
  int64_t size() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
  // Dense in `order` (size-1 and empty dimensions may have any stride).
  bool is_contiguous(Order order) const {
    if (size() == 0) return true;
    std::vector<int64_t> dense = strides_for(shape, itemsize, order);
    for (size_t i = 0; i < shape.size(); ++i)
      if (shape[i] > 1 && strides[i] != dense[i]) return false;
    return true;
  }
  // Byte offset of the element at `index` (one entry per dimension).
  int64_t offset(const std::vector<int64_t>& index) const {
    int64_t o = 0;
    for (size_t i = 0; i < index.size() && i < strides.size(); ++i) o += index[i] * strides[i];
    return o;
  }
  // The data as T*, checking that T matches dtype (and that a read-only
  // array is asked for as const T).
  template <class T>
  T* data_as() const {
    if (dtype != dtype_name<T>())
      throw invalid_argument(std::string("array has dtype ") + dtype + ", not " + dtype_name<T>());
    if (readonly && !std::is_const_v<T>)
      throw invalid_argument("array is read-only: ask for data_as<const T>()");
    return static_cast<T*>(data);
  }
};

// Reads any array gpufilt accepts (numpy, cupy, torch, jax, CAI or DLPack
// producers, buffers) without copying, via gpufilt.describe. Pass the array
// itself, not a DLPack capsule (reading a capsule would consume it).
inline ArrayView read_array(py::handle obj) {
  if (PyCapsule_CheckExact(obj.ptr()))
    throw invalid_argument("read_array takes an array, not a DLPack capsule: a capsule can be consumed only once");
  py::dict seen = detail::checked([&] { return py::dict(py::module_::import("gpufilt").attr("describe")(obj)); });
  ArrayView v;
  v.data = reinterpret_cast<void*>(seen["data"].cast<std::uintptr_t>());
  v.shape = seen["shape"].cast<std::vector<int64_t>>();
  v.strides = seen["strides"].cast<std::vector<int64_t>>();
  v.dtype = seen["dtype"].cast<std::string>();
  v.itemsize = seen["itemsize"].cast<int64_t>();
  v.device = seen["device"].cast<std::string>();
  v.device_id = seen["device_id"].cast<int>();
  v.readonly = seen["readonly"].cast<bool>();
  v.stream = seen["stream"].is_none() ? 0 : seen["stream"].cast<std::intptr_t>();
  v.owner = py::reinterpret_borrow<py::object>(obj);
  return v;
}

}  // namespace gpufilt
