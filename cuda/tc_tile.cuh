// tc_tile.cuh: the staged tile and the A pieces that conv2d_tc.cu and conv3d_tc.cu share (one
// frame's K x K band product on the tensor cores; conv2d_tc.cu says how it works). Include after
// conv_common.cuh and tc_common.cuh; the including file has set RADIUS, CHANNELS and, or left to
// the defaults here, DIGITS, TILE_W, TILE_H, WARPS, GROUP, TIES_EVEN and LDMATRIX.
#pragma once

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
#if DIGITS < 1 || DIGITS > 3
#error "DIGITS must be 1..3"
#endif
#if TILE_W % 16 != 0 || TILE_W % (8 * GROUP) != 0 || TILE_H % 16 != 0 || TILE_H < 16
#error "TILE_W must be a multiple of 16 and of 8*GROUP, TILE_H a multiple of 16"
#endif
#if LDMATRIX && GROUP % 2 != 0
#error "LDMATRIX needs units of a multiple of 16 bytes (GROUP even)"
#endif

namespace {

using namespace conv;

constexpr int kReach = CHANNELS * RADIUS;              // bytes a tap row reaches each side
constexpr int kFirstWord = -((kReach + 3) / 4);       // relative to a unit's first output byte
constexpr int kLastWord = (8 * GROUP - 1 + kReach) / 4;
// Words per tap row; with LDMATRIX a whole number of 16-byte groups, so that a group of 4 pieces
// is 16 contiguous bytes of one row, which one ldmatrix row address fetches.
constexpr int kWords = LDMATRIX ? (kLastWord - kFirstWord + 4) / 4 * 4 : kLastWord - kFirstWord + 1;
// Bytes the staged rows are shifted right by, so that each group starts on a 16-byte boundary.
constexpr int kPad = LDMATRIX ? (-4 * kFirstWord) % 16 : 0;
constexpr int kPieces = KSIZE * kWords;
constexpr int kSteps = (kPieces + 7) / 8;             // mma k-steps per unit
__host__ __device__ constexpr int cmax(int a, int b) { return a > b ? a : b; }
constexpr int kHalo = (cmax(-4 * kFirstWord, 4 * (kFirstWord + kWords) - 8 * GROUP) + 15) / 16 * 16;
constexpr int kStagedW = TILE_W + 2 * kHalo;                // staged bytes per row
constexpr int kInW = kStagedW + (kPad ? 16 : 0);
// Row pitches of 16 mod 32 bytes: the 8 rows x 4 words a warp's LDS.32 reads (or its STS.16
// writes) then fall in distinct banks.
constexpr int kInPitch = kInW % 32 == 16 ? kInW : kInW + 16;
constexpr int kInRows = TILE_H + 2 * RADIUS;
constexpr int kOutPitch = TILE_W % 32 == 16 ? TILE_W : TILE_W + 16;
constexpr int kUnitsX = TILE_W / (8 * GROUP);
constexpr int kUnits = kUnitsX * (TILE_H / 16);
constexpr int kThreads = WARPS * 32;
constexpr int kStageVecs = kStagedW / 16;
constexpr int kStageItems = kInRows * kStageVecs;
constexpr int kStageIters = (kStageItems + kThreads - 1) / kThreads;
constexpr int kOutVecs = TILE_W / 16;
static_assert(kUnits % WARPS == 0, "each warp takes the same number of units");

// Whether k-step s holds any input byte that n-tile j's outputs use (else its mma is skipped).
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

// 16 bytes into shared memory at an address aligned to kPad's largest power-of-two divisor.
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

// This thread's share of a frame's tile (rows y0-R .. y0+TILE_H+R-1, TILE_W bytes plus kHalo each
// side): the 16-byte loads of the vectors wholly inside the frame, all issued before any store,
// so that a thread keeps kStageIters loads in flight (the rest come through the border map in
// put_tile).
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

// The fetched share into the staged tile s_in, vectors across the frame's edges through the
// border map.
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

#if LDMATRIX
// Byte offset, from its unit's first row and output byte, of the group row whose address this
// lane gives ldmatrix in each step: matrix m = lane / 8 is rows 8 * (m & 1) + (lane & 7) of the
// step's group m >> 1 (padding groups read group 0, whose B bytes there are zero).
typedef int PieceOffsets[kSteps];
__device__ __forceinline__ void piece_offsets(PieceOffsets& off, int lane, int /*t*/) {
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int m = lane >> 3;
    const int p = 4 * (2 * s + (m >> 1));
    const int dy = p < kPieces ? p / kWords : 0;
    const int word = kFirstWord + (p < kPieces ? p % kWords : 0);
    off[s] = (dy + 8 * (m & 1) + (lane & 7)) * kInPitch + kHalo + kPad + 4 * word;
  }
}
#else
// Byte offset of each of this lane's pieces (t = lane % 4) from its unit's row g, first output
// byte.
typedef int PieceOffsets[kSteps][2];
__device__ __forceinline__ void piece_offsets(PieceOffsets& off, int /*lane*/, int t) {
#pragma unroll
  for (int s = 0; s < kSteps; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int p = 8 * s + 4 * h + t;
      const int dy = p < kPieces ? p / kWords : 0;
      const int word = kFirstWord + (p < kPieces ? p % kWords : 0);
      off[s][h] = dy * kInPitch + kHalo + 4 * word;
    }
}
#endif

// Step s's A registers of the unit whose staged rows start at base (unit_base's).
__device__ __forceinline__ void load_pieces(unsigned int (&a)[4], const unsigned char* base,
                                            const PieceOffsets& off, int s) {
#if LDMATRIX
  ldmatrix_x4(a, base + off[s]);
#else
  a[0] = *reinterpret_cast<const unsigned int*>(base + off[s][0]);
  a[1] = *reinterpret_cast<const unsigned int*>(base + off[s][0] + 8 * kInPitch);
  a[2] = *reinterpret_cast<const unsigned int*>(base + off[s][1]);
  a[3] = *reinterpret_cast<const unsigned int*>(base + off[s][1] + 8 * kInPitch);
#endif
}

}  // namespace
