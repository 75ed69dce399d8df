// resample.cu: the geometry stages of streamconv/chain/resample.py. `scale` (entry `scale`) is a
// separable polyphase convolution, the horizontal pass then the vertical one, in one kernel;
// `crop` (entry `crop`, built when CROP_X is defined) copies a window.
//
// scale: a block makes TILE_W x TILE_H output pixels (all channels) with TILE_W x THREADS_Y
// threads. The source rows its outputs read (at most ROWS, clamped to the frame: replicate)
// pass through shared memory CHUNK at a time, as floats, at most SPAN pixels of each (clamped
// alike); for each of those rows, thread x adds up output column x's horizontal taps into
// s_sums, kept for the whole tile; then every thread adds up the vertical taps of its outputs
// from s_sums, rounds half to even, saturates and stores.
// Taps, per output column: g_xstart (first source column, may be < 0) and g_xweights (NTX
// float32 weights, zero-padded); per output row: g_ystart, g_yweights (NTY). The host copies
// them in from streamconv/chain/resample.py's tables (streamconv/backends/families/resample.py).
// Arithmetic: __fmul_rn and __fadd_rn, taps in order, never contracted into an FMA: what the
// CPU reference (streamconv/backends/cpu/resample.py) computes, so the two are equal sample
// for sample. FUSED 1 takes fmaf instead (for `streamconv bench --scale`'s comparison only).
//
// Macros: CHANNELS 1..4, ELEM_BYTES 1 or 2, OUT_W, OUT_H, NTX, NTY, TILE_W, THREADS_Y,
// TILE_H, CHUNK, SPAN, ROWS, FUSED; crop: CROP_X, CROP_Y, OUT_W, OUT_H, CHANNELS, ELEM_BYTES.
#include "conv_common.cuh"

#ifndef OUT_W
#define OUT_W 64
#endif
#ifndef OUT_H
#define OUT_H 64
#endif

#ifdef CROP_X

// One thread per byte of the window's rows: (x, y) of the grid is (byte in the row, row).
extern "C" __global__ void crop(const unsigned char* __restrict__ src,
                                unsigned char* __restrict__ dst, int width, int height,
                                int src_pitch, int dst_pitch) {
  (void)width;
  (void)height;
  const int row_bytes = OUT_W * CHANNELS * ELEM_BYTES;
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (b >= row_bytes || y >= OUT_H) return;
  dst[(size_t)y * dst_pitch + b] =
      src[(size_t)(y + CROP_Y) * src_pitch + CROP_X * CHANNELS * ELEM_BYTES + b];
}

#else

#ifndef NTX
#define NTX 4
#endif
#ifndef NTY
#define NTY 4
#endif
#ifndef TILE_W
#define TILE_W 32
#endif
#ifndef THREADS_Y
#define THREADS_Y 8
#endif
#ifndef TILE_H
#define TILE_H 32
#endif
#ifndef CHUNK
#define CHUNK 16
#endif
#ifndef SPAN
#define SPAN (2 * TILE_W + NTX)
#endif
#ifndef ROWS
#define ROWS (2 * TILE_H + NTY)
#endif
#ifndef FUSED
#define FUSED 0
#endif
#define REGISTER_TAPS 32  // horizontal weights held in registers up to this many taps

__device__ int g_xstart[OUT_W];
__device__ float g_xweights[OUT_W * NTX];
__device__ int g_ystart[OUT_H];
__device__ float g_yweights[OUT_H * NTY];

__device__ __forceinline__ float add_product(float acc, float weight, float sample) {
#if FUSED
  return fmaf(weight, sample, acc);
#else
  return __fadd_rn(acc, __fmul_rn(weight, sample));
#endif
}

// A sample (< 2^16) as float, exactly: the low mantissa of 2^23, 2^23 then taken off.
__device__ __forceinline__ float sample_to_float(unsigned int v) {
  return __int_as_float(0x4B000000 | v) - 8388608.0f;
}

