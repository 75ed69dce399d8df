// conv_tf32.cu: a convolution layer (streamconv.nn.conv2d, method "tf32") as an implicit GEMM on
// the tensor cores in TF32.
//
// What it computes: y[n][m][oy][ox] = bias[m] + sum_{c,ky,kx} w[m][c][ky][kx] *
// x[n][c][oy*STRIDE + ky - pad][ox*STRIDE + kx - pad] over float32 NCHW tensors, zero outside
// the image. Both operands are rounded to TF32 (10-bit mantissa, round to nearest, ties away)
// and multiplied with float32 sums, so an output is within about 2^-10 of
// sum |w * x| of the float32 result.
//
// The product. Per block, 64 output channels x an 8 x 16 tile of output pixels; 8 warps of 32
// channels x 32 pixels (two m16 tiles x four n8 tiles). The input channels go 8 at a time (a
// chunk): the chunk's input patch, (8-1)*STRIDE+K rows by (16-1)*STRIDE+K columns per channel,
// is staged in shared memory once, rounded to TF32, and every tap (ky, kx) is then one mma
// k-step over those 8 channels: B (8 channels x 8 pixels) is read from the patch at the tap's
// offset, A (16 output channels x 8 channels) is one 16-byte load per lane from g_taps, the
// taps already rounded and laid out as the mma fragments (tf32_taps below). The next chunk's
// patch is loaded into registers while the tensor cores run on this one.
// Launch: block (256, 1, 1), grid (ceil(OW / 16) * ceil(OH / 8), ceil(M / 64), N).
//
// Macros: KSIZE (K), STRIDE. Needs sm_80 or later.

#ifndef KSIZE
#define KSIZE 3
#endif
#ifndef STRIDE
#define STRIDE 1
#endif

