#pragma once
namespace mylib {
__device__ inline int other_warp() { return threadIdx.x >> 5; }
}  // namespace mylib
