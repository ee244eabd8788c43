// Planted: inline PTX.
#include <cuda_runtime.h>

__device__ unsigned lane_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));  // expect: inline-asm "asm"
  return id;
}
