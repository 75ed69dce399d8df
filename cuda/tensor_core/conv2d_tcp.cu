// conv2d_tcp.cu: K x K correlation of interleaved uint8 frames on the tensor cores for large K
// (up to 31), with the channels staged as separate planes.
//
// What it computes: conv2d_tc.cu's one-bank result (see there). Each tap t is the integer
// n = round(t x 2^shift) (backends/families/integer_taps.py); its DIGITS low signed base-256
// digits go through the tensor cores, and what is left above them (n minus those digits: a few
// large taps, such as the centre of a sharpening filter, whose top digit is not zero) is added
// exactly by the CUDA cores from a short list (c_sparse). Then
//   v(y,x,c) = sum_{m,n} n[m+R][n+R] * in(by(y+m), bx(x+n), c)     exact, int32
//   out = sat(v / 2^shift rounded)                                  ties per TIES_EVEN
//
// Why planes. conv2d_tc.cu multiplies interleaved bytes, so a tap row's band matrix holds taps
// on every C-th diagonal only and two thirds of an RGB frame's products are zeros; with the
// channels apart, a tap row of 8 outputs reads 8 + 2R bytes of which K are used per output.
//
// The matrix product (m16n8k32, A = input bytes, B = taps). A unit is 16 rows x 8 pixels of one
// plane. Tap rows are taken four at a time (a quad; K padded to whole quads with zero taps), and
// a quad's "half" is one 4-byte word w of its four rows: lane (g, t) holds word w of tap row
// 4Q + t, i.e. of input row g + 4Q + t (and g + 8 + ...). So every lane's A address is one base
// register plus a constant: the k index runs over (quad, word) halves, two per mma k-step. B, the
// band of taps that each of the 8 output pixels applies to those bytes, stays in registers for
// the whole kernel (loaded once from g_bfrag, which the host fills).
//
// Per block, an output tile of TILE_PX pixels by TILE_H rows, in three phases:
//  1. Stage input rows y0-R .. y0+TILE_H+R-1 into one shared-memory plane per channel (16-pixel
//     chunks of C 16-byte loads, split into planes by byte permutes, at most C - 1 per word;
//     edges through the border map).
//  2. Each warp takes pairs of units (plane, 16 rows, 8 pixels) side by side: per k-step and unit
//     four LDS.32 (fewer where the pair shares words) and one mma per digit; then the sparse taps,
//     the rounding, and the bytes into an interleaved output tile.
//  3. Store the output tile with 16-byte stores (bytes past W*C or rows past H are not written).
// Launch: block (WARPS*32, 1, 1), grid (ceil(W / TILE_PX), ceil(H / TILE_H), 1). Buffers: base
// pointers aligned to 16 bytes, pitches multiples of 16. Needs sm_80 or later.
//
// Macros: RADIUS, CHANNELS, BORDER (conv_common.cuh; BANKS 1, ELEM_BYTES 1), DIGITS 1..3,
// TIES_EVEN, TILE_PX (multiple of 16), TILE_H (multiple of 16), WARPS, SPARSE (the most sparse
// taps c_sparse holds; 0: none), PAIR (units side by side per warp iteration, sharing B
// registers and A words).

#include "conv_common.cuh"
#include "tc_common.cuh"

#if ELEM_BYTES != 1 || BANKS != 1
#error "conv2d_tcp.cu takes uint8 samples and one bank of taps"
#endif
#ifndef DIGITS
#define DIGITS 2
#endif
#ifndef TILE_PX
#define TILE_PX 64
#endif
#ifndef TILE_H
#define TILE_H 32
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef TIES_EVEN
#define TIES_EVEN 1
#endif
#ifndef SPARSE
#define SPARSE 0
#endif
#ifndef PAIR
#define PAIR 2
#endif
#if DIGITS < 1 || DIGITS > 3
#error "DIGITS must be 1..3"
#endif
#if TILE_PX % 16 != 0 || TILE_H % 16 != 0 || TILE_H < 16
#error "TILE_PX and TILE_H must be multiples of 16"
#endif

