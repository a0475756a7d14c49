// CUDA backend of the elementwise ops (core/elementwise.hpp): out = op(a, b)
// with the operands already broadcast to out's shape. Same-dtype contiguous
// calls run 16-byte vector loads and stores; the rest decode a merged
// strided loop per element and convert operands of other dtypes as they are
// read. A `b` in host memory is a scalar passed by value in the parameters.
#include <cstring>

#include "core/elementwise.hpp"
#include "cuda/check.cuh"
#include "cuda/elements.cuh"
#include "cuda/strided.cuh"

namespace gpufilt::cuda {
namespace {

struct ElementwiseArgs {
  StridedLoop<3> loop;  // out, a, b
  char* out;
  const char* a;
  const char* b;
  DType a_dtype, b_dtype;
  Elementwise op;
  bool b_by_value, aligned;
  uint64_t b_value;  // the scalar's bits in out's dtype
};

template <DType T>
__device__ __forceinline__ typename storage<T>::type read(DType t, const char* p, bool aligned) {
  using S = typename storage<T>::type;
  if (t == T && aligned) return *reinterpret_cast<const S*>(p);
  return load_operand<T>(t, p);
}

template <DType T>
__global__ void __launch_bounds__(kLoopThreads) elementwise_strided(const __grid_constant__ ElementwiseArgs g) {
  using S = typename storage<T>::type;
  S scalar;
  memcpy(&scalar, &g.b_value, sizeof(S));
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < g.loop.size; i += step) {
    int64_t off[3];
    g.loop.offsets(i, off);
    const S x = read<T>(g.a_dtype, g.a + off[1], g.aligned);
    const S y = g.b_by_value ? scalar : read<T>(g.b_dtype, g.b + off[2], g.aligned);
    const S r = elementwise_value<T>(g.op, x, y);
    if (g.aligned) *reinterpret_cast<S*>(g.out + off[0]) = r;
    else copy_element(g.out + off[0], &r, sizeof(S));
  }
}

// Contiguous operands of dtype T, 16-byte aligned: 16 bytes per load and store.
template <DType T>
__global__ void __launch_bounds__(kLoopThreads) elementwise_vector(const __grid_constant__ ElementwiseArgs g) {
  using S = typename storage<T>::type;
  constexpr int V = 16 / sizeof(S);
  S scalar;
  memcpy(&scalar, &g.b_value, sizeof(S));
  const int64_t step = (int64_t)gridDim.x * blockDim.x, first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t vectors = g.loop.size / V;
  for (int64_t v = first; v < vectors; v += step) {
    uint4 ra = reinterpret_cast<const uint4*>(g.a)[v], rb = ra, ro;
    if (!g.b_by_value) rb = reinterpret_cast<const uint4*>(g.b)[v];
    const S* x = reinterpret_cast<const S*>(&ra);
    const S* y = reinterpret_cast<const S*>(&rb);
    S* r = reinterpret_cast<S*>(&ro);
#pragma unroll
    for (int k = 0; k < V; ++k) r[k] = elementwise_value<T>(g.op, x[k], g.b_by_value ? scalar : y[k]);
    reinterpret_cast<uint4*>(g.out)[v] = ro;
  }
  for (int64_t i = vectors * V + first; i < g.loop.size; i += step) {
    const S* x = reinterpret_cast<const S*>(g.a);
    const S* y = reinterpret_cast<const S*>(g.b);
    reinterpret_cast<S*>(g.out)[i] = elementwise_value<T>(g.op, x[i], g.b_by_value ? scalar : y[i]);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <DType T>
struct ElementwiseLaunch {
  static void run(const ElementwiseArgs& g, cudaStream_t stream) {
    constexpr int64_t item = sizeof(typename storage<T>::type);
    const bool vector = g.a_dtype == T && g.loop.contiguous(0, item) && g.loop.contiguous(1, item) &&
                        aligned16(g.out) && aligned16(g.a) &&
                        (g.b_by_value || (g.b_dtype == T && g.loop.contiguous(2, item) && aligned16(g.b)));
    if (vector) elementwise_vector<T><<<loop_blocks(g.loop.size / (16 / item) + 1), kLoopThreads, 0, stream>>>(g);
    else elementwise_strided<T><<<loop_blocks(g.loop.size), kLoopThreads, 0, stream>>>(g);
    GF_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

void CudaBackend::elementwise(Elementwise op, const ArrayDesc& a, const ArrayDesc& b, const ArrayDesc& out) {
  if (out.size() == 0) return;
  ElementwiseArgs g{};
  const bool by_value = is_host_operand(b);
  const ArrayDesc* const arrays[3] = {&out, &a, by_value ? &out : &b};
  g.loop = make_loop<3>(arrays);
  g.out = out.data;
  g.a = a.data;
  g.b = by_value ? nullptr : b.data;
  g.a_dtype = a.dtype;
  g.b_dtype = b.dtype;
  g.op = op;
  g.b_by_value = by_value;
  if (by_value) std::memcpy(&g.b_value, b.data, (size_t)itemsize(b.dtype));  // b.dtype == out.dtype
  g.aligned = is_aligned(out) && is_aligned(a) && (by_value || is_aligned(b));
  dispatch_real_or_bfloat16<ElementwiseLaunch>(out.dtype, g, as_stream(stream_));
}

}  // namespace gpufilt::cuda
