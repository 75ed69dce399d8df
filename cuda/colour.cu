// colour.cu: yuv420p planes <-> interleaved RGB uint8 frames, in the fixed-point arithmetic of
// streamconv/yuv.py (integers only, so the GPU gives the CPU backend's bytes exactly).
//
// The planes lie in one flat buffer (I420): Y (H x W), then U, then V (H/2 x W/2 each), rows packed;
// W and H are even. The RGB frame is H x W x 3 in a pitched device buffer.
//
// yuv420_to_rgb: each chroma sample serves its 2 x 2 block; R = (CY (Y - Y0) + CRV (V - 128) + 2^15)
//                >> 16, G and B alike, clamped to 0..255.
// rgb_to_yuv420: Y per pixel; U and V from the sums of R, G, B over the 2 x 2 block (>> 18).
//
// Thread mapping (both): one thread per 2 x 2 block, i.e. per chroma sample; block (32, 8),
// grid (ceil(W/2 / 32), ceil(H/2 / 8)).
//
// Macros (defaults: BT.601, limited range): Y0, CY, CRV, CGU, CGV, CBU (to RGB), YR, YG, YB, UR, UG,
// UB, VR, VG, VB (to YUV), FIXED_BITS.

#ifndef FIXED_BITS
#define FIXED_BITS 16
#endif
#ifndef Y0
#define Y0 16
#endif
#ifndef CY
#define CY 76309
#endif
#ifndef CRV
#define CRV 104597
#endif
#ifndef CGU
#define CGU 25675
#endif
#ifndef CGV
#define CGV 53279
#endif
#ifndef CBU
#define CBU 132201
#endif
#ifndef YR
#define YR 16829
#endif
#ifndef YG
#define YG 33039
#endif
#ifndef YB
#define YB 6416
#endif
#ifndef UR
#define UR (-9714)
#endif
#ifndef UG
#define UG (-19070)
#endif
#ifndef UB
#define UB 28784
#endif
#ifndef VR
#define VR 28784
#endif
#ifndef VG
#define VG (-24103)
#endif
#ifndef VB
#define VB (-4681)
#endif

__device__ __forceinline__ unsigned char clamp_byte(int value)
{
    return (unsigned char)min(max(value, 0), 255);
}

extern "C" {

__global__ void yuv420_to_rgb(const unsigned char* __restrict__ yuv, unsigned char* __restrict__ rgb,
                              int width, int height, int rgb_pitch)
{
    const int cx = blockIdx.x * blockDim.x + threadIdx.x;
    const int cy = blockIdx.y * blockDim.y + threadIdx.y;
    const int chroma_width = width >> 1;
    if (cx >= chroma_width || cy >= (height >> 1)) return;

    const size_t chroma_plane = (size_t)chroma_width * (height >> 1);
    const size_t chroma_at = (size_t)width * height + (size_t)cy * chroma_width + cx;
    const int u = yuv[chroma_at] - 128;
    const int v = yuv[chroma_at + chroma_plane] - 128;
    const int red = CRV * v, green = -(CGU * u + CGV * v), blue = CBU * u;

#pragma unroll
    for (int dy = 0; dy < 2; ++dy) {
        const int row = 2 * cy + dy;
        const uchar2 luma = *reinterpret_cast<const uchar2*>(yuv + (size_t)row * width + 2 * cx);
        const int y0 = (luma.x - Y0) * CY + (1 << (FIXED_BITS - 1));
        const int y1 = (luma.y - Y0) * CY + (1 << (FIXED_BITS - 1));
        // 6 bytes at an even offset: three aligned 2-byte stores.
        uchar2* out = reinterpret_cast<uchar2*>(rgb + (size_t)row * rgb_pitch + 6 * cx);
        out[0] = make_uchar2(clamp_byte((y0 + red) >> FIXED_BITS), clamp_byte((y0 + green) >> FIXED_BITS));
        out[1] = make_uchar2(clamp_byte((y0 + blue) >> FIXED_BITS), clamp_byte((y1 + red) >> FIXED_BITS));
        out[2] = make_uchar2(clamp_byte((y1 + green) >> FIXED_BITS), clamp_byte((y1 + blue) >> FIXED_BITS));
    }
}

__global__ void rgb_to_yuv420(const unsigned char* __restrict__ rgb, int rgb_pitch,
                              unsigned char* __restrict__ yuv, int width, int height)
{
    const int cx = blockIdx.x * blockDim.x + threadIdx.x;
    const int cy = blockIdx.y * blockDim.y + threadIdx.y;
    const int chroma_width = width >> 1;
    if (cx >= chroma_width || cy >= (height >> 1)) return;

    int red_sum = 0, green_sum = 0, blue_sum = 0;
#pragma unroll
    for (int dy = 0; dy < 2; ++dy) {
        const int row = 2 * cy + dy;
        const uchar2* in = reinterpret_cast<const uchar2*>(rgb + (size_t)row * rgb_pitch + 6 * cx);
        const uchar2 a = in[0], b = in[1], c = in[2];  // r0 g0 | b0 r1 | g1 b1
        const int half = 1 << (FIXED_BITS - 1), black = Y0 << FIXED_BITS;
        const int luma0 = (YR * a.x + YG * a.y + YB * b.x + black + half) >> FIXED_BITS;
        const int luma1 = (YR * b.y + YG * c.x + YB * c.y + black + half) >> FIXED_BITS;
        *reinterpret_cast<uchar2*>(yuv + (size_t)row * width + 2 * cx) =
            make_uchar2(clamp_byte(luma0), clamp_byte(luma1));
        red_sum += a.x + b.y;
        green_sum += a.y + c.x;
        blue_sum += b.x + c.y;
    }
    const int offset = (128 << (FIXED_BITS + 2)) + (1 << (FIXED_BITS + 1));
    const size_t chroma_plane = (size_t)chroma_width * (height >> 1);
    const size_t chroma_at = (size_t)width * height + (size_t)cy * chroma_width + cx;
    yuv[chroma_at] = clamp_byte((UR * red_sum + UG * green_sum + UB * blue_sum + offset) >> (FIXED_BITS + 2));
    yuv[chroma_at + chroma_plane] =
        clamp_byte((VR * red_sum + VG * green_sum + VB * blue_sum + offset) >> (FIXED_BITS + 2));
}

}  // extern "C"
