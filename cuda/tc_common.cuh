// tc_common.cuh: helpers the tensor-core kernels (conv2d_tc.cu, conv2d_tcp.cu, conv3_tc.cu,
// sepconv_tc.cu) share: ldmatrix, the int8 mma, the rounding of integer sums, byte packing, and
// the border-mapped loads and the stores of staged tiles. Include after conv_common.cuh (uint8 samples).
#pragma once

namespace conv {

// Four 8 x 16-byte matrices from shared memory: this lane's row address is for matrix lane / 8;
// lane (g, t) receives word t of row g of each, in a[0..3].
__device__ __forceinline__ void ldmatrix_x4(unsigned int* a, const unsigned char* p) {
  const unsigned int addr = (unsigned int)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(addr));
}

// The 16 bytes of frame row y from byte column gx, through the border map (rows above or below
// the frame, or columns off either side).
__device__ __noinline__ uint4 load_edge_vector(const unsigned char* __restrict__ src, int src_pitch,
                                               int y, int gx, int width, int height) {
  const int sy = map_index(y, height);
  if (sy < 0) return make_uint4(0u, 0u, 0u, 0u);
  const unsigned char* row = src + (size_t)sy * src_pitch;
  const int row_bytes = width * CHANNELS;
  if (gx >= 0 && gx + 16 <= row_bytes) return __ldg(reinterpret_cast<const uint4*>(row + gx));
  unsigned int w[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    unsigned int by[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int c = map_column(gx + 4 * q + e, row_bytes, width);
      by[e] = c < 0 ? 0u : (unsigned int)row[c];
    }
    w[q] = pack4(by[0], by[1], by[2], by[3]);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// An output tile of kRows rows x kVecs 16-byte vectors in shared memory (row pitch kPitch) to
// the frame from byte column gx0 of row y0, 16 bytes per store; bytes past row_bytes or rows
// past height are not written.
template <int kRows, int kVecs, int kPitch, int kThreads>
__device__ __forceinline__ void store_tile(unsigned char* __restrict__ dst, const unsigned char* s_out,
                                           int row_bytes, int height, int dst_pitch, int gx0, int y0) {
#pragma unroll
  for (int k = 0; k < (kRows * kVecs + kThreads - 1) / kThreads; ++k) {
    const int i = threadIdx.x + k * kThreads;
    const int r = i / kVecs;
    const int y = y0 + r;
    const int offset = 16 * (i - r * kVecs);
    const int gx = gx0 + offset;
    if (i >= kRows * kVecs || y >= height || gx >= row_bytes) continue;
    const uint4 val = *reinterpret_cast<const uint4*>(s_out + r * kPitch + offset);
    unsigned char* d = dst + (size_t)y * dst_pitch + gx;
    if (gx + 16 <= row_bytes) {
      *reinterpret_cast<uint4*>(d) = val;
    } else {
      const unsigned int w[4] = {val.x, val.y, val.z, val.w};
      for (int e = 0; e < row_bytes - gx; ++e) d[e] = (unsigned char)(w[e >> 2] >> (8 * (e & 3)));
    }
  }
}

// c += a * b on the tensor cores, m16n8k32 (A 16 x 32 row-major, B 32 x 8 column-major, int32
// sums): A bytes unsigned and B signed (mma_u8s8), or A signed and B unsigned (mma_s8u8).
__device__ __forceinline__ void mma_u8s8(int* c, const unsigned int* a, unsigned int b0, unsigned int b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_s8u8(int* c, const unsigned int* a, unsigned int b0, unsigned int b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// v / 2^shift rounded, from the biased sum b = v + bias. kTiesEven: bias 2^(shift-1) - 1, and
// adding the parity of floor(b / 2^shift) carries exactly the ties whose floor is odd (half to
// even, exact). Otherwise bias 2^(shift-1), half up, for taps that are not exact anyway.
template <bool kTiesEven>
__device__ __forceinline__ int round_sum(int biased, int shift) {
  if (kTiesEven) return (biased + ((biased >> shift) & 1)) >> shift;
  return biased >> shift;
}

// Two saturated bytes (lo, hi) in the low 16 bits, above them the low 16 bits of `upper`.
__device__ __forceinline__ unsigned int pack2_sat(int lo, int hi, unsigned int upper = 0u) {
  unsigned int r;
  asm("cvt.pack.sat.u8.s32.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(hi), "r"(lo), "r"(upper));
  return r;
}

}  // namespace conv
