// Bindings of generic_filter and generic_filter1d on the CPU (core/generic.hpp),
// registered in gpufilt._core only. The caller's function comes as one of:
//   - a PyCapsule: a scipy.LowLevelCallable's (its name is the C signature,
//     its context the user data) or scipy's legacy unnamed capsule;
//   - (signature, address, user_data): a C function by address (numba's cfunc);
//   - a Python callable, called as scipy calls it, through a C trampoline.
// C functions run at C speed on the call's threads, without the GIL when
// there are several; Python callables on the calling thread, with the GIL.
// A function that fails (returns 0) raises the Python error it set, else
// RuntimeError with scipy's words.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

#include "bindings/common.hpp"
#include "core/cpu_backend.hpp"
#include "core/generic.hpp"

namespace gpufilt {

// scipy.ndimage's accepted LowLevelCallable signatures (_nd_image.c) on a
// 64-bit platform: npy_intp is intptr_t, long and long long there.
inline const char* const kWindowSignatures[] = {
    "int (double *, intptr_t, double *, void *)", "int (double *, npy_intp, double *, void *)",
    "int (double *, long, double *, void *)", "int (double *, long long, double *, void *)"};
inline const char* const kLineSignatures[] = {
    "int (double *, intptr_t, double *, intptr_t, void *)", "int (double *, npy_intp, double *, npy_intp, void *)",
    "int (double *, long, double *, long, void *)", "int (double *, long long, double *, long long, void *)"};

// A C function and its user data, from a capsule or (signature, address,
// user_data); nullopt for anything else (a Python callable). ValueError, as
// scipy's, for a signature it does not take.
template <size_t N>
std::optional<std::pair<void*, void*>> c_function(py::handle function, const char* const (&signatures)[N]) {
  std::string signature;
  void *address = nullptr, *user_data = nullptr;
  if (PyCapsule_CheckExact(function.ptr())) {
    const char* name = PyCapsule_GetName(function.ptr());
    address = PyCapsule_GetPointer(function.ptr(), name);
    if (!address) throw py::error_already_set();
    user_data = PyCapsule_GetContext(function.ptr());
    if (!name) return std::make_pair(address, user_data);  // scipy's legacy capsule: no signature to check
    signature = name;
  } else if (PyTuple_CheckExact(function.ptr()) && PyTuple_GET_SIZE(function.ptr()) == 3) {
    auto t = py::reinterpret_borrow<py::tuple>(function);
    signature = t[0].cast<std::string>();
    address = reinterpret_cast<void*>(t[1].cast<uintptr_t>());
    user_data = reinterpret_cast<void*>(t[2].cast<uintptr_t>());
    if (!address) throw py::value_error("function: a C function at address 0");
  } else {
    return std::nullopt;
  }
  for (const char* accepted : signatures)
    if (signature == accepted) return std::make_pair(address, user_data);
  std::string expected;
  for (const char* accepted : signatures) expected += std::string(expected.empty() ? "" : ", ") + "'" + accepted + "'";
  throw py::value_error("Invalid scipy.LowLevelCallable signature \"" + signature + "\". Expected one of: [" +
                        expected + "]");
}

// A Python callable and its extra arguments, for the trampolines below.
struct PythonFunction {
  py::object function;
  py::tuple extra_arguments;
  py::object extra_keywords;  // a dict, or None
  PyObject* call(std::initializer_list<py::handle> arrays) const {
    const size_t n = arrays.size(), extra = extra_arguments.size();
    py::tuple args(n + extra);
    size_t i = 0;
    for (py::handle a : arrays) args[i++] = a;
    for (size_t k = 0; k < extra; ++k) args[i++] = extra_arguments[k];
    return PyObject_Call(function.ptr(), args.ptr(), extra_keywords.is_none() ? nullptr : extra_keywords.ptr());
  }
};

// A new float64 array holding values[0 .. n).
inline py::array_t<double> double_array(const double* values, intptr_t n) {
  py::array_t<double> a(n);
  if (n) std::memcpy(a.mutable_data(), values, n * sizeof(double));
  return a;
}

// scipy's calls: function(window, *extra_arguments, **extra_keywords) -> float;
// function(input_line, output_line, *extra_arguments, **extra_keywords),
// writing output_line. The arrays are the caller's own (copies): keeping one
// after the call is safe. 0 with the Python error set when the call fails.
inline int call_python_window(double* values, intptr_t count, double* result, void* data) {
  try {
    const auto& f = *static_cast<const PythonFunction*>(data);
    py::array_t<double> window = double_array(values, count);
    PyObject* value = f.call({window});
    if (!value) return 0;
    *result = PyFloat_AsDouble(value);
    Py_DECREF(value);
    return PyErr_Occurred() ? 0 : 1;
  } catch (py::error_already_set& e) {
    e.restore();
    return 0;
  }
}

inline int call_python_line(double* in, intptr_t in_length, double* out, intptr_t out_length, void* data) {
  try {
    const auto& f = *static_cast<const PythonFunction*>(data);
    py::array_t<double> input_line = double_array(in, in_length), output_line = double_array(out, out_length);
    const double* written = output_line.data();
    PyObject* value = f.call({input_line, output_line});
    if (!value) return 0;
    Py_DECREF(value);
    // A function may resize output_line (refcheck=False). Where its values
    // stayed, the first of them count; where they moved, none do, and the
    // line stays as given (zeros): scipy's line, which output_line views,
    // keeps what was written into it.
    const intptr_t kept = output_line.data() == written ? std::min<intptr_t>(output_line.size(), out_length) : 0;
    if (kept) std::memcpy(out, written, kept * sizeof(double));
    return 1;
  } catch (py::error_already_set& e) {
    e.restore();
    return 0;
  }
}

// Runs `kernel(function, user_data)` with a C function (threads: the call's;
// the GIL released when there are several) or a Python callable (one thread,
// the GIL held), and turns a failed function into scipy's exception.
template <class Fn, class Kernel, size_t N>
void run_with_function(py::handle function, const py::tuple& extra_arguments, const py::object& extra_keywords,
                       const char* const (&signatures)[N], Fn trampoline, const Kernel& kernel) {
  try {
    if (auto c = c_function(function, signatures)) {
      {
        std::optional<py::gil_scoped_release> nogil;
        if (cpu_max_threads() > 1) nogil.emplace();
        kernel(reinterpret_cast<Fn>(c->first), c->second);
      }
      // A function may set a Python error and still return 1: scipy raises it.
      if (PyErr_Occurred()) throw py::error_already_set();
      return;
    }
    PythonFunction python{py::reinterpret_borrow<py::object>(function), extra_arguments, extra_keywords};
    const int64_t threads_before = set_cpu_call_threads(1);
    try {
      kernel(trampoline, &python);
    } catch (...) {
      set_cpu_call_threads(threads_before);
      throw;
    }
    set_cpu_call_threads(threads_before);
  } catch (const CallbackFailed& failed) {
    if (PyErr_Occurred()) throw py::error_already_set();
    throw std::runtime_error(failed.what());
  }
}

template <class Policy>
void register_generic(py::module_& m) {
  m.def("generic_filter", [](py::handle input, py::handle output, int ndim, int64_t ntaps,
                             py::handle offsets, int mode, double cval, py::handle function,
                             const py::tuple& extra_arguments, const py::object& extra_keywords) {
    Footprint filter;
    filter.reduce = Reduce::Call;
    filter.ndim = ndim;
    filter.ntaps = ntaps;
    filter.offsets = parse_values<int64_t>(offsets, "offsets");
    if (mode < 0 || mode > (int)Mode::Constant) throw py::value_error("unknown boundary mode code");
    filter.mode = static_cast<Mode>(mode);
    Policy policy(0);
    InputOutput io(input, output, policy);
    run_with_function(function, extra_arguments, extra_keywords, kWindowSignatures, &call_python_window,
                      [&](WindowFunction f, void* user_data) {
                        filter.function = f;
                        filter.user_data = user_data;
                        run_footprint(policy.backend(), io.in.desc, io.out.desc, filter, cval);
                      });
  }, py::arg("input"), py::arg("output"), py::arg("ndim"), py::arg("ntaps"), py::arg("offsets"), py::arg("mode"),
     py::arg("cval"), py::arg("function"), py::arg("extra_arguments"), py::arg("extra_keywords"),
     "generic_filter from input into output (real, same shape): `function` (a capsule, (signature, address, "
     "user_data) or a Python callable) of the values at `offsets` (ntaps x ndim) around each element.");

  m.def("generic_filter1d", [](py::handle input, py::handle output, int axis, int64_t size, int64_t origin, int mode,
                               double cval, py::handle function, const py::tuple& extra_arguments,
                               const py::object& extra_keywords) {
    if (mode < 0 || mode > (int)Mode::Constant) throw py::value_error("unknown boundary mode code");
    Policy policy(0);
    InputOutput io(input, output, policy);
    if (io.in.desc.ndim > 0 && (axis < 0 || axis >= io.in.desc.ndim)) throw py::value_error("axis out of range");
    run_with_function(function, extra_arguments, extra_keywords, kLineSignatures, &call_python_line,
                      [&](LineFunction f, void* user_data) {
                        generic_filter1d(io.in.desc, io.out.desc, axis, size, origin, static_cast<Mode>(mode), cval,
                                         f, user_data);
                      });
  }, py::arg("input"), py::arg("output"), py::arg("axis"), py::arg("size"), py::arg("origin"), py::arg("mode"),
     py::arg("cval"), py::arg("function"), py::arg("extra_arguments"), py::arg("extra_keywords"),
     "generic_filter1d from input into output (real, same shape) along `axis`: `function` (a capsule, "
     "(signature, address, user_data) or a Python callable) of each line extended by the window.");
}

}  // namespace gpufilt
