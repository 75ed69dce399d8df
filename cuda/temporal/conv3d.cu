// conv3d.cu: a filter across frames with K x K taps per frame (K > 1) in float32, one stage of
// streamconv: taps that factor as time x space, and what conv3d_tc.cu (8-bit frames, K 3..9, int8
// tensor cores) does not take.
//
// What it computes, for every sample (y, x, c) of an H x W x C frame (rows `pitch` bytes apart),
// from the TAPS frames f_k the host passes (the window positions whose taps are not all zero, in
// order; frames beyond the stream already replaced by the first or last):
//   SEPARABLE 0:  acc = sum_k sum_{m,n} T_k[m][n] * f_k(by(y+m-R), bx(x+n-R), c)      c_taps
//   SEPARABLE 1:  mid(y', x') = sum_k w_k * f_k(y', x')   (taps T_k = w_k * S)      c_wt
//                 acc = sum_{m,n} S[m][n] * mid(by(y+m-R), bx(x+n-R), c)            c_space
//   out = sat(rint(acc))
// in float32 (fused multiply-adds), with the border of conv_common.cuh per axis; rint rounds
// half to even, sat clamps to 0..255 (ELEM_BYTES 1, entries conv3d_u8) or 0..65535
// (ELEM_BYTES 2, conv3d_u16). Against streamconv's CPU backend (the sum of each frame's 2-D
// float32 correlation) the order of the additions differs, so the output is within 1 LSB, and
// equal wherever every tap is a multiple of 1/256 and the sums stay below 2^16 (then no sum
// rounds); the host takes the separable form for such taps only where its two factors keep
// every product and sum exact too.
//
// Thread mapping. A block produces an output tile of TILE_X = BLOCK_X * OUT_X samples (a row is
// W*C samples: the neighbour of sample b at tap column n is b + (n-R)*C) by TILE_Y = BLOCK_Y *
// OUT_Y rows, in steps: per frame (SEPARABLE 0) or once (SEPARABLE 1),
//  1. stage: the block converts the frame's samples under the tile and its halo (TILE_Y + 2R
//     rows of TILE_X + 2*kPad samples, kPad = R*C rounded up to 4) to float32 in shared memory
//     (SEPARABLE 1: the weighted sum of every frame), 4 samples a thread at a time (conflict-free
//     float4 stores); rows and columns outside the frame through the border map;
//  2. compute: each thread walks the OUT_Y + 2R staged rows its outputs need; for each it reads
//     its window (OUT_X + 2RC floats, 16-byte shared loads) and adds it into every output row it
//     touches, taps as constant operands; the accumulators stay in registers across frames.
// Each staged float is converted once per block instead of once per thread window, and the FMAs
// take most of the issue slots. Launch: block (BLOCK_X, BLOCK_Y, 1), grid (ceil(W*C / TILE_X),
// ceil(H / TILE_Y), 1). Frames: a struct of 15 pointers (unused ones may be 0) sharing
// src_pitch; base pointers aligned to 16 bytes, pitches multiples of 16.
//
// Macros: RADIUS 1..15, CHANNELS, BORDER, ELEM_BYTES (conv_common.cuh), TAPS 1..15, SEPARABLE
// 0/1, BLOCK_X, BLOCK_Y, OUT_X (multiple of 4), OUT_Y, ROWS_UNROLLED (1: the staged rows of a
// thread unrolled, taps constant-bank operands; 0: rolled, for large radii).

#include "conv_common.cuh"

#ifndef TAPS
#define TAPS 3
#endif
#ifndef SEPARABLE
#define SEPARABLE 0
#endif
#ifndef BLOCK_X
#define BLOCK_X 32
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 4
#endif
#ifndef OUT_X
#define OUT_X 4
#endif
#ifndef OUT_Y
#define OUT_Y 8
#endif
#ifndef ROWS_UNROLLED
#define ROWS_UNROLLED (RADIUS <= 3)
#endif
#if TAPS < 1 || TAPS > 15
#error "TAPS must be 1..15"
#endif
#if RADIUS < 1
#error "conv3d.cu takes K > 1 (temporal.cu runs 1 x 1 taps)"
#endif
#if OUT_X < 4 || OUT_X % 4 != 0
#error "OUT_X must be a positive multiple of 4"
#endif

#include "window.cuh"

