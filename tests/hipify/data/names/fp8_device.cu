// CUDA's OCP fp8 in device code. Its translation is faithful on gfx90a and gfx950 and does not compile for
// gfx942, which has only the FNUZ encoding in device code (tests/hipify/test_names_compile.py).
#include <cuda_fp8.h>
#include <cuda_runtime.h>

__global__ void widen(const __nv_fp8_e4m3* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = float(in[i]);
}

__global__ void narrow(const float* in, __nv_fp8_e5m2* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __nv_fp8_e5m2(in[i]);
}
