//! NCCL on the CPU platform. For now the CPU build has no collective library: every call answers
//! ncclInvalidUsage. (The runtime issue replaces this with in-process, thread-based communicators.)
#![allow(clippy::missing_safety_doc)]
use std::os::raw::{c_char, c_int, c_void};

use super::runtime::static_cstr;
use crate::ffi::{
    cudaStream_t, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t, ncclUniqueId,
};

const ncclInvalidUsage: ncclResult_t = 5;

pub unsafe fn ncclGetVersion(_v: *mut c_int) -> ncclResult_t {
    ncclInvalidUsage
}
pub unsafe fn ncclGetUniqueId(_id: *mut ncclUniqueId) -> ncclResult_t {
    ncclInvalidUsage
}
pub unsafe fn ncclCommInitRank(
    _c: *mut ncclComm_t,
    _n: c_int,
    _id: ncclUniqueId,
    _r: c_int,
) -> ncclResult_t {
    ncclInvalidUsage
}
pub unsafe fn ncclCommDestroy(_c: ncclComm_t) -> ncclResult_t {
    ncclInvalidUsage
}
pub unsafe fn ncclCommAbort(_c: ncclComm_t) -> ncclResult_t {
    ncclInvalidUsage
}
pub unsafe fn ncclAllReduce(
    _s: *const c_void,
    _r: *mut c_void,
    _n: usize,
    _t: ncclDataType_t,
    _o: ncclRedOp_t,
    _c: ncclComm_t,
    _st: cudaStream_t,
) -> ncclResult_t {
    ncclInvalidUsage
}
pub unsafe fn ncclBroadcast(
    _s: *const c_void,
    _r: *mut c_void,
    _n: usize,
    _t: ncclDataType_t,
    _root: c_int,
    _c: ncclComm_t,
    _st: cudaStream_t,
) -> ncclResult_t {
    ncclInvalidUsage
}
pub unsafe fn ncclSend(
    _s: *const c_void,
    _n: usize,
    _t: ncclDataType_t,
    _p: c_int,
    _c: ncclComm_t,
    _st: cudaStream_t,
) -> ncclResult_t {
    ncclInvalidUsage
}
pub unsafe fn ncclRecv(
    _r: *mut c_void,
    _n: usize,
    _t: ncclDataType_t,
    _p: c_int,
    _c: ncclComm_t,
    _st: cudaStream_t,
) -> ncclResult_t {
    ncclInvalidUsage
}
pub unsafe fn ncclGroupStart() -> ncclResult_t {
    ncclInvalidUsage
}
pub unsafe fn ncclGroupEnd() -> ncclResult_t {
    ncclInvalidUsage
}
pub unsafe fn ncclGetErrorString(_r: ncclResult_t) -> *const c_char {
    static_cstr(b"the CPU build of monarch-runtime has no collective library\0")
}
