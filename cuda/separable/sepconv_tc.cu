// sepconv_tc.cu: separable K x K correlation of interleaved uint8 frames on the tensor cores, for
// row taps of one sign, scaled to sum to 1 (Gaussian, box): a row pass and a column pass, both
// as integer matrix products, with the intermediate kept in registers as bytes.
//
// What it computes. The host holds the row taps H and the column taps V as integers
// h = round(H x 2^s1), v = round(V x 2^s2) in two signed int8 digits each
// (backends/families/separable_tc.py), and with the border map of conv_common.cuh per axis:
//   mid(r, b) = sat_u8((sum_n h[n] * in(r, bx(b + (n-R)*C)) + 2^(s1-1)) >> s1)     exact int32
//   out(y, b) = sat_u8((sum_m v[m] * mid(by(y + m - R), b) + 2^(s2-1)) >> s2)
// mid is the row pass rounded to a byte, which moves an output by at most half a step times
// sum|V|; the host admits taps only where that and the taps' own rounding stay under one step,
// so every output is within 1 LSB of the float32 result (sepconv.cu keeps exact taps exact).
//
// Why. A K = 31 separable filter costs 62 FP32 FMAs per output byte (sepconv.cu: 0.167 ms at 4K
// on an H100); as int8 tensor-core products it costs about ten mma instructions per 128 outputs.
//
// The products (m16n8k32, A row-major 16 x 32, B column-major 32 x 8, int32 sums):
//  - Row pass, transposed: midT[16 byte columns][8 rows] += bandT[16][32 input bytes] x inT[32][8].
//    bandT (the row digits on every C-th diagonal) sits in registers; inT's fragment is 4
//    consecutive bytes of one input row, which is what ldmatrix gives from the staged rows.
//    Row m of the m-tile computes byte column sigma(m) (see below).
//  - Column pass: out[16 rows][8 byte columns] += colband[16][32 mid rows] x mid[32][8]. The row
//    pass leaves each lane the mids of rows 2t, 2t+1 (of an 8-row group) for byte columns
//    sigma(g) and sigma(g+8); a byte permute pairs two groups into a B register, and the k order
//    this gives the mid rows is folded into colband. 16 output rows need 46 mid rows: two
//    k-steps over six groups, the second half empty.
//  - sigma(m) = 4(m/2) + m%2 for m < 8, 4((m-8)/2) + 2 + m%2 above: then output n-tiles 0 and 1
//    leave lane (g, t) bytes 4t..4t+3 of rows g and g+8, stored as one 4-byte word each.
//
// Work split. A warp takes MT m-tiles (16*MT bytes) of a strip of STRIP_H rows and walks down it
// in groups of 8 rows: it stages the group's input rows (its own window, kWin bytes, through the
// border map) in its own shared buffer, double-buffered with the next group's loads in flight,
// runs the row pass into a window of six mid groups, and after every second group runs the
// column pass for 16 output rows. No block barriers: a warp past the frame's right edge returns.
// The loop is compiled twice: warps whose window reaches past the frame's left or right edge run
// a copy that fills those columns from the staged window (s_map), the others one without any
// edge code. The frame's first and last block columns are launched first.
// Launch: block (WARPS*32, 1, 1), grid (ceil(H / STRIP_H), ceil(W*C / (16*MT*WARPS)), 1): strips
// in x, block columns in y.
// Buffers: base pointers aligned to 16 bytes, pitches multiples of 16. Needs sm_80 or later.
//
// Macros: RADIUS (up to 15), CHANNELS, BORDER (conv_common.cuh; BANKS 1, ELEM_BYTES 1), MT,
// WARPS, STRIP_H (multiple of 16), MIN_BLOCKS (launch bound).

#include "conv_common.cuh"
#include "tc_common.cuh"

// A compile-time flag of its own: NVRTC, which compiles these kernels where no toolkit is
// installed, ships no standard headers.
template <bool kValue>
struct EdgeFlag {
  static constexpr bool value = kValue;
};

