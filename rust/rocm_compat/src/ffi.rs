//! Raw CUDA-named types, constants and functions. On `rocm` each function links to its HIP
//! namesake; on `cpu` it is the host emulation in `host.rs`. The list below is the seed that
//! `python -m tools gen-compat` grows from the mapping table.
use std::os::raw::{c_char, c_int, c_void};

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

// ---- NCCL / RCCL: same names on both; the bridge loads the library and forwards (mr_ prefix). ----
pub type ncclResult_t = c_int;
pub type ncclComm_t = *mut c_void;
pub type ncclDataType_t = c_int;
pub type ncclRedOp_t = c_int;

pub const ncclSuccess: ncclResult_t = 0;
pub const ncclSystemError: ncclResult_t = 2;
pub const ncclInt32: ncclDataType_t = 2;
pub const ncclFloat16: ncclDataType_t = 6;
pub const ncclFloat32: ncclDataType_t = 7;
pub const ncclBfloat16: ncclDataType_t = 9;
pub const ncclSum: ncclRedOp_t = 0;
pub const ncclMax: ncclRedOp_t = 2;
pub const ncclMin: ncclRedOp_t = 3;
pub const ncclAvg: ncclRedOp_t = 4;

/// `ncclUniqueId`: 128 opaque bytes in NCCL and RCCL alike.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclUniqueId {
    pub internal: [c_char; 128],
}

macro_rules! nccl_functions {
    ($( fn $name:ident = $bridge:ident ( $($arg:ident : $ty:ty),* $(,)? ); )*) => {
        #[cfg(not(mr_platform = "cpu"))]
        extern "C" {
            $(
                #[link_name = stringify!($bridge)]
                pub fn $name($($arg: $ty),*) -> ncclResult_t;
            )*
        }
        #[cfg(mr_platform = "cpu")]
        pub use crate::host::{$($name),*};
    };
}

nccl_functions! {
    fn ncclGetVersion = mr_ncclGetVersion(version: *mut c_int);
    fn ncclGetUniqueId = mr_ncclGetUniqueId(id: *mut ncclUniqueId);
    fn ncclCommInitRank = mr_ncclCommInitRank(comm: *mut ncclComm_t, nranks: c_int, id: ncclUniqueId, rank: c_int);
    fn ncclCommDestroy = mr_ncclCommDestroy(comm: ncclComm_t);
    fn ncclCommAbort = mr_ncclCommAbort(comm: ncclComm_t);
    fn ncclAllReduce = mr_ncclAllReduce(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, op: ncclRedOp_t, comm: ncclComm_t, stream: cudaStream_t);
    fn ncclBroadcast = mr_ncclBroadcast(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, root: c_int, comm: ncclComm_t, stream: cudaStream_t);
    fn ncclSend = mr_ncclSend(sendbuff: *const c_void, count: usize, datatype: ncclDataType_t, peer: c_int, comm: ncclComm_t, stream: cudaStream_t);
    fn ncclRecv = mr_ncclRecv(recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, peer: c_int, comm: ncclComm_t, stream: cudaStream_t);
    fn ncclGroupStart = mr_ncclGroupStart();
    fn ncclGroupEnd = mr_ncclGroupEnd();
}

#[cfg(not(mr_platform = "cpu"))]
extern "C" {
    #[link_name = "mr_ncclGetErrorString"]
    pub fn ncclGetErrorString(result: ncclResult_t) -> *const c_char;
}
#[cfg(mr_platform = "cpu")]
pub use crate::host::ncclGetErrorString;

// ---- The C++ bridge (csrc/bridge.h). ----
#[cfg(not(mr_platform = "cpu"))]
extern "C" {
    pub fn mr_checksum_device(data: *const c_void, nbytes: usize, result: *mut u64, stream: cudaStream_t) -> cudaError_t;
    pub fn mr_collective_load(error: *mut c_char, error_len: usize) -> c_int;
    pub fn mr_collective_soname() -> *const c_char;
}
#[cfg(mr_platform = "cpu")]
pub use crate::host::{mr_checksum_device, mr_collective_load, mr_collective_soname};
