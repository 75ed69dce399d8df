// conv3d_tc.cu: a filter across frames with K x K taps per frame (K 3..9) on the tensor cores,
// for interleaved uint8 frames.
//
// What it computes (conv3d.cu's semantics, see there), with every tap t of the T x K x K window
// held as the integer n = round(t x 2^c_shift) in DIGITS signed base-256 digits, one shift for
// all frames (backends/families/temporal_tc.py):
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
#ifndef DIGITS
#define DIGITS 2
#endif
#ifndef TILE_W
#define TILE_W 128
#endif
#ifndef TILE_H
#define TILE_H 32
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef GROUP
#define GROUP 1
#endif
#ifndef TIES_EVEN
#define TIES_EVEN 1
#endif
#ifndef LDMATRIX
#define LDMATRIX 0
#endif
#if TAPS < 1 || TAPS > 15
#error "TAPS must be 1..15"
#endif
#if RADIUS < 1 || RADIUS > 4
#error "conv3d_tc.cu takes K from 3 to 9"
#endif
#if DIGITS < 1 || DIGITS > 3
#error "DIGITS must be 1..3"
#endif
#if TILE_W % 16 != 0 || TILE_W % (8 * GROUP) != 0 || TILE_H % 16 != 0 || TILE_H < 16
#error "TILE_W must be a multiple of 16 and of 8*GROUP, TILE_H a multiple of 16"
#endif
#if LDMATRIX && GROUP % 2 != 0
#error "LDMATRIX needs units of a multiple of 16 bytes (GROUP even)"
#endif

struct Frames {
  const unsigned char* frame[15];
};

namespace {

using namespace conv;

// The piece layout of conv2d_tc.cu (integer_taps.piece_layout mirrors it).
constexpr int kReach = CHANNELS * RADIUS;
constexpr int kFirstWord = -((kReach + 3) / 4);
constexpr int kLastWord = (8 * GROUP - 1 + kReach) / 4;
constexpr int kWords = LDMATRIX ? (kLastWord - kFirstWord + 4) / 4 * 4 : kLastWord - kFirstWord + 1;
constexpr int kPad = LDMATRIX ? (-4 * kFirstWord) % 16 : 0;
constexpr int kPieces = KSIZE * kWords;
constexpr int kSteps = (kPieces + 7) / 8;
__host__ __device__ constexpr int cmax(int a, int b) { return a > b ? a : b; }
constexpr int kHalo = (cmax(-4 * kFirstWord, 4 * (kFirstWord + kWords) - 8 * GROUP) + 15) / 16 * 16;
constexpr int kStagedW = TILE_W + 2 * kHalo;
constexpr int kInW = kStagedW + (kPad ? 16 : 0);
constexpr int kInPitch = kInW % 32 == 16 ? kInW : kInW + 16;
constexpr int kInRows = TILE_H + 2 * RADIUS;
constexpr int kInBytes = kInRows * kInPitch;
constexpr int kOutPitch = TILE_W % 32 == 16 ? TILE_W : TILE_W + 16;
constexpr int kUnitsX = TILE_W / (8 * GROUP);
constexpr int kUnits = kUnitsX * (TILE_H / 16);
constexpr int kUnitsPerWarp = kUnits / WARPS;
constexpr int kThreads = WARPS * 32;
constexpr int kStageVecs = kStagedW / 16;
constexpr int kStageItems = kInRows * kStageVecs;
constexpr int kStageIters = (kStageItems + kThreads - 1) / kThreads;
constexpr int kOutVecs = TILE_W / 16;
static_assert(kUnits % WARPS == 0, "each warp takes the same number of units");
static_assert(2 * kInBytes + TILE_H * kOutPitch <= 48 * 1024, "shared tiles over 48 KB");

__host__ __device__ constexpr bool step_reaches(int s, int j) {
  for (int p = 8 * s; p < 8 * s + 8 && p < kPieces; ++p) {
    const int word = kFirstWord + p % kWords;
    for (int i = 0; i < 4; ++i)
      for (int n = 0; n < 8; ++n) {
        const int delta = 4 * word + i - (8 * j + n);
        if (delta % CHANNELS == 0 && delta >= -kReach && delta <= kReach) return true;
      }
  }
  return false;
}

constexpr int kBRegs = DIGITS * GROUP * kSteps * 2;  // B registers per lane and frame
__host__ __device__ constexpr int b_reg(int d, int j, int s, int h) {
  return ((d * GROUP + j) * kSteps + s) * 2 + h;
}

}  // namespace

