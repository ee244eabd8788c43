#include "kernels.cuh"

template <typename T, int N>
__global__ void fill(T* p, T v) { p[threadIdx.x] = v; }

namespace ns { __global__ void k0() {} }

void launch(float* p, cudaStream_t s, dim3 g, dim3 b) {
  fill<float, 4><<<g, b, 0, s>>>(p, 1.0f);
  ns::k0<<<1, 1>>>();
  fill<float, 4><<<dim3(2, 2), 64>>>(
      p,
      std::max(1.0f, 2.0f));
  // fill<<<1, 1>>>(p) in a comment stays
  const char* text = "k<<<1,1>>>()";
}
