//! NCCL's names on the CPU platform: a thin adapter over the host communicator of the
//! `host_collectives` crate (ranks as threads of one process, or processes over loopback TCP; its
//! docs give the semantics). What is here is only what NCCL's C shape adds:
//!
//! - handles: an `ncclComm_t` is an index into a table of live communicators, not a pointer, so a
//!   handle used after `ncclCommAbort`/`ncclCommDestroy` is `ncclInvalidArgument`, never a
//!   use-after-free (abort may race with an operation blocked on the same communicator);
//! - raw buffers, counts and `ncclDataType_t`/`ncclRedOp_t` codes into slices and the crate's types
//!   (`sendbuff == recvbuff` is the in-place form, as in NCCL);
//! - `ncclGroupStart`/`ncclGroupEnd`: per thread and nestable, a `host_collectives::Batch` that the
//!   outermost `ncclGroupEnd` finishes;
//! - results: a failure's kind as its `ncclResult_t`, its description for `ncclGetLastError` (per
//!   thread, until the next failure on that thread);
//! - `ncclCommInitRank` reads `MONARCH_HOST_COMM_TIMEOUT`/`MONARCH_HOST_COMM_TRANSPORT`
//!   (`host_collectives::Options::from_env`).
#![allow(clippy::missing_safety_doc)]
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use host_collectives::{
    Batch, Communicator, DataType, Failure, FailureKind, Options, ReduceOp, UniqueId,
};

use super::runtime::static_cstr;
use crate::ffi::cudaStream_t;
use crate::nccl::*;

type Outcome = Result<(), Failure>;

// ---------------------------------------------------------------------------------------------
// Results: the code plus a thread-local description for ncclGetLastError.

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn fail(result: ncclResult_t, message: String) -> ncclResult_t {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
    result
}

fn result_of(kind: FailureKind) -> ncclResult_t {
    match kind {
        FailureKind::InvalidArgument => ncclInvalidArgument,
        FailureKind::InvalidUsage => ncclInvalidUsage,
        FailureKind::SystemError => ncclSystemError,
        FailureKind::RemoteError => ncclRemoteError,
        FailureKind::InternalError => ncclInternalError,
    }
}

fn code(outcome: Outcome) -> ncclResult_t {
    match outcome {
        Ok(()) => ncclSuccess,
        Err(f) => fail(result_of(f.kind), f.message),
    }
}

// ---------------------------------------------------------------------------------------------
// Handles.

#[derive(Default)]
struct Handles {
    live: HashMap<usize, Arc<Communicator>>,
    next: usize,
}

fn handles() -> MutexGuard<'static, Handles> {
    static HANDLES: OnceLock<Mutex<Handles>> = OnceLock::new();
    HANDLES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn not_live(comm: ncclComm_t) -> Failure {
    Failure::invalid_argument(format!(
        "{comm:p} is not a live communicator (never created, destroyed or aborted)"
    ))
}

fn communicator(comm: ncclComm_t) -> Result<Arc<Communicator>, Failure> {
    handles()
        .live
        .get(&(comm as usize))
        .cloned()
        .ok_or_else(|| not_live(comm))
}

// ---------------------------------------------------------------------------------------------
// Codes and buffers.

fn datatype(datatype: ncclDataType_t) -> Result<DataType, Failure> {
    Ok(match datatype {
        ncclInt8 => DataType::I8,
        ncclUint8 => DataType::U8,
        ncclInt32 => DataType::I32,
        ncclUint32 => DataType::U32,
        ncclInt64 => DataType::I64,
        ncclUint64 => DataType::U64,
        ncclFloat16 => DataType::F16,
        ncclFloat32 => DataType::F32,
        ncclFloat64 => DataType::F64,
        ncclBfloat16 => DataType::BF16,
        other => {
            return Err(Failure::invalid_argument(format!(
                "unknown ncclDataType_t {other}"
            )))
        }
    })
}

fn reduce_op(op: ncclRedOp_t) -> Result<ReduceOp, Failure> {
    Ok(match op {
        ncclSum => ReduceOp::Sum,
        ncclProd => ReduceOp::Prod,
        ncclMax => ReduceOp::Max,
        ncclMin => ReduceOp::Min,
        ncclAvg => ReduceOp::Avg,
        other => {
            return Err(Failure::invalid_argument(format!(
                "unknown ncclRedOp_t {other}"
            )))
        }
    })
}

