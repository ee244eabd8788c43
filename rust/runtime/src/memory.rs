//! Devices, device memory, streams and events, written once with CUDA names (rocm_compat binds them
//! to CUDA, HIP or the host emulation, where "device memory" is host memory and streams are
//! synchronous).
use std::os::raw::{c_int, c_void};

use rocm_compat::check;
use rocm_compat::ffi::*;
use rocm_compat::handles::CUdeviceptr;
pub use rocm_compat::prefault::{Prefault, USEFUL as PREFAULT_USEFUL};

use crate::error::{Error, Result};

/// Number of visible devices: 0 on the CPU build; a NoDeviceError on a GPU build without a GPU.
pub fn device_count() -> Result<i32> {
    let mut count = 0;
    // SAFETY: `count` is a valid out-pointer.
    check(unsafe { cudaGetDeviceCount(&mut count) })?;
    Ok(count)
}

/// Fails with the platform's own no-device error before any device work: HIP answers hipMalloc
/// with hipErrorInvalidDevice when there is no GPU, while cudaGetDeviceCount names the cause.
pub fn require_runtime() -> Result<()> {
    device_count().map(|_| ())
}

pub fn current_device() -> Result<i32> {
    let mut device: c_int = 0;
    // SAFETY: `device` is a valid out-pointer.
    check(unsafe { cudaGetDevice(&mut device) })?;
    Ok(device)
}

/// Makes `device` current on this thread (a no-op when it already is: on the CPU build the host is
/// device 0 and any other index is cudaErrorInvalidDevice).
pub fn use_device(device: i32) -> Result<()> {
    if current_device()? != device {
        // SAFETY: plain call; an invalid index is reported as an error.
        check(unsafe { cudaSetDevice(device) })?;
    }
    Ok(())
}

/// The device a new object goes to: `device`, or the current one.
pub fn resolve_device(device: Option<i32>) -> Result<i32> {
    require_runtime()?;
    match device {
        Some(d) => {
            use_device(d)?;
            Ok(d)
        }
        None => current_device(),
    }
}

/// Free and total memory of `device` (an error on the CPU build, which has no device memory to report).
pub fn mem_info(device: i32) -> Result<(usize, usize)> {
    let previous = current_device()?;
    use_device(device)?;
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: valid out-pointers.
    let info = check(unsafe { cudaMemGetInfo(&mut free, &mut total) });
    use_device(previous)?;
    info?;
    Ok((free, total))
}

#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub index: i32,
    pub properties: rocm_compat::device::DeviceProperties,
    pub free_memory: usize,
    pub total_memory: usize,
}

/// Every visible device with its properties and free/total memory.
pub fn devices() -> Result<Vec<DeviceInfo>> {
    let count = device_count()?;
    if count == 0 {
        return Ok(Vec::new());
    }
    let previous = current_device()?;
    let mut out = Vec::new();
    for index in 0..count {
        let properties = rocm_compat::device::properties(index)?;
        use_device(index)?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: valid out-pointers.
        check(unsafe { cudaMemGetInfo(&mut free, &mut total) })?;
        out.push(DeviceInfo {
            index,
            properties,
            free_memory: free,
            total_memory: total,
        });
    }
    use_device(previous)?;
    Ok(out)
}

fn bounds(what: &str, offset: usize, len: usize, nbytes: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= nbytes => Ok(()),
        _ => Err(Error::Value(format!(
            "{what} of {len} bytes at offset {offset} does not fit in a buffer of {nbytes} bytes"
        ))),
    }
}

/// What keeps memory the buffer does not own alive (a DLPack producer's tensor); dropped with it.
pub type Keepalive = Box<dyn Send + Sync>;

/// Device memory (host memory on the CPU build): allocated here (zero-filled, freed on drop), or
/// someone else's memory wrapped without a copy (`from_external`, kept alive until the drop).
pub struct Buffer {
    ptr: CUdeviceptr,
    nbytes: usize,
    device: i32,
    external: Option<Keepalive>,
    read_only: bool,
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("nbytes", &self.nbytes)
            .field("device", &self.device)
            .field("external", &self.external.is_some())
            .field("read_only", &self.read_only)
            .finish()
    }
}

