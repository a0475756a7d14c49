// ArrayDesc: what a kernel needs to know of an array, whoever produced it:
// pointer, element type, shape, byte strides and where the memory lives.
// Plain data, passed by value to CUDA kernels too.
#pragma once
#include <cstdint>
#include <string>
#include "core/dtype.hpp"

namespace gpufilt {

constexpr int kMaxDims = 32;

enum class Device : int8_t { CPU = 1, CUDA = 2 };

struct ArrayDesc {
  char* data = nullptr;
  DType dtype = DType::Float64;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};  // in bytes, may be negative or zero
  Device device = Device::CPU;
  int device_id = 0;

  int64_t size() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
};

// [lo, hi) byte range an array touches; empty arrays touch nothing.
struct ByteExtent {
  uintptr_t lo, hi;
};
ByteExtent byte_extent(const ArrayDesc& a);

// True when two arrays may share memory (conservative: extents intersect).
bool may_overlap(const ArrayDesc& a, const ArrayDesc& b);

// True when both arrays address exactly the same elements in the same order.
bool same_layout(const ArrayDesc& a, const ArrayDesc& b);

bool same_shape(const ArrayDesc& a, const ArrayDesc& b);

// True when two elements of `a` may share memory (a stride 0, or strides
// that interleave). numpy's conservative test: with the axes of more than
// one element sorted by |stride|, each |stride| must reach past everything
// the smaller axes span; else true. False for arrays of at most one element.
// Assumes the byte extent fits in int64 (the importer checked it).
bool may_self_overlap(const ArrayDesc& a);

// Descriptor of a C-contiguous array of the given dtype over `data`.
ArrayDesc contiguous_like(const ArrayDesc& shape_of, DType dtype, char* data);

// `a` viewed with the shape of `shape_of` by numpy's broadcasting rules
// (axes aligned on the right; missing and length-1 axes get stride 0).
// Throws std::invalid_argument naming `name` when the shapes do not broadcast.
ArrayDesc broadcast_view(const ArrayDesc& a, const ArrayDesc& shape_of, const char* name);

// "(2, 3)": a shape as numpy prints it, for error messages; strides alike.
std::string shape_string(const ArrayDesc& a);
std::string strides_string(const ArrayDesc& a);

// The real or imaginary part (component 0 or 1) of a complex array, as a view.
ArrayDesc complex_component(const ArrayDesc& a, int component);

}  // namespace gpufilt
