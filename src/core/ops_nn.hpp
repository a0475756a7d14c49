// Neural-network kernels of gpufilt.ops: relu, sigmoid and their gradients,
// softmax, log_softmax, and softmax cross-entropy with its gradient.
//
// What the CPU kernels (ops_nn.cpp) and the CUDA kernels (src/cuda/ops_nn.cu)
// share: the math of one element or one row (__host__ __device__), the row
// geometry both walk, and the checks that turn arrays into that geometry.
// The bindings call plan_*() (which throws on bad input, before anything is
// written) and then the CPU or CUDA runner.
//
// Dtypes: float16, bfloat16, float32, float64. Accumulation: float for the
// 16-bit types and float32, double for float64.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/array.hpp"
#include "core/cast.hpp"

namespace gpufilt {

// ---------------------------------------------------------------- pointwise

enum class Pointwise : int8_t {
  Relu,         // out = max(x, 0), NaN kept (torch.relu)
  ReluGrad,     // out = x > 0 ? grad : 0 (torch's threshold_backward)
  Sigmoid,      // out = 1 / (1 + exp(-x)), without overflow for large |x|
  SigmoidGrad,  // out = grad * (1 - y) * y, y = sigmoid(x) (torch's sigmoid_backward)
};
GF_HD constexpr bool takes_grad(Pointwise op) { return op == Pointwise::ReluGrad || op == Pointwise::SigmoidGrad; }

template <DType T>
using acc_t = std::conditional_t<T == DType::Float64, double, float>;

template <class A> GF_HD A exp_of(A x) {
  if constexpr (std::is_same_v<A, float>) return expf(x);
  else return exp(x);
}
template <class A> GF_HD A log_of(A x) {
  if constexpr (std::is_same_v<A, float>) return logf(x);
  else return log(x);
}

// exp(-|x|) never overflows, so neither branch does.
template <class A> GF_HD A sigmoid_of(A x) {
  if (x >= A(0)) return A(1) / (A(1) + exp_of(-x));
  const A e = exp_of(x);
  return e / (A(1) + e);
}

template <Pointwise Op, class A> GF_HD A pointwise_apply(A x, A grad) {
  if constexpr (Op == Pointwise::Relu) return x <= A(0) ? A(0) : x;
  else if constexpr (Op == Pointwise::ReluGrad) return x <= A(0) ? A(0) : grad;
  else if constexpr (Op == Pointwise::Sigmoid) return sigmoid_of(x);
  else return grad * (A(1) - x) * x;  // torch's order of the products
}

// --------------------------------------------------------------------- rows

// Row-wise operations: softmax family along one axis of any strides.
enum class RowOp : int8_t { Softmax, LogSoftmax, CrossEntropy, CrossEntropyGrad };

// The arrays a row-wise (or pointwise) job walks: slot 0 the float input,
// slot 1 grad / labels, slot 2 the output; unused slots are null.
constexpr int kRowArrays = 3;

// Every index of the axes other than the row axis (C order, size-1 axes
// dropped) is a row; `length` elements along the row axis, `step` bytes
// apart in each array (0 for index labels, one per row).
struct Rows {
  char* data[kRowArrays] = {};
  int64_t count = 1, length = 1;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kRowArrays][kMaxDims] = {};
  int64_t step[kRowArrays] = {};
  DType dtype = DType::Float32;        // of slots 0 and 2 (and 1 unless index labels)
  DType label_dtype = DType::Float32;  // of slot 1
  bool index_labels = false;           // slot 1 holds one integer class index per row

  // Byte offset of row `row` in each array.
  GF_HD void locate(int64_t row, int64_t* offset) const {
    for (int k = 0; k < kRowArrays; ++k) offset[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t i = row % shape[d];
      row /= shape[d];
      for (int k = 0; k < kRowArrays; ++k) offset[k] += i * strides[k][d];
    }
  }
};

// Running max and sum of exp(x - max) of a row (online softmax), and for
// probability labels p: sum p and sum p * (x - max), kept relative to the
// running max so huge logits do not cancel catastrophically.
template <class A> struct RowStats {
  A max = -INFINITY, sum = A(0);
  A mass = A(0), shifted = A(0);

  // exp(a - m), with exp(-inf - -inf) taken as 1 so that a row that starts
  // with -inf does not turn NaN.
  static GF_HD A rescale(A a, A m) { return a == m ? A(1) : exp_of(a - m); }
  static GF_HD A reshift(A mass, A a, A m) { return mass == A(0) || a == m ? A(0) : mass * (a - m); }

  GF_HD void add(A x) {
    if (x > max) {
      sum = sum * rescale(max, x) + A(1);
      max = x;
    } else {
      sum += rescale(x, max);
    }
  }
  GF_HD void add(A x, A p) {
    if (x > max) {
      shifted += reshift(mass, max, x);
      sum = sum * rescale(max, x) + A(1);
      max = x;
    } else {
      sum += rescale(x, max);
    }
    shifted += p * (x - max);
    mass += p;
  }
  GF_HD void merge(const RowStats& o) {
    const A m = o.max > max ? o.max : max;
    sum = sum * rescale(max, m) + o.sum * rescale(o.max, m);
    shifted = shifted + reshift(mass, max, m) + o.shifted + reshift(o.mass, o.max, m);
    mass += o.mass;
    max = m;
  }
  // -sum_j p_j log_softmax(x)_j for probability labels.
  GF_HD A probability_loss() const { return mass * log_of(sum) - shifted; }
  // -log_softmax(x)_label for an index label whose logit is x_label.
  GF_HD A index_loss(A x_label) const { return log_of(sum) - (x_label - max); }
};

