//! CUDA names for Rust; HIP (or a host emulation) underneath.
//!
//! Every other crate in the workspace reaches the GPU runtime, the collective library and the C++
//! bridge through this crate, with CUDA/NCCL names only. Which platform those names bind to is
//! chosen once, by `build.rs`, from `MONARCH_GPU_PLATFORM` (`cpu`, `cuda` or `rocm`):
//!
//! - `cuda`: the CUDA runtime (static cudart), the bridge compiled by nvcc, NCCL loaded at run time;
//! - `rocm`: the same names bound to their HIP equivalents (`cudaMalloc` -> `hipMalloc`), the
//!   hipified bridge, RCCL loaded at run time;
//! - `cpu`: a host emulation with the same signatures (memory is host memory, there are no
//!   devices), so the whole workspace builds and tests with no toolkit.
//!
//! The alias layer (`generated/`) is written by `python -m tools gen-compat` from the same mapping
//! database hipify uses; what aliases alone get wrong is handled by hand here: error numbering
//! (`error`), sticky errors (`error::check`), `CUdeviceptr` (`handles`), device properties and warp
//! size (`device`). Only this crate branches on the platform (tests/compat/test_no_branching.py).
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]

pub mod bridge;
pub mod checksum;
pub mod device;
pub mod error;
pub mod ffi;
mod generated;
pub mod handles;
#[cfg(mr_platform = "cpu")]
mod host;
pub mod nccl;
pub mod prefault;

pub use error::{check, CudaError};

/// The platform this build binds to: "cpu", "cuda" or "rocm".
pub const PLATFORM: &str = env!("MONARCH_GPU_PLATFORM");

/// DLPack's device type for this build's memory: `kDLCPU` (1) on cpu, `kDLCUDA` (2) on cuda,
/// `kDLROCM` (10) on rocm. A tensor handed to `from_dlpack` must live there.
#[cfg(mr_platform = "cpu")]
pub const DLPACK_DEVICE_TYPE: i32 = 1;
#[cfg(mr_platform = "cuda")]
pub const DLPACK_DEVICE_TYPE: i32 = 2;
#[cfg(mr_platform = "rocm")]
pub const DLPACK_DEVICE_TYPE: i32 = 10;

/// The `stream` a DLPack consumer passes to `__dlpack__` so that the producer's pending work is
/// ordered before ours: none on the CPU; the legacy default stream (1) on CUDA; the default stream
/// (0) on ROCm. Our own work synchronizes with the default stream (blocking streams, synchronous
/// copies), so the producer's work on any of its streams is done before we touch the memory.
#[cfg(mr_platform = "cpu")]
pub const DLPACK_STREAM: Option<i64> = None;
#[cfg(mr_platform = "cuda")]
pub const DLPACK_STREAM: Option<i64> = Some(1);
#[cfg(mr_platform = "rocm")]
pub const DLPACK_STREAM: Option<i64> = Some(0);
