// conv2d_tc.cu: K x K correlation of interleaved uint8 frames on the tensor cores, with integer taps.
//
// What it computes (the semantics of conv2d.cu, see there), with each tap t held as the integer
// n = round(t x 2^c_shift) in DIGITS signed base-256 digits (backends/families/integer_taps.py):
//   v_b(y,x,c) = sum_{m,n} N_b[m+R][n+R] * in(by(y+m), bx(x+n), c)      exact, int32
//   BANKS == 1: out = sat(v_0 / 2^shift rounded)   exact integer rounding, ties per TIES_EVEN
//   BANKS == 2: out = sat(rint(sqrtf(a0*a0 + a1*a1))), a_b = float(v_b) / 2^shift
// For taps that are multiples of 2^-shift this is the float32 result exactly; otherwise the host
// keeps the taps' rounding within half an output step.
//
// Why the tensor cores. A byte times an int8 digit with int32 sums is what mma.m16n8k32.u8.s8
// does, 4096 of them per instruction, so a K x K window costs a few instructions per 128
// outputs instead of K^2 FP32 FMAs each, and the kernel is left bound by memory.
//
// The matrix product. A row is W*C bytes and the neighbour of byte b at tap column n is byte
// b + (n-R)*C, so for 8 consecutive output bytes of 16 rows, one tap row dy is a product of the
// 16 x L input bytes those outputs reach (L a few 4-byte words) with an L x 8 band matrix that
// holds the taps on every C-th diagonal (zero elsewhere, so channels never mix). The K tap rows'
// words are concatenated along k and dealt into k-steps of 32 bytes (integer_taps.py says how);
// A comes from the staged tile in shared memory, B (the band matrices, one per digit) sits in
// registers for the whole kernel, loaded once from g_bfrag, which the host fills.
//
// Per block, an output tile of TILE_W bytes by TILE_H rows, in three phases:
//  1. Stage the input rows y0-R .. y0+TILE_H+R-1, TILE_W bytes plus kHalo each side, into
//     shared memory (16-byte loads; rows and edge columns through the border map).
//  2. Each warp takes units of 16 rows x 8*GROUP bytes: per k-step it loads its A registers
//     (four LDS.32, or with LDMATRIX one ldmatrix.x4) and runs one mma per digit, bank and n-tile
//     that the step reaches; then it rounds the sums and writes the bytes into an output tile
//     in shared memory.
//  3. Store the output tile with 16-byte stores (bytes past W*C or rows past H are not written).
// Launch: block (WARPS*32, 1, 1), grid (ceil(W*C / TILE_W), ceil(H / TILE_H), 1). Buffers: base
// pointers aligned to 16 bytes, pitches multiples of 16. Needs sm_80 or later.
//
// Macros: RADIUS, CHANNELS, BORDER, BANKS, COMBINE (conv_common.cuh; ELEM_BYTES must be 1),
// DIGITS 1..3, TIES_EVEN (1: ties to even, for exact taps; 0: ties up), TILE_W (multiple of 16
// and of 8*GROUP), TILE_H (multiple of 16), WARPS, GROUP (n-tiles per unit sharing their A
// pieces), LDMATRIX (1: each tap row padded to whole 16-byte groups of 4 pieces, the staged rows
// shifted by kPad so that every group is 16-byte aligned, and a k-step's A loaded by one
// ldmatrix.x4; needs an even GROUP). The B registers grow with K: the host keeps RADIUS <= 4.

#include "conv_common.cuh"
#include "tc_common.cuh"

#if ELEM_BYTES != 1
#error "conv2d_tc.cu takes uint8 samples only"
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
constexpr int kStageIters = (kInRows * kStageVecs + kThreads - 1) / kThreads;
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

constexpr int kBRegs = BANKS * DIGITS * GROUP * kSteps * 2;  // B registers per lane
// Register of bank b, digit d, n-tile j, k-step s, half h (b0/b1), in g_bfrag's row order.
__host__ __device__ constexpr int b_reg(int b, int d, int j, int s, int h) {
  return (((b * DIGITS + d) * GROUP + j) * kSteps + s) * 2 + h;
}

static_assert(kInRows * kInPitch + TILE_H * kOutPitch <= 48 * 1024, "shared tiles over 48 KB");

}  // namespace

extern "C" {
// B registers: [BANKS][DIGITS][GROUP][kSteps][2][32 lanes] (integer_taps.fragment_table).
__device__ unsigned int g_bfrag[kBRegs * 32];
// {shift, bias}: the sums start at bias (BANKS 1) and are rounded by a shift (round_sum).
__constant__ int c_round[2];
}

