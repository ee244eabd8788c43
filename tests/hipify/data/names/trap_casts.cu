// __trap in device code and kernels passed to the runtime API functions that HIP declares with const void* only
// (tests/hipify/test_names_compile.py compiles its translation for HIP 5.2, 6.4 and 7.2 with -Werror).
#include <cuda_runtime.h>

#define CHECK(call)                           \
  do {                                        \
    cudaError_t err_ = (call);                \
    if (err_ != cudaSuccess) return err_;     \
  } while (0)

namespace kernels {
template <typename T, int N>
__global__ void scale(T* p, T s) {
  if (N <= 0) __trap();
  p[threadIdx.x] *= s;
}
}  // namespace kernels

__global__ void plain(int* p) {
  if (p == nullptr) __trap();
  p[threadIdx.x] = 1;
}

using plain_t = void (*)(int*);

cudaError_t configure(int* p, cudaStream_t stream) {
  cudaFuncAttributes attr;
  CHECK(cudaFuncSetAttribute(kernels::scale<float, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 0));
  CHECK(cudaFuncSetAttribute(reinterpret_cast<plain_t>(plain), cudaFuncAttributeMaxDynamicSharedMemorySize, 0));
  CHECK(cudaFuncGetAttributes(&attr, plain));
  CHECK(cudaFuncGetAttributes(&attr, (void*)plain));
  CHECK(cudaFuncSetCacheConfig(&plain, cudaFuncCachePreferL1));
  const void* generic = reinterpret_cast<const void*>(plain);  // already void pointers: cast again, harmlessly
  void* raw = (void*)plain;
  CHECK(cudaFuncGetAttributes(&attr, generic));
  CHECK(cudaFuncSetCacheConfig(raw, cudaFuncCachePreferShared));
  CHECK(cudaFuncSetSharedMemConfig(kernels::scale<int, 2>, cudaSharedMemBankSizeDefault));
  int blocks = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernels::scale<float, 4>, 64, 0));
  float* data = nullptr;
  float factor = 2.0f;
  void* args[] = {&data, &factor};
  CHECK(cudaLaunchKernel(kernels::scale<float, 4>, dim3(1), dim3(64), args, 0, stream));
  void* plain_args[] = {&p};
  CHECK(cudaLaunchKernel(plain, dim3(1), dim3(64), plain_args));
  return cudaSuccess;
}
