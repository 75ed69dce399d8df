// conv3d_tc.cu: a filter across frames with K x K taps per frame (K 3..9) on the tensor cores,
// for interleaved uint8 frames.
//
// What it computes (conv3d.cu's semantics, see there), with every tap t of the T x K x K window
// held as the integer n = round(t x 2^c_shift) in DIGITS signed base-256 digits, one shift for
// all frames (backends/families/temporal.py, window_digits):
//   v(y,x,c) = sum_k sum_{m,n} N_k[m+R][n+R] * f_k(by(y+m), bx(x+n), c)     exact, int32
//   out = sat(v / 2^shift rounded)         exact integer rounding, ties per TIES_EVEN
// For taps that are multiples of 2^-shift this is the float32 result exactly; otherwise the host
// keeps the taps' rounding within a quarter of an output step over the whole window.
//
// How. conv2d_tc.cu's product (see there: 16 rows x 8 output bytes per mma, a tap row's input
// words against a band matrix of its taps), with the frames one after another into the same
// int32 sums, which stay in registers: per block, the tile of frame k + 1 is loaded into
// registers while frame k's mma run from shared memory (two tile buffers, one barrier a frame),
// and frame k's B fragments (its digits' band matrices) are loaded from g_bfrag at its turn, so
// the registers do not grow with T. The sums are rounded once, after the last frame.
//
// Launch: block (WARPS*32, 1, 1), grid (ceil(W*C / TILE_W), ceil(H / TILE_H), 1). Frames: a
// struct of 15 pointers (those of the window positions with taps, first; unused ones may be 0)
// sharing src_pitch; base pointers aligned to 16 bytes, pitches multiples of 16. Needs sm_80.
//
// Macros: RADIUS 1..4, CHANNELS, BORDER (conv_common.cuh; ELEM_BYTES must be 1), TAPS 1..15,
// DIGITS 1..3, TIES_EVEN, TILE_W, TILE_H, WARPS, GROUP, LDMATRIX (as in conv2d_tc.cu).

#include "conv_common.cuh"
#include "tc_common.cuh"

#if ELEM_BYTES != 1
#error "conv3d_tc.cu takes uint8 samples only"
#endif
#ifndef TAPS
#define TAPS 3
#endif
#if TAPS < 1 || TAPS > 15
#error "TAPS must be 1..15"
#endif
#if RADIUS < 1 || RADIUS > 4
#error "conv3d_tc.cu takes K from 3 to 9"
#endif

#include "tc_tile.cuh"
#include "window.cuh"

namespace {

constexpr int kInBytes = kInRows * kInPitch;
constexpr int kUnitsPerWarp = kUnits / WARPS;
static_assert(2 * kInBytes + TILE_H * kOutPitch <= 48 * 1024, "shared tiles over 48 KB");

constexpr int kBRegs = DIGITS * GROUP * kSteps * 2;  // B registers per lane and frame
__host__ __device__ constexpr int b_reg(int d, int j, int s, int h) {
  return ((d * GROUP + j) * kSteps + s) * 2 + h;
}

}  // namespace

extern "C" {
// B registers of each frame: [TAPS][DIGITS][GROUP][kSteps][2][32 lanes] (temporal.py).
__device__ unsigned int g_bfrag[TAPS * kBRegs * 32];
// {shift, bias}: the sums start at bias and are rounded by a shift (round_sum).
__constant__ int c_round[2];
}

