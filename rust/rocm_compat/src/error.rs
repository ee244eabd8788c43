//! A CUDA-named error for every platform.
//!
//! HIP numbers its errors differently from CUDA (`cudaErrorInvalidTexture` is 18,
//! `hipErrorInvalidTexture` 912, and 911/912 are other errors in CUDA), so an alias of the raw value
//! is not enough: the value is translated through the generated table (`generated/errors.rs`, from
//! the mapping database and the headers) and `CudaError::name` is always the CUDA name
//! (`cudaErrorNoDevice` on ROCm too). The message is the platform runtime's own.
//!
//! Handled errors are consumed: `check` takes the error it turns into `Err` out of the runtime's
//! per-thread last-error slot, the way CUDA code clears an expected failure with `cudaGetLastError`.
//! HIP (from ROCm 7, and for driver-style calls such as `hipPointerGetAttribute`) keeps a failed
//! call's error there until it is read, so an error Rust already handled would otherwise surface
//! again in the next unrelated `cudaGetLastError` check (PyTorch's kernel-launch check, say) — the
//! failure Monarch fixed by hand in PR #4226.
use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_char;

use crate::ffi::{self, cudaError_t};
use crate::generated::errors::{ERRORS, HIP_ONLY};

/// One row of the generated translation table: a CUDA error enumerator, its CUDA value, and its HIP
/// counterpart (name and value) or the reason it has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorEntry {
    /// The CUDA name with a trailing NUL (so it can be handed to C as is).
    cuda_name_nul: &'static str,
    pub cuda_code: cudaError_t,
    pub hip: Result<(&'static str, cudaError_t), &'static str>,
}

impl ErrorEntry {
    /// The CUDA name, e.g. `cudaErrorNoDevice`.
    pub fn cuda_name(&self) -> &'static str {
        self.cuda_name_nul.trim_end_matches('\0')
    }
    /// The CUDA name as a C string.
    pub fn cuda_name_ptr(&self) -> *const c_char {
        self.cuda_name_nul.as_ptr() as *const c_char
    }
    pub(crate) const fn mapped(
        cuda_name_nul: &'static str,
        cuda_code: cudaError_t,
        hip_name: &'static str,
        hip_code: cudaError_t,
    ) -> Self {
        ErrorEntry {
            cuda_name_nul,
            cuda_code,
            hip: Ok((hip_name, hip_code)),
        }
    }
    pub(crate) const fn unmapped(
        cuda_name_nul: &'static str,
        cuda_code: cudaError_t,
        why: &'static str,
    ) -> Self {
        ErrorEntry {
            cuda_name_nul,
            cuda_code,
            hip: Err(why),
        }
    }
}

/// The numbering an error value is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Numbering {
    /// CUDA's values (the cuda platform, and the cpu platform's emulation).
    Cuda,
    /// HIP's values (the rocm platform).
    Hip,
}

impl Numbering {
    /// The numbering of this build's runtime.
    pub const fn native() -> Self {
        if cfg!(mr_platform = "rocm") {
            Numbering::Hip
        } else {
            Numbering::Cuda
        }
    }
}

/// A CUDA error name with no value in the requested numbering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnmappedError {
    pub cuda_name: String,
    pub reason: String,
}

impl fmt::Display for UnmappedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} has no HIP equivalent: {}; HIP never returns it, so the ROCm build does not define it",
            self.cuda_name, self.reason
        )
    }
}

impl std::error::Error for UnmappedError {}

/// Every CUDA error enumerator this crate knows (the headers' `cudaError` enum), with its HIP counterpart.
pub fn table() -> &'static [ErrorEntry] {
    ERRORS
}

/// The CUDA name of error value `code` in `numbering`; `None` for a value no CUDA name has there.
pub fn cuda_name(code: cudaError_t, numbering: Numbering) -> Option<&'static str> {
    ERRORS
        .iter()
        .find(|e| match numbering {
            Numbering::Cuda => e.cuda_code == code,
            Numbering::Hip => matches!(e.hip, Ok((_, hip)) if hip == code),
        })
        .map(ErrorEntry::cuda_name)
}

