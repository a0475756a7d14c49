// The CPU backend: line-buffered 1-D passes and footprint filters, parallel
// over lines with OpenMP, on any strides and dtypes.
#pragma once
#include "core/separable.hpp"

namespace gpufilt {

class CpuBackend final : public LineBackend {
 public:
  void line_pass(const ArrayDesc& in, const ArrayDesc& out, const LinePass& pass,
                 double cval) override;
  void copy(const ArrayDesc& in, const ArrayDesc& out) override;
  std::unique_ptr<TempBuffer> allocate(int64_t bytes) override;
  bool filters_in_place() const override { return true; }
  // Chains on volumes, one sweep through memory (cpu_backend.cpp).
  bool fused_chain(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& passes,
                   double cval) override;
  // laplace of 2-D and 3-D arrays into an output of the input's dtype, one
  // sweep (cpu_laplace.cpp).
  bool fused_laplace(const ArrayDesc& in, const ArrayDesc& out, const std::vector<Mode>& modes,
                     double cval) override;
  void footprint_pass(const ArrayDesc& in, const ArrayDesc& out, const Footprint& filter,
                      double cval) override;
  void elementwise(Elementwise op, const ArrayDesc& a, const ArrayDesc& b, const ArrayDesc& out) override;

 private:
  bool whole_chain_fused(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& passes,
                         double cval);
  bool fused_after_march_pass(const ArrayDesc& in, const ArrayDesc& out, const std::vector<LinePass>& passes,
                              double cval);
};

// Threads the CPU kernels use: the calling thread's override (below) if
// set, else GPUFILT_NUM_THREADS if set, else OpenMP's count
// (OMP_NUM_THREADS); 1 without OpenMP. Each is capped at 4 per CPU of the
// process's affinity mask. The environment is read once, at the first call.
int cpu_max_threads();

// Sets the calling thread's override (the `threads=` of a filter call,
// capped as above; 0: none) and returns the one before.
int64_t set_cpu_call_threads(int64_t threads);

}  // namespace gpufilt
