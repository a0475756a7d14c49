// gpufilt embed example: a C++ program owns 3-D float images, in C and in
// Fortran order, on the host (and on a CUDA device when built with
// -DGPUFILT_EMBED_CUDA=ON), runs the Python filters of filters.py on them
// through an embedded interpreter, and reads the results back, all without
// copying. Each result is checked against a C++ reference loop (a 3x3x3 mean
// with 'nearest' borders); the buffers' owners are checked to be released
// once Python lets go. Prints one line per check, exits 0 when all pass.
#include <pybind11/embed.h>

#include <gpufilt/external_array.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#ifdef GPUFILT_EMBED_CUDA
#include <cuda_runtime.h>
#endif

namespace py = pybind11;
using gpufilt::Order;

namespace {

const std::vector<int64_t> kShape{9, 13, 17};
const int64_t kSize = kShape[0] * kShape[1] * kShape[2];
int failures = 0;

void report(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

// The image's value at (z, y, x), whatever its memory order.
float voxel(int64_t z, int64_t y, int64_t x) {
  return static_cast<float>(std::sin(0.37 * z + 0.11 * y * y) + 0.05 * x);
}

// 3x3x3 mean with edge voxels repeated ('nearest'), the filters' oracle.
float reference(int64_t z, int64_t y, int64_t x) {
  auto clamp = [](int64_t i, int64_t n) { return std::min(std::max<int64_t>(i, 0), n - 1); };
  float sum = 0;
  for (int dz = -1; dz <= 1; ++dz)
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx)
        sum += voxel(clamp(z + dz, kShape[0]), clamp(y + dy, kShape[1]), clamp(x + dx, kShape[2]));
  return sum / 27.0f;
}

std::string order_name(Order order) { return order == Order::C ? "C" : "F"; }

// A host buffer holding the image in `order`.
std::vector<float> make_image(Order order) {
  std::vector<float> buf(kSize);
  std::vector<int64_t> st = gpufilt::strides_for(kShape, sizeof(float), order);
  for (int64_t z = 0; z < kShape[0]; ++z)
    for (int64_t y = 0; y < kShape[1]; ++y)
      for (int64_t x = 0; x < kShape[2]; ++x)
        buf[(z * st[0] + y * st[1] + x * st[2]) / sizeof(float)] = voxel(z, y, x);
  return buf;
}

// True when the host memory at `base` with byte strides `st` holds the
// reference result; reads through the strides, so any layout works.
bool matches_reference(const char* base, const std::vector<int64_t>& st) {
  for (int64_t z = 0; z < kShape[0]; ++z)
    for (int64_t y = 0; y < kShape[1]; ++y)
      for (int64_t x = 0; x < kShape[2]; ++x) {
        float got;
        std::memcpy(&got, base + z * st[0] + y * st[1] + x * st[2], sizeof(float));
        float want = reference(z, y, x);
        if (!(std::fabs(got - want) <= 1e-5f * std::max(1.0f, std::fabs(want)))) {
          std::printf("     at (%lld, %lld, %lld): got %g, want %g\n", (long long)z, (long long)y, (long long)x,
                      got, want);
          return false;
        }
      }
  return true;
}

// Memory the example allocates on the host or the device.
struct Memory {
  const char* where;                                       // "host" or "device"
  std::function<std::shared_ptr<float>(const std::vector<float>&)> upload;  // owner of a copy of it
  std::function<py::object(float*, Order, bool, py::object)> wrap;         // as a Python array
  // Host address of a result's element (0, 0, 0), or null if unreadable:
  // host results are read in place; device ones are copied into `scratch`.
  std::function<const char*(const gpufilt::ArrayView&, std::vector<char>& scratch)> host_view;
};

// Runs `filter` on the image in `order`, twice: returning a new array, and
// writing into a C++-owned output buffer. Checks values, zero-copy and owners.
void run_case(const Memory& mem, const std::string& filter_name, py::object filter, Order order) {
  const std::string label = std::string(mem.where) + " " + filter_name + " " + order_name(order) + " order";
  std::weak_ptr<float> image_alive, out_alive;
  {
    std::shared_ptr<float> image = mem.upload(make_image(order));
    std::shared_ptr<float> out = mem.upload(std::vector<float>(kSize, -1.0f));
    image_alive = image;
    out_alive = out;
    py::object py_image = mem.wrap(image.get(), order, /*readonly=*/true, gpufilt::owner_of(image));
    py::object py_out = mem.wrap(out.get(), order, /*readonly=*/false, gpufilt::owner_of(out));
    image.reset();  // from here on only the Python objects own the buffers
    out.reset();

    gpufilt::ArrayView seen = gpufilt::read_array(py_image);
    report(seen.is_contiguous(order) && seen.readonly, label + ": input wrapped as a read-only " +
                                                           order_name(order) + "-ordered view");

    // 1. The filter returns a new array of its own library.
    gpufilt::ArrayView result = gpufilt::read_array(filter.attr("apply_filter")(py_image));
    bool same_device = result.on_device() == (std::string(mem.where) == "device");
    report(same_device && result.dtype == "float32" && result.shape == kShape,
           label + ": new result is float32 " + result.device + " of the image's shape");
    std::vector<char> scratch;
    const char* values = mem.host_view(result, scratch);
    report(values && matches_reference(values, result.strides), label + ": new result values");

    // 2. The filter writes into the C++ output buffer: same pointer back.
    gpufilt::ArrayView written = gpufilt::read_array(filter.attr("apply_filter")(py_image, py_out));
    report(written.data == gpufilt::read_array(py_out).data, label + ": result written in place, zero-copy");
    values = mem.host_view(written, scratch);
    report(values && matches_reference(values, written.strides), label + ": in-place values");
  }  // the ArrayViews and wrappers drop their Python references here
  py::module_::import("gc").attr("collect")();
  report(image_alive.expired() && out_alive.expired(), label + ": buffers freed once Python let go");
}

Memory host_memory() {
  Memory m;
  m.where = "host";
  m.upload = [](const std::vector<float>& v) {
    std::shared_ptr<float> p(new float[v.size()], std::default_delete<float[]>());
    std::copy(v.begin(), v.end(), p.get());
    return p;
  };
  m.wrap = [](float* p, Order order, bool readonly, py::object owner) {
    return readonly ? gpufilt::wrap_host(static_cast<const float*>(p), kShape, order, owner)
                    : gpufilt::wrap_host(p, kShape, order, owner);
  };
  m.host_view = [](const gpufilt::ArrayView& v, std::vector<char>&) -> const char* {
    return v.on_device() ? nullptr : static_cast<const char*>(v.data);  // zero-copy read
  };
  return m;
}

#ifdef GPUFILT_EMBED_CUDA
void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

Memory device_memory(int device) {
  Memory m;
  m.where = "device";
  m.upload = [](const std::vector<float>& v) {
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, v.size() * sizeof(float)), "cudaMalloc");
    cuda_check(cudaMemcpy(p, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    return std::shared_ptr<float>(static_cast<float*>(p), [](float* q) { cudaFree(q); });
  };
  m.wrap = [device](float* p, Order order, bool readonly, py::object owner) {
    return readonly ? gpufilt::wrap_device(static_cast<const float*>(p), kShape, order, device, 0, owner)
                    : gpufilt::wrap_device(p, kShape, order, device, 0, owner);
  };
  m.host_view = [](const gpufilt::ArrayView& v, std::vector<char>& scratch) -> const char* {
    // Test code only: copy the (dense) device result to the host to check it.
    if (!v.on_device() || !(v.is_contiguous(Order::C) || v.is_contiguous(Order::F))) return nullptr;
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    scratch.resize(v.size() * v.itemsize);
    cuda_check(cudaMemcpy(scratch.data(), v.data, scratch.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return scratch.data();
  };
  return m;
}
#endif

// Bad arguments must throw gpufilt::invalid_argument, naming the problem.
void check_bad_input() {
  float x[8] = {};
  auto expect = [](const std::string& what, const std::function<void()>& f) {
    try {
      f();
      report(false, "bad input refused: " + what + " (nothing was thrown)");
    } catch (const gpufilt::invalid_argument& e) {
      report(true, "bad input refused: " + what + " (" + e.what() + ")");
    }
  };
  expect("null pointer", [] { gpufilt::wrap_host(nullptr, {2, 2}, "float32"); });
  expect("negative shape", [&] { gpufilt::wrap_host(x, {2, -2}, "float32"); });
  expect("stride not a multiple of the item size", [&] { gpufilt::wrap_host(x, {2, 2}, "float32", {8, 3}); });
  expect("unknown dtype", [&] { gpufilt::wrap_host(x, {2, 2}, "float33"); });
  expect("CUDA device that does not exist", [&] { gpufilt::wrap_device(x, {2, 2}, "float32", 999); });
  expect("wrong element type", [&] {
    gpufilt::read_array(gpufilt::wrap_host(x, {8}, "float32")).data_as<double>();
  });
}

}  // namespace

int main() {
  py::scoped_interpreter python;
  py::module_::import("sys").attr("path").attr("insert")(0, GPUFILT_EMBED_DIR);
  py::module_ filters = py::module_::import("filters");

  check_bad_input();
  for (Order order : {Order::C, Order::F}) {
    run_case(host_memory(), "NumpyFilter", filters.attr("NumpyFilter")(), order);
    run_case(host_memory(), "GpufiltFilter", filters.attr("GpufiltFilter")(), order);
  }

#ifdef GPUFILT_EMBED_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("device path skipped: no CUDA device\n");
  } else {
    int ran = 0;
    bool has_cupy = !py::module_::import("importlib.util").attr("find_spec")("cupy").is_none();
    py::object dispatch = py::module_::import("gpufilt._dispatch");
    bool gpufilt_cuda = !dispatch.attr("_cuda").is_none() &&
                        py::str(dispatch.attr("_cuda").attr("unusable_reason")()).cast<std::string>().empty();
    for (Order order : {Order::C, Order::F}) {
      if (has_cupy) run_case(device_memory(0), "CupyFilter", filters.attr("CupyFilter")(), order), ++ran;
      if (gpufilt_cuda) run_case(device_memory(0), "GpufiltFilter", filters.attr("GpufiltFilter")(), order), ++ran;
    }
    if (ran) std::printf("device path ran %d cases\n", ran);
    else std::printf("device path skipped: neither cupy nor gpufilt's CUDA module is usable\n");
  }
#else
  std::printf("device path not built (configure with -DGPUFILT_EMBED_CUDA=ON)\n");
#endif

  std::printf("%s\n", failures ? "FAILED" : "ALL PASSED");
  return failures ? 1 : 0;
}