// RowStats of a long run of elements, added in blocks that are then merged:
// the rounding error of the sums grows with the block size plus the number
// of blocks instead of with the row length (a 70000-class float32 row would
// otherwise lose 1e-4 relative).
template <class A> struct BlockedRowStats {
  static constexpr int kBlock = 128;
  RowStats<A> total, block;
  int n = 0;
  GF_HD void add(A x) {
    block.add(x);
    if (++n == kBlock) flush();
  }
  GF_HD void add(A x, A p) {
    block.add(x, p);
    if (++n == kBlock) flush();
  }
  GF_HD void flush() {
    total.merge(block);
    block = RowStats<A>();
    n = 0;
  }
  GF_HD RowStats<A> result() {
    flush();
    return total;
  }
};

// An integer label of any integer dtype, as int64 (uint64 beyond int64 wraps
// negative and is then out of range).
GF_HD int64_t load_label(const char* p, DType t) {
  switch (t) {
    case DType::Int8: { int8_t v; copy_element(&v, p, 1); return v; }
    case DType::UInt8: { uint8_t v; copy_element(&v, p, 1); return v; }
    case DType::Int16: { int16_t v; copy_element(&v, p, 2); return v; }
    case DType::UInt16: { uint16_t v; copy_element(&v, p, 2); return v; }
    case DType::Int32: { int32_t v; copy_element(&v, p, 4); return v; }
    case DType::UInt32: { uint32_t v; copy_element(&v, p, 4); return v; }
    default: { int64_t v; copy_element(&v, p, 8); return v; }
  }
}

// The upstream gradient of the mean loss: a 0-d float array on the call's
// device (read by the kernel, so the host never waits for it) or a value.
struct LossScale {
  const char* data = nullptr;
  DType dtype = DType::Float64;
  double value = 1.0;
};

// ------------------------------------------------------------------- checks
// Each throws std::invalid_argument on shapes or dtypes that the Python layer
// should have refused already, and on an `out` that partly overlaps an input
// (the same array is fine: every kernel reads an element before writing it).

bool is_nn_float(DType t);  // float16, bfloat16, float32, float64

// x, grad (ignored unless takes_grad(op)) and out, one shape and dtype; the
// axes are sorted and merged so that contiguous arrays of any order become
// one row.
Rows plan_pointwise(Pointwise op, const ArrayDesc& x, const ArrayDesc& grad, const ArrayDesc& out);

// Rows of x and out along `axis` (-ndim <= axis < ndim; 0-d arrays are one row of one).
Rows plan_softmax(const ArrayDesc& x, const ArrayDesc& out, int axis);

// Rows of logits, labels and (for the gradient) out along the class axis.
// Index labels have logits' shape without `axis`; probability labels have
// logits' shape and dtype. `out` null for the loss.
Rows plan_cross_entropy(const ArrayDesc& logits, const ArrayDesc& labels, int axis, const ArrayDesc* out);

// ------------------------------------------------------------------ runners

// CPU (OpenMP over rows). cross_entropy checks every index label first and
// throws std::out_of_range (IndexError) naming the first bad one; `loss` is a
// 0-d array of the logits' dtype receiving the mean.
void cpu_pointwise(Pointwise op, const Rows& rows);
void cpu_softmax(const Rows& rows, bool log);
void cpu_cross_entropy(const Rows& rows, const ArrayDesc& loss);
void cpu_cross_entropy_grad(const Rows& rows, const LossScale& grad);

namespace cuda {
// CUDA (src/cuda/ops_nn.cu), enqueued on `stream` of the current device.
// An out-of-range index label cannot raise (src/cuda/range_error.cuh): the
// kernel never reads through it, the row's loss (hence the mean) and its
// gradient row become NaN, and the label is recorded for take_range_error
// (cuda/api.hpp).
void pointwise(Pointwise op, const Rows& rows, intptr_t stream);
void softmax(const Rows& rows, bool log, intptr_t stream);
void cross_entropy(const Rows& rows, const ArrayDesc& loss, intptr_t stream);
void cross_entropy_grad(const Rows& rows, const LossScale& grad, intptr_t stream);
}  // namespace cuda

}  // namespace gpufilt
