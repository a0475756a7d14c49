// The separable medians of 3x3, 5x5, 7x7 and 3x3x3 boxes (box_median.cuh).
#include "cuda/box_median_kernels.cuh"

namespace gpufilt::cuda {

bool launch_column_median(KeyKind kind, const BoxArgs& a, cudaStream_t stream) {
  const auto launch = [&](auto shape) {
    using Shape = decltype(shape);
    return launch_same_io_median<Shape>(a, stream) ||
           launch_any_io_median<Shape, KeyKind::Int, KeyKind::UInt, KeyKind::Float, KeyKind::Double>(kind, a, stream);
  };
  if (is_box(a, 3, 1, 3)) return launch(ColumnShape<3, 1, 3>());
  if (is_box(a, 5, 1, 5)) return launch(ColumnShape<5, 1, 5>());
  if (is_box(a, 7, 1, 7)) return launch(ColumnShape<7, 1, 7>());
  if (is_box(a, 3, 3, 3)) return launch(ColumnShape<3, 3, 3>());
  return false;
}

}  // namespace gpufilt::cuda
