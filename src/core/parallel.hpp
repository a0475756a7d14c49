// CPU work on OpenMP threads only where there is enough of it to share.
//
// libgomp sets up a thread team even for a region an `if (false)` clause
// keeps serial (an allocation and a futex system call, about a microsecond):
// most of a call on a tiny array. So small work never enters a region.
#pragma once
#include <cstdint>

#if defined(GPUFILT_OPENMP)
#include <omp.h>
#endif

#include "core/cpu_backend.hpp"  // cpu_max_threads

namespace gpufilt {

// Calls `region` inside `#pragma omp parallel num_threads(threads)` when
// `parallel`, else directly on the calling thread. `region` shares its work
// out with dynamic_loop or static_loop (below).
template <class Region>
void parallel_region(bool parallel, int threads, const Region& region) {
#if defined(GPUFILT_OPENMP)
  if (parallel) {
#pragma omp parallel num_threads(threads)
    region();
    return;
  }
#else
  (void)parallel;
  (void)threads;
#endif
  region();
}

// Worksharing loops for a parallel_region: body(t) for t in [0, n), shared
// out among the region's threads (dynamically, `grain` at a time, or in
// static blocks), or all on the calling thread outside a region. There a
// plain loop runs: an orphaned `omp for` still makes libgomp take a work
// share, an aligned allocation and its free each call.
template <class Body>
void dynamic_loop(int64_t n, int64_t grain, const Body& body) {
#if defined(GPUFILT_OPENMP)
  if (omp_in_parallel()) {
#pragma omp for schedule(dynamic, grain)
    for (int64_t t = 0; t < n; ++t) body(t);
    return;
  }
#else
  (void)grain;
#endif
  for (int64_t t = 0; t < n; ++t) body(t);
}

template <class Body>
void static_loop(int64_t n, const Body& body) {
#if defined(GPUFILT_OPENMP)
  if (omp_in_parallel()) {
#pragma omp for schedule(static)
    for (int64_t t = 0; t < n; ++t) body(t);
    return;
  }
#endif
  for (int64_t t = 0; t < n; ++t) body(t);
}

// body(i) for i in [0, n): on OpenMP threads when `parallel`, else on the
// calling thread.
template <class Body>
void parallel_for(int64_t n, bool parallel, const Body& body) {
  if (parallel) {
#pragma omp parallel for num_threads(cpu_max_threads()) schedule(static)
    for (int64_t i = 0; i < n; ++i) body(i);
  } else {
    for (int64_t i = 0; i < n; ++i) body(i);
  }
}

// The sum over i in [0, n) of body(i) (a double), split as parallel_for.
template <class Body>
double parallel_sum(int64_t n, bool parallel, const Body& body) {
  double total = 0.0;
  if (parallel) {
#pragma omp parallel for num_threads(cpu_max_threads()) schedule(static) reduction(+ : total)
    for (int64_t i = 0; i < n; ++i) total += body(i);
  } else {
    for (int64_t i = 0; i < n; ++i) total += body(i);
  }
  return total;
}

}  // namespace gpufilt
