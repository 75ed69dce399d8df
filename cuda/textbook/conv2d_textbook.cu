// conv2d_textbook.cu: the textbook's 2D convolution kernels (Programming Massively Parallel
// Processors, ch. 7), on streamconv's frames and semantics, to measure and to learn from.
//
// Each computes, for every pixel (y, x) and channel c of an H x W x C uint8 frame (interleaved,
// rows `pitch` bytes apart), the correlation
//   acc_b(y,x,c) = sum_{m,n = 0..K-1} T_b[m][n] * in(by(y+m-R), bx(x+n-R), c)    (float32)
// and stores sat_u8(rint(acc_0)), or the magnitude of a bank of two (conv_common.cuh). Taps T are
// row-major K x K, bank 0 first. The fast kernel is conv2d.cu; these keep the textbook's
// structure so their costs can be compared with it.
//
// Entry points and their launches (block threads; grid covers the frame):
//   conv2d_naive      one thread per output pixel, taps read from global memory (`taps`);
//                     block (BLOCK_X, BLOCK_Y), grid (ceil(W / BLOCK_X), ceil(H / BLOCK_Y)).
//   conv2d_constant   the same with the taps in __constant__ memory (c_taps).
//   conv2d_coarsened  thread coarsening: one thread per COARSEN vertically adjacent pixels; each
//                     input pixel it loads feeds every one of its outputs that uses it.
//                     Block (BLOCK_X, BLOCK_Y), grid (ceil(W / BLOCK_X), ceil(H / (BLOCK_Y*COARSEN))).
//   conv2d_tiled      input-tile-sized blocks: block (IN_TILE, IN_TILE) loads an input tile with
//                     its halo into shared memory, then its inner (IN_TILE - 2R)^2 threads
//                     compute; grid (ceil(W / OUT_TILE), ceil(H / OUT_TILE)).
//   conv2d_cached     output-tile-sized blocks: block (TILE, TILE) stages its own input pixels in
//                     shared memory and reads the halo from global memory, served by the L1/L2
//                     caches; grid (ceil(W / TILE), ceil(H / TILE)).
// Every entry takes (src, dst, width, height, src_pitch, dst_pitch, taps); only conv2d_naive
// reads `taps` (device memory, BANKS * K * K floats), the others use c_taps.
//
// Macros: those of conv_common.cuh, and BLOCK_X, BLOCK_Y, COARSEN, IN_TILE, TILE (defaults below).

#include "conv_common.cuh"

#if ELEM_BYTES != 1
#error "this kernel takes uint8 samples only (ELEM_BYTES 1)"
#endif

#ifndef BLOCK_X
#define BLOCK_X 32
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 8
#endif
#ifndef COARSEN
#define COARSEN 4
#endif
#ifndef IN_TILE
#define IN_TILE 32
#endif
#ifndef TILE
#define TILE 32
#endif

#if IN_TILE <= 2 * RADIUS
#error "IN_TILE must exceed 2 * RADIUS"
#endif
#if IN_TILE * IN_TILE > 1024 || TILE * TILE > 1024 || BLOCK_X * BLOCK_Y > 1024 || COARSEN < 1
#error "bad launch geometry"
#endif

extern "C" {
__constant__ float c_taps[BANKS * KSIZE * KSIZE];
}

namespace {

using namespace conv;

constexpr int kOutTile = IN_TILE - 2 * RADIUS;

// One input byte (row sy, pixel sx, channel c) under the border mode; 0 for a zero border.
__device__ __forceinline__ float read_pixel(const unsigned char* __restrict__ src, int pitch,
                                            int y, int x, int c, int width, int height) {
  const int sy = map_index(y, height);
  const int sx = map_index(x, width);
  if (sy < 0 || sx < 0) return 0.0f;
  return (float)src[(size_t)sy * pitch + sx * CHANNELS + c];
}

// Rounds and stores the C channels of one output pixel.
__device__ __forceinline__ void store_pixel(unsigned char* __restrict__ dst, int pitch, int y,
                                            int x, const float (&acc)[BANKS][CHANNELS]) {
  unsigned char* d = dst + (size_t)y * pitch + x * CHANNELS;
#pragma unroll
  for (int c = 0; c < CHANNELS; ++c) d[c] = (unsigned char)to_u8(finish(acc[0][c], acc[BANKS - 1][c]));
}

// The direct kernel, taps from `taps` (any memory space the pointer names).
template <typename Taps>
__device__ __forceinline__ void direct(const unsigned char* __restrict__ src,
                                       unsigned char* __restrict__ dst, int width, int height,
                                       int src_pitch, int dst_pitch, Taps taps) {
  const int x = blockIdx.x * BLOCK_X + threadIdx.x;
  const int y = blockIdx.y * BLOCK_Y + threadIdx.y;
  if (x >= width || y >= height) return;
  float acc[BANKS][CHANNELS] = {};
  for (int m = 0; m < kK; ++m)
    for (int n = 0; n < kK; ++n)
#pragma unroll
      for (int c = 0; c < CHANNELS; ++c) {
        const float v = read_pixel(src, src_pitch, y + m - RADIUS, x + n - RADIUS, c, width, height);
#pragma unroll
        for (int b = 0; b < BANKS; ++b) acc[b][c] = fmaf(taps[b * kKK + m * kK + n], v, acc[b][c]);
      }
  store_pixel(dst, dst_pitch, y, x, acc);
}

}  // namespace

