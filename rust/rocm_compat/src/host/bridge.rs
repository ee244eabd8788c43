//! The bridge on the CPU platform: the checksum runs the host reference; there is no collective
//! library and no registered kernel.
#![allow(clippy::missing_safety_doc)]
use std::os::raw::{c_char, c_int, c_void};

use super::runtime::{cudaErrorInvalidValue, static_cstr};
use crate::ffi::{cudaError_t, cudaStream_t};

/// Threads for a large checksum: the host's cores stand in for the device's.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

pub unsafe fn mr_checksum_device(
    data: *const c_void,
    nbytes: usize,
    result: *mut u64,
    _s: cudaStream_t,
) -> cudaError_t {
    if result.is_null() || (nbytes > 0 && data.is_null()) {
        return cudaErrorInvalidValue;
    }
    let bytes = if nbytes == 0 {
        &[][..]
    } else {
        std::slice::from_raw_parts(data as *const u8, nbytes)
    };
    *result = crate::checksum::finalize(
        crate::checksum::partial_parallel(bytes, 0, threads()),
        nbytes,
    );
    0
}
pub unsafe fn mr_checksum_partial(
    data: *const c_void,
    nbytes: usize,
    word_offset: u64,
    sum: *mut u64,
    _s: cudaStream_t,
) -> cudaError_t {
    if sum.is_null() || (nbytes > 0 && data.is_null()) {
        return cudaErrorInvalidValue;
    }
    let bytes = if nbytes == 0 {
        &[][..]
    } else {
        std::slice::from_raw_parts(data as *const u8, nbytes)
    };
    *sum = crate::checksum::partial_parallel(bytes, word_offset, threads());
    0
}
pub unsafe fn mr_collective_load(error: *mut c_char, error_len: usize) -> c_int {
    // The in-process communicators (host/nccl.rs) are an emulation, not a library: this stays -1 so
    // build_info() says no NCCL/RCCL is loaded.
    let msg = b"the CPU build has no collective library (NCCL/RCCL need a CUDA or ROCm build); \
                its communicators connect threads of one process (host emulation)";
    if !error.is_null() && error_len > 0 {
        let n = msg.len().min(error_len - 1);
        std::ptr::copy_nonoverlapping(msg.as_ptr() as *const c_char, error, n);
        *error.add(n) = 0;
    }
    -1
}
pub unsafe fn mr_collective_soname() -> *const c_char {
    static_cstr(b"\0")
}

// ---- Registered kernels: device code only, none on the CPU build. ----
pub unsafe fn mr_kernel_count() -> usize {
    0
}
pub unsafe fn mr_kernel_name(_index: usize) -> *const c_char {
    std::ptr::null()
}
pub unsafe fn mr_kernel_launch(
    _index: usize,
    _data: *mut c_void,
    _nbytes: usize,
    _stream: cudaStream_t,
) -> cudaError_t {
    cudaErrorInvalidValue
}
