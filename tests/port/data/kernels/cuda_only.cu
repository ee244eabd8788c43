// Compiles with HIP-Clang, not with nvcc: an AMDGCN builtin used without a platform guard.
#include <cuda_runtime.h>

__global__ void first_lane(int* out, int v) {
  out[blockIdx.x] = __builtin_amdgcn_readfirstlane(v);
}
