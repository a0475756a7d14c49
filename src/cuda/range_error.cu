// The process-wide record of out-of-range indices (range_error.cuh).
#include <cuda_runtime.h>

#include <cstring>

#include "cuda/check.cuh"
#include "cuda/range_error.cuh"

namespace gpufilt::cuda {
namespace {
RangeErrorSlot* host_slot = nullptr;
RangeErrorSlot* device_slot = nullptr;
}  // namespace

RangeErrorSlot* range_error_slot() {
  if (!device_slot) {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    GF_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    void* p = nullptr;
    cudaError_t err = cudaHostAlloc(&p, sizeof(RangeErrorSlot), cudaHostAllocMapped | cudaHostAllocPortable);
    void* d = nullptr;
    if (err == cudaSuccess) {
      std::memset(p, 0, sizeof(RangeErrorSlot));
      err = cudaHostGetDevicePointer(&d, p, 0);
    }
    cudaThreadExchangeStreamCaptureMode(&mode);
    GF_CUDA_CHECK(err);
    host_slot = static_cast<RangeErrorSlot*>(p);
    device_slot = static_cast<RangeErrorSlot*>(d);
  }
  return device_slot;
}

RangeError take_range_error() {
  RangeError e;
  if (!host_slot || !host_slot->kind) return e;
  e.value = host_slot->value;
  e.bound = host_slot->bound;
  e.kind = static_cast<RangeErrorKind>(host_slot->kind);
  host_slot->kind = 0;
  return e;
}

void synchronize_stream(intptr_t stream) { GF_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream))); }

}  // namespace gpufilt::cuda