namespace {

using namespace conv;

constexpr int kQuads = (KSIZE + 3) / 4;               // tap rows in quads, zero rows at the end
constexpr int kFirstWord = -((RADIUS + 3) / 4);       // relative to a unit's first pixel
constexpr int kLastWord = (7 + RADIUS) / 4;
constexpr int kWords = kLastWord - kFirstWord + 1;   // words per tap row
constexpr int kHalves = kQuads * kWords;
constexpr int kSteps = (kHalves + 1) / 2;             // mma k-steps per unit
constexpr int kHaloL = (-4 * kFirstWord + 15) / 16 * 16;
constexpr int kStagedPx = (kHaloL + TILE_PX + 4 * kLastWord - 4 + 15) / 16 * 16;
// An odd number of words per row: the rows g + t (0..10) a warp's LDS.32 reads fall in distinct banks.
constexpr int kPitch = kStagedPx + 4;
constexpr int kStagedRows = TILE_H + 2 * RADIUS;      // rows read from the frame
constexpr int kInRows = TILE_H + 4 * kQuads - 1;      // rows the padded quads reach
constexpr int kPlane = kInRows * kPitch;
constexpr int kOutBytes = TILE_PX * CHANNELS;
constexpr int kOutPitch = kOutBytes % 32 == 16 ? kOutBytes : kOutBytes + 16;
constexpr int kUnitsX = TILE_PX / 8;
constexpr int kUnitsPlane = kUnitsX * (TILE_H / 16);
constexpr int kUnits = CHANNELS * kUnitsPlane;
constexpr int kThreads = WARPS * 32;
constexpr int kChunksRow = kStagedPx / 16;            // 16-pixel chunks per staged row
constexpr int kStageIters = (kStagedRows * kChunksRow + kThreads - 1) / kThreads;
constexpr int kOutVecs = kOutBytes / 16;
constexpr int kPair = PAIR;                           // units side by side per warp iteration
static_assert(kUnits % (kPair * WARPS) == 0, "each warp takes the same number of unit pairs");
static_assert(CHANNELS * kPlane + TILE_H * kOutPitch <= 48 * 1024, "shared tiles over 48 KB");

// Byte offset of half i's word from a lane's base (row g + t of its unit, first pixel): quad
// Q = i / kWords is 4Q rows down, word kFirstWord + i % kWords. Padding halves read half 0
// (their B bytes are zero).
__host__ __device__ constexpr int half_offset(int i) {
  return i < kHalves ? 4 * (i / kWords) * kPitch + 4 * (kFirstWord + i % kWords) : 4 * kFirstWord;
}

// A chunk is 16 pixels x CHANNELS bytes held as words w[0..4C-1]; plane word (q, c) is channel c
// of its pixels 4q..4q+3, bytes j_i = (4q + i) * CHANNELS + c, which lie in the consecutive words
// word_of(q, c, 0) .. word_of(q, c, 3). perm_selector says where __byte_perm takes each from.
__host__ __device__ constexpr int byte_of(int q, int c, int i) { return (4 * q + i) * CHANNELS + c; }
__host__ __device__ constexpr int word_of(int q, int c, int i) { return byte_of(q, c, i) / 4; }

// The selector that merges word k into r (r's bytes kept, i.e. nibble i, where they come from an
// earlier word); for the first merge (k = first + 1) r is word `first` itself.
__host__ __device__ constexpr unsigned int perm_selector(int q, int c, int k, bool first_merge) {
  unsigned int selector = 0;
  for (int i = 0; i < 4; ++i) {
    const int word = word_of(q, c, i);
    const int b = byte_of(q, c, i) % 4;
    const unsigned int nibble = word == k ? 4u + b : (first_merge && word == k - 1 ? (unsigned)b : (unsigned)i);
    selector |= nibble << (4 * i);
  }
  return selector;
}

// Plane word (q, c) of a chunk: one move for one channel, else one byte permute per extra word.
__device__ __forceinline__ unsigned int plane_word(const unsigned int* w, int q, int c) {
  const int first = word_of(q, c, 0);
  const int last = word_of(q, c, 3);
  if (first == last) return w[first];
  unsigned int r = __byte_perm(w[first], w[first + 1], perm_selector(q, c, first + 1, true));
#pragma unroll
  for (int k = first + 2; k <= last; ++k) r = __byte_perm(r, w[k], perm_selector(q, c, k, false));
  return r;
}

}  // namespace

extern "C" {
// B registers: [DIGITS][kSteps][2][32 lanes] (integer_taps.planar_fragments).
__device__ unsigned int g_bfrag[DIGITS * kSteps * 2 * 32];
// {shift, bias}: the sums start at bias and are rounded by a shift (round_sum).
__constant__ int c_round[2];
// The sparse taps: {count, then per tap dy, dx, value} (value: n less its DIGITS low digits).
__constant__ int c_sparse[1 + 3 * (SPARSE > 0 ? SPARSE : 1)];
}

