/* A layout-stable view of the device properties, filled from cudaDeviceProp or hipDeviceProp_t.
 * The two structs differ in size and fields (and HIP >= 6.0 renames hipGetDeviceProperties to
 * hipGetDevicePropertiesR0600 through a macro), so Rust never sees either struct: it sees this. */
#pragma once
#include <stddef.h>

typedef struct {
  char name[256];
  char arch[64]; /* "sm_90", "gfx90a" */
  int major;
  int minor;
  int warp_size;
  int multiprocessors;
  size_t total_memory;
} mr_device_properties;

/* Returns the platform's raw error code (0 on success). */
int mr_get_device_properties(int device, mr_device_properties* out);
