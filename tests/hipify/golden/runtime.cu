// Runtime API: types, functions, enums; comments and strings keep cudaMalloc.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <device_launch_parameters.h>
#include <cstdio>

#ifndef __DRIVER_TYPES_H__
#error "driver types expected"
#endif

#define CHECK(call)                                                       \
  do {                                                                    \
    cudaError_t err_ = (call);                                            \
    if (err_ != cudaSuccess) {                                            \
      fprintf(stderr, "cudaMalloc failed: %s\n", cudaGetErrorString(err_)); \
    }                                                                     \
  } while (0)

__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

int run(cudaStream_t stream, int n) {
  float* d = nullptr;
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  CHECK(cudaMalloc(&d, n * sizeof(float)));
  CHECK(cudaMemsetAsync(d, 0, n * sizeof(float), stream));
  scale<<<(n + 255) / 256, 256, 0, stream>>>(d, 2.0f, n);
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(stream));
  cudaEvent_t ev;
  cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  CHECK(cudaMemcpy(d, d, 4, cudaMemcpyDeviceToDevice));
  CHECK(cudaFree(d));
  return 0;
}
