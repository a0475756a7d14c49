// Experiment, not part of the library: one exact 17-tap correlation pass
// along the rows of uint16 data (a gaussian of sigma 2), three ways, to see
// whether int8 tensor cores can give 16-bit gaussians float32's speed
// (issue 4's speed class). Driven and checked by imma_exact_rows.py.
//   rows_f32:  float sums (FFMA), truncated: float32 chains' arithmetic,
//              not exact for uint16; the speed to reach.
//   rows_f64:  double sums in scipy's order (pairs, then each product and
//              sum rounded), truncated: what fused.cu does today.
//   rows_imma: fixed point on the int8 tensor cores (WMMA 16x16x16, u8 x u8
//              -> int32): each weight W = round(w 2^31) in four byte limbs,
//              each value in two, every product exact; the limbs' sums
//              recombined in int64. Outputs within `margin` (2^-31 units)
//              of an integer are summed again as rows_f64 sums (counted).
// A block owns 16 rows x 256 outputs, its 272 inputs a row staged in shared
// memory: out[r][c] = trunc(sum_k w[k] in[r][c + k]), c < 8192.
#include <cstdint>
#include <mma.h>
using namespace nvcuda;

constexpr int TAPS = 17, ROWS = 16, COLS = 256, HALO = COLS + TAPS - 1;  // 272
constexpr int OUT_COLS = 8192, IN_COLS = OUT_COLS + TAPS - 1;
constexpr int PITCH = 288;  // a staged byte row: 16-byte multiples, room for the shifted copy

__constant__ double c_w[TAPS];
__constant__ float c_wf[TAPS];
__constant__ uint32_t c_margin;  // in 2^-32 units

// scipy's order for symmetric weights: w[8] x[8], then += (x[k] + x[16-k]) w[k]
template <class X>
__device__ __forceinline__ double scipy_sum(const X& x) {
  double s = __dmul_rn((double)x(8), c_w[8]);
#pragma unroll
  for (int k = 0; k < 8; ++k) s = __dadd_rn(s, __dmul_rn((double)(x(k) + x(16 - k)), c_w[k]));
  return s;
}

// Thread t: row t / 16, outputs 16 (t % 16) .. + 15, from 32 staged values.
template <class T, class F>
__device__ __forceinline__ void sixteen_outputs(const T* tile, uint16_t* out, const F& sum) {
  const int r = threadIdx.x / 16, c = threadIdx.x % 16 * 16;
  T x[32];
#pragma unroll
  for (int k = 0; k < 32; ++k) x[k] = tile[r * HALO + c + k];
  alignas(16) uint16_t o[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) o[i] = sum(x + i);
  uint4* dst = reinterpret_cast<uint4*>(out + ((int64_t)blockIdx.y * ROWS + r) * OUT_COLS + blockIdx.x * COLS + c);
  dst[0] = reinterpret_cast<const uint4*>(o)[0];
  dst[1] = reinterpret_cast<const uint4*>(o)[1];
}

// The block's 16 x 272 inputs as 16-byte vectors (8 values; rows are
// 16-byte aligned), each handed to put(row, column, vector).
template <class Put>
__device__ __forceinline__ void load_vectors(const uint16_t* in, const Put& put) {
  const int64_t r0 = (int64_t)blockIdx.y * ROWS, c0 = (int64_t)blockIdx.x * COLS;
  constexpr int kRowVectors = HALO / 8;  // 34
  for (int i = threadIdx.x; i < ROWS * kRowVectors; i += blockDim.x) {
    const int r = i / kRowVectors, c = i % kRowVectors * 8;
    put(r, c, __ldg(reinterpret_cast<const uint4*>(in + (r0 + r) * IN_COLS + c0 + c)));
  }
}

template <class T>
__device__ __forceinline__ void stage(const uint16_t* in, T* tile) {
  load_vectors(in, [&](int r, int c, uint4 v) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int q = 0; q < 8; ++q) tile[r * HALO + c + q] = (T)(uint16_t)(w[q / 2] >> (16 * (q % 2)));
  });
}

extern "C" __global__ void __launch_bounds__(256) rows_f64(const uint16_t* in, uint16_t* out) {
  __shared__ int32_t tile[ROWS * HALO];
  stage(in, tile);
  __syncthreads();
  sixteen_outputs(tile, out, [](const int32_t* x) {
    return (uint16_t)(int32_t)scipy_sum([&](int k) { return x[k]; });
  });
}

extern "C" __global__ void __launch_bounds__(256) rows_f32(const uint16_t* in, uint16_t* out) {
  __shared__ float tile[ROWS * HALO];
  stage(in, tile);
  __syncthreads();
  sixteen_outputs(tile, out, [](const float* x) {
    float s = x[8] * c_wf[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) s = fmaf(x[k] + x[16 - k], c_wf[k], s);
    return (uint16_t)(int32_t)s;
  });
}

