#include "core/binary_propagation.hpp"

#include <algorithm>
#include <cstddef>

namespace gpufilt {
namespace {

// An element's state in the padded copy: its value (bit 0), whether it may
// change (bit 1), or outside the array.
constexpr uint8_t kChangeable = 2, kOutside = 4;

int64_t magnitude(int64_t v) { return v < 0 ? -v : v; }

// The array with a margin of kOutside around it, wide enough for every tap
// that can land inside, so that the spread needs no bounds checks.
struct Padded {
  std::vector<int64_t> shape, margin, stride;  // per axis; stride in elements
  std::vector<uint8_t> state;

  Padded(const std::vector<int64_t>& inner, const std::vector<int64_t>& margins)
      : shape(inner.size()), margin(margins), stride(inner.size()) {
    int64_t size = 1;
    for (size_t ax = inner.size(); ax-- > 0;) {
      shape[ax] = inner[ax] + 2 * margin[ax];
      stride[ax] = size;
      size *= shape[ax];
    }
    state.assign(size, kOutside);
  }
  int64_t distance(const int64_t* delta) const {
    int64_t d = 0;
    for (size_t ax = 0; ax < shape.size(); ++ax) d += delta[ax] * stride[ax];
    return d;
  }
  // f(row's first padded index, row's coordinates) for every row of the
  // array (all axes but the last), in C order.
  template <class F>
  void for_each_row(const std::vector<int64_t>& inner, F f) const {
    const size_t ndim = inner.size();
    std::vector<int64_t> at(ndim, 0);
    int64_t rows = 1;
    for (size_t ax = 0; ax + 1 < ndim; ++ax) rows *= inner[ax];
    for (int64_t r = 0; r < rows; ++r) {
      int64_t first = margin[ndim - 1];
      for (size_t ax = 0; ax + 1 < ndim; ++ax) first += (at[ax] + margin[ax]) * stride[ax];
      f(first, at);
      for (size_t ax = ndim - 1; ax-- > 0 && ++at[ax] == inner[ax];) at[ax] = 0;
    }
  }
};

}  // namespace

void propagate_binary(uint8_t* values, const uint8_t* changeable, const std::vector<int64_t>& shape,
                      const std::vector<int64_t>& offsets, uint8_t spread, uint8_t border) {
  const size_t ndim = shape.size();
  int64_t size = 1;
  for (int64_t n : shape) size *= n;
  if (ndim == 0 || size == 0) return;
  const size_t taps = offsets.size() / ndim;
  // Taps that land inside from somewhere (every offset shorter than its
  // axis) spread values; the others only ever read the border.
  std::vector<int64_t> inside_taps, margin(ndim, 0), lowest(ndim, 0), highest(ndim, 0);
  bool a_tap_reads_only_the_border = false;
  for (size_t k = 0; k < taps; ++k) {
    const int64_t* d = &offsets[k * ndim];
    bool lands_inside = true;
    for (size_t ax = 0; ax < ndim; ++ax) lands_inside = lands_inside && magnitude(d[ax]) < shape[ax];
    if (!lands_inside) {
      a_tap_reads_only_the_border = true;
      continue;
    }
    inside_taps.insert(inside_taps.end(), d, d + ndim);
    for (size_t ax = 0; ax < ndim; ++ax) {
      margin[ax] = std::max(margin[ax], magnitude(d[ax]));
      lowest[ax] = std::min(lowest[ax], d[ax]);
      highest[ax] = std::max(highest[ax], d[ax]);
    }
  }
  Padded padded(shape, margin);
  const int64_t row = shape[ndim - 1];
  // The state of every element; the seeds: every element holding `spread`,
  // and, where the border counts as `spread`, every changeable element whose
  // window reaches past an edge (some tap does exactly when, along some
  // axis, the lowest or highest offset does, or a tap never lands inside).
  std::vector<int64_t> queue;
  const uint8_t* source = values;
  const uint8_t* may = changeable;
  padded.for_each_row(shape, [&](int64_t first, const std::vector<int64_t>& at) {
    bool row_reaches_past_an_edge = a_tap_reads_only_the_border;
    for (size_t ax = 0; ax + 1 < ndim; ++ax)
      row_reaches_past_an_edge = row_reaches_past_an_edge || at[ax] + lowest[ax] < 0 ||
                                 at[ax] + highest[ax] >= shape[ax];
    uint8_t* state = &padded.state[first];
    const uint8_t *row_values = source, *row_may = may;
    source += row;
    if (may) may += row;
    for (int64_t x = 0; x < row; ++x)  // (vectorised)
      state[x] = (uint8_t)(row_values[x] != 0) | ((!row_may || row_may[x]) ? kChangeable : 0);
    for (int64_t x = 0; x < row; ++x)
      if ((state[x] & 1) == spread) queue.push_back(first + x);
    if (border != spread) return;
    const uint8_t waiting = kChangeable | (spread ^ 1);
    auto seed_edge = [&](int64_t from, int64_t to) {
      for (int64_t x = std::max<int64_t>(from, 0); x < std::min(to, row); ++x) {
        if (state[x] == waiting) {
          state[x] = kChangeable | spread;
          queue.push_back(first + x);
        }
      }
    };
    if (row_reaches_past_an_edge) {
      seed_edge(0, row);
    } else {  // the elements within reach of the row's ends
      seed_edge(0, -lowest[ndim - 1]);
      seed_edge(std::max(-lowest[ndim - 1], row - highest[ndim - 1]), row);
    }
  });
  // The spread: element j takes `spread` when some i = j + d of its window
  // holds it, so each element spread reaches the j = i - d around it.
  std::vector<int64_t> distance;
  std::vector<int64_t> negated(ndim);
  for (size_t k = 0; k < inside_taps.size() / ndim; ++k) {
    for (size_t ax = 0; ax < ndim; ++ax) negated[ax] = -inside_taps[k * ndim + ax];
    distance.push_back(padded.distance(negated.data()));
  }
  const uint8_t waiting = kChangeable | (spread ^ 1), reached = kChangeable | spread;
  for (size_t head = 0; head < queue.size(); ++head) {
    const int64_t i = queue[head];
    for (int64_t d : distance) {
      if (padded.state[i + d] == waiting) {
        padded.state[i + d] = reached;
        queue.push_back(i + d);
      }
    }
  }
  uint8_t* target = values;
  padded.for_each_row(shape, [&](int64_t first, const std::vector<int64_t>&) {
    for (int64_t x = 0; x < row; ++x) target[x] = padded.state[first + x] & 1;
    target += row;
  });
}

}  // namespace gpufilt
