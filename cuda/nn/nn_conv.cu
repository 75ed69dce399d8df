// nn_conv.cu: convolution layers on float32 NCHW tensors (streamconv.nn.conv2d).
//
//   y[n][m][oy][ox] = bias[m] + sum_{c,ky,kx} w[m][c][ky][kx] * x[n][c][oy*S - P + ky][ox*S - P + kx]
//
// cross-correlation, as in CNN frameworks; reads outside the image are 0 (zero padding P).
// x: N x C x H x W, w: M x C x K x K, y: N x M x Ho x Wo with Ho = (H + 2P - K) / S + 1 (floor),
// all float32, contiguous, in device memory.
//
// conv_direct: the textbook's forward kernel. One thread per output, block (DIRECT_TILE,
//   DIRECT_TILE), grid (tiles_y * tiles_x, M, N): the output tiles go in x, whose limit is 2^31,
//   so large frames fit (the textbook puts M in x). Inputs and taps are read from global memory
//   through L1; K, S and P are run-time arguments.
//
// conv_tiled: shared-memory tiled. A block computes a TILE_H x TILE_W output tile for MB output
//   channels of one image. It walks the input channels in chunks of CB: it stages the chunk's
//   input tile plus its halo ((TILE_H-1)*S+K x (TILE_W-1)*S+K per channel, zero outside the
//   image) and the chunk's taps for its MB channels in shared memory, then each thread
//   accumulates PX adjacent outputs of one row for MT output channels in registers. Per input
//   channel and tap row it reads (PX-1)*S+K inputs once and, per tap, MT taps (float4 loads,
//   the same address across the warp, so a broadcast), then issues PX*MT FMAs: about ten FMAs
//   per shared-memory load. Block: THREADS = (TILE_H*TILE_W/PX) * (MB/MT) threads, the thread's
//   pixel group fastest so a warp shares its channel group; grid (tiles_x, tiles_y, N * m_blocks).
//   Taps come pre-transposed to C x K x K x M (transpose_taps) so the staging loads coalesce.
//
// im2col: unrolls a run of output pixels of one image into columns: col[(c*K + ky)*K + kx][j] is
//   the input under tap (ky, kx) of channel c for output pixel p0 + j. Grid (ceil(cols/256), C*K),
//   block 256. gemm.cu then multiplies the taps (an M x CKK matrix) by it.
//
// Macros (tiled only; each has a default): KSIZE, STRIDE, TILE_W, TILE_H, PX, MT (multiple of 4),
// MB (multiple of MT), CB, MIN_BLOCKS (blocks per SM the register budget aims for); DIRECT_TILE.

#ifndef KSIZE
#define KSIZE 3
#endif
#ifndef STRIDE
#define STRIDE 1
#endif
#ifndef TILE_W
#define TILE_W 32
#endif
#ifndef TILE_H
#define TILE_H 8
#endif
#ifndef PX
#define PX 4
#endif
#ifndef MT
#define MT 16
#endif
#ifndef MB
#define MB 64
#endif
#ifndef CB
#define CB 8
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 2
#endif
#ifndef DIRECT_TILE
#define DIRECT_TILE 16
#endif

#define TAPS (KSIZE * KSIZE)
#define GROUPS (TILE_H * TILE_W / PX)
#define THREADS (GROUPS * (MB / MT))
#define IN_H ((TILE_H - 1) * STRIDE + KSIZE)
#define IN_W ((TILE_W - 1) * STRIDE + KSIZE)
#define SPAN ((PX - 1) * STRIDE + KSIZE)

#if TILE_W % PX != 0 || MT % 4 != 0 || MB % MT != 0 || GROUPS % 32 != 0
#error "TILE_W must be a multiple of PX, MT of 4, MB of MT, and TILE_H*TILE_W/PX of 32"
#endif

extern "C" {

__global__ void conv_direct(const float* __restrict__ x, const float* __restrict__ w,
                            const float* __restrict__ bias, float* __restrict__ y,
                            int C, int H, int W, int M, int Ho, int Wo,
                            int K, int stride, int pad, int tiles_x)
{
    const int m = blockIdx.y;
    const int n = blockIdx.z;
    const int oy = (blockIdx.x / tiles_x) * DIRECT_TILE + threadIdx.y;
    const int ox = (blockIdx.x % tiles_x) * DIRECT_TILE + threadIdx.x;
    if (oy >= Ho || ox >= Wo) return;
    float acc = bias ? bias[m] : 0.0f;
    for (int c = 0; c < C; ++c) {
        const float* plane = x + ((size_t)n * C + c) * H * W;
        const float* taps = w + ((size_t)m * C + c) * K * K;
        for (int ky = 0; ky < K; ++ky) {
            const int iy = oy * stride - pad + ky;
            if (iy < 0 || iy >= H) continue;
            for (int kx = 0; kx < K; ++kx) {
                const int ix = ox * stride - pad + kx;
                if (ix >= 0 && ix < W) acc += plane[(size_t)iy * W + ix] * taps[ky * K + kx];
            }
        }
    }
    y[(((size_t)n * M + m) * Ho + oy) * Wo + ox] = acc;
}

// w_t[c][tap][m] = w[m][c][tap]: taps laid out so a block's chunk is one contiguous run per tap.
__global__ void transpose_taps(const float* __restrict__ w, float* __restrict__ w_t, int M, int C, int taps)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t total = (size_t)M * C * taps;
    if (i >= total) return;
    const int m = (int)(i % M);
    const size_t c_tap = i / M;  // c * taps + tap
    w_t[i] = w[(size_t)m * C * taps + c_tap];
}

