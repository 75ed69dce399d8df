// sepconv.cu: separable K x K correlation of interleaved uint8 frames: a 1D row pass, then a 1D
// column pass, fused in one kernel with the intermediate in shared memory.
//
// For taps T[m][n] = V[m] * H[n] (rank 1), with H in c_row and V in c_col (K floats each):
//   mid(r, b)  = sum_{n=0..K-1} H[n] * in(r, bx(b + (n-R)*C))          byte column b, frame row r
//   out(y, b)  = sat_u8(rint( sum_{m=0..K-1} V[m] * mid(by(y+m-R), b) ))
// in float32, with the border mapping of conv_common.cuh applied per axis (which is exactly
// the 2D border, since padding maps rows and columns independently). Against the 2D kernel
// the result differs only by float rounding (within 1 LSB), and not at all when the host
// picks factors whose products and sums are exact (integer row taps, dyadic column taps).
//
// Thread mapping. A block produces an output tile of TILE_X bytes by TILE_Y rows (a row is W*C
// bytes: channels interleave, so the row neighbour of byte b at tap n is b + (n-R)*C).
//  1. Row pass: the tile's TILE_Y + 2R frame rows, each cut into runs of ROW_RUN bytes; a
//     thread takes runs in turn. It reads its window (ROW_RUN + 2RC bytes) with 16-byte loads
//     (bytes one by one through the border map at the frame's left and right edges), converts
//     each byte to float once, and adds it into every output of its run that uses it, with
//     constant-bank taps. The ROW_RUN sums go to shared memory, mid[TILE_Y + 2R][TILE_X].
//  2. Column pass: a thread takes 4 adjacent byte columns and COL_RUN rows; it reads COL_RUN + 2R
//     float4s from mid and adds each into every output that uses it, then rounds and stores
//     4 bytes per row.
// Launch: block (THREADS, 1, 1), grid (ceil(W*C / TILE_X), ceil(H / TILE_Y), 1). Buffers: base
// pointers aligned to 16 bytes, pitches multiples of 16.
//
// Macros: RADIUS, CHANNELS, BORDER (conv_common.cuh; BANKS must stay 1), TILE_X (multiple of
// ROW_RUN and of 4), TILE_Y (multiple of COL_RUN), ROW_RUN (multiple of 16), COL_RUN, THREADS.

#include "conv_common.cuh"

#if ELEM_BYTES != 1
#error "this kernel takes uint8 samples only (ELEM_BYTES 1)"
#endif

#ifndef TILE_X
#define TILE_X 64
#endif
#ifndef TILE_Y
#define TILE_Y 64
#endif
#ifndef ROW_RUN
#define ROW_RUN 16
#endif
#ifndef COL_RUN
#define COL_RUN 16
#endif
#ifndef THREADS
#define THREADS 128
#endif

#if BANKS != 1
#error "sepconv.cu takes one tap matrix (BANKS 1)"
#endif
#if ROW_RUN % 16 != 0 || TILE_X % ROW_RUN != 0 || TILE_X % 4 != 0 || TILE_Y % COL_RUN != 0
#error "TILE_X must be a multiple of ROW_RUN (a multiple of 16), TILE_Y a multiple of COL_RUN"
#endif

extern "C" {
__constant__ float c_row[KSIZE];
__constant__ float c_col[KSIZE];
}

