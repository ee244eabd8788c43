//! Device properties behind one accessor: `cudaDeviceProp` and `hipDeviceProp_t` differ in layout,
//! so a C shim compiled against the real headers copies the fields Rust needs into one struct.
use std::os::raw::{c_char, c_int};

use crate::error::{check, CudaError};

#[repr(C)]
struct RawProperties {
    name: [c_char; 256],
    arch: [c_char; 64],
    major: c_int,
    minor: c_int,
    warp_size: c_int,
    multiprocessors: c_int,
    total_memory: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceProperties {
    pub name: String,
    /// `sm_90` on CUDA, `gfx90a` on ROCm.
    pub arch: String,
    pub major: i32,
    pub minor: i32,
    /// Read from the device: 32 on NVIDIA, 64 on CDNA, 32 on RDNA.
    pub warp_size: i32,
    pub multiprocessors: i32,
    pub total_memory: usize,
}

#[cfg(not(mr_platform = "cpu"))]
extern "C" {
    fn mr_get_device_properties(device: c_int, out: *mut RawProperties) -> c_int;
}

#[cfg(mr_platform = "cpu")]
unsafe fn mr_get_device_properties(_device: c_int, _out: *mut RawProperties) -> c_int {
    crate::ffi::cudaErrorInvalidDevice // the CPU build has no devices
}

fn text(raw: &[c_char]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The properties of `device`.
pub fn properties(device: i32) -> Result<DeviceProperties, CudaError> {
    let mut raw = RawProperties {
        name: [0; 256],
        arch: [0; 64],
        major: 0,
        minor: 0,
        warp_size: 0,
        multiprocessors: 0,
        total_memory: 0,
    };
    // SAFETY: `raw` is a valid, writable RawProperties with the layout of shim/device.h.
    check(unsafe { mr_get_device_properties(device, &mut raw) })?;
    Ok(DeviceProperties {
        name: text(&raw.name),
        arch: text(&raw.arch),
        major: raw.major,
        minor: raw.minor,
        warp_size: raw.warp_size,
        multiprocessors: raw.multiprocessors,
        total_memory: raw.total_memory,
    })
}
