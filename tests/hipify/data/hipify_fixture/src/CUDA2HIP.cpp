// fixture: the shape of HIPIFY's include map (two entries), not its code
const std::map <llvm::StringRef, hipCounter> CUDA_INCLUDE_MAP {
  {"cuda_runtime.h",                                        {"hip/hip_runtime.h",                                     "", CONV_INCLUDE_CUDA_MAIN_H,    API_RUNTIME, 0}},
  {"device_launch_parameters.h",                            {"",                                                      "", CONV_INCLUDE,                API_RUNTIME, 0}},
};
