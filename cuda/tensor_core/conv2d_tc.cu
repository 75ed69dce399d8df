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

#include "tc_tile.cuh"

namespace {

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
  PieceOffsets off;  // of this lane's pieces from its unit's first row and output byte
  piece_offsets(off, lane, t);
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
      load_pieces(a, base, off, s);
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
