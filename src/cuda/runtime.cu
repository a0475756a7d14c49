// The CUDA runtime as the rest of gpufilt sees it: errors as CudaError, the
// current device set for a scope, cross-stream ordering without blocking the
// host, which device owns a pointer, and why no device is usable.
// runtime_info() runs on machines without a GPU or even a driver (the runtime
// is linked statically), so it reports instead of throwing.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "cuda/api.hpp"
#include "cuda/check.cuh"

namespace gpufilt::cuda {
namespace {

// "src/cuda/x.cu" rather than the build machine's absolute path.
std::string short_path(const char* file) {
  const char* tail = std::strstr(file, "src/cuda/");
  if (tail) return tail;
  const char* slash = std::strrchr(file, '/');
  return slash ? slash + 1 : file;
}

// 13000 -> "13.0"
std::string version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string error_text(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

std::string driver_too_old(int driver, int runtime) {
  return "CUDA driver " + version_string(driver) + " is older than the runtime " +
         version_string(runtime) + " this build needs";
}

// Why a failed cudaGetDeviceCount leaves no usable device.
std::string device_count_failure(cudaError_t err, int driver, int runtime) {
  if (err == cudaErrorNoDevice) return "no CUDA device found";
  if (err == cudaErrorInsufficientDriver) return driver_too_old(driver, runtime);
  return "CUDA could not be initialised: " + error_text(err);
}

void fill_devices(int count, RuntimeInfo& info) {
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    const cudaError_t err = cudaGetDeviceProperties(&prop, i);
    if (err != cudaSuccess) {  // skip it, say why if nothing else works
      cudaGetLastError();
      info.unusable_reason = "device " + std::to_string(i) + ": " + error_text(err);
      continue;
    }
    info.devices.push_back({i, prop.name, prop.major, prop.minor, (int64_t)prop.totalGlobalMem,
                            prop.multiProcessorCount});
  }
  if (!info.devices.empty()) info.unusable_reason.clear();
}

constexpr int kMaxDevices = 64;  // per-device caches (a device past them: asked each time, default pool)

// What gpufilt's pool keeps reserved across synchronisations, at least:
// every reduction's partial sums and most filters' temporaries. The pool
// then keeps as much as the largest temporary asked of it (keep_reserved),
// as CuPy's pool keeps what it has handed out: memory given back to the
// driver at a synchronisation is mapped again by the next call that needs
// it, 0.5 ms a call for the 512 MiB intermediate of a gaussian on a 512^3
// float32 volume (H100).
constexpr uint64_t kPoolKeepBytes = uint64_t(256) << 20;

// gpufilt's pool on `device`, made on first use and kept for the process;
// null where the device has no stream-ordered pools (then the default pool
// serves).
cudaMemPool_t own_pool(int device) {
  static std::mutex mutex;
  static cudaMemPool_t pools[kMaxDevices] = {};
  static bool tried[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) return nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (tried[device]) return pools[device];
  tried[device] = true;
  int supported = 0;
  if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess || !supported) {
    cudaGetLastError();
    return nullptr;
  }
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  if (cudaMemPoolCreate(&pool, &props) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  uint64_t keep = kPoolKeepBytes;
  if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess)
    cudaGetLastError();  // still a working pool, one that trims at each synchronisation
  pools[device] = pool;
  return pool;
}

// Raises `pool`'s release threshold to `bytes` when that is more than it keeps.
void keep_reserved(cudaMemPool_t pool, int device, uint64_t bytes) {
  static std::mutex mutex;
  static uint64_t kept[kMaxDevices] = {};  // 0: kPoolKeepBytes, as own_pool set it
  std::lock_guard<std::mutex> lock(mutex);
  uint64_t& now = kept[device];  // device < kMaxDevices: own_pool made the pool
  if (bytes <= std::max(now, kPoolKeepBytes)) return;
  if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &bytes) != cudaSuccess) {
    cudaGetLastError();  // the pool still works, trimming at each synchronisation
    return;
  }
  now = bytes;
}

}  // namespace

int multiprocessors() {
  static std::atomic<int> known[kMaxDevices];
  int device = 0;
  GF_CUDA_CHECK(cudaGetDevice(&device));
  std::atomic<int>* slot = device >= 0 && device < kMaxDevices ? &known[device] : nullptr;
  int n = slot ? slot->load(std::memory_order_relaxed) : 0;
  if (n == 0) {
    GF_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    if (slot) slot->store(n, std::memory_order_relaxed);
  }
  return n;
}

int grid_stride_blocks(const void* kernel, int threads, int64_t items) {
  const int64_t wanted = (items + threads - 1) / threads;
  const int64_t most = (int64_t)resident_blocks_per_sm(kernel, threads) * multiprocessors() * 4;
  return (int)std::max<int64_t>(1, std::min(wanted, most));
}

