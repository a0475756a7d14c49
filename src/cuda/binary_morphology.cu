// CUDA steps of binary erosion and dilation (gpufilt.ndimage.binary_*): one
// kernel a step, over C-contiguous 0/1 bytes, with the structuring element's
// taps by value in the parameters and a device counter that lets repeated
// steps stop on the GPU once one changes nothing (no host read a step).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda/check.cuh"

namespace gpufilt::cuda {
namespace {

constexpr int kThreads = 256;

struct StepParams {
  int ntaps, nspan;
  int64_t size;
  // Per axis the taps leave the element's line along, and always the last
  // axis first (k = 0: a thread's group of elements must lie in one row):
  int64_t inner[kMaxBinarySpan];   // elements between neighbours along it
  int64_t extent[kMaxBinarySpan];  // the array's length along it
  int64_t lo[kMaxBinarySpan], hi[kMaxBinarySpan];  // every tap inside the array: lo <= coord < hi
  int64_t flat[kMaxBinaryTaps];                   // per tap, in elements
  int64_t word_begin, word_end;  // groups starting in [word_begin, word_end) read no byte outside the array
  int8_t offset[kMaxBinaryTaps][kMaxBinarySpan];  // per tap, along each of those axes
  bool dilation;   // any tap set (else: every tap set)
  uint8_t border;  // the value beyond the edges
};

// The coordinates of element i along the axes of `p`; true when every tap
// of it lies inside the array (no bounds to check).
template <class I>
__device__ __forceinline__ bool locate(const StepParams& p, I i, I* coord) {
  bool interior = true;
#pragma unroll  // (coord stays in registers)
  for (int k = 0; k < kMaxBinarySpan; ++k) {
    if (k >= p.nspan) break;
    coord[k] = i / (I)p.inner[k] % (I)p.extent[k];
    interior = interior && (int64_t)coord[k] >= p.lo[k] && (int64_t)coord[k] < p.hi[k];
  }
  return interior;
}

// True when tap t of the element at `coord` lies inside the array.
template <class I>
__device__ __forceinline__ bool tap_inside(const StepParams& p, const I* coord, int t) {
  bool inside = true;
#pragma unroll
  for (int k = 0; k < kMaxBinarySpan; ++k) {
    if (k >= p.nspan) break;
    const int64_t c = (int64_t)coord[k] + p.offset[t][k];
    inside = inside && c >= 0 && c < p.extent[k];
  }
  return inside;
}

// One element's step, bounds checked where it is not interior; true when it changed.
template <class I>
__device__ bool step_element(const StepParams& p, const uint8_t* in, uint8_t* out, const uint8_t* changeable, I i) {
  I coord[kMaxBinarySpan];
  const bool interior = locate(p, i, coord);
  // Erosion: set unless a tap is clear; dilation: clear unless a tap is set.
  bool result = !p.dilation;
  for (int t = 0; t < p.ntaps; ++t) {
    bool inside = true;
    if (!interior) inside = tap_inside(p, coord, t);
    const bool set = inside ? in[(int64_t)i + p.flat[t]] != 0 : p.border != 0;
    if (set == p.dilation) {
      result = p.dilation;
      break;
    }
  }
  const bool before = in[i] != 0;
  if (changeable && !changeable[i]) result = before;
  out[i] = result;
  return result != before;
}

constexpr int kWords = 4;                // words of a thread's group
constexpr int kGroup = 4 * kWords;       // elements of a thread's group
constexpr uint32_t kOnes = 0x01010101u;  // a word of four set elements

// The kWords words of bytes from q on, wherever q is aligned: aligned word
// loads, funnel shifted. The aligned words reach up to 3 bytes before q and
// after the last byte: groups whose words could leave the array go element
// by element (StepParams::word_begin, word_end).
__device__ __forceinline__ void load_words(const uint8_t* q, uint32_t* words) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(q);
  const auto* aligned = reinterpret_cast<const uint32_t*>(address & ~uintptr_t(3));
  const unsigned shift = (unsigned)(address & 3) * 8;  // the same for every thread of a tap: no divergence
  uint32_t next = __ldg(aligned);
#pragma unroll
  for (int k = 0; k < kWords; ++k) {
    const uint32_t low = next;
    next = shift ? __ldg(aligned + k + 1) : 0;
    words[k] = shift ? __funnelshift_r(low, next, shift) : low;
    if (!shift && k + 1 < kWords) next = __ldg(aligned + k + 1);
  }
}

// Each byte of w as 1 when it is not 0.
__device__ __forceinline__ uint32_t nonzero_bytes(uint32_t w) {
  w |= w >> 4;
  w |= w >> 2;
  w |= w >> 1;
  return w & kOnes;
}

// n clamped to a group's element numbers, 0 to kGroup.
__device__ __forceinline__ int within_group(int64_t n) { return n < 0 ? 0 : n > kGroup ? kGroup : (int)n; }

// The bytes of a word below byte n (0 to 4).
__device__ __forceinline__ uint32_t bytes_below(int n) {
  return n >= 4 ? 0xFFFFFFFFu : (1u << (8 * n)) - 1u;
}

// Whether tap t of an element at `coord` leaves the array along an axis
// other than the row's (then it does for the whole group: one row).
template <class I>
__device__ __forceinline__ bool tap_leaves_across(const StepParams& p, const I* coord, int t) {
  bool leaves = false;
#pragma unroll
  for (int k = 1; k < kMaxBinarySpan; ++k) {
    if (k >= p.nspan) break;
    const int64_t c = (int64_t)coord[k] + p.offset[t][k];
    leaves = leaves || c < 0 || c >= p.extent[k];
  }
  return leaves;
}

// A group's words of tap t (0/1 or 0/nonzero bytes), with the border value
// where the tap leaves the array: for the whole group across the row's axis
// (`across_edge`: the group is near an edge there), or for the elements whose
// tap leaves the row (`row_edge`: the group is near an end of its row).
template <class I>
__device__ __forceinline__ void tap_words(const StepParams& p, const uint8_t* in, I i0, const I* coord, int t,
                                          bool across_edge, bool row_edge, uint32_t* words) {
  const uint32_t border = p.border ? kOnes : 0u;
  if (across_edge && tap_leaves_across(p, coord, t)) {
#pragma unroll
    for (int k = 0; k < kWords; ++k) words[k] = border;
    return;
  }
  load_words(in + (int64_t)i0 + p.flat[t], words);
  if (!row_edge) return;
  // Elements e of the group read row element coord[0] + e + offset: inside for first <= e < last.
  const int64_t shift = (int64_t)coord[0] + p.offset[t][0];
  const int first = within_group(-shift), last = within_group(p.extent[0] - shift);
#pragma unroll
  for (int k = 0; k < kWords; ++k) {
    const int at = 4 * k;
    const uint32_t outside = bytes_below(min(4, max(0, first - at))) | ~bytes_below(min(4, max(0, last - at)));
    words[k] = (words[k] & ~outside) | (border & outside);
  }
}

// One step from `in` to `out` (0/nonzero bytes in; 0/1 out, 16-byte
// aligned), kGroup elements a thread: a group inside one row takes kWords
// words a tap (AND for erosion, OR for dilation of 0/1 bytes), the border
// value put in where a tap leaves the array; groups across two rows and those
// whose words could leave the array go element by element. `zero_one`: `in`
// holds only 0 and 1 (the operation's own buffers), so its words need no
// normalising.
// `last_change` holds the number of the last step that changed an element.
// A step from the third on finds the previous one changed nothing when it is
// under step - 1: then both buffers already hold the result (the previous
// step read one, wrote its equal into the other), so the step does nothing.
// The first two steps always run: the second one fills the second buffer.
template <class I>
__global__ void __launch_bounds__(kThreads)
binary_step_kernel(const uint8_t* __restrict__ in, uint8_t* __restrict__ out, const uint8_t* __restrict__ changeable,
                   int64_t* last_change, int64_t step, bool zero_one, const __grid_constant__ StepParams p) {
  if (step >= 3 && *last_change < step - 1) return;  // the same answer for every block: see above
  const uint32_t start = p.dilation ? 0u : kOnes, stop = p.dilation ? kOnes : 0u;
  bool changed = false;
  const I size = (I)p.size, groups = (I)((p.size + kGroup - 1) / kGroup), stride = (I)gridDim.x * blockDim.x;
  for (I g = (I)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += stride) {
    const I i0 = g * kGroup;
    I coord[kMaxBinarySpan];
    locate(p, i0, coord);
    if (p.nspan == 0 || (int64_t)coord[0] + kGroup > p.extent[0] || (int64_t)i0 < p.word_begin ||
        (int64_t)i0 >= p.word_end) {
      for (I i = i0; i < i0 + kGroup && i < size; ++i) changed = step_element(p, in, out, changeable, i) || changed;
      continue;
    }
    const bool row_edge = (int64_t)coord[0] < p.lo[0] || (int64_t)coord[0] + kGroup > p.hi[0];
    bool across_edge = false;
#pragma unroll
    for (int k = 1; k < kMaxBinarySpan; ++k)
      if (k < p.nspan) across_edge = across_edge || (int64_t)coord[k] < p.lo[k] || (int64_t)coord[k] >= p.hi[k];
    uint32_t result[kWords], words[kWords];
#pragma unroll
    for (int k = 0; k < kWords; ++k) result[k] = start;
    bool decided = false;
    for (int t = 0; t < p.ntaps && !decided; ++t) {
      tap_words(p, in, i0, coord, t, across_edge, row_edge, words);
      decided = true;
#pragma unroll
      for (int k = 0; k < kWords; ++k) {
        const uint32_t set = zero_one ? words[k] : nonzero_bytes(words[k]);
        result[k] = p.dilation ? result[k] | set : result[k] & set;
        decided = decided && result[k] == stop;
      }
    }
    uint32_t before[kWords], keep[kWords];
    load_words(in + i0, before);
    if (changeable) load_words(changeable + i0, keep);
#pragma unroll
    for (int k = 0; k < kWords; ++k) {
      before[k] = nonzero_bytes(before[k]);
      if (changeable) {
        const uint32_t may_change = nonzero_bytes(keep[k]);
        result[k] = (result[k] & may_change) | (before[k] & (may_change ^ kOnes));
      }
      changed = changed || result[k] != before[k];
    }
    *reinterpret_cast<uint4*>(out + i0) = make_uint4(result[0], result[1], result[2], result[3]);
  }
  if (__syncthreads_or(changed) && threadIdx.x == 0) *last_change = step;  // every writer stores the same value
}

StepParams make_params(const ArrayDesc& a, const std::vector<int64_t>& offsets, bool dilation, bool border) {
  const int ndim = a.ndim;
  const size_t ntaps = ndim ? offsets.size() / ndim : 1;
  if (ntaps < 1 || ntaps > (size_t)kMaxBinaryTaps || (ndim && offsets.size() % ndim))
    throw std::invalid_argument("binary_steps: 1 to " + std::to_string(kMaxBinaryTaps) + " taps of " +
                                std::to_string(ndim) + " offsets each are accepted");
  StepParams p{};
  p.ntaps = (int)ntaps;
  p.size = a.size();
  p.dilation = dilation;
  p.border = border;
  int64_t inner = 1;
  for (int d = ndim - 1; d >= 0; inner *= a.shape[d], --d) {
    int64_t lowest = 0, highest = 0;
    for (size_t t = 0; t < ntaps; ++t) {
      lowest = std::min(lowest, offsets[t * ndim + d]);
      highest = std::max(highest, offsets[t * ndim + d]);
      p.flat[t] += offsets[t * ndim + d] * inner;
    }
    if (lowest == 0 && highest == 0 && d != ndim - 1) continue;  // the taps stay on the element's line along d
    if (p.nspan == kMaxBinarySpan || lowest < INT8_MIN || highest > INT8_MAX)
      throw std::invalid_argument("binary_steps: taps may span " + std::to_string(kMaxBinarySpan) +
                                  " axes (the last one counted always), at most 127 elements away");
    const int k = p.nspan++;
    p.inner[k] = inner;
    p.extent[k] = a.shape[d];
    p.lo[k] = -lowest;
    p.hi[k] = std::max<int64_t>(0, a.shape[d] - highest);  // (no interior when the taps reach past both ends)
    for (size_t t = 0; t < ntaps; ++t) p.offset[t][k] = (int8_t)offsets[t * ndim + d];
  }
  // A group reads bytes [i0 + lowest - 3, i0 + kGroup + highest + 3) at most (its words' alignment).
  const int64_t lowest = std::min<int64_t>(0, *std::min_element(p.flat, p.flat + ntaps));
  const int64_t highest = std::max<int64_t>(0, *std::max_element(p.flat, p.flat + ntaps));
  p.word_begin = 3 - lowest;
  p.word_end = p.size - kGroup - highest - 3;
  return p;
}

template <class I>
void launch(const uint8_t* in, uint8_t* out, const uint8_t* changeable, int64_t* last_change, int64_t step,
            bool zero_one, const StepParams& p, cudaStream_t stream) {
  const int blocks = grid_stride_blocks((const void*)binary_step_kernel<I>, kThreads, (p.size + kGroup - 1) / kGroup);
  binary_step_kernel<I><<<blocks, kThreads, 0, stream>>>(in, out, changeable, last_change, step, zero_one, p);
  GF_CUDA_CHECK_LAUNCH();
}

// Dilation until nothing changes, for an element symmetric about its
// centre (which it holds): a mask element ends set when its connected
// component of mask elements (neighbours: the taps) holds a set element or
// touches one outside the mask, or the border when that is set. Found by
// union-find over int32 labels (each mask element's parent, -1 off the mask;
// a root is the smallest index of its component), in a few passes and no
// host read, where the steps would take one pass a step of the longest path.
// (Five passes: labels, joins, flattening, reach, result.)

// The root of x's tree (parents only ever decrease, so a stale read is an
// older, larger parent: still on the path).
__device__ __forceinline__ int32_t find_root(const volatile int32_t* label, int32_t x) {
  for (int32_t parent = label[x]; parent != x; parent = label[x]) x = parent;
  return x;
}

// The root of x's tree, each element passed on the way given its
// grandparent as parent (path halving). By atomicMin, never a plain store:
// a join may lower that parent meanwhile, and the smaller of the two, both
// on the way to the root, stays. (A join whose root stopped being one before
// its atomicMin sees the new parent and joins again from there, halving or
// not.)
__device__ __forceinline__ int32_t find_halving(int32_t* label, int32_t x) {
  while (true) {
    const int32_t parent = ((volatile int32_t*)label)[x];
    if (parent == x) return x;
    const int32_t grand = ((volatile int32_t*)label)[parent];
    if (grand == parent) return parent;
    atomicMin(&label[x], grand);
    x = grand;
  }
}

// Joins the trees of a and b: the larger root takes the smaller as parent.
// (Path halving on the way measured 7.5 against 9.5 ms for the joins and
// the rest of binary_fill_holes of 8192^2 blobs on an H200, 21.5 against
// 32.7 on 512^3; tiles joined in shared memory first were slower, 10.0.)
__device__ void join(int32_t* label, int32_t a, int32_t b) {
  while (true) {
    a = find_halving(label, a);
    b = find_halving(label, b);
    if (a == b) return;
    if (a < b) {
      const int32_t t = a;
      a = b;
      b = t;
    }
    const int32_t old = atomicMin(&label[a], b);  // a was a root: it is unless another join came first
    if (old == a) return;
    a = old;
  }
}


// Each mask element's parent (-1 off the mask): itself, or, where the
// element's row neighbour is a tap (`linked`) and the element continues a
// run of mask elements along its row, the run's first element among the 32
// of its warp (the last element before them, where the run started there):
// runs are trees before any join, and the joins they imply are skipped
// (label_join_kernel). A warp takes 32 neighbouring elements at a time.
__global__ void __launch_bounds__(kThreads)
label_init_kernel(const uint8_t* __restrict__ changeable, int32_t* __restrict__ label, uint8_t* __restrict__ reached,
                  int32_t size, int64_t row_length, bool linked) {
  const int lane = threadIdx.x % 32;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t base = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32 * 32; base < size; base += stride) {
    const int64_t i = base + lane;
    const bool on_mask = i < size && (!changeable || changeable[i]);
    const bool continues = linked && on_mask && i % row_length != 0 && (!changeable || changeable[i - 1]);
    const uint32_t starts = ~__ballot_sync(0xFFFFFFFFu, continues) & ((2u << lane) - 1);  // lanes <= this one
    const int64_t parent = !continues ? i : starts ? base + 31 - __clz(starts) : base - 1;
    if (i < size) {
      label[i] = on_mask ? (int32_t)parent : -1;
      reached[i] = 0;
    }
  }
}

