// Binary morphology repeated until nothing changes (binary_propagation,
// binary_fill_holes, binary_erosion/dilation with iterations < 1), on the
// CPU, in one pass over what changes instead of one pass over the array per
// step.
#pragma once
#include <cstdint>
#include <vector>

namespace gpufilt {

// `values` (C order, `shape`, bytes 0/1) goes to the fixed point of the step
//   v[i] <- (the window of i holds `spread` or reaches past an edge while
//            border == spread) ? spread : v[i]      where changeable[i]
// where the window of i is {i + d} for the `offsets` d (ndim each, flat),
// and elements off `changeable` (null: all changeable) keep their value.
// That is a dilation (spread = 1) or erosion (spread = 0) of the 0/1 image
// repeated until it stops changing, provided the window holds i itself (a
// zero offset): then a value, once spread, stays, and the fixed point is
// what a breadth-first spread from every element holding `spread` reaches.
// Work: each element reached visits its window's taps (O(size * offsets)).
// Memory: a byte an element of the array padded by the window's reach, and
// an index an element reached.
void propagate_binary(uint8_t* values, const uint8_t* changeable, const std::vector<int64_t>& shape,
                      const std::vector<int64_t>& offsets, uint8_t spread, uint8_t border);

}  // namespace gpufilt