// Source rows top..top+count-1 (clamped to the frame), columns col0..col0+span-1 (clamped),
// into s_rows as floats.
__device__ __forceinline__ void stage_rows(const unsigned char* __restrict__ src, int src_pitch,
                                           int width, int height, int col0, int span, int top,
                                           int count, float (*s_rows)[SPAN * CHANNELS]) {
  const int samples = span * CHANNELS;
  const bool inside = col0 >= 0 && col0 + span <= width;
  for (int r = threadIdx.y; r < count; r += THREADS_Y) {
    const int y = min(max(top + r, 0), height - 1);
    const conv::elem_t* line = reinterpret_cast<const conv::elem_t*>(src + (size_t)y * src_pitch);
    float* out = s_rows[r];
    if (inside) {
      const conv::elem_t* from = line + col0 * CHANNELS;
      for (int i = threadIdx.x; i < samples; i += TILE_W) out[i] = sample_to_float(from[i]);
    } else {
      for (int i = threadIdx.x; i < samples; i += TILE_W) {
        const int pixel = i / CHANNELS;
        const int x = min(max(col0 + pixel, 0), width - 1);
        out[i] = sample_to_float(line[x * CHANNELS + (i - pixel * CHANNELS)]);
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(TILE_W * THREADS_Y)
scale(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst, int width, int height,
      int src_pitch, int dst_pitch) {
  __shared__ float s_rows[CHUNK][SPAN * CHANNELS];
  __shared__ float s_sums[ROWS][TILE_W * CHANNELS];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int ox0 = blockIdx.x * TILE_W, oy0 = blockIdx.y * TILE_H;
  const int ox_end = min(ox0 + TILE_W, OUT_W), oy_end = min(oy0 + TILE_H, OUT_H);
  const int column = min(ox0 + tx, ox_end - 1);  // threads past the edge repeat the last column
  const int col0 = g_xstart[ox0];
  const int span = g_xstart[ox_end - 1] + NTX - col0;
  const int row0 = g_ystart[oy0];
  const int rows = g_ystart[oy_end - 1] + NTY - row0;
  const int offset = (g_xstart[column] - col0) * CHANNELS;
#if NTX <= REGISTER_TAPS
  float wx[NTX];
#pragma unroll
  for (int t = 0; t < NTX; ++t) wx[t] = g_xweights[column * NTX + t];
#define XWEIGHT(t) wx[t]
#else
  const float* wx = g_xweights + column * NTX;
#define XWEIGHT(t) __ldg(wx + (t))
#endif

  for (int first = 0; first < rows; first += CHUNK) {
    const int count = min(CHUNK, rows - first);
    __syncthreads();  // the previous chunk's rows are read no more
    stage_rows(src, src_pitch, width, height, col0, span, row0 + first, count, s_rows);
    __syncthreads();
    for (int r = ty; r < count; r += THREADS_Y) {
      const float* line = s_rows[r] + offset;
      float sum[CHANNELS];
#pragma unroll
      for (int c = 0; c < CHANNELS; ++c) sum[c] = 0.0f;
#pragma unroll 16
      for (int t = 0; t < NTX; ++t) {
        const float weight = XWEIGHT(t);
#pragma unroll
        for (int c = 0; c < CHANNELS; ++c) {
          sum[c] = add_product(sum[c], weight, line[t * CHANNELS + c]);
        }
      }
#pragma unroll
      for (int c = 0; c < CHANNELS; ++c) s_sums[first + r][tx * CHANNELS + c] = sum[c];
    }
  }
#undef XWEIGHT
  __syncthreads();
  if (ox0 + tx >= OUT_W) return;
  for (int oy = oy0 + ty; oy < oy_end; oy += THREADS_Y) {
    const int base = g_ystart[oy] - row0;
    const float* wy = g_yweights + oy * NTY;
    float acc[CHANNELS];
#pragma unroll
    for (int c = 0; c < CHANNELS; ++c) acc[c] = 0.0f;
#pragma unroll 16
    for (int t = 0; t < NTY; ++t) {
      const float weight = __ldg(wy + t);
      const float* sums = s_sums[base + t] + tx * CHANNELS;
#pragma unroll
      for (int c = 0; c < CHANNELS; ++c) acc[c] = add_product(acc[c], weight, sums[c]);
    }
    conv::elem_t* out = reinterpret_cast<conv::elem_t*>(dst + (size_t)oy * dst_pitch) +
                        (size_t)(ox0 + tx) * CHANNELS;
#pragma unroll
    for (int c = 0; c < CHANNELS; ++c) out[c] = (conv::elem_t)conv::to_elem(acc[c]);
  }
}

#endif  // CROP_X
