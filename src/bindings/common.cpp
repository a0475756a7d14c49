#include "bindings/common.hpp"

#include <string>

namespace gpufilt {

std::vector<LinePass> parse_passes(const py::sequence& passes) {
  std::vector<LinePass> plan;
  plan.reserve(passes.size());
  for (py::handle item : passes) {
    auto t = item.cast<py::tuple>();
    if (t.size() != 6) throw py::value_error("a filter pass is (axis, kind, weights, size, origin, mode)");
    LinePass p;
    p.axis = t[0].cast<int>();
    std::string kind = t[1].cast<std::string>();
    if (kind == "correlate") p.kind = LineKind::Correlate;
    else if (kind == "uniform") p.kind = LineKind::Uniform;
    else throw py::value_error("unknown filter pass kind '" + kind + "'");
    for (py::handle w : t[2].cast<py::sequence>()) p.weights.push_back(w.cast<double>());
    p.size = t[3].cast<int64_t>();
    p.origin = t[4].cast<int64_t>();
    int mode = t[5].cast<int>();
    if (mode < 0 || mode > 4) throw py::value_error("unknown boundary mode code " + std::to_string(mode));
    p.mode = static_cast<Mode>(mode);
    plan.push_back(std::move(p));
  }
  return plan;
}

namespace {
std::string where(const ArrayDesc& d) {
  return d.device == Device::CPU ? std::string("the CPU") : "CUDA device " + std::to_string(d.device_id);
}
}  // namespace

void require_device(const ImportedArray& input, const ImportedArray& output, Device device) {
  const char* runs_on = device == Device::CPU ? "the CPU" : "a CUDA device";
  for (const ImportedArray* a : {&input, &output})
    if (a->desc.device != device)
      throw py::value_error(std::string(a == &input ? "input" : "output") + " is on " + where(a->desc) +
                            " but this call runs on " + runs_on +
                            "; all arrays of one call must be on one device");
  if (input.desc.device_id != output.desc.device_id)
    throw py::value_error("input is on " + where(input.desc) + " and output on " + where(output.desc) +
                          "; all arrays of one call must be on one device");
}

}  // namespace gpufilt
