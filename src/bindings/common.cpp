#include "bindings/common.hpp"

#include <pybind11/numpy.h>

#include <string>

namespace gpufilt {

template <class T>
std::vector<T> parse_values(py::handle values, const char* what) {
  // An array of T in C order is read in place; other arrays convert where
  // numpy's safe casting allows (no float or string offsets).
  const auto a = py::array_t<T, py::array::c_style>::ensure(values);
  if (!a) throw py::type_error(std::string(what) + " must be an array or a sequence of numbers");
  return std::vector<T>(a.data(), a.data() + a.size());
}
template std::vector<int64_t> parse_values<int64_t>(py::handle, const char*);
template std::vector<double> parse_values<double>(py::handle, const char*);

namespace {

Mode parse_mode(py::handle code) {
  int mode = code.cast<int>();
  if (mode < 0 || mode > 4) throw py::value_error("unknown boundary mode code " + std::to_string(mode));
  return static_cast<Mode>(mode);
}

std::string where(const ArrayDesc& d) {
  return d.device == Device::CPU ? std::string("the CPU") : "CUDA device " + std::to_string(d.device_id);
}

}  // namespace

namespace {

LineKind parse_kind(py::handle name) {
  static const std::pair<const char*, LineKind> kinds[] = {{"correlate", LineKind::Correlate},
                                                           {"uniform", LineKind::Uniform},
                                                           {"minimum", LineKind::Minimum},
                                                           {"maximum", LineKind::Maximum}};
  if (PyUnicode_Check(name.ptr()))
    for (const auto& [text, kind] : kinds)
      if (PyUnicode_CompareWithASCIIString(name.ptr(), text) == 0) return kind;
  throw py::value_error("unknown filter pass kind '" + py::str(name).cast<std::string>() + "'");
}

}  // namespace

// Read through the C API where it is a plain tuple (as ndimage memoises them):
// every separable call parses its passes, and pybind's casts cost a large
// part of a call on a tiny array.
std::vector<LinePass> parse_passes(const py::sequence& passes) {
  std::vector<LinePass> plan;
  plan.reserve(passes.size());
  for (py::handle item : passes) {
    if (!PyTuple_Check(item.ptr()) || PyTuple_GET_SIZE(item.ptr()) != 6)
      throw py::value_error("a filter pass is (axis, kind, weights, size, origin, mode)");
    auto field = [&](int i) { return py::handle(PyTuple_GET_ITEM(item.ptr(), i)); };
    LinePass p;
    p.axis = field(0).cast<int>();
    p.kind = parse_kind(field(1));
    const py::handle weights = field(2);
    if (PyTuple_CheckExact(weights.ptr())) {
      const Py_ssize_t n = PyTuple_GET_SIZE(weights.ptr());
      p.weights.resize(n);
      for (Py_ssize_t k = 0; k < n; ++k) p.weights[k] = py::handle(PyTuple_GET_ITEM(weights.ptr(), k)).cast<double>();
    } else {
      p.weights = parse_values<double>(weights, "weights");
    }
    p.size = field(3).cast<int64_t>();
    p.origin = field(4).cast<int64_t>();
    p.mode = parse_mode(field(5));
    plan.push_back(std::move(p));
  }
  return plan;
}

Footprint parse_footprint(const py::tuple& t) {
  if (t.size() != 7) throw py::value_error("a footprint is (reduce, ndim, ntaps, offsets, weights, rank, mode)");
  Footprint f;
  std::string reduce = t[0].cast<std::string>();
  if (reduce == "sum") f.reduce = Reduce::Sum;
  else if (reduce == "minimum") f.reduce = Reduce::Minimum;
  else if (reduce == "maximum") f.reduce = Reduce::Maximum;
  else if (reduce == "rank") f.reduce = Reduce::Rank;
  else throw py::value_error("unknown footprint reduction '" + reduce + "'");
  f.ndim = t[1].cast<int>();
  f.ntaps = t[2].cast<int64_t>();
  f.offsets = parse_values<int64_t>(t[3], "offsets");
  f.weights = parse_values<double>(t[4], "weights");
  f.rank = t[5].cast<int64_t>();
  f.mode = parse_mode(t[6]);
  return f;
}

Elementwise parse_elementwise(const std::string& op) {
  if (op == "add") return Elementwise::Add;
  if (op == "subtract") return Elementwise::Subtract;
  if (op == "square") return Elementwise::Square;
  if (op == "sqrt") return Elementwise::Sqrt;
  if (op == "multiply") return Elementwise::Multiply;
  throw py::value_error("unknown elementwise operation '" + op +
                        "'; use 'add', 'subtract', 'multiply', 'square' or 'sqrt'");
}

void require_device(CallArrays arrays, const char* const* names,
                    Device device) {
  const char* runs_on = device == Device::CPU ? "the CPU" : "a CUDA device";
  for (size_t i = 0; i < arrays.size(); ++i)
    if (arrays[i]->desc.device != device)
      throw py::value_error(std::string(names[i]) + " is on " + where(arrays[i]->desc) + " but this call runs on " +
                            runs_on + "; all arrays of one call must be on one device");
  for (size_t i = 1; i < arrays.size(); ++i)
    if (arrays[i]->desc.device_id != arrays[0]->desc.device_id)
      throw py::value_error(std::string(names[0]) + " is on " + where(arrays[0]->desc) + " and " + names[i] +
                            " on " + where(arrays[i]->desc) + "; all arrays of one call must be on one device");
}

}  // namespace gpufilt
