// Warp-sync builtins with the 32-bit full-warp masks CUDA code uses, in every spelling the translation widens.
// tests/hipify/test_rocm_compile.py hipifies this file (with warp.cuh) for HIP 6.4 and 7.2 and compiles it for
// gfx942 with -Wall -Werror; tests/hipify/test_warp_sync.py checks the translation itself.
#include <cuda_runtime.h>
#include <stdint.h>

#include "warp.cuh"

constexpr unsigned kFullMask = 0xFFFFFFFFu;
static const uint32_t kAllLanes = ~0u;

__device__ int warp_votes(int pred) {
  unsigned active = __activemask();
  int all = __all_sync(FULL_MASK, pred);
  int any = __any_sync(kFullMask, pred);
  unsigned long long ballot = __ballot_sync(kAllLanes, pred);
  unsigned long long peers = __match_any_sync(0xffffffffU, pred);
  int first = __shfl_sync(active, pred, 0);
  __syncwarp(FULL_MASK);
  return all + any + static_cast<int>(ballot & 1ull) + static_cast<int>(peers & 1ull) + first;
}

__global__ void reduce(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? in[i] : 0.f;
  v = warp_sum(v) + warp_max(v);
  v += __shfl_xor_sync(-1, v, 1);
  v += __shfl_up_sync((unsigned)-1, v, 1);
  v += __shfl_sync(static_cast<unsigned int>(0xffffffff), v, 0);
  unsigned long long wide = __activemask();
  v += __shfl_sync(wide, v, 0);
  v += __shfl_sync(~0ull, v, 0);
  if (threadIdx.x % warpSize == 0) atomicAdd(out, v);
}

__global__ void votes(const int* p, int* out) { out[threadIdx.x] = warp_votes(p[threadIdx.x]); }

void launch(const float* in, float* out, int n, cudaStream_t s) {
  reduce<<<(n + 255) / 256, 256, 0, s>>>(in, out, n);
  cudaStreamSynchronize(s);  // unchecked, as CUDA code often is: hipError_t is [[nodiscard]]
  cudaGetLastError();
}
