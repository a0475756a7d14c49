// What the box kernels (box_rank.cu, box_sum.cu) share: a footprint that
// fills a dense box on the array's trailing two or three axes, seen as three
// axes (the one a block walks along, the plane's rows, its columns) and
// leading batch axes; blocks that own a tile of a plane and a run of planes.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/array.hpp"
#include "core/border.hpp"
#include "core/footprint.hpp"
#include "cuda/check.cuh"
#include "cuda/elements.cuh"

namespace gpufilt::cuda {

// Axis 0 is the walked one, 1 the rows, 2 the columns; the leading axes
// before them (batch) have no extent in the box.
struct BoxArgs {
  const char* in;
  char* out;
  DType in_dtype, out_dtype;
  bool in_aligned, out_aligned;
  Mode mode;
  double cval;
  int64_t rank;
  int lead_ndim;
  int64_t lead_shape[kMaxDims], lead_in_stride[kMaxDims], lead_out_stride[kMaxDims];
  int64_t n[3], in_stride[3], out_stride[3];
  int lo[3], extent[3];  // the box's lowest offset and extent along each
  int64_t chunk;         // outputs along axis 0 per block
  int64_t tiles_x, tiles_rows, chunks;
};

// Where a block's work starts: its tile's first row and column, its run of
// outputs along axis 0, and the byte offsets of its batch element.
struct BlockOrigin {
  int64_t x0, row0, m0, m_end, in_base, out_base;
};

inline __device__ BlockOrigin block_origin(const BoxArgs& a, int tile_rows, int tile_cols) {
  int64_t block = blockIdx.x;
  const int64_t tile_x = block % a.tiles_x;
  block /= a.tiles_x;
  const int64_t tile_row = block % a.tiles_rows;
  block /= a.tiles_rows;
  const int64_t chunk = block % a.chunks;
  block /= a.chunks;
  BlockOrigin o{tile_x * tile_cols, tile_row * tile_rows, chunk * a.chunk, 0, 0, 0};
  o.m_end = o.m0 + a.chunk < a.n[0] ? o.m0 + a.chunk : a.n[0];
  for (int d = a.lead_ndim - 1; d >= 0; --d) {
    const int64_t c = block % a.lead_shape[d];
    block /= a.lead_shape[d];
    o.in_base += c * a.lead_in_stride[d];
    o.out_base += c * a.lead_out_stride[d];
  }
  return o;
}

// The box a footprint fills, when it fills one: lowest offset and extent per axis.
struct Box {
  std::vector<int64_t> lo, extent;
  std::vector<int64_t> cell;  // per tap: its cell, in C order over the box
};

inline std::optional<Box> dense_box(const Footprint& f) {
  if (f.taps() == 0) return std::nullopt;
  Box b{std::vector<int64_t>(f.ndim, 0), std::vector<int64_t>(f.ndim, 1)};
  std::vector<int64_t> hi(f.ndim, 0);
  for (int d = 0; d < f.ndim; ++d) {
    b.lo[d] = hi[d] = f.offsets[d];
    for (int64_t t = 1; t < f.taps(); ++t) {
      b.lo[d] = std::min(b.lo[d], f.offsets[t * f.ndim + d]);
      hi[d] = std::max(hi[d], f.offsets[t * f.ndim + d]);
    }
    b.extent[d] = hi[d] - b.lo[d] + 1;
  }
  int64_t cells = 1;
  for (int d = 0; d < f.ndim; ++d) cells *= b.extent[d];
  if (cells != f.taps() || cells > 1024) return std::nullopt;
  std::vector<bool> seen(cells, false);  // each cell once
  b.cell.resize(f.taps());
  for (int64_t t = 0; t < f.taps(); ++t) {
    int64_t cell = 0;
    for (int d = 0; d < f.ndim; ++d) cell = cell * b.extent[d] + (f.offsets[t * f.ndim + d] - b.lo[d]);
    if (seen[cell]) return std::nullopt;
    seen[cell] = true;
    b.cell[t] = cell;
  }
  return b;
}

// The footprint's box as the kernels' three axes (walked, rows, columns) and
// leading batch axes, when it is a dense box on the trailing two or three axes.
inline std::optional<BoxArgs> box_view(const ArrayDesc& in, const ArrayDesc& out, const Box& box,
                                       const Footprint& f, double cval) {
  const int nd = in.ndim;
  if (nd < 2) return std::nullopt;
  const int walked = nd >= 3 && box.extent[nd - 3] > 1 ? nd - 3 : nd - 2;
  for (int d = 0; d < walked; ++d)
    if (box.extent[d] != 1 || box.lo[d] != 0) return std::nullopt;
  const int axis[3] = {walked, walked == nd - 2 ? -1 : nd - 2, nd - 1};
  BoxArgs a{};
  a.in = in.data;
  a.out = out.data;
  a.in_dtype = in.dtype;
  a.out_dtype = out.dtype;
  a.in_aligned = is_aligned(in);
  a.out_aligned = is_aligned(out);
  a.mode = f.mode;
  a.cval = cval;
  a.rank = f.rank;
  for (int k = 0; k < 3; ++k) {
    const int d = axis[k];
    a.n[k] = d < 0 ? 1 : in.shape[d];
    a.in_stride[k] = d < 0 ? 0 : in.strides[d];
    a.out_stride[k] = d < 0 ? 0 : out.strides[d];
    a.lo[k] = d < 0 ? 0 : (int)box.lo[d];
    a.extent[k] = d < 0 ? 1 : (int)box.extent[d];
  }
  a.lead_ndim = walked;
  for (int d = 0; d < walked; ++d) {
    a.lead_shape[d] = in.shape[d];
    a.lead_in_stride[d] = in.strides[d];
    a.lead_out_stride[d] = out.strides[d];
  }
  return a;
}

// Cuts the work into tiles of tile_rows x tile_cols outputs and runs of at
// most max_chunk along axis 0: long runs share the reads of a block's
// window, short ones make enough blocks to fill the device. The number of
// blocks, or 0 when the grid would be too large.
inline int64_t tile(BoxArgs& a, int tile_rows, int tile_cols, int64_t max_chunk) {
  int64_t lead = 1;
  for (int d = 0; d < a.lead_ndim; ++d) lead *= a.lead_shape[d];
  a.tiles_x = (a.n[2] + tile_cols - 1) / tile_cols;
  a.tiles_rows = (a.n[1] + tile_rows - 1) / tile_rows;
  const int64_t tiles = lead * a.tiles_x * a.tiles_rows, enough = 8LL * multiprocessors();
  a.chunk = max_chunk;
  while (a.chunk > 4 && tiles * ((a.n[0] + a.chunk - 1) / a.chunk) < enough) a.chunk /= 2;
  a.chunks = (a.n[0] + a.chunk - 1) / a.chunk;
  const int64_t blocks = tiles * a.chunks;
  return blocks <= INT32_MAX ? blocks : 0;
}

}  // namespace gpufilt::cuda
