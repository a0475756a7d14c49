// gpufilt._cuda: built when nvcc is found. The CUDA kernels behind the same
// binding functions as _core, plus the CUDA runtime report for info().
// Host-compiled: it reaches CUDA only through src/cuda/api.hpp.
#include <pybind11/pybind11.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "bindings/common.hpp"
#include "bindings/ops_array.hpp"
#include "bindings/ops_nn.hpp"
#include "bindings/ops_matmul.hpp"
#include "core/nonflat.hpp"
#include "cuda/api.hpp"

namespace py = pybind11;
using namespace gpufilt;

namespace {

py::dict runtime_info() {
  cuda::RuntimeInfo r = cuda::runtime_info();
  py::list devices;
  for (const auto& d : r.devices) {
    py::dict dev;
    dev["index"] = d.index;
    dev["name"] = d.name;
    dev["compute_capability"] = py::make_tuple(d.major, d.minor);
    dev["total_memory"] = d.total_memory;
    dev["multiprocessors"] = d.multiprocessors;
    devices.append(dev);
  }
  py::dict info;
  info["driver_version"] = r.driver_version;
  info["runtime_version"] = r.runtime_version;
  info["unusable_reason"] = r.unusable_reason;
  info["devices"] = devices;
  return info;
}

// Decided once per process: drivers and devices do not come and go.
const std::string& unusable_reason() {
  static const std::string reason = cuda::runtime_info().unusable_reason;
  return reason;
}

py::dict build_info() {
  py::dict d;
  d["version"] = GPUFILT_VERSION;
  d["cuda_compiler"] = GPUFILT_CUDA_COMPILER;
  d["cuda_architectures"] = GPUFILT_CUDA_ARCHITECTURES;
  return d;
}

// CUDA calls: run on the input's device, on `stream`, after the producers'
// CAI streams.
struct CudaPolicy {
  static constexpr Device device = Device::CUDA;
  explicit CudaPolicy(intptr_t stream) : stream_(stream), backend_(stream) {}
  ImportOptions options() const {
    ImportOptions o;
    o.stream = stream_;
    o.pointer_device = &cuda::pointer_device;
    return o;
  }
  LineBackend& backend() { return backend_; }
  intptr_t stream() const { return stream_; }
  // The Python side allocates CUDA outputs, with the input's library.
  static py::object new_output(py::handle) { throw py::type_error("output must be an array for a CUDA call"); }
  void enter(CallArrays arrays) {
    guard_.emplace(arrays[0]->desc.device_id);
    for (const ImportedArray* a : arrays)
      if (a->producer_stream) cuda::stream_wait(a->producer_stream, stream_);
  }

