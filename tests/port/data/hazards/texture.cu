// Planted: a texture reference (gone from HIP and CUDA 12) and a texture fetch.
#include <cuda_runtime.h>

texture<float, 1> tex_ref;  // expect: texture-reference "texture<"

__global__ void gather(cudaTextureObject_t tex, float* out) {
  out[threadIdx.x] = tex1Dfetch<float>(tex, threadIdx.x);  // expect: texture-fetch "tex1Dfetch"
}
