// Compiles with nvcc, not with HIP 5.2: the warp-reduce intrinsics (sm_80+) have no HIP equivalent
// there, and hipify's tables do not know them, so only the ROCm compile can tell.
#include <cuda_runtime.h>

__global__ void block_votes(unsigned* out, unsigned v) {
  cudaStream_t* unused = nullptr; unsigned total = __reduce_add_sync(__activemask(), v);
  if (threadIdx.x == 0 && unused == nullptr) *out = total;
}
