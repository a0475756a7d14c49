#include "core/host_pool.hpp"

#include <cstdlib>
#include <new>
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

void* HostPool::take(size_t bytes) {
  bytes = rounded(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(bytes);
    if (it != free_.end()) {
      void* p = it->second;
      free_.erase(it);
      free_bytes_ -= bytes;
      return p;
    }
  }
  return allocate(bytes);
}

void HostPool::give_back(void* block, size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_bytes_ + bytes <= limit_) {
      free_.emplace(bytes, block);
      free_bytes_ += bytes;
      return;
    }
  }
  std::free(block);
}

void HostPool::free_all() {
  std::multimap<size_t, void*> blocks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks.swap(free_);
    free_bytes_ = 0;
  }
  for (auto& [bytes, p] : blocks) std::free(p);
}

size_t HostPool::free_bytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_bytes_;
}

}  // namespace gpufilt
