// Planted: an API the target HIP (5.2) lacks: graph node parameters came in HIP 6.1, AddNode in 6.2.
#include <cuda_runtime.h>

extern "C" cudaError_t add_empty_node(cudaGraph_t graph) {
  cudaGraphNode_t node;
  cudaGraphNodeParams params{};  // expect: version "cudaGraphNodeParams"
  return cudaGraphAddNode(&node, graph, nullptr, nullptr, 0, &params);  // expect: version "cudaGraphAddNode"
}