int resident_blocks_per_sm(const void* kernel, int threads, size_t shared) {
  // Never destroyed: a thread still launching during interpreter exit must
  // not meet a destroyed map or mutex.
  static auto* mutex = new std::mutex;
  static auto* known = new std::map<std::tuple<const void*, int, size_t, int>, int>;  // (kernel, threads, shared, device)
  int device = 0;
  GF_CUDA_CHECK(cudaGetDevice(&device));
  const auto key = std::make_tuple(kernel, threads, shared, device);
  {
    std::lock_guard<std::mutex> lock(*mutex);
    auto it = known->find(key);
    if (it != known->end()) return it->second;
  }
  int blocks = 0;
  if (shared > 48 * 1024)
    GF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared));
  GF_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, shared));
  std::lock_guard<std::mutex> lock(*mutex);
  known->emplace(key, blocks);
  return blocks;
}

cudaError_t allocate_temporary(void** ptr, size_t bytes, cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) {
    cudaGetLastError();
    capture = cudaStreamCaptureStatusActive;  // cudaMallocAsync reports what is wrong
  }
  int device = 0;
  cudaMemPool_t pool = nullptr;
  if (capture == cudaStreamCaptureStatusNone && cudaGetDevice(&device) == cudaSuccess) pool = own_pool(device);
  if (!pool) return cudaMallocAsync(ptr, bytes, stream);
  keep_reserved(pool, device, bytes);
  return cudaMallocFromPoolAsync(ptr, bytes, pool, stream);
}

void throw_cuda_error(cudaError_t err, const char* file, int line) {
  cudaGetLastError();  // a non-sticky error must not resurface at the next check
  throw CudaError((int)err, cudaGetErrorName(err), cudaGetErrorString(err), short_path(file), line);
}

DeviceGuard::DeviceGuard(int device) {
  int current = 0;
  GF_CUDA_CHECK(cudaGetDevice(&current));
  if (current == device) return;  // nothing to change or restore
  GF_CUDA_CHECK(cudaSetDevice(device));
  previous_ = current;
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) cudaGetLastError();
}

namespace {

// One stream whatever handle names it: 0 is the default stream, which is the
// legacy stream (handle 1, cudaStreamLegacy, what CuPy's CAI exports for its
// null stream) in a normal build and the per-thread stream (handle 2) when
// built with --default-stream per-thread. Work on one stream is already
// ordered, so a wait between two names of it would only cost an event (5 us).
intptr_t canonical_stream(intptr_t stream) {
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
  return stream == 0 ? 2 : stream;
#else
  return stream == 0 ? 1 : stream;
#endif
}

}  // namespace

void stream_wait(intptr_t producer, intptr_t consumer) {
  if (canonical_stream(producer) == canonical_stream(consumer)) return;
  cudaEvent_t event;
  GF_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  // The wait captures the event's state now, so the event can go at once;
  // the runtime frees it when the recorded work completes.
  cudaError_t err = cudaEventRecord(event, as_stream(producer));
  if (err == cudaSuccess) err = cudaStreamWaitEvent(as_stream(consumer), event, 0);
  cudaEventDestroy(event);
  GF_CUDA_CHECK(err);
}

int pointer_device(const void* ptr) {
  if (!ptr) return -1;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();  // no driver, or a pointer CUDA knows nothing of
    return -1;
  }
  const bool on_device = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
  return on_device ? attr.device : -1;
}

RuntimeInfo runtime_info() {
  RuntimeInfo info;
  try {
    cudaRuntimeGetVersion(&info.runtime_version);  // cannot fail: the runtime is linked in
    if (cudaDriverGetVersion(&info.driver_version) != cudaSuccess || info.driver_version == 0) {
      cudaGetLastError();
      info.driver_version = 0;
      info.unusable_reason = "no CUDA driver found";
      return info;
    }
    // Minor version compatibility: a 13.x runtime runs on any 13.y driver,
    // so only an older major version is fatal before asking for devices.
    if (info.driver_version / 1000 < info.runtime_version / 1000) {
      info.unusable_reason = driver_too_old(info.driver_version, info.runtime_version);
      return info;
    }
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      cudaGetLastError();
      info.unusable_reason = device_count_failure(err, info.driver_version, info.runtime_version);
      return info;
    }
    if (count == 0) {
      info.unusable_reason = "no CUDA device found";
      return info;
    }
    fill_devices(count, info);
  } catch (...) {  // std::bad_alloc from a string: report rather than throw
    info.devices.clear();
    info.unusable_reason = "CUDA runtime query failed";
  }
  return info;
}

}  // namespace gpufilt::cuda