impl Buffer {
    pub fn new(nbytes: usize, device: Option<i32>) -> Result<Self> {
        let buffer = Self::new_uninit(nbytes, device)?;
        // SAFETY: the allocation holds at least `nbytes` bytes.
        check(unsafe { cudaMemset(buffer.at(0), 0, nbytes) })?;
        Ok(buffer)
    }

    /// A buffer whose contents are unspecified until written (staging and shadows, which are
    /// written whole before being read: no zero-filling pass).
    pub fn new_uninit(nbytes: usize, device: Option<i32>) -> Result<Self> {
        let device = resolve_device(device)?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `ptr` is a valid out-pointer; at least one byte so the pointer is never null.
        check(unsafe { cudaMalloc(&mut ptr, nbytes.max(1)) })?;
        let buffer = Buffer {
            ptr: CUdeviceptr::from_ptr(ptr),
            nbytes,
            device,
            external: None,
            read_only: false,
        };
        Ok(buffer)
    }

    /// Wraps `nbytes` of memory at `ptr` on `device` that someone else owns; `keep` holds it alive
    /// and is dropped with the buffer (nothing is freed here). `read_only`: writes are refused.
    ///
    /// # Safety
    /// `ptr` must address `nbytes` bytes of `device`'s memory (host memory on the CPU build),
    /// readable (and writable unless `read_only`) for as long as `keep` lives.
    pub unsafe fn from_external(
        ptr: *mut c_void,
        nbytes: usize,
        device: i32,
        keep: Keepalive,
        read_only: bool,
    ) -> Self {
        Buffer {
            ptr: CUdeviceptr::from_ptr(ptr),
            nbytes,
            device,
            external: Some(keep),
            read_only,
        }
    }

    pub fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// Memory someone else owns (wrapped from DLPack), not allocated here.
    pub fn is_external(&self) -> bool {
        self.external.is_some()
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// An error unless the buffer may be written (`what` says how it would be).
    pub fn check_writable(&self, what: &str) -> Result<()> {
        if self.read_only {
            return Err(Error::Value(format!(
                "{what}: the buffer wraps read-only memory (a read-only array or tensor, DLPack's \
                 READ_ONLY flag) and cannot be written; pass a writable one"
            )));
        }
        Ok(())
    }

    pub fn device(&self) -> i32 {
        self.device
    }

    /// The device address `offset` bytes in.
    pub fn at(&self, offset: usize) -> *mut c_void {
        self.ptr.offset(offset).as_ptr()
    }

    /// Copies host bytes into the buffer at `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check_writable("a write")?;
        bounds("a write", offset, data.len(), self.nbytes)?;
        use_device(self.device)?;
        // SAFETY: bounds checked; `data` is readable for its length.
        check(unsafe {
            cudaMemcpy(
                self.at(offset),
                data.as_ptr() as *const c_void,
                data.len(),
                cudaMemcpyHostToDevice,
            )
        })?;
        Ok(())
    }