// Joins each mask element with its mask neighbours at taps after it (the
// element is symmetric: each pair once). Where rows are linked
// (label_init_kernel: `row_tap`, the row neighbour's tap, else -1), a pair
// whose elements both follow mask elements along their rows is skipped:
// the pair one element back was joined, and each element is in the tree of
// the one before it. Only pairs at the starts of runs are left.
__global__ void __launch_bounds__(kThreads)
label_join_kernel(int32_t* label, int row_tap, const __grid_constant__ StepParams p) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.size; i += stride) {
    if (label[i] < 0) continue;
    uint32_t coord[kMaxBinarySpan];
    const bool interior = locate(p, (uint32_t)i, coord);
    const bool follows = row_tap >= 0 && coord[0] > 0 && label[i - 1] >= 0;
    for (int t = 0; t < p.ntaps; ++t) {
      if (p.flat[t] <= 0 || t == row_tap || !(interior || tap_inside(p, coord, t))) continue;
      const int64_t j = i + p.flat[t];
      if (label[j] < 0 || (follows && (int64_t)coord[0] + p.offset[t][0] > 0 && label[j - 1] >= 0)) continue;
      join(label, (int32_t)i, (int32_t)j);
    }
  }
}

// Points each mask element at its root, so that later passes read it at once.
__global__ void __launch_bounds__(kThreads) label_flatten_kernel(int32_t* label, int32_t size) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < size; i += stride)
    if (label[i] >= 0) label[i] = find_root(label, label[i]);
}

