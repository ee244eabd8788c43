/* Device properties on the CUDA platform. Compiled by build.rs against the toolkit's headers. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "device.h"

int mr_get_device_properties(int device, mr_device_properties* out) {
  struct cudaDeviceProp prop;
  cudaError_t err = cudaGetDeviceProperties(&prop, device);
  if (err != cudaSuccess) return (int)err;
  memset(out, 0, sizeof(*out));
  strncpy(out->name, prop.name, sizeof(out->name) - 1);
  snprintf(out->arch, sizeof(out->arch), "sm_%d%d", prop.major, prop.minor);
  out->major = prop.major;
  out->minor = prop.minor;
  out->warp_size = prop.warpSize;
  out->multiprocessors = prop.multiProcessorCount;
  out->total_memory = prop.totalGlobalMem;
  return 0;
}
