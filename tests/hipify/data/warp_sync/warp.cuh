// A project header with warp-synchronous helpers and no include of its own: it relies on being included after
// the CUDA runtime (nvcc includes it implicitly). Full-warp masks in the spellings CUDA code uses.
#pragma once

#define FULL_MASK 0xffffffff

__device__ inline float warp_sum(float v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_down_sync(0xffffffff, v, offset);
  }
  return v;
}

__device__ inline float warp_max(float v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, offset));
  }
  return v;
}