 private:
  intptr_t stream_;
  cuda::CudaBackend backend_;
  std::optional<cuda::DeviceGuard> guard_;
};

bool c_contiguous(const ArrayDesc& a) {
  int64_t inner = itemsize(a.dtype);
  for (int d = a.ndim - 1; d >= 0; inner *= a.shape[d], --d)
    if (a.shape[d] != 1 && a.strides[d] != inner) return false;
  return true;
}

// A C-contiguous array of one-byte elements (bool, int8, uint8) of `shape`.
void require_byte_image(const ImportedArray& a, const char* name, const ArrayDesc& shape) {
  if (itemsize(a.desc.dtype) != 1 || !same_shape(a.desc, shape) || !c_contiguous(a.desc))
    throw py::value_error(std::string(name) + " must be a C-contiguous array of bool, int8 or uint8 elements "
                          "of the input's shape");
}

// binary_steps (cuda/api.hpp) from Python: arrays checked, GIL released.
void run_binary_steps(py::handle source, py::handle first, py::handle second, py::handle changeable,
                      const std::vector<int64_t>& offsets, bool dilation, bool border, int64_t first_step,
                      int64_t count, py::handle last_change, intptr_t stream) {
  CudaPolicy policy(stream);
  ImportedArray in = import_array(source, "source", Access::Read, policy.options());
  ImportedArray a = import_array(first, "first", Access::Write, policy.options());
  // No second buffer for one step: `first` stands in, never written twice.
  if (second.is_none() && count > 1) throw py::value_error("second may be None for one step only");
  ImportedArray b = import_array(second.is_none() ? first : second, "second", Access::Write, policy.options());
  ImportedArray counter = import_array(last_change, "last_change", Access::Write, policy.options());
  std::optional<ImportedArray> keep;
  if (!changeable.is_none()) keep = import_array(changeable, "changeable", Access::Read, policy.options());
  static const char* const names[] = {"source", "first", "second", "last_change", "changeable"};
  const ImportedArray* arrays[] = {&in, &a, &b, &counter, keep ? &*keep : nullptr};
  const CallArrays call(arrays, keep ? 5 : 4);
  require_device(call, names, Device::CUDA);
  for (int i = 0; i < (keep ? 5 : 4); ++i)
    if (i != 3) require_byte_image(*arrays[i], names[i], in.desc);
  if (counter.desc.dtype != DType::Int64 || counter.desc.size() < 1)
    throw py::value_error("last_change must be an int64 array of at least one element");
  if (reinterpret_cast<uintptr_t>(a.desc.data) % 16 || reinterpret_cast<uintptr_t>(b.desc.data) % 16)
    throw py::value_error("first and second must be 16-byte aligned (the kernel stores 16 bytes at once)");
  if ((!second.is_none() && may_overlap(a.desc, b.desc)) || may_overlap(a.desc, in.desc) ||
      (in.desc.data != b.desc.data && may_overlap(b.desc, in.desc)))
    throw py::value_error("first must share memory with neither source nor second, and second only all of source");
  policy.enter(call);
  py::gil_scoped_release nogil;
  cuda::binary_steps(in.desc, a.desc, b.desc, keep ? &keep->desc : nullptr, offsets, dilation, border, first_step,
                     count, reinterpret_cast<int64_t*>(counter.desc.data), stream);
}

// binary_box (cuda/api.hpp) from Python: arrays checked, GIL released.
void run_binary_box(py::handle source, py::handle output, py::handle scratch, const std::vector<int64_t>& lo,
                    const std::vector<int64_t>& hi, bool dilation, bool border, intptr_t stream) {
  CudaPolicy policy(stream);
  ImportedArray in = import_array(source, "source", Access::Read, policy.options());
  ImportedArray out = import_array(output, "out", Access::Write, policy.options());
  // No scratch for one pass: `out` stands in, never read.
  ImportedArray between = import_array(scratch.is_none() ? output : scratch, "scratch", Access::Write,
                                       policy.options());
  static const char* const names[] = {"source", "out", "scratch"};
  const ImportedArray* arrays[] = {&in, &out, &between};
  const CallArrays call(arrays, 3);
  require_device(call, names, Device::CUDA);
  for (int i = 0; i < 3; ++i) require_byte_image(*arrays[i], names[i], in.desc);
  int passes = 0;  // (binary_box checks lo and hi)
  for (size_t d = 0; d < std::min(lo.size(), hi.size()); ++d) passes += hi[d] > lo[d];
  if (scratch.is_none() && passes > 1) throw py::value_error("scratch may be None for a box of one pass only");
  if (may_overlap(out.desc, in.desc) ||
      (!scratch.is_none() && (may_overlap(between.desc, in.desc) || may_overlap(between.desc, out.desc))))
    throw py::value_error("source, out and scratch must not share memory");
  policy.enter(call);
  py::gil_scoped_release nogil;
  cuda::binary_box(in.desc, out.desc, between.desc, lo, hi, dilation, border, stream);
}

// binary_propagate (cuda/api.hpp) from Python: arrays checked, GIL released.
void run_binary_propagate(py::handle source, py::handle output, py::handle changeable,
                          const std::vector<int64_t>& offsets, bool border, intptr_t stream) {
  CudaPolicy policy(stream);
  ImportedArray in = import_array(source, "source", Access::Read, policy.options());
  ImportedArray out = import_array(output, "out", Access::Write, policy.options());
  std::optional<ImportedArray> keep;
  if (!changeable.is_none()) keep = import_array(changeable, "changeable", Access::Read, policy.options());
  static const char* const names[] = {"source", "out", "changeable"};
  const ImportedArray* arrays[] = {&in, &out, keep ? &*keep : nullptr};
  const CallArrays call(arrays, keep ? 3 : 2);
  require_device(call, names, Device::CUDA);
  for (int i = 0; i < (keep ? 3 : 2); ++i) require_byte_image(*arrays[i], names[i], in.desc);
  if (may_overlap(out.desc, in.desc) || (keep && may_overlap(out.desc, keep->desc)))
    throw py::value_error("out must share memory with neither source nor changeable");
  policy.enter(call);
  py::gil_scoped_release nogil;
  cuda::binary_propagate(in.desc, out.desc, keep ? &keep->desc : nullptr, offsets, border, stream);
}

// _core._nonflat_extreme's CUDA twin: `padded` and `out` on the device,
// `heights` and `offsets` numpy arrays (the kernel takes them by value).
void run_nonflat_extreme(py::handle padded, const py::array& heights, const py::array& offsets,
                         double first_height, bool erosion, py::handle out, intptr_t stream) {
  CudaPolicy policy(stream);
  ImportedArray in = import_array(padded, "padded", Access::Read, policy.options());
  ImportedArray result = import_array(out, "out", Access::Write, policy.options());
  static const char* const names[] = {"padded", "out"};
  require_device({&in, &result}, names, Device::CUDA);
  const DType dtype = in.desc.dtype;
  if (dtype == DType::Bool || dtype == DType::Float16 || dtype == DType::BFloat16 || dtype == DType::Complex64 ||
      dtype == DType::Complex128)
    throw py::type_error("padded: no non-flat kernel for its dtype (integers, float32 and float64 have one)");
  if (!c_contiguous(in.desc)) throw py::value_error("padded must be C-contiguous");
  const bool float_out = result.desc.dtype == DType::Float64 ||
                         (result.desc.dtype == DType::Float32 && dtype == DType::Float32);
  if (!float_out || !c_contiguous(result.desc) || result.desc.ndim != in.desc.ndim || result.desc.ndim == 0)
    throw py::value_error("out must be a C-contiguous float64 (or, for float32 padded, float32) array of "
                          "padded's rank (at least 1)");
  if (heights.ndim() != 1 || heights.itemsize() != itemsize(dtype) || !(heights.flags() & py::array::c_style))
    throw py::value_error("heights must be a C-order 1-d array of padded's dtype");
  if (!offsets.dtype().is(py::dtype::of<int64_t>()) || !(offsets.flags() & py::array::c_style) ||
      offsets.ndim() != 1 || offsets.shape(0) != heights.shape(0) || offsets.shape(0) == 0)
    throw py::value_error("offsets must be a C-order int64 array of one offset per height, at least one");
  const int ndim = in.desc.ndim;
  std::vector<int64_t> shape(result.desc.shape, result.desc.shape + ndim),
      padded_shape(in.desc.shape, in.desc.shape + ndim), strides(ndim);
  for (int ax = 0; ax < ndim; ++ax) strides[ax] = in.desc.strides[ax] / itemsize(dtype);
  const auto* o = static_cast<const int64_t*>(offsets.data());
  const std::vector<int64_t> offs(o, o + offsets.shape(0));
  check_nonflat_reads(shape, padded_shape, strides, offs, in.desc.size());
  policy.enter({&in, &result});
  py::gil_scoped_release nogil;
  cuda::nonflat_extreme(in.desc, offs, heights.data(), first_height, erosion, result.desc, stream);
}

// fourier_multiply (cuda/api.hpp) from Python: `tables` a C-contiguous float64
// device array holding every axis's entries, axis ax's from table_at[ax]
// (-1: none); `factor` "product", "phase" or "ellipsoid".
void run_fourier_multiply(py::handle input, py::handle output, py::handle tables,
                          const std::vector<int64_t>& table_at, const std::string& factor, intptr_t stream) {
  CudaPolicy policy(stream);
  ImportedArray in = import_array(input, "input", Access::Read, policy.options());
  ImportedArray out = import_array(output, "output", Access::Write, policy.options());
  ImportedArray entries = import_array(tables, "tables", Access::Read, policy.options());
  static const char* const names[] = {"input", "output", "tables"};
  require_device({&in, &out, &entries}, names, Device::CUDA);
  const FourierFactor kind = fourier_factor(factor);
  if (!same_shape(in.desc, out.desc)) throw py::value_error("output must have the shape of input");
  if (may_overlap(in.desc, out.desc) && !same_layout(in.desc, out.desc))
    throw py::value_error("output must be input itself or share no memory with it");
  if (entries.desc.dtype != DType::Float64 || entries.desc.ndim != 1 || !c_contiguous(entries.desc))
    throw py::value_error("tables must be a C-contiguous 1-d float64 array");
  if ((int)table_at.size() != in.desc.ndim) throw py::value_error("table_at must give one start an axis");
  for (int ax = 0; ax < in.desc.ndim; ++ax)
    if (table_at[ax] < -1 || (table_at[ax] >= 0 && (table_at[ax] > entries.desc.shape[0] ||
                                                   in.desc.shape[ax] > entries.desc.shape[0] - table_at[ax])))
      throw py::value_error("table_at: an axis's entries must lie inside tables (or -1)");
  for (const ImportedArray* a : {&in, &out}) {
    const int64_t item = itemsize(a->desc.dtype);
    bool aligned = reinterpret_cast<uintptr_t>(a->desc.data) % item == 0;
    for (int ax = 0; ax < a->desc.ndim; ++ax) aligned = aligned && a->desc.strides[ax] % item == 0;
    if (!aligned) throw py::value_error("input and output must be aligned to their item size (pointer and strides)");
  }
  policy.enter({&in, &out, &entries});
  py::gil_scoped_release nogil;
  cuda::fourier_multiply(in.desc, out.desc, reinterpret_cast<const double*>(entries.desc.data), table_at, kind,
                         stream);
}

}  // namespace

