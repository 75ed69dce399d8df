// tc_common.cuh: helpers the tensor-core kernels (conv2d_tc.cu, conv3_tc.cu, sepconv_tc.cu) share:
// ldmatrix, the int8 mma, the rounding of integer sums and byte packing. Include after
// conv_common.cuh (uint8 samples).
#pragma once

namespace conv {

// Four 8 x 16-byte matrices from shared memory: this lane's row address is for matrix lane / 8;
// lane (g, t) receives word t of row g of each, in a[0..3].
__device__ __forceinline__ void ldmatrix_x4(unsigned int* a, const unsigned char* p) {
  const unsigned int addr = (unsigned int)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(addr));
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
