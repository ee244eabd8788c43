//! Host memory in large pieces for the `cpu` platform's "device" allocations, and getting its pages
//! ready ahead of a writer (`crate::prefault`).
//!
//! `cudaMalloc` maps allocations of `MAP_MIN` bytes and more itself (`mmap`, one mapping each,
//! returned to the system by `cudaFree`), so their pages can be advised without touching memory the
//! C allocator shares with anything else. Smaller ones stay with the allocator.
//!
//! **Why prefault.** A fresh allocation costs a page fault per 4 KiB page on its first write (the
//! kernel allocates, zeroes and maps the page); on this project's 2-core VM that is ~0.37 CPU-s per
//! GiB, more than the data movement itself. `MADV_POPULATE_WRITE` (Linux 5.14) takes the same faults
//! in one call from a helper thread, off the writer's path, without writing anything (a writer may be
//! filling the same range concurrently: the kernel serialises the faults, contents never change).
//!
//! **Huge pages, measured per step.** Transparent huge pages (`MADV_HUGEPAGE`, 2 MiB per fault) cost
//! ~0.05 CPU-s per GiB when the kernel has free 2 MiB blocks the machine already backs, ~8x less than
//! 4 KiB pages. But where the hypervisor reclaims free guest memory (virtio-balloon free page
//! reporting, as on this Firecracker VM) the free 2 MiB blocks are exactly what it took back, and
//! faulting them in costs ~4.6 ms per 2 MiB (~2.3 s per GiB), 6x *more* than 4 KiB pages, which the
//! kernel takes from smaller free blocks that stay backed. Which case holds depends on the machine and
//! on how long ago the memory was freed, so it is measured: the first 2 MiB step uses small pages and
//! its thread CPU time is the yardstick; later steps use huge pages until they have cost more than
//! small pages would have (plus a 10 ms allowance), and small pages after that.
#![allow(clippy::missing_safety_doc)]
use std::os::raw::c_void;

/// Allocations at least this large get a mapping of their own (glibc maps them itself too, from
/// 32 MiB at most, but into memory this crate could not safely advise).
pub const MAP_MIN: usize = 32 << 20;
/// The page that holds an own mapping's header (the size at `ptr - 16`, as for the allocator's, and
/// `MAPPED` at `ptr - 8`, where the allocator's header has 0).
pub const HEADER_PAGE: usize = 4096;
pub const MAPPED: usize = 0x6d72_6d61_7070_6564; // "mrmapped"
const HUGE: usize = 2 << 20;

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
mod sys {
    use std::os::raw::{c_int, c_long, c_void};

    pub const PROT_READ: c_int = 1;
    pub const PROT_WRITE: c_int = 2;
    pub const MAP_PRIVATE: c_int = 0x02;
    pub const MAP_ANONYMOUS: c_int = 0x20;
    pub const MADV_HUGEPAGE: c_int = 14;
    pub const MADV_NOHUGEPAGE: c_int = 15;
    pub const MADV_POPULATE_WRITE: c_int = 23;
    pub const MADV_DONTNEED: c_int = 4;
    pub const CLOCK_THREAD_CPUTIME_ID: c_int = 3;

    #[repr(C)]
    pub struct Timespec {
        pub tv_sec: c_long,
        pub tv_nsec: c_long,
    }

    extern "C" {
        pub fn mmap(
            addr: *mut c_void,
            len: usize,
            prot: c_int,
            flags: c_int,
            fd: c_int,
            offset: i64,
        ) -> *mut c_void;
        pub fn munmap(addr: *mut c_void, len: usize) -> c_int;
        pub fn madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int;
        pub fn clock_gettime(clock: c_int, tp: *mut Timespec) -> c_int;
    }
}

