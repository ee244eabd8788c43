// Planted: cooperative-groups features HIP lacks, and a grid-wide sync.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

__global__ void clustered(float* data) {
  auto cluster = cg::this_cluster();  // expect: coop-groups "this_cluster"
  cluster.sync();
  cg::this_grid().sync();  // expect: grid-sync "this_grid"
  data[threadIdx.x] *= 2.f;
}