extern "C" {
// B registers of each frame: [TAPS][DIGITS][GROUP][kSteps][2][32 lanes] (temporal_tc.py).
__device__ unsigned int g_bfrag[TAPS * kBRegs * 32];
// {shift, bias}: the sums start at bias and are rounded by a shift (round_sum).
__constant__ int c_round[2];
}

namespace {

// Frame k of the window (selected, so that the struct stays a kernel parameter).
__device__ __forceinline__ const unsigned char* frame_of(const Frames& src, int k) {
  const unsigned char* p = src.frame[0];
#pragma unroll
  for (int i = 1; i < TAPS; ++i)
    if (k == i) p = src.frame[i];
  return p;
}

__device__ __forceinline__ void store_shifted(unsigned char* p, uint4 v) {
  if constexpr (kPad % 16 == 0) {
    *reinterpret_cast<uint4*>(p) = v;
  } else if constexpr (kPad % 8 == 0) {
    reinterpret_cast<uint2*>(p)[0] = make_uint2(v.x, v.y);
    reinterpret_cast<uint2*>(p)[1] = make_uint2(v.z, v.w);
  } else {
    unsigned int* w = reinterpret_cast<unsigned int*>(p);
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
  }
}

// This thread's share of a frame's tile: the loads (vectors wholly inside the frame; the rest
// are fetched through the border map when stored).
__device__ __forceinline__ void fetch_tile(uint4 (&staged)[kStageIters], bool (&inside)[kStageIters],
                                           const unsigned char* src, int src_pitch, int x0, int y0,
                                           int row_bytes, int height) {
#pragma unroll
  for (int k = 0; k < kStageIters; ++k) {
    const int i = threadIdx.x + k * kThreads;
    const int r = i / kStageVecs;
    const int y = y0 - RADIUS + r;
    const int gx = x0 - kHalo + 16 * (i - r * kStageVecs);
    inside[k] = i < kStageItems && (unsigned)y < (unsigned)height && gx >= 0 && gx + 16 <= row_bytes;
    staged[k] = inside[k] ? __ldg(reinterpret_cast<const uint4*>(src + (size_t)y * src_pitch + gx))
                          : make_uint4(0u, 0u, 0u, 0u);
  }
}

__device__ __forceinline__ void put_tile(unsigned char* s_in, uint4 (&staged)[kStageIters],
                                         const bool (&inside)[kStageIters], const unsigned char* src,
                                         int src_pitch, int x0, int y0, int width, int height) {
#pragma unroll
  for (int k = 0; k < kStageIters; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i >= kStageItems) break;
    const int r = i / kStageVecs;
    const int v = i - r * kStageVecs;
    if (!inside[k]) staged[k] = load_edge_vector(src, src_pitch, y0 - RADIUS + r, x0 - kHalo + 16 * v,
                                                 width, height);
    store_shifted(s_in + r * kInPitch + 16 * v + kPad, staged[k]);
  }
}

}  // namespace

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

  // Byte offsets of this lane's pieces from its unit's first row and output byte (conv2d_tc.cu).
#if LDMATRIX
  int off[kSteps];
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int m = lane >> 3;
    const int p = 4 * (2 * s + (m >> 1));
    const int dy = p < kPieces ? p / kWords : 0;
    const int word = kFirstWord + (p < kPieces ? p % kWords : 0);
    off[s] = (dy + 8 * (m & 1) + (lane & 7)) * kInPitch + kHalo + kPad + 4 * word;
  }
#else
  int off[kSteps][2];
#pragma unroll
  for (int s = 0; s < kSteps; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int p = 8 * s + 4 * h + t;
      const int dy = p < kPieces ? p / kWords : 0;
      const int word = kFirstWord + (p < kPieces ? p % kWords : 0);
      off[s][h] = dy * kInPitch + kHalo + 4 * word;
    }
#endif
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
#if LDMATRIX
        ldmatrix_x4(a, base + off[s]);
#else
        a[0] = *reinterpret_cast<const unsigned int*>(base + off[s][0]);
        a[1] = *reinterpret_cast<const unsigned int*>(base + off[s][0] + 8 * kInPitch);
        a[2] = *reinterpret_cast<const unsigned int*>(base + off[s][1]);
        a[3] = *reinterpret_cast<const unsigned int*>(base + off[s][1] + 8 * kInPitch);
#endif
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