namespace {

using namespace conv;

constexpr int kHaloB = RADIUS * CHANNELS;          // window bytes each side of a run
constexpr int kMidRows = TILE_Y + 2 * RADIUS;
constexpr int kRunsPerRow = TILE_X / ROW_RUN;
constexpr int kWin = ROW_RUN + 2 * kHaloB;        // window bytes used
constexpr int kLead = (16 - kHaloB % 16) % 16;    // bytes read before the window (alignment)
constexpr int kSpan = kLead + kWin;
constexpr int kNVec = (kSpan + 15) / 16;
constexpr int kColGroups = TILE_X / 4;
constexpr int kColItems = kColGroups * (TILE_Y / COL_RUN);

static_assert(kMidRows * TILE_X * 4 <= 48 * 1024, "mid tile over 48 KB of shared memory");

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS)
sepconv_u8(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst, int width,
           int height, int src_pitch, int dst_pitch) {
  __shared__ __align__(16) float s_mid[kMidRows * TILE_X];
  const int row_bytes = width * CHANNELS;
  const int x0 = blockIdx.x * TILE_X;
  const int y0 = blockIdx.y * TILE_Y;

  // 1. Row pass into s_mid.
#pragma unroll 1
  for (int item = threadIdx.x; item < kMidRows * kRunsPerRow; item += THREADS) {
    const int r = item / kRunsPerRow;
    const int run = item % kRunsPerRow;
    const int xb = x0 + run * ROW_RUN;  // first byte of the run
    float acc[ROW_RUN];
    const int sy = map_index(y0 - RADIUS + r, height);
    if (sy < 0 || xb >= row_bytes) {
#pragma unroll
      for (int j = 0; j < ROW_RUN; ++j) acc[j] = 0.0f;
    } else {
      const unsigned char* srow = src + (size_t)sy * src_pitch;
      unsigned int w[kNVec * 4];
      const int ws = xb - kHaloB;  // frame byte of window byte 0
      if (ws >= 0 && ws + kWin <= row_bytes) {
        const uint4* p = reinterpret_cast<const uint4*>(srow + ws - kLead);
#pragma unroll
        for (int v = 0; v < kNVec; ++v) {
          const uint4 t = __ldg(p + v);
          w[4 * v] = t.x; w[4 * v + 1] = t.y; w[4 * v + 2] = t.z; w[4 * v + 3] = t.w;
        }
      } else {
#pragma unroll
        for (int q = 0; q < kNVec * 4; ++q) {
          unsigned int b[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = 4 * q + e;
            b[e] = 0u;
            if (i >= kLead && i < kSpan) {
              const int c = map_column(ws + i - kLead, row_bytes, width);
              b[e] = c < 0 ? 0u : (unsigned int)srow[c];
            }
          }
          w[q] = pack4(b[0], b[1], b[2], b[3]);
        }
      }
      // Window byte i feeds output j of the run at tap n = (i - j) / C when that divides.
#pragma unroll
      for (int i = 0; i < kWin; ++i) {
        const float f = byte_to_float(w[(kLead + i) >> 2], (kLead + i) & 3);
#pragma unroll
        for (int j = 0; j < ROW_RUN; ++j) {
          const int d = i - j;
          if (d < 0 || d % CHANNELS != 0 || d / CHANNELS >= kK) continue;
          const int n = d / CHANNELS;
          acc[j] = (n == 0) ? c_row[0] * f : fmaf(c_row[n], f, acc[j]);
        }
      }
    }
    float4* m4 = reinterpret_cast<float4*>(s_mid + r * TILE_X + run * ROW_RUN);
#pragma unroll
    for (int q = 0; q < ROW_RUN / 4; ++q)
      m4[q] = make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]);
  }
  __syncthreads();

  // 2. Column pass from s_mid, 4 byte columns x COL_RUN rows per item.
#pragma unroll 1
  for (int item = threadIdx.x; item < kColItems; item += THREADS) {
    const int g = item % kColGroups;
    const int h = item / kColGroups;
    const int xb = x0 + 4 * g;
    const int yb = y0 + h * COL_RUN;
    if (xb >= row_bytes || yb >= height) continue;
    float acc[COL_RUN][4];
#pragma unroll
    for (int i = 0; i < COL_RUN + 2 * RADIUS; ++i) {
      const float4 v = *reinterpret_cast<const float4*>(s_mid + (h * COL_RUN + i) * TILE_X + 4 * g);
#pragma unroll
      for (int o = 0; o < COL_RUN; ++o) {
        const int m = i - o;
        if (m < 0 || m >= kK) continue;
        const float t = c_col[m];
        if (m == 0) {
          acc[o][0] = t * v.x; acc[o][1] = t * v.y; acc[o][2] = t * v.z; acc[o][3] = t * v.w;
        } else {
          acc[o][0] = fmaf(t, v.x, acc[o][0]); acc[o][1] = fmaf(t, v.y, acc[o][1]);
          acc[o][2] = fmaf(t, v.z, acc[o][2]); acc[o][3] = fmaf(t, v.w, acc[o][3]);
        }
      }
    }
    const bool full = xb + 4 <= row_bytes;
#pragma unroll
    for (int o = 0; o < COL_RUN; ++o) {
      if (yb + o >= height) break;
      unsigned char* d = dst + (size_t)(yb + o) * dst_pitch + xb;
      const unsigned int b0 = to_u8(acc[o][0]), b1 = to_u8(acc[o][1]);
      const unsigned int b2 = to_u8(acc[o][2]), b3 = to_u8(acc[o][3]);
      if (full) {
        *reinterpret_cast<unsigned int*>(d) = pack4(b0, b1, b2, b3);
      } else {
        const unsigned int b[4] = {b0, b1, b2, b3};
        for (int e = 0; e < row_bytes - xb; ++e) d[e] = (unsigned char)b[e];
      }
    }
  }
}