    /// Copies `out.len()` bytes from `offset` into host memory.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        bounds("a read", offset, out.len(), self.nbytes)?;
        use_device(self.device)?;
        // SAFETY: bounds checked; `out` is writable for its length.
        check(unsafe {
            cudaMemcpy(
                out.as_mut_ptr() as *mut c_void,
                self.at(offset),
                out.len(),
                cudaMemcpyDeviceToHost,
            )
        })?;
        Ok(())
    }

    /// Copies `len` bytes from `src` at `src_offset` to this buffer at `offset`, device to device.
    pub fn copy_from(
        &self,
        offset: usize,
        src: &Buffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        self.check_writable("a copy")?;
        bounds("a copy", offset, len, self.nbytes)?;
        bounds("a copy", src_offset, len, src.nbytes)?;
        use_device(self.device)?;
        // SAFETY: both ranges checked above.
        check(unsafe {
            cudaMemcpy(
                self.at(offset),
                src.at(src_offset),
                len,
                cudaMemcpyDeviceToDevice,
            )
        })?;
        Ok(())
    }

    /// Sets every byte to `value`.
    pub fn fill(&self, value: u8) -> Result<()> {
        self.check_writable("a fill")?;
        use_device(self.device)?;
        // SAFETY: the allocation holds `nbytes` bytes.
        check(unsafe { cudaMemset(self.at(0), value as c_int, self.nbytes) })?;
        Ok(())
    }

    /// Gets the pages of `len` bytes at `offset` ready for writing ahead of the thread that will
    /// write them, without changing the contents (a fresh allocation's first-touch page faults,
    /// taken here instead of by the writer: see `rocm_compat::prefault`). Returns false when there
    /// is nothing (more) to gain: GPU builds (`PREFAULT_USEFUL`), small allocations, memory wrapped
    /// from elsewhere, an old kernel.
    pub fn prefault(&self, offset: usize, len: usize, state: &mut Prefault) -> bool {
        if self.external.is_some() || bounds("a prefault", offset, len, self.nbytes).is_err() {
            return false;
        }
        // SAFETY: our own allocation from cudaMalloc, alive while `self` is borrowed; the range
        // is in bounds. Its contents are not changed, so a concurrent writer is fine.
        unsafe { state.populate(self.at(0), offset, len) }
    }

    /// Returns the memory of `len` bytes at `offset` to the system ahead of the buffer's drop: the
    /// range's contents are lost (it reads as zeros on the CPU build), so only for a buffer whose
    /// range is never read again, and written by no one meanwhile (see
    /// `rocm_compat::prefault::release`). Returns false when nothing was done (GPU builds, small
    /// allocations, memory wrapped from elsewhere).
    pub fn release(&self, offset: usize, len: usize) -> bool {
        if self.external.is_some() || bounds("a release", offset, len, self.nbytes).is_err() {
            return false;
        }
        // SAFETY: our own allocation from cudaMalloc, alive while `self` is borrowed; the range
        // is in bounds; the caller no longer needs its contents.
        unsafe { rocm_compat::prefault::release(self.at(0), offset, len) }
    }

    /// mr-sum64 of the whole buffer, by the device kernel.
    pub fn checksum(&self, stream: Option<&Stream>) -> Result<u64> {
        use_device(self.device)?;
        let mut result = 0u64;
        // SAFETY: the buffer holds `nbytes` bytes; `result` is a valid host out-pointer.
        check(unsafe {
            mr_checksum_device(
                self.at(0),
                self.nbytes,
                &mut result,
                stream.map_or(std::ptr::null_mut(), Stream::raw),
            )
        })?;
        Ok(result)
    }

    /// The unfinalised mr-sum64 of `len` bytes at `offset`, salted as if they were word
    /// `word_offset` onwards of a larger buffer, by the device kernel.
    pub fn partial_checksum(
        &self,
        offset: usize,
        len: usize,
        word_offset: u64,
        stream: Option<&Stream>,
    ) -> Result<u64> {
        bounds("a checksum", offset, len, self.nbytes)?;
        use_device(self.device)?;
        let mut sum = 0u64;
        // SAFETY: range checked; `sum` is a valid host out-pointer.
        check(unsafe {
            mr_checksum_partial(
                self.at(offset),
                len,
                word_offset,
                &mut sum,
                stream.map_or(std::ptr::null_mut(), Stream::raw),
            )
        })?;
        Ok(sum)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.external.take().is_some() {
            return; // someone else's memory: released by dropping the keepalive
        }
        // SAFETY: `ptr` came from cudaMalloc and is freed once.
        unsafe { cudaFree(self.ptr.as_ptr()) };
    }
}

/// A stream (synchronous on the CPU build). The handle is kept as an address so the type is Send.
#[derive(Debug)]
pub struct Stream {
    handle: usize,
    device: i32,
}

impl Stream {
    pub fn new(device: Option<i32>) -> Result<Self> {
        let device = resolve_device(device)?;
        let mut raw: cudaStream_t = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        check(unsafe { cudaStreamCreate(&mut raw) })?;
        Ok(Stream {
            handle: raw as usize,
            device,
        })
    }

    pub fn raw(&self) -> cudaStream_t {
        self.handle as cudaStream_t
    }