/// Bytes in `count` elements of `datatype`.
fn byte_count(count: usize, datatype: DataType) -> Result<usize, Failure> {
    count.checked_mul(datatype.size()).ok_or_else(|| {
        Failure::invalid_argument(format!(
            "{count} {datatype:?} elements do not fit in memory"
        ))
    })
}

fn rank_arg(what: &str, value: c_int) -> Result<usize, Failure> {
    usize::try_from(value)
        .map_err(|_| Failure::invalid_argument(format!("{what} {value} is not a rank")))
}

/// The `nbytes` bytes at `ptr` (null only when `nbytes` is 0).
///
/// # Safety
/// `ptr` points to `nbytes` readable bytes that nothing writes while the slice lives ('a).
unsafe fn input<'a>(ptr: *const c_void, nbytes: usize, what: &str) -> Result<&'a [u8], Failure> {
    if nbytes == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Failure::invalid_argument(format!("null {what} buffer")));
    }
    Ok(std::slice::from_raw_parts(ptr as *const u8, nbytes))
}

/// The `nbytes` writable bytes at `ptr` (null only when `nbytes` is 0).
///
/// # Safety
/// `ptr` points to `nbytes` writable bytes that nothing else reads or writes while the slice lives
/// ('a: until the operation completes, which NCCL's callers guarantee for the buffers they pass,
/// through the outermost `ncclGroupEnd` since streams are synchronous here).
unsafe fn output<'a>(ptr: *mut c_void, nbytes: usize, what: &str) -> Result<&'a mut [u8], Failure> {
    if nbytes == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(Failure::invalid_argument(format!("null {what} buffer")));
    }
    Ok(std::slice::from_raw_parts_mut(ptr as *mut u8, nbytes))
}

/// The `nbytes` send bytes of an operation that writes `recvbuff`: where the two overlap in part
/// (not NCCL's in-place form), a copy in `copy`, read before the receive buffer is written.
///
/// # Safety
/// As for `input` (`sendbuff`) and `output` (`recvbuff`).
unsafe fn send_input(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    nbytes: usize,
    copy: &mut Vec<u8>,
) -> Result<&[u8], Failure> {
    if overlap(sendbuff, recvbuff, nbytes) {
        *copy = input(sendbuff, nbytes, "send")?.to_vec();
        return Ok(&copy[..]);
    }
    input(sendbuff, nbytes, "send")
}

/// Whether `[a, a+n)` and `[b, b+n)` share a byte.
fn overlap(a: *const c_void, b: *const c_void, n: usize) -> bool {
    let (a, b) = (a as usize, b as usize);
    n > 0 && a < b.wrapping_add(n) && b < a.wrapping_add(n)
}

// ---------------------------------------------------------------------------------------------
// Groups: the operations posted between ncclGroupStart and the outermost ncclGroupEnd.

