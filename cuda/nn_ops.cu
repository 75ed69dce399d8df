// nn_ops.cu: the element-wise and pooling layers of streamconv.nn, on float32 device memory.
//
// relu:       y[i] = max(x[i], 0) for i < count (x and y may be the same buffer). One thread per
//             element, grid (ceil(count / 256)), block 256.
// max_pool2d: y[p][oy][ox] = max over the k x k window at (oy*s, ox*s) of plane p of x, for the
//             N*C planes of an N x C x H x W tensor; windows lie inside the image (floor mode, no
//             padding), so Ho = (H - k) / s + 1. One thread per output, block 256,
//             grid (ceil(Ho*Wo / 256), N*C).
// No macros.

extern "C" {

__global__ void relu(const float* __restrict__ x, float* __restrict__ y, long long count)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) y[i] = fmaxf(x[i], 0.0f);
}

__global__ void max_pool2d(const float* __restrict__ x, float* __restrict__ y, int H, int W,
                           int Ho, int Wo, int k, int s)
{
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= Ho * Wo) return;
    const int oy = p / Wo, ox = p % Wo;
    const float* plane = x + (size_t)blockIdx.y * H * W + (size_t)oy * s * W + (size_t)ox * s;
    float best = plane[0];
    for (int dy = 0; dy < k; ++dy)
        for (int dx = 0; dx < k; ++dx) best = fmaxf(best, plane[(size_t)dy * W + dx]);
    y[(size_t)blockIdx.y * Ho * Wo + p] = best;
}

}  // extern "C"
