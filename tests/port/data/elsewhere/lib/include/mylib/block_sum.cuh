// A library header outside the kernel's tree (-I lib/include): cub, and a header of its own.
#pragma once
#include <cub/cub.cuh>

#include "detail/lanes.cuh"
#if defined(MYLIB_OTHER_BACKEND)  // another backend's code: no build here compiles it
#include "detail/other_backend.cuh"
#endif

namespace mylib {

template <int Threads>
__device__ float block_sum(const float* in, int n) {
  using Reduce = cub::BlockReduce<float, Threads>;
  __shared__ typename Reduce::TempStorage storage;
  float v = static_cast<int>(threadIdx.x) < n ? in[threadIdx.x] : 0.f;
  return lane_id() >= 0 ? Reduce(storage).Sum(v) : 0.f;
}

}  // namespace mylib
