// Planted: a literal 32 used as the warp size (shared-memory size, loop bound, constant).
#include <cuda_runtime.h>

constexpr int kWarp = 32;  // expect: warp-size-literal "32;"

__global__ void tile_sum(const float* in, float* out) {
  __shared__ float partial[32];  // expect: warp-size-literal "32]"
  partial[threadIdx.x % warpSize] = in[threadIdx.x];
  __syncthreads();
  float acc = 0.f;
  for (int i = 0; i < 32; ++i) {  // expect: warp-size-literal "32;"
    acc += partial[i];
  }
  out[blockIdx.x] = acc * kWarp;
}