    pub fn device(&self) -> i32 {
        self.device
    }

    /// Blocks until all work queued on the stream is done.
    pub fn synchronize(&self) -> Result<()> {
        use_device(self.device)?;
        // SAFETY: a live stream handle.
        check(unsafe { cudaStreamSynchronize(self.raw()) })?;
        Ok(())
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: created by cudaStreamCreate, destroyed once.
        unsafe { cudaStreamDestroy(self.raw()) };
    }
}

/// An event for ordering and timing work on a stream.
#[derive(Debug)]
pub struct Event {
    handle: usize,
    device: i32,
}

impl Event {
    pub fn new(device: Option<i32>) -> Result<Self> {
        let device = resolve_device(device)?;
        let mut raw: cudaEvent_t = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        check(unsafe { cudaEventCreate(&mut raw) })?;
        Ok(Event {
            handle: raw as usize,
            device,
        })
    }

    fn raw(&self) -> cudaEvent_t {
        self.handle as cudaEvent_t
    }

    /// Records the event on `stream` (the default stream when None).
    pub fn record(&self, stream: Option<&Stream>) -> Result<()> {
        use_device(self.device)?;
        // SAFETY: live event and stream handles.
        check(unsafe {
            cudaEventRecord(self.raw(), stream.map_or(std::ptr::null_mut(), Stream::raw))
        })?;
        Ok(())
    }

    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: a live event handle.
        check(unsafe { cudaEventSynchronize(self.raw()) })?;
        Ok(())
    }

    /// Milliseconds from this event to `end` (both recorded and complete).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        let mut ms = 0f32;
        // SAFETY: valid out-pointer and live event handles.
        check(unsafe { cudaEventElapsedTime(&mut ms, self.raw(), end.raw()) })?;
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by cudaEventCreate, destroyed once.
        unsafe { cudaEventDestroy(self.raw()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_round_trip_and_bounds() {
        let b = Buffer::new(16, None).unwrap();
        b.write(4, b"abcd").unwrap();
        let mut out = [0u8; 16];
        b.read(0, &mut out).unwrap();
        assert_eq!(&out[..8], b"\0\0\0\0abcd");
        assert!(matches!(b.write(14, b"xyz"), Err(Error::Value(_))));
        assert_eq!(
            b.checksum(None).unwrap(),
            rocm_compat::checksum::reference(&out)
        );
        let sum = b
            .partial_checksum(0, 8, 0, None)
            .unwrap()
            .wrapping_add(b.partial_checksum(8, 8, 1, None).unwrap());
        assert_eq!(
            rocm_compat::checksum::finalize(sum, 16),
            b.checksum(None).unwrap()
        );
    }

    #[test]
    fn prefault_and_release_touch_large_own_buffers_only() {
        let n = (40 << 20) + 77;
        let b = Buffer::new_uninit(n, None).unwrap();
        b.write(n - 4, b"tail").unwrap();
        let mut state = Prefault::new();
        let mut at = 0;
        while at < n {
            let len = (8 << 20).min(n - at);
            assert_eq!(b.prefault(at, len, &mut state), PREFAULT_USEFUL);
            at += len;
        }
        let (huge, small) = state.populated();
        if PREFAULT_USEFUL {
            assert!(huge + small >= n - 4096, "{huge} + {small}");
        }
        let mut out = [0u8; 4];
        b.read(n - 4, &mut out).unwrap();
        assert_eq!(&out, b"tail");
        assert!(!b.prefault(n, 1, &mut Prefault::new()), "out of bounds");
        // Released: the whole pages of the range are gone (zeros), the rest is kept.
        assert_eq!(b.release(0, n - 4096), PREFAULT_USEFUL);
        b.read(n - 4, &mut out).unwrap();
        assert_eq!(&out, b"tail");
        assert!(!b.release(n - 4, 5), "out of bounds");
        // Small buffers (the allocator's memory) are left alone.
        let small_buffer = Buffer::new(4096, None).unwrap();
        assert!(!small_buffer.prefault(0, 4096, &mut Prefault::new()));
        assert!(!small_buffer.release(0, 4096));
    }
}
