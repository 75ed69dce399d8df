// conv3_tc.cu: 3x3 correlation of interleaved uint8 frames on the tensor cores, with no shared
// memory: each lane loads its A fragments straight from global memory.
//
// What it computes: conv2d_tc.cu's BANKS == 1 result for RADIUS 1. Each tap t is the integer
// n = round(t x 2^shift) in DIGITS signed base-256 digits (backends/families/integer_taps.py);
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
// Thread mapping: a warp owns 128 output bytes (16 groups) of ROWS rows; a block WARPS warps
// side by side. Launch: block (WARPS*32, 1, 1), grid (ceil(W*C / (128*WARPS)), ceil(H / ROWS), 1).
// Edges: rows outside the frame through map_index, and the bytes outside the row through
// edge_lane, only in the warps that need them (the others take a path without either). Buffers:
// base pointers aligned to 16 bytes, pitches multiples of 16. Needs sm_80 or later.
//
// Macros: CHANNELS 1..4, BORDER (conv_common.cuh; RADIUS must be 1, BANKS 1, ELEM_BYTES 1),
// DIGITS 1..3, TIES_EVEN, ROWS (output rows per warp), WARPS. The host fills g_bband (the B
// fragments of every lane, backends/families/integer_taps.py band3_fragments) and c_round.

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

// Where a warp holds the word at byte column c: lane (g, t) loads its words at
// xw - 4 + 8g + 4t (w0) and 64 bytes on (w1), so the warp holds [xw - 4, xw + 132). Returns
// the lane for w0, 32 + the lane for w1, or -1 if the warp does not hold it.
__device__ __forceinline__ int word_holder(int c, int xw) {
  const int o = c - (xw - 4);
  if (o < 0 || o >= 136) return -1;
  const int k = o < 64 ? o : o - 64;
  return (o < 64 ? 0 : 32) + (k < 64 ? 4 * (k >> 3) + ((k >> 2) & 1) : 30 + ((k - 64) >> 2));
}

// How a lane's words that reach outside the row get their outside bytes. Of a lane's two words
// at most one is outside and matters: outputs inside the row reach one pixel past it (byte
// columns -C..-1 or W*C..W*C+C-1), and the other word, if outside too, belongs to a group
// wholly past the row end. Those bytes are the edge pixel's (map_index of pixel -1 or W, the same
// for every row), whose C bytes lie in the aligned words at pixel_col and pixel_col + 4. Those
// words are usually held by a lane of the same warp (word_holder), so the warp shuffles them;
// otherwise it loads them.
struct EdgeLane {
  int pixel_col, pixel_next;       // the edge pixel's two words (pixel_next == pixel_col if not needed)
  int holder, next_holder;         // word_holder of each
  unsigned int pixel_select;       // __byte_perm selector: byte i = the edge pixel's byte for word byte i
  unsigned int pixel_mask;         // 0 when the edge pixel reads as zero (BORDER 0)
  unsigned int select0, select1;   // __byte_perm(raw, pixel bytes): inside bytes raw, outside the pixel's
};

__device__ __forceinline__ unsigned int outside_select(int c, int row_bytes) {
  unsigned int select = 0u;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    select |= (unsigned int)((unsigned)(c + i) < (unsigned)row_bytes ? i : 4 + i) << (4 * i);
  return select;
}

__device__ __forceinline__ EdgeLane edge_lane(int c0, int c1, int xw, int row_bytes, int width) {
  EdgeLane e;
  e.select0 = outside_select(c0, row_bytes);
  e.select1 = outside_select(c1, row_bytes);
  const int c = (c0 < 0 || c0 + 4 > row_bytes) ? c0 : c1;  // the word that matters
  const int pixel = map_index(c < 0 ? -1 : width, width);
  e.pixel_mask = pixel < 0 ? 0u : ~0u;
  const int first = max(pixel, 0) * CHANNELS;
  e.pixel_col = first & ~3;
  e.pixel_next = e.pixel_col + 4 < row_bytes ? e.pixel_col + 4 : e.pixel_col;
  e.holder = word_holder(e.pixel_col, xw);
  e.next_holder = word_holder(e.pixel_next, xw);
  e.pixel_select = 0u;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int channel = ((c + i) % CHANNELS + CHANNELS) % CHANNELS;
    e.pixel_select |= (unsigned int)(first + channel - e.pixel_col) << (4 * i);
  }
  return e;
}

// Word `holder` (word_holder) of the warp, from w0 and w1 of every lane.
__device__ __forceinline__ unsigned int shuffle_word(unsigned int w0, unsigned int w1, int holder) {
  const unsigned int from0 = __shfl_sync(~0u, w0, holder & 31), from1 = __shfl_sync(~0u, w1, holder & 31);
  return holder >= 32 ? from1 : from0;
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
  // Warp-uniform, since the edge path shuffles.
  if (__all_sync(~0u, inside) && y0 >= 1 && y0 + ROWS + 1 <= height) {
    const unsigned char* p = src + (size_t)(y0 - 1) * src_pitch;
#pragma unroll
    for (int r = 0; r < ROWS + 2; ++r, p += src_pitch) {
      w0[r] = word_at(p, c0);
      w1[r] = word_at(p, c1);
    }
  } else {
    // Rows by map_index, and the bytes outside the row by edge_lane. The maps come first and no
    // branch separates the loads, so that all of them are in flight at once: these warps must
    // not take longer than the others, or the last of them hold up the kernel's end.
    int rows[ROWS + 2];
#pragma unroll
    for (int r = 0; r < ROWS + 2; ++r) rows[r] = map_index(y0 - 1 + r, height);
    const int raw0 = (unsigned)c0 < (unsigned)row_bytes ? c0 : 0;  // a word starting outside: any
    const int raw1 = (unsigned)c1 < (unsigned)row_bytes ? c1 : 0;  // valid column, patched below
#pragma unroll
    for (int r = 0; r < ROWS + 2; ++r) {
      const unsigned char* p = src + (size_t)max(rows[r], 0) * src_pitch;
      w0[r] = word_at(p, raw0);
      w1[r] = word_at(p, raw1);
    }
    if (__any_sync(~0u, !inside)) {
      const EdgeLane e = edge_lane(c0, c1, xw, row_bytes, width);
      const auto patch = [&](int r, unsigned int pixel_word, unsigned int next_word) {
        const unsigned int pixel = __byte_perm(pixel_word, next_word, e.pixel_select) & e.pixel_mask;
        w0[r] = __byte_perm(w0[r], pixel, e.select0);
        w1[r] = __byte_perm(w1[r], pixel, e.select1);
      };
      if (__all_sync(~0u, inside || (e.holder >= 0 && e.next_holder >= 0))) {
#pragma unroll
        for (int r = 0; r < ROWS + 2; ++r)
          patch(r, shuffle_word(w0[r], w1[r], e.holder), shuffle_word(w0[r], w1[r], e.next_holder));
      } else {
#pragma unroll
        for (int r = 0; r < ROWS + 2; ++r) {
          const unsigned char* p = src + (size_t)max(rows[r], 0) * src_pitch;
          patch(r, word_at(p, e.pixel_col), word_at(p, e.pixel_next));
        }
      }
    }
#pragma unroll
    for (int r = 0; r < ROWS + 2; ++r) {  // rows that read as zero (BORDER 0)
      w0[r] = rows[r] < 0 ? 0u : w0[r];
      w1[r] = rows[r] < 0 ? 0u : w1[r];
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
