//! NCCL names (RCCL keeps them): types, constants and functions. On cuda/rocm each function is the
//! bridge's forwarder (`mr_nccl*`, csrc/collectives.cu) into the library loaded at run time; on cpu
//! it is the host implementation in `host/nccl.rs`.
use std::os::raw::{c_char, c_int, c_void};

#[cfg_attr(mr_platform = "cpu", allow(unused_imports))]
use crate::ffi::cudaStream_t;

pub type ncclResult_t = c_int;
pub type ncclComm_t = *mut c_void;
pub type ncclDataType_t = c_int;
pub type ncclRedOp_t = c_int;

pub const ncclSuccess: ncclResult_t = 0;
pub const ncclUnhandledCudaError: ncclResult_t = 1;
pub const ncclSystemError: ncclResult_t = 2;
pub const ncclInternalError: ncclResult_t = 3;
pub const ncclInvalidArgument: ncclResult_t = 4;
pub const ncclInvalidUsage: ncclResult_t = 5;
pub const ncclRemoteError: ncclResult_t = 6;
pub const ncclInProgress: ncclResult_t = 7;
pub const ncclInt8: ncclDataType_t = 0;
pub const ncclUint8: ncclDataType_t = 1;
pub const ncclInt32: ncclDataType_t = 2;
pub const ncclUint32: ncclDataType_t = 3;
pub const ncclInt64: ncclDataType_t = 4;
pub const ncclUint64: ncclDataType_t = 5;
pub const ncclFloat16: ncclDataType_t = 6;
pub const ncclFloat32: ncclDataType_t = 7;
pub const ncclFloat64: ncclDataType_t = 8;
pub const ncclBfloat16: ncclDataType_t = 9;
pub const ncclProd: ncclRedOp_t = 1;
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
    fn ncclCommGetAsyncError = mr_ncclCommGetAsyncError(comm: ncclComm_t, result: *mut ncclResult_t);
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
    /// The library's description of the last error (NCCL >= 2.13; thread/process-wide, `comm` may
    /// be null). When the library is not loaded: why it could not be loaded.
    #[link_name = "mr_ncclGetLastError"]
    pub fn ncclGetLastError(comm: ncclComm_t) -> *const c_char;
}
#[cfg(mr_platform = "cpu")]
pub use crate::host::{ncclGetErrorString, ncclGetLastError};

/// The `ncclResult_t` enumerator's name (NCCL and RCCL share the numbering).
pub fn result_name(result: ncclResult_t) -> &'static str {
    match result {
        ncclSuccess => "ncclSuccess",
        ncclUnhandledCudaError => "ncclUnhandledCudaError",
        ncclSystemError => "ncclSystemError",
        ncclInternalError => "ncclInternalError",
        ncclInvalidArgument => "ncclInvalidArgument",
        ncclInvalidUsage => "ncclInvalidUsage",
        ncclRemoteError => "ncclRemoteError",
        ncclInProgress => "ncclInProgress",
        _ => "ncclResult_t(unknown)",
    }
}
