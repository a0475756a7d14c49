// Matrix products on BLAS, never a hand-written GEMM. One plan maps a numpy
// (row-major, any strides BLAS can express) matmul onto a column-major
// strided-batched GEMM; the CPU runs it on the BLAS numpy itself loaded (found
// in the process at run time, so no BLAS is a link-time dependency) and CUDA
// on cuBLAS (src/cuda/cublas.hpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/array.hpp"

namespace gpufilt {

// Shape of matmul(a, b) for 2-D or 3-D shapes, after trans_a / trans_b swap
// the last two axes of a / b. A 2-D operand or a batch of 1 broadcasts
// against the other's batch. std::invalid_argument (ValueError) naming a and
// b when the shapes do not multiply.
std::vector<int64_t> matmul_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                  bool trans_a, bool trans_b);

// A column-major operand as BLAS reads it; strides count elements.
struct GemmOperand {
  const char* data = nullptr;
  bool trans = false;        // BLAS applies op = transpose to the stored matrix
  int64_t ld = 1;            // leading dimension, >= max(1, stored rows)
  int64_t batch_stride = 0;  // 0 broadcasts one matrix over the batch
};

// C[i] = op(A[i]) op(B[i]) for i < batch; C is m x n, column-major.
struct GemmPlan {
  DType dtype = DType::Float32;
  int64_t m = 0, n = 0, k = 0, batch = 0;
  GemmOperand a, b;
  char* c = nullptr;
  int64_t ldc = 1, c_batch_stride = 0;
};

// The GEMM that computes out = op(a) @ op(b). Strides need a unit stride in
// one of the last two axes and the other at least the extent (what BLAS's
// leading dimension can express; transposed views qualify, no copy is made);
// any batch stride. std::invalid_argument (ValueError) naming the array
// otherwise, or when out's shape is not the product's. Dtypes and devices are
// the caller's to check.
GemmPlan plan_matmul(const ArrayDesc& a, const ArrayDesc& b, const ArrayDesc& out, bool trans_a,
                     bool trans_b);

// The CPU BLAS in use: the library file, the sgemm symbol found and the width
// of its integers (64 for ILP64 builds such as numpy's scipy-openblas64).
struct BlasLibrary {
  std::string path, symbol;
  int int_bits = 0;
};

// Finds cblas sgemm/dgemm once per process: first among the libraries already
// loaded (numpy's own BLAS), then in `candidates` (library files, e.g. from
// the scipy-openblas wheels). std::runtime_error saying what was looked for
// and how to get a BLAS when none is found; later calls return the first find.
BlasLibrary load_blas(const std::vector<std::string>& candidates);

// Runs `plan` (float32 or float64) on the BLAS of load_blas, on the calling
// thread (BLAS threads as the library is configured). No GIL needed.
void cpu_gemm(const GemmPlan& plan);

}  // namespace gpufilt
