// CPU work on OpenMP threads only where there is enough of it to share, and
// no exception across an OpenMP boundary.
//
// libgomp sets up a thread team even for a region an `if (false)` clause
// keeps serial (an allocation and a futex system call, about a microsecond):
// most of a call on a tiny array. So small work never enters a region.
//
// An exception that leaves an OpenMP region ends the process (std::terminate:
// a std::bad_alloc of a huge window aborted the interpreter). So each thread
// of a region catches what it throws, the first exception is kept, the other
// threads stop taking work, and it is rethrown on the calling thread after
// the region, where pybind11 turns it into a Python exception (MemoryError
// for std::bad_alloc). The loops below hand out work without OpenMP's
// worksharing constructs: those end in a barrier that every thread of the
// team must reach, and a thread that threw before or inside one never would.
// So a region holds one loop (no barrier separates two), and a thread may
// throw anywhere in it, its per-thread buffers' allocation included.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <utility>
#include <vector>

#if defined(GPUFILT_OPENMP)
#include <omp.h>
#endif

#include "core/cpu_backend.hpp"  // cpu_max_threads

namespace gpufilt {

namespace detail {
// What the threads of one running region share: the next task of its loop,
// and the first exception any of them threw.
struct Region {
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::exception_ptr error;

  // Called in a catch block: keeps the first exception.
  void fail() noexcept {
    std::lock_guard<std::mutex> lock(mutex);
    if (!error) error = std::current_exception();
    failed.store(true, std::memory_order_relaxed);
  }
};

// The region the calling thread is working in; null outside regions.
inline thread_local Region* current_region = nullptr;

// Makes `r` the calling thread's region for its lifetime (null: none, for a
// region run serially, even inside another one's task).
struct RegionScope {
  Region* outer;
  explicit RegionScope(Region* r) : outer(std::exchange(current_region, r)) {}
  ~RegionScope() { current_region = outer; }
  RegionScope(const RegionScope&) = delete;
  RegionScope& operator=(const RegionScope&) = delete;
};

inline int thread_index() {
#if defined(GPUFILT_OPENMP)
  return omp_get_thread_num();
#else
  return 0;
#endif
}

inline int team_size() {
#if defined(GPUFILT_OPENMP)
  return omp_get_num_threads();
#else
  return 1;
#endif
}
}  // namespace detail

// Calls `region` on `threads` OpenMP threads when `parallel`, else directly
// on the calling thread (whose exceptions then simply propagate). `region`
// shares its work out with one dynamic_loop or static_loop (below).
template <class Fn>
void parallel_region(bool parallel, int threads, const Fn& region) {
#if defined(GPUFILT_OPENMP)
  if (parallel) {
    detail::Region shared;
#pragma omp parallel num_threads(threads)
    {
      detail::RegionScope scope(&shared);
      try {
        region();
      } catch (...) {
        shared.fail();
      }
    }
    if (shared.error) std::rethrow_exception(shared.error);
    return;
  }
#else
  (void)parallel;
  (void)threads;
#endif
  detail::RegionScope scope(nullptr);
  region();
}

// Worksharing loops for a parallel_region: body(t) for t in [0, n), shared
// out among the region's threads (dynamically, `grain` at a time from a
// shared counter, or in static blocks by thread number), or all on the
// calling thread outside a region. Once a thread has failed, the others
// start no more tasks.
template <class Body>
void dynamic_loop(int64_t n, int64_t grain, const Body& body) {
  detail::Region* r = detail::current_region;
  if (!r) {
    for (int64_t t = 0; t < n; ++t) body(t);
    return;
  }
  grain = std::max<int64_t>(grain, 1);
  while (!r->failed.load(std::memory_order_relaxed)) {
    const int64_t first = r->next.fetch_add(grain, std::memory_order_relaxed);
    if (first >= n) return;
    for (int64_t t = first, end = std::min(n, first + grain); t < end; ++t) body(t);
  }
}

template <class Body>
void static_loop(int64_t n, const Body& body) {
  if (!detail::current_region) {
    for (int64_t t = 0; t < n; ++t) body(t);
    return;
  }
  const int64_t k = detail::thread_index(), threads = detail::team_size();
  const int64_t block = (n + threads - 1) / threads, first = std::min(n, k * block);
  for (int64_t t = first, end = std::min(n, first + block); t < end; ++t) body(t);
}

// body(i) for i in [0, n): on OpenMP threads when `parallel`, else on the
// calling thread.
template <class Body>
void parallel_for(int64_t n, bool parallel, const Body& body) {
  parallel_region(parallel, cpu_max_threads(), [&] { static_loop(n, body); });
}

// The sum over i in [0, n) of body(i) (a double), split as parallel_for:
// each thread sums its block, and the blocks' sums are added in thread order
// (the same result for the same thread count, run after run).
template <class Body>
double parallel_sum(int64_t n, bool parallel, const Body& body) {
  const int threads = parallel ? cpu_max_threads() : 1;
  std::vector<double> partial(threads, 0.0);
  parallel_region(parallel, threads, [&] {
    double total = 0.0;
    static_loop(n, [&](int64_t i) { total += body(i); });
    partial[detail::current_region ? detail::thread_index() : 0] = total;
  });
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

}  // namespace gpufilt
