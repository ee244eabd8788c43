# ruff: noqa
# fmt: off
# fixture: the shape of hipify-clang's --python map (its first table), not its code
import collections

CUDA_RENAMES_MAP = collections.OrderedDict([
    ("cudaMalloc", ("", CONV_MEMORY, API_RUNTIME)),
    ("cudaErrorTensorMemoryLeak", ("hipErrorTensorMemoryLeak", CONV_NUMERIC_LITERAL, API_RUNTIME, HIP_UNSUPPORTED)),
    ("CUDART_VERSION", ("HIP_VERSION", CONV_DEFINE, API_RUNTIME, HIP_UNSUPPORTED)),
    ("cuda_bf16.h", ("", CONV_INCLUDE, API_RUNTIME)),
])

C10_MAPPINGS = collections.OrderedDict([
    ("cudaSuccess", ("", CONV_TYPE, API_C10)),
])
