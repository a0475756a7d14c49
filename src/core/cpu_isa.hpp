// Which vector instructions the CPU kernels use. The hot kernels are
// compiled several times: for the baseline (SSE2, 16-byte vectors), for
// AVX2 (32 bytes) and, where wider vectors pay, for AVX-512 (64 bytes). The
// widest copy this CPU runs is chosen at run time, per call.
#pragma once

namespace gpufilt {

enum class CpuIsa : int { Baseline = 0, Avx2 = 1, Avx512 = 2 };

// The widest level this CPU supports (AVX2: with FMA; AVX-512: F, VL, BW
// and DQ, as x86-64-v4) and the cap allows. The cap starts at
// GPUFILT_CPU_ISA (baseline or sse2, avx2, avx512, in any case; unset or
// unknown: no cap, and gpufilt warns of an unknown name at import) and
// set_cpu_isa_cap changes it, so that tests run every copy of a kernel
// (not while calls run: their threads pick their copies as they start).
CpuIsa cpu_isa();
CpuIsa cpu_isa_supported();
CpuIsa cpu_isa_cap();
void set_cpu_isa_cap(CpuIsa cap);
const char* cpu_isa_name(CpuIsa isa);
// The level named `name`; false if no level has that name.
bool cpu_isa_from_name(const char* name, CpuIsa& isa);

// The copy of a kernel for the level cpu_isa() picks, of the copies compiled
// for each (GF_AVX2, GF_AVX512 below).
template <class F>
F for_cpu_isa(F baseline, F avx2, F avx512) {
  switch (cpu_isa()) {
    case CpuIsa::Avx512: return avx512;
    case CpuIsa::Avx2: return avx2;
    case CpuIsa::Baseline: break;
  }
  return baseline;
}

}  // namespace gpufilt

// Attributes of the copies. `flatten` inlines a kernel's callees into its
// copy. The _FMA copies are for sums in float, which may fuse multiply-adds
// (DESIGN.md's float tolerance allows it); the others never fuse (sums in
// double round products and sums apart, as scipy does). The core is built
// with contraction off (CMakeLists.txt: a -march with FMA in the compiler
// flags, as x86-64-v3 distributions give, would otherwise fuse the
// baseline and AVX2 double sums too); the _FMA copies turn it back on, and
// the AVX-512 copy, whose target has FMA built in, says off again. clang
// ignores `optimize`: its _FMA copies do not fuse.
#if defined(__GNUC__) && defined(__x86_64__)
#define GPUFILT_ISA_COPIES 1
#define GF_AVX2 __attribute__((target("avx2"), flatten))
#define GF_AVX2_FMA __attribute__((target("avx2,fma"), optimize("fp-contract=fast"), flatten))
#define GF_AVX512 \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"), optimize("fp-contract=off"), flatten))
#define GF_AVX512_FMA \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma"), optimize("fp-contract=fast"), flatten))
#endif
