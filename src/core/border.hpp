// Boundary extension: where an index outside [0, n) reads from, for each of
// scipy.ndimage's filter modes. One definition for the CPU and CUDA kernels.
#pragma once
#include <cstdint>
#include "core/hostdevice.hpp"

namespace gpufilt {

// Codes are scipy.ndimage's (_ni_support._extend_mode_to_code, is_filter=True):
// grid-mirror is Reflect, grid-wrap is Wrap, grid-constant is Constant.
enum class Mode : int8_t { Nearest = 0, Wrap = 1, Reflect = 2, Mirror = 3, Constant = 4 };

GF_HD int64_t floor_mod(int64_t i, int64_t n) {
  int64_t r = i % n;
  return r < 0 ? r + n : r;
}

// Index in [0, n) that position i reads, or -1 for Constant (use cval).
// Requires n >= 1. Extensions longer than the line repeat the pattern, as
// scipy's NI_ExtendLine does. Positions within one extension of the line (a
// filter's halo, nearly always) are mapped without the 64-bit modulo: on the
// GPU that division cost far more than the rest of a tap.
GF_HD int64_t border_index(int64_t i, int64_t n, Mode mode) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case Mode::Nearest:
      return i < 0 ? 0 : n - 1;
    case Mode::Wrap:
      if (i >= -n && i < 2 * n) return i < 0 ? i + n : i - n;
      return floor_mod(i, n);
    case Mode::Reflect: {  // d c b a | a b c d | d c b a
      if (i >= -n && i < 2 * n) return i < 0 ? -1 - i : 2 * n - 1 - i;
      int64_t r = floor_mod(i, 2 * n);
      return r < n ? r : 2 * n - 1 - r;
    }
    case Mode::Mirror: {  // d c b | a b c d | c b a
      if (n == 1) return 0;
      if (i > -n && i < 2 * n - 1) return i < 0 ? -i : 2 * n - 2 - i;
      int64_t r = floor_mod(i, 2 * n - 2);
      return r < n ? r : 2 * n - 2 - r;
    }
    default:
      return -1;
  }
}

}  // namespace gpufilt
