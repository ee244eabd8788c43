// Parameters of scale2.cu (a header next to the kernel: `port --add` copies it along).
#pragma once

#include <cuda_runtime.h>

constexpr float kScale = 2.0f;
