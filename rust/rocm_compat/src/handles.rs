//! Handle types whose representation differs between CUDA and HIP, behind one Rust type.
//!
//! `CUdeviceptr` is an integer (`unsigned long long`) in CUDA and a pointer (`hipDeviceptr_t`,
//! `void*`) in HIP, so `let p: CUdeviceptr = 0` compiles on one and not the other (Monarch issue
//! #4341). Here it is a transparent newtype over the platform's representation (same size and ABI,
//! so it can be passed to C as is) with the same methods everywhere: `NULL`, `from_usize`,
//! `as_usize`, `from_ptr`, `as_ptr`, `is_null`, `offset`.
use std::fmt;
use std::os::raw::c_void;

#[cfg(mr_platform = "rocm")]
type Raw = *mut c_void;
#[cfg(not(mr_platform = "rocm"))]
type Raw = u64;

/// A device address: `CUdeviceptr` on CUDA, `hipDeviceptr_t` on ROCm, a host address on cpu.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CUdeviceptr(Raw);

// SAFETY: a device address is a plain number; it owns nothing and is never dereferenced on the host
// through this type (on ROCm the representation merely happens to be a pointer).
unsafe impl Send for CUdeviceptr {}
// SAFETY: as above.
unsafe impl Sync for CUdeviceptr {}

impl CUdeviceptr {
    /// The null device address.
    pub const NULL: CUdeviceptr = CUdeviceptr::from_usize(0);

    #[cfg(mr_platform = "rocm")]
    pub const fn from_usize(address: usize) -> Self {
        CUdeviceptr(address as *mut c_void)
    }
    #[cfg(not(mr_platform = "rocm"))]
    pub const fn from_usize(address: usize) -> Self {
        CUdeviceptr(address as u64)
    }

    pub fn as_usize(self) -> usize {
        self.0 as usize
    }

    /// From a device pointer as `cudaMalloc` returns it.
    pub fn from_ptr(ptr: *mut c_void) -> Self {
        CUdeviceptr::from_usize(ptr as usize)
    }

    /// As a `void*` for the runtime API (`cudaMemcpy` and friends).
    pub fn as_ptr(self) -> *mut c_void {
        self.as_usize() as *mut c_void
    }

    pub fn is_null(self) -> bool {
        self.as_usize() == 0
    }

    /// The address `bytes` further on (wrapping, like pointer arithmetic in C).
    pub fn offset(self, bytes: usize) -> Self {
        CUdeviceptr::from_usize(self.as_usize().wrapping_add(bytes))
    }
}

impl Default for CUdeviceptr {
    fn default() -> Self {
        CUdeviceptr::NULL
    }
}

impl From<usize> for CUdeviceptr {
    fn from(address: usize) -> Self {
        CUdeviceptr::from_usize(address)
    }
}

impl From<CUdeviceptr> for usize {
    fn from(ptr: CUdeviceptr) -> Self {
        ptr.as_usize()
    }
}

impl fmt::Debug for CUdeviceptr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CUdeviceptr({:#x})", self.as_usize())
    }
}

impl fmt::Pointer for CUdeviceptr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Pointer::fmt(&self.as_ptr(), f)
    }
}

const _: () = assert!(std::mem::size_of::<CUdeviceptr>() == 8);

#[cfg(test)]
mod tests {
    use super::CUdeviceptr;

    fn is_send_sync<T: Send + Sync>() {}

    #[test]
    fn same_code_on_every_platform() {
        is_send_sync::<CUdeviceptr>();
        let null = CUdeviceptr::default();
        assert!(null.is_null());
        assert_eq!(null, CUdeviceptr::NULL);
        assert_eq!(usize::from(null), 0);
        let p = CUdeviceptr::from(0x1000usize);
        assert!(!p.is_null());
        assert_eq!(p.as_usize(), 0x1000);
        assert_eq!(p.offset(0x10).as_usize(), 0x1010);
        assert_eq!(CUdeviceptr::from_ptr(p.as_ptr()), p);
        assert_eq!(format!("{p:?}"), "CUdeviceptr(0x1000)");
    }
}