extern "C" {

__global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
conv2d_naive(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst, int width,
             int height, int src_pitch, int dst_pitch, const float* __restrict__ taps) {
  direct(src, dst, width, height, src_pitch, dst_pitch, taps);
}

__global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
conv2d_constant(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst, int width,
                int height, int src_pitch, int dst_pitch, const float* __restrict__ /*taps*/) {
  direct(src, dst, width, height, src_pitch, dst_pitch, c_taps);
}

__global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
conv2d_coarsened(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst, int width,
                 int height, int src_pitch, int dst_pitch, const float* __restrict__ /*taps*/) {
  const int x = blockIdx.x * BLOCK_X + threadIdx.x;
  const int y0 = (blockIdx.y * BLOCK_Y + threadIdx.y) * COARSEN;
  if (x >= width || y0 >= height) return;
  float acc[COARSEN][BANKS][CHANNELS] = {};
  // Input row y0 + r - R feeds output row y0 + o through tap row m = r - o.
  for (int r = 0; r < COARSEN + 2 * RADIUS; ++r) {
    for (int n = 0; n < kK; ++n) {
#pragma unroll
      for (int c = 0; c < CHANNELS; ++c) {
        const float v = read_pixel(src, src_pitch, y0 + r - RADIUS, x + n - RADIUS, c, width, height);
#pragma unroll
        for (int o = 0; o < COARSEN; ++o) {
          const int m = r - o;
          if (m < 0 || m >= kK) continue;
#pragma unroll
          for (int b = 0; b < BANKS; ++b)
            acc[o][b][c] = fmaf(c_taps[b * kKK + m * kK + n], v, acc[o][b][c]);
        }
      }
    }
  }
#pragma unroll
  for (int o = 0; o < COARSEN; ++o)
    if (y0 + o < height) store_pixel(dst, dst_pitch, y0 + o, x, acc[o]);
}

__global__ void __launch_bounds__(IN_TILE * IN_TILE)
conv2d_tiled(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst, int width,
             int height, int src_pitch, int dst_pitch, const float* __restrict__ /*taps*/) {
  __shared__ float s_in[IN_TILE][IN_TILE * CHANNELS];
  // This thread's input pixel: the block's output tile origin minus the halo.
  const int x = blockIdx.x * kOutTile + threadIdx.x - RADIUS;
  const int y = blockIdx.y * kOutTile + threadIdx.y - RADIUS;
#pragma unroll
  for (int c = 0; c < CHANNELS; ++c)
    s_in[threadIdx.y][threadIdx.x * CHANNELS + c] = read_pixel(src, src_pitch, y, x, c, width, height);
  __syncthreads();
  const int tx = threadIdx.x - RADIUS;
  const int ty = threadIdx.y - RADIUS;
  if (tx < 0 || tx >= kOutTile || ty < 0 || ty >= kOutTile || x >= width || y >= height) return;
  float acc[BANKS][CHANNELS] = {};
  for (int m = 0; m < kK; ++m)
    for (int n = 0; n < kK; ++n)
#pragma unroll
      for (int c = 0; c < CHANNELS; ++c) {
        const float v = s_in[ty + m][(tx + n) * CHANNELS + c];
#pragma unroll
        for (int b = 0; b < BANKS; ++b) acc[b][c] = fmaf(c_taps[b * kKK + m * kK + n], v, acc[b][c]);
      }
  store_pixel(dst, dst_pitch, y, x, acc);
}

__global__ void __launch_bounds__(TILE * TILE)
conv2d_cached(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst, int width,
              int height, int src_pitch, int dst_pitch, const float* __restrict__ /*taps*/) {
  __shared__ float s_in[TILE][TILE * CHANNELS];
  const int x0 = blockIdx.x * TILE;
  const int y0 = blockIdx.y * TILE;
  const int x = x0 + threadIdx.x;
  const int y = y0 + threadIdx.y;
  const bool inside = x < width && y < height;
#pragma unroll
  for (int c = 0; c < CHANNELS; ++c)
    s_in[threadIdx.y][threadIdx.x * CHANNELS + c] =
        inside ? (float)src[(size_t)y * src_pitch + x * CHANNELS + c] : 0.0f;
  __syncthreads();
  if (!inside) return;
  float acc[BANKS][CHANNELS] = {};
  for (int m = 0; m < kK; ++m) {
    const int yy = y + m - RADIUS;
    const int ty = yy - y0;
    for (int n = 0; n < kK; ++n) {
      const int xx = x + n - RADIUS;
      const int tx = xx - x0;
      // In the tile (and so in the frame): shared memory; otherwise the halo, via the caches.
      const bool in_tile = (unsigned)ty < (unsigned)TILE && (unsigned)tx < (unsigned)TILE &&
                           xx < width && yy < height;
#pragma unroll
      for (int c = 0; c < CHANNELS; ++c) {
        const float v = in_tile ? s_in[ty][tx * CHANNELS + c]
                                : read_pixel(src, src_pitch, yy, xx, c, width, height);
#pragma unroll
        for (int b = 0; b < BANKS; ++b) acc[b][c] = fmaf(c_taps[b * kKK + m * kK + n], v, acc[b][c]);
      }
    }
  }
  store_pixel(dst, dst_pitch, y, x, acc);
}

}  // extern "C"
