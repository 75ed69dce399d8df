// colour.cu: 4:2:0 planes <-> interleaved RGB frames, in the fixed-point arithmetic of
// streamconv/frames/yuv.py (integers only, so the GPU gives the CPU backend's samples exactly).
//
// The planes lie in one flat buffer (I420): Y (H x W), then U, then V (H/2 x W/2 each), rows packed;
// W and H are even. The RGB frame is H x W x 3 in a pitched device buffer (pitch in bytes). Samples
// are uint8 (SAMPLE_BYTES 1: yuv420p <-> 8-bit RGB) or uint16 (SAMPLE_BYTES 2: yuv420p10le or
// yuv420p12le code values <-> 16-bit RGB, 0..65535).
//
// yuv420_to_rgb: each chroma sample serves its 2 x 2 block; R = (CY (Y - Y0) + CRV (V - CMID)
//                + 2^(TO_RGB_BITS-1)) >> TO_RGB_BITS, G and B alike, clamped to 0..RGB_MAX.
// rgb_to_yuv420: Y per pixel (>> TO_YUV_BITS); U and V from the sums of R, G, B over the 2 x 2
//                block (>> TO_YUV_BITS + 2, then + CMID), clamped to 0..CODE_MAX.
//
// semi_planar_to_planes: a hardware decoder's surface (NV12 for 8 bits, P016 for more: a luma plane and
//                an interleaved U/V plane, each row `pitch` bytes, the samples in the high bits of 16
//                for P016) into the flat planes above; each sample >> `shift` (0, 6 for 10-bit, 4 for 12).
//
// Thread mapping (all three): one thread per 2 x 2 block, i.e. per chroma sample; block (32, 8),
// grid (ceil(W/2 / 32), ceil(H/2 / 8)).
//
// Macros (defaults: 8 bits, BT.601, limited range): SAMPLE_BYTES, Y0, CMID, CODE_MAX, RGB_MAX,
// TO_RGB_BITS, TO_YUV_BITS, YUV_SUM_BITS (32 or 64), CY, CRV, CGU, CGV, CBU (to RGB), YR, YG,
// YB, UR, UG, UB, VR, VG, VB (to YUV).

#ifndef SAMPLE_BYTES
#define SAMPLE_BYTES 1
#endif
#ifndef TO_RGB_BITS
#define TO_RGB_BITS 16
#endif
#ifndef TO_YUV_BITS
#define TO_YUV_BITS 16
#endif
#ifndef YUV_SUM_BITS
#define YUV_SUM_BITS 32
#endif
#ifndef Y0
#define Y0 16
#endif
#ifndef CMID
#define CMID 128
#endif
#ifndef CODE_MAX
#define CODE_MAX 255
#endif
#ifndef RGB_MAX
#define RGB_MAX 255
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

#if SAMPLE_BYTES == 1
typedef unsigned char sample_t;
typedef uchar2 sample2_t;
#define MAKE_SAMPLE2 make_uchar2
#elif SAMPLE_BYTES == 2
typedef unsigned short sample_t;
typedef ushort2 sample2_t;
#define MAKE_SAMPLE2 make_ushort2
#else
#error "SAMPLE_BYTES must be 1 or 2"
#endif

__device__ __forceinline__ sample_t clamp_rgb(int value)
{
    return (sample_t)min(max(value, 0), RGB_MAX);
}

__device__ __forceinline__ sample_t clamp_code(int value)
{
    return (sample_t)min(max(value, 0), CODE_MAX);
}

// RGB -> YUV sums: 32 bits for 8- and 10-bit video, 64 at 12 bits (2^21 x 4095 for a
// full-range white), as streamconv/frames/yuv.py decides (YUV_SUM_BITS).
#if YUV_SUM_BITS == 64
typedef long long yuv_sum_t;
#else
typedef int yuv_sum_t;
#endif

