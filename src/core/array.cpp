#include "core/array.hpp"

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

ArrayDesc complex_component(const ArrayDesc& a, int component) {
  ArrayDesc d = a;
  d.dtype = component_dtype(a.dtype);
  d.data = a.data + component * itemsize(d.dtype);
  return d;
}

}  // namespace gpufilt
