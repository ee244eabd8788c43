// Thrust on a stream through CUDA Thrust's thrust::cuda policies (tests/hipify/test_names_compile.py).
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/sort.h>
#include <thrust/system/cuda/execution_policy.h>
#include <cuda_runtime.h>

void sort_on(cudaStream_t stream, int* data, int n) {
  thrust::device_ptr<int> begin(data);
  thrust::fill(thrust::cuda::par_nosync.on(stream), begin, begin + n, 0);
  thrust::sort(thrust::cuda::par.on(stream), begin, begin + n);
}
