// Filters that call the caller's function (generic_filter, generic_filter1d)
// at C speed: scipy's LowLevelCallable signatures, on the CPU. The window
// gather of generic_filter is the footprint filters' (Reduce::Call in
// cpu_footprint.cpp); generic_filter1d's lines are extended here with the
// shared line helpers (cpu_lines.hpp).
#pragma once
#include <cstdint>
#include <stdexcept>

#include "core/array.hpp"
#include "core/border.hpp"

namespace gpufilt {

// generic_filter's function: the window's values (float64, in footprint
// order) in, its result out; 0 means failure.
using WindowFunction = int (*)(double* values, intptr_t count, double* result, void* user_data);
// generic_filter1d's: the extended input line in, the output line out.
using LineFunction = int (*)(double* in, intptr_t in_length, double* out, intptr_t out_length,
                             void* user_data);

// A WindowFunction or LineFunction returned 0. The binding then raises the
// Python error the function set, if any, else RuntimeError(what()), as
// scipy.ndimage does.
struct CallbackFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// generic_filter1d on the CPU: each line of `in` along `axis`, extended by
// size / 2 + origin on the left and the rest on the right (mode, cval), is
// passed to `function`, whose output line goes to `out` (same shape; any
// dtypes; they may overlap). Lines are shared among the CPU threads.
void generic_filter1d(const ArrayDesc& in, const ArrayDesc& out, int axis, int64_t size, int64_t origin,
                      Mode mode, double cval, LineFunction function, void* user_data);

}  // namespace gpufilt
