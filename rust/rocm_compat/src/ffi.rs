//! Raw CUDA-named types, constants and functions: everything a crate of the workspace needs to talk
//! to the GPU runtime, with CUDA names only. The runtime part is generated (`src/generated/`, by
//! `python -m tools gen-compat` from the hipify mapping database): on `rocm` each function is a thunk
//! into its HIP namesake, on `cuda` into CUDA, on `cpu` the host emulation in `host/`.
//!
//! The NCCL/RCCL names (`nccl.rs`), the C++ bridge (`bridge.rs`) and `CUdeviceptr` (`handles.rs`)
//! are re-exported here too, so users write `use rocm_compat::ffi::*` and get every CUDA-named item.
pub use crate::bridge::*;
pub use crate::generated::errors::*;
pub use crate::generated::runtime::*;
pub use crate::nccl::*;
