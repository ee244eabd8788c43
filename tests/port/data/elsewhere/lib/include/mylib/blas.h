// The library's cuBLAS helper.
#pragma once
#include <cublas_v2.h>

namespace mylib {
inline cublasStatus_t make_handle(cublasHandle_t* handle) { return cublasCreate(handle); }
}  // namespace mylib
