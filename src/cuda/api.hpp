// The CUDA side as plain C++: what the bindings may call. No CUDA or Python
// headers here, so host-compiled binding code includes it freely; streams are
// cudaStream_t values carried as intptr_t (0 is the legacy default stream).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/fourier.hpp"
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
  bool fused_derivative_sum(const ArrayDesc& in, const ArrayDesc& out, std::vector<std::vector<LinePass>> chains,
                            double cval, bool square) override;
  void footprint_pass(const ArrayDesc& in, const ArrayDesc& out, const Footprint& filter,
                      double cval) override;
  void elementwise(Elementwise op, const ArrayDesc& a, const ArrayDesc& b, const ArrayDesc& out) override;

 private:
  intptr_t stream_;
};

// Binary erosion or dilation (gpufilt.ndimage.binary_*): `count` steps on
// C-contiguous arrays of 0/nonzero bytes of one shape, the first from
// `source`, then each from the last one's result, written to `first` and
// `second` in turn (0/1). An element is set by erosion when every tap of the
// structuring element (`offsets`: ntaps x ndim, in elements, each within
// +-127 along at most kMaxBinarySpan axes) finds a set element, by dilation
// when any does; `border` beyond the edges; where `changeable` (optional) is
// 0 the element keeps its value. Steps are numbered from `first_step` (1 for
// the first of an operation); each that changes an element stores its number
// in the device int64 `last_change`, which a step from the third on reads to
// do nothing once one has changed nothing: both buffers then hold the
// result. Enqueued on `stream`; nothing waits.
constexpr int kMaxBinaryTaps = 1024;
constexpr int kMaxBinarySpan = 4;
void binary_steps(const ArrayDesc& source, const ArrayDesc& first, const ArrayDesc& second,
                  const ArrayDesc* changeable, const std::vector<int64_t>& offsets, bool dilation, bool border,
                  int64_t first_step, int64_t count, int64_t* last_change, intptr_t stream);

// One step of binary erosion or dilation by a full box (every element of
// the structuring element set) on C-contiguous arrays of 0/nonzero bytes of
// one shape, from `source` into `out` (0/1): the window of an element spans
// offsets lo[d] to hi[d] along each axis d (lo[d] <= 0 <= hi[d], at most
// kMaxBoxLength elements, longer than 1 along some axis); `border` beyond
// the edges. One pass along each axis the box is longer than 1 along, their
// cost independent of its length; `scratch` (of the same shape, sharing no
// memory with `source` or `out`) holds the passes between the first and the
// last, and is not used for one pass. Enqueued on `stream`; nothing waits.
constexpr int kMaxBoxLength = 255;
void binary_box(const ArrayDesc& source, const ArrayDesc& out, const ArrayDesc& scratch,
                const std::vector<int64_t>& lo, const std::vector<int64_t>& hi, bool dilation, bool border,
                intptr_t stream);

// Binary dilation repeated until nothing changes (binary_propagation,
// binary_fill_holes), in a few passes of union-find: for `offsets` (as
// binary_steps') symmetric about 0 and holding it, which the caller checks;
// at most 2**31 - 1 elements. `out` gets 0/1 bytes. Enqueued on `stream`.
void binary_propagate(const ArrayDesc& source, const ArrayDesc& out, const ArrayDesc* changeable,
                      const std::vector<int64_t>& offsets, bool border, intptr_t stream);

// Non-flat grey erosion or dilation (core/nonflat.hpp's arithmetic) on the
// device: `padded` C-contiguous, of an integer or float32/64 dtype; `out`
// C-contiguous doubles (or floats for float32 input), read from padded[base(i) + offsets[t]], base(i) the
// element's index in `padded` (the caller checks every read is inside);
// `heights` on the host, one per tap in padded's dtype. Enqueued on `stream`.
constexpr int kMaxNonflatTaps = 1024;
void nonflat_extreme(const ArrayDesc& padded, const std::vector<int64_t>& offsets, const void* heights,
                     double first_height, bool erosion, const ArrayDesc& out, intptr_t stream);

// The Fourier filters' product (core/fourier.hpp) on the device: out = in
// times the factor of per-axis tables, in (float32, float64, complex64 or
// complex128) and out (complex for complex in or the phase) of one shape, any
// strides, out either in itself or apart from it. Axis ax's entries are
// tables[table_at[ax] + i] (device doubles; -1: the axis has none), which the
// caller checks are inside. Enqueued on `stream`.
void fourier_multiply(const ArrayDesc& in, const ArrayDesc& out, const double* tables,
                      const std::vector<int64_t>& table_at, FourierFactor factor, intptr_t stream);

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
