// A unit that reaches cuBLAS through the library's header (hipBLAS on ROCm).
#include <mylib/blas.h>

int make_and_drop() {
  cublasHandle_t handle;
  if (mylib::make_handle(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  return cublasDestroy(handle) == CUBLAS_STATUS_SUCCESS ? 0 : 1;
}
