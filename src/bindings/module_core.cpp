// gpufilt._core: always built. Array import (describe) and the CPU kernels.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "bindings/common.hpp"
#include "bindings/ops_array.hpp"
#include "bindings/ops_nn.hpp"
#include "bindings/export.hpp"
#include "bindings/generic.hpp"
#include "bindings/ops_matmul.hpp"
#include "core/binary_propagation.hpp"
#include "core/cpu_backend.hpp"
#include "core/cpu_isa.hpp"
#include "core/fourier.hpp"
#include "core/host_pool.hpp"
#include "core/nonflat.hpp"

namespace py = pybind11;
using namespace gpufilt;

namespace {

// A block of HostPool memory, owned by a Python object: the numpy arrays made
// on it keep that object (their base) alive, and the block goes back to the
// pool when the last of them is dropped.
struct PooledBlock {
  void* data;
  size_t bytes;
  explicit PooledBlock(size_t n) { std::tie(data, bytes) = HostPool::instance().take(n); }
  PooledBlock(const PooledBlock&) = delete;
  PooledBlock& operator=(const PooledBlock&) = delete;
  ~PooledBlock() { HostPool::instance().give_back(data, bytes); }
};

// A new uninitialised C-order numpy array: what np.empty(shape, descr)
// makes, except that results of HostPool::kMinBytes and up are views of a
// pool block (its Python object is their base). Every CPU result gpufilt
// allocates comes from here.
py::object new_result(PyObject* descr, int ndim, const Py_intptr_t* shape) {
  auto& api = py::detail::npy_api::get();
  // The size in bytes; shapes numpy refuses (negative, overflowing) go to
  // numpy for its error.
  size_t bytes = (size_t)py::reinterpret_borrow<py::dtype>(descr).itemsize();
  bool valid = true;
  for (int i = 0; i < ndim; ++i) {
    const size_t n = shape[i] < 0 ? 0 : (size_t)shape[i];
    valid = valid && shape[i] >= 0 && (n == 0 || bytes <= SIZE_MAX / n);
    bytes = valid ? bytes * n : 0;
  }
  std::unique_ptr<PooledBlock> block;
  if (valid && bytes >= HostPool::kMinBytes) block = std::make_unique<PooledBlock>(bytes);
  Py_INCREF(descr);  // PyArray_NewFromDescr steals it
  auto array = py::reinterpret_steal<py::object>(api.PyArray_NewFromDescr_(
      api.PyArray_Type_, descr, ndim, const_cast<Py_intptr_t*>(shape), nullptr, block ? block->data : nullptr,
      block ? py::detail::npy_api::NPY_ARRAY_WRITEABLE_ : 0, nullptr));
  if (!array) throw py::error_already_set();
  if (block && api.PyArray_SetBaseObject_(array.ptr(), py::cast(std::move(block)).release().ptr()) < 0)
    throw py::error_already_set();
  return array;
}

// CPU calls: no device to set, no stream (the argument is ignored).
struct CpuPolicy {
  static constexpr Device device = Device::CPU;
  explicit CpuPolicy(intptr_t) {}
  ImportOptions options() const { return {}; }
  LineBackend& backend() { return backend_; }
  intptr_t stream() const { return 0; }
  void enter(CallArrays) {}
  // The output of a call given none: a base-class numpy array of the numpy
  // input's shape and dtype.
  static py::object new_output(py::handle input) {
    auto& api = py::detail::npy_api::get();
    if (!api.PyArray_Check_(input.ptr())) throw py::type_error("output=None needs a numpy array as input");
    const auto* a = py::detail::array_proxy(input.ptr());
    return new_result(a->descr, a->nd, reinterpret_cast<const Py_intptr_t*>(a->dimensions));
  }
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

void register_host_pool(py::module_& m) {
  py::class_<PooledBlock>(m, "_PooledBlock");
  m.def("empty", [](const std::vector<Py_intptr_t>& shape, const py::dtype& dtype) {
    return new_result(dtype.ptr(), (int)shape.size(), shape.data());
  }, py::arg("shape"), py::arg("dtype"),
     "np.empty(shape, dtype) for a CPU result: from POOL_MIN_BYTES up, on the CPU result pool "
     "(core/host_pool.hpp).");
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

// True when `a` holds `dtype`'s numbers as numpy counts dtypes equal: a
// dtype made by astype or newbyteorder("=") is a descriptor of its own, which
// py::dtype::is (identity) would refuse.
bool has_dtype(const py::array& a, const py::dtype& dtype) {
  return py::detail::npy_api::get().PyArray_EquivTypes_(a.dtype().ptr(), dtype.ptr());
}

// A C-order uint8 numpy array's data, refused (not copied) otherwise: the
// arrays given to _propagate_binary are gpufilt's own intermediates.
uint8_t* c_order_bytes(const py::array& a, const char* name, bool write) {
  if (!has_dtype(a, py::dtype::of<uint8_t>()) || !(a.flags() & py::array::c_style) ||
      (write && !a.writeable()))
    throw py::value_error(std::string(name) + " must be a C-order" + (write ? ", writable" : "") + " uint8 array");
  return static_cast<uint8_t*>(const_cast<void*>(a.data()));
}

void register_binary_propagation(py::module_& m) {
  m.def("_propagate_binary", [](const py::array& values, const py::object& changeable, const py::array& offsets,
                                int spread, int border) {
    uint8_t* v = c_order_bytes(values, "values", true);
    const uint8_t* c = nullptr;
    if (!changeable.is_none()) {
      const auto mask = changeable.cast<py::array>();
      if (mask.ndim() != values.ndim() || !std::equal(mask.shape(), mask.shape() + mask.ndim(), values.shape()))
        throw py::value_error("changeable must have the shape of values");
      c = c_order_bytes(mask, "changeable", false);
    }
    const std::vector<int64_t> shape(values.shape(), values.shape() + values.ndim());
    if (!has_dtype(offsets, py::dtype::of<int64_t>()) || !(offsets.flags() & py::array::c_style) ||
        offsets.ndim() != 2 || offsets.shape(1) != values.ndim())
      throw py::value_error("offsets must be a C-order int64 array of shape (taps, values.ndim)");
    const auto* o = static_cast<const int64_t*>(offsets.data());
    const std::vector<int64_t> deltas(o, o + offsets.size());
    py::gil_scoped_release nogil;
    propagate_binary(v, c, shape, deltas, (uint8_t)(spread != 0), (uint8_t)(border != 0));
  }, py::arg("values"), py::arg("changeable"), py::arg("offsets"), py::arg("spread"), py::arg("border"),
     "Binary dilation (spread=1) or erosion (spread=0) of `values` in place, repeated until nothing changes "
     "(core/binary_propagation.hpp); the window of i is i + each row of `offsets` and must hold i itself.");
}

// One of the Fourier filters' dtypes (float32, float64, complex64,
// complex128) viewed with its strides; ValueError otherwise.
FourierArray fourier_array(const py::array& a, const char* name) {
  const char kind = a.dtype().kind();
  const auto size = a.dtype().itemsize();
  const bool is_complex = kind == 'c';
  if ((kind != 'f' && kind != 'c') || (size != (is_complex ? 8 : 4) && size != (is_complex ? 16 : 8)) ||
      !a.dtype().attr("isnative").cast<bool>())
    throw py::value_error(std::string(name) + " must be float32, float64, complex64 or complex128 (native order)");
  FourierArray f;
  f.data = static_cast<char*>(const_cast<void*>(a.data()));
  f.strides.assign(a.strides(), a.strides() + a.ndim());
  f.is_double = size == (is_complex ? 16 : 8);
  f.is_complex = is_complex;
  return f;
}

void register_fourier(py::module_& m) {
  m.def("_fourier_multiply", [](const py::array& input, py::array& output, const py::list& tables,
                                 const std::string& factor) {
    const FourierFactor kind = fourier_factor(factor);
    const FourierArray in = fourier_array(input, "input"), out = fourier_array(output, "output");
    if (!output.writeable()) throw py::value_error("output must be writable");
    if (input.ndim() != output.ndim() || !std::equal(input.shape(), input.shape() + input.ndim(), output.shape()))
      throw py::value_error("output must have the shape of input");
    if ((py::ssize_t)tables.size() != input.ndim()) throw py::value_error("one table (or None) per axis");
    if (in.is_complex && !out.is_complex) throw py::value_error("a complex input needs a complex output");
    const std::vector<int64_t> shape(input.shape(), input.shape() + input.ndim());
    std::vector<std::vector<double>> entries(tables.size());
    for (size_t ax = 0; ax < tables.size(); ++ax) {
      if (tables[ax].is_none()) continue;
      const auto t = tables[ax].cast<py::array_t<double, py::array::c_style | py::array::forcecast>>();
      if (t.ndim() != 1 || t.shape(0) != shape[ax]) throw py::value_error("a table has one entry per element of its axis");
      entries[ax].assign(t.data(), t.data() + t.shape(0));
    }
    py::gil_scoped_release nogil;
    fourier_multiply(in, out, shape, entries, kind);
  }, py::arg("input"), py::arg("output"), py::arg("tables"), py::arg("factor"),
     "output = input times the Fourier filters' factor (core/fourier.hpp) of the per-axis tables: 'product' of "
     "their entries, 'phase' exp(i * their sum), or 'ellipsoid' of their sum (2-D and 3-D).");
}


// The dtype of a C-order array given to _nonflat_extreme, one it has a kernel for.
DType nonflat_dtype(const py::array& a, const char* name) {
  const char kind = a.dtype().kind();
  const int64_t size = a.itemsize();
  if (!(a.flags() & py::array::c_style)) throw py::value_error(std::string(name) + " must be a C-order array");
  if (kind == 'b') return DType::Bool;
  if (kind == 'f' && size == 4) return DType::Float32;
  if (kind == 'f' && size == 8) return DType::Float64;
  static const DType ints[2][4] = {{DType::Int8, DType::Int16, DType::Int32, DType::Int64},
                                   {DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64}};
  const int k = size == 1 ? 0 : size == 2 ? 1 : size == 4 ? 2 : size == 8 ? 3 : -1;
  if ((kind == 'i' || kind == 'u') && k >= 0) return ints[kind == 'u'][k];
  throw py::type_error(std::string(name) + ": no non-flat kernel for dtype " + py::str(a.dtype()).cast<std::string>());
}

void register_nonflat(py::module_& m) {
  m.def("_nonflat_extreme", [](const py::array& padded, const py::array& heights, const py::array& offsets,
                               double first_height, bool erosion, py::array& out) {
    const DType dtype = nonflat_dtype(padded, "padded");
    if (!has_dtype(heights, padded.dtype()) || !(heights.flags() & py::array::c_style) || heights.ndim() != 1)
      throw py::value_error("heights must be a C-order 1-d array of padded's dtype");
    if (!has_dtype(offsets, py::dtype::of<int64_t>()) || !(offsets.flags() & py::array::c_style) ||
        offsets.ndim() != 1 || offsets.shape(0) != heights.shape(0) || offsets.shape(0) == 0)
      throw py::value_error("offsets must be a C-order int64 array of one offset per height, at least one");
    const bool out_float = dtype == DType::Float32 && has_dtype(out, py::dtype::of<float>());
    if (!(out_float || has_dtype(out, py::dtype::of<double>())) || !(out.flags() & py::array::c_style) ||
        !out.writeable() || out.ndim() != padded.ndim() || out.ndim() == 0)
      throw py::value_error("out must be a writable C-order float64 array (or float32, for float32 padded) of "
                            "padded's rank (at least 1)");
    const int64_t ndim = out.ndim(), item = padded.itemsize();
    std::vector<int64_t> shape(out.shape(), out.shape() + ndim), padded_shape(padded.shape(), padded.shape() + ndim),
        strides(ndim);
    for (int64_t ax = 0; ax < ndim; ++ax) strides[ax] = padded.strides(ax) / item;
    const auto* o = static_cast<const int64_t*>(offsets.data());
    const std::vector<int64_t> offs(o, o + offsets.shape(0));
    check_nonflat_reads(shape, padded_shape, strides, offs, (int64_t)padded.size());
    py::gil_scoped_release nogil;
    nonflat_extreme(padded.data(), dtype, shape, strides, offs, first_height, heights.data(), erosion,
                    out.mutable_data(), out_float);
  }, py::arg("padded"), py::arg("heights"), py::arg("offsets"), py::arg("first_height"), py::arg("erosion"),
     py::arg("out"),
     "Non-flat grey erosion or dilation into `out` (core/nonflat.hpp): out[i] = the minimum (maximum) over taps t "
     "of padded[base(i) + offsets[t]] plus the height, in scipy's arithmetic.");
}
}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "gpufilt CPU kernels and array import";
  m.attr("__version__") = GPUFILT_VERSION;
  prepare_import();
  // Allocation failures as MemoryError, as scipy's: std::bad_alloc (with a
  // message saying what ran out) and std::length_error, which in gpufilt only
  // a container asked for more than it can ever hold throws. (Translators
  // are shared by both modules.)
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const std::bad_alloc&) {
      PyErr_SetString(PyExc_MemoryError, "gpufilt could not allocate the host memory this call needs");
    } catch (const std::length_error&) {
      PyErr_SetString(PyExc_MemoryError, "gpufilt would need more host memory for this call than can exist");
    }
  });
  register_kernels<CpuPolicy>(m);
  register_generic<CpuPolicy>(m);
  register_array_ops<CpuPolicy>(m);
  register_nn_ops<CpuPolicy>(m);
  register_matmul<CpuPolicy>(m);
  register_export(m);
  m.def("build_info", &build_info, "How this module was built.");
  register_host_pool(m);
  register_binary_propagation(m);
  register_nonflat(m);
  register_fourier(m);
  m.def("_set_call_threads", &set_cpu_call_threads, py::arg("threads"),
        "Sets this thread's CPU thread count for the calls it makes (0: the default); returns the one before.");
  m.def("cpu_isa_info", &cpu_isa_info, "The vector instructions the CPU kernels use and the CPU supports.");
  m.def("_set_cpu_isa", &set_cpu_isa, py::arg("isa"),
        "Caps the vector instructions of the CPU kernels ('baseline', 'avx2', 'avx512'); returns the cap before.");
}
