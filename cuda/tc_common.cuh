// tc_common.cuh: helpers the tensor-core kernels (conv2d_tc.cu, sepconv_tc.cu) share: the
// border-mapped 16-byte load of their staging and ldmatrix. Include after conv_common.cuh
// (uint8 samples; CHANNELS and BORDER from there).
#pragma once

namespace conv {

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

// Four 8 x 16-byte matrices from shared memory: this lane's row address is for matrix lane / 8;
// lane (g, t) receives word t of row g of each, in a[0..3].
__device__ __forceinline__ void ldmatrix_x4(unsigned int* a, const unsigned char* p) {
  const unsigned int addr = (unsigned int)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(addr));
}

}  // namespace conv