/// The value of the CUDA error `cuda_name` in `numbering`. Unknown names, and names HIP has no
/// equivalent for (asked in HIP numbering), are an error that says why.
pub fn code_of(cuda_name: &str, numbering: Numbering) -> Result<cudaError_t, UnmappedError> {
    let Some(entry) = ERRORS.iter().find(|e| e.cuda_name() == cuda_name) else {
        return Err(UnmappedError {
            cuda_name: cuda_name.to_string(),
            reason: "not a CUDA runtime error name (not in the headers' cudaError enum)"
                .to_string(),
        });
    };
    match (numbering, entry.hip) {
        (Numbering::Cuda, _) => Ok(entry.cuda_code),
        (Numbering::Hip, Ok((_, hip))) => Ok(hip),
        (Numbering::Hip, Err(why)) => Err(UnmappedError {
            cuda_name: cuda_name.to_string(),
            reason: why.to_string(),
        }),
    }
}

/// The HIP name of a HIP error value no CUDA name maps to (e.g. `hipErrorRuntimeMemory`).
pub fn hip_only_name(code: cudaError_t) -> Option<&'static str> {
    HIP_ONLY.iter().find(|(_, v)| *v == code).map(|(n, _)| *n)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaError {
    /// The raw value returned by this platform's runtime (HIP numbering on ROCm).
    pub code: cudaError_t,
    /// The CUDA name on every platform, e.g. `cudaErrorNoDevice`; `cudaErrorUnknown` for a HIP error
    /// CUDA has no name for (then `platform_name` says which).
    pub name: String,
    /// The runtime's own name for it: `hipErrorNoDevice` on ROCm, the CUDA name elsewhere.
    pub platform_name: String,
    /// The runtime's message.
    pub message: String,
}

impl CudaError {
    pub fn from_code(code: cudaError_t) -> Self {
        // SAFETY: both functions return pointers to static, NUL-terminated strings for any value.
        let (platform_name, message) = unsafe {
            (
                cstr_or(ffi::cudaGetErrorName(code), ""),
                cstr_or(ffi::cudaGetErrorString(code), ""),
            )
        };
        let numbering = Numbering::native();
        match cuda_name(code, numbering) {
            Some(name) => CudaError {
                code,
                name: name.to_string(),
                platform_name: if platform_name.is_empty() || numbering == Numbering::Cuda {
                    name.to_string()
                } else {
                    platform_name
                },
                message,
            },
            None => {
                let platform_name = hip_only_name(code)
                    .map(str::to_string)
                    .filter(|_| numbering == Numbering::Hip)
                    .unwrap_or(platform_name);
                CudaError {
                    code,
                    name: "cudaErrorUnknown".to_string(),
                    message: format!(
                        "{message} ({} {code} has no CUDA equivalent)",
                        if platform_name.is_empty() {
                            "error"
                        } else {
                            &platform_name
                        }
                    ),
                    platform_name,
                }
            }
        }
    }

    /// No usable device: no driver, no GPU, or a driver too old for this runtime.
    pub fn is_no_device(&self) -> bool {
        matches!(
            self.name.as_str(),
            "cudaErrorNoDevice" | "cudaErrorInsufficientDriver"
        )
    }
}

unsafe fn cstr_or(ptr: *const c_char, fallback: &str) -> String {
    if ptr.is_null() {
        fallback.to_string()
    } else {
        CStr::from_ptr(ptr).to_string_lossy().into_owned()
    }
}

impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.platform_name == self.name {
            write!(f, "{} ({}): {}", self.name, self.code, self.message)
        } else {
            write!(
                f,
                "{} ({} {}): {}",
                self.name, self.platform_name, self.code, self.message
            )
        }
    }
}

impl std::error::Error for CudaError {}

