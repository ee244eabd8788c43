// Planted: code chosen by compute capability.
#include <cuda_runtime.h>

__device__ float fast_exp(float x) {
#if __CUDA_ARCH__ >= 800  // expect: cuda-arch-compare "__CUDA_ARCH__"
  return __expf(x);
#else
  return expf(x);
#endif
}
