// Import of any array-like Python object into an ArrayDesc, without copying:
// DLPack (__dlpack__ or a raw capsule), __cuda_array_interface__ (v2, v3) or
// the buffer protocol, in that order (DESIGN.md, "Interop rules").
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <functional>
#include <memory>

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
  // Accept bfloat16 (DLPack only): for the kernels that handle it (matmul on
  // cuBLAS); every other kernel keeps refusing it with a TypeError.
  bool bfloat16 = false;
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
  std::shared_ptr<void> release;  // runs the protocol's release step last
};

// Imports `obj` (called `name` in error messages). Access::Write refuses
// read-only memory with ValueError; bad dtypes, byte orders and strides raise
// TypeError or ValueError naming `name`.
ImportedArray import_array(py::handle obj, const char* name, Access access,
                           const ImportOptions& options);

// What the importer saw, for gpufilt.describe().
py::dict describe_array(const ImportedArray& a);

}  // namespace gpufilt