thread_local! {
    /// Depth of ncclGroupStart nesting on this thread, and the operations posted inside it.
    static GROUP: RefCell<(usize, Batch<'static>)> = RefCell::new((0, Batch::new()));
}

/// Posts onto this thread's group, or (outside one) completes the operation now.
fn submit(post: impl FnOnce(&mut Batch<'static>) -> Outcome) -> Outcome {
    if GROUP.with(|g| g.borrow().0) > 0 {
        return GROUP.with(|g| post(&mut g.borrow_mut().1));
    }
    let mut batch = Batch::new();
    post(&mut batch)?;
    batch.finish()
}

// ---------------------------------------------------------------------------------------------
// The NCCL API.

pub unsafe fn ncclGetVersion(version: *mut c_int) -> ncclResult_t {
    if version.is_null() {
        return fail(ncclInvalidArgument, "null version pointer".into());
    }
    *version = 0; // the host emulation, not a library release
    ncclSuccess
}

pub unsafe fn ncclGetUniqueId(id: *mut ncclUniqueId) -> ncclResult_t {
    if id.is_null() {
        return fail(ncclInvalidArgument, "null unique id pointer".into());
    }
    let fresh = UniqueId::generate();
    for (dst, src) in (*id).internal.iter_mut().zip(fresh.as_bytes()) {
        *dst = *src as c_char;
    }
    ncclSuccess
}

pub unsafe fn ncclCommInitRank(
    comm: *mut ncclComm_t,
    nranks: c_int,
    id: ncclUniqueId,
    rank: c_int,
) -> ncclResult_t {
    code(init_rank(comm, nranks, id, rank, &Options::from_env()))
}

unsafe fn init_rank(
    comm: *mut ncclComm_t,
    nranks: c_int,
    id: ncclUniqueId,
    rank: c_int,
    options: &Options,
) -> Outcome {
    if comm.is_null() {
        return Err(Failure::invalid_argument("null communicator pointer"));
    }
    let (Ok(n), Ok(r)) = (usize::try_from(nranks), usize::try_from(rank)) else {
        return Err(Failure::invalid_argument(format!(
            "rank {rank} is not in 0..{nranks} (world size {nranks})"
        )));
    };
    let id = UniqueId::from_bytes(id.internal.map(|c| c as u8));
    let joined = Arc::new(Communicator::join(&id, n, r, options)?);
    let mut table = handles();
    table.next += 1;
    let handle = table.next;
    table.live.insert(handle, joined);
    *comm = handle as ncclComm_t;
    Ok(())
}

fn leave(comm: ncclComm_t, abort: bool) -> Outcome {
    let left = handles()
        .live
        .remove(&(comm as usize))
        .ok_or_else(|| not_live(comm))?;
    if abort {
        left.abort();
    } else {
        left.destroy();
    }
    Ok(())
}

pub unsafe fn ncclCommDestroy(comm: ncclComm_t) -> ncclResult_t {
    code(leave(comm, false))
}

pub unsafe fn ncclCommAbort(comm: ncclComm_t) -> ncclResult_t {
    code(leave(comm, true))
}

pub unsafe fn ncclCommGetAsyncError(comm: ncclComm_t, result: *mut ncclResult_t) -> ncclResult_t {
    if result.is_null() {
        return fail(ncclInvalidArgument, "null result pointer".into());
    }
    match communicator(comm) {
        Ok(c) => {
            // As with NCCL, ncclGetLastError describes the asynchronous failure too (which peer,
            // and why): a caller whose operations all returned ncclSuccess learns it only here.
            *result = match c.remote_failure() {
                Some(f) => fail(result_of(f.kind), f.message),
                None => ncclSuccess,
            };
            ncclSuccess
        }
        Err(f) => code(Err(f)),
    }
}

pub unsafe fn ncclAllReduce(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype_code: ncclDataType_t,
    op: ncclRedOp_t,
    comm: ncclComm_t,
    _stream: cudaStream_t,
) -> ncclResult_t {
    code((|| {
        let op = reduce_op(op)?;
        let comm = communicator(comm)?;
        let dt = datatype(datatype_code)?;
        let nbytes = byte_count(count, dt)?;
        if std::ptr::eq(sendbuff, recvbuff) {
            let buf = output(recvbuff, nbytes, "receive")?;
            return submit(|b| b.all_reduce_in_place(&comm, buf, dt, op));
        }
        // A partial overlap (not NCCL's in-place form) reads the contribution before writing.
        let mut copy = Vec::new();
        let send = send_input(sendbuff, recvbuff, nbytes, &mut copy)?;
        let recv = output(recvbuff, nbytes, "receive")?;
        submit(|b| b.all_reduce(&comm, send, recv, dt, op))
    })())
}

pub unsafe fn ncclBroadcast(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype_code: ncclDataType_t,
    root: c_int,
    comm: ncclComm_t,
    _stream: cudaStream_t,
) -> ncclResult_t {
    code((|| {
        let root = rank_arg("root", root)?;
        let comm = communicator(comm)?;
        let dt = datatype(datatype_code)?;
        let nbytes = byte_count(count, dt)?;
        // Only the root's sendbuff is read (as in NCCL): elsewhere it may be anything.
        if comm.rank() != root || std::ptr::eq(sendbuff, recvbuff) {
            let buf = output(recvbuff, nbytes, "receive")?;
            return submit(|b| b.broadcast_in_place(&comm, buf, dt, root));
        }
        let mut copy = Vec::new();
        let send = send_input(sendbuff, recvbuff, nbytes, &mut copy)?;
        let recv = output(recvbuff, nbytes, "receive")?;
        submit(|b| b.broadcast(&comm, send, recv, dt, root))
    })())
}

pub unsafe fn ncclSend(
    sendbuff: *const c_void,
    count: usize,
    datatype_code: ncclDataType_t,
    peer: c_int,
    comm: ncclComm_t,
    _stream: cudaStream_t,
) -> ncclResult_t {
    code((|| {
        let comm = communicator(comm)?;
        let nbytes = byte_count(count, datatype(datatype_code)?)?;
        let peer = rank_arg("peer", peer)?;
        let data = input(sendbuff, nbytes, "send")?;
        submit(|b| b.send(&comm, data, peer))
    })())
}

pub unsafe fn ncclRecv(
    recvbuff: *mut c_void,
    count: usize,
    datatype_code: ncclDataType_t,
    peer: c_int,
    comm: ncclComm_t,
    _stream: cudaStream_t,
) -> ncclResult_t {
    code((|| {
        let comm = communicator(comm)?;
        let nbytes = byte_count(count, datatype(datatype_code)?)?;
        let peer = rank_arg("peer", peer)?;
        let buf = output(recvbuff, nbytes, "receive")?;
        submit(|b| b.recv(&comm, buf, peer))
    })())
}

pub unsafe fn ncclGroupStart() -> ncclResult_t {
    GROUP.with(|g| g.borrow_mut().0 += 1);
    ncclSuccess
}

pub unsafe fn ncclGroupEnd() -> ncclResult_t {
    let finished = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        match g.0 {
            0 => None,
            1 => {
                g.0 = 0;
                Some(std::mem::take(&mut g.1))
            }
            _ => {
                g.0 -= 1;
                Some(Batch::new())
            }
        }
    });
    match finished {
        None => fail(
            ncclInvalidUsage,
            "ncclGroupEnd without ncclGroupStart".into(),
        ),
        Some(batch) => code(batch.finish()),
    }
}

