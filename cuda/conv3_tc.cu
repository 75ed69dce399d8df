// conv3_tc.cu: 3x3 correlation of interleaved uint8 frames on the tensor cores, with no shared
// memory: each lane loads its A fragments straight from global memory.
//
// What it computes: conv2d_tc.cu's BANKS == 1 result for RADIUS 1. Each tap t is the integer
// n = round(t x 2^shift) in DIGITS signed base-256 digits (backends/integer_taps.py);
//   v(y,x,c) = sum_{m,n} N[m][n] * in(by(y+m-1), bx(x+n-1), c)      exact, int32
//   out = sat(v / 2^shift rounded)        ties to even under TIES_EVEN, else up
// so for taps that are multiples of 2^-shift it is the float32 result exactly.
//
// The matrix product. Output bytes go in groups of 8; group i of a warp starts at byte x_i. Its
// outputs reach input bytes x_i - C .. x_i + 7 + C of three rows, all inside the 16 bytes
// [x_i - 4, x_i + 12) since CHANNELS <= 4. With A's row i = group i and A's k = those 16 bytes of
// one input row (k 0..15) and of the next (k 16..31), a tap row's weights form a band matrix B
// (16 x 8: B[k][j] = N[m][n] where k = 4 + j + (n-1)C), and
//   output row y = A(rows y-1, y) x [B_0; B_1]  (mma m16n8k32)  +  A(row y+1) x B_2  (m16n8k16)
// per digit. The m16n8k32 A fragment of lane (g, t) is the 4-byte word at x_g - 4 + 4t and at
// x_{g+8} - 4 + 4t of each of the two rows: with groups 8 bytes apart those are aligned words, so
// a lane loads them itself, one LDG.32 each, and the rows are shared by the R outputs rows below
// them. The sums' fragment (c0, c1 of group g, c2, c3 of group g+8, bytes 2t and 2t+1) is
// rounded, packed and stored 2 bytes per lane.
//
// Thread mapping: a warp owns 128 output bytes (16 groups) of ROWS rows. Launch: block
// (WARPS*32, 1, 1), grid (ceil(W*C / (128*WARPS)), ceil(H / ROWS), 1). Edges: rows outside the
// frame through map_index (warps whose rows are all inside skip it); words reaching outside the
// row (the first and last group of a row) are gathered byte by byte through map_column. Buffers:
// base pointers aligned to 16 bytes, pitches multiples of 16. Needs sm_80 or later.
//
// Macros: CHANNELS 1..4, BORDER (conv_common.cuh; RADIUS must be 1, BANKS 1, ELEM_BYTES 1),
// DIGITS 1..3, TIES_EVEN, ROWS (output rows per warp), WARPS. The host fills g_bband (the B
// fragments of every lane, backends/integer_taps.py band3_fragments) and c_round.

#include "conv_common.cuh"
#include "tc_common.cuh"

#if RADIUS != 1 || BANKS != 1 || ELEM_BYTES != 1 || CHANNELS > 4
#error "conv3_tc.cu takes 3x3 taps, one bank, uint8 samples and up to 4 channels"
#endif
#ifndef DIGITS
#define DIGITS 2
#endif
#ifndef TIES_EVEN
#define TIES_EVEN 1
#endif
#ifndef ROWS
#define ROWS 8
#endif
#ifndef WARPS
#define WARPS 4
#endif

extern "C" {
// [digit][fragment][lane]: fragment 0, 1 the m16n8k32 B registers (tap rows 0 and 1), 2 the
// m16n8k16 one (tap row 2).
__device__ unsigned int g_bband[DIGITS * 3 * 32];
// {shift, bias}: the sums start at bias and are rounded by the shift.
__constant__ int c_round[2];
}

