// Checks and row geometry of the neural-network kernels (shared with CUDA),
// and their CPU kernels: OpenMP over rows (over tiles of a row for the
// pointwise ops, so one long contiguous array still uses every core).
#include "core/ops_nn.hpp"

#include "core/parallel.hpp"
#include <algorithm>
#include <stdexcept>
#include <string>

namespace gpufilt {
namespace {

constexpr int64_t kTile = 4096;          // pointwise elements per OpenMP work item
constexpr int64_t kParallelWork = 32768;  // below this, threads cost more than they save

// Checks run on every call: a literal message, so that passing builds no
// std::string (messages built from values are built only on failure).
void require(bool ok, const char* message) {
  if (!ok) throw std::invalid_argument(message);
}

void require_float(DType t, const char* name) {
  if (!is_nn_float(t))
    throw std::invalid_argument(std::string(name) + " has dtype " + dtype_name(t) + "; a float dtype is needed");
}

// `out` may be the very array `in` (in place) but not a shifted view of it:
// rows would then read elements another row already wrote.
void require_no_partial_overlap(const ArrayDesc& in, const char* in_name, const ArrayDesc& out) {
  if (may_overlap(in, out) && !same_layout(in, out))
    throw std::invalid_argument(std::string("out overlaps ") + in_name +
                                " without being the same array; pass the same array (in place) or one that "
                                "shares no memory");
}

int normalize_axis(int axis, int ndim, const char* what) {
  const int n = ndim > 0 ? ndim : 1;  // a 0-d array takes axis 0 or -1, as torch
  if (axis < -n || axis >= n)
    throw std::invalid_argument("axis " + std::to_string(axis) + " is out of bounds for " + what + " of " +
                                std::to_string(ndim) + " dimensions");
  return axis < 0 ? axis + n : axis;
}

// Outer axes `dims` (C order) of the arrays in `slots` (null: unused; the
// axis map gives each slot's axis for a logits axis, -1 where it has none)
// become rows' outer geometry; adjacent axes that are contiguous in every
// array are merged, size-1 axes dropped.
void set_outer(Rows& r, const ArrayDesc* const* slots, const int* dims, int ndims, const int (*axis_map)[kMaxDims],
               const ArrayDesc& shape_of) {
  r.ndim = 0;
  r.count = 1;
  for (int i = 0; i < ndims; ++i) {
    const int d = dims[i];
    const int64_t n = shape_of.shape[d];
    r.count *= n;
    if (n == 1) continue;
    int64_t stride[kRowArrays] = {};
    for (int k = 0; k < kRowArrays; ++k)
      if (slots[k] && axis_map[k][d] >= 0) stride[k] = slots[k]->strides[axis_map[k][d]];
    bool mergeable = r.ndim > 0;
    for (int k = 0; k < kRowArrays && mergeable; ++k)
      mergeable = r.strides[k][r.ndim - 1] == stride[k] * n;
    if (mergeable) {
      r.shape[r.ndim - 1] *= n;
      for (int k = 0; k < kRowArrays; ++k) r.strides[k][r.ndim - 1] = stride[k];
      continue;
    }
    r.shape[r.ndim] = n;
    for (int k = 0; k < kRowArrays; ++k) r.strides[k][r.ndim] = stride[k];
    ++r.ndim;
  }
}

// Each slot's axis for axis d of an array of `ndim` axes: itself, or with
// `dropped` removed (index labels), or none for unused slots.
void identity_map(int (&map)[kMaxDims], int ndim, int dropped = -1) {
  for (int d = 0; d < ndim; ++d) map[d] = dropped < 0 || d < dropped ? d : d == dropped ? -1 : d - 1;
}

// Rows along `axis` of `shape_of` for the arrays in `slots`.
Rows make_rows(const ArrayDesc& shape_of, int axis, const ArrayDesc* const* slots, const int (*axis_map)[kMaxDims]) {
  Rows r;
  for (int k = 0; k < kRowArrays; ++k) r.data[k] = slots[k] ? slots[k]->data : nullptr;
  int dims[kMaxDims], ndims = 0;
  for (int d = 0; d < shape_of.ndim; ++d)
    if (d != axis) dims[ndims++] = d;
  set_outer(r, slots, dims, ndims, axis_map, shape_of);
  if (shape_of.ndim == 0) return r;  // one row of one element
  r.length = shape_of.shape[axis];
  for (int k = 0; k < kRowArrays; ++k)
    if (slots[k] && axis_map[k][axis] >= 0) r.step[k] = slots[k]->strides[axis_map[k][axis]];
  return r;
}

// ------------------------------------------------------------- CPU kernels

template <DType T> inline acc_t<T> ld(const char* p) { return (acc_t<T>)load_as_double<T>(p); }
template <DType T> inline void st(char* p, acc_t<T> v) { store_from_double<T>(p, (double)v); }

// Calls Fn<t>::run(args...) for the float dtype t.
template <template <DType> class Fn, class... Args>
void dispatch_nn_float(DType t, Args&&... args) {
  switch (t) {
    case DType::Float16: return Fn<DType::Float16>::run(static_cast<Args&&>(args)...);
    case DType::BFloat16: return Fn<DType::BFloat16>::run(static_cast<Args&&>(args)...);
    case DType::Float32: return Fn<DType::Float32>::run(static_cast<Args&&>(args)...);
    case DType::Float64: return Fn<DType::Float64>::run(static_cast<Args&&>(args)...);
    default: throw std::invalid_argument(std::string("dtype ") + dtype_name(t) + " is not a float dtype");
  }
}

template <DType T, Pointwise Op>
void pointwise_tiles(const Rows& r) {
  using A = acc_t<T>;
  const int64_t tiles_per_row = (r.length + kTile - 1) / kTile;
  const int64_t tiles = r.count * tiles_per_row;
  parallel_for(tiles, r.count * r.length > kParallelWork, [&](int64_t t) {
    const int64_t row = t / tiles_per_row, begin = t % tiles_per_row * kTile;
    const int64_t end = std::min(r.length, begin + kTile);
    int64_t off[kRowArrays];
    r.locate(row, off);
    const char* x = r.data[0] + off[0];
    const char* g = r.data[1] + off[1];
    char* o = r.data[2] + off[2];
    for (int64_t j = begin; j < end; ++j) {
      const A xv = ld<T>(x + j * r.step[0]);
      const A gv = takes_grad(Op) ? ld<T>(g + j * r.step[1]) : A(0);
      st<T>(o + j * r.step[2], pointwise_apply<Op>(xv, gv));
    }
  });
}

template <DType T> struct PointwiseCpu {
  static void run(Pointwise op, const Rows& r) {
    switch (op) {
      case Pointwise::Relu: return pointwise_tiles<T, Pointwise::Relu>(r);
      case Pointwise::ReluGrad: return pointwise_tiles<T, Pointwise::ReluGrad>(r);
      case Pointwise::Sigmoid: return pointwise_tiles<T, Pointwise::Sigmoid>(r);
      case Pointwise::SigmoidGrad: return pointwise_tiles<T, Pointwise::SigmoidGrad>(r);
    }
  }
};

// Online max and sum of one row of logits (slot 0).
template <DType T> RowStats<acc_t<T>> row_stats(const Rows& r, const int64_t* off) {
  BlockedRowStats<acc_t<T>> s;
  const char* x = r.data[0] + off[0];
  for (int64_t j = 0; j < r.length; ++j) s.add(ld<T>(x + j * r.step[0]));
  return s.result();
}

template <DType T> struct SoftmaxCpu {
  static void run(const Rows& r, bool log) {
    using A = acc_t<T>;
    parallel_for(r.count, r.count * r.length > kParallelWork, [&](int64_t row) {
      int64_t off[kRowArrays];
      r.locate(row, off);
      const RowStats<A> s = row_stats<T>(r, off);
      const char* x = r.data[0] + off[0];
      char* o = r.data[2] + off[2];
      // (x - max) - log(sum), not x - (max + log(sum)): with logits of 1e4
      // the latter loses the small result in the rounding of the large sum.
      const A log_sum = log_of(s.sum), inv_sum = A(1) / s.sum;
      for (int64_t j = 0; j < r.length; ++j) {
        const A shifted = ld<T>(x + j * r.step[0]) - s.max;
        st<T>(o + j * r.step[2], log ? shifted - log_sum : exp_of(shifted) * inv_sum);
      }
    });
  }
};

// Index labels are all checked before anything is computed, so that a bad
// one raises with the caller's output untouched.
void check_index_labels(const Rows& r) {
  if (!r.index_labels) return;
  for (int64_t row = 0; row < r.count; ++row) {
    int64_t off[kRowArrays];
    r.locate(row, off);
    const int64_t label = load_label(r.data[1] + off[1], r.label_dtype);
    if (label < 0 || label >= r.length)
      throw std::out_of_range("labels[" + std::to_string(row) + "] (flat index) is " + std::to_string(label) +
                              ", out of range for " + std::to_string(r.length) + " classes (0 <= label < " +
                              std::to_string(r.length) + ")");
  }
}

template <DType T> struct CrossEntropyCpu {
  static void run(const Rows& r, const ArrayDesc& loss) {
    using A = acc_t<T>;
    // The mean over rows is taken in double whatever T is.
    const double total = parallel_sum(r.count, r.count * r.length > kParallelWork, [&](int64_t row) -> double {
      int64_t off[kRowArrays];
      r.locate(row, off);
      const char* x = r.data[0] + off[0];
      if (r.index_labels) {
        const int64_t label = load_label(r.data[1] + off[1], r.label_dtype);
        return row_stats<T>(r, off).index_loss(ld<T>(x + label * r.step[0]));
      }
      BlockedRowStats<A> s;
      const char* p = r.data[1] + off[1];
      for (int64_t j = 0; j < r.length; ++j) s.add(ld<T>(x + j * r.step[0]), ld<T>(p + j * r.step[1]));
      return s.result().probability_loss();
    });
    st<T>(loss.data, (acc_t<T>)(total / (double)r.count));  // no rows: 0/0, NaN as torch's mean
  }
};

template <DType T> struct ScaleCpu {
  static void run(const char* p, double& v) { v = load_as_double<T>(p); }
};

template <DType T> struct CrossEntropyGradCpu {
  static void run(const Rows& r, double scale) {
    using A = acc_t<T>;
    const A s_row = (A)scale;
    parallel_for(r.count, r.count * r.length > kParallelWork, [&](int64_t row) {
      int64_t off[kRowArrays];
      r.locate(row, off);
      const RowStats<A> s = row_stats<T>(r, off);
      const char* x = r.data[0] + off[0];
      const char* p = r.data[1] + off[1];
      char* o = r.data[2] + off[2];
      const int64_t label = r.index_labels ? load_label(p, r.label_dtype) : -1;
      const A inv_sum = A(1) / s.sum;
      for (int64_t j = 0; j < r.length; ++j) {
        const A target = r.index_labels ? A(j == label) : ld<T>(p + j * r.step[1]);
        const A softmax = exp_of(ld<T>(x + j * r.step[0]) - s.max) * inv_sum;
        st<T>(o + j * r.step[2], (softmax - target) * s_row);
      }
    });
  }
};

}  // namespace

bool is_nn_float(DType t) { return is_float_dtype(t); }

// ------------------------------------------------------------------- plans

Rows plan_pointwise(Pointwise op, const ArrayDesc& x, const ArrayDesc& grad, const ArrayDesc& out) {
  require_float(x.dtype, "x");
  require(out.dtype == x.dtype && same_shape(x, out), "out must have the shape and dtype of x");
  const ArrayDesc& g = takes_grad(op) ? grad : x;
  require(g.dtype == x.dtype && same_shape(x, g), "grad must have the shape and dtype of x");
  require_no_partial_overlap(x, "x", out);
  if (takes_grad(op)) require_no_partial_overlap(g, "grad", out);

  // Sort the axes by out's stride, largest first, so that C, F and any
  // permuted contiguous layout merge into one row.
  int dims[kMaxDims];
  for (int d = 0; d < x.ndim; ++d) dims[d] = d;
  std::stable_sort(dims, dims + x.ndim, [&](int a, int b) {
    return std::abs(out.strides[a]) > std::abs(out.strides[b]);
  });
  const ArrayDesc* slots[kRowArrays] = {&x, &g, &out};
  int map[kRowArrays][kMaxDims];
  for (auto& m : map) identity_map(m, x.ndim);
  Rows r;
  for (int k = 0; k < kRowArrays; ++k) r.data[k] = slots[k]->data;
  r.dtype = x.dtype;
  set_outer(r, slots, dims, x.ndim, map, x);
  if (r.ndim == 0) return r;  // 0-d or all axes of length 1: one row of one element
  // The innermost merged axis becomes the row.
  --r.ndim;
  r.length = r.shape[r.ndim];
  for (int k = 0; k < kRowArrays; ++k) r.step[k] = r.strides[k][r.ndim];
  r.count = r.length ? r.count / r.length : 0;
  return r;
}

Rows plan_softmax(const ArrayDesc& x, const ArrayDesc& out, int axis) {
  require_float(x.dtype, "x");
  require(out.dtype == x.dtype && same_shape(x, out), "out must have the shape and dtype of x");
  require_no_partial_overlap(x, "x", out);
  axis = normalize_axis(axis, x.ndim, "x");
  const ArrayDesc* slots[kRowArrays] = {&x, nullptr, &out};
  int map[kRowArrays][kMaxDims];
  for (auto& m : map) identity_map(m, x.ndim);
  Rows r = make_rows(x, axis, slots, map);
  r.dtype = x.dtype;
  return r;
}

Rows plan_cross_entropy(const ArrayDesc& logits, const ArrayDesc& labels, int axis, const ArrayDesc* out) {
  require_float(logits.dtype, "logits");
  require(logits.ndim >= 1, "logits must have a class axis (at least one dimension)");
  axis = normalize_axis(axis, logits.ndim, "logits");
  require(logits.shape[axis] > 0, "logits has no classes (its class axis has length 0)");
  const bool index_labels = !is_nn_float(labels.dtype) && !is_complex(labels.dtype) && labels.dtype != DType::Bool;
  int map[kRowArrays][kMaxDims];
  for (auto& m : map) identity_map(m, logits.ndim);
  if (index_labels) {
    bool shape_ok = labels.ndim == logits.ndim - 1;
    for (int d = 0, k = 0; shape_ok && d < logits.ndim; ++d)
      if (d != axis) shape_ok = labels.shape[k++] == logits.shape[d];
    require(shape_ok, "index labels must have the shape of logits without the class axis");
    identity_map(map[1], logits.ndim, axis);
  } else {
    require(labels.dtype == logits.dtype && same_shape(labels, logits),
            "probability labels must have the shape and dtype of logits");
  }
  if (out) {
    require(out->dtype == logits.dtype && same_shape(logits, *out), "out must have the shape and dtype of logits");
    require_no_partial_overlap(logits, "logits", *out);
    require_no_partial_overlap(labels, "labels", *out);
  }
  const ArrayDesc* slots[kRowArrays] = {&logits, &labels, out};
  Rows r = make_rows(logits, axis, slots, map);
  r.dtype = logits.dtype;
  r.label_dtype = labels.dtype;
  r.index_labels = index_labels;
  return r;
}

// ----------------------------------------------------------------- runners

void cpu_pointwise(Pointwise op, const Rows& rows) {
  if (rows.count && rows.length) dispatch_nn_float<PointwiseCpu>(rows.dtype, op, rows);
}

void cpu_softmax(const Rows& rows, bool log) {
  if (rows.count && rows.length) dispatch_nn_float<SoftmaxCpu>(rows.dtype, rows, log);
}

void cpu_cross_entropy(const Rows& rows, const ArrayDesc& loss) {
  require(loss.ndim == 0 && loss.dtype == rows.dtype, "out must be a 0-d array of the logits' dtype");
  check_index_labels(rows);
  dispatch_nn_float<CrossEntropyCpu>(rows.dtype, rows, loss);
}

void cpu_cross_entropy_grad(const Rows& rows, const LossScale& grad) {
  check_index_labels(rows);
  double scale = grad.value;
  if (grad.data) dispatch_nn_float<ScaleCpu>(grad.dtype, grad.data, scale);
  if (rows.count) dispatch_nn_float<CrossEntropyGradCpu>(rows.dtype, rows, scale / (double)rows.count);
}

}  // namespace gpufilt
