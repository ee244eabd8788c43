// Planted: ballot results kept in 32 bits or counted with the 32-bit popcount.
#include <cuda_runtime.h>

__global__ void votes(const int* pred, int* out) {
  unsigned m = __ballot(pred[threadIdx.x]);  // expect: ballot-32 "unsigned m"
  int n = __popc(__activemask());  // expect: ballot-32 "__popc"
  out[threadIdx.x] = static_cast<int>(m) + n;
}
