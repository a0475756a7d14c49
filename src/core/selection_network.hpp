// Selection networks: fixed sequences of compare-exchanges on numbered
// slots that leave the value of a given rank (or all of them, sorted) in
// known slots. They move values, never compute any, so they are exact for
// any ordered type, and run over many positions at once their loops
// vectorise. Built at compile time (constexpr) for the networks the CPU
// kernels unroll, at run time for the others.
//
// Pieces: Batcher's odd-even merge sort, his merge of two sorted runs of any
// lengths, the k-th smallest of two sorted runs (the smallest over the ways
// of taking k+1 values from them of the largest value taken), and pruning:
// dropping every exchange, or half of one, that no wanted slot depends on.
#pragma once
#include <algorithm>
#include <cstdint>

namespace gpufilt {

// One step: slot lo gets min(v[lo], v[hi]) when keep_min, slot hi gets
// max(v[lo], v[hi]) when keep_max. Where min and max differ for unordered
// values (NaN), which slot is lo matters: keep it fixed for every dtype.
struct Exchange {
  int32_t lo, hi;
  bool keep_min, keep_max;
};

// The steps of a network in order.
struct ExchangeList {
  static constexpr int kMaxSlots = 128;    // the CUDA 5x5x5 median sorts 100 shared values
  static constexpr int kCapacity = 1536;   // Batcher's 128-input sort has 1471
  Exchange items[kCapacity] = {};
  int count = 0;

  constexpr void exchange(int lo, int hi) { items[count++] = {lo, hi, true, true}; }
  constexpr void min_into(int dst, int src) { items[count++] = {dst, src, true, false}; }
  constexpr void max_into(int dst, int src) { items[count++] = {src, dst, false, true}; }
};

// Slot numbers, in an order the builder gives them (sorted runs: ascending).
struct Slots {
  int32_t at[ExchangeList::kMaxSlots] = {};
  int size = 0;

