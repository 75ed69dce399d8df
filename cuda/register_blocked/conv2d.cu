// conv2d.cu: K x K correlation of interleaved uint8 or uint16 frames, one filter stage of streamconv.
//
// What it computes, for every sample (y, x, c) of an H x W x C frame, rows `pitch` bytes apart:
//   acc_b(y,x,c) = sum_{m,n = -R..R} T_b[m+R][n+R] * in(by(y+m), bx(x+n), c)     (float32)
//   BANKS == 1:               out = sat(rint(acc_0))
//   BANKS == 2, COMBINE == 1: out = sat(rint(sqrtf(acc_0*acc_0 + acc_1*acc_1)))
// rint rounds half to even, sat clamps to 0..255 for uint8 samples (ELEM_BYTES 1, entry
// conv2d_u8) or 0..65535 for uint16 (ELEM_BYTES 2, entry conv2d_u16), in one cvt.rni.sat,
// which also sends NaN to 0. Everything below says "byte" for a sample of ELEM_BYTES bytes.
// by/bx map an out-of-frame index per BORDER: 0 zero (pixel reads as 0), 1 replicate (clamp),
// 2 reflect101 (gfedcb|abcdefgh|gfedcba, any distance from the frame, index 0 when n == 1).
// Taps T live in c_taps (row-major K x K, bank 0 first); the host writes them through
// cuModuleGetGlobal("c_taps"). No fast-math: the square root is the IEEE one and the magnitude
// is formed without contraction, so the output is bit-exact against float32 CPU math whenever
// every tap is a multiple of 1/256 and the sums stay below 2^16 (all products and sums exact),
// and within 1 LSB otherwise.
//
// Thread mapping. A row is handled as W*C bytes: the neighbour of byte b at tap column n is byte
// b + n*C, so channels never need separating except when mapping a border pixel. Each thread
// produces OUT_X consecutive bytes of OUT_Y consecutive rows; a block produces a tile of
// BLOCK_X*OUT_X bytes by BLOCK_Y*OUT_Y rows. Launch: block (BLOCK_X, BLOCK_Y, 1), grid
// (ceil(W*C / (BLOCK_X*OUT_X)), ceil(H / (BLOCK_Y*OUT_Y)), 1), no dynamic shared memory.
//
// Each thread walks down the OUT_Y + 2R input rows its outputs need. For every input row it
// reads its window (OUT_X + 2*R*C bytes, widened to whole 4/8/16-byte vectors) straight from
// global memory: a warp's reads of one row are contiguous, and the overlap between neighbouring
// windows is served by L1, so there is no shared-memory staging, no barrier and no load phase
// to wait for. Rows outside the frame are remapped per row. Only lanes whose window crosses the
// left/right frame edge (first/last block column) gather their bytes one by one through a
// column map that their block builds once in shared memory; padding bytes past W*C are never
// used as pixels. Bytes are widened to float by the exponent trick (byte into the mantissa of
// 2^23, then subtract 2^23: one PRMT and one FADD instead of a slower I2F), or under OFFSET_CVT
// to 2^15 + byte by the PRMT alone, the 2^15 x tap sum being taken off each sum once.
//  - Unrolled form (RADIUS < 4 by default): accumulators form a ring of K output rows; input
//    rows are processed in chunks whose loads are all issued before any use, and within a chunk
//    everything is unrolled, so taps are constant-bank FFMA operands and each input row feeds
//    every output row it touches. A row is rounded and stored as soon as it is complete.
//  - Looped form (RADIUS >= 4): the input-row loop stays rolled so code size and registers stay
//    bounded; taps come from a shared copy padded with zero rows, so every input row runs the
//    same straight-line code for all OUT_Y output rows ((OUT_Y + 2R) / K of the minimal FMAs).
//
// Macros (the host defines them before this source; defaults below and in conv_common.cuh):
//   RADIUS 0..15 (K = 2R+1), CHANNELS 1..4, BORDER 0/1/2, BANKS 1 or 2, COMBINE 0 or 1
//   (BANKS 2 requires COMBINE 1), ELEM_BYTES 1 or 2, BLOCK_X, BLOCK_Y (threads), OUT_X (samples
//   per thread, multiple of 4), OUT_Y (rows per thread). CONV_LOOPED (optional): 1 forces the
//   looped form, 0 the unrolled one. OFFSET_CVT (uint8 only, default 0): 1 widens each byte to
//   2^15 + byte in one PRMT (no FADD) and starts bank b's sums at -c_offset[b], which the host
//   sets to 2^15 times the bank's tap sum; the host enables it only where that stays exact, or
//   within its error bound (kernels.conversion_offsets).
// Buffers: base pointers aligned to 16 bytes (256 in practice), pitches in bytes, multiples of 16
// (128 in practice) and >= W*C*ELEM_BYTES.

