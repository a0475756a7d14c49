// Loops split over OpenMP threads only when they are large enough.
#pragma once
#include <cstdint>

#include "core/cpu_backend.hpp"  // cpu_max_threads

namespace gpufilt {

// body(i) for i in [0, n): on OpenMP threads when `parallel`, else on the
// calling thread without entering a parallel region (libgomp sets up a team
// even under a false `if` clause: an allocation and a futex call, most of a
// tiny call's time).
template <class Body> void parallel_for(int64_t n, bool parallel, const Body& body) {
  if (parallel) {
#pragma omp parallel for num_threads(cpu_max_threads()) schedule(static)
    for (int64_t i = 0; i < n; ++i) body(i);
  } else {
    for (int64_t i = 0; i < n; ++i) body(i);
  }
}

// The sum over i in [0, n) of body(i) (a double), split as parallel_for.
template <class Body> double parallel_sum(int64_t n, bool parallel, const Body& body) {
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
