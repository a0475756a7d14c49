// Memory for large CPU results, kept for reuse once they are dropped.
//
// A fresh allocation of tens of MiB comes from the operating system, which
// faults in and zeroes every page when a kernel first writes it: on the
// 16-core GPU machine, 11 ms for 64 MiB on one thread and still 6 ms with 16
// threads writing (huge-page faults serialise on the kernel's side), more
// than a box filter of the volume takes there. Blocks freed here are handed
// out again with their pages in place, as CuPy's pool does on the GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace gpufilt {

class HostPool {
 public:
  // Results smaller than this are left to numpy (the C library's heap already
  // reuses those without faults).
  static constexpr size_t kMinBytes = size_t(8) << 20;
  // Blocks are whole multiples of this, aligned to it (huge pages).
  static constexpr size_t kGranule = size_t(2) << 20;

  // The process's pool. It keeps at most GPUFILT_CPU_POOL_BYTES of free
  // blocks (default kDefaultLimit; 0 turns keeping off).
  static HostPool& instance();

  // A block of at least `bytes`: the smallest free one no more than a
  // quarter larger, else a new one of `bytes` rounded up to kGranule.
  // Returns (block, its size). Throws std::bad_alloc when there is no memory.
  std::pair<void*, size_t> take(size_t bytes);
  // Back to the pool (a block and its size from take). Where keeping it
  // would pass the limit, the blocks freed longest ago go to the system
  // first (then this one, if it alone is over the limit).
  void give_back(void* block, size_t bytes);
  // Returns every free block to the system.
  void free_all();
  size_t free_bytes();
  size_t limit() const { return limit_; }

 private:
  static constexpr size_t kDefaultLimit = size_t(1) << 30;
  explicit HostPool(size_t limit) : limit_(limit) {}
  struct FreeBlock {
    void* data;
    uint64_t freed;  // order of return: the oldest go first
  };
  std::mutex mutex_;
  std::multimap<size_t, FreeBlock> free_;  // by size
  size_t free_bytes_ = 0;
  uint64_t returns_ = 0;
  const size_t limit_;
};

}  // namespace gpufilt
