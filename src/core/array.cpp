#include "core/array.hpp"

#include <stdexcept>

namespace gpufilt {

ByteExtent byte_extent(const ArrayDesc& a) {
  uintptr_t base = reinterpret_cast<uintptr_t>(a.data);
  if (a.size() == 0) return {base, base};
  int64_t lo = 0, hi = itemsize(a.dtype);
  for (int i = 0; i < a.ndim; ++i) {
    int64_t span = (a.shape[i] - 1) * a.strides[i];
    if (span < 0) lo += span; else hi += span;
  }
  return {base + lo, base + hi};
}

bool may_overlap(const ArrayDesc& a, const ArrayDesc& b) {
  if (a.device != b.device) return false;
  ByteExtent x = byte_extent(a), y = byte_extent(b);
  return x.lo < x.hi && y.lo < y.hi && x.lo < y.hi && y.lo < x.hi;
}

bool same_shape(const ArrayDesc& a, const ArrayDesc& b) {
  if (a.ndim != b.ndim) return false;
  for (int i = 0; i < a.ndim; ++i)
    if (a.shape[i] != b.shape[i]) return false;
  return true;
}

bool may_self_overlap(const ArrayDesc& a) {
  if (a.size() <= 1) return false;
  int64_t steps[kMaxDims], counts[kMaxDims];
  int n = 0;
  for (int i = 0; i < a.ndim; ++i) {
    if (a.shape[i] == 1) continue;
    // Insertion sort by |stride|: a handful of axes.
    const int64_t step = a.strides[i] < 0 ? -a.strides[i] : a.strides[i];
    int k = n++;
    for (; k > 0 && steps[k - 1] > step; --k) steps[k] = steps[k - 1], counts[k] = counts[k - 1];
    steps[k] = step, counts[k] = a.shape[i];
  }
  int64_t reach = itemsize(a.dtype);  // bytes the smaller axes span, from an element's first byte
  for (int k = 0; k < n; ++k) {
    if (steps[k] < reach) return true;
    reach += steps[k] * (counts[k] - 1);
  }
  return false;
}

bool same_layout(const ArrayDesc& a, const ArrayDesc& b) {
  if (a.data != b.data || a.dtype != b.dtype || !same_shape(a, b)) return false;
  for (int i = 0; i < a.ndim; ++i)
    if (a.shape[i] > 1 && a.strides[i] != b.strides[i]) return false;
  return true;
}

ArrayDesc contiguous_like(const ArrayDesc& shape_of, DType dtype, char* data) {
  ArrayDesc d = shape_of;
  d.data = data;
  d.dtype = dtype;
  int64_t stride = itemsize(dtype);
  for (int i = d.ndim - 1; i >= 0; --i) {
    d.strides[i] = stride;
    stride *= d.shape[i] > 0 ? d.shape[i] : 1;
  }
  return d;
}

std::string shape_string(const ArrayDesc& a) {
  std::string s = "(";
  for (int i = 0; i < a.ndim; ++i) s += std::to_string(a.shape[i]) + (a.ndim == 1 ? "," : i + 1 < a.ndim ? ", " : "");
  return s + ")";
}

std::string strides_string(const ArrayDesc& a) {
  ArrayDesc s = a;
  for (int i = 0; i < a.ndim; ++i) s.shape[i] = a.strides[i];
  return shape_string(s);
}

ArrayDesc broadcast_view(const ArrayDesc& a, const ArrayDesc& shape_of, const char* name) {
  const int lead = shape_of.ndim - a.ndim;
  bool ok = lead >= 0;
  ArrayDesc v = a;
  v.ndim = shape_of.ndim;
  for (int d = shape_of.ndim - 1; ok && d >= 0; --d) {
    const int k = d - lead;
    v.shape[d] = shape_of.shape[d];
    if (k >= 0 && a.shape[k] == shape_of.shape[d]) v.strides[d] = a.strides[k];
    else if (k < 0 || a.shape[k] == 1) v.strides[d] = 0;
    else ok = false;
  }
  if (!ok)
    throw std::invalid_argument(std::string(name) + " of shape " + shape_string(a) +
                                " does not broadcast to shape " + shape_string(shape_of));
  return v;
}

ArrayDesc complex_component(const ArrayDesc& a, int component) {
  ArrayDesc d = a;
  d.dtype = component_dtype(a.dtype);
  d.data = a.data + component * itemsize(d.dtype);
  return d;
}

}  // namespace gpufilt