namespace {

using namespace conv;

// c += a * b, m16n8k16 (A 16 x 16 bytes unsigned, B 16 x 8 signed, int32 sums).
__device__ __forceinline__ void mma_k16_u8s8(int* c, unsigned int a0, unsigned int a1, unsigned int b) {
  asm("mma.sync.aligned.m16n8k16.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(b));
}

// The aligned 4-byte word at byte column c of the row at p.
__device__ __forceinline__ unsigned int word_at(const unsigned char* __restrict__ p, int c) {
  return __ldg(reinterpret_cast<const unsigned int*>(p + c));
}

// The source byte columns of the 4-byte word at byte column c through the border map (-1: a zero
// byte), for lanes whose words reach outside the row.
__device__ __forceinline__ void map_word(int (&cols)[4], int c, int row_bytes, int width) {
#pragma unroll
  for (int i = 0; i < 4; ++i) cols[i] = map_column(c + i, row_bytes, width);
}

// The word of the row at p whose bytes come from columns cols.
__device__ __forceinline__ unsigned int gather_word(const unsigned char* __restrict__ p, const int (&cols)[4]) {
  unsigned int word = 0u;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    if (cols[i] >= 0) word |= (unsigned int)__ldg(p + cols[i]) << (8 * i);
  return word;
}

// Stores 2 output bytes (low 16 bits of pair) at column c of row d, or the first if only it is
// inside the row.
__device__ __forceinline__ void store_pair(unsigned char* d, int c, int row_bytes, unsigned int pair) {
  if (c + 2 <= row_bytes)
    *reinterpret_cast<unsigned short*>(d + c) = (unsigned short)pair;
  else if (c < row_bytes)
    d[c] = (unsigned char)pair;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(WARPS * 32)
conv3_tc_u8(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst, int width,
            int height, int src_pitch, int dst_pitch) {
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int row_bytes = width * CHANNELS;
  const int xw = (blockIdx.x * WARPS + (threadIdx.x >> 5)) * 128;  // the warp's first output byte
  if (xw >= row_bytes) return;
  const int y0 = blockIdx.y * ROWS;

  unsigned int b[DIGITS][3];
#pragma unroll
  for (int d = 0; d < DIGITS; ++d)
#pragma unroll
    for (int f = 0; f < 3; ++f) b[d][f] = g_bband[(d * 3 + f) * 32 + lane];
  const int shift = c_round[0], bias = c_round[1];

  // Input rows y0-1 .. y0+ROWS: this lane's two A words of each.
  const int c0 = xw + 8 * g - 4 + 4 * t, c1 = c0 + 64;
  const bool inside = c0 >= 0 && c1 + 4 <= row_bytes;
  unsigned int w0[ROWS + 2], w1[ROWS + 2];
  if (inside && y0 >= 1 && y0 + ROWS + 1 <= height) {
    const unsigned char* p = src + (size_t)(y0 - 1) * src_pitch;
#pragma unroll
    for (int r = 0; r < ROWS + 2; ++r, p += src_pitch) {
      w0[r] = word_at(p, c0);
      w1[r] = word_at(p, c1);
    }
  } else {  // rows through the row map; words reaching outside the row byte by byte
    int cols0[4], cols1[4];
    map_word(cols0, c0, row_bytes, width);
    map_word(cols1, c1, row_bytes, width);
#pragma unroll
    for (int r = 0; r < ROWS + 2; ++r) {
      const int sy = map_index(y0 - 1 + r, height);
      const unsigned char* p = src + (size_t)max(sy, 0) * src_pitch;
      if (sy < 0) {
        w0[r] = w1[r] = 0u;
      } else if (inside) {
        w0[r] = word_at(p, c0);
        w1[r] = word_at(p, c1);
      } else {
        w0[r] = gather_word(p, cols0);
        w1[r] = gather_word(p, cols1);
      }
    }
  }

  const int out_col = xw + 8 * g + 2 * t;  // bytes out_col, +1 (group g) and +64, +65 (group g+8)
  unsigned char* d_row = dst + (size_t)y0 * dst_pitch;
#pragma unroll
  for (int o = 0; o < ROWS; ++o, d_row += dst_pitch) {
    if (y0 + o >= height) break;
    int acc[DIGITS][4];
    const unsigned int a[4] = {w0[o], w1[o], w0[o + 1], w1[o + 1]};
#pragma unroll
    for (int d = 0; d < DIGITS; ++d) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[d][e] = d == 0 ? bias : 0;
      mma_u8s8(acc[d], a, b[d][0], b[d][1]);
      mma_k16_u8s8(acc[d], w0[o + 2], w1[o + 2], b[d][2]);
    }
    int v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int sum = acc[DIGITS - 1][e];
#pragma unroll
      for (int d = DIGITS - 2; d >= 0; --d) sum = sum * 256 + acc[d][e];
      v[e] = round_sum<TIES_EVEN>(sum, shift);
    }
    store_pair(d_row, out_col, row_bytes, pack2_sat(v[0], v[1]));
    store_pair(d_row, out_col + 64, row_bytes, pack2_sat(v[2], v[3]));
  }
}