namespace {

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


}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
conv2d_tc_u8(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst, int width,
             int height, int src_pitch, int dst_pitch) {
  __shared__ __align__(16) unsigned char s_in[kInRows * kInPitch];
  __shared__ __align__(16) unsigned char s_out[TILE_H * kOutPitch];
  const int row_bytes = width * CHANNELS;
  const int x0 = blockIdx.x * TILE_W;
  const int y0 = blockIdx.y * TILE_H;
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;

  // B registers first: their loads overlap the staging. Register i is g_bfrag row i (b_reg).
  unsigned int bf[kBRegs];
#pragma unroll
  for (int i = 0; i < kBRegs; ++i) bf[i] = g_bfrag[i * 32 + lane];

  // 1. Stage the input tile: every load is issued before any store, so a thread keeps kStageIters
  // loads in flight.
  uint4 staged[kStageIters];
  bool inside[kStageIters];
#pragma unroll
  for (int k = 0; k < kStageIters; ++k) {
    const int i = tid + k * kThreads;
    const int r = i / kStageVecs;
    const int y = y0 - RADIUS + r;
    const int gx = x0 - kHalo + 16 * (i - r * kStageVecs);
    inside[k] = i < kInRows * kStageVecs && (unsigned)y < (unsigned)height && gx >= 0 &&
                gx + 16 <= row_bytes;
    staged[k] = inside[k] ? __ldg(reinterpret_cast<const uint4*>(src + (size_t)y * src_pitch + gx))
                          : make_uint4(0u, 0u, 0u, 0u);
  }
#pragma unroll
  for (int k = 0; k < kStageIters; ++k) {
    const int i = tid + k * kThreads;
    if (i >= kInRows * kStageVecs) break;
    const int r = i / kStageVecs;
    const int v = i - r * kStageVecs;
    if (!inside[k]) staged[k] = load_edge_vector(src, src_pitch, y0 - RADIUS + r, x0 - kHalo + 16 * v,
                                                 width, height);
    store_shifted(s_in + r * kInPitch + 16 * v + kPad, staged[k]);
  }
#if LDMATRIX
  // Byte offset, from its unit's first row and output byte, of the group row whose address this
  // lane gives ldmatrix in each step: matrix m = lane / 8 is rows 8 * (m & 1) + (lane & 7) of the
  // step's group m >> 1 (padding groups read group 0, whose B bytes there are zero).
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
  // Byte offset of each of this lane's pieces from its unit's row g, first output byte.
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
  __syncthreads();

  // 2. Units of 16 rows x 8*GROUP bytes.
#pragma unroll
  for (int k = 0; k < kUnits / WARPS; ++k) {
    const int u = warp + k * WARPS;
    const int uy = u / kUnitsX;
    const int ux = u - uy * kUnitsX;
    const unsigned char* base = s_in + (16 * uy + (LDMATRIX ? 0 : g)) * kInPitch + 8 * GROUP * ux;
    // Sums per bank, digit and n-tile; bank 0's lowest digit starts at the rounding bias.
    int acc[BANKS][DIGITS][GROUP][4] = {};
    if (BANKS == 1) {
#pragma unroll
      for (int j = 0; j < GROUP; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[0][0][j][e] = bias;
    }
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
        for (int b = 0; b < BANKS; ++b)
#pragma unroll
          for (int d = 0; d < DIGITS; ++d)
            mma_u8s8(acc[b][d][j], a, bf[b_reg(b, d, j, s, 0)], bf[b_reg(b, d, j, s, 1)]);
      }
    }
    unsigned char* out = s_out + (16 * uy + g) * kOutPitch + 8 * GROUP * ux + 2 * t;
#pragma unroll
    for (int j = 0; j < GROUP; ++j) {
      int v[BANKS][4];
#pragma unroll
      for (int b = 0; b < BANKS; ++b)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          int sum = acc[b][DIGITS - 1][j][e];
#pragma unroll
          for (int d = DIGITS - 2; d >= 0; --d) sum = sum * 256 + acc[b][d][j][e];
          v[b][e] = sum;
        }
      unsigned int pair[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
#if BANKS == 1
        pair[r] = pack2_sat(round_sum<TIES_EVEN>(v[0][2 * r], shift),
                            round_sum<TIES_EVEN>(v[0][2 * r + 1], shift));
#else
        const float scale = __int_as_float((127 - shift) << 23);  // 2^-shift, exact
        const unsigned int lo = to_u8(finish((float)v[0][2 * r] * scale, (float)v[1][2 * r] * scale));
        const unsigned int hi = to_u8(finish((float)v[0][2 * r + 1] * scale, (float)v[1][2 * r + 1] * scale));
        pair[r] = lo | (hi << 8);
#endif
      }
      *reinterpret_cast<unsigned short*>(out + 8 * j) = (unsigned short)pair[0];
      *reinterpret_cast<unsigned short*>(out + 8 * j + 8 * kOutPitch) = (unsigned short)pair[1];
    }
  }
  __syncthreads();

  // 3. Store the output tile.
  store_tile<TILE_H, kOutVecs, kOutPitch, kThreads>(dst, s_out, row_bytes, height, dst_pitch, x0, y0);
}