// Marks the root of each mask element that is set, or has a set neighbour
// off the mask, or the set border beyond the edges, as reached.
__global__ void __launch_bounds__(kThreads)
label_reach_kernel(const uint8_t* __restrict__ in, int32_t* label, uint8_t* reached,
                   const __grid_constant__ StepParams p) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.size; i += stride) {
    if (label[i] < 0) continue;
    uint32_t coord[kMaxBinarySpan];
    const bool interior = locate(p, (uint32_t)i, coord);
    bool source = in[i] != 0;
    for (int t = 0; t < p.ntaps && !source; ++t) {
      if (!(interior || tap_inside(p, coord, t))) {
        source = p.border != 0;
        continue;
      }
      const int64_t j = i + p.flat[t];
      source = label[j] < 0 && in[j] != 0;
    }
    if (source) reached[label[i]] = 1;  // (labels flattened: the root)
  }
}

__global__ void __launch_bounds__(kThreads)
label_result_kernel(const uint8_t* __restrict__ in, const int32_t* label, const uint8_t* reached,
                    uint8_t* __restrict__ out, int32_t size) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < size; i += stride)
    out[i] = in[i] != 0 || (label[i] >= 0 && reached[label[i]]);
}

int blocks_for(const void* kernel, int64_t size) { return grid_stride_blocks(kernel, kThreads, size); }

