//! GPU operations written once against CUDA names (rocm_compat decides what they are).
use std::ffi::CStr;
use std::os::raw::{c_char, c_void};

use rocm_compat::ffi::*;
use rocm_compat::{check, CudaError};

pub use crate::error::Error;
pub use crate::memory::{device_count, require_runtime};

/// Device memory that frees itself.
struct DeviceBuffer {
    ptr: *mut c_void,
}

impl DeviceBuffer {
    fn new(len: usize) -> Result<Self, CudaError> {
        let mut ptr = std::ptr::null_mut();
        // SAFETY: `ptr` is a valid out-pointer; at least one byte so the pointer is never null.
        check(unsafe { cudaMalloc(&mut ptr, len.max(1)) })?;
        Ok(DeviceBuffer { ptr })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from cudaMalloc and is freed once.
        unsafe { cudaFree(self.ptr) };
    }
}

pub fn checksum(data: &[u8]) -> Result<u64, Error> {
    require_runtime()?;
    let buffer = DeviceBuffer::new(data.len())?;
    // SAFETY: `buffer` holds at least data.len() bytes; `result` is a valid host out-pointer.
    unsafe {
        check(cudaMemcpy(
            buffer.ptr,
            data.as_ptr() as *const c_void,
            data.len(),
            cudaMemcpyHostToDevice,
        ))?;
        let mut result = 0u64;
        check(mr_checksum_device(
            buffer.ptr,
            data.len(),
            &mut result,
            std::ptr::null_mut(),
        ))?;
        Ok(result)
    }
}

pub struct CollectiveInfo {
    pub library: String,
    /// Whether the library loaded and exports every function the bridge needs.
    pub loaded: bool,
    pub version: Option<i32>,
    pub error: Option<String>,
}

fn load_collective() -> Result<(), Error> {
    let mut buf = [0 as c_char; 512];
    // SAFETY: `buf` is writable for its length; the bridge NUL-terminates what it writes.
    if unsafe { mr_collective_load(buf.as_mut_ptr(), buf.len()) } == 0 {
        Ok(())
    } else {
        // SAFETY: NUL-terminated by mr_collective_load.
        Err(Error::Collective(
            unsafe { CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .into_owned(),
        ))
    }
}

fn nccl(result: ncclResult_t, what: &'static str) -> Result<(), Error> {
    if result == ncclSuccess {
        Ok(())
    } else {
        Err(crate::comm::nccl_error(what, result))
    }
}

pub fn collective_info() -> CollectiveInfo {
    // SAFETY: returns a static NUL-terminated string.
    let library = unsafe { CStr::from_ptr(mr_collective_soname()) }
        .to_string_lossy()
        .into_owned();
    match load_collective() {
        Err(e) => CollectiveInfo {
            library,
            loaded: false,
            version: None,
            error: Some(e.to_string()),
        },
        Ok(()) => {
            let mut version = 0;
            // SAFETY: valid out-pointer; the library is loaded.
            match nccl(unsafe { ncclGetVersion(&mut version) }, "ncclGetVersion") {
                Ok(()) => CollectiveInfo {
                    library,
                    loaded: true,
                    version: Some(version),
                    error: None,
                },
                Err(e) => CollectiveInfo {
                    library,
                    loaded: true,
                    version: None,
                    error: Some(e.to_string()),
                },
            }
        }
    }
}

pub fn all_reduce_single_rank(values: &[f32]) -> Result<Vec<f32>, Error> {
    if let Err(no_device) = require_runtime() {
        // Without a GPU the library's own answer to a one-rank communicator is the error to report
        // (with the device error; when the library is missing, its load error is that answer).
        let id = crate::comm::unique_id()?;
        return Err(crate::comm::Communicator::new(&id, 1, 0, None)
            .err()
            .unwrap_or(no_device));
    }
    load_collective()?;
    // SAFETY: every pointer passed below is valid for the sizes given; the communicator is
    // destroyed on every path after a successful init.
    unsafe {
        check(cudaSetDevice(0))?;
        let bytes = std::mem::size_of_val(values);
        let buffer = DeviceBuffer::new(bytes)?;
        check(cudaMemcpy(
            buffer.ptr,
            values.as_ptr() as *const c_void,
            bytes,
            cudaMemcpyHostToDevice,
        ))?;
        let mut id = ncclUniqueId { internal: [0; 128] };
        nccl(ncclGetUniqueId(&mut id), "ncclGetUniqueId")?;
        let mut comm: ncclComm_t = std::ptr::null_mut();
        nccl(ncclCommInitRank(&mut comm, 1, id, 0), "ncclCommInitRank")?;
        let reduced = nccl(
            ncclAllReduce(
                buffer.ptr,
                buffer.ptr,
                values.len(),
                ncclFloat32,
                ncclSum,
                comm,
                std::ptr::null_mut(),
            ),
            "ncclAllReduce",
        )
        .and_then(|()| Ok(check(cudaDeviceSynchronize())?));
        ncclCommDestroy(comm);
        reduced?;
        let mut out = vec![0f32; values.len()];
        check(cudaMemcpy(
            out.as_mut_ptr() as *mut c_void,
            buffer.ptr,
            bytes,
            cudaMemcpyDeviceToHost,
        ))?;
        Ok(out)
    }
}

/// Names of the kernels linked into this build (csrc/manifest.toml); none on the CPU build.
pub fn kernel_names() -> Vec<String> {
    // SAFETY: the registry returns static NUL-terminated names for indices below the count.
    unsafe {
        (0..mr_kernel_count())
            .filter_map(|i| {
                let p = mr_kernel_name(i);
                (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
            })
            .collect()
    }
}

/// Runs a registered kernel in place on a device copy of `data` and returns the result.
pub fn launch_kernel(name: &str, data: &[u8]) -> Result<Vec<u8>, Error> {
    let names = kernel_names();
    let Some(index) = names.iter().position(|n| n == name) else {
        return Err(Error::Kernel(format!(
            "no kernel named {name:?} in this build; it has: [{}] (register one with `python -m tools port --add`; \
             the CPU build compiles no device code)",
            names.join(", ")
        )));
    };
    require_runtime()?;
    let buffer = DeviceBuffer::new(data.len())?;
    let mut out = vec![0u8; data.len()];
    // SAFETY: `buffer` and `out` hold data.len() bytes each.
    unsafe {
        check(cudaMemcpy(
            buffer.ptr,
            data.as_ptr() as *const c_void,
            data.len(),
            cudaMemcpyHostToDevice,
        ))?;
        check(mr_kernel_launch(
            index,
            buffer.ptr,
            data.len(),
            std::ptr::null_mut(),
        ))?;
        check(cudaDeviceSynchronize())?;
        check(cudaMemcpy(
            out.as_mut_ptr() as *mut c_void,
            buffer.ptr,
            data.len(),
            cudaMemcpyDeviceToHost,
        ))?;
    }
    Ok(out)
}