extern "C" __global__ void __launch_bounds__(kThreads)
conv3d_tc_u8(Frames src, unsigned char* __restrict__ dst, int width, int height, int src_pitch,
             int dst_pitch) {
  __shared__ __align__(16) unsigned char s_in[2 * kInBytes];
  __shared__ __align__(16) unsigned char s_out[TILE_H * kOutPitch];
  const int row_bytes = width * CHANNELS;
  const int x0 = blockIdx.x * TILE_W;
  const int y0 = blockIdx.y * TILE_H;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;

  uint4 staged[kStageIters];
  bool inside[kStageIters];
  fetch_tile(staged, inside, src.frame[0], src_pitch, x0, y0, row_bytes, height);
  put_tile(s_in, staged, inside, src.frame[0], src_pitch, x0, y0, width, height);

  PieceOffsets off;  // of this lane's pieces from its unit's first row and output byte
  piece_offsets(off, lane, t);
  const int shift = c_round[0];
  const int bias = c_round[1];

  // Sums per unit, digit and n-tile, across every frame; the lowest digit starts at the bias.
  int acc[kUnitsPerWarp][DIGITS][GROUP][4];
#pragma unroll
  for (int k = 0; k < kUnitsPerWarp; ++k)
#pragma unroll
    for (int d = 0; d < DIGITS; ++d)
#pragma unroll
      for (int j = 0; j < GROUP; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[k][d][j][e] = d == 0 ? bias : 0;
  __syncthreads();

#pragma unroll 1
  for (int f = 0; f < TAPS; ++f) {
    const unsigned char* next = f + 1 < TAPS ? frame_of(src, f + 1) : nullptr;
    if (next) fetch_tile(staged, inside, next, src_pitch, x0, y0, row_bytes, height);
    unsigned int bf[kBRegs];
#pragma unroll
    for (int i = 0; i < kBRegs; ++i) bf[i] = g_bfrag[(f * kBRegs + i) * 32 + lane];
    const unsigned char* tile = s_in + (f & 1) * kInBytes;
#pragma unroll
    for (int k = 0; k < kUnitsPerWarp; ++k) {
      const int u = warp + k * WARPS;
      const int uy = u / kUnitsX;
      const int ux = u - uy * kUnitsX;
      const unsigned char* base = tile + (16 * uy + (LDMATRIX ? 0 : g)) * kInPitch + 8 * GROUP * ux;
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        unsigned int a[4];
        load_pieces(a, base, off, s);
#pragma unroll
        for (int j = 0; j < GROUP; ++j) {
          if (!step_reaches(s, j)) continue;
#pragma unroll
          for (int d = 0; d < DIGITS; ++d)
            mma_u8s8(acc[k][d][j], a, bf[b_reg(d, j, s, 0)], bf[b_reg(d, j, s, 1)]);
        }
      }
    }
    // The other buffer was last read before the previous barrier: frame f + 1 goes there.
    if (next) put_tile(s_in + ((f + 1) & 1) * kInBytes, staged, inside, next, src_pitch, x0, y0,
                       width, height);
    __syncthreads();
  }

  // Round once, into the output tile.
#pragma unroll
  for (int k = 0; k < kUnitsPerWarp; ++k) {
    const int u = warp + k * WARPS;
    const int uy = u / kUnitsX;
    const int ux = u - uy * kUnitsX;
    unsigned char* out = s_out + (16 * uy + g) * kOutPitch + 8 * GROUP * ux + 2 * t;
#pragma unroll
    for (int j = 0; j < GROUP; ++j) {
      int v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int sum = acc[k][DIGITS - 1][j][e];
#pragma unroll
        for (int d = DIGITS - 2; d >= 0; --d) sum = sum * 256 + acc[k][d][j][e];
        v[e] = sum;
      }
      const unsigned int lo = pack2_sat(round_sum<TIES_EVEN>(v[0], shift), round_sum<TIES_EVEN>(v[1], shift));
      const unsigned int hi = pack2_sat(round_sum<TIES_EVEN>(v[2], shift), round_sum<TIES_EVEN>(v[3], shift));
      *reinterpret_cast<unsigned short*>(out + 8 * j) = (unsigned short)lo;
      *reinterpret_cast<unsigned short*>(out + 8 * j + 8 * kOutPitch) = (unsigned short)hi;
    }
  }
  __syncthreads();
  store_tile<TILE_H, kOutVecs, kOutPitch, kThreads>(dst, s_out, row_bytes, height, dst_pitch, x0, y0);
}
