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
//
// No thread writes before every thread is ready: a loop starts its first
// task only once each thread of the team has reached a loop or left the
// region (Region::arrive), and not at all when one has failed by then. A
// thread whose buffers could not be allocated thus leaves the caller's
// output untouched, where the others had written their share of it before
// the MemoryError (issue 32). The wait is a spin with yields: a thread's
// buffers are allocated in microseconds.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
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
  std::atomic<int> arrived{0};  // threads that reached a loop or left the region
  std::mutex mutex;
  std::exception_ptr error;

  // Called in a catch block: keeps the first exception.
  void fail() noexcept {
    std::lock_guard<std::mutex> lock(mutex);
    if (!error) error = std::current_exception();
    failed.store(true, std::memory_order_release);
  }
};

// The region the calling thread is working in; null outside regions.
inline thread_local Region* current_region = nullptr;
// Whether the calling thread has arrived in its current region.
inline thread_local bool has_arrived = false;

// Counts the calling thread in its region's `arrived`, once: at its first
// loop, or as it leaves the region (having thrown, or run no loop).
inline void arrive(Region* r) noexcept {
  if (has_arrived) return;
  has_arrived = true;
  r->arrived.fetch_add(1, std::memory_order_acq_rel);
}

// Makes `r` the calling thread's region for its lifetime (null: none, for a
// region run serially, even inside another one's task).
struct RegionScope {
  Region* outer;
  bool outer_arrived;
  explicit RegionScope(Region* r)
      : outer(std::exchange(current_region, r)), outer_arrived(std::exchange(has_arrived, false)) {}
  ~RegionScope() {
    current_region = outer;
    has_arrived = outer_arrived;
  }
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

// Called by a loop before its first task: arrives, waits until every
// thread of the team has, and answers whether the loop may run (no thread
// has failed).
inline bool all_ready(Region* r) {
  arrive(r);
  const int team = team_size();
  while (r->arrived.load(std::memory_order_acquire) < team) std::this_thread::yield();
  return !r->failed.load(std::memory_order_acquire);
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
      detail::arrive(&shared);  // a thread that threw, or ran no loop, releases the others' wait
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
  if (!detail::all_ready(r)) return;
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
  if (!detail::all_ready(detail::current_region)) return;
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