  constexpr void push(int slot) { at[size++] = slot; }
  static constexpr Slots range(int first, int count) {
    Slots s;
    for (int i = 0; i < count; ++i) s.push(first + i);
    return s;
  }
  constexpr Slots every_other(int first) const {
    Slots s;
    for (int i = first; i < size; i += 2) s.push(at[i]);
    return s;
  }
  constexpr Slots part(int first, int count) const {
    Slots s;
    for (int i = first; i < first + count; ++i) s.push(at[i]);
    return s;
  }
};

// Keeps only the steps (and halves of steps) that the slots in `wanted`
// depend on, read backwards from the end.
constexpr ExchangeList prune(const ExchangeList& all, const Slots& wanted) {
  bool needed[ExchangeList::kMaxSlots] = {};
  for (int i = 0; i < wanted.size; ++i) needed[wanted.at[i]] = true;
  ExchangeList kept;
  for (int x = all.count - 1; x >= 0; --x) {
    Exchange e = all.items[x];
    e.keep_min = e.keep_min && needed[e.lo];
    e.keep_max = e.keep_max && needed[e.hi];
    if (e.keep_min || e.keep_max) {
      needed[e.lo] = needed[e.hi] = true;
      kept.items[kept.count++] = e;
    }
  }
  for (int x = 0; x < kept.count / 2; ++x) {  // back in the order they run
    const Exchange e = kept.items[x];
    kept.items[x] = kept.items[kept.count - 1 - x];
    kept.items[kept.count - 1 - x] = e;
  }
  return kept;
}

// Batcher's odd-even merge sort of slots 0..n-1 into ascending order: the
// sort of the next power of two, whose padding slots (+infinity) never move,
// so exchanges touching them are dropped.
constexpr ExchangeList odd_even_sort(int64_t n) {
  ExchangeList all;
  int64_t n2 = 1;
  while (n2 < n) n2 *= 2;
  for (int64_t p = 1; p < n2; p *= 2)
    for (int64_t k = p; k >= 1; k /= 2)
      for (int64_t j = k % p; j + k < n2; j += 2 * k)
        for (int64_t i = 0; i < std::min(k, n2 - j - k); ++i)
          if ((i + j) / (2 * p) == (i + j + k) / (2 * p) && i + j + k < n)
            all.exchange((int)(i + j), (int)(i + j + k));
  return all;
}

// The network leaving the value of rank `rank` among slots 0..taps-1 in slot
// `rank`; empty for sizes beyond kMaxSlots.
constexpr ExchangeList selection_exchanges(int64_t taps, int64_t rank) {
  if (taps < 1 || taps > ExchangeList::kMaxSlots || rank < 0 || rank >= taps) return {};
  return prune(odd_even_sort(taps), Slots::range((int)rank, 1));
}

// The network after which slots [first, last] of slots 0..taps-1 hold the
// values of those ranks, in place (the CUDA box median sorts the ranks the
// median can take among the values two outputs share).
constexpr ExchangeList sorting_exchanges(int taps, int first, int last) {
  if (taps < 1 || taps > ExchangeList::kMaxSlots || first < 0 || last < first || last >= taps) return {};
  return prune(odd_even_sort(taps), Slots::range(first, last - first + 1));
}

// Batcher's merge of the ascending runs a and b (any lengths): appends its
// exchanges to `net` and returns the slots of the merged run in order.
constexpr Slots merge_runs(ExchangeList& net, const Slots& a, const Slots& b) {
  if (a.size == 0) return b;
  if (b.size == 0) return a;
  if (a.size == 1 && b.size == 1) {
    net.exchange(a.at[0], b.at[0]);
    Slots pair;
    pair.push(a.at[0]);
    pair.push(b.at[0]);
    return pair;
  }
  const Slots even = merge_runs(net, a.every_other(0), b.every_other(0));
  const Slots odd = merge_runs(net, a.every_other(1), b.every_other(1));
  Slots merged;
  merged.push(even.at[0]);
  for (int i = 0; i < odd.size; ++i) {
    if (i + 1 < even.size) {
      net.exchange(odd.at[i], even.at[i + 1]);
      merged.push(odd.at[i]);
      merged.push(even.at[i + 1]);
    } else {
      merged.push(odd.at[i]);
    }
  }
  for (int i = odd.size + 1; i < even.size; ++i) merged.push(even.at[i]);
  return merged;
}

// Batcher's merge sort of `slots` by merge_runs of sorted halves (for 9
// values 26 exchanges, against 28 for odd_even_sort's): appends its
// exchanges to `net` and returns the slots in ascending order. With `run` >
// 1 the slots come as ascending runs of that many, merged by halves of runs
// (three sorted runs of 3 take 18 exchanges).
constexpr Slots merge_sort(ExchangeList& net, const Slots& slots, int run = 1) {
  if (slots.size <= run) return slots;
  const int runs = (slots.size + run - 1) / run, first_half = (runs + 1) / 2 * run;
  return merge_runs(net, merge_sort(net, slots.part(0, first_half), run),
                    merge_sort(net, slots.part(first_half, slots.size - first_half), run));
}

// The value of rank k in A + B, A ascending with a_size values of which
// `known` holds those of ranks a_first.. (the lower ones are not needed when
// a_first <= k - b.size), B the ascending run `b`. It is the smallest, over
// the ways of taking k + 1 values (i from A, j from B), of the largest value
// taken: max(A[i-1], B[j-1]). Writes into b's slots only (A stays for other
// selections); returns the slot that holds the result.
constexpr int select_from_runs(ExchangeList& net, const Slots& known, int a_first, int a_size, const Slots& b,
                               int k) {
  int result = -1, a_alone = -1;
  auto take = [&](int slot) {
    if (result < 0) result = slot;
    else net.min_into(result, slot);
  };
  for (int j = 0; j <= b.size; ++j) {
    const int i = k + 1 - j;
    if (i < 0 || i > a_size) continue;
    if (j == 0) {
      a_alone = known.at[i - 1 - a_first];
    } else if (i == 0) {
      take(b.at[j - 1]);
    } else {
      net.max_into(b.at[j - 1], known.at[i - 1 - a_first]);
      take(b.at[j - 1]);
    }
  }
  if (a_alone >= 0) take(a_alone);
  return result;
}

// Rank filters of a full box, `Rows` values across the other axes (a
// "column") by `Width` (odd) columns along one axis, two outputs at a time,
// after Adams' separable sorting networks (the CPU's box path and the CUDA
// box median). Outputs 2p and 2p+1 share
// the columns (the Rows values at one shift) 2p+1 .. 2p+Width-1:
//   1. every column is sorted once (not once per output that reads it);
//   2. columns 2j+1 and 2j+2 are merged, once for the two pairs of outputs
//      that read both;
//   3. each pair merges the (Width-1)/2 merged column pairs it shares, keeps
//      the ranks within Rows of the result, and each output selects its
//      result from these and its own sorted column: 2p, or 2p+Width.
// A 5x5 median takes 59 min/max per output instead of 202 for the whole
// box's network, 3x3 17 instead of 40, 3x3x3 94 instead of 226.
struct BoxStage {
  ExchangeList net;
  Slots out;
};

// Step 1's input: slots 0..rows-1, a column; out: its values ascending.
constexpr BoxStage box_column_stage(int rows) {
  BoxStage s;
  s.out = merge_sort(s.net, Slots::range(0, rows));
  return s;
}

// Step 1 when a column comes as ascending runs of `run` values (slots
// run after run: the CUDA box median sorts each plane's run once and keeps
// it for the next planes); out: the column ascending.
constexpr BoxStage box_runs_stage(int rows, int run) {
  BoxStage s;
  s.out = merge_sort(s.net, Slots::range(0, rows), run);
  return s;
}

// Step 2's input: slots 0..rows-1 column 2j+1, rows..2*rows-1 column 2j+2,
// each ascending; out: the merged ranks first..last that step 3 reads.
constexpr BoxStage box_pair_stage(int rows, int first, int last) {
  BoxStage s;
  s.out = merge_runs(s.net, Slots::range(0, rows), Slots::range(rows, rows)).part(first, last - first + 1);
  s.net = prune(s.net, s.out);
  return s;
}

// Step 3's input: `runs` merged column pairs (their ranks first..last, in
// turn), then the sorted columns 2p and 2p+width; out: the results of
// outputs 2p and 2p+1.
constexpr BoxStage box_output_stage(int rows, int width, int rank, int first, int last) {
  BoxStage s;
  const int runs = (width - 1) / 2, kept = last - first + 1, shared = runs * 2 * rows;
  Slots core = Slots::range(0, kept);
  for (int m = 1; m < runs; ++m) core = merge_runs(s.net, core, Slots::range(m * kept, kept));
  int core_first = first;  // rank of core.at[0] among the shared values
  if (runs > 1) {          // then first = 0, last = 2 * rows - 1: all merged
    core_first = std::max(0, rank - rows);
    core = core.part(core_first, std::min(rank, shared - 1) - core_first + 1);
  }
  for (int side = 0; side < 2; ++side)
    s.out.push(select_from_runs(s.net, core, core_first, shared, Slots::range(runs * kept + side * rows, rows), rank));
  s.net = prune(s.net, s.out);
  return s;
}

template <int Rows, int Width, int Rank>
struct BoxRankPlan {
  static_assert(Width % 2 == 1 && Width >= 3, "two outputs share an even number of columns");
  static constexpr int kRows = Rows, kRuns = (Width - 1) / 2;
  // The ranks of a merged column pair step 3 reads: with one pair the result
  // lies within Rows of Rank among them, with more any may count.
  static constexpr int kFirst = kRuns == 1 ? std::max(0, Rank - Rows) : 0;
  static constexpr int kLast = kRuns == 1 ? std::min(Rank, 2 * Rows - 1) : 2 * Rows - 1;
  static constexpr int kKept = kLast - kFirst + 1;
  static constexpr ExchangeList column_net = box_column_stage(Rows).net;
  static constexpr Slots column_out = box_column_stage(Rows).out;
  static constexpr ExchangeList pair_net = box_pair_stage(Rows, kFirst, kLast).net;
  static constexpr Slots pair_out = box_pair_stage(Rows, kFirst, kLast).out;
  static constexpr ExchangeList output_net = box_output_stage(Rows, Width, Rank, kFirst, kLast).net;
  static constexpr Slots output_out = box_output_stage(Rows, Width, Rank, kFirst, kLast).out;
  static_assert(kRuns * kKept + 2 * Rows <= ExchangeList::kMaxSlots, "too many slots");
};

}  // namespace gpufilt
