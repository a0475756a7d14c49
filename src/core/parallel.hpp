// CPU work on OpenMP threads only where there is enough of it to share.
#pragma once

namespace gpufilt {

// Calls `region` inside `#pragma omp parallel num_threads(threads)` when
// `parallel`, else directly on the calling thread. A region kept serial by an
// `if (false)` clause still costs libgomp a futex system call (about a
// microsecond), most of a filter call on a tiny array. `region` may hold
// orphaned worksharing loops (`#pragma omp for`): outside a parallel region
// they run every iteration on the calling thread.
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

}  // namespace gpufilt
