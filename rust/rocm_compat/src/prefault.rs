//! Getting a fresh device allocation's pages ready ahead of the thread that will write it, and
//! returning them early once their contents are no longer needed.
//!
//! On the `cpu` platform "device" memory is host memory, and a fresh allocation pays a page fault
//! per page on its first write; a helper thread can take those faults ahead of the writer (with huge
//! pages where they are cheaper: `host/pages.rs` says how that is decided). On `cuda` and `rocm`
//! device memory has no such cost and this does nothing (`USEFUL` is false).

/// Whether prefaulting does anything on this build.
pub const USEFUL: bool = cfg!(all(
    mr_platform = "cpu",
    target_os = "linux",
    target_pointer_width = "64"
));

/// One allocation's prefault, step by step (keep one per allocation, used from one thread).
#[derive(Debug, Default)]
pub struct Prefault {
    #[cfg(mr_platform = "cpu")]
    state: crate::host::pages::State,
}

impl Prefault {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the pages of `len` bytes at `offset` into the allocation `alloc` present and writable,
    /// without changing its contents. Returns false when there is nothing (more) to gain: not
    /// supported on this build or kernel, or an allocation too small to be worth it (the writer then
    /// faults the pages itself, as it would have anyway).
    ///
    /// # Safety
    /// `alloc` must be a live pointer returned by `cudaMalloc` (not memory wrapped from elsewhere)
    /// that stays allocated for the call, and `offset + len` at most its size. Another thread may
    /// write the range at the same time.
    #[cfg_attr(not(mr_platform = "cpu"), allow(unused_variables))]
    pub unsafe fn populate(
        &mut self,
        alloc: *mut std::os::raw::c_void,
        offset: usize,
        len: usize,
    ) -> bool {
        #[cfg(mr_platform = "cpu")]
        {
            self.state.populate(alloc, offset, len)
        }
        #[cfg(not(mr_platform = "cpu"))]
        false
    }

    /// Bytes populated with huge pages and with small pages so far.
    pub fn populated(&self) -> (usize, usize) {
        #[cfg(mr_platform = "cpu")]
        {
            (self.state.huge_bytes, self.state.small_bytes)
        }
        #[cfg(not(mr_platform = "cpu"))]
        (0, 0)
    }
}

/// Returns the whole pages of `len` bytes at `offset` into the allocation `alloc` to the system
/// before the allocation is freed (their contents are lost): the opposite of `Prefault::populate`,
/// so that a helper thread can take the cost of freeing memory while its owner still works on the
/// rest. Returns false when nothing was done (not supported on this build, an allocation too small
/// to have been mapped on its own); the memory is then freed with the allocation, as always.
///
/// # Safety
/// As for `Prefault::populate`; besides, nothing may read the range's contents afterwards (they
/// read as zeros on the CPU build) nor write it concurrently.
#[cfg_attr(not(mr_platform = "cpu"), allow(unused_variables))]
pub unsafe fn release(alloc: *mut std::os::raw::c_void, offset: usize, len: usize) -> bool {
    #[cfg(mr_platform = "cpu")]
    {
        crate::host::pages::release(alloc, offset, len)
    }
    #[cfg(not(mr_platform = "cpu"))]
    false
}
