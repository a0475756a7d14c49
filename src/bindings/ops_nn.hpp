// Bindings of the neural-network kernels (core/ops_nn.hpp), written once and
// registered in gpufilt._core (CpuPolicy) and gpufilt._cuda (CudaPolicy).
// python/gpufilt/_ops_nn.py checks the arguments and allocates outputs; these
// functions import the arrays, check devices and overlap, and run.
#pragma once
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

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
// the policy's device, and made ready (device guard, producer streams).
template <class Policy>
struct NnArrays {
  using Named = std::pair<py::handle, const char*>;
  std::vector<ImportedArray> arrays;
  NnArrays(Policy& policy, const std::vector<Named>& reads, Named write) {
    arrays.reserve(reads.size() + 1);
    std::vector<const char*> names;
    for (const auto& [obj, name] : reads) {
      arrays.push_back(import_array(obj, name, Access::Read, policy.options()));
      names.push_back(name);
    }
    arrays.push_back(import_array(write.first, write.second, Access::Write, policy.options()));
    names.push_back(write.second);
    std::vector<const ImportedArray*> all;
    for (const ImportedArray& a : arrays) all.push_back(&a);
    require_device(all, names.data(), Policy::device);
    policy.enter(all);
  }
  const ArrayDesc& operator[](size_t i) const { return arrays[i].desc; }
  const ArrayDesc& out() const { return arrays.back().desc; }
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
    std::vector<typename NnArrays<Policy>::Named> reads{{x, "x"}};
    if (takes_grad(op)) reads.push_back({grad, "grad"});
    NnArrays<Policy> a(policy, reads, {out, "out"});
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
    std::vector<typename NnArrays<Policy>::Named> reads{{logits, "logits"}, {labels, "labels"}};
    if (!scalar) reads.push_back({grad, "grad"});
    NnArrays<Policy> a(policy, reads, {out, "out"});
    const LossScale scale = loss_scale(grad, scalar ? nullptr : &a[2]);
    const Rows rows = plan_cross_entropy(a[0], a[1], axis, &a.out());
    py::gil_scoped_release nogil;
    if constexpr (cpu) cpu_cross_entropy_grad(rows, scale);
    else cuda::cross_entropy_grad(rows, scale, policy.stream());
  }, py::arg("logits"), py::arg("labels"), py::arg("axis"), py::arg("grad"), py::arg("out"), py::arg("stream"),
     "out = (softmax(logits) - onehot(labels)) * grad / rows, fused row by row.");
}

}  // namespace gpufilt
