//! A CUDA-named error for both platforms: the code is the platform's raw value, the name and
//! message come from the runtime that produced it.
use std::ffi::CStr;
use std::fmt;

use crate::ffi::{self, cudaError_t};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaError {
    /// The raw value returned by the platform's runtime (CUDA or HIP numbering).
    pub code: cudaError_t,
    /// The error's name, e.g. `cudaErrorNoDevice` (`hipErrorNoDevice` on ROCm until the generated
    /// translation table lands).
    pub name: String,
    pub message: String,
}

impl CudaError {
    pub fn from_code(code: cudaError_t) -> Self {
        // SAFETY: both functions return pointers to static, NUL-terminated strings for any code.
        let (name, message) = unsafe {
            (
                cstr_or(ffi::cudaGetErrorName(code), "unknown"),
                cstr_or(ffi::cudaGetErrorString(code), ""),
            )
        };
        CudaError {
            code,
            name,
            message,
        }
    }

    /// No usable device: no driver, no GPU, or a driver too old for this runtime.
    pub fn is_no_device(&self) -> bool {
        matches!(
            self.name.as_str(),
            "cudaErrorNoDevice"
                | "cudaErrorInsufficientDriver"
                | "hipErrorNoDevice"
                | "hipErrorInsufficientDriver"
        )
    }
}

unsafe fn cstr_or(ptr: *const std::os::raw::c_char, fallback: &str) -> String {
    if ptr.is_null() {
        fallback.to_string()
    } else {
        CStr::from_ptr(ptr).to_string_lossy().into_owned()
    }
}

impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.name, self.code, self.message)
    }
}

impl std::error::Error for CudaError {}

/// `Ok(())` for `cudaSuccess`, the named error otherwise.
pub fn check(code: cudaError_t) -> Result<(), CudaError> {
    if code == ffi::cudaSuccess {
        Ok(())
    } else {
        Err(CudaError::from_code(code))
    }
}
