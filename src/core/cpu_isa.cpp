#include "core/cpu_isa.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace gpufilt {
namespace {

CpuIsa detect() {
#if defined(GPUFILT_ISA_COPIES)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
    return CpuIsa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::Avx2;
#endif
  return CpuIsa::Baseline;
}

std::atomic<int>& cap() {
  static std::atomic<int> value = [] {
    CpuIsa isa = CpuIsa::Avx512;
    const char* text = std::getenv("GPUFILT_CPU_ISA");
    if (text && *text) cpu_isa_from_name(text, isa);  // an unknown name leaves no cap
    return (int)isa;
  }();
  return value;
}

}  // namespace

CpuIsa cpu_isa_supported() {
  static const CpuIsa supported = detect();
  return supported;
}

CpuIsa cpu_isa() { return (CpuIsa)std::min((int)cpu_isa_supported(), cap().load(std::memory_order_relaxed)); }

CpuIsa cpu_isa_cap() { return (CpuIsa)cap().load(std::memory_order_relaxed); }

void set_cpu_isa_cap(CpuIsa isa) { cap().store((int)isa, std::memory_order_relaxed); }

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512: return "avx512";
    case CpuIsa::Avx2: return "avx2";
    default: return "baseline";
  }
}

bool cpu_isa_from_name(const char* name, CpuIsa& isa) {
  if (strcasecmp(name, "sse2") == 0) name = "baseline";  // what the baseline copies use
  for (CpuIsa level : {CpuIsa::Baseline, CpuIsa::Avx2, CpuIsa::Avx512})
    if (strcasecmp(name, cpu_isa_name(level)) == 0) {
      isa = level;
      return true;
    }
  return false;
}

}  // namespace gpufilt
