#include "core/host_pool.hpp"

#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>
#if defined(__linux__)
#include <sys/mman.h>
#elif defined(_WIN32)
#include <malloc.h>
#endif

namespace gpufilt {
namespace {

// Blocks straight from the system, 2 MiB aligned, asking for huge pages as
// numpy does for its large arrays. (aligned_alloc's blocks took 150 ms to
// fault in 64 MiB here where these take 4.)
void* allocate(size_t bytes) {
#if defined(__linux__)
  const size_t span = bytes + HostPool::kGranule;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + HostPool::kGranule - 1) / HostPool::kGranule * HostPool::kGranule;
  if (aligned > start) munmap(raw, aligned - start);  // the unaligned head and tail go back
  const uintptr_t end = aligned + bytes;
  if (start + span > end) munmap(reinterpret_cast<void*>(end), start + span - end);
  void* p = reinterpret_cast<void*>(aligned);
#if defined(MADV_HUGEPAGE)
  madvise(p, bytes, MADV_HUGEPAGE);  // a hint only
#endif
  return p;
#elif defined(_WIN32)
  void* p = _aligned_malloc(bytes, HostPool::kGranule);
  if (!p) throw std::bad_alloc();
  return p;
#else
  void* p = std::aligned_alloc(HostPool::kGranule, bytes);
  if (!p) throw std::bad_alloc();
  return p;
#endif
}

void release(void* block, size_t bytes) {
#if defined(__linux__)
  munmap(block, bytes);
#elif defined(_WIN32)
  (void)bytes;
  _aligned_free(block);
#else
  (void)bytes;
  std::free(block);
#endif
}

}  // namespace

HostPool& HostPool::instance() {
  // Never destroyed: arrays on pooled blocks may outlive static destructors.
  static HostPool* pool = [] {
    const char* text = std::getenv("GPUFILT_CPU_POOL_BYTES");
    char* end = nullptr;
    const long long n = text && *text ? std::strtoll(text, &end, 10) : -1;
    return new HostPool(n >= 0 && end && *end == '\0' ? (size_t)n : kDefaultLimit);
  }();
  return *pool;
}

std::pair<void*, size_t> HostPool::take(size_t bytes) {
  if (bytes > SIZE_MAX / 2) throw std::bad_alloc();  // no array is that large; the sums below stay in range
  bytes = (bytes + kGranule - 1) / kGranule * kGranule;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.lower_bound(bytes);
    if (it != free_.end() && it->first <= bytes + bytes / 4) {
      const std::pair<void*, size_t> block{it->second.data, it->first};
      free_bytes_ -= it->first;
      free_.erase(it);
      return block;
    }
  }
  return {allocate(bytes), bytes};
}

void HostPool::give_back(void* block, size_t bytes) {
  if (bytes > limit_) return release(block, bytes);
  std::vector<std::pair<void*, size_t>> released;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (free_bytes_ + bytes > limit_ && !free_.empty()) {
      auto oldest = free_.begin();
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->second.freed < oldest->second.freed) oldest = it;
      released.emplace_back(oldest->second.data, oldest->first);
      free_bytes_ -= oldest->first;
      free_.erase(oldest);
    }
    if (free_bytes_ + bytes <= limit_) {
      free_.emplace(bytes, FreeBlock{block, returns_++});
      free_bytes_ += bytes;
      block = nullptr;
    }
  }
  for (auto [p, n] : released) release(p, n);
  if (block) release(block, bytes);  // not kept
}

void HostPool::free_all() {
  std::multimap<size_t, FreeBlock> blocks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks.swap(free_);
    free_bytes_ = 0;
  }
  for (auto& [bytes, b] : blocks) release(b.data, bytes);
}

size_t HostPool::free_bytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_bytes_;
}

}  // namespace gpufilt