__global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
conv_tiled(const float* __restrict__ x, const float* __restrict__ w_t, const float* __restrict__ bias,
           float* __restrict__ y, int C, int H, int W, int M, int Ho, int Wo, int pad, int m_blocks)
{
    __shared__ __align__(16) float s_in[CB][IN_H][IN_W];
    __shared__ __align__(16) float s_w[CB][TAPS][MB];

    const int t = threadIdx.x;
    const int group = t % GROUPS;
    const int channel_group = t / GROUPS;
    const int n = blockIdx.z / m_blocks;
    const int m0 = (blockIdx.z % m_blocks) * MB;
    const int oy0 = blockIdx.y * TILE_H;
    const int ox0 = blockIdx.x * TILE_W;
    const int gy = group / (TILE_W / PX);
    const int gx = (group % (TILE_W / PX)) * PX;
    const int iy0 = oy0 * STRIDE - pad;
    const int ix0 = ox0 * STRIDE - pad;
    const float* image = x + (size_t)n * C * H * W;

    float acc[PX][MT];
#pragma unroll
    for (int p = 0; p < PX; ++p)
#pragma unroll
        for (int j = 0; j < MT; ++j) acc[p][j] = 0.0f;

    for (int c0 = 0; c0 < C; c0 += CB) {
        for (int i = t; i < CB * IN_H * IN_W; i += THREADS) {
            const int cc = i / (IN_H * IN_W);
            const int r = (i / IN_W) % IN_H;
            const int col = i % IN_W;
            const int c = c0 + cc, iy = iy0 + r, ix = ix0 + col;
            float v = 0.0f;
            if (c < C && iy >= 0 && iy < H && ix >= 0 && ix < W) v = image[((size_t)c * H + iy) * W + ix];
            (&s_in[0][0][0])[i] = v;
        }
        for (int i = t; i < CB * TAPS * MB; i += THREADS) {
            const int mm = i % MB;
            const int c_tap = i / MB;  // cc * TAPS + tap
            const int c = c0 + c_tap / TAPS;
            float v = 0.0f;
            if (c < C && m0 + mm < M) v = w_t[((size_t)c0 * TAPS + c_tap) * M + m0 + mm];
            (&s_w[0][0][0])[i] = v;
        }
        __syncthreads();

#pragma unroll 1
        for (int cc = 0; cc < CB; ++cc) {
#pragma unroll
            for (int ky = 0; ky < KSIZE; ++ky) {
                float in[SPAN];
                const float* row = &s_in[cc][gy * STRIDE + ky][gx * STRIDE];
#pragma unroll
                for (int j = 0; j < SPAN; ++j) in[j] = row[j];
#pragma unroll
                for (int kx = 0; kx < KSIZE; ++kx) {
                    const float4* taps = reinterpret_cast<const float4*>(&s_w[cc][ky * KSIZE + kx][channel_group * MT]);
                    float tap[MT];
#pragma unroll
                    for (int q = 0; q < MT / 4; ++q) {
                        const float4 v = taps[q];
                        tap[4 * q] = v.x; tap[4 * q + 1] = v.y; tap[4 * q + 2] = v.z; tap[4 * q + 3] = v.w;
                    }
#pragma unroll
                    for (int p = 0; p < PX; ++p)
#pragma unroll
                        for (int j = 0; j < MT; ++j) acc[p][j] = fmaf(in[p * STRIDE + kx], tap[j], acc[p][j]);
                }
            }
        }
        __syncthreads();
    }

    const int oy = oy0 + gy;
    if (oy >= Ho) return;
#pragma unroll
    for (int j = 0; j < MT; ++j) {
        const int m = m0 + channel_group * MT + j;
        if (m >= M) break;
        const float b = bias ? bias[m] : 0.0f;
        float* out = y + (((size_t)n * M + m) * Ho + oy) * Wo;
#pragma unroll
        for (int p = 0; p < PX; ++p) {
            const int ox = ox0 + gx + p;
            if (ox < Wo) out[ox] = acc[p][j] + b;
        }
    }
}

__global__ void im2col(const float* __restrict__ image, float* __restrict__ col, int C, int H, int W,
                       int Wo, int K, int stride, int pad, long long p0, int cols)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    const int c = blockIdx.y / K;
    const int ky = blockIdx.y % K;
    const long long p = p0 + j;
    const int oy = (int)(p / Wo), ox = (int)(p % Wo);
    const int iy = oy * stride - pad + ky;
    const bool row_inside = iy >= 0 && iy < H;
    const float* src = image + ((size_t)c * H + (row_inside ? iy : 0)) * W;
    float* dst = col + (size_t)blockIdx.y * K * cols + j;
    for (int kx = 0; kx < K; ++kx) {
        const int ix = ox * stride - pad + kx;
        dst[(size_t)kx * cols] = (row_inside && ix >= 0 && ix < W) ? src[ix] : 0.0f;
    }
}

}  // extern "C"
