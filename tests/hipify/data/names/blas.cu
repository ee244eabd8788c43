// cuBLAS GEMM-Ex and a complex GEMM as CUDA writes them: the translation writes hipBLAS's v2 names, which hipBLAS
// 2.x (HIP 6.x) declares only with HIPBLAS_V2 (tests/hipify/test_names_compile.py).
#include <cublas_v2.h>
#include <cuComplex.h>
#include <cuda_runtime.h>

cublasStatus_t gemm(cublasHandle_t handle, int m, int n, int k, const void* a, const void* b, void* c) {
  const float alpha = 1.0f;
  const float beta = 0.0f;
  cublasStatus_t status = cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &alpha, a, CUDA_R_16F, m, b,
                                       CUDA_R_16F, n, &beta, c, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  return cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, CUDA_R_16BF, m, m * k, b,
                                    CUDA_R_16BF, k, k * n, &beta, c, CUDA_R_32F, m, m * n, 4, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t cgemm(cublasHandle_t handle, int n, const cuComplex* a, const cuComplex* b, cuComplex* c) {
  const cuComplex one = make_cuComplex(1.0f, 0.0f);
  const cuComplex zero = make_cuComplex(0.0f, 0.0f);
  return cublasCgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);
}
