// No hazard: the warp size comes from the device, masks from __activemask().
#include <cuda_runtime.h>

__global__ void lanes(int* out) {
  int lane = threadIdx.x % warpSize;
  out[threadIdx.x] = lane;
}
