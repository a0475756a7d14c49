// Element access shared by the CUDA kernels: typed loads and stores when the
// array is aligned (byte-wise otherwise: a misaligned typed access kills the
// context), and the output dtype as a run-time switch.
#pragma once
#include <cuda_runtime.h>

#include "core/array.hpp"
#include "core/cast.hpp"

namespace gpufilt::cuda {

// True when every element of `a` can be read with one load of its own size.
// Device memory from any allocator is, but a view at an odd byte offset is
// not, and a misaligned load would kill the context.
inline bool is_aligned(const ArrayDesc& a) {
  const int64_t item = itemsize(a.dtype);
  if (reinterpret_cast<uintptr_t>(a.data) % item) return false;
  for (int d = 0; d < a.ndim; ++d)
    if (a.shape[d] > 1 && a.strides[d] % item) return false;
  return true;
}

// load_as_double, with one typed load instead of the byte loads its memcpy
// compiles to when the address is aligned.
template <DType T>
__device__ __forceinline__ double load_elem(const char* p, bool aligned) {
  using S = typename storage<T>::type;
  if (!aligned) return load_as_double<T>(p);
  const S v = *reinterpret_cast<const S*>(p);
  return load_as_double<T>(reinterpret_cast<const char*>(&v));
}

// store_from_double, with one typed store when aligned.
template <DType T>
__device__ __forceinline__ void store_elem(char* p, double v, bool aligned) {
  using S = typename storage<T>::type;
  if (!aligned) {
    store_from_double<T>(p, v);
    return;
  }
  S s;
  store_from_double<T>(reinterpret_cast<char*>(&s), v);
  *reinterpret_cast<S*>(p) = s;
}

// The output dtype is switched on at run time: the branch is taken once per
// output element and is the same across the grid, whereas templating on both
// dtypes would compile 144 variants of every kernel. Not inlined: a call per
// stored element is cheap, and inlining it at every store site doubled the
// build time.
static __device__ __noinline__ void store_any(DType t, char* p, double v, bool aligned) {
  switch (t) {
    case DType::Bool: return store_elem<DType::Bool>(p, v, aligned);
    case DType::Int8: return store_elem<DType::Int8>(p, v, aligned);
    case DType::UInt8: return store_elem<DType::UInt8>(p, v, aligned);
    case DType::Int16: return store_elem<DType::Int16>(p, v, aligned);
    case DType::UInt16: return store_elem<DType::UInt16>(p, v, aligned);
    case DType::Int32: return store_elem<DType::Int32>(p, v, aligned);
    case DType::UInt32: return store_elem<DType::UInt32>(p, v, aligned);
    case DType::Int64: return store_elem<DType::Int64>(p, v, aligned);
    case DType::UInt64: return store_elem<DType::UInt64>(p, v, aligned);
    case DType::Float16: return store_elem<DType::Float16>(p, v, aligned);
    case DType::Float32: return store_elem<DType::Float32>(p, v, aligned);
    case DType::BFloat16: return store_elem<DType::BFloat16>(p, v, aligned);
    default: return store_elem<DType::Float64>(p, v, aligned);
  }
}

// load_elem for an input dtype known at run time (real dtypes and bfloat16),
// for kernels that convert each element once on its way into shared memory.
static __device__ __forceinline__ double load_any(DType t, const char* p, bool aligned) {
  switch (t) {
    case DType::Bool: return load_elem<DType::Bool>(p, aligned);
    case DType::Int8: return load_elem<DType::Int8>(p, aligned);
    case DType::UInt8: return load_elem<DType::UInt8>(p, aligned);
    case DType::Int16: return load_elem<DType::Int16>(p, aligned);
    case DType::UInt16: return load_elem<DType::UInt16>(p, aligned);
    case DType::Int32: return load_elem<DType::Int32>(p, aligned);
    case DType::UInt32: return load_elem<DType::UInt32>(p, aligned);
    case DType::Int64: return load_elem<DType::Int64>(p, aligned);
    case DType::UInt64: return load_elem<DType::UInt64>(p, aligned);
    case DType::Float16: return load_elem<DType::Float16>(p, aligned);
    case DType::Float32: return load_elem<DType::Float32>(p, aligned);
    case DType::BFloat16: return load_elem<DType::BFloat16>(p, aligned);
    default: return load_elem<DType::Float64>(p, aligned);
  }
}

}  // namespace gpufilt::cuda
