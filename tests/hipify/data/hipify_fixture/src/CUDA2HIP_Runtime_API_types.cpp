// fixture: kinds of data-type names
  {"cudaError_t",      {"hipError_t",     "", CONV_TYPE, API_RUNTIME, SEC::DATA_TYPES}},
  {"cudaSuccess",      {"hipSuccess",     "", CONV_NUMERIC_LITERAL, API_RUNTIME, SEC::DATA_TYPES}},
  {"CUDART_VERSION",   {"HIP_VERSION",    "", CONV_DEFINE, API_RUNTIME, SEC::DATA_TYPES, HIP_UNSUPPORTED}},
