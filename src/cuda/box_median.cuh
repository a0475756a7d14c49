// The median kernels' launchers (box_median_kernels.cuh has the kernels),
// the fast path of box_rank.cu's rank filters for median_filter over 3x3,
// 5x5, 7x7, 3x3x3 and 5x5x5 boxes. They live in three translation units so
// that no compile needs more than 2 GB: one unit of them all took 3.8 GB of
// cicc memory, now each takes at most 1.4 GB (below).
#pragma once
#include <cuda_runtime.h>

#include "cuda/box_tile.cuh"

namespace gpufilt::cuda {

// How the median kernels compare a dtype's values: as int32, uint32, the
// order keys of floats' bits (float16, bfloat16, float32) or of doubles'.
enum class KeyKind { Int, UInt, Float, Double };

// Each launches the median of the box a.extent on `stream` and returns
// true, or returns false, having done nothing, where its unit has no kernel
// for the box and `kind` (or the array needs more blocks than a grid holds).
// box_median_columns.cu: the separable medians of 3x3, 5x5, 7x7 and 3x3x3.
bool launch_column_median(KeyKind kind, const BoxArgs& a, cudaStream_t stream);
// The 5x5x5 median, split by the type of its keys: cicc's memory grows with
// the key types a unit compiles the selection networks for (thousands of
// exchange functions each), 1.35 GB for one type, 2.5 GB for two.
// box_median_cube.cu: int32 keys (KeyKind::Int and Float, and the typed
// kernels of SameIO, which it tries first).
bool launch_cube_median_int32_keys(KeyKind kind, const BoxArgs& a, cudaStream_t stream);
// box_median_cube_wide.cu: uint32 and uint64 keys (KeyKind::UInt and Double).
bool launch_cube_median_other_keys(KeyKind kind, const BoxArgs& a, cudaStream_t stream);

}  // namespace gpufilt::cuda
