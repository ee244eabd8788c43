// Planted: a 32-bit lane mask naming only some lanes, passed to a *_sync intrinsic (a full-warp 0xffffffff is
// translated; a partial one cannot be).
#include <cuda_runtime.h>

__global__ void butterfly(float* data) {
  float x = data[threadIdx.x];
  float y = __shfl_xor_sync(0x0000ffff, x, 1);  // expect: lane-mask-32 "__shfl_xor_sync"
  data[threadIdx.x] = x + y;
}
