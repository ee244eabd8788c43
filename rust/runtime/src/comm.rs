//! Communicators, written once with NCCL names: NCCL on CUDA, RCCL on ROCm (both loaded at run
//! time by the bridge), the in-process thread emulation of rocm_compat on the CPU build.
//!
//! Every operation is enqueued on the communicator's own stream and waited for, with the GIL
//! released by the caller, so a Python thread blocked in `recv` can be freed by `abort()` from
//! another thread (ncclCommAbort). Operations on one communicator are serialised; `abort` is not,
//! by design.
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use rocm_compat::check;
use rocm_compat::ffi::*;
use rocm_compat::nccl::result_name;

use crate::error::{Error, Result};
use crate::memory::{require_runtime, resolve_device, use_device, Buffer, Stream};

pub const UNIQUE_ID_BYTES: usize = 128;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The error for a failed NCCL call: its name, the result's name and number, the library's
/// description and its last-error detail.
pub fn nccl_error(call: &'static str, result: ncclResult_t) -> Error {
    // SAFETY: both return static (or thread-local, valid until the next failure) NUL-terminated
    // strings for any input; a null comm asks for the process-wide last error.
    let (text, detail) = unsafe {
        (
            CStr::from_ptr(ncclGetErrorString(result))
                .to_string_lossy()
                .into_owned(),
            {
                let p = ncclGetLastError(std::ptr::null_mut());
                if p.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(p).to_string_lossy().into_owned()
                }
            },
        )
    };
    let mut message = format!("{call} failed: {} ({result}): {text}", result_name(result));
    if !detail.is_empty() && detail != text {
        message.push_str(&format!(" ({detail})"));
    }
    Error::Nccl {
        call,
        result,
        message,
    }
}

fn nccl(call: &'static str, result: ncclResult_t) -> Result<()> {
    if result == ncclSuccess {
        Ok(())
    } else {
        Err(nccl_error(call, result))
    }
}

/// A collective call's failure, joined with the device error when no GPU is usable: the caller learns
/// both what NCCL/RCCL answered and why (on the CPU build there is always a device: unchanged).
pub fn without_device(err: Error) -> Error {
    match (err, require_runtime()) {
        (
            Error::Nccl {
                result, message, ..
            },
            Err(Error::Cuda(device)),
        ) if device.is_no_device() => Error::NcclNoDevice {
            result,
            message,
            device,
        },
        (err, _) => err,
    }
}

/// A fresh unique id for `Communicator::new` (share it with every rank). Asked of the library first,
/// so that without a GPU the error says what NCCL/RCCL answered (an id needs no device where the library
/// can make one without).
pub fn unique_id() -> Result<[u8; UNIQUE_ID_BYTES]> {
    let mut id = ncclUniqueId { internal: [0; 128] };
    // SAFETY: valid out-pointer.
    nccl("ncclGetUniqueId", unsafe { ncclGetUniqueId(&mut id) }).map_err(without_device)?;
    Ok(id.internal.map(|c| c as u8))
}

/// Element types of reductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataType {
    pub nccl: ncclDataType_t,
    pub size: usize,
    pub name: &'static str,
}

pub fn parse_dtype(name: &str) -> Result<DataType> {
    let (nccl, size, name) = match name {
        "f32" | "float32" | "float" => (ncclFloat32, 4, "f32"),
        "f16" | "float16" | "half" => (ncclFloat16, 2, "f16"),
        "bf16" | "bfloat16" => (ncclBfloat16, 2, "bf16"),
        "i32" | "int32" => (ncclInt32, 4, "i32"),
        "u8" | "uint8" | "bytes" => (ncclUint8, 1, "u8"),
        other => {
            return Err(Error::Value(format!(
                "dtype {other:?} is not one of f32, f16, bf16, i32 (or u8 for bytes)"
            )))
        }
    };
    Ok(DataType { nccl, size, name })
}

