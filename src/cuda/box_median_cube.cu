// The 5x5x5 median on int32 keys (box_median.cuh).
#include "cuda/box_median_kernels.cuh"

namespace gpufilt::cuda {

bool launch_cube_median_int32_keys(KeyKind kind, const BoxArgs& a, cudaStream_t stream) {
  using Cube = BoxShape<5, 5, 5>;
  return is_box(a, 5, 5, 5) && (launch_same_io_median<Cube>(a, stream) ||
                                launch_any_io_median<Cube, KeyKind::Int, KeyKind::Float>(kind, a, stream));
}

}  // namespace gpufilt::cuda