/// A fresh zero-filled mapping of `len` bytes, or null.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
pub unsafe fn map(len: usize) -> *mut u8 {
    let p = sys::mmap(
        std::ptr::null_mut(),
        len,
        sys::PROT_READ | sys::PROT_WRITE,
        sys::MAP_PRIVATE | sys::MAP_ANONYMOUS,
        -1,
        0,
    );
    if p as isize == -1 {
        std::ptr::null_mut()
    } else {
        p as *mut u8
    }
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
pub unsafe fn map(_len: usize) -> *mut u8 {
    std::ptr::null_mut()
}

/// Releases a mapping made by `map`.
pub unsafe fn unmap(base: *mut u8, len: usize) {
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    sys::munmap(base as *mut c_void, len);
    #[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
    let _ = (base, len);
}

/// This thread's CPU time in nanoseconds (what a step cost, whatever else the machine runs).
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn thread_ns() -> u64 {
    let mut t = sys::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer.
    unsafe { sys::clock_gettime(sys::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
}

/// Where a prefault stands: the small-page yardstick and what huge pages have cost so far.
#[derive(Debug, Default)]
pub struct State {
    /// Off after huge pages turned out dearer than small ones (or the kernel refused).
    no_huge: bool,
    /// Thread CPU time of the first 2 MiB step, in small pages (0 until measured).
    small_ns: u64,
    huge_ns: u64,
    huge_steps: u64,
    /// Populating is not supported here (kernel before 5.14) or failed: stop.
    stopped: bool,
    /// The address up to which earlier calls populated.
    done: usize,
    pub huge_bytes: usize,
    pub small_bytes: usize,
}

/// How much more than small pages huge ones may cost before they are dropped (ns).
const ALLOWANCE_NS: u64 = 10_000_000;

impl State {
    /// Populates `len` bytes at `offset` into `alloc`, a live allocation made by `cudaMalloc`, in
    /// whole 2 MiB blocks of its mapping (so a huge-page candidate is never split between two
    /// calls), skipping what an earlier call did. Allocations it did not map itself are left alone.
    /// Returns whether populating is still worthwhile.
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    pub unsafe fn populate(&mut self, alloc: *mut c_void, offset: usize, len: usize) -> bool {
        if self.stopped || !mapped(alloc) {
            self.stopped = true;
            return false;
        }
        let base = alloc as usize - HEADER_PAGE;
        let limit = alloc as usize + allocation_size(alloc);
        let from = alloc as usize + offset;
        let mut at = (from / HUGE * HUGE).max(base).max(self.done);
        let end = (from + len)
            .next_multiple_of(HUGE)
            .min(limit.next_multiple_of(4096));
        while at < end {
            let step_end = ((at / HUGE + 1) * HUGE).min(end);
            let (p, n) = (at as *mut c_void, step_end - at);
            let whole = n == HUGE;
            let huge = whole && self.small_ns > 0 && !self.no_huge;
            let advice = if huge {
                sys::MADV_HUGEPAGE
            } else {
                sys::MADV_NOHUGEPAGE
            };
            if whole && sys::madvise(p, n, advice) != 0 {
                self.no_huge = true;
            }
            let t0 = thread_ns();
            if sys::madvise(p, n, sys::MADV_POPULATE_WRITE) != 0 {
                // EINVAL before Linux 5.14; ENOMEM, EINTR: the writer will fault the pages itself.
                self.stopped = true;
                return false;
            }
            let spent = thread_ns().saturating_sub(t0);
            if huge {
                self.huge_ns += spent;
                self.huge_steps += 1;
                self.huge_bytes += n;
                if self.huge_ns > self.huge_steps * self.small_ns + ALLOWANCE_NS {
                    self.no_huge = true;
                }
            } else {
                if whole && self.small_ns == 0 {
                    self.small_ns = spent.max(1);
                }
                self.small_bytes += n;
            }
            at = step_end;
            self.done = at;
        }
        true
    }

    #[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
    pub unsafe fn populate(&mut self, _alloc: *mut c_void, _offset: usize, _len: usize) -> bool {
        self.stopped = true;
        false
    }
}

/// Returns the whole pages of `len` bytes at `offset` into `alloc` (a live allocation made by
/// `cudaMalloc`) to the system: they read as zeros afterwards. Allocations it did not map itself
/// are left alone (false).
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
pub unsafe fn release(alloc: *mut c_void, offset: usize, len: usize) -> bool {
    if !mapped(alloc) {
        return false;
    }
    let from = alloc as usize + offset;
    let (start, end) = (from.next_multiple_of(4096), (from + len) / 4096 * 4096);
    start >= end || sys::madvise(start as *mut c_void, end - start, sys::MADV_DONTNEED) == 0
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
pub unsafe fn release(_alloc: *mut c_void, _offset: usize, _len: usize) -> bool {
    false
}

/// `cudaMalloc`'s bookkeeping: the size it stored in front of `ptr`.
pub unsafe fn allocation_size(ptr: *const c_void) -> usize {
    ((ptr as *const u8).sub(16) as *const usize).read()
}

/// Whether `cudaMalloc` mapped `ptr` itself (see `MAPPED`).
pub unsafe fn mapped(ptr: *const c_void) -> bool {
    ((ptr as *const u8).sub(8) as *const usize).read() == MAPPED
}

#[cfg(all(test, target_os = "linux", target_pointer_width = "64"))]
mod tests {
    use super::*;
    use crate::host::{cudaFree, cudaMalloc};

    fn malloc(size: usize) -> *mut u8 {
        let mut p = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { cudaMalloc(&mut p, size) }, 0);
        p as *mut u8
    }

    #[test]
    fn large_allocations_are_mapped_zeroed_and_freed() {
        let small = malloc(MAP_MIN - 1);
        let large = malloc(MAP_MIN + 12345);
        // SAFETY: both are live allocations of the sizes asked for.
        unsafe {
            assert!(!mapped(small as *const c_void));
            assert!(mapped(large as *const c_void));
            assert_eq!(allocation_size(large as *const c_void), MAP_MIN + 12345);
            assert_eq!(large as usize % 4096, 0);
            let bytes = std::slice::from_raw_parts_mut(large, MAP_MIN + 12345);
            assert!(bytes.iter().step_by(4093).all(|&b| b == 0));
            bytes[MAP_MIN + 12344] = 7;
            assert_eq!(cudaFree(small as *mut c_void), 0);
            assert_eq!(cudaFree(large as *mut c_void), 0);
        }
    }

    #[test]
    fn populate_keeps_contents_while_a_writer_fills_the_range() {
        const LEN: usize = 48 << 20;
        let p = malloc(LEN) as usize;
        let pattern = |i: usize| (i.wrapping_mul(31) >> 3) as u8;
        // A writer fills the second half while the first half is prefaulted piece by piece, then
        // the whole range again (already populated pages, overlapping what the writer wrote).
        std::thread::scope(|scope| {
            scope.spawn(move || {
                // SAFETY: the second half of the live allocation, written by this thread only.
                let half =
                    unsafe { std::slice::from_raw_parts_mut((p + LEN / 2) as *mut u8, LEN / 2) };
                for (i, b) in half.iter_mut().enumerate() {
                    *b = pattern(i);
                }
            });
            let mut state = State::default();
            let mut at = 0;
            while at < LEN {
                let n = (3 << 20).min(LEN - at);
                // SAFETY: a live mapped allocation; populating never writes.
                assert!(unsafe { state.populate(p as *mut c_void, at, n) });
                at += n;
            }
            // Whole 2 MiB blocks of the mapping, each once (with the header page when it shares
            // the first block).
            let covered = state.huge_bytes + state.small_bytes;
            assert!((LEN..=LEN + HEADER_PAGE).contains(&covered), "{covered}");
        });
        // SAFETY: the live allocation; every thread that wrote it has ended.
        let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, LEN) };
        assert!(bytes[..LEN / 2].iter().all(|&b| b == 0));
        assert!(bytes[LEN / 2..]
            .iter()
            .enumerate()
            .all(|(i, &b)| b == pattern(i)));
        // SAFETY: allocated above, freed once.
        unsafe { assert_eq!(cudaFree(p as *mut c_void), 0) };
    }

    #[test]
    fn release_returns_whole_pages_only() {
        const LEN: usize = 40 << 20;
        let p = malloc(LEN);
        // SAFETY: the live allocation, LEN bytes, this thread only.
        let bytes = unsafe { std::slice::from_raw_parts_mut(p, LEN) };
        bytes.fill(0xA5);
        // From the middle of a page to the middle of another: the pages wholly inside read as zeros
        // afterwards, the two partial pages and everything outside keep their bytes.
        let (offset, len) = (3 * 4096 + 100, 5 << 20);
        // SAFETY: a live mapped allocation; the range is not read again before it is checked.
        assert!(unsafe { release(p as *mut c_void, offset, len) });
        let (first, last) = (4 * 4096, (offset + len) / 4096 * 4096);
        assert!(bytes[..first].iter().all(|&b| b == 0xA5));
        assert!(bytes[first..last].iter().all(|&b| b == 0));
        assert!(bytes[last..].iter().all(|&b| b == 0xA5));
        // SAFETY: allocated above, freed once.
        unsafe { assert_eq!(cudaFree(p as *mut c_void), 0) };
    }

    #[test]
    fn allocator_memory_is_left_alone() {
        let p = malloc(1 << 20);
        let mut state = State::default();
        // SAFETY: a live allocation (not mapped here: populate and release return false and do
        // nothing).
        unsafe {
            assert!(!state.populate(p as *mut c_void, 0, 1 << 20));
            assert!(!state.populate(p as *mut c_void, 0, 1 << 20));
            p.write_bytes(7, 1 << 20);
            assert!(!release(p as *mut c_void, 0, 1 << 20));
            assert_eq!(*p.add(12345), 7);
            assert_eq!(cudaFree(p as *mut c_void), 0);
        }
        assert_eq!(state.huge_bytes + state.small_bytes, 0);
    }
}