pub unsafe fn ncclGetErrorString(result: ncclResult_t) -> *const c_char {
    static_cstr(match result {
        ncclSuccess => b"no error\0",
        ncclUnhandledCudaError => b"unhandled cuda error\0",
        ncclSystemError => b"unhandled system error\0",
        ncclInternalError => b"internal error\0",
        ncclInvalidArgument => b"invalid argument\0",
        ncclInvalidUsage => b"invalid usage\0",
        ncclRemoteError => b"remote process exited or there was a network error\0",
        ncclInProgress => b"NCCL operation in progress\0",
        _ => b"unknown result code\0",
    })
}

/// The last failure's description on the calling thread (`comm` is ignored, as in NCCL 2.x).
pub unsafe fn ncclGetLastError(_comm: ncclComm_t) -> *const c_char {
    // The thread-local string lives until the next failure on this thread, like NCCL's buffer.
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

#[cfg(test)]
mod tests {
    //! The adapter's part: codes, handles, in-place and grouped calls, last-error text. The
    //! communicator's semantics are tested in `host_collectives` (threads and processes).
    use super::*;
    use host_collectives::Transport;
    use std::ffi::CStr;
    use std::thread;
    use std::time::Duration;

    fn uid() -> ncclUniqueId {
        let mut id = ncclUniqueId { internal: [0; 128] };
        // SAFETY: valid out-pointer.
        assert_eq!(unsafe { ncclGetUniqueId(&mut id) }, ncclSuccess);
        id
    }

    fn last_error() -> String {
        // SAFETY: a NUL-terminated thread-local string.
        unsafe { CStr::from_ptr(ncclGetLastError(std::ptr::null_mut())) }
            .to_string_lossy()
            .into_owned()
    }

    fn init(id: ncclUniqueId, n: i32, r: i32, tcp: bool) -> usize {
        let mut comm: ncclComm_t = std::ptr::null_mut();
        let options = Options {
            force_tcp: tcp,
            ..Options::default()
        };
        // SAFETY: valid out-pointer.
        let rc = code(unsafe { init_rank(&mut comm, n, id, r, &options) });
        assert_eq!(rc, ncclSuccess, "{}", last_error());
        let transport = communicator(comm).unwrap().transport();
        assert_eq!(
            transport,
            if tcp {
                Transport::Tcp
            } else {
                Transport::Threads
            }
        );
        comm as usize
    }

    /// Runs `body` on `n` threads, over the in-process communicator or (`tcp`) the loopback one.
    fn ranks<T: Send + 'static>(
        tcp: bool,
        n: i32,
        body: impl Fn(ncclComm_t, i32) -> T + Send + Sync + 'static,
    ) -> Vec<T> {
        let id = uid();
        let body = Arc::new(body);
        let handles: Vec<_> = (0..n)
            .map(|r| {
                let body = Arc::clone(&body);
                thread::spawn(move || body(init(id, n, r, tcp) as ncclComm_t, r))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn all_reduce_out_of_place_in_place_and_overlapping() {
        for tcp in [false, true] {
            let out = ranks(tcp, 3, |comm, r| {
                let send = [r as f32 + 1.0, -(r as f32)];
                let mut got = vec![];
                for op in [ncclSum, ncclMax, ncclMin, ncclAvg] {
                    let mut recv = [0f32; 2];
                    // SAFETY: buffers hold 2 f32.
                    let rc = unsafe {
                        ncclAllReduce(
                            send.as_ptr().cast(),
                            recv.as_mut_ptr().cast(),
                            2,
                            ncclFloat32,
                            op,
                            comm,
                            std::ptr::null_mut(),
                        )
                    };
                    assert_eq!(rc, ncclSuccess);
                    got.push(recv);
                }
                let mut ints = [r * 10 + 1];
                // SAFETY: in place, one i32.
                let rc = unsafe {
                    ncclAllReduce(
                        ints.as_ptr().cast(),
                        ints.as_mut_ptr().cast(),
                        1,
                        ncclInt32,
                        ncclAvg,
                        comm,
                        std::ptr::null_mut(),
                    )
                };
                assert_eq!(rc, ncclSuccess);
                // Overlapping but not in place: elements 0..2 reduced into 1..3.
                let mut window = [r + 1, 10, 0];
                // SAFETY: both ranges lie in `window`.
                let rc = unsafe {
                    ncclAllReduce(
                        window.as_ptr().cast(),
                        window.as_mut_ptr().add(1).cast(),
                        2,
                        ncclInt32,
                        ncclSum,
                        comm,
                        std::ptr::null_mut(),
                    )
                };
                assert_eq!(rc, ncclSuccess);
                // SAFETY: live handle, destroyed once.
                assert_eq!(unsafe { ncclCommDestroy(comm) }, ncclSuccess);
                (got, ints[0], window)
            });
            for (r, (got, avg, window)) in out.into_iter().enumerate() {
                assert_eq!(got, vec![[6.0, -3.0], [3.0, 0.0], [1.0, -2.0], [2.0, -1.0]]);
                assert_eq!(avg, 11); // (1 + 11 + 21) / 3
                assert_eq!(window, [r as i32 + 1, 6, 30], "tcp={tcp}");
            }
        }
    }

    #[test]
    fn grouped_send_recv_both_ways_and_broadcast_with_an_ignored_sendbuff() {
        for tcp in [false, true] {
            let out = ranks(tcp, 2, |comm, r| {
                let mut data = [0u8; 5];
                let source = *b"hello";
                // Only the root's sendbuff is read: elsewhere it is null.
                let sendbuff = if r == 0 {
                    source.as_ptr()
                } else {
                    std::ptr::null()
                };
                // SAFETY: 5-byte buffers.
                unsafe {
                    assert_eq!(
                        ncclBroadcast(
                            sendbuff.cast(),
                            data.as_mut_ptr().cast(),
                            5,
                            ncclInt8,
                            0,
                            comm,
                            std::ptr::null_mut()
                        ),
                        ncclSuccess
                    );
                    // Grouped exchange both ways: would deadlock if sends did not wait for the
                    // group's end; nested groups end at the outermost ncclGroupEnd.
                    let mine = [r as u8; 3];
                    let mut theirs = [9u8; 3];
                    let peer = 1 - r;
                    assert_eq!(ncclGroupStart(), ncclSuccess);
                    assert_eq!(ncclGroupStart(), ncclSuccess);
                    assert_eq!(
                        ncclSend(
                            mine.as_ptr().cast(),
                            3,
                            ncclUint8,
                            peer,
                            comm,
                            std::ptr::null_mut()
                        ),
                        ncclSuccess
                    );
                    assert_eq!(ncclGroupEnd(), ncclSuccess);
                    assert_eq!(
                        ncclRecv(
                            theirs.as_mut_ptr().cast(),
                            3,
                            ncclUint8,
                            peer,
                            comm,
                            std::ptr::null_mut()
                        ),
                        ncclSuccess
                    );
                    assert_eq!(theirs, [9, 9, 9], "nothing completes before the group ends");
                    assert_eq!(ncclGroupEnd(), ncclSuccess);
                    ncclCommDestroy(comm);
                    (data, theirs)
                }
            });
            assert_eq!(out[0], (*b"hello", [1, 1, 1]));
            assert_eq!(out[1], (*b"hello", [0, 0, 0]));
        }
    }

    #[test]
    fn abort_wakes_a_blocked_peer_and_the_handle_goes_stale() {
        for tcp in [false, true] {
            let out = ranks(tcp, 2, |comm, r| {
                let mut buf = [0u8; 4];
                // SAFETY: 4-byte buffer; the handle is live until abort/destroy.
                unsafe {
                    if r == 0 {
                        thread::sleep(Duration::from_millis(50));
                        assert_eq!(ncclCommAbort(comm), ncclSuccess);
                        // Stale handle: an error, not a crash.
                        assert_eq!(ncclCommAbort(comm), ncclInvalidArgument);
                        assert!(last_error().contains("not a live communicator"));
                        ncclSuccess
                    } else {
                        let rc = ncclRecv(
                            buf.as_mut_ptr().cast(),
                            4,
                            ncclUint8,
                            0,
                            comm,
                            std::ptr::null_mut(),
                        );
                        // Another failure in between: the asynchronous error still says why.
                        assert_eq!(ncclGetVersion(std::ptr::null_mut()), ncclInvalidArgument);
                        let mut async_error = 0;
                        assert_eq!(ncclCommGetAsyncError(comm, &mut async_error), ncclSuccess);
                        assert_eq!(async_error, ncclRemoteError);
                        assert!(last_error().contains("rank 0"), "{}", last_error());
                        ncclCommDestroy(comm);
                        rc
                    }
                }
            });
            assert_eq!(out[1], ncclRemoteError);
        }
    }

    #[test]
    fn bad_arguments_get_nccl_codes_and_a_last_error() {
        let mut id = uid();
        let mut comm: ncclComm_t = std::ptr::null_mut();
        // SAFETY: valid pointers; every call here fails before touching a buffer.
        unsafe {
            assert_eq!(ncclCommInitRank(&mut comm, 2, id, 5), ncclInvalidArgument);
            assert_eq!(ncclCommInitRank(&mut comm, 2, id, -1), ncclInvalidArgument);
            assert!(
                last_error().contains("rank -1 is not in 0..2"),
                "{}",
                last_error()
            );
            assert_eq!(
                ncclCommInitRank(std::ptr::null_mut(), 1, id, 0),
                ncclInvalidArgument
            );
            id.internal[40] ^= 1; // a token the rendezvous did not issue
            assert_eq!(ncclCommInitRank(&mut comm, 1, id, 0), ncclInvalidArgument);
            assert!(last_error().contains("not issued"), "{}", last_error());
            let live = init(uid(), 1, 0, false) as ncclComm_t;
            let mut x = [0u8; 4];
            let p = x.as_mut_ptr().cast();
            let s = std::ptr::null_mut();
            assert_eq!(
                ncclAllReduce(p, p, 1, ncclFloat32, 99, live, s),
                ncclInvalidArgument
            );
            assert!(last_error().contains("unknown ncclRedOp_t 99"));
            assert_eq!(
                ncclAllReduce(p, p, 1, 42, ncclSum, live, s),
                ncclInvalidArgument
            );
            assert!(last_error().contains("unknown ncclDataType_t 42"));
            assert_eq!(
                ncclSend(std::ptr::null(), 1, ncclUint8, 0, live, s),
                ncclInvalidArgument
            );
            assert_eq!(
                ncclBroadcast(p, p, 1, ncclUint8, -1, live, s),
                ncclInvalidArgument
            );
            assert_eq!(ncclRecv(p, 1, ncclUint8, 3, live, s), ncclInvalidArgument);
            assert_eq!(ncclGroupEnd(), ncclInvalidUsage);
            // One rank sending to itself in a group (the in-process transport allows it).
            assert_eq!(ncclGroupStart(), ncclSuccess);
            assert_eq!(
                ncclSend(b"abcd".as_ptr().cast(), 4, ncclUint8, 0, live, s),
                ncclSuccess
            );
            assert_eq!(ncclRecv(p, 4, ncclUint8, 0, live, s), ncclSuccess);
            assert_eq!(ncclGroupEnd(), ncclSuccess);
            assert_eq!(&x, b"abcd");
            assert_eq!(ncclCommDestroy(live), ncclSuccess);
            assert_eq!(
                ncclAllReduce(p, p, 1, ncclFloat32, ncclSum, live, s),
                ncclInvalidArgument
            );
        }
    }

    #[test]
    fn init_times_out_with_a_system_error() {
        let id = uid();
        let mut comm: ncclComm_t = std::ptr::null_mut();
        let options = Options {
            timeout: Duration::from_millis(200),
            force_tcp: false,
        };
        // SAFETY: valid out-pointer.
        let rc = code(unsafe { init_rank(&mut comm, 2, id, 0, &options) });
        assert_eq!(rc, ncclSystemError);
        assert!(last_error().contains("ranks [1] of 2"), "{}", last_error());
    }
}
