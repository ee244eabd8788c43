// Planted: lane and warp indices computed for 32 lanes.
#include <cuda_runtime.h>

__global__ void lanes(int* out) {
  int lane = threadIdx.x & 31;  // expect: lane-math "& 31"
  int warp = threadIdx.x >> 5;  // expect: lane-math ">> 5"
  int tid = threadIdx.x;
  int l2 = tid % 32;  // expect: lane-math "% 32"
  out[tid] = lane + warp + l2;
}
