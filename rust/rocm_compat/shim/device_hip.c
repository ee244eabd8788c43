/* Device properties on the ROCm platform. Compiled by build.rs against the HIP headers found, so the
 * versioned symbol (hipGetDevicePropertiesR0600 from ROCm 6.0) is the one the header selects. */
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "device.h"

int mr_get_device_properties(int device, mr_device_properties* out) {
  hipDeviceProp_t prop;
  hipError_t err = hipGetDeviceProperties(&prop, device);
  if (err != hipSuccess) return (int)err;
  memset(out, 0, sizeof(*out));
  strncpy(out->name, prop.name, sizeof(out->name) - 1);
  /* gcnArchName is "gfx90a:sramecc+:xnack-": the arch is the part before the first colon. */
  size_t n = strcspn(prop.gcnArchName, ":");
  if (n >= sizeof(out->arch)) n = sizeof(out->arch) - 1;
  memcpy(out->arch, prop.gcnArchName, n);
  out->major = prop.major;
  out->minor = prop.minor;
  out->warp_size = prop.warpSize;
  out->multiprocessors = prop.multiProcessorCount;
  out->total_memory = prop.totalGlobalMem;
  return 0;
}
