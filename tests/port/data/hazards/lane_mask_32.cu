// Planted: a 32-bit lane mask passed to a *_sync intrinsic.
#include <cuda_runtime.h>

__global__ void butterfly(float* data) {
  float x = data[threadIdx.x];
  float y = __shfl_xor_sync(0xffffffff, x, 1);  // expect: lane-mask-32 "__shfl_xor_sync"
  data[threadIdx.x] = x + y;
}
