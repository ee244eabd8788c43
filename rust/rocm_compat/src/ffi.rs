//! Raw CUDA-named types, constants and functions. On `rocm` each function links to its HIP
//! namesake; on `cpu` it is the host emulation in `host.rs`. The list below is the seed that
//! `python -m tools gen-compat` grows from the mapping table.
//!
//! The NCCL/RCCL names (`nccl.rs`) and the C++ bridge (`bridge.rs`) are re-exported here, so users
//! write `use rocm_compat::ffi::*` and get every CUDA-named item.
#[cfg(not(mr_platform = "cpu"))]
use std::os::raw::c_char;
use std::os::raw::{c_int, c_void};

pub use crate::bridge::*;
pub use crate::nccl::*;

pub type cudaError_t = c_int;
pub type cudaStream_t = *mut c_void;
pub type cudaEvent_t = *mut c_void;
pub type cudaMemcpyKind = c_int;

pub const cudaSuccess: cudaError_t = 0;
// cudaMemcpyKind has the same values in CUDA and HIP.
pub const cudaMemcpyHostToHost: cudaMemcpyKind = 0;
pub const cudaMemcpyHostToDevice: cudaMemcpyKind = 1;
pub const cudaMemcpyDeviceToHost: cudaMemcpyKind = 2;
pub const cudaMemcpyDeviceToDevice: cudaMemcpyKind = 3;
pub const cudaMemcpyDefault: cudaMemcpyKind = 4;

/// Declares CUDA runtime functions returning `cudaError_t`, with the HIP name each one links to on
/// the rocm platform.
macro_rules! cuda_runtime_functions {
    ($( fn $cuda:ident = $hip:ident ( $($arg:ident : $ty:ty),* $(,)? ); )*) => {
        #[cfg(not(mr_platform = "cpu"))]
        extern "C" {
            $(
                #[cfg_attr(mr_platform = "rocm", link_name = stringify!($hip))]
                pub fn $cuda($($arg: $ty),*) -> cudaError_t;
            )*
        }
        #[cfg(mr_platform = "cpu")]
        pub use crate::host::{$($cuda),*};
    };
}

cuda_runtime_functions! {
    fn cudaGetDeviceCount = hipGetDeviceCount(count: *mut c_int);
    fn cudaSetDevice = hipSetDevice(device: c_int);
    fn cudaGetDevice = hipGetDevice(device: *mut c_int);
    fn cudaMalloc = hipMalloc(ptr: *mut *mut c_void, size: usize);
    fn cudaFree = hipFree(ptr: *mut c_void);
    fn cudaMemcpy = hipMemcpy(dst: *mut c_void, src: *const c_void, count: usize, kind: cudaMemcpyKind);
    fn cudaMemcpyAsync = hipMemcpyAsync(dst: *mut c_void, src: *const c_void, count: usize, kind: cudaMemcpyKind, stream: cudaStream_t);
    fn cudaMemset = hipMemset(ptr: *mut c_void, value: c_int, count: usize);
    fn cudaMemGetInfo = hipMemGetInfo(free: *mut usize, total: *mut usize);
    fn cudaStreamCreate = hipStreamCreate(stream: *mut cudaStream_t);
    fn cudaStreamDestroy = hipStreamDestroy(stream: cudaStream_t);
    fn cudaStreamSynchronize = hipStreamSynchronize(stream: cudaStream_t);
    fn cudaDeviceSynchronize = hipDeviceSynchronize();
    fn cudaGetLastError = hipGetLastError();
    fn cudaRuntimeGetVersion = hipRuntimeGetVersion(version: *mut c_int);
    fn cudaDriverGetVersion = hipDriverGetVersion(version: *mut c_int);
    fn cudaEventCreate = hipEventCreate(event: *mut cudaEvent_t);
    fn cudaEventDestroy = hipEventDestroy(event: cudaEvent_t);
    fn cudaEventRecord = hipEventRecord(event: cudaEvent_t, stream: cudaStream_t);
    fn cudaEventSynchronize = hipEventSynchronize(event: cudaEvent_t);
    fn cudaEventElapsedTime = hipEventElapsedTime(ms: *mut f32, start: cudaEvent_t, end: cudaEvent_t);
}

#[cfg(not(mr_platform = "cpu"))]
extern "C" {
    #[cfg_attr(mr_platform = "rocm", link_name = "hipGetErrorName")]
    pub fn cudaGetErrorName(error: cudaError_t) -> *const c_char;
    #[cfg_attr(mr_platform = "rocm", link_name = "hipGetErrorString")]
    pub fn cudaGetErrorString(error: cudaError_t) -> *const c_char;
}
#[cfg(mr_platform = "cpu")]
pub use crate::host::{cudaGetErrorName, cudaGetErrorString};