PYBIND11_MODULE(_cuda, m) {
  m.doc() = "gpufilt CUDA kernels";
  m.attr("__version__") = GPUFILT_VERSION;
  prepare_import();

  // C++ CudaError -> gpufilt.CudaError (defined in Python, so that no class is
  // registered twice and it exists in CPU-only builds too).
  static py::object cuda_error_type =
      py::module_::import("gpufilt._errors").attr("CudaError");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const cuda::CudaError& e) {
      py::object err = cuda_error_type(e.what(), e.name, e.code, e.file, e.line);
      PyErr_SetObject(cuda_error_type.ptr(), err.ptr());
    }
  });

  register_kernels<CudaPolicy>(m);
  register_array_ops<CudaPolicy>(m);
  register_nn_ops<CudaPolicy>(m);
  register_matmul<CudaPolicy>(m);
  m.def("take_range_error", []() -> py::object {
    const cuda::RangeError e = cuda::take_range_error();
    if (e.kind == cuda::RangeErrorKind::None) return py::none();
    return py::make_tuple(e.kind == cuda::RangeErrorKind::Index ? "index" : "label", e.value, e.bound);
  }, "The first out-of-range index a finished kernel met (gather's index or cross-entropy's label), as "
     "(kind, value, bound), and clears it; None when there is none. Never synchronises.");
  m.def("synchronize_stream", [](intptr_t stream) {
    py::gil_scoped_release nogil;
    cuda::synchronize_stream(stream);
  }, py::arg("stream"), "Waits for the work enqueued on `stream` (for explicit error checks only).");
  m.def("binary_propagate", &run_binary_propagate, py::arg("source"), py::arg("out"), py::arg("changeable"),
        py::arg("offsets"), py::arg("border"), py::arg("stream"),
        "Binary dilation of C-contiguous 0/1 bytes until nothing changes, for taps symmetric about 0 and "
        "holding it (checked by the caller), by union-find; out gets 0/1 bytes.");
  m.attr("nonflat_max_taps") = cuda::kMaxNonflatTaps;
  m.def("_nonflat_extreme", &run_nonflat_extreme, py::arg("padded"), py::arg("heights"), py::arg("offsets"),
        py::arg("first_height"), py::arg("erosion"), py::arg("out"), py::arg("stream"),
        "Non-flat grey erosion or dilation (_core._nonflat_extreme) of a padded device array into `out`.");
  m.def("_fourier_multiply", &run_fourier_multiply, py::arg("input"), py::arg("output"), py::arg("tables"),
        py::arg("table_at"), py::arg("factor"), py::arg("stream"),
        "output = input times the Fourier filters' factor of per-axis tables (cuda/api.hpp fourier_multiply).");
  m.attr("binary_max_taps") = cuda::kMaxBinaryTaps;
  m.attr("binary_max_span") = cuda::kMaxBinarySpan;
  m.def("binary_steps", &run_binary_steps, py::arg("source"), py::arg("first"), py::arg("second"),
        py::arg("changeable"), py::arg("offsets"), py::arg("dilation"), py::arg("border"), py::arg("first_step"),
        py::arg("count"), py::arg("last_change"), py::arg("stream"),
        "Steps of binary erosion or dilation on C-contiguous 0/1 bytes, from source into first and second in "
        "turn; offsets: the taps, flattened (ntaps x ndim); last_change: an int64 device counter (0 at the "
        "start of an operation) holding the last step that changed an element.");
  m.attr("binary_max_box") = cuda::kMaxBoxLength;
  m.def("binary_box", &run_binary_box, py::arg("source"), py::arg("out"), py::arg("scratch"), py::arg("lo"),
        py::arg("hi"), py::arg("dilation"), py::arg("border"), py::arg("stream"),
        "A step of binary erosion or dilation by a full box on C-contiguous 0/nonzero bytes, from source into "
        "out (0/1); lo and hi: the window's first and last offset along each axis; scratch: an array like out "
        "for the passes between (None for a box longer than 1 along one axis only).");
  m.def("runtime_info", &runtime_info, "CUDA driver, runtime and devices, or why none is usable.");
  m.def("unusable_reason", []() { return unusable_reason(); },
        "Why no CUDA device is usable, or '' when one is.");
  m.def("build_info", &build_info, "How this module was built.");
}