namespace {

// Phase 1: rows y0-R.. of the pixels x0-kHaloL.. into one plane per channel. Every load is
// issued before any store, so a thread keeps its chunks' loads in flight.
__device__ __forceinline__ void stage_planes(unsigned char* s_in, const unsigned char* __restrict__ src,
                                             int width, int height, int src_pitch, int x0, int y0) {
  const int row_bytes = width * CHANNELS;
  uint4 chunk[kStageIters][CHANNELS];
#pragma unroll
  for (int k = 0; k < kStageIters; ++k) {
    const int i = threadIdx.x + k * kThreads;
    const int r = i / kChunksRow;
    const int y = y0 - RADIUS + r;
    const int gx = (x0 - kHaloL + 16 * (i - r * kChunksRow)) * CHANNELS;
#pragma unroll
    for (int v = 0; v < CHANNELS; ++v) {
      const int bx = gx + 16 * v;
      const bool inside = i < kStagedRows * kChunksRow && (unsigned)y < (unsigned)height && bx >= 0 &&
                          bx + 16 <= row_bytes;
      chunk[k][v] = inside ? __ldg(reinterpret_cast<const uint4*>(src + (size_t)y * src_pitch + bx))
                           : make_uint4(0u, 0u, 0u, 0u);
      if (!inside && i < kStagedRows * kChunksRow)
        chunk[k][v] = load_edge_vector(src, src_pitch, y, bx, width, height);
    }
  }
#pragma unroll
  for (int k = 0; k < kStageIters; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i >= kStagedRows * kChunksRow) break;
    const int r = i / kChunksRow;
    unsigned int w[4 * CHANNELS];
#pragma unroll
    for (int v = 0; v < CHANNELS; ++v) {
      w[4 * v] = chunk[k][v].x; w[4 * v + 1] = chunk[k][v].y;
      w[4 * v + 2] = chunk[k][v].z; w[4 * v + 3] = chunk[k][v].w;
    }
    unsigned char* row = s_in + r * kPitch + 16 * (i - r * kChunksRow);
#pragma unroll
    for (int c = 0; c < CHANNELS; ++c)
#pragma unroll
      for (int q = 0; q < 4; ++q) reinterpret_cast<unsigned int*>(row + c * kPlane)[q] = plane_word(w, q, c);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
conv2d_tcp_u8(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst, int width,
              int height, int src_pitch, int dst_pitch) {
  __shared__ __align__(16) unsigned char s_in[CHANNELS * kPlane];
  __shared__ __align__(16) unsigned char s_out[TILE_H * kOutPitch];
  const int x0 = blockIdx.x * TILE_PX;
  const int y0 = blockIdx.y * TILE_H;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;

  // B registers first: their loads overlap the staging.
  unsigned int bf[DIGITS][kSteps][2];
#pragma unroll
  for (int d = 0; d < DIGITS; ++d)
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
#pragma unroll
      for (int h = 0; h < 2; ++h) bf[d][s][h] = g_bfrag[((d * kSteps + s) * 2 + h) * 32 + lane];

  stage_planes(s_in, src, width, height, src_pitch, x0, y0);
  const int shift = c_round[0];
  const int bias = c_round[1];
  __syncthreads();

  // 2. Pairs of units side by side (16 rows x 16 pixels of one plane): the two share their B
  // registers, and the A words they both read are loaded once.
#pragma unroll 1
  for (int k = 0; k < kUnits / (kPair * WARPS); ++k) {
    const int u = kPair * (warp + k * WARPS);
    const int c = u / kUnitsPlane;
    const int uy = (u - c * kUnitsPlane) / kUnitsX;
    const int ux = u - c * kUnitsPlane - uy * kUnitsX;
    const unsigned char* unit = s_in + c * kPlane + 16 * uy * kPitch + kHaloL + 8 * ux;
    const unsigned char* base = unit + (g + t) * kPitch;
    int acc[kPair][DIGITS][4] = {};
#pragma unroll
    for (int j = 0; j < kPair; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][0][e] = bias;
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
#pragma unroll
      for (int j = 0; j < kPair; ++j) {
        unsigned int a[4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const unsigned char* p = base + 8 * j + half_offset(2 * s + h);
          a[2 * h] = *reinterpret_cast<const unsigned int*>(p);
          a[2 * h + 1] = *reinterpret_cast<const unsigned int*>(p + 8 * kPitch);
        }
#pragma unroll
        for (int d = 0; d < DIGITS; ++d) mma_u8s8(acc[j][d], a, bf[d][s][0], bf[d][s][1]);
      }
#pragma unroll
    for (int j = 0; j < kPair; ++j) {
      int v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int sum = acc[j][DIGITS - 1][e];
#pragma unroll
        for (int d = DIGITS - 2; d >= 0; --d) sum = sum * 256 + acc[j][d][e];
        v[e] = sum;
      }
#if SPARSE > 0
      // The taps' parts above their low digits: lane (g, t) holds rows g, g + 8, pixels 2t, 2t + 1.
      const unsigned char* mine = unit + 8 * j + g * kPitch + 2 * t - RADIUS;
      for (int i = 0; i < c_sparse[0]; ++i) {
        const unsigned char* p = mine + c_sparse[1 + 3 * i] * kPitch + c_sparse[2 + 3 * i];
        const int value = c_sparse[3 + 3 * i];
        v[0] += value * p[0];
        v[1] += value * p[1];
        v[2] += value * p[8 * kPitch];
        v[3] += value * p[8 * kPitch + 1];
      }
#endif
      unsigned char* out = s_out + (16 * uy + g) * kOutPitch + (8 * (ux + j) + 2 * t) * CHANNELS + c;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int rounded = round_sum<TIES_EVEN>(v[e], shift);
        out[(e >> 1) * 8 * kOutPitch + (e & 1) * CHANNELS] = (unsigned char)min(max(rounded, 0), 255);
      }
    }
  }
  __syncthreads();
  store_tile<TILE_H, kOutVecs, kOutPitch, kThreads>(dst, s_out, width * CHANNELS, height, dst_pitch,
                                                    x0 * CHANNELS, y0);
}
