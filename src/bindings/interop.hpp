// Import of any array-like Python object into an ArrayDesc, without copying:
// DLPack (__dlpack__ or a raw capsule), __cuda_array_interface__ (v2, v3) or
// the buffer protocol, in that order (DESIGN.md, "Interop rules").
#pragma once
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "core/array.hpp"

namespace gpufilt {
namespace py = pybind11;

enum class Access { Read, Write };

struct ImportOptions {
  // The CUDA stream gpufilt will run on (cudaStream_t as an int; 0 = legacy
  // default), handed to __dlpack__ so the producer orders its work before ours.
  intptr_t stream = 0;
  // Resolves the device of a CUDA pointer (CAI carries no device id); null in
  // builds without CUDA, which then report device id -1.
  int (*pointer_device)(const void*) = nullptr;
};

// A protocol's release step (the DLPack deleter, PyBuffer_Release), run once
// when destroyed. Move-only; a function pointer rather than a shared_ptr so
// that an import allocates no control block.
class Release {
 public:
  Release() = default;
  Release(void (*fn)(void*), void* p) : fn_(fn), p_(p) {}
  Release(Release&& o) noexcept : fn_(std::exchange(o.fn_, nullptr)), p_(o.p_) {}
  Release& operator=(Release&& o) noexcept {
    if (this != &o) {
      reset();
      fn_ = std::exchange(o.fn_, nullptr);
      p_ = o.p_;
    }
    return *this;
  }
  ~Release() { reset(); }
  void reset() {
    if (auto fn = std::exchange(fn_, nullptr)) fn(p_);
  }

 private:
  void (*fn_)(void*) = nullptr;
  void* p_ = nullptr;
};

// An imported array. Holds what keeps the memory valid (the producer object,
// the buffer view, the DLPack deleter) until destroyed; destroy it with the
// GIL held.
struct ImportedArray {
  ArrayDesc desc;
  bool readonly = false;
  const char* protocol = "";
  // CAI v3 "stream": work on it must finish before gpufilt reads (0 = none).
  intptr_t producer_stream = 0;
  py::object owner;
  Release release;
};

// The imported arrays of one call, as a braced list ({&a, &b}) or a pointer
// and a count: a view, so that checking a call's arrays allocates nothing.
class CallArrays {
 public:
  CallArrays(std::initializer_list<const ImportedArray*> list) : data_(list.begin()), size_(list.size()) {}
  CallArrays(const ImportedArray* const* data, size_t size) : data_(data), size_(size) {}
  size_t size() const { return size_; }
  const ImportedArray* operator[](size_t i) const { return data_[i]; }
  const ImportedArray* const* begin() const { return data_; }
  const ImportedArray* const* end() const { return data_ + size_; }

 private:
  const ImportedArray* const* data_;
  size_t size_;
};

// Imports `obj` (called `name` in error messages). Access::Write refuses
// read-only memory with ValueError; bad dtypes, byte orders and strides raise
// TypeError or ValueError naming `name`.
ImportedArray import_array(py::handle obj, const char* name, Access access,
                           const ImportOptions& options);

// Makes the Python objects import_array keeps for the process. Called once
// from each module's init: made lazily, a first import racing another thread
// could start a garbage collection (Python < 3.12) that hands the GIL over
// inside the one-time initialisation, and deadlock.
void prepare_import();

// What the importer saw, for gpufilt.describe().
py::dict describe_array(const ImportedArray& a);

}  // namespace gpufilt
