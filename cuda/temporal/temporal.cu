// temporal.cu: a filter across frames with 1 x 1 taps (time only), one stage of streamconv.
//
// What it computes, for every sample s of an H x W x C frame (rows `pitch` bytes apart), from
// the TAPS frames the host passes (the window positions whose tap is not zero, in order) with
// their taps w_0..w_{TAPS-1} in c_wt:
//   acc = w_0 * f_0(s);  acc = acc + w_k * f_k(s) for k = 1..TAPS-1     (float32)
//   out(s) = sat(rint(acc))
// each product and each sum rounded to float32 on its own (__fmul_rn, __fadd_rn: no fused
// multiply-add), in the order of streamconv's CPU backend (backends/cpu/temporal.py), so the
// output equals it bit for bit whatever the taps. rint rounds half to even, sat clamps to
// 0..255 (ELEM_BYTES 1, entry tconv_u8) or 0..65535 (ELEM_BYTES 2, entry tconv_u16).
//
// Thread mapping. The frames are read as 16-byte vectors, row by row: a row is W*C samples and
// ceil(W*C*ELEM_BYTES / 16) vectors (pitches are multiples of 16, so a row's last vector stays
// inside its pitch). Each thread takes VECS vectors a block apart (coalesced), issues all their
// loads from every frame before any arithmetic (TAPS * VECS loads in flight per thread), and
// stores VECS vectors; a row's last vector stores only the samples inside the row. The kernel is
// bound by memory: each frame byte is read once and each output byte written once. With
// `reverse` the blocks take the frame from its end: a stream's kernels alternate, so that each
// starts on the rows the last one read last, which the L2 cache may still hold (4 of its 5
// frames are the last kernel's).
// Launch: block (THREADS, 1, 1), grid (ceil(H * vectors per row / (THREADS * VECS)), 1, 1).
//
// Macros: TAPS 1..15 (frames read), ELEM_BYTES 1 or 2, THREADS, VECS. The window's frames come
// as a struct of 15 pointers (unused ones may be 0); all share src_pitch.

#include "conv_common.cuh"

#ifndef TAPS
#define TAPS 3
#endif
#ifndef THREADS
#define THREADS 256
#endif
#ifndef VECS
#define VECS 2
#endif
#if TAPS < 1 || TAPS > 15
#error "TAPS must be 1..15"
#endif

struct Frames {
  const unsigned char* frame[15];
};

extern "C" {
__constant__ float c_wt[TAPS];
}

namespace {

using namespace conv;

constexpr int kSamples = 16 / kES;  // samples per 16-byte vector

// The kEPW samples of word w, each times t, added to acc (rounded on their own).
__device__ __forceinline__ void add_word(float* acc, unsigned int w, float t, bool first) {
#pragma unroll
  for (int e = 0; e < kEPW; ++e) {
    const float product = __fmul_rn(elem_to_float(w, e), t);
    acc[e] = first ? product : __fadd_rn(acc[e], product);
  }
}

}  // namespace

#if ELEM_BYTES == 1
#define TCONV_ENTRY tconv_u8
#else
#define TCONV_ENTRY tconv_u16
#endif

extern "C" __global__ void __launch_bounds__(THREADS)
TCONV_ENTRY(Frames src, unsigned char* __restrict__ dst, int width, int height, int src_pitch,
            int dst_pitch, int reverse) {
  const int row_bytes = width * CHANNELS * kES;
  const int per_row = (row_bytes + 15) >> 4;
  const int total = per_row * height;  // < 2^31: the host keeps frames far smaller
  const int block = reverse ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int first = block * (THREADS * VECS) + threadIdx.x;

  uint4 v[VECS][TAPS];
  int row[VECS], col[VECS];
#pragma unroll
  for (int u = 0; u < VECS; ++u) {
    const int index = first + u * THREADS;
    const bool inside = index < total;
    row[u] = inside ? index / per_row : -1;
    col[u] = inside ? (index - row[u] * per_row) << 4 : 0;
#pragma unroll
    for (int k = 0; k < TAPS; ++k)
      v[u][k] = inside ? __ldg(reinterpret_cast<const uint4*>(src.frame[k] + (size_t)row[u] * src_pitch
                                                               + col[u]))
                       : make_uint4(0u, 0u, 0u, 0u);
  }
#pragma unroll
  for (int u = 0; u < VECS; ++u) {
    if (row[u] < 0) continue;
    float acc[kSamples];
#pragma unroll
    for (int k = 0; k < TAPS; ++k) {
      const float t = c_wt[k];
      add_word(acc, v[u][k].x, t, k == 0);
      add_word(acc + kEPW, v[u][k].y, t, k == 0);
      add_word(acc + 2 * kEPW, v[u][k].z, t, k == 0);
      add_word(acc + 3 * kEPW, v[u][k].w, t, k == 0);
    }
    unsigned int words[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      unsigned int r[kEPW];
#pragma unroll
      for (int e = 0; e < kEPW; ++e) r[e] = to_elem(acc[q * kEPW + e]);
      words[q] = pack_word(r);
    }
    unsigned char* out = dst + (size_t)row[u] * dst_pitch + col[u];
    if (col[u] + 16 <= row_bytes) {
      *reinterpret_cast<uint4*>(out) = make_uint4(words[0], words[1], words[2], words[3]);
    } else {  // the row's last vector: only the bytes inside the row
#pragma unroll
      for (int b = 0; b < 16; ++b)
        if (b < row_bytes - col[u]) out[b] = (unsigned char)(words[b >> 2] >> (8 * (b & 3)));
    }
  }
}
