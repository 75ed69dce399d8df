// gemm.cu: single-precision matrix product with a per-row bias, for im2col convolution.
//
//   out[m][j] = bias[m] + sum_k A_t[k][m] * B[k][j]      m < M, j < N, k < Kd
//
// A_t: Kd x M row-major (the taps transposed, transpose_taps in nn_conv.cu), B: Kd x N with row
// stride ldb (the im2col columns), out: M x N with row stride ldc (one image's output planes);
// float32, device memory; bias may be null.
//
// Thread mapping. A block computes a BM x BN tile of out with THREADS = (BM/TM) * (BN/TN)
// threads; each thread keeps a TM x TN block of accumulators in registers (rows ty*TM.., and
// TN/4 runs of 4 columns spaced BN/(TN/4) apart, so a warp's float4 reads of a B row are
// contiguous). The k axis is walked BK at a time through two shared-memory buffers: while the
// tile in one is multiplied, the next tile's global loads are already in registers, and are
// stored to the other buffer after, so one barrier per step suffices. Per k step a thread reads
// TM + TN values and issues TM * TN FMAs.
// Launch: block (THREADS), grid (ceil(N / BN), ceil(M / BM)).
//
// Macros, each with a default: BM, BN, BK, TM, TN (TN % 4 == 0, BM % TM == 0, BN % TN == 0,
// BM*BK and BK*BN multiples of THREADS) and MIN_BLOCKS (blocks per SM the register budget aims for).

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 16
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif

#define THREADS ((BM / TM) * (BN / TN))
#define COL_RUNS (TN / 4)
#define RUN_STRIDE (BN / COL_RUNS)
#define A_LOADS (BM * BK / THREADS)
#define B_LOADS (BK * BN / THREADS)

#if TN % 4 != 0 || BM % TM != 0 || BN % TN != 0 || (BM * BK) % THREADS != 0 || (BK * BN) % THREADS != 0
#error "gemm.cu: TN must be a multiple of 4, BM of TM, BN of TN, and both tiles of THREADS"
#endif

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
sgemm_bias(const float* __restrict__ a_t, const float* __restrict__ b, const float* __restrict__ bias,
           float* __restrict__ out, int M, int N, int Kd, int ldb, int ldc)
{
    __shared__ __align__(16) float s_a[2][BK][BM];
    __shared__ __align__(16) float s_b[2][BK][BN];

    const int t = threadIdx.x;
    const int tx = t % (BN / TN);
    const int ty = t / (BN / TN);
    const int m0 = blockIdx.y * BM;
    const int j0 = blockIdx.x * BN;

    float a_next[A_LOADS], b_next[B_LOADS];
    auto load = [&](int k0) {
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int idx = t + i * THREADS;
            const int k = k0 + idx / BM, m = m0 + idx % BM;
            a_next[i] = (k < Kd && m < M) ? a_t[(size_t)k * M + m] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int idx = t + i * THREADS;
            const int k = k0 + idx / BN, j = j0 + idx % BN;
            b_next[i] = (k < Kd && j < N) ? b[(size_t)k * ldb + j] : 0.0f;
        }
    };
    auto store = [&](int buffer) {
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int idx = t + i * THREADS;
            s_a[buffer][idx / BM][idx % BM] = a_next[i];
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int idx = t + i * THREADS;
            s_b[buffer][idx / BN][idx % BN] = b_next[i];
        }
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    load(0);
    store(0);
    __syncthreads();
    int buffer = 0;
    for (int k0 = 0; k0 < Kd; k0 += BK) {
        const bool more = k0 + BK < Kd;
        if (more) load(k0 + BK);
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], bv[TN];
#if TM % 4 == 0
#pragma unroll
            for (int q = 0; q < TM / 4; ++q) {
                const float4 v = *reinterpret_cast<const float4*>(&s_a[buffer][kk][ty * TM + 4 * q]);
                a[4 * q] = v.x; a[4 * q + 1] = v.y; a[4 * q + 2] = v.z; a[4 * q + 3] = v.w;
            }
#else
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = s_a[buffer][kk][ty * TM + i];
#endif
#pragma unroll
            for (int q = 0; q < COL_RUNS; ++q) {
                const float4 v = *reinterpret_cast<const float4*>(&s_b[buffer][kk][q * RUN_STRIDE + tx * 4]);
                bv[4 * q] = v.x; bv[4 * q + 1] = v.y; bv[4 * q + 2] = v.z; bv[4 * q + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
        }
        if (more) store(buffer ^ 1);
        __syncthreads();
        buffer ^= 1;
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + ty * TM + i;
        if (m >= M) break;
        const float row_bias = bias ? bias[m] : 0.0f;
        float* row = out + (size_t)m * ldc;
#pragma unroll
        for (int q = 0; q < COL_RUNS; ++q)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int j = j0 + q * RUN_STRIDE + tx * 4 + e;
                if (j < N) row[j] = acc[i][4 * q + e] + row_bias;
            }
    }
}
