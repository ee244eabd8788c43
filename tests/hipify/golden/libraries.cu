#include <cublas_v2.h>
#include <curand.h>
#include <cufft.h>
#include <cusparse.h>
#include <cub/cub.cuh>

namespace sum {
using namespace cub;
void go(cublasHandle_t h, curandGenerator_t g, cufftHandle p, cusparseHandle_t sp) {
  cublasCreate(&h);
  curandCreateGenerator(&g, CURAND_RNG_PSEUDO_DEFAULT);
  cufftPlan1d(&p, 1024, CUFFT_C2C, 1);
  cusparseCreate(&sp);
  size_t bytes = 0;
  cub::DeviceReduce::Sum(nullptr, bytes, (int*)nullptr, (int*)nullptr, 1);
  int cub = 3;  // a variable named cub is not the namespace
  (void)cub;
}
}  // namespace sum