#include "conv_common.cuh"

#ifndef BLOCK_X
#define BLOCK_X 32
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 4
#endif
#ifndef OUT_X
#define OUT_X 8
#endif
#ifndef OUT_Y
#define OUT_Y 16
#endif
#ifndef CONV_LOOPED
#define CONV_LOOPED (RADIUS >= 4)
#endif
#ifndef OFFSET_CVT
#define OFFSET_CVT 0
#endif
#if OFFSET_CVT && ELEM_BYTES != 1
#error "OFFSET_CVT takes uint8 samples only"
#endif

#if OUT_X < 4 || (OUT_X % 4) != 0
#error "OUT_X must be a positive multiple of 4"
#endif
#if OUT_Y < 1 || BLOCK_X < 1 || BLOCK_Y < 1 || BLOCK_X * BLOCK_Y > 1024
#error "bad launch geometry"
#endif

extern "C" {

__constant__ float c_taps[BANKS * KSIZE * KSIZE];
#if OFFSET_CVT
__constant__ float c_offset[BANKS];  // 2^15 * (sum of bank b's taps), rounded to float
#endif

}  // extern "C"

namespace {

using namespace conv;

constexpr int kNT = BLOCK_X * BLOCK_Y;
constexpr int kTileW = BLOCK_X * OUT_X;    // output samples per block row
constexpr int kTileH = BLOCK_Y * OUT_Y;    // output rows per block
constexpr int kHaloB = RADIUS * CHANNELS;  // window samples needed on each side of a run
// Window reads use the widest vector (kVW bytes, kVE samples) that divides a run, so they stay
// aligned. A thread's window starts kHaloB samples before its first output sample; it is read
// from kLead samples earlier, so window sample i is sample kLead + i of what was read. Two
// layouts, whichever loads fewer words: the whole window in vectors from the vector boundary
// before it; or split, the run in vectors and each halo in kHaloW single words (a narrow halo
// beside a 16-byte run would otherwise cost two mostly unused vectors: K=3 reads 24 bytes a
// row instead of 48).
constexpr int kRunBytes = OUT_X * kES;
constexpr int kVW = (kRunBytes % 16 == 0) ? 16 : (kRunBytes % 8 == 0) ? 8 : 4;
constexpr int kVE = kVW / kES;
constexpr int kWin = OUT_X + 2 * kHaloB;   // window samples actually used
constexpr int kVecLead = (kVE - kHaloB % kVE) % kVE;
constexpr int kNVec = (kVecLead + kWin + kVE - 1) / kVE;
constexpr int kHaloW = (kHaloB + kEPW - 1) / kEPW;
constexpr int kSplitWords = 2 * kHaloW + kRunBytes / 4;
constexpr int kVecWords = kNVec * (kVW / 4);
constexpr bool kSplit = kSplitWords < kVecWords;
constexpr int kLead = kSplit ? kHaloW * kEPW - kHaloB : kVecLead;
constexpr int kSpan = kLead + kWin;
constexpr int kNWords = kSplit ? kSplitWords : kVecWords;
constexpr int kInRows = OUT_Y + 2 * RADIUS;  // input rows a thread walks
// Column map of edge blocks: source column of every window byte of every lane in the block.
constexpr int kMapW = (BLOCK_X - 1) * OUT_X + kSpan;
// Unrolled form: input rows per rolled chunk, a multiple of K, at least 4 rows for ILP.
[[maybe_unused]] constexpr int kChunkRows = kK * ((kK >= 4) ? 1 : (4 + kK - 1) / kK);
// Looped form: zero-padded tap rows so row q = (input row) - (output row) + OUT_Y - 1 is valid
// for every pair; tap columns padded to a multiple of 4 for 16-byte broadcast reads.
[[maybe_unused]] constexpr int kTapRows = kK + 2 * (OUT_Y - 1);
[[maybe_unused]] constexpr int kKP = (kK + 3) & ~3;

static_assert(kMapW * 4 + (CONV_LOOPED ? BANKS * kTapRows * kKP * 4 : 0) <= 48 * 1024,
              "static shared memory over 48 KB: use a smaller tile for this radius");

// Stores OUT_X output samples (packed in w) of one row: vector stores when the run lies inside
// the row, sample stores up to W*C otherwise (last block column only).
__device__ __forceinline__ void store_run(elem_t* __restrict__ d, const unsigned int* w,
                                          bool full, int valid) {
  if (full) {
    if (kVW == 16) {
#pragma unroll
      for (int q = 0; q < kRunBytes / 16; ++q)
        reinterpret_cast<uint4*>(d)[q] = make_uint4(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]);
    } else if (kVW == 8) {
#pragma unroll
      for (int q = 0; q < kRunBytes / 8; ++q)
        reinterpret_cast<uint2*>(d)[q] = make_uint2(w[2 * q], w[2 * q + 1]);
    } else {
#pragma unroll
      for (int q = 0; q < kRunBytes / 4; ++q) reinterpret_cast<unsigned int*>(d)[q] = w[q];
    }
  } else {
#pragma unroll
    for (int e = 0; e < OUT_X; ++e)
      if (e < valid) d[e] = (elem_t)(w[e / kEPW] >> (8 * kES * (e % kEPW)));
  }
}

