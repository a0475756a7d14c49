// cuBLAS behind plain C++ (no CUDA headers, so host binding code includes
// it): loaded at run time from libcublas.so.13, never a link-time dependency,
// so gpufilt imports where no CUDA toolkit is installed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/blas.hpp"

namespace gpufilt::cuda {

// Loads cuBLAS once per process and returns the file it came from: the copy
// already loaded (by torch or cupy), else the first of `candidates` (paths,
// e.g. in the nvidia-cublas wheel) that loads, else libcublas.so.13 from the
// system's library path. std::runtime_error telling how to install it when
// none loads; later calls return the first find.
std::string load_cublas(const std::vector<std::string>& candidates);

// Enqueues `plan` (float16, bfloat16, float32 or float64; 16-bit types
// accumulate in float32, float32 without TF32) on `stream` of the current
// device. Never blocks the host; capturable in a CUDA graph.
void cublas_gemm(const GemmPlan& plan, intptr_t stream);

}  // namespace gpufilt::cuda