namespace {

constexpr int kKK = KSIZE * KSIZE;
constexpr int kTileH = 8, kTileW = 16, kBM = 64, kCB = 8;
constexpr int kThreads = 256;
constexpr int kPatchH = (kTileH - 1) * STRIDE + KSIZE;
constexpr int kPatchW = (kTileW - 1) * STRIDE + KSIZE;
// Each channel's plane starts 8 banks after the previous one: lanes (g, t) of a B load (pixel g,
// channel t) then fall in distinct banks at stride 1.
constexpr int kPlane = (kPatchH * kPatchW + 23) / 32 * 32 + 8;
constexpr int kPatch = kCB * kPatchH * kPatchW;
constexpr int kPatchLoads = (kPatch + kThreads - 1) / kThreads;  // per thread per chunk
// Wide patches (large K or stride) are loaded straight into shared memory: held in registers
// across the mma loop they would spill.
constexpr bool kPrefetch = kPatchLoads <= 10;
static_assert(kCB * kPlane * 4 <= 48 * 1024, "the input patch is over 48 KB: the host runs such shapes as tiled");

__device__ __forceinline__ unsigned int to_tf32(float v) {
  unsigned int r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
  return r;
}

// d += a * b, m16n8k8 TF32 with float32 sums.
__device__ __forceinline__ void mma_tf32(float* d, uint4 a, unsigned int b0, unsigned int b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

}  // namespace

// The taps as A fragments: word e of lane (g, t) for chunk cc, tap r, m-tile mt is
// w[16 mt + g + 8 (e & 1)][8 cc + t + 4 (e >> 1)][r], rounded to TF32 (0 past M or C), at
// ((cc * KK + r) * mtiles + mt) * 128 + lane * 4 + e. One thread per word.
extern "C" __global__ void tf32_taps(const float* __restrict__ w, unsigned int* __restrict__ taps, int out_channels,
                                     int channels, int chunks, int mtiles) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= chunks * kKK * mtiles * 128) return;
  const int e = i & 3, lane = (i >> 2) & 31, g = lane >> 2, t = lane & 3;
  const int mt = (i >> 7) % mtiles;
  const int r = (i >> 7) / mtiles % kKK;
  const int cc = (i >> 7) / mtiles / kKK;
  const int m = 16 * mt + g + 8 * (e & 1), c = 8 * cc + t + 4 * (e >> 1);
  taps[i] = m < out_channels && c < channels ? to_tf32(w[((size_t)m * channels + c) * kKK + r]) : 0u;
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
conv_tf32(const float* __restrict__ x, const uint4* __restrict__ taps, const float* __restrict__ bias,
          float* __restrict__ y, int channels, int height, int width, int out_channels, int out_h,
          int out_w, int pad, int mtiles) {
  __shared__ unsigned int s_patch[kCB * kPlane];
  const int tiles_x = (out_w + kTileW - 1) / kTileW;
  const int oy0 = blockIdx.x / tiles_x * kTileH, ox0 = blockIdx.x % tiles_x * kTileW;
  const int iy0 = oy0 * STRIDE - pad, ix0 = ox0 * STRIDE - pad;
  const int plane = height * width;
  const float* image = x + (size_t)blockIdx.z * channels * plane;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wm = warp >> 2, wn = warp & 3;
  const int chunks = (channels + kCB - 1) / kCB;
  const int mt0 = blockIdx.y * (kBM / 16) + 2 * wm;  // this warp's first m-tile

  // Patch element i of a chunk: channel i / (kPatchH * kPatchW), then row and column.
  auto fetch = [&](int k, int c0) -> float {
    const int i = threadIdx.x + k * kThreads;
    const int c = i / (kPatchH * kPatchW), rest = i - c * (kPatchH * kPatchW);
    const int iy = iy0 + rest / kPatchW, ix = ix0 + rest % kPatchW;
    const bool inside = i < kPatch && c0 + c < channels && (unsigned)iy < (unsigned)height &&
                        (unsigned)ix < (unsigned)width;
    return inside ? __ldg(image + (size_t)(c0 + c) * plane + iy * width + ix) : 0.0f;
  };
  auto put = [&](int k, float value) {
    const int i = threadIdx.x + k * kThreads;
    const int c = i / (kPatchH * kPatchW);
    if (i < kPatch) s_patch[c * kPlane + i - c * (kPatchH * kPatchW)] = to_tf32(value);
  };
  float next[kPrefetch ? kPatchLoads : 1];
  auto prefetch = [&](int c0) {
#pragma unroll
    for (int k = 0; k < (kPrefetch ? kPatchLoads : 0); ++k) next[k] = fetch(k, c0);
  };

  // B: lane (g, t) reads channel t (and t + 4) at pixel g of each n-tile, i.e. patch row
  // py * STRIDE + ky, column px * STRIDE + kx.
  int b_offset[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int q = 32 * wn + 8 * j + g;
    b_offset[j] = t * kPlane + (q / kTileW) * STRIDE * kPatchW + (q % kTileW) * STRIDE;
  }

  float acc[2][4][4] = {};
  prefetch(0);
  for (int cc = 0; cc < chunks; ++cc) {
    __syncthreads();  // the previous chunk's reads are done
    if constexpr (kPrefetch) {
#pragma unroll
      for (int k = 0; k < kPatchLoads; ++k) put(k, next[k]);
    } else {
#pragma unroll 4
      for (int k = 0; k < kPatchLoads; ++k) put(k, fetch(k, kCB * cc));
    }
    __syncthreads();
    if (cc + 1 < chunks) prefetch(kCB * (cc + 1));  // in flight while the tensor cores run
    const uint4* chunk_taps = taps + (size_t)cc * kKK * mtiles * 32 + lane;
#pragma unroll 3
    for (int r = 0; r < kKK; ++r) {
      uint4 a[2];
#pragma unroll
      for (int i = 0; i < 2; ++i)
        a[i] = mt0 + i < mtiles ? __ldg(chunk_taps + ((size_t)r * mtiles + mt0 + i) * 32) : make_uint4(0u, 0u, 0u, 0u);
      const int tap = (r / KSIZE) * kPatchW + r % KSIZE;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const unsigned int b0 = s_patch[b_offset[j] + tap];
        const unsigned int b1 = s_patch[b_offset[j] + 4 * kPlane + tap];
#pragma unroll
        for (int i = 0; i < 2; ++i) mma_tf32(acc[i][j], a[i], b0, b1);
      }
    }
  }

  const int pixels = out_h * out_w;
  float* out = y + (size_t)blockIdx.z * out_channels * pixels;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int m = 16 * (mt0 + i) + g + 8 * half;
      if (m >= out_channels) continue;
      const float offset = bias ? bias[m] : 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int q = 32 * wn + 8 * j + 2 * t + e;
          const int oy = oy0 + q / kTileW, ox = ox0 + q % kTileW;
          if (oy < out_h && ox < out_w) out[(size_t)m * pixels + oy * out_w + ox] = acc[i][j][2 * half + e] + offset;
        }
    }
}