#if ELEM_BYTES != 1 || BANKS != 1
#error "sepconv_tc.cu takes one bank of uint8 samples"
#endif
#if RADIUS > 15
#error "sepconv_tc.cu holds mid rows for RADIUS <= 15"
#endif
#ifndef MT
#define MT 2
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef STRIP_H
#define STRIP_H 128
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 4
#endif
#if STRIP_H % 16 != 0
#error "STRIP_H must be a multiple of 16"
#endif

namespace {

using namespace conv;

constexpr int kReach = RADIUS * CHANNELS;                   // bytes a row tap reaches each side
constexpr int kLeft = (kReach + 15) / 16 * 16;              // window start before an m-tile
constexpr int kChunks = (kLeft + 16 + kReach + 31) / 32;    // row-pass k-steps per m-tile
constexpr int kHalves = MT - 1 + 2 * kChunks;               // 16-byte columns of the window
constexpr int kWin = 16 * kHalves;
// An odd number of 16-byte units per row: ldmatrix's 8 row addresses then hit distinct banks.
constexpr int kPitch = kHalves % 2 ? kWin : kWin + 16;
constexpr int kVecs = 8 * kHalves;                          // 16-byte loads per group
constexpr int kLoads = (kVecs + 31) / 32;                   // per lane
constexpr int kBlocksOut = STRIP_H / 16;
constexpr int kGroups = 2 * kBlocksOut + 4;                 // 8-row groups a strip reads

}  // namespace

extern "C" {
// A fragments: row band [kChunks][digit][4 registers][32 lanes], column band [2][digit][4][32]
// (backends/families/separable_tc.py).
__device__ unsigned int g_arow[kChunks * 2 * 4 * 32];
__device__ unsigned int g_acol[2 * 2 * 4 * 32];
// {s1, 2^(s1-1), s2, 2^(s2-1)}: each pass's shift and rounding bias.
__constant__ int c_round[4];
}

