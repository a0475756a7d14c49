// What every CUDA source of gpufilt shares: turning a failed runtime call into
// a CudaError (never exit or abort), and turning the intptr_t stream values
// of api.hpp into cudaStream_t handles. Included by .cu files only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/api.hpp"

namespace gpufilt::cuda {

// Throws CudaError for `err` (not cudaSuccess). Clears the runtime's
// last-error state first, so that the next launch check does not report the
// same failure again.
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* file, int line);

// The stream an intptr_t value names. 1 and 2 are the legacy and per-thread
// default streams in the CUDA Array Interface and DLPack conventions; the
// runtime happens to use the same handle values, the switch says so.
inline cudaStream_t as_stream(intptr_t stream) {
  switch (stream) {
    case 1: return cudaStreamLegacy;
    case 2: return cudaStreamPerThread;
    default: return reinterpret_cast<cudaStream_t>(stream);
  }
}

// Multiprocessors of the current device, asked of the runtime once per device.
int multiprocessors();

// Blocks of `kernel` (at `threads` a block and `shared` bytes of dynamic
// shared memory, which it is allowed when over the default) that fit on one
// multiprocessor of the current device: cudaOccupancy... asked once per
// kernel, size and device, as the answer never changes (it costs
// microseconds).
int resident_blocks_per_sm(const void* kernel, int threads, size_t shared = 0);

// Blocks of `threads` for a grid-stride loop of `kernel` over `items` work
// items, one a thread: enough to cover them, at most four times what the
// device holds at once, at least one.
int grid_stride_blocks(const void* kernel, int threads, int64_t items);

// Stream-ordered device memory for a call's temporaries, on the current
// device, from gpufilt's own pool of it (cudaMallocAsync's default pool while
// the stream is being captured: the graph owns the allocation then). Unlike
// the default pool, which hands its memory back to the driver at every
// synchronisation, gpufilt's keeps what it reserved (up to a bound), so a
// caller that synchronises after each call does not pay for mapping fresh
// memory inside the next one. Free with cudaFreeAsync on a stream ordered
// after the last use.
cudaError_t allocate_temporary(void** ptr, size_t bytes, cudaStream_t stream);

}  // namespace gpufilt::cuda

// Checks a runtime call; throws gpufilt::cuda::CudaError on failure.
#define GF_CUDA_CHECK(expr)                                                  \
  do {                                                                       \
    const cudaError_t gf_err_ = (expr);                                      \
    if (gf_err_ != cudaSuccess)                                              \
      ::gpufilt::cuda::throw_cuda_error(gf_err_, __FILE__, __LINE__);        \
  } while (0)

// Checks the launch just made (bad configuration, missing kernel image...).
#define GF_CUDA_CHECK_LAUNCH() GF_CUDA_CHECK(cudaGetLastError())