pub fn parse_op(name: &str) -> Result<ncclRedOp_t> {
    Ok(match name {
        "sum" => ncclSum,
        "max" => ncclMax,
        "min" => ncclMin,
        "avg" | "mean" => ncclAvg,
        other => {
            return Err(Error::Value(format!(
                "op {other:?} is not one of sum, max, min, avg"
            )))
        }
    })
}

#[derive(Debug)]
enum State {
    Live(usize),
    Aborted,
    Destroyed,
}

/// One rank of a communicator.
#[derive(Debug)]
pub struct Communicator {
    state: Mutex<State>,
    aborted: AtomicBool,
    ops: Mutex<()>,
    stream: Stream,
    scratch: Buffer,
    rank: i32,
    world_size: i32,
    device: i32,
}

impl Communicator {
    /// Joins the communicator `id` as `rank` of `world_size` on `device` (the current one when None);
    /// blocks until every rank has joined.
    pub fn new(id: &[u8], world_size: i32, rank: i32, device: Option<i32>) -> Result<Self> {
        if id.len() != UNIQUE_ID_BYTES {
            return Err(Error::Value(format!(
                "a unique id is {UNIQUE_ID_BYTES} bytes (from Communicator.unique_id()), not {}",
                id.len()
            )));
        }
        if world_size < 1 || rank < 0 || rank >= world_size {
            return Err(Error::Value(format!(
                "rank {rank} is not in 0..{world_size} (world size {world_size})"
            )));
        }
        let mut raw = ncclUniqueId { internal: [0; 128] };
        for (dst, src) in raw.internal.iter_mut().zip(id) {
            *dst = *src as _;
        }
        let mut comm: ncclComm_t = std::ptr::null_mut();
        let device = match resolve_device(device) {
            Ok(device) => device,
            Err(Error::Cuda(no_device)) if no_device.is_no_device() => {
                // No usable GPU: ask the library anyway (it fails at its first device call, before
                // any rendezvous), so the error names what NCCL/RCCL answered, and why.
                // SAFETY: valid out-pointer; the id is passed by value.
                let result = unsafe { ncclCommInitRank(&mut comm, world_size, raw, rank) };
                if result == ncclSuccess {
                    // SAFETY: the communicator was just created and is used by nothing else.
                    unsafe { ncclCommDestroy(comm) };
                    return Err(Error::Cuda(no_device));
                }
                return Err(without_device(nccl_error("ncclCommInitRank", result)));
            }
            Err(err) => return Err(err),
        };
        let stream = Stream::new(Some(device))?;
        let scratch = Buffer::new(8, Some(device))?;
        // SAFETY: valid out-pointer; the id is passed by value.
        nccl("ncclCommInitRank", unsafe {
            ncclCommInitRank(&mut comm, world_size, raw, rank)
        })?;
        Ok(Communicator {
            state: Mutex::new(State::Live(comm as usize)),
            aborted: AtomicBool::new(false),
            ops: Mutex::new(()),
            stream,
            scratch,
            rank,
            world_size,
            device,
        })
    }

