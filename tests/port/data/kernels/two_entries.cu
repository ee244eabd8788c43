#include <cuda_runtime.h>

extern "C" cudaError_t mr_kernel_a(void* data, size_t nbytes, cudaStream_t stream) { return cudaSuccess; }
extern "C" cudaError_t mr_kernel_b(void* data, size_t nbytes, cudaStream_t stream) { return cudaSuccess; }
// Not an entry point: wrong parameters.
extern "C" cudaError_t mr_kernel_c(float* data, int n) { return cudaSuccess; }