// The tap of the next element along the row (1 along the last axis, 0 along
// the others), or -1.
int row_neighbour_tap(const StepParams& p) {
  for (int t = 0; t < p.ntaps && p.nspan > 0; ++t)
    if (p.offset[t][0] == 1 && std::all_of(p.offset[t] + 1, p.offset[t] + p.nspan, [](int8_t o) { return o == 0; }))
      return t;
  return -1;
}

}  // namespace

void binary_steps(const ArrayDesc& source, const ArrayDesc& first, const ArrayDesc& second,
                  const ArrayDesc* changeable, const std::vector<int64_t>& offsets, bool dilation, bool border,
                  int64_t first_step, int64_t count, int64_t* last_change, intptr_t stream) {
  const StepParams p = make_params(source, offsets, dilation, border);
  if (p.size == 0 || count <= 0) return;
  const cudaStream_t s = as_stream(stream);
  const auto* keep = changeable ? reinterpret_cast<const uint8_t*>(changeable->data) : nullptr;
  const uint8_t* in = reinterpret_cast<const uint8_t*>(source.data);
  uint8_t* const buffers[2] = {reinterpret_cast<uint8_t*>(first.data), reinterpret_cast<uint8_t*>(second.data)};
  for (int64_t j = 0; j < count; ++j) {
    uint8_t* out = buffers[j % 2];
    const bool zero_one = j > 0;  // written by the step before; the source may hold any nonzero byte
    if (p.size <= (int64_t)UINT32_MAX - kGroup) launch<uint32_t>(in, out, keep, last_change, first_step + j, zero_one, p, s);
    else launch<int64_t>(in, out, keep, last_change, first_step + j, zero_one, p, s);
    in = out;
  }
}

}  // namespace gpufilt::cuda

