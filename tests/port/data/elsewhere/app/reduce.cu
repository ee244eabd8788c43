// A kernel whose headers live in another tree: tools port app/reduce.cu -I lib/include
#include <cstdio>

#include <mylib/block_sum.cuh>

#include "launch.h"

__global__ void sum_kernel(const float* in, float* out, int n) {
  float total = mylib::block_sum<256>(in, n);
  if (threadIdx.x == 0) *out = total;
}

extern "C" cudaError_t run_sum(const float* in, float* out, int n, cudaStream_t stream) {
  sum_kernel<<<1, 256, 0, stream>>>(in, out, n);
  return cudaGetLastError();
}
