// Lane masks no rule can widen: each call is a blocking lane-mask-32 finding (tests/hipify/test_warp_sync.py),
// and the call is left as it is.
#include <cuda_runtime.h>

#define LOW_HALF 0x0000ffff
__constant__ unsigned kOdd = 0x55555555;

__device__ float with_parameter(float v, unsigned mask) {
  return __shfl_sync(mask, v, 0);  // a parameter: its callers' values are not known here
}

__device__ float partial(float v) {
  v += __shfl_down_sync(0x0000ffff, v, 1);  // lanes 0-15
  v += __shfl_down_sync(LOW_HALF, v, 1);  // the same, through a macro
  v += __shfl_down_sync((1u << 16) - 1, v, 1);  // the same, computed from constants
  v += __shfl_down_sync(kOdd, v, 1);  // the odd lanes
  return v;
}

__device__ float computed(float v, int lane) {
  unsigned mask = __ballot_sync(0xffffffff, lane < 16);  // a 64-bit ballot kept in 32 bits
  v += __shfl_sync(mask, v, 0);
  unsigned grown = 1;
  grown |= 2;
  v += __shfl_sync(grown, v, 0);  // assigned again: a run-time value
  return v;
}
