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

// Frames in and out of the layers, for `--filter bank` (streamconv/nn/layer.py has the CPU twin).
//
// frame_to_planes: planes[c][y][x] = frame[y * pitch + x * C + c] as float (0..255): an
//   interleaved H x W x C uint8 frame (pitched device buffer) to a C x H x W float32 tensor.
//   Block (32, 8), grid (ceil(W / 32), ceil(H / 8)).
// maps_to_frame: M maps of Hm x Wm floats to an H x W x C uint8 frame, rounded half to even and
//   saturated. The frame is a grid of cells, cols across, each cell_h x cell_w; cell r, q shows
//   map r * cols + q, sampled nearest (map row = y' * Hm / cell_h for cell row y'); pixels of no
//   map are 0. colour = 1: channel c shows map c (one cell, M = C); else every channel shows the
//   cell's map (grey). Block (32, 8), grid (ceil(W / 32), ceil(H / 8)).

extern "C" {

__global__ void frame_to_planes(const unsigned char* __restrict__ frame, int pitch, float* __restrict__ planes,
                                int H, int W, int C)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= W || y >= H) return;
    const unsigned char* pixel = frame + (size_t)y * pitch + (size_t)x * C;
    for (int c = 0; c < C; ++c) planes[((size_t)c * H + y) * W + x] = (float)pixel[c];
}

__global__ void maps_to_frame(const float* __restrict__ maps, int M, int Hm, int Wm,
                              unsigned char* __restrict__ frame, int pitch, int H, int W, int C,
                              int cols, int cell_h, int cell_w, int colour)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= W || y >= H) return;
    const int r = y / cell_h, q = x / cell_w;
    const int map = r * cols + q;
    unsigned char* pixel = frame + (size_t)y * pitch + (size_t)x * C;
    if (q >= cols || map >= M) {
        for (int c = 0; c < C; ++c) pixel[c] = 0;
        return;
    }
    const int sy = (int)((long long)(y - r * cell_h) * Hm / cell_h);
    const int sx = (int)((long long)(x - q * cell_w) * Wm / cell_w);
    for (int c = 0; c < C; ++c) {
        const float v = maps[((size_t)(colour ? c : map) * Hm + sy) * Wm + sx];
        pixel[c] = (unsigned char)min(max(__float2int_rn(v), 0), 255);
    }
}

}  // extern "C"