extern "C" {
#if SEPARABLE
__constant__ float c_wt[TAPS];
__constant__ float c_space[KSIZE * KSIZE];
#else
__constant__ float c_taps[TAPS * KSIZE * KSIZE];
#endif
}

namespace {

using namespace conv;

constexpr int kThreads = BLOCK_X * BLOCK_Y;
constexpr int kTileX = BLOCK_X * OUT_X;
constexpr int kTileY = BLOCK_Y * OUT_Y;
constexpr int kHaloB = RADIUS * CHANNELS;                // samples a tap row reaches each side
// Staged 4 samples per thread and load: a warp's float4 stores then fill all 32 banks once (a
// 16-byte load of 16 samples would store 4 float4s 64 bytes apart: 4-way bank conflicts).
constexpr int kChunk = 4;
constexpr int kPad = (kHaloB + kChunk - 1) / kChunk * kChunk;  // staged samples each side
// A thread's window starts kPad - kHaloB floats into its staged columns: it skips whole float4s
// of that and reads from the last 16-byte boundary, kLead floats before its first one.
constexpr int kSkip = (kPad - kHaloB) / 4 * 4;
constexpr int kLead = (kPad - kHaloB) % 4;
constexpr int kWinVecs = (kLead + OUT_X + 2 * kHaloB + 3) / 4;  // float4s read per staged row
constexpr int kStagedW = kTileX + 2 * kPad;
constexpr int kPitch = kStagedW + 4;                     // +4: rows of two threads apart differ in bank
constexpr int kRows = kTileY + 2 * RADIUS;
constexpr int kChunks = kStagedW / kChunk;               // loads per staged row
constexpr int kInRows = OUT_Y + 2 * RADIUS;              // staged rows a thread reads

static_assert(kRows * kPitch * 4 <= 48 * 1024, "staged tile over 48 KB: use a smaller tile");

// Staging, item by item: item i of the tile is 4 samples, staged row i / kChunks, samples
// x0 - kPad + 4 * (i % kChunks); thread tid takes items tid, tid + kThreads, ... (kPerThread).
// The loads of kBatch items are issued together, then converted and stored (loading the next
// frame's share during the compute of this one, in registers, was no faster on an H100 and
// took a third more registers); items across the row's edges are gathered sample by sample
// through the border map when stored.
constexpr int kItems = kRows * kChunks;
constexpr int kPerThread = (kItems + kThreads - 1) / kThreads;
#if ELEM_BYTES == 1
typedef unsigned int raw_t;   // 4 uint8 samples
#else
typedef uint2 raw_t;          // 4 uint16 samples
#endif

struct Item {
  int sy;     // frame row, -1 for a zero row
  int b;      // first sample
  int slot;   // float offset in the staged tile
  bool live;  // an item of this tile (the last thread's share may run past it)
  bool inner; // its 4 samples lie inside the row: one aligned load
};

__device__ __forceinline__ Item item(int u, int x0, int y0, int width, int height) {
  // An opaque zero where the rows are unrolled: the compiler would otherwise keep every item's
  // indices live across the frames' compute (they do not change from frame to frame): 155
  // registers instead of 55 at 5x5x5 (the rolled form needs no such help, and spills with it).
  int fresh = 0;
#if ROWS_UNROLLED
  asm volatile("mov.u32 %0, 0;" : "=r"(fresh));
#endif
  const int i = threadIdx.y * BLOCK_X + threadIdx.x + u * kThreads + fresh;
  const int r = i / kChunks;
  const int q = i - r * kChunks;
  Item it;
  it.live = i < kItems;
  it.sy = it.live ? map_index(y0 - RADIUS + r, height) : -1;
  it.b = x0 - kPad + kChunk * q;
  it.slot = r * kPitch + kChunk * q;
  it.inner = it.b >= 0 && it.b + kChunk <= width * CHANNELS;
  return it;
}

__device__ __forceinline__ raw_t fetch(const Item& it, const unsigned char* frame, int src_pitch) {
  if (it.sy < 0 || !it.inner) {
    raw_t zero;
#if ELEM_BYTES == 1
    zero = 0u;
#else
    zero = make_uint2(0u, 0u);
#endif
    return zero;
  }
  return __ldg(reinterpret_cast<const raw_t*>(frame + (size_t)it.sy * src_pitch) + it.b / kChunk);
}

// The item's 4 samples as floats: from its fetched word, or gathered (across an edge), or zeros.
__device__ __forceinline__ void widen(float* v, const Item& it, raw_t w, const unsigned char* frame,
                                      int src_pitch, int width) {
  if (it.sy >= 0 && !it.inner) {
    const elem_t* srow = reinterpret_cast<const elem_t*>(frame + (size_t)it.sy * src_pitch);
#pragma unroll
    for (int e = 0; e < kChunk; ++e) {
      const int c = map_column(it.b + e, width * CHANNELS, width);
      v[e] = c < 0 ? 0.0f : (float)srow[c];
    }
    return;
  }
#if ELEM_BYTES == 1
  v[0] = byte_to_float(w, 0); v[1] = byte_to_float(w, 1);
  v[2] = byte_to_float(w, 2); v[3] = byte_to_float(w, 3);
#else
  v[0] = elem_to_float(w.x, 0); v[1] = elem_to_float(w.x, 1);
  v[2] = elem_to_float(w.y, 0); v[3] = elem_to_float(w.y, 1);
#endif
}

__device__ __forceinline__ void put(float* __restrict__ s, const Item& it, const float* v) {
  if (it.live) *reinterpret_cast<float4*>(s + it.slot) = make_float4(v[0], v[1], v[2], v[3]);
}

// Items u0 .. u0 + N - 1 of this thread: loads of frame `frame`, into raw.
template <int N>
__device__ __forceinline__ void fetch_items(raw_t (&raw)[N], int u0, const unsigned char* frame, int x0,
                                            int y0, int width, int height, int src_pitch) {
#pragma unroll
  for (int u = 0; u < N; ++u) {
    if (u0 + u < kPerThread) raw[u] = fetch(item(u0 + u, x0, y0, width, height), frame, src_pitch);
  }
}

// Items u0 .. u0 + N - 1 of this thread: converted from raw (or gathered) and stored.
template <int N>
__device__ __forceinline__ void put_items(float* __restrict__ s, const raw_t (&raw)[N], int u0,
                                          const unsigned char* frame, int x0, int y0, int width,
                                          int height, int src_pitch) {
#pragma unroll
  for (int u = 0; u < N; ++u) {
    if (u0 + u >= kPerThread) break;
    const Item it = item(u0 + u, x0, y0, width, height);
    float v[kChunk];
    widen(v, it, raw[u], frame, src_pitch, width);
    put(s, it, v);
  }
}

#if SEPARABLE
// The tile's weighted sum of every frame, a few items at a time with every frame's loads issued
// together.
constexpr int kSepBatch = TAPS >= 8 ? 1 : 8 / TAPS;

__device__ __forceinline__ void stage_sum(float* __restrict__ s, const Frames& src, int x0, int y0,
                                          int width, int height, int src_pitch) {
#pragma unroll 1
  for (int u0 = 0; u0 < kPerThread; u0 += kSepBatch) {
    raw_t raw[TAPS][kSepBatch];
#pragma unroll
    for (int k = 0; k < TAPS; ++k) fetch_items(raw[k], u0, src.frame[k], x0, y0, width, height, src_pitch);
#pragma unroll
    for (int u = 0; u < kSepBatch; ++u) {
      if (u0 + u >= kPerThread) break;
      const Item it = item(u0 + u, x0, y0, width, height);
      float v[kChunk];
#pragma unroll
      for (int k = 0; k < TAPS; ++k) {
        float f[kChunk];
        widen(f, it, raw[k][u], src.frame[k], src_pitch, width);
        const float w = c_wt[k];
#pragma unroll
        for (int e = 0; e < kChunk; ++e) v[e] = k == 0 ? w * f[e] : fmaf(w, f[e], v[e]);
      }
      put(s, it, v);
    }
  }
}
#else
constexpr int kBatch = 8;  // items whose loads go out together (a small tile's whole share)

// Frame g's tile, fetched and stored in batches of kBatch items.
__device__ __forceinline__ void stage_frame(float* __restrict__ s, const unsigned char* frame, int x0,
                                            int y0, int width, int height, int src_pitch) {
#pragma unroll 1
  for (int u0 = 0; u0 < kPerThread; u0 += kBatch) {
    raw_t raw[kBatch];
    fetch_items(raw, u0, frame, x0, y0, width, height, src_pitch);
    put_items(s, raw, u0, frame, x0, y0, width, height, src_pitch);
  }
}
#endif

// Tap (m, n) of group g: frame g's taps, or the separable form's spatial matrix.
__device__ __forceinline__ float tap(int g, int m, int n) {
#if SEPARABLE
  (void)g;
  return c_space[m * KSIZE + n];
#else
  return c_taps[(g * KSIZE + m) * KSIZE + n];
#endif
}

// Add staged row r (of this thread's rows) into the output rows it touches.
__device__ __forceinline__ void add_row(float (&acc)[OUT_Y][OUT_X], const float* __restrict__ row,
                                        int r, int g) {
  float f[kWinVecs * 4];
#pragma unroll
  for (int v = 0; v < kWinVecs; ++v) {
    const float4 t = reinterpret_cast<const float4*>(row)[v];
    f[4 * v] = t.x; f[4 * v + 1] = t.y; f[4 * v + 2] = t.z; f[4 * v + 3] = t.w;
  }
#pragma unroll
  for (int o = 0; o < OUT_Y; ++o) {
    const int m = r - o;
    if (m < 0 || m >= KSIZE) continue;
#pragma unroll
    for (int n = 0; n < KSIZE; ++n) {
      const float t = tap(g, m, n);
#pragma unroll
      for (int j = 0; j < OUT_X; ++j) acc[o][j] = fmaf(t, f[kLead + j + n * CHANNELS], acc[o][j]);
    }
  }
}

// Round, saturate and store one output row's OUT_X samples (fewer at the row's end).
__device__ __forceinline__ void store_row(const float (&a)[OUT_X], elem_t* __restrict__ d, int valid) {
  unsigned int r[OUT_X];
#pragma unroll
  for (int j = 0; j < OUT_X; ++j) r[j] = to_elem(a[j]);
  if (valid >= OUT_X) {
#pragma unroll
    for (int q = 0; q < OUT_X / kEPW; ++q) reinterpret_cast<unsigned int*>(d)[q] = pack_word(r + kEPW * q);
  } else {
#pragma unroll
    for (int j = 0; j < OUT_X; ++j)
      if (j < valid) d[j] = (elem_t)r[j];
  }
}

}  // namespace