// Rounds, saturates and packs one finished output row (bank accumulators a0 and a1; a1 is read
// only for a magnitude bank) and stores its OUT_X samples.
__device__ __forceinline__ void store_row(const float (&a0)[OUT_X], const float (&a1)[OUT_X],
                                          elem_t* __restrict__ d, bool full, int valid) {
  unsigned int pw[OUT_X / kEPW];
#pragma unroll
  for (int q = 0; q < OUT_X / kEPW; ++q) {
    unsigned int v[kEPW];
#pragma unroll
    for (int e = 0; e < kEPW; ++e) v[e] = to_elem(finish(a0[kEPW * q + e], a1[kEPW * q + e]));
    pw[q] = pack_word(v);
  }
  store_run(d, pw, full, valid);
}

// n vectors of kVW bytes from p (aligned) into w; zeros when !ok.
__device__ __forceinline__ void load_vectors(unsigned int* w, const void* p, int n, bool ok) {
#pragma unroll
  for (int v = 0; v < n; ++v) {
    if (kVW == 16) {
      const uint4 t = ok ? __ldg(reinterpret_cast<const uint4*>(p) + v) : make_uint4(0u, 0u, 0u, 0u);
      w[4 * v] = t.x; w[4 * v + 1] = t.y; w[4 * v + 2] = t.z; w[4 * v + 3] = t.w;
    } else if (kVW == 8) {
      const uint2 t = ok ? __ldg(reinterpret_cast<const uint2*>(p) + v) : make_uint2(0u, 0u);
      w[2 * v] = t.x; w[2 * v + 1] = t.y;
    } else {
      w[v] = ok ? __ldg(reinterpret_cast<const unsigned int*>(p) + v) : 0u;
    }
  }
}

// Window of one input row by aligned loads (p: first sample read); zeros when !ok.
__device__ __forceinline__ void load_window(unsigned int* w, const elem_t* __restrict__ p,
                                            bool ok) {
  if (kSplit) {
    const unsigned int* halo = reinterpret_cast<const unsigned int*>(p);
#pragma unroll
    for (int q = 0; q < kHaloW; ++q) {
      w[q] = ok ? __ldg(halo + q) : 0u;
      w[kNWords - kHaloW + q] = ok ? __ldg(halo + kHaloW + kRunBytes / 4 + q) : 0u;
    }
    load_vectors(w + kHaloW, halo + kHaloW, kRunBytes / kVW, ok);
  } else {
    load_vectors(w, p, kNVec, ok);
  }
}

// Window of one input row for a lane at the frame's left/right edge: sample by sample through
// the block's column map (cmap: this lane's entries; srow: the mapped source row).
__device__ __forceinline__ void gather_window(unsigned int* w, const elem_t* __restrict__ srow,
                                              const int* cmap) {
#pragma unroll
  for (int q = 0; q < kNWords; ++q) {
    unsigned int b[kEPW];
#pragma unroll
    for (int e = 0; e < kEPW; ++e) {
      const int i = kEPW * q + e;
      b[e] = 0u;
      if (i >= kLead && i < kSpan) {
        const int c = cmap[i];
#if BORDER == 0
        b[e] = c < 0 ? 0u : (unsigned int)srow[c];
#else
        b[e] = srow[c];
#endif
      }
    }
    w[q] = pack_word(b);
  }
}

