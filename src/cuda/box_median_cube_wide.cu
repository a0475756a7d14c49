// The 5x5x5 median on uint32 and uint64 keys (box_median.cuh).
#include "cuda/box_median_kernels.cuh"

namespace gpufilt::cuda {

bool launch_cube_median_other_keys(KeyKind kind, const BoxArgs& a, cudaStream_t stream) {
  return is_box(a, 5, 5, 5) &&
         launch_any_io_median<BoxShape<5, 5, 5>, KeyKind::UInt, KeyKind::Double>(kind, a, stream);
}

}  // namespace gpufilt::cuda
