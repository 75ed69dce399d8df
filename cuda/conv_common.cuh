// conv_common.cuh: what every streamconv convolution kernel shares: the filter macros and their
// checks, border index mapping, byte <-> float conversion and the output rounding.
//
// Macros (each with a default): RADIUS 0..15 (K = 2R+1), CHANNELS 1..4 (interleaved samples per
// pixel), BORDER 0 zero / 1 replicate / 2 reflect101, BANKS 1 or 2 with COMBINE 0 or 1 (a bank of
// two taps combined as sqrt(a^2 + b^2)), ELEM_BYTES 1 (uint8 samples) or 2 (uint16 samples).
// Output semantics (streamconv's CPU backend): float32 accumulation, round half to even,
// saturate to 0..255 (uint8) or 0..65535 (uint16). No fast-math anywhere: the square root is
// the IEEE one.
#pragma once

#ifndef RADIUS
#define RADIUS 1
#endif
#ifndef CHANNELS
#define CHANNELS 3
#endif
#ifndef BORDER
#define BORDER 2
#endif
#ifndef BANKS
#define BANKS 1
#endif
#ifndef COMBINE
#define COMBINE 0
#endif
#ifndef ELEM_BYTES
#define ELEM_BYTES 1
#endif

#define KSIZE (2 * RADIUS + 1)

#if RADIUS < 0 || RADIUS > 15
#error "RADIUS must be 0..15"
#endif
#if CHANNELS < 1 || CHANNELS > 4
#error "CHANNELS must be 1..4"
#endif
#if BORDER < 0 || BORDER > 2
#error "BORDER must be 0 (zero), 1 (replicate) or 2 (reflect101)"
#endif
#if !((BANKS == 1 && COMBINE == 0) || (BANKS == 2 && COMBINE == 1))
#error "supported: BANKS 1 with COMBINE 0, BANKS 2 with COMBINE 1 (gradient magnitude)"
#endif
#if ELEM_BYTES != 1 && ELEM_BYTES != 2
#error "ELEM_BYTES must be 1 (uint8) or 2 (uint16)"
#endif

namespace conv {

constexpr int kK = KSIZE;
constexpr int kKK = KSIZE * KSIZE;

// Border index mapping of i into 0..n-1; -1 means "reads as zero" (BORDER 0 only).
// reflect101 is gfedcb|abcdefgh|gfedcba at any distance from the frame, 0 when n == 1.
__device__ __forceinline__ int map_index(int i, int n) {
  if ((unsigned)i < (unsigned)n) return i;
#if BORDER == 0
  return -1;
#elif BORDER == 1
  return i < 0 ? 0 : n - 1;
#else
  if (n == 1) return 0;
  const int period = 2 * n - 2;
  if (i < 0 && i > -n) return -i;               // usual case: within one frame of the edge
  if (i >= n && i < period) return period - i;
  i %= period;
  if (i < 0) i += period;
  return i >= n ? period - i : i;
#endif
}

// Source byte offset within a row of `width` pixels (row_bytes = width * CHANNELS) for byte
// column b (any integer), or -1 for a zero byte. The channel of b is kept.
__device__ __forceinline__ int map_column(int b, int row_bytes, int width) {
  if ((unsigned)b < (unsigned)row_bytes) return b;
  const int p = b >= 0 ? b / CHANNELS : -((CHANNELS - 1 - b) / CHANNELS);  // floor division
  const int q = map_index(p, width);
  return q < 0 ? -1 : q * CHANNELS + (b - p * CHANNELS);
}

// Byte `sel` (0..3) of w as float: the byte becomes the low mantissa of 2^23, 2^23 is then
// subtracted exactly (one PRMT and one FADD instead of a slower I2F).
__device__ __forceinline__ float byte_to_float(unsigned int w, int sel) {
  return __int_as_float((int)__byte_perm(w, 0x4B000000u, 0x7440u | (unsigned)sel)) - 8388608.0f;
}

// Byte `sel` (0..3) of w plus 2^15, as float: the byte becomes mantissa bits 8..15 of 2^15, so
// one PRMT and no FADD. A kernel that sums taps times these values subtracts the taps' sum times
// 2^15 once per output instead of 2^23 once per byte, at the cost of partial sums 2^15 times
// the taps' sum in magnitude (the host decides where that is exact enough:
// backends/families/register_blocked.py, conversion_offsets).
__device__ __forceinline__ float byte_plus_2p15(unsigned int w, int sel) {
  return __int_as_float((int)__byte_perm(w, 0x47000000u, 0x7404u | ((unsigned)sel << 4)));
}

// Round half to even and saturate to 0..255 in one conversion (NaN goes to 0).
__device__ __forceinline__ unsigned int to_u8(float v) {
  unsigned int r;
  asm("cvt.rni.sat.u8.f32 %0, %1;" : "=r"(r) : "f"(v));
  return r;
}

// The value a pixel's accumulators stand for: the single sum, or the bank's magnitude.
__device__ __forceinline__ float finish(float a0, float a1) {
#if COMBINE == 1
  // Explicit roundings: no FMA contraction, matching CPU float32 gx*gx + gy*gy.
  return sqrtf(__fadd_rn(__fmul_rn(a0, a0), __fmul_rn(a1, a1)));
#else
  (void)a1;
  return a0;
#endif
}

__device__ __forceinline__ unsigned int pack4(unsigned int b0, unsigned int b1, unsigned int b2,
                                              unsigned int b3) {
  return __byte_perm(__byte_perm(b0, b1, 0x0040u), __byte_perm(b2, b3, 0x0040u), 0x5410u);
}

// Samples of ELEM_BYTES each, kEPW to a 32-bit word (little-endian, sample 0 in the low bits).
#if ELEM_BYTES == 1
typedef unsigned char elem_t;
#else
typedef unsigned short elem_t;
#endif
constexpr int kES = ELEM_BYTES;
constexpr int kEPW = 4 / ELEM_BYTES;

// Sample `sel` (0..kEPW-1) of w as float, by the same exponent trick as byte_to_float: the
// sample (< 2^16) becomes the low mantissa of 2^23, which is exact.
__device__ __forceinline__ float elem_to_float(unsigned int w, int sel) {
#if ELEM_BYTES == 1
  return byte_to_float(w, sel);
#else
  const unsigned int s = 0x7400u | ((unsigned)(2 * sel + 1) << 4) | (unsigned)(2 * sel);
  return __int_as_float((int)__byte_perm(w, 0x4B000000u, s)) - 8388608.0f;
#endif
}

// Round half to even and saturate to the sample's range in one conversion (NaN goes to 0).
__device__ __forceinline__ unsigned int to_elem(float v) {
#if ELEM_BYTES == 1
  return to_u8(v);
#else
  unsigned int r;
  asm("cvt.rni.sat.u16.f32 %0, %1;" : "=r"(r) : "f"(v));
  return r;
#endif
}

// kEPW rounded samples (each in the low bits of v[i]) packed into one word.
__device__ __forceinline__ unsigned int pack_word(const unsigned int* v) {
#if ELEM_BYTES == 1
  return pack4(v[0], v[1], v[2], v[3]);
#else
  return __byte_perm(v[0], v[1], 0x5410u);
#endif
}

}  // namespace conv
