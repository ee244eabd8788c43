#pragma once
namespace mylib {
__device__ inline int lane_id() { return threadIdx.x & 31; }
}  // namespace mylib