// The tile as two byte planes (low and high bytes), each twice: plane[b][0]
// holds input column c at byte c, plane[b][1] at byte c + 16, so that every
// 16-column block starts 32-byte aligned in one of them (load_matrix_sync).
// limbs[a][j]: 16 x 16 bytes, A[i][k] = byte a of W[16 j + k - i] (0 outside the taps).
extern "C" __global__ void __launch_bounds__(256) rows_imma(const uint16_t* in, uint16_t* out,
                                                            const unsigned char* limbs,
                                                            unsigned long long* near_count) {
  __shared__ __align__(32) unsigned char plane[2][2][ROWS * PITCH];
  __shared__ __align__(32) int32_t result[ROWS * COLS];
  const int64_t r0 = (int64_t)blockIdx.y * ROWS, c0 = (int64_t)blockIdx.x * COLS;
  load_vectors(in, [&](int r, int c, uint4 v) {  // 8 values -> 8 low bytes and 8 high bytes
    const uint2 lo = make_uint2(__byte_perm(v.x, v.y, 0x6420), __byte_perm(v.z, v.w, 0x6420));
    const uint2 hi = make_uint2(__byte_perm(v.x, v.y, 0x7531), __byte_perm(v.z, v.w, 0x7531));
    *reinterpret_cast<uint2*>(&plane[0][0][r * PITCH + c]) = lo;
    *reinterpret_cast<uint2*>(&plane[0][1][r * PITCH + c + 16]) = lo;
    *reinterpret_cast<uint2*>(&plane[1][0][r * PITCH + c]) = hi;
    *reinterpret_cast<uint2*>(&plane[1][1][r * PITCH + c + 16]) = hi;
  });
  wmma::fragment<wmma::matrix_a, 16, 16, 16, unsigned char, wmma::row_major> A[4][2];
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(A[a][j], limbs + (a * 2 + j) * 256, 16);
  __syncthreads();

  const int warp = threadIdx.x / 32;
  int near = 0;
#pragma unroll 1
  for (int block = warp; block < COLS / 16; block += 8) {  // outputs 16 block .. + 15 of the 16 rows
    wmma::fragment<wmma::accumulator, 16, 16, 16, int> E[5];
#pragma unroll
    for (int s = 0; s < 5; ++s) wmma::fill_fragment(E[s], 0);
#pragma unroll
    for (int b = 0; b < 2; ++b)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int first = 16 * (block + j);  // input column of the k-step's first row of B
        const int copy = first % 32 ? 1 : 0;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, unsigned char, wmma::col_major> B;
        wmma::load_matrix_sync(B, plane[b][copy] + first + 16 * copy, PITCH);  // B[k][n] = row n, column first + k
#pragma unroll
        for (int a = 0; a < 4; ++a) wmma::mma_sync(E[a + b], A[a][j], B, E[a + b]);
      }
    // S 2^31 = sum_s E[s] 2^(8 s): its integer part and fraction.
    const uint32_t margin = c_margin;
#pragma unroll
    for (int i = 0; i < E[0].num_elements; ++i) {
      const int64_t t = (int64_t)E[0].x[i] + ((int64_t)E[1].x[i] << 8) + ((int64_t)E[2].x[i] << 16) +
                        ((int64_t)E[3].x[i] << 24) + ((int64_t)E[4].x[i] << 32);
      const uint32_t part = (uint32_t)t << 1;  // the fraction in 2^-32 units
      const bool is_near = part + margin < 2 * margin;  // part < margin or part > 2^32 - margin
      near += is_near;
      E[0].x[i] = is_near ? -1 : (int32_t)(t >> 31);  // -1: sum again
    }
    wmma::store_matrix_sync(result + 16 * block, E[0], COLS, wmma::mem_col_major);  // (i, n) -> row n, column 16 block + i
  }
  __syncwarp();
  __syncthreads();
  // Stores as the other kernels make them; outputs near a step summed again.
  const int r = threadIdx.x / 16, c = threadIdx.x % 16 * 16;
  alignas(16) uint16_t o[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    int32_t v = result[r * COLS + c + i];
    if (v < 0) {
      const unsigned char* lo = plane[0][0] + r * PITCH + c + i;
      const unsigned char* hi = plane[1][0] + r * PITCH + c + i;
      v = (int32_t)scipy_sum([&](int k) { return (int32_t)lo[k] | (int32_t)hi[k] << 8; });
    }
    o[i] = (uint16_t)v;
  }
  uint4* dst = reinterpret_cast<uint4*>(out + (r0 + r) * OUT_COLS + c0 + c);
  dst[0] = reinterpret_cast<const uint4*>(o)[0];
  dst[1] = reinterpret_cast<const uint4*>(o)[1];
  if (near) atomicAdd(near_count, (unsigned long long)near);
}
