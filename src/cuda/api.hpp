// The CUDA side as plain C++: what the bindings may call. No CUDA or Python
// headers here, so host-compiled binding code includes it freely; streams are
// cudaStream_t values carried as intptr_t (0 is the legacy default stream).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/separable.hpp"

namespace gpufilt::cuda {

// A failed CUDA call: the runtime's error name and message and where it was.
class CudaError : public std::runtime_error {
 public:
  CudaError(int code, std::string name, const std::string& message, std::string file, int line)
      : std::runtime_error(name + ": " + message + " (" + file + ":" + std::to_string(line) + ")"),
        code(code), name(std::move(name)), file(std::move(file)), line(line) {}
  int code;
  std::string name, file;
  int line;
};

// Runs the separable chains on one stream of the current device.
// Temporaries are stream-ordered on that stream (allocate_temporary in
// check.cuh); nothing synchronises the host, so every call can be captured
// in a CUDA graph.
class CudaBackend final : public LineBackend {
 public:
  explicit CudaBackend(intptr_t stream) : stream_(stream) {}
  void line_pass(const ArrayDesc& in, const ArrayDesc& out, const LinePass& pass,
                 double cval) override;
  void copy(const ArrayDesc& in, const ArrayDesc& out) override;
  std::unique_ptr<TempBuffer> allocate(int64_t bytes) override;
  bool filters_in_place() const override { return false; }
  bool fused_chain(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& passes,
                   double cval) override;
  bool fused_laplace(const ArrayDesc& in, const ArrayDesc& out, const std::vector<Mode>& modes,
                     double cval) override;
  void footprint_pass(const ArrayDesc& in, const ArrayDesc& out, const Footprint& filter,
                      double cval) override;
  void elementwise(Elementwise op, const ArrayDesc& a, const ArrayDesc& b, const ArrayDesc& out) override;

 private:
  intptr_t stream_;
};

// Sets the current device for a scope and restores the caller's after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Orders `consumer` after all work enqueued so far on `producer` (event
// record + stream wait; the host never blocks). No-op when they are the same
// stream (0 and 1 both name the legacy default stream in a normal build).
void stream_wait(intptr_t producer, intptr_t consumer);

// Device that owns a device pointer, or -1 for host / unknown memory.
int pointer_device(const void* ptr);

struct DeviceInfo {
  int index;
  std::string name;
  int major, minor;
  int64_t total_memory;
  int multiprocessors;
};

// Why no device is usable ("" when one is), and what there is.
struct RuntimeInfo {
  int driver_version = 0;   // e.g. 13000; 0 without a driver
  int runtime_version = 0;  // of the statically linked runtime
  std::string unusable_reason;
  std::vector<DeviceInfo> devices;
};
RuntimeInfo runtime_info();

// The first out-of-range index a finished kernel recorded (range_error.cuh),
// then cleared; kind None when there is none. Never synchronises.
enum class RangeErrorKind : int { None = 0, Index = 1, Label = 2 };  // gather index; cross-entropy label
struct RangeError {
  RangeErrorKind kind = RangeErrorKind::None;
  int64_t value = 0, bound = 0;
};
RangeError take_range_error();

// Waits for the work enqueued on `stream`: for explicit error checks only
// (gpufilt.ops.check_errors), never inside a kernel call.
void synchronize_stream(intptr_t stream);

}  // namespace gpufilt::cuda
