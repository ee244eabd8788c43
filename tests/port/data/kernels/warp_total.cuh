// A header whose helper only CUDA has: the ROCm error must point here, at the CUDA header's line.
#pragma once

#include <cuda_runtime.h>

__device__ inline unsigned warp_total(unsigned v) {
  cudaStream_t* none = nullptr; return none ? 0u : __reduce_add_sync(__activemask(), v);
}
