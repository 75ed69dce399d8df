// window.cuh: the window of frames a stage across frames reads (conv3d.cu, conv3d_tc.cu): the
// used window positions' frames as a struct of 15 pointers, a kernel parameter. Include after
// setting TAPS (1..15).
#pragma once

struct Frames {
  const unsigned char* frame[15];
};

namespace {

// Frame k of the window (k may vary at run time: selected, so that the struct stays a kernel
// parameter rather than a copy in local memory).
__device__ __forceinline__ const unsigned char* frame_of(const Frames& src, int k) {
  const unsigned char* p = src.frame[0];
#pragma unroll
  for (int i = 1; i < TAPS; ++i)
    if (k == i) p = src.frame[i];
  return p;
}

}  // namespace