    pub fn rank(&self) -> i32 {
        self.rank
    }
    pub fn world_size(&self) -> i32 {
        self.world_size
    }
    pub fn device(&self) -> i32 {
        self.device
    }
    pub fn stream(&self) -> &Stream {
        &self.stream
    }
    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }
    pub fn is_live(&self) -> bool {
        matches!(*lock(&self.state), State::Live(_))
    }

    fn handle(&self, call: &str) -> Result<ncclComm_t> {
        match *lock(&self.state) {
            State::Live(h) => Ok(h as ncclComm_t),
            State::Aborted => Err(Error::Aborted(format!(
                "{call}: rank {}'s communicator was aborted (create a new one to continue)",
                self.rank
            ))),
            State::Destroyed => Err(Error::Aborted(format!(
                "{call}: rank {}'s communicator was destroyed",
                self.rank
            ))),
        }
    }

    fn check_buffer(&self, buffer: &Buffer) -> Result<()> {
        if buffer.device() != self.device {
            return Err(Error::Value(format!(
                "the buffer is on device {} and the communicator on device {}",
                buffer.device(),
                self.device
            )));
        }
        Ok(())
    }

    /// Runs one NCCL call on the communicator's stream and waits for it.
    fn run(
        &self,
        call: &'static str,
        f: impl FnOnce(ncclComm_t, cudaStream_t) -> ncclResult_t,
    ) -> Result<()> {
        let _serial = lock(&self.ops);
        let comm = self.handle(call)?;
        use_device(self.device)?;
        let result = f(comm, self.stream.raw());
        let interrupted = || {
            Error::Aborted(format!(
                "{call} was interrupted: rank {}'s communicator was aborted",
                self.rank
            ))
        };
        if result != ncclSuccess {
            return Err(if self.is_aborted() {
                interrupted()
            } else {
                nccl_error(call, result)
            });
        }
        // SAFETY: a live stream handle.
        let synced = check(unsafe { cudaStreamSynchronize(self.stream.raw()) });
        if self.is_aborted() {
            return Err(interrupted());
        }
        synced?;
        // A failure NCCL only reports asynchronously (a peer gone, a network error).
        let state = lock(&self.state);
        if let State::Live(h) = *state {
            let mut async_result = ncclSuccess;
            // SAFETY: the handle is live while the state lock is held (abort takes it first).
            nccl("ncclCommGetAsyncError", unsafe {
                ncclCommGetAsyncError(h as ncclComm_t, &mut async_result)
            })?;
            if async_result != ncclSuccess {
                return Err(nccl_error(call, async_result));
            }
        }
        Ok(())
    }

    pub fn all_reduce(&self, buffer: &Buffer, dtype: DataType, op: ncclRedOp_t) -> Result<()> {
        self.check_buffer(buffer)?;
        buffer.check_writable("all_reduce (in place)")?;
        if buffer.nbytes().rem_euclid(dtype.size) != 0 {
            return Err(Error::Value(format!(
                "a buffer of {} bytes is not a whole number of {} elements ({} bytes each)",
                buffer.nbytes(),
                dtype.name,
                dtype.size
            )));
        }
        let count = buffer.nbytes() / dtype.size;
        self.run("ncclAllReduce", |comm, stream| {
            // SAFETY: in place on a live buffer of count elements.
            unsafe {
                ncclAllReduce(
                    buffer.at(0),
                    buffer.at(0),
                    count,
                    dtype.nccl,
                    op,
                    comm,
                    stream,
                )
            }
        })
    }

    pub fn broadcast(&self, buffer: &Buffer, root: i32) -> Result<()> {
        self.check_buffer(buffer)?;
        self.check_peer("root", root)?;
        if root != self.rank {
            buffer.check_writable("broadcast (receiving in place)")?;
        }
        self.run("ncclBroadcast", |comm, stream| {
            // SAFETY: in place on a live buffer of nbytes bytes.
            unsafe {
                ncclBroadcast(
                    buffer.at(0),
                    buffer.at(0),
                    buffer.nbytes(),
                    ncclUint8,
                    root,
                    comm,
                    stream,
                )
            }
        })
    }

    fn check_peer(&self, what: &str, peer: i32) -> Result<()> {
        if peer < 0 || peer >= self.world_size {
            return Err(Error::Value(format!(
                "{what} {peer} is not a rank of this communicator (world size {})",
                self.world_size
            )));
        }
        Ok(())
    }

    /// Sends `len` bytes of `buffer` from `offset` to `peer`.
    pub fn send(&self, buffer: &Buffer, offset: usize, len: usize, peer: i32) -> Result<()> {
        self.check_buffer(buffer)?;
        self.check_peer("peer", peer)?;
        check_range(buffer, offset, len)?;
        self.run("ncclSend", |comm, stream| {
            // SAFETY: the range was checked against the live buffer.
            unsafe { ncclSend(buffer.at(offset), len, ncclUint8, peer, comm, stream) }
        })
    }

    /// Receives `len` bytes from `peer` into `buffer` at `offset`.
    pub fn recv(&self, buffer: &Buffer, offset: usize, len: usize, peer: i32) -> Result<()> {
        self.check_buffer(buffer)?;
        buffer.check_writable("recv")?;
        self.check_peer("peer", peer)?;
        check_range(buffer, offset, len)?;
        self.run("ncclRecv", |comm, stream| {
            // SAFETY: the range was checked against the live buffer.
            unsafe { ncclRecv(buffer.at(offset), len, ncclUint8, peer, comm, stream) }
        })
    }

    /// Sends host bytes (through a device buffer).
    pub fn send_host(&self, data: &[u8], peer: i32) -> Result<()> {
        let staging = Buffer::new(data.len(), Some(self.device))?;
        staging.write(0, data)?;
        self.send(&staging, 0, data.len(), peer)
    }

    /// Receives `len` bytes into host memory (through a device buffer).
    pub fn recv_host(&self, len: usize, peer: i32) -> Result<Vec<u8>> {
        let staging = Buffer::new(len, Some(self.device))?;
        self.recv(&staging, 0, len, peer)?;
        let mut out = vec![0u8; len];
        staging.read(0, &mut out)?;
        Ok(out)
    }

    /// Returns when every rank has called it (an all-reduce of one i32: NCCL has no barrier).
    pub fn barrier(&self) -> Result<()> {
        let dtype = parse_dtype("i32")?;
        self.check_buffer(&self.scratch)?;
        self.run("ncclAllReduce (barrier)", |comm, stream| {
            // SAFETY: the scratch buffer holds 8 bytes, one i32 is reduced in place.
            unsafe {
                ncclAllReduce(
                    self.scratch.at(0),
                    self.scratch.at(0),
                    1,
                    dtype.nccl,
                    ncclSum,
                    comm,
                    stream,
                )
            }
        })
    }

    /// ncclCommAbort: operations blocked on this communicator (in any thread) return an error, and
    /// peers see the failure instead of hanging. Idempotent; the communicator is unusable after.
    pub fn abort(&self) -> Result<()> {
        let handle = {
            let mut state = lock(&self.state);
            self.aborted.store(true, Ordering::SeqCst);
            match std::mem::replace(&mut *state, State::Aborted) {
                State::Live(h) => Some(h),
                State::Destroyed => {
                    *state = State::Destroyed;
                    None
                }
                State::Aborted => None,
            }
        };
        if let Some(h) = handle {
            // SAFETY: a live handle, released exactly once (the state no longer holds it).
            nccl("ncclCommAbort", unsafe { ncclCommAbort(h as ncclComm_t) })?;
        }
        Ok(())
    }

    /// ncclCommDestroy after the pending operations. Idempotent.
    pub fn destroy(&self) -> Result<()> {
        let _serial = lock(&self.ops);
        let handle = {
            let mut state = lock(&self.state);
            match *state {
                State::Live(h) => {
                    *state = State::Destroyed;
                    Some(h)
                }
                _ => None,
            }
        };
        if let Some(h) = handle {
            // SAFETY: a live handle, released exactly once.
            nccl("ncclCommDestroy", unsafe {
                ncclCommDestroy(h as ncclComm_t)
            })?;
        }
        Ok(())
    }
}

fn check_range(buffer: &Buffer, offset: usize, len: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= buffer.nbytes() => Ok(()),
        _ => Err(Error::Value(format!(
            "{len} bytes at offset {offset} do not fit in a buffer of {} bytes",
            buffer.nbytes()
        ))),
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        let _ = self.destroy();
    }
}
