// Bindings of the neural-network kernels (core/ops_nn.hpp), written once and
// registered in gpufilt._core (CpuPolicy) and gpufilt._cuda (CudaPolicy).
// python/gpufilt/_ops_nn.py checks the arguments and allocates outputs; these
// functions import the arrays, check devices and overlap, and run.
#pragma once
#include <pybind11/pybind11.h>

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

#include "bindings/common.hpp"
#include "core/ops_nn.hpp"

namespace gpufilt {

inline Pointwise parse_pointwise(const std::string& op) {
  if (op == "relu") return Pointwise::Relu;
  if (op == "relu_grad") return Pointwise::ReluGrad;
  if (op == "sigmoid") return Pointwise::Sigmoid;
  if (op == "sigmoid_grad") return Pointwise::SigmoidGrad;
  throw py::value_error("unknown pointwise operation '" + op + "'");
}

// Arrays of one call (reads, then the output), imported, checked to be on
// the policy's device, and made ready (device guard, producer streams). A
// read named nullptr is left out (an optional argument the call does not
// take). Fixed storage: a call allocates nothing on the heap here.
template <class Policy>
struct NnArrays {
  using Named = std::pair<py::handle, const char*>;
  static constexpr size_t kMax = 4;  // three reads and the output at most
  ImportedArray arrays[kMax];
  size_t count = 0;
  NnArrays(Policy& policy, std::initializer_list<Named> reads, Named write) {
    const ImportOptions options = policy.options();
    const char* names[kMax];
    const ImportedArray* all[kMax];
    auto add = [&](const Named& named, Access access) {
      if (count == kMax) throw std::logic_error("NnArrays: more arrays than kMax");
      arrays[count] = import_array(named.first, named.second, access, options);
      names[count] = named.second;
      all[count] = &arrays[count];
      ++count;
    };
    for (const Named& read : reads)
      if (read.second) add(read, Access::Read);
    add(write, Access::Write);
    require_device(CallArrays(all, count), names, Policy::device);
    policy.enter(CallArrays(all, count));
  }
  const ArrayDesc& operator[](size_t i) const { return arrays[i].desc; }
  const ArrayDesc& out() const { return arrays[count - 1].desc; }
};

// True for grad=None or a number; otherwise grad is a 0-d array, imported
// with the other arrays of the call.
inline bool is_scalar_grad(py::handle grad) {
  return grad.is_none() || py::isinstance<py::float_>(grad) || py::isinstance<py::int_>(grad);
}

// The upstream gradient: None (1), a number, or the imported 0-d float array
// (read by the kernel: the host never waits for its value).
inline LossScale loss_scale(py::handle grad, const ArrayDesc* array) {
  LossScale s;
  if (array) {
    if (array->ndim != 0 || !is_nn_float(array->dtype))
      throw py::type_error("grad must be None, a number or a 0-d float array");
    s.data = array->data;
    s.dtype = array->dtype;
  } else if (!grad.is_none()) {
    s.value = grad.cast<double>();
  }
  return s;
}

template <class Policy>
void register_nn_ops(py::module_& m) {
  constexpr bool cpu = Policy::device == Device::CPU;

  m.def("nn_pointwise", [](const std::string& op_name, py::handle x, py::handle grad, py::handle out,
                           intptr_t stream) {
    const Pointwise op = parse_pointwise(op_name);
    Policy policy(stream);
    NnArrays<Policy> a(policy, {{x, "x"}, {grad, takes_grad(op) ? "grad" : nullptr}}, {out, "out"});
    const Rows rows = plan_pointwise(op, a[0], takes_grad(op) ? a[1] : a[0], a.out());
    py::gil_scoped_release nogil;
    if constexpr (cpu) cpu_pointwise(op, rows);
    else cuda::pointwise(op, rows, policy.stream());
  }, py::arg("op"), py::arg("x"), py::arg("grad"), py::arg("out"), py::arg("stream"),
     "out = op(x[, grad]) for op 'relu', 'relu_grad', 'sigmoid' or 'sigmoid_grad'.");

  m.def("softmax", [](py::handle x, py::handle out, int axis, bool log, intptr_t stream) {
    Policy policy(stream);
    NnArrays<Policy> a(policy, {{x, "x"}}, {out, "out"});
    const Rows rows = plan_softmax(a[0], a.out(), axis);
    py::gil_scoped_release nogil;
    if constexpr (cpu) cpu_softmax(rows, log);
    else cuda::softmax(rows, log, policy.stream());
  }, py::arg("x"), py::arg("out"), py::arg("axis"), py::arg("log"), py::arg("stream"),
     "out = softmax(x) (or log_softmax when log) along axis.");

  m.def("softmax_cross_entropy", [](py::handle logits, py::handle labels, int axis, py::handle out,
                                    intptr_t stream) {
    Policy policy(stream);
    NnArrays<Policy> a(policy, {{logits, "logits"}, {labels, "labels"}}, {out, "out"});
    const Rows rows = plan_cross_entropy(a[0], a[1], axis, nullptr);
    if (a.out().ndim != 0 || a.out().dtype != a[0].dtype)
      throw py::value_error("out must be a 0-d array of the logits' dtype");
    py::gil_scoped_release nogil;
    if constexpr (cpu) cpu_cross_entropy(rows, a.out());
    else cuda::cross_entropy(rows, a.out(), policy.stream());
  }, py::arg("logits"), py::arg("labels"), py::arg("axis"), py::arg("out"), py::arg("stream"),
     "out (0-d) = mean over rows of -log_softmax(logits)[label] (index labels) or "
     "-sum(labels * log_softmax(logits)) (probability labels).");

  m.def("softmax_cross_entropy_grad", [](py::handle logits, py::handle labels, int axis, py::handle grad,
                                         py::handle out, intptr_t stream) {
    Policy policy(stream);
    const bool scalar = is_scalar_grad(grad);
    NnArrays<Policy> a(policy, {{logits, "logits"}, {labels, "labels"}, {grad, scalar ? nullptr : "grad"}},
                       {out, "out"});
    const LossScale scale = loss_scale(grad, scalar ? nullptr : &a[2]);
    const Rows rows = plan_cross_entropy(a[0], a[1], axis, &a.out());
    py::gil_scoped_release nogil;
    if constexpr (cpu) cpu_cross_entropy_grad(rows, scale);
    else cuda::cross_entropy_grad(rows, scale, policy.stream());
  }, py::arg("logits"), py::arg("labels"), py::arg("axis"), py::arg("grad"), py::arg("out"), py::arg("stream"),
     "out = (softmax(logits) - onehot(labels)) * grad / rows, fused row by row.");
}

}  // namespace gpufilt
