#include <cuda.h>
#include <nccl.h>
#if defined(__CUDACC__) || defined(__NVCC__)
#define HOST_DEVICE __host__ __device__
#endif

/* driver API with a CRLF line next */
CUresult load(CUmodule* mod, const char* path) {
  CUdeviceptr ptr;
  cuMemAlloc(&ptr, 64);
  return cuModuleLoad(mod, path);
}

ncclResult_t reduce(ncclComm_t comm, cudaStream_t s, const float* in, float* out, size_t n) {
  return ncclAllReduce(in, out, n, ncclFloat, ncclSum, comm, s);
}
void crlf(cudaStream_t s) {
  cudaStreamDestroy(s);  // cudaStreamDestroy
}