extern "C" {

__global__ void yuv420_to_rgb(const sample_t* __restrict__ yuv, sample_t* __restrict__ rgb,
                              int width, int height, int rgb_pitch_bytes)
{
    const int cx = blockIdx.x * blockDim.x + threadIdx.x;
    const int cy = blockIdx.y * blockDim.y + threadIdx.y;
    const int chroma_width = width >> 1;
    if (cx >= chroma_width || cy >= (height >> 1)) return;

    const int rgb_pitch = rgb_pitch_bytes / SAMPLE_BYTES;  // pitches are multiples of 16 bytes
    const size_t chroma_plane = (size_t)chroma_width * (height >> 1);
    const size_t chroma_at = (size_t)width * height + (size_t)cy * chroma_width + cx;
    const int u = yuv[chroma_at] - CMID;
    const int v = yuv[chroma_at + chroma_plane] - CMID;
    const int red = CRV * v, green = -(CGU * u + CGV * v), blue = CBU * u;

#pragma unroll
    for (int dy = 0; dy < 2; ++dy) {
        const int row = 2 * cy + dy;
        const sample2_t luma = *reinterpret_cast<const sample2_t*>(yuv + (size_t)row * width + 2 * cx);
        const int y0 = (luma.x - Y0) * CY + (1 << (TO_RGB_BITS - 1));
        const int y1 = (luma.y - Y0) * CY + (1 << (TO_RGB_BITS - 1));
        // 6 samples at an even offset: three aligned 2-sample stores.
        sample2_t* out = reinterpret_cast<sample2_t*>(rgb + (size_t)row * rgb_pitch + 6 * cx);
        out[0] = MAKE_SAMPLE2(clamp_rgb((y0 + red) >> TO_RGB_BITS), clamp_rgb((y0 + green) >> TO_RGB_BITS));
        out[1] = MAKE_SAMPLE2(clamp_rgb((y0 + blue) >> TO_RGB_BITS), clamp_rgb((y1 + red) >> TO_RGB_BITS));
        out[2] = MAKE_SAMPLE2(clamp_rgb((y1 + green) >> TO_RGB_BITS), clamp_rgb((y1 + blue) >> TO_RGB_BITS));
    }
}

__global__ void rgb_to_yuv420(const sample_t* __restrict__ rgb, int rgb_pitch_bytes,
                              sample_t* __restrict__ yuv, int width, int height)
{
    const int cx = blockIdx.x * blockDim.x + threadIdx.x;
    const int cy = blockIdx.y * blockDim.y + threadIdx.y;
    const int chroma_width = width >> 1;
    if (cx >= chroma_width || cy >= (height >> 1)) return;

    const int rgb_pitch = rgb_pitch_bytes / SAMPLE_BYTES;
    yuv_sum_t red_sum = 0, green_sum = 0, blue_sum = 0;
#pragma unroll
    for (int dy = 0; dy < 2; ++dy) {
        const int row = 2 * cy + dy;
        const sample2_t* in = reinterpret_cast<const sample2_t*>(rgb + (size_t)row * rgb_pitch + 6 * cx);
        const sample2_t a = in[0], b = in[1], c = in[2];  // r0 g0 | b0 r1 | g1 b1
        const yuv_sum_t half = (yuv_sum_t)1 << (TO_YUV_BITS - 1), black = (yuv_sum_t)Y0 << TO_YUV_BITS;
        const int luma0 = (int)((YR * (yuv_sum_t)a.x + YG * (yuv_sum_t)a.y + YB * (yuv_sum_t)b.x + black + half)
                                >> TO_YUV_BITS);
        const int luma1 = (int)((YR * (yuv_sum_t)b.y + YG * (yuv_sum_t)c.x + YB * (yuv_sum_t)c.y + black + half)
                                >> TO_YUV_BITS);
        *reinterpret_cast<sample2_t*>(yuv + (size_t)row * width + 2 * cx) =
            MAKE_SAMPLE2(clamp_code(luma0), clamp_code(luma1));
        red_sum += a.x + b.y;
        green_sum += a.y + c.x;
        blue_sum += b.x + c.y;
    }
    // Zero chroma is added after the shift (a whole multiple of 2^(TO_YUV_BITS + 2) before it), so
    // the sum stays within 32 bits for 16-bit RGB of 10-bit video.
    const yuv_sum_t half = (yuv_sum_t)1 << (TO_YUV_BITS + 1);
    const size_t chroma_plane = (size_t)chroma_width * (height >> 1);
    const size_t chroma_at = (size_t)width * height + (size_t)cy * chroma_width + cx;
    yuv[chroma_at] =
        clamp_code((int)((UR * red_sum + UG * green_sum + UB * blue_sum + half) >> (TO_YUV_BITS + 2)) + CMID);
    yuv[chroma_at + chroma_plane] =
        clamp_code((int)((VR * red_sum + VG * green_sum + VB * blue_sum + half) >> (TO_YUV_BITS + 2)) + CMID);
}

__global__ void semi_planar_to_planes(const unsigned char* __restrict__ luma,
                                      const unsigned char* __restrict__ chroma, int pitch_bytes,
                                      sample_t* __restrict__ yuv, int width, int height, int shift)
{
    const int cx = blockIdx.x * blockDim.x + threadIdx.x;
    const int cy = blockIdx.y * blockDim.y + threadIdx.y;
    const int chroma_width = width >> 1;
    if (cx >= chroma_width || cy >= (height >> 1)) return;

#pragma unroll
    for (int dy = 0; dy < 2; ++dy) {
        const int row = 2 * cy + dy;
        const sample2_t pair = *reinterpret_cast<const sample2_t*>(luma + (size_t)row * pitch_bytes
                                                                    + 2 * cx * SAMPLE_BYTES);
        *reinterpret_cast<sample2_t*>(yuv + (size_t)row * width + 2 * cx) =
            MAKE_SAMPLE2(pair.x >> shift, pair.y >> shift);
    }
    const sample2_t uv = *reinterpret_cast<const sample2_t*>(chroma + (size_t)cy * pitch_bytes
                                                              + 2 * cx * SAMPLE_BYTES);
    const size_t chroma_plane = (size_t)chroma_width * (height >> 1);
    const size_t chroma_at = (size_t)width * height + (size_t)cy * chroma_width + cx;
    yuv[chroma_at] = uv.x >> shift;
    yuv[chroma_at + chroma_plane] = uv.y >> shift;
}

}  // extern "C"
