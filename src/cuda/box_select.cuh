// The selection of box_rank.cu's separable box medians (see there), on
// values held in registers: __host__ __device__, so that a host program
// (tests/host/box_select_check.cu) checks it against a sort.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

#include "core/hostdevice.hpp"
#include "core/selection_network.hpp"

namespace gpufilt::cuda {

#ifdef __CUDACC__
// 1 and -1 where the compiler cannot see them: a product with them stays an
// integer multiply-add (the FMA pipe's) instead of becoming an add (the ALU's).
static __constant__ uint32_t kUnit = 1, kMinusUnit = ~0u;  // static: each unit its own
#endif

// The larger of 32-bit keys a and b given the smaller, lo: a + b - lo,
// exact modulo 2^32. On the GPU by two integer multiply-adds, which run on
// the FMA pipe beside the ALU's min/max.
template <class V>
GF_HD V max_by_sum(V a, V b, V lo) {
  static_assert(sizeof(V) == 4, "32-bit keys");
#ifdef __CUDA_ARCH__
  return (V)((uint32_t)lo * kMinusUnit + ((uint32_t)a * kUnit + (uint32_t)b));
#else
  return (V)((uint32_t)a + (uint32_t)b - (uint32_t)lo);
#endif
}

// Runs an ExchangeList, every exchange its own instantiation: the values
// stay in registers. SPLIT_PIPES: exchanges of 32-bit keys that keep both
// values take the max by max_by_sum.
template <const ExchangeList& List, bool SPLIT_PIPES = false>
struct Exchanges {
  template <int Lo, int Hi, bool KeepMin, bool KeepMax, class V, int Cap>
  static GF_HD void exchange_kept(V (&v)[Cap]) {
    const V a = v[Lo], b = v[Hi];
    if constexpr (SPLIT_PIPES && KeepMin && KeepMax && sizeof(V) == 4) {
      v[Lo] = a < b ? a : b;
      v[Hi] = max_by_sum(a, b, v[Lo]);
      return;
    }
    if constexpr (KeepMin) v[Lo] = a < b ? a : b;
    if constexpr (KeepMax) v[Hi] = a < b ? b : a;
  }
  template <class V, int Cap, size_t... I>
  static GF_HD void apply(V (&v)[Cap], std::index_sequence<I...>) {
    (exchange_kept<List.items[I].lo, List.items[I].hi, List.items[I].keep_min, List.items[I].keep_max>(v), ...);
  }
  template <class V, int Cap>
  static GF_HD void run(V (&v)[Cap]) {
    apply(v, std::make_index_sequence<List.count>());
  }
};

// dst[Offset + i] = src[Out.at[i]] for i < Count: a network's results in order.
template <const Slots& Out, int Count, int Offset = 0, class V, int N, int M, int... I>
GF_HD void pick_each(V (&dst)[N], const V (&src)[M], std::integer_sequence<int, I...>) {
  ((dst[Offset + I] = src[std::integral_constant<int, Out.at[I]>::value]), ...);  // a constant, not a read of Out
}
template <const Slots& Out, int Count, int Offset = 0, class V, int N, int M>
GF_HD void pick(V (&dst)[N], const V (&src)[M]) {
  static_assert(Offset + Count <= N, "destination");
  pick_each<Out, Count, Offset>(dst, src, std::make_integer_sequence<int, Count>());
}

// The selection of a KM x KP x KX box median, by stages, on values held in
// registers (host and device: tests/host/box_select_check.cu checks it on the host).
// SPLIT_COLUMN: the column merges' full exchanges by two pipes (Exchanges).
template <int KM_, int KP_, int KX_, bool SPLIT_COLUMN = false>
struct ColumnMedian {
  static constexpr int KM = KM_, KP = KP_, KX = KX_, rows = KM * KP;
  using Plan = BoxRankPlan<rows, KX, rows * KX / 2>;
  static constexpr int runs = Plan::kRuns, kept = Plan::kKept;
  static constexpr BoxStage run_stage = box_column_stage(KP);
  static constexpr ExchangeList run_net = run_stage.net;
  static constexpr Slots run_out = run_stage.out;
  static constexpr BoxStage column_stage = box_runs_stage(rows, KP);
  static constexpr ExchangeList column_net = column_stage.net;
  static constexpr Slots column_out = column_stage.out;

  // The KP values of a new plane ascending in place.
  template <class V>
  static GF_HD void sort_run(V (&run)[KP]) {
    Exchanges<run_net>::run(run);
    V sorted[KP];
    pick<run_out, KP>(sorted, run);
#pragma unroll
    for (int i = 0; i < KP; ++i) run[i] = sorted[i];
  }
  // The column ascending from its KM runs, each ascending, run after run.
  template <class V>
  static GF_HD void merge_column(const V (&in)[rows], V (&column)[rows]) {
    V v[rows];
#pragma unroll
    for (int i = 0; i < rows; ++i) v[i] = in[i];
    Exchanges<column_net, SPLIT_COLUMN>::run(v);
    pick<column_out, rows>(column, v);
  }
  // The medians of outputs 2p and 2p+1, from the sorted columns 2p ..
  // 2p+KX (column(c, v): column c ascending into v).
  template <class V, class Column>
  static GF_HD void medians(const Column& column, V& first, V& second) {
    V w[runs * kept + 2 * rows];
#pragma unroll
    for (int m = 0; m < runs; ++m) {  // columns 2m+1 and 2m+2 merged
      V v[2 * rows], c[rows];
      column(2 * m + 1, c);
#pragma unroll
      for (int i = 0; i < rows; ++i) v[i] = c[i];
      column(2 * m + 2, c);
#pragma unroll
      for (int i = 0; i < rows; ++i) v[rows + i] = c[i];
      Exchanges<Plan::pair_net>::run(v);
      V merged[kept];
      pick<Plan::pair_out, kept>(merged, v);
#pragma unroll
      for (int q = 0; q < kept; ++q) w[m * kept + q] = merged[q];
    }
    V c[rows];
    column(0, c);
#pragma unroll
    for (int i = 0; i < rows; ++i) w[runs * kept + i] = c[i];
    column(KX, c);
#pragma unroll
    for (int i = 0; i < rows; ++i) w[runs * kept + rows + i] = c[i];
    Exchanges<Plan::output_net>::run(w);
    V result[2];
    pick<Plan::output_out, 2>(result, w);
    first = result[0];
    second = result[1];
  }
};

}  // namespace gpufilt::cuda
