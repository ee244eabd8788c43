// Planted: a runtime API that HIP does not provide at all.
#include <cuda_runtime.h>

extern "C" cudaError_t plane_of(cudaArray_t array, cudaArray_t* plane) {
  return cudaArrayGetPlane(plane, array, 0);  // expect: unsupported "cudaArrayGetPlane"
}
