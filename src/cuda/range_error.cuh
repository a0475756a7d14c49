// The record of an out-of-range index met by a CUDA kernel (gather's indices,
// cross-entropy's labels): one per process, in mapped host memory.
//
// A kernel cannot raise, and the host may not wait for it inside a call (no
// host-blocking synchronisation; CUDA graph capture forbids it too). So the
// kernel never reads through a bad index, writes a defined value instead
// (zeros for gather, NaN for the cross-entropy), and records the first bad
// index here; the host reads the record without synchronising
// (take_range_error in api.hpp), and gpufilt.ops raises IndexError at its
// next CUDA call, or at once in gpufilt.ops.check_errors(), which waits for
// one stream.
#pragma once
#include <cstdint>

#include "cuda/api.hpp"

namespace gpufilt::cuda {

struct RangeErrorSlot {
  volatile int64_t value, bound;
  volatile int kind;  // a RangeErrorKind; None while nothing is recorded
};

// The record's device alias. Allocated at the first use (cudaHostAlloc is not
// stream-ordered: it is made in relaxed capture mode, so a first call inside
// a graph capture still works).
RangeErrorSlot* range_error_slot();

// Records `value` (out of [0, bound)) unless something is recorded already.
// Plain stores: PCIe offers no atomics on host memory, so racing threads may
// leave fields of different bad indices, each of them out of range.
__device__ inline void record_range_error(RangeErrorSlot* slot, RangeErrorKind kind, int64_t value,
                                          int64_t bound) {
  if (slot->kind) return;
  slot->value = value;
  slot->bound = bound;
  __threadfence_system();
  slot->kind = static_cast<int>(kind);
}

}  // namespace gpufilt::cuda
