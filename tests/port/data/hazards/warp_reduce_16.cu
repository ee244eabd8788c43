// Planted: a shuffle reduction that starts at offset 16 (covers 32 lanes of a 64-lane wavefront).
#include <cuda_runtime.h>

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) {  // expect: warp-reduce-16 "for"
    v += __shfl_down(v, offset);
  }
  return v;
}