#if ELEM_BYTES == 1
#define CONV3D_ENTRY conv3d_u8
#else
#define CONV3D_ENTRY conv3d_u16
#endif

extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
CONV3D_ENTRY(Frames src, unsigned char* __restrict__ dst, int width, int height, int src_pitch,
             int dst_pitch) {
  __shared__ __align__(16) float s_tile[kRows * kPitch];
  const int x0 = blockIdx.x * kTileX;
  const int y0 = blockIdx.y * kTileY;
  const int ox = threadIdx.x * OUT_X;   // in the tile
  const int oy = threadIdx.y * OUT_Y;
  const float* s_window = s_tile + oy * kPitch + ox + kSkip;  // staged row oy, window start

  float acc[OUT_Y][OUT_X];
#pragma unroll
  for (int o = 0; o < OUT_Y; ++o)
#pragma unroll
    for (int j = 0; j < OUT_X; ++j) acc[o][j] = 0.0f;

#if SEPARABLE
  stage_sum(s_tile, src, x0, y0, width, height, src_pitch);
  __syncthreads();
#if ROWS_UNROLLED
#pragma unroll
#else
#pragma unroll 1
#endif
  for (int r = 0; r < kInRows; ++r) add_row(acc, s_window + r * kPitch, r, 0);
#else
#pragma unroll 1
  for (int g = 0; g < TAPS; ++g) {
    if (g > 0) __syncthreads();  // every thread done with the last frame's tile
    stage_frame(s_tile, frame_of(src, g), x0, y0, width, height, src_pitch);
    __syncthreads();
#if ROWS_UNROLLED
#pragma unroll
#else
#pragma unroll 1
#endif
    for (int r = 0; r < kInRows; ++r) add_row(acc, s_window + r * kPitch, r, g);
  }
#endif

  const int row_samples = width * CHANNELS;
  const int valid = row_samples - (x0 + ox);
  if (valid <= 0) return;
  elem_t* d = reinterpret_cast<elem_t*>(dst + (size_t)(y0 + oy) * dst_pitch) + x0 + ox;
#pragma unroll
  for (int o = 0; o < OUT_Y; ++o) {
    if (y0 + oy + o >= height) break;
    store_row(acc[o], reinterpret_cast<elem_t*>(reinterpret_cast<unsigned char*>(d) + (size_t)o * dst_pitch), valid);
  }
}