/// `Ok(())` for `cudaSuccess`, the named error otherwise. The error returned is taken out of the
/// runtime's last-error slot when it is the one there, so a handled error does not surface again in
/// a later `cudaGetLastError` (a different pending error is left alone; an error that corrupted the
/// context stays, as on CUDA, because the runtime does not reset it).
pub fn check(code: cudaError_t) -> Result<(), CudaError> {
    if code == ffi::cudaSuccess {
        return Ok(());
    }
    let err = CudaError::from_code(code);
    // SAFETY: plain runtime queries without arguments.
    unsafe {
        if ffi::cudaPeekAtLastError() == code {
            ffi::cudaGetLastError();
        }
    }
    Err(err)
}

/// Takes the runtime's pending error, if any (`cudaGetLastError`), as a `CudaError`.
pub fn take_last_error() -> Result<(), CudaError> {
    // SAFETY: a plain runtime query without arguments.
    let code = unsafe { ffi::cudaGetLastError() };
    if code == ffi::cudaSuccess {
        Ok(())
    } else {
        Err(CudaError::from_code(code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mapped_cuda_error_round_trips_through_hip_numbering() {
        let mut mapped = 0;
        for entry in table() {
            let name = entry.cuda_name();
            if let Ok((hip_name, _)) = entry.hip {
                let hip = code_of(name, Numbering::Hip).unwrap();
                assert_eq!(
                    cuda_name(hip, Numbering::Hip),
                    Some(name),
                    "{name} -> {hip_name} {hip} -> ?"
                );
                mapped += 1;
            } else {
                assert!(code_of(name, Numbering::Hip).is_err());
            }
            let cuda = code_of(name, Numbering::Cuda).unwrap();
            assert_eq!(cuda_name(cuda, Numbering::Cuda), Some(name));
        }
        assert!(mapped >= 60, "only {mapped} errors mapped");
    }

    #[test]
    fn numbers_differ_where_cuda_and_hip_disagree() {
        // Same name, same value.
        assert_eq!(code_of("cudaErrorNoDevice", Numbering::Cuda), Ok(100));
        assert_eq!(code_of("cudaErrorNoDevice", Numbering::Hip), Ok(100));
        // Different names, translated: cudaErrorMemoryAllocation is hipErrorOutOfMemory.
        let oom = table()
            .iter()
            .find(|e| e.cuda_name() == "cudaErrorMemoryAllocation")
            .unwrap();
        assert_eq!(oom.hip.unwrap().0, "hipErrorOutOfMemory");
        // 912 is cudaErrorInvalidClusterSize in CUDA; in HIP it is not that error.
        assert_eq!(
            cuda_name(912, Numbering::Cuda),
            Some("cudaErrorInvalidClusterSize")
        );
        assert_ne!(
            cuda_name(912, Numbering::Hip),
            Some("cudaErrorInvalidClusterSize")
        );
        // cudaErrorInvalidTexture is 18 in CUDA; HIP value 18 is no CUDA error at all.
        assert_eq!(code_of("cudaErrorInvalidTexture", Numbering::Cuda), Ok(18));
        assert_eq!(cuda_name(18, Numbering::Hip), None);
        // Values where the CUDA and HIP numberings name different errors are translated by name.
        for entry in table() {
            if let Ok((_, hip)) = entry.hip {
                if hip != entry.cuda_code {
                    assert_eq!(cuda_name(hip, Numbering::Hip), Some(entry.cuda_name()));
                }
            }
        }
    }

    #[test]
    fn unmapped_names_give_a_clear_error() {
        let err = code_of("cudaErrorInvalidTextureBinding", Numbering::Hip).unwrap_err();
        assert_eq!(err.cuda_name, "cudaErrorInvalidTextureBinding");
        let text = err.to_string();
        assert!(
            text.contains("cudaErrorInvalidTextureBinding has no HIP equivalent"),
            "{text}"
        );
        assert!(text.contains("unsupported"), "{text}");
        // Mapped by HIPIFY, but absent from the oldest HIP headers the crate is generated against.
        let text = code_of("cudaErrorInvalidTexture", Numbering::Hip)
            .unwrap_err()
            .to_string();
        assert!(text.contains("not in the HIP"), "{text}");
        let err = code_of("cudaErrorNoSuchThing", Numbering::Cuda).unwrap_err();
        assert!(err.to_string().contains("not a CUDA runtime error name"));
    }

    #[test]
    fn hip_only_errors_have_their_hip_name() {
        assert_eq!(hip_only_name(1052), Some("hipErrorRuntimeMemory"));
        assert_eq!(cuda_name(1052, Numbering::Hip), None);
        assert_eq!(hip_only_name(100), None);
    }

    #[test]
    fn constants_use_the_native_numbering() {
        assert_eq!(
            code_of("cudaErrorNoDevice", Numbering::native()),
            Ok(ffi::cudaErrorNoDevice)
        );
        assert_eq!(
            code_of("cudaErrorMemoryAllocation", Numbering::native()),
            Ok(ffi::cudaErrorMemoryAllocation)
        );
    }

    #[test]
    fn errors_carry_the_cuda_name() {
        let err = CudaError::from_code(ffi::cudaErrorInvalidDevice);
        assert_eq!(err.name, "cudaErrorInvalidDevice");
        assert!(!err.message.is_empty());
        assert!(!err.is_no_device());
        assert!(CudaError::from_code(ffi::cudaErrorNoDevice).is_no_device());
        assert!(err.to_string().starts_with("cudaErrorInvalidDevice ("));
    }

    /// Runs against whatever runtime this build links (the real HIP or CUDA runtime on a rocm/cuda
    /// build, with or without a GPU): errors come back CUDA-named and are consumed by `check`.
    #[test]
    fn runtime_errors_are_cuda_named_and_consumed() {
        let mut count = -1;
        // SAFETY: `count` is a valid out-pointer.
        let code = unsafe { ffi::cudaGetDeviceCount(&mut count) };
        // Without a usable device the runtime cannot initialise and answers every call, the
        // last-error queries included, with an error: the slot can only be checked with a runtime.
        let runtime_up = match check(code) {
            Ok(()) => true,
            Err(e) => {
                assert!(e.is_no_device(), "{e}");
                false
            }
        };
        // SAFETY: an invalid device index is an error, not undefined behaviour.
        let code = unsafe { ffi::cudaSetDevice(1 << 20) };
        let err = check(code).unwrap_err();
        assert!(
            matches!(
                err.name.as_str(),
                "cudaErrorInvalidDevice" | "cudaErrorNoDevice" | "cudaErrorInsufficientDriver"
            ),
            "{err}"
        );
        assert!(!err.message.is_empty());
        if runtime_up {
            assert_ne!(
                unsafe { ffi::cudaPeekAtLastError() },
                code,
                "{err} left in the slot"
            );
            assert_eq!(take_last_error(), Ok(()));
        }
    }

    #[cfg(mr_platform = "cpu")]
    #[test]
    fn check_consumes_the_error_it_returns() {
        // SAFETY: the cpu emulation; device 0 does not exist there.
        let code = unsafe { ffi::cudaSetDevice(0) };
        assert_eq!(unsafe { ffi::cudaPeekAtLastError() }, code);
        let err = check(code).unwrap_err();
        assert_eq!(err.name, "cudaErrorInvalidDevice");
        assert_eq!(unsafe { ffi::cudaPeekAtLastError() }, ffi::cudaSuccess);
        assert_eq!(take_last_error(), Ok(()));
    }

    #[cfg(mr_platform = "cpu")]
    #[test]
    fn check_leaves_a_different_pending_error_alone() {
        // SAFETY: the cpu emulation; a null out-pointer is an invalid value.
        let pending = unsafe { ffi::cudaMalloc(std::ptr::null_mut(), 8) };
        assert_eq!(pending, ffi::cudaErrorInvalidValue);
        assert!(check(ffi::cudaErrorNoDevice).is_err());
        let left = take_last_error().unwrap_err();
        assert_eq!(left.name, "cudaErrorInvalidValue");
        assert_eq!(take_last_error(), Ok(()));
    }
}
