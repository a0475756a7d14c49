#include "core/host_pool.hpp"

#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace gpufilt {
namespace {

void* allocate(size_t bytes) {
  void* p = std::aligned_alloc(HostPool::kGranule, bytes);
  if (!p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  madvise(p, bytes, MADV_HUGEPAGE);  // as numpy asks for its large arrays; a hint only
#endif
  return p;
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
  if (bytes > SIZE_MAX - kGranule) throw std::bad_alloc();
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
  if (bytes > limit_) return std::free(block);
  std::vector<void*> released;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (free_bytes_ + bytes > limit_ && !free_.empty()) {
      auto oldest = free_.begin();
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->second.freed < oldest->second.freed) oldest = it;
      released.push_back(oldest->second.data);
      free_bytes_ -= oldest->first;
      free_.erase(oldest);
    }
    if (free_bytes_ + bytes <= limit_) {
      free_.emplace(bytes, FreeBlock{block, returns_++});
      free_bytes_ += bytes;
      block = nullptr;
    }
  }
  for (void* p : released) std::free(p);
  std::free(block);  // null when kept
}

void HostPool::free_all() {
  std::multimap<size_t, FreeBlock> blocks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks.swap(free_);
    free_bytes_ = 0;
  }
  for (auto& [bytes, b] : blocks) std::free(b.data);
}

size_t HostPool::free_bytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_bytes_;
}

}  // namespace gpufilt
