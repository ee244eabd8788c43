//! The `cpu` platform's CUDA runtime: the CUDA-named functions of `ffi` emulated on the host, so code written
//! against CUDA names runs unchanged with no toolkit. There are no devices (`cudaGetDeviceCount`
//! reports 0); "device" memory is host memory; streams and events are host objects and every
//! operation completes synchronously. Errors use CUDA's numbering and, as in CUDA, a failed call also
//! leaves its error in a per-thread last-error slot (`cudaGetLastError` takes it, `cudaPeekAtLastError`
//! reads it). Functions the workspace uses but this file does not define get a generated stub that
//! answers `cudaErrorNotSupported` (`generated/runtime.rs`).
#![allow(clippy::missing_safety_doc)]
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::Cell;
use std::os::raw::{c_char, c_int, c_void};
use std::time::Instant;

use super::pages;

pub(crate) use crate::ffi::cudaErrorInvalidValue;
use crate::ffi::{
    cudaErrorInvalidDevice, cudaErrorMemoryAllocation, cudaError_t, cudaEvent_t, cudaMemcpyKind,
    cudaStream_t, cudaSuccess,
};

const HEADER: usize = 16;

thread_local! {
    static LAST_ERROR: Cell<cudaError_t> = const { Cell::new(cudaSuccess) };
}

/// Records a failure in the last-error slot, as the CUDA runtime does, and returns it.
fn fail(code: cudaError_t) -> cudaError_t {
    LAST_ERROR.with(|slot| slot.set(code));
    code
}