namespace {

// Four saturated bytes (v0 lowest).
__device__ __forceinline__ unsigned int pack4_sat(int v0, int v1, int v2, int v3) {
  return pack2_sat(v0, v1, pack2_sat(v2, v3));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(WARPS * 32, MIN_BLOCKS)
sepconv_tc_u8(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst, int width,
              int height, int src_pitch, int dst_pitch) {
  // (+32: the last ldmatrix of a group may read up to two 16-byte columns past the window.)
  __shared__ __align__(16) unsigned char s_in[WARPS][2][8 * kPitch + 32];
  __shared__ unsigned char s_map[WARPS][kWin];  // edge warps: where each window column reads
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int row_bytes = width * CHANNELS;
  // grid.y runs over block columns with the frame's first and last one launched first: their
  // edge warps work longest, and so do not set the end of the kernel.
  const int column = blockIdx.y <= 1 ? (blockIdx.y == 0 ? 0 : gridDim.y - 1) : blockIdx.y - 1;
  const int x0 = (column * WARPS + warp) * 16 * MT;
  const int y0 = blockIdx.x * STRIP_H;
  if (x0 >= row_bytes) return;  // the whole warp; there are no block barriers

  unsigned int arow[kChunks][2][4], acol[2][2][4];
#pragma unroll
  for (int c = 0; c < kChunks; ++c)
#pragma unroll
    for (int d = 0; d < 2; ++d)
#pragma unroll
      for (int r = 0; r < 4; ++r) arow[c][d][r] = g_arow[((c * 2 + d) * 4 + r) * 32 + lane];
#pragma unroll
  for (int c = 0; c < 2; ++c)
#pragma unroll
    for (int d = 0; d < 2; ++d)
#pragma unroll
      for (int r = 0; r < 4; ++r) acol[c][d][r] = g_acol[((c * 2 + d) * 4 + r) * 32 + lane];
  const int shift1 = c_round[0], bias1 = c_round[1], shift2 = c_round[2], bias2 = c_round[3];
  // Whether every vector of this warp's window lies inside the frame's byte columns.
  const bool inner_x = x0 - kLeft >= 0 && x0 - kLeft + kWin <= row_bytes;

  // Group q holds frame rows y0 - 16 + 8q .. +7 (two groups above the strip, two below), rows
  // through the border map, loaded a group ahead: every 16-byte vector that starts inside the
  // frame's bytes (one that runs past the last byte stays within the pitch). A warp whose window
  // reaches past the frame's left or right edge then fills those columns when the group is
  // stored, from the window column s_map names (the reflected or replicated byte, staged by
  // then), as zero (kMapZero), or from global memory where the mapped byte lies outside the
  // window (kMapFar: frames narrower than the window).
  constexpr unsigned char kMapZero = 0xFF, kMapFar = 0xFE;
  static_assert(kWin <= 0xFE, "window columns must fit s_map's bytes");
  const int win_x = x0 - kLeft;  // the window's first byte column
  const int fill_left = win_x < 0 ? -win_x : 0;                                // columns [0, fill_left)
  const int fill_right = win_x + kWin > row_bytes ? row_bytes - win_x : kWin;  // [fill_right, kWin)
  if (!inner_x) {
    for (int col = lane; col < kWin; col += 32) {
      const int c = map_column(win_x + col, row_bytes, width);
      const int from = c - win_x;
      s_map[warp][col] = c < 0 ? kMapZero : from >= 0 && from < kWin ? (unsigned char)from : kMapFar;
    }
  }
  // The strip, compiled twice: interior warps (kEdge false) carry no edge code at all, which
  // keeps their registers and schedule those of the plain loop.
  auto run = [&](auto edge) {
    constexpr bool kEdge = decltype(edge)::value;
    uint4 staged[kLoads];
    auto load_group = [&](int q) {
      const int yq = y0 - 16 + 8 * q;
      if (!kEdge && yq >= 0 && yq + 8 <= height) {  // the usual case: no map, no predicate
        const unsigned char* base = src + (size_t)yq * src_pitch + win_x;
#pragma unroll
        for (int k = 0; k < kLoads; ++k) {
          const int v = lane + 32 * k;
          if (v >= kVecs) break;
          const int r = v / kHalves;
          staged[k] = __ldg(reinterpret_cast<const uint4*>(base + r * src_pitch + 16 * (v - r * kHalves)));
        }
        return;
      }
#pragma unroll
      for (int k = 0; k < kLoads; ++k) {
        const int v = lane + 32 * k;
        if (v >= kVecs) break;
        const int r = v / kHalves;
        const int sy = map_index(yq + r, height);  // -1: a zero row
        const int gx = win_x + 16 * (v - r * kHalves);  // inside the frame for interior warps
        staged[k] = sy >= 0 && (!kEdge || (gx >= 0 && gx < row_bytes))
                        ? __ldg(reinterpret_cast<const uint4*>(src + (size_t)sy * src_pitch + gx))
                        : make_uint4(0u, 0u, 0u, 0u);
      }
    };
    auto store_group = [&](int q) {
      __syncwarp();  // every lane's ldmatrix of group q - 2 is done with this buffer
      unsigned char* buf = s_in[warp][q & 1];
#pragma unroll
      for (int k = 0; k < kLoads; ++k) {
        const int v = lane + 32 * k;
        if (v >= kVecs) break;
        const int r = v / kHalves;
        *reinterpret_cast<uint4*>(buf + r * kPitch + 16 * (v - r * kHalves)) = staged[k];
      }
      if constexpr (kEdge) {
        __syncwarp();
        // A lane takes a column at a time, all 8 rows: one map lookup per column.
        const int outside = fill_left + kWin - fill_right;
        for (int j = lane; j < outside; j += 32) {
          const int col = j < fill_left ? j : fill_right + (j - fill_left);
          const int from = s_map[warp][col];
          if (from < kWin) {
#pragma unroll
            for (int r = 0; r < 8; ++r) buf[r * kPitch + col] = buf[r * kPitch + from];
          } else {
#pragma unroll 1
            for (int r = 0; r < 8; ++r) {
              const int sy = map_index(y0 - 16 + 8 * q + r, height);
              buf[r * kPitch + col] = from == kMapZero || sy < 0 ? 0
                  : src[(size_t)sy * src_pitch + map_column(win_x + col, row_bytes, width)];
            }
          }
        }
      }
      __syncwarp();
    };
    // This lane's ldmatrix row: matrix lane / 8 is the window's 16-byte column (lane / 8) + h0.
    const int lane_row = (lane & 7) * kPitch + 16 * (lane >> 3);

    // Row pass of group q: per m-tile, the mid bytes of rows 2t, 2t+1 for byte columns sigma(g)
    // (bytes 0, 1) and sigma(g+8) (bytes 2, 3).
    auto row_pass = [&](int q, unsigned int* mids) {
      store_group(q);
      if (q + 1 < kGroups) load_group(q + 1);
      const unsigned char* buf = s_in[warp][q & 1];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        unsigned int col[2 * kChunks + 2];
#pragma unroll
        for (int h = 0; h < 2 * kChunks; h += 4) ldmatrix_x4(col + h, buf + lane_row + 16 * (i + h));
        int acc[2][4] = {{bias1, bias1, bias1, bias1}, {0, 0, 0, 0}};
#pragma unroll
        for (int c = 0; c < kChunks; ++c)
#pragma unroll
          for (int d = 0; d < 2; ++d) mma_s8u8(acc[d], arow[c][d], col[2 * c], col[2 * c + 1]);
        int v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = (acc[1][e] * 256 + acc[0][e]) >> shift1;
        mids[i] = pack4_sat(v[0], v[1], v[2], v[3]);
      }
    };

    unsigned int mid[MT][6];  // mid groups 2o .. 2o+5 for output rows 16o .. 16o+15
    load_group(0);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      unsigned int m[MT];
      row_pass(q, m);
#pragma unroll
      for (int i = 0; i < MT; ++i) mid[i][q] = m[i];
    }
#pragma unroll 1
    for (int o = 0; o < kBlocksOut; ++o) {
      unsigned int m4[MT], m5[MT];
      row_pass(2 * o + 4, m4);
      row_pass(2 * o + 5, m5);
      const int ybase = y0 + 16 * o;
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        mid[i][4] = m4[i];
        mid[i][5] = m5[i];
        int acc[2][2][4];  // [n-tile][digit]
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const unsigned int sel = nt ? 0x7632u : 0x5410u;  // bytes 2, 3 or 0, 1 of two groups
          const unsigned int k0 = __byte_perm(mid[i][0], mid[i][1], sel);
          const unsigned int k1 = __byte_perm(mid[i][2], mid[i][3], sel);
          const unsigned int k2 = __byte_perm(mid[i][4], mid[i][5], sel);
#pragma unroll
          for (int d = 0; d < 2; ++d) {
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[nt][d][e] = d == 0 ? bias2 : 0;
            mma_s8u8(acc[nt][d], acol[0][d], k0, k1);
            mma_s8u8(acc[nt][d], acol[1][d], k2, 0u);
          }
        }
        const int gx = x0 + 16 * i + 4 * t;
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          int v[4];
#pragma unroll
          for (int nt = 0; nt < 2; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e)
              v[2 * nt + e] = (acc[nt][1][2 * hr + e] * 256 + acc[nt][0][2 * hr + e]) >> shift2;
          const unsigned int word = pack4_sat(v[0], v[1], v[2], v[3]);
          const int y = ybase + g + 8 * hr;
          if (y >= height || gx >= row_bytes) continue;
          unsigned char* p = dst + (size_t)y * dst_pitch + gx;
          if (gx + 4 <= row_bytes) {
            *reinterpret_cast<unsigned int*>(p) = word;
          } else {
            for (int e = 0; e < row_bytes - gx; ++e) p[e] = (unsigned char)(word >> (8 * e));
          }
        }
#pragma unroll
        for (int k = 0; k < 4; ++k) mid[i][k] = mid[i][k + 2];
      }
      if (ybase + 16 >= height) break;
    }
  };
  if (inner_x)
    run(EdgeFlag<false>{});
  else
    run(EdgeFlag<true>{});
}
