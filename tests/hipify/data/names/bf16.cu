// bf16 kernels as CUDA writes them (tests/hipify/test_names_compile.py compiles the translation for HIP 6.4 and 7.2).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void axpy(const nv_bfloat16* x, nv_bfloat16* y, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16_rn(a * __bfloat162float(x[i]) + __bfloat162float(y[i]));
}

__global__ void pairs(const __nv_bfloat16* x, nv_bfloat162* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (2 * i + 1 < n) {
    nv_bfloat162 v = make_bfloat162(x[2 * i], x[2 * i + 1]);
    const float2 f = __bfloat1622float2(v);
    out[i] = __hmul2(__float22bfloat162_rn(f), v);
  }
}