namespace gpufilt::cuda {

void binary_propagate(const ArrayDesc& source, const ArrayDesc& out, const ArrayDesc* changeable,
                      const std::vector<int64_t>& offsets, bool border, intptr_t stream) {
  const StepParams p = make_params(source, offsets, true, border);
  if (p.size == 0) return;
  if (p.size > INT32_MAX) throw std::invalid_argument("binary_propagate: at most 2**31 - 1 elements");
  const cudaStream_t s = as_stream(stream);
  const auto* in = reinterpret_cast<const uint8_t*>(source.data);
  const auto* keep = changeable ? reinterpret_cast<const uint8_t*>(changeable->data) : nullptr;
  void* labels = nullptr;
  GF_CUDA_CHECK(allocate_temporary(&labels, (size_t)p.size * 5, s));  // int32 labels, then the reached bytes
  auto* label = static_cast<int32_t*>(labels);
  auto* reached = reinterpret_cast<uint8_t*>(label + p.size);
  const int32_t size = (int32_t)p.size;
  const int row_tap = row_neighbour_tap(p);
  label_init_kernel<<<blocks_for((const void*)label_init_kernel, size), kThreads, 0, s>>>(
      keep, label, reached, size, p.nspan ? p.extent[0] : 1, row_tap >= 0);
  label_join_kernel<<<blocks_for((const void*)label_join_kernel, size), kThreads, 0, s>>>(label, row_tap, p);
  label_flatten_kernel<<<blocks_for((const void*)label_flatten_kernel, size), kThreads, 0, s>>>(label, size);
  label_reach_kernel<<<blocks_for((const void*)label_reach_kernel, size), kThreads, 0, s>>>(in, label, reached, p);
  label_result_kernel<<<blocks_for((const void*)label_result_kernel, size), kThreads, 0, s>>>(
      in, label, reached, reinterpret_cast<uint8_t*>(out.data), size);
  const cudaError_t launched = cudaGetLastError();
  GF_CUDA_CHECK(cudaFreeAsync(labels, s));
  GF_CUDA_CHECK(launched);
}

}  // namespace gpufilt::cuda