// Window sample `sel` of word w as the float the sums take: the sample itself, or 2^15 + sample
// under OFFSET_CVT.
__device__ __forceinline__ float window_value(unsigned int w, int sel) {
#if OFFSET_CVT
  return byte_plus_2p15(w, sel);
#else
  return elem_to_float(w, sel);
#endif
}

#if !CONV_LOOPED
// Bank b's first term t * x of a sum, with the conversion offset taken off under OFFSET_CVT.
__device__ __forceinline__ float first_term(float t, float x, int b) {
#if OFFSET_CVT
  return fmaf(t, x, -c_offset[b]);
#else
  (void)b;
  return t * x;
#endif
}

#else
// Bank b's sum before any term: 0, or minus the conversion offset under OFFSET_CVT.
__device__ __forceinline__ float empty_sum(int b) {
#if OFFSET_CVT
  return -c_offset[b];
#else
  (void)b;
  return 0.0f;
#endif
}
#endif

}  // namespace

#if ELEM_BYTES == 1
#define CONV2D_ENTRY conv2d_u8
#else
#define CONV2D_ENTRY conv2d_u16
#endif

extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
CONV2D_ENTRY(const elem_t* __restrict__ src, elem_t* __restrict__ dst, int width, int height,
             int src_pitch_bytes, int dst_pitch_bytes) {
  const int src_pitch = src_pitch_bytes / kES;  // in samples: pitches are multiples of 16 bytes
  const int dst_pitch = dst_pitch_bytes / kES;
  const int row_bytes = width * CHANNELS;
  const int x0 = blockIdx.x * kTileW;  // first output byte of the block
  const int tid = threadIdx.y * BLOCK_X + threadIdx.x;

  // Shared set-up comes before any thread leaves, since it ends in a barrier.
  // Blocks whose windows reach past either side of the row map those columns once.
  __shared__ int s_cmap[kMapW];
  const bool edge_block = x0 - kHaloB < 0 || x0 + kTileW + kHaloB > row_bytes;
  if (edge_block) {
    for (int j = tid; j < kMapW; j += kNT) s_cmap[j] = map_column(x0 - kHaloB - kLead + j, row_bytes, width);
  }
#if CONV_LOOPED
  // Zero-padded tap copy: row q holds tap row q - (OUT_Y - 1), zero outside 0..K-1.
  __shared__ __align__(16) float s_taps[BANKS * kTapRows * kKP];
  for (int i = tid; i < BANKS * kTapRows * kKP; i += kNT) {
    const int b = i / (kTapRows * kKP);
    const int q = (i / kKP) % kTapRows;
    const int n = i % kKP;
    const int m = q - (OUT_Y - 1);
    s_taps[i] = (m >= 0 && m < kK && n < kK) ? c_taps[b * kKK + m * kK + n] : 0.0f;
  }
  __syncthreads();
#else
  if (edge_block) __syncthreads();  // block-uniform condition
#endif

  // Index and bounds guard: runs wholly outside the frame have nothing to store.
  const int ox = x0 + threadIdx.x * OUT_X;                // first output byte of this thread
  const int oy = blockIdx.y * kTileH + threadIdx.y * OUT_Y;  // first output row of this thread
  if (ox >= row_bytes || oy >= height) return;

  const int ws = ox - kHaloB;  // frame column of window byte 0
  const bool edge = ws < 0 || ws + kWin > row_bytes;
  const int col = edge ? 0 : ws - kLead;  // first sample read (aligned) when !edge
  const int* cmap = s_cmap + threadIdx.x * OUT_X;
  const bool x_full = ox + OUT_X <= row_bytes;
  const int x_valid = row_bytes - ox;
  elem_t* d_run = dst + (size_t)oy * dst_pitch + ox;
  const int y_top = oy - RADIUS;  // frame row of input row 0

#if !CONV_LOOPED
  // Accumulator ring: output row o lives in slot o % K from its first input row (o) to its last
  // (o + 2R). The chunk loop stays rolled (bounded code); inside a chunk (a multiple of K rows)
  // every slot index is a compile-time constant.
  float acc[BANKS][kK][OUT_X];
#pragma unroll 1
  for (int rc = 0; rc < kInRows; rc += kChunkRows) {
    // All loads of the chunk first, so they are in flight together. Rows past the last input
    // row (last chunk only) re-read a valid row; they feed only output rows >= OUT_Y.
    unsigned int w[kChunkRows][kNWords];
    int sy[kChunkRows];
#pragma unroll
    for (int u = 0; u < kChunkRows; ++u) {
      const int r = (kInRows % kChunkRows == 0) ? rc + u : min(rc + u, kInRows - 1);
      sy[u] = map_index(y_top + r, height);
      load_window(w[u], src + (size_t)max(sy[u], 0) * src_pitch + col, !edge && sy[u] >= 0);
    }
    if (edge) {
#pragma unroll
      for (int u = 0; u < kChunkRows; ++u)
        if (sy[u] >= 0) gather_window(w[u], src + (size_t)sy[u] * src_pitch, cmap);
    }
#pragma unroll
    for (int u = 0; u < kChunkRows; ++u) {
      float f[kSpan];
#pragma unroll
      for (int i = 0; i < kSpan; ++i) f[i] = window_value(w[u][i / kEPW], i % kEPW);
#pragma unroll
      for (int m = 0; m < kK; ++m) {
        const int slot = (u - m + kChunkRows) % kK;  // output row (rc + u) - m
#pragma unroll
        for (int b = 0; b < BANKS; ++b)
#pragma unroll
          for (int n = 0; n < kK; ++n) {
            const float t = c_taps[b * kKK + m * kK + n];
#pragma unroll
            for (int j = 0; j < OUT_X; ++j) {
              const float x = f[kLead + j + n * CHANNELS];
              acc[b][slot][j] = (m == 0 && n == 0) ? first_term(t, x, b) : fmaf(t, x, acc[b][slot][j]);
            }
          }
      }
      // Output row (rc + u) - 2R has seen its last input row: round, pack, store.
      const int o = rc + u - 2 * RADIUS;
      const int slot = (u + 1) % kK;
      if (o >= 0 && o < OUT_Y && oy + o < height)
        store_row(acc[0][slot], acc[BANKS - 1][slot], d_run + (size_t)o * dst_pitch, x_full, x_valid);
    }
  }
#else
  float acc[BANKS][OUT_Y][OUT_X];
#pragma unroll
  for (int b = 0; b < BANKS; ++b)
#pragma unroll
    for (int o = 0; o < OUT_Y; ++o)
#pragma unroll
      for (int j = 0; j < OUT_X; ++j) acc[b][o][j] = empty_sum(b);

#pragma unroll 1
  for (int r = 0; r < kInRows; ++r) {
    unsigned int w[kNWords];
    const int sy = map_index(y_top + r, height);
    load_window(w, src + (size_t)max(sy, 0) * src_pitch + col, !edge && sy >= 0);
    if (edge && sy >= 0) gather_window(w, src + (size_t)sy * src_pitch, cmap);
    // Tap row for output row o is r - o; padded row index r - o + OUT_Y - 1.
    const float* t_row = s_taps + (r + OUT_Y - 1) * kKP;
#pragma unroll
    for (int g = 0; g < kKP / 4; ++g) {
#pragma unroll
      for (int o = 0; o < OUT_Y; ++o) {
#pragma unroll
        for (int b = 0; b < BANKS; ++b) {
          const float4 t4 = *reinterpret_cast<const float4*>(t_row + b * kTapRows * kKP - o * kKP + 4 * g);
          const float t[4] = {t4.x, t4.y, t4.z, t4.w};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int n = 4 * g + e;
            if (n >= kK) continue;
#pragma unroll
            for (int j = 0; j < OUT_X; ++j) {
              const int i = kLead + j + n * CHANNELS;
              acc[b][o][j] = fmaf(t[e], window_value(w[i / kEPW], i % kEPW), acc[b][o][j]);
            }
          }
        }
      }
    }
  }
#pragma unroll
  for (int o = 0; o < OUT_Y; ++o) {
    if (oy + o >= height) break;
    store_row(acc[0][o], acc[BANKS - 1][o], d_run + (size_t)o * dst_pitch, x_full, x_valid);
  }
#endif
}
