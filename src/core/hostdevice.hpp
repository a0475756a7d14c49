// Marks functions shared by the CPU and CUDA kernels: __host__ __device__ under
// nvcc, plain inline functions for the host compiler.
#pragma once
#if defined(__CUDACC__)
#define GF_HD __host__ __device__ __forceinline__
#else
#define GF_HD inline
#endif
