// Planted: CUDA-only headers (libcu++ pipelines and barriers).
#include <cuda/pipeline>  // expect: cuda-only-header "cuda/pipeline"
#include <cuda/barrier>  // expect: cuda-only-header "cuda/barrier"
#include <cuda_runtime.h>

__global__ void staged(float* data) { data[threadIdx.x] += 1.f; }