pub unsafe fn cudaGetDeviceCount(count: *mut c_int) -> cudaError_t {
    if count.is_null() {
        return fail(cudaErrorInvalidValue);
    }
    *count = 0;
    0
}
pub unsafe fn cudaSetDevice(_device: c_int) -> cudaError_t {
    fail(cudaErrorInvalidDevice)
}
pub unsafe fn cudaGetDevice(device: *mut c_int) -> cudaError_t {
    if !device.is_null() {
        *device = 0;
    }
    0
}
/// Host allocation with the size stored in a 16-byte header, so `cudaFree` can rebuild the layout.
/// From `pages::MAP_MIN` bytes up, a mapping of its own (zero-filled by the kernel, the header at the
/// end of a page in front of the data), so its pages can be prefaulted and advised
/// (`crate::prefault`) and are returned to the system on free.
pub unsafe fn cudaMalloc(ptr: *mut *mut c_void, size: usize) -> cudaError_t {
    if ptr.is_null() {
        return fail(cudaErrorInvalidValue);
    }
    if size >= pages::MAP_MIN {
        let Some(total) = size.checked_add(pages::HEADER_PAGE) else {
            return fail(cudaErrorMemoryAllocation);
        };
        let base = pages::map(total);
        if !base.is_null() {
            let data = base.add(pages::HEADER_PAGE);
            (data.sub(HEADER) as *mut usize).write(size);
            (data.sub(HEADER / 2) as *mut usize).write(pages::MAPPED);
            *ptr = data as *mut c_void;
            return 0;
        }
        // No mapping (not Linux, or refused): the allocator may still manage.
    }
    let Ok(layout) = Layout::from_size_align(size + HEADER, HEADER) else {
        return fail(cudaErrorMemoryAllocation);
    };
    let base = alloc_zeroed(layout);
    if base.is_null() {
        return fail(cudaErrorMemoryAllocation);
    }
    (base as *mut usize).write(size);
    (base.add(HEADER / 2) as *mut usize).write(0);
    *ptr = base.add(HEADER) as *mut c_void;
    0
}
pub unsafe fn cudaFree(ptr: *mut c_void) -> cudaError_t {
    if ptr.is_null() {
        return 0;
    }
    let size = pages::allocation_size(ptr);
    if pages::mapped(ptr) {
        pages::unmap(
            (ptr as *mut u8).sub(pages::HEADER_PAGE),
            size + pages::HEADER_PAGE,
        );
        return 0;
    }
    let base = (ptr as *mut u8).sub(HEADER);
    dealloc(
        base,
        Layout::from_size_align_unchecked(size + HEADER, HEADER),
    );
    0
}
pub unsafe fn cudaMemcpy(
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    _kind: cudaMemcpyKind,
) -> cudaError_t {
    if count > 0 && (dst.is_null() || src.is_null()) {
        return fail(cudaErrorInvalidValue);
    }
    std::ptr::copy(src as *const u8, dst as *mut u8, count);
    0
}
pub unsafe fn cudaMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: cudaMemcpyKind,
    _stream: cudaStream_t,
) -> cudaError_t {
    cudaMemcpy(dst, src, count, kind)
}
pub unsafe fn cudaMemset(ptr: *mut c_void, value: c_int, count: usize) -> cudaError_t {
    if count > 0 && ptr.is_null() {
        return fail(cudaErrorInvalidValue);
    }
    std::ptr::write_bytes(ptr as *mut u8, value as u8, count);
    0
}
/// The host's memory stands in for the device's: MemAvailable and MemTotal of /proc/meminfo.
pub unsafe fn cudaMemGetInfo(free: *mut usize, total: *mut usize) -> cudaError_t {
    if free.is_null() || total.is_null() {
        return fail(cudaErrorInvalidValue);
    }
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<usize>().ok())
            .map(|kib| kib.saturating_mul(1024))
    };
    match (field("MemAvailable:"), field("MemTotal:")) {
        (Some(f), Some(t)) => {
            *free = f;
            *total = t;
            0
        }
        _ => fail(cudaErrorInvalidDevice),
    }
}
pub unsafe fn cudaStreamCreate(stream: *mut cudaStream_t) -> cudaError_t {
    if stream.is_null() {
        return fail(cudaErrorInvalidValue);
    }
    *stream = Box::into_raw(Box::new(0u8)) as cudaStream_t;
    0
}
pub unsafe fn cudaStreamDestroy(stream: cudaStream_t) -> cudaError_t {
    if !stream.is_null() {
        drop(Box::from_raw(stream as *mut u8));
    }
    0
}
pub unsafe fn cudaStreamSynchronize(_stream: cudaStream_t) -> cudaError_t {
    0
}
pub unsafe fn cudaDeviceSynchronize() -> cudaError_t {
    0
}
pub unsafe fn cudaGetLastError() -> cudaError_t {
    LAST_ERROR.with(|slot| slot.replace(cudaSuccess))
}
pub unsafe fn cudaPeekAtLastError() -> cudaError_t {
    LAST_ERROR.with(Cell::get)
}
pub unsafe fn cudaRuntimeGetVersion(version: *mut c_int) -> cudaError_t {
    if !version.is_null() {
        *version = 0;
    }
    0
}
pub unsafe fn cudaDriverGetVersion(version: *mut c_int) -> cudaError_t {
    cudaRuntimeGetVersion(version)
}
/// Host events hold the instant they were last recorded.
pub unsafe fn cudaEventCreate(event: *mut cudaEvent_t) -> cudaError_t {
    if event.is_null() {
        return fail(cudaErrorInvalidValue);
    }
    *event = Box::into_raw(Box::new(Instant::now())) as cudaEvent_t;
    0
}
pub unsafe fn cudaEventDestroy(event: cudaEvent_t) -> cudaError_t {
    if !event.is_null() {
        drop(Box::from_raw(event as *mut Instant));
    }
    0
}
pub unsafe fn cudaEventRecord(event: cudaEvent_t, _stream: cudaStream_t) -> cudaError_t {
    if event.is_null() {
        return fail(cudaErrorInvalidValue);
    }
    *(event as *mut Instant) = Instant::now();
    0
}
pub unsafe fn cudaEventSynchronize(_event: cudaEvent_t) -> cudaError_t {
    0
}
pub unsafe fn cudaEventElapsedTime(
    ms: *mut f32,
    start: cudaEvent_t,
    end: cudaEvent_t,
) -> cudaError_t {
    if ms.is_null() || start.is_null() || end.is_null() {
        return fail(cudaErrorInvalidValue);
    }
    let (a, b) = (*(start as *const Instant), *(end as *const Instant));
    *ms = b.saturating_duration_since(a).as_secs_f32() * 1000.0;
    0
}

pub(crate) fn static_cstr(s: &'static [u8]) -> *const c_char {
    s.as_ptr() as *const c_char
}
pub unsafe fn cudaGetErrorName(error: cudaError_t) -> *const c_char {
    crate::error::table()
        .iter()
        .find(|e| e.cuda_code == error)
        .map_or(static_cstr(b"cudaErrorUnknown\0"), |e| e.cuda_name_ptr())
}
pub unsafe fn cudaGetErrorString(error: cudaError_t) -> *const c_char {
    match error {
        0 => static_cstr(b"no error\0"),
        1 => static_cstr(b"invalid argument\0"),
        2 => static_cstr(b"out of memory\0"),
        100 => static_cstr(b"no CUDA-capable device is detected\0"),
        101 => static_cstr(b"the CPU build of monarch-runtime has no GPU devices\0"),
        801 => static_cstr(b"operation not supported on the CPU build of monarch-runtime\0"),
        _ => static_cstr(b"unknown error\0"),
    }
}
