//! NCCL on the CPU platform: in-process communicators whose ranks are threads, on host memory.
//!
//! Semantics follow NCCL, strictly enough that code which works here does not deadlock on NCCL:
//!
//! - `ncclGetUniqueId` makes a fresh rendezvous id (valid in this process only: the CPU build has no
//!   transport between processes; `ncclCommInitRank` with another process's id is
//!   `ncclInvalidArgument`).
//! - `ncclCommInitRank` joins the group for that id and blocks until all `nranks` ranks have joined,
//!   or fails with `ncclSystemError` after `MONARCH_HOST_COMM_TIMEOUT` seconds (default 120).
//! - Collectives (`ncclAllReduce`, `ncclBroadcast`) are matched by their order on each rank, like
//!   NCCL; mismatched counts/types/ops/roots are `ncclInvalidUsage` on every rank. Reductions run in
//!   rank order; floating-point types accumulate in f64 and round once to the element type (NCCL
//!   rounds at each step of its ring/tree, so results may differ from it in the last bit).
//! - `ncclSend` is a rendezvous: it returns when the peer's matching `ncclRecv` has taken the data
//!   (as NCCL's send completes only when the receiver has it). Between `ncclGroupStart` and
//!   `ncclGroupEnd` (per thread, nestable) operations are posted and completed together at the
//!   outermost `ncclGroupEnd`, so a grouped send+recv pair between two ranks does not deadlock.
//! - Streams are synchronous on this platform, so an operation completes before it returns.
//! - `ncclCommAbort` wakes every rank blocked in an operation of that communicator: peers get
//!   `ncclRemoteError`, the aborting rank's own blocked operations `ncclInvalidUsage`. A peer that
//!   destroyed or aborted its communicator makes operations waiting on it fail with
//!   `ncclRemoteError` instead of hanging (NCCL would hang until a watchdog aborts).
//! - `ncclGetLastError` describes the last failure on the calling thread.
//!
//! Global state (one mutex): the groups still waiting for ranks to join, keyed by unique id, and
//! the table of live communicator handles. A handle is an index into that table, not a pointer, so
//! a handle used after `ncclCommAbort`/`ncclCommDestroy` is `ncclInvalidArgument`, never a
//! use-after-free (abort may race with an operation blocked on the same communicator).
#![allow(clippy::missing_safety_doc)]
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::net::{self, NetComm};
use super::runtime::static_cstr;
use crate::ffi::cudaStream_t;
use crate::nccl::*;

const MAGIC: &[u8; 8] = b"mr-host\0";
const DEFAULT_TIMEOUT_S: f64 = 120.0;

// ---------------------------------------------------------------------------------------------
// Errors: the result code plus a thread-local description for ncclGetLastError.

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn fail(result: ncclResult_t, message: String) -> ncclResult_t {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
    result
}

/// A failure: the result code and its description (for ncclGetLastError).
pub(super) type Failure = (ncclResult_t, String);
type Outcome = Result<(), Failure>;

fn code(outcome: Outcome) -> ncclResult_t {
    match outcome {
        Ok(()) => ncclSuccess,
        Err((result, message)) => fail(result, message),
    }
}

// ---------------------------------------------------------------------------------------------
// Groups and the global registry.

/// What a collective call looked like on one rank; every rank must agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Signature {
    AllReduce {
        count: usize,
        datatype: ncclDataType_t,
        op: ncclRedOp_t,
    },
    Broadcast {
        count: usize,
        datatype: ncclDataType_t,
        root: usize,
    },
}

struct Round {
    signature: Signature,
    parts: Vec<Option<Vec<u8>>>,
    arrived: usize,
    result: Option<Result<Arc<Vec<u8>>, Failure>>,
    taken: usize,
}

#[derive(Default)]
struct Channel {
    queue: VecDeque<Vec<u8>>,
    sent: u64,
    received: u64,
}

struct GroupState {
    joined: Vec<bool>,
    count: usize,
    /// Rank that called ncclCommAbort, if any.
    aborted_by: Option<usize>,
    /// Ranks whose communicator is gone (destroyed or aborted).
    departed: Vec<bool>,
    /// Per rank: how many collectives it has posted (the matching key).
    collectives_posted: Vec<u64>,
    rounds: HashMap<u64, Round>,
    /// (source, destination) -> messages in order.
    channels: HashMap<(usize, usize), Channel>,
}

struct Group {
    nranks: usize,
    state: Mutex<GroupState>,
    changed: Condvar,
}

impl Group {
    fn new(nranks: usize) -> Self {
        Group {
            nranks,
            state: Mutex::new(GroupState {
                joined: vec![false; nranks],
                count: 0,
                aborted_by: None,
                departed: vec![false; nranks],
                collectives_posted: vec![0; nranks],
                rounds: HashMap::new(),
                channels: HashMap::new(),
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, GroupState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocks until `ready` holds, failing if the group is aborted or `ready` says a peer departed.
    fn wait_until<T>(
        &self,
        rank: usize,
        mut ready: impl FnMut(&mut GroupState) -> Option<Result<T, (ncclResult_t, String)>>,
    ) -> Result<T, (ncclResult_t, String)> {
        let mut state = self.lock();
        loop {
            if let Some(outcome) = ready(&mut state) {
                return outcome;
            }
            if let Some(by) = state.aborted_by {
                return Err(if by == rank {
                    (
                        ncclInvalidUsage,
                        format!("rank {rank}'s communicator was aborted (ncclCommAbort) while this operation was in progress"),
                    )
                } else {
                    (
                        ncclRemoteError,
                        format!("rank {by} aborted the communicator (ncclCommAbort); rank {rank}'s operation cannot complete"),
                    )
                });
            }
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

struct Member {
    group: Arc<Group>,
    rank: usize,
}

#[derive(Default)]
struct Registry {
    /// Groups still waiting for ranks to join, by unique id; removed once complete.
    pending: HashMap<Vec<u8>, Arc<Group>>,
    /// Live communicators by handle.
    comms: HashMap<usize, Arc<Member>>,
    /// Live communicators across processes (host/net.rs), by handle (from the same counter).
    nets: HashMap<usize, Arc<NetComm>>,
    next_handle: usize,
}

fn registry() -> MutexGuard<'static, Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn member(comm: ncclComm_t) -> Result<Arc<Member>, (ncclResult_t, String)> {
    registry()
        .comms
        .get(&(comm as usize))
        .cloned()
        .ok_or_else(|| {
            (
                ncclInvalidArgument,
                format!(
                    "{comm:p} is not a live communicator (never created, destroyed or aborted)"
                ),
            )
        })
}

/// The cross-process communicator behind `comm`, if it is one.
fn net_comm(comm: ncclComm_t) -> Option<Arc<NetComm>> {
    registry().nets.get(&(comm as usize)).cloned()
}

fn timeout() -> Duration {
    let seconds = std::env::var("MONARCH_HOST_COMM_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0)
        .unwrap_or(DEFAULT_TIMEOUT_S);
    Duration::from_secs_f64(seconds)
}

// ---------------------------------------------------------------------------------------------
// Element types and reductions.

fn element_size(datatype: ncclDataType_t) -> Option<usize> {
    Some(match datatype {
        ncclInt8 | ncclUint8 => 1,
        ncclFloat16 | ncclBfloat16 => 2,
        ncclInt32 | ncclUint32 | ncclFloat32 => 4,
        ncclInt64 | ncclUint64 | ncclFloat64 => 8,
        _ => return None,
    })
}

/// IEEE binary16 -> f32 (exact).
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let mant = (h & 0x3ff) as u32;
    let bits = match (exp, mant) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: value = mant * 2^-24.
            let v = mant as f32 * f32::from_bits(0x3380_0000); // 2^-24
            return if sign != 0 { -v } else { v };
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, _) => sign | 0x7fc0_0000 | (mant << 13),
        _ => sign | ((exp + 112) << 23) | (mant << 13),
    };
    f32::from_bits(bits)
}

/// f32 -> IEEE binary16, round to nearest even.
pub(crate) fn f32_to_f16(f: f32) -> u16 {
    let x = f.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let mant = x & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if mant != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00; // overflow -> inf
    }
    if e <= 0 {
        if e < -10 {
            return sign; // underflow -> zero
        }
        let m = mant | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1u32 << shift) - 1);
        let mut out = m >> shift;
        if rest > half || (rest == half && out & 1 == 1) {
            out += 1;
        }
        return sign | out as u16;
    }
    let mut out = ((e as u32) << 10) | (mant >> 13);
    let rest = mant & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && out & 1 == 1) {
        out += 1; // may carry into the exponent, which is the correct rounding
    }
    sign | out as u16
}

pub(crate) fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

pub(crate) fn f32_to_bf16(f: f32) -> u16 {
    let x = f.to_bits();
    if f.is_nan() {
        return ((x >> 16) as u16) | 0x40;
    }
    let rounding = 0x7fff + ((x >> 16) & 1);
    (x.wrapping_add(rounding) >> 16) as u16
}

macro_rules! reduce_ints {
    ($t:ty, $parts:expr, $op:expr, $n:expr) => {{
        let width = std::mem::size_of::<$t>();
        let read = |p: &[u8], i: usize| {
            <$t>::from_le_bytes(p[i * width..(i + 1) * width].try_into().unwrap())
        };
        let len = $parts[0].len() / width;
        let mut out = Vec::with_capacity($parts[0].len());
        for i in 0..len {
            let mut acc = read($parts[0], i);
            for p in &$parts[1..] {
                let v = read(p, i);
                acc = match $op {
                    ncclSum | ncclAvg => acc.wrapping_add(v),
                    ncclProd => acc.wrapping_mul(v),
                    ncclMax => acc.max(v),
                    _ => acc.min(v),
                };
            }
            if $op == ncclAvg {
                acc /= $n as $t;
            }
            out.extend_from_slice(&acc.to_le_bytes());
        }
        out
    }};
}

/// Reduces float-like elements through f32 (f64 through f64), in rank order.
fn reduce_floats(
    parts: &[&[u8]],
    op: ncclRedOp_t,
    width: usize,
    load: impl Fn(&[u8]) -> f64,
    store: impl Fn(f64, &mut Vec<u8>),
) -> Vec<u8> {
    let n = parts.len();
    let len = parts[0].len() / width;
    let mut out = Vec::with_capacity(parts[0].len());
    for i in 0..len {
        let at = |p: &[u8]| load(&p[i * width..(i + 1) * width]);
        let mut acc = at(parts[0]);
        for p in &parts[1..] {
            let v = at(p);
            acc = match op {
                ncclSum | ncclAvg => acc + v,
                ncclProd => acc * v,
                ncclMax => acc.max(v),
                _ => acc.min(v),
            };
        }
        if op == ncclAvg {
            acc /= n as f64;
        }
        store(acc, &mut out);
    }
    out
}

pub(super) fn reduce(parts: &[&[u8]], datatype: ncclDataType_t, op: ncclRedOp_t) -> Vec<u8> {
    let n = parts.len();
    match datatype {
        ncclInt8 => reduce_ints!(i8, parts, op, n),
        ncclUint8 => reduce_ints!(u8, parts, op, n),
        ncclInt32 => reduce_ints!(i32, parts, op, n),
        ncclUint32 => reduce_ints!(u32, parts, op, n),
        ncclInt64 => reduce_ints!(i64, parts, op, n),
        ncclUint64 => reduce_ints!(u64, parts, op, n),
        // Floating-point types accumulate in f64 and round once (see the module docs).
        ncclFloat32 => reduce_floats(
            parts,
            op,
            4,
            |b| f32::from_le_bytes(b.try_into().unwrap()) as f64,
            |v, out| out.extend_from_slice(&(v as f32).to_le_bytes()),
        ),
        ncclFloat64 => reduce_floats(
            parts,
            op,
            8,
            |b| f64::from_le_bytes(b.try_into().unwrap()),
            |v, out| out.extend_from_slice(&v.to_le_bytes()),
        ),
        ncclFloat16 => reduce_floats(
            parts,
            op,
            2,
            |b| f16_to_f32(u16::from_le_bytes(b.try_into().unwrap())) as f64,
            |v, out| out.extend_from_slice(&f32_to_f16(v as f32).to_le_bytes()),
        ),
        _ => reduce_floats(
            parts,
            op,
            2,
            |b| bf16_to_f32(u16::from_le_bytes(b.try_into().unwrap())) as f64,
            |v, out| out.extend_from_slice(&f32_to_bf16(v as f32).to_le_bytes()),
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Operations: each is posted (contribution or message handed over), then completed (waited on).
// Outside a group the two happen in one call; inside, completion waits for the outer ncclGroupEnd.

enum Posted {
    Collective {
        member: Arc<Member>,
        seq: u64,
        recvbuff: *mut u8,
        nbytes: usize,
    },
    Send {
        member: Arc<Member>,
        peer: usize,
        seq: u64,
    },
    Recv {
        member: Arc<Member>,
        peer: usize,
        recvbuff: *mut u8,
        nbytes: usize,
    },
    /// An operation of a communicator across processes.
    Net(net::Op),
}

thread_local! {
    /// Depth of ncclGroupStart nesting on this thread, and the operations posted inside it.
    static GROUP: RefCell<(usize, Vec<Posted>)> = const { RefCell::new((0, Vec::new())) };
}

fn submit(posted: Posted) -> Outcome {
    let deferred = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.0 > 0 {
            g.1.push(posted);
            None
        } else {
            Some(posted)
        }
    });
    match deferred {
        None => Ok(()),
        Some(posted) => complete(posted),
    }
}

fn complete(posted: Posted) -> Outcome {
    match posted {
        Posted::Net(op) => net::complete(op),
        Posted::Collective {
            member,
            seq,
            recvbuff,
            nbytes,
        } => {
            let group = &member.group;
            let n = group.nranks;
            let data = group.wait_until(member.rank, |state| {
                let round = state.rounds.get(&seq)?;
                match &round.result {
                    Some(result) => Some(result.clone()),
                    None => (0..n)
                        .find(|&r| state.departed[r] && round.parts[r].is_none())
                        .map(|r| {
                            Err((
                                ncclRemoteError,
                                format!("rank {r} left the communicator before joining collective #{seq}"),
                            ))
                        }),
                }
            });
            let mut state = group.lock();
            if let Some(round) = state.rounds.get_mut(&seq) {
                round.taken += 1;
                if round.taken == n {
                    state.rounds.remove(&seq);
                }
            }
            drop(state);
            let data = data?;
            if data.len() != nbytes {
                return Err((
                    ncclInternalError,
                    "collective result has the wrong size".into(),
                ));
            }
            // SAFETY: the caller guaranteed `recvbuff` holds `nbytes` writable bytes.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), recvbuff, nbytes) };
            Ok(())
        }
        Posted::Send { member, peer, seq } => {
            let me = member.rank;
            member.group.wait_until(me, |state| {
                if state
                    .channels
                    .get(&(me, peer))
                    .is_some_and(|c| c.received > seq)
                {
                    Some(Ok(()))
                } else if state.departed[peer] {
                    Some(Err((
                        ncclRemoteError,
                        format!(
                            "rank {peer} left the communicator before receiving from rank {me}"
                        ),
                    )))
                } else {
                    None
                }
            })
        }
        Posted::Recv {
            member,
            peer,
            recvbuff,
            nbytes,
        } => {
            let me = member.rank;
            let message = member.group.wait_until(me, |state| {
                let channel = state.channels.entry((peer, me)).or_default();
                if let Some(message) = channel.queue.pop_front() {
                    channel.received += 1;
                    Some(Ok(message))
                } else if state.departed[peer] {
                    Some(Err((
                        ncclRemoteError,
                        format!("rank {peer} left the communicator before sending to rank {me}"),
                    )))
                } else {
                    None
                }
            });
            member.group.changed.notify_all(); // the sender waits for `received`
            let message = message?;
            if message.len() != nbytes {
                return Err((
                    ncclInvalidUsage,
                    format!(
                        "rank {me} posted a receive of {nbytes} bytes from rank {peer}, which sent {} bytes",
                        message.len()
                    ),
                ));
            }
            // SAFETY: the caller guaranteed `recvbuff` holds `nbytes` writable bytes.
            unsafe { std::ptr::copy_nonoverlapping(message.as_ptr(), recvbuff, nbytes) };
            Ok(())
        }
    }
}

unsafe fn bytes<'a>(ptr: *const c_void, nbytes: usize) -> &'a [u8] {
    if nbytes == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(ptr as *const u8, nbytes)
    }
}

unsafe fn post_collective(
    comm: ncclComm_t,
    sendbuff: Option<*const c_void>,
    recvbuff: *mut c_void,
    count: usize,
    signature: Signature,
    datatype: ncclDataType_t,
) -> Outcome {
    let net = net_comm(comm);
    let member = match &net {
        Some(_) => None,
        None => Some(member(comm)?),
    };
    let Some(width) = element_size(datatype) else {
        return Err((
            ncclInvalidArgument,
            format!("unknown ncclDataType_t {datatype}"),
        ));
    };
    let nbytes = count * width;
    if nbytes > 0 && (recvbuff.is_null() || sendbuff.is_some_and(|p| p.is_null())) {
        return Err((ncclInvalidArgument, "null buffer".into()));
    }
    let contribution = sendbuff.map(|p| bytes(p, nbytes).to_vec());
    if let Signature::Broadcast { root, .. } = signature {
        let nranks = net.as_ref().map_or_else(
            || member.as_ref().map_or(0, |m| m.group.nranks),
            |n| n.nranks,
        );
        if root >= nranks {
            return Err((ncclInvalidArgument, format!("root {root} is not a rank")));
        }
    }
    let Some(member) = member else {
        let net = net.expect("one of the two");
        let op = net.post_collective(
            signature,
            contribution.unwrap_or_default(),
            recvbuff as *mut u8,
            nbytes,
        )?;
        return submit(Posted::Net(op));
    };
    let group = Arc::clone(&member.group);
    let n = group.nranks;
    let mut state = group.lock();
    if let Some(by) = state.aborted_by {
        return Err((
            ncclRemoteError,
            format!("the communicator was aborted by rank {by}"),
        ));
    }
    let seq = state.collectives_posted[member.rank];
    state.collectives_posted[member.rank] += 1;
    let round = state.rounds.entry(seq).or_insert_with(|| Round {
        signature,
        parts: vec![None; n],
        arrived: 0,
        result: None,
        taken: 0,
    });
    if round.signature != signature && round.result.is_none() {
        round.result = Some(Err((
            ncclInvalidUsage,
            format!(
                "collective #{seq} differs between ranks: {:?} vs {:?} on rank {}",
                round.signature, signature, member.rank
            ),
        )));
    }
    round.parts[member.rank] = Some(contribution.unwrap_or_default());
    round.arrived += 1;
    if round.arrived == n && round.result.is_none() {
        let result = match signature {
            Signature::AllReduce { datatype, op, .. } => {
                let parts: Vec<&[u8]> = round
                    .parts
                    .iter()
                    .map(|p| p.as_deref().unwrap_or(&[]))
                    .collect();
                reduce(&parts, datatype, op)
            }
            Signature::Broadcast { root, .. } => round.parts[root].take().unwrap_or_default(),
        };
        round.result = Some(Ok(Arc::new(result)));
    }
    drop(state);
    group.changed.notify_all();
    submit(Posted::Collective {
        member,
        seq,
        recvbuff: recvbuff as *mut u8,
        nbytes,
    })
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
    static NEXT: AtomicU64 = AtomicU64::new(1);
    if id.is_null() {
        return fail(ncclInvalidArgument, "null unique id pointer".into());
    }
    let mut raw = [0u8; 128];
    raw[..8].copy_from_slice(MAGIC);
    raw[8..12].copy_from_slice(&std::process::id().to_le_bytes());
    raw[12..20].copy_from_slice(&NEXT.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    raw[20..28].copy_from_slice(&nonce.to_le_bytes());
    net::issue(&mut raw);
    for (dst, src) in (*id).internal.iter_mut().zip(raw) {
        *dst = src as c_char;
    }
    ncclSuccess
}

pub unsafe fn ncclCommInitRank(
    comm: *mut ncclComm_t,
    nranks: c_int,
    id: ncclUniqueId,
    rank: c_int,
) -> ncclResult_t {
    let force_tcp = std::env::var("MONARCH_HOST_COMM_TRANSPORT").is_ok_and(|v| v.trim() == "tcp");
    code(init_rank(comm, nranks, id, rank, timeout(), force_tcp))
}

/// `force_tcp`: use the loopback transport even when every rank is in this process (tests and
/// benchmarks of the transport; `MONARCH_HOST_COMM_TRANSPORT=tcp`).
unsafe fn init_rank(
    comm: *mut ncclComm_t,
    nranks: c_int,
    id: ncclUniqueId,
    rank: c_int,
    limit: Duration,
    force_tcp: bool,
) -> Outcome {
    if comm.is_null() {
        return Err((ncclInvalidArgument, "null communicator pointer".into()));
    }
    if nranks < 1 || rank < 0 || rank >= nranks {
        return Err((
            ncclInvalidArgument,
            format!("rank {rank} is not in 0..{nranks} (world size {nranks})"),
        ));
    }
    let key: Vec<u8> = id.internal.iter().map(|&c| c as u8).collect();
    if &key[..8] != MAGIC {
        return Err((
            ncclInvalidArgument,
            "the unique id was not made by ncclGetUniqueId of a monarch_runtime CPU build".into(),
        ));
    }
    let (nranks, rank) = (nranks as usize, rank as usize);
    let info = net::IdInfo::parse(&key);
    let start = Instant::now();
    if info.port != 0 {
        // Rendezvous through the id's server: in-process if every rank turns out to be here.
        let (listener, port) = net::listen()?;
        let roster = net::rendezvous(&info, nranks, rank, port, limit)?;
        let left = limit.saturating_sub(start.elapsed());
        if force_tcp || roster.iter().any(|(pid, _)| *pid != std::process::id()) {
            let net = net::connect(&info, &roster, rank, listener, left)?;
            let mut reg = registry();
            reg.next_handle += 1;
            let handle = reg.next_handle;
            reg.nets.insert(handle, net);
            *comm = handle as ncclComm_t;
            return Ok(());
        }
        drop(listener);
        return join_local(comm, key, nranks, rank, left.max(Duration::from_secs(1)));
    }
    if key[8..12] != std::process::id().to_le_bytes() {
        return Err((
            ncclInvalidArgument,
            "the unique id was made in another process by one that could not listen on 127.0.0.1, so it \
             connects threads of that process only"
                .into(),
        ));
    }
    join_local(comm, key, nranks, rank, limit)
}

/// Joins the in-process group of `key` (every rank is a thread of this process).
unsafe fn join_local(
    comm: *mut ncclComm_t,
    key: Vec<u8>,
    nranks: usize,
    rank: usize,
    limit: Duration,
) -> Outcome {
    let group = {
        let mut reg = registry();
        let group = Arc::clone(
            reg.pending
                .entry(key.clone())
                .or_insert_with(|| Arc::new(Group::new(nranks))),
        );
        if group.nranks != nranks {
            return Err((
                ncclInvalidArgument,
                format!(
                    "rank {rank} asked for {nranks} ranks; the ranks already joined asked for {}",
                    group.nranks
                ),
            ));
        }
        let mut state = group.lock();
        if state.joined[rank] {
            return Err((
                ncclInvalidUsage,
                format!("rank {rank} joined this communicator twice"),
            ));
        }
        state.joined[rank] = true;
        state.count += 1;
        if state.count == nranks {
            reg.pending.remove(&key);
        }
        drop(state);
        group.changed.notify_all();
        group
    };
    let deadline = Instant::now() + limit;
    let mut state = group.lock();
    while state.count < nranks {
        let now = Instant::now();
        if now >= deadline {
            let missing: Vec<usize> = (0..nranks).filter(|&r| !state.joined[r]).collect();
            state.joined[rank] = false;
            state.count -= 1;
            let empty = state.count == 0;
            drop(state);
            if empty {
                let mut reg = registry();
                if reg
                    .pending
                    .get(&key)
                    .is_some_and(|g| Arc::ptr_eq(g, &group))
                {
                    reg.pending.remove(&key);
                }
            }
            return Err((
                ncclSystemError,
                format!(
                    "rank {rank} waited {:.1} s for ranks {missing:?} of {nranks} to join (ncclCommInitRank); \
                     set MONARCH_HOST_COMM_TIMEOUT to wait longer",
                    limit.as_secs_f64()
                ),
            ));
        }
        state = group
            .changed
            .wait_timeout(state, deadline - now)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    drop(state);
    let mut reg = registry();
    reg.next_handle += 1;
    let handle = reg.next_handle;
    reg.comms.insert(handle, Arc::new(Member { group, rank }));
    *comm = handle as ncclComm_t;
    Ok(())
}

fn leave(comm: ncclComm_t, abort: bool) -> Outcome {
    let net = registry().nets.remove(&(comm as usize));
    if let Some(net) = net {
        net.close(abort);
        return Ok(());
    }
    let member = registry().comms.remove(&(comm as usize)).ok_or_else(|| {
        (
            ncclInvalidArgument,
            format!("{comm:p} is not a live communicator (never created, destroyed or aborted)"),
        )
    })?;
    let mut state = member.group.lock();
    state.departed[member.rank] = true;
    if abort && state.aborted_by.is_none() {
        state.aborted_by = Some(member.rank);
    }
    drop(state);
    member.group.changed.notify_all();
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
    if let Some(net) = net_comm(comm) {
        *result = net.async_error();
        return ncclSuccess;
    }
    match member(comm) {
        Ok(member) => {
            *result = match member.group.lock().aborted_by {
                Some(by) if by != member.rank => ncclRemoteError,
                _ => ncclSuccess,
            };
            ncclSuccess
        }
        Err((r, m)) => fail(r, m),
    }
}

pub unsafe fn ncclAllReduce(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataType_t,
    op: ncclRedOp_t,
    comm: ncclComm_t,
    _stream: cudaStream_t,
) -> ncclResult_t {
    if !matches!(op, ncclSum | ncclProd | ncclMax | ncclMin | ncclAvg) {
        return fail(ncclInvalidArgument, format!("unknown ncclRedOp_t {op}"));
    }
    let signature = Signature::AllReduce {
        count,
        datatype,
        op,
    };
    code(post_collective(
        comm,
        Some(sendbuff),
        recvbuff,
        count,
        signature,
        datatype,
    ))
}

pub unsafe fn ncclBroadcast(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataType_t,
    root: c_int,
    comm: ncclComm_t,
    _stream: cudaStream_t,
) -> ncclResult_t {
    let outcome = (|| {
        if root < 0 {
            return Err((ncclInvalidArgument, format!("root {root} is not a rank")));
        }
        let my_rank = match net_comm(comm) {
            Some(net) => net.rank,
            None => member(comm)?.rank,
        };
        let is_root = my_rank == root as usize;
        let signature = Signature::Broadcast {
            count,
            datatype,
            root: root as usize,
        };
        post_collective(
            comm,
            is_root.then_some(sendbuff),
            recvbuff,
            count,
            signature,
            datatype,
        )
    })();
    code(outcome)
}

/// A cross-process communicator's peer and byte count, checked like `p2p_member`'s.
fn p2p_net(
    net: &NetComm,
    count: usize,
    datatype: ncclDataType_t,
    peer: c_int,
) -> Result<(usize, usize), Failure> {
    let Some(width) = element_size(datatype) else {
        return Err((
            ncclInvalidArgument,
            format!("unknown ncclDataType_t {datatype}"),
        ));
    };
    if peer < 0 || peer as usize >= net.nranks {
        return Err((ncclInvalidArgument, format!("peer {peer} is not a rank")));
    }
    if peer as usize == net.rank {
        return Err((
            ncclInvalidUsage,
            format!(
                "rank {peer} cannot send to or receive from itself over the loopback transport"
            ),
        ));
    }
    Ok((peer as usize, count * width))
}

unsafe fn p2p_member(
    comm: ncclComm_t,
    count: usize,
    datatype: ncclDataType_t,
    peer: c_int,
) -> Result<(Arc<Member>, usize, usize), (ncclResult_t, String)> {
    let member = member(comm)?;
    let Some(width) = element_size(datatype) else {
        return Err((
            ncclInvalidArgument,
            format!("unknown ncclDataType_t {datatype}"),
        ));
    };
    if peer < 0 || peer as usize >= member.group.nranks {
        return Err((ncclInvalidArgument, format!("peer {peer} is not a rank")));
    }
    if member.group.lock().aborted_by.is_some() {
        return Err((ncclRemoteError, "the communicator was aborted".into()));
    }
    Ok((member, peer as usize, count * width))
}

pub unsafe fn ncclSend(
    sendbuff: *const c_void,
    count: usize,
    datatype: ncclDataType_t,
    peer: c_int,
    comm: ncclComm_t,
    _stream: cudaStream_t,
) -> ncclResult_t {
    let outcome = (|| {
        if let Some(net) = net_comm(comm) {
            let (peer, nbytes) = p2p_net(&net, count, datatype, peer)?;
            if nbytes > 0 && sendbuff.is_null() {
                return Err((ncclInvalidArgument, "null send buffer".into()));
            }
            let op = net.post_send(bytes(sendbuff, nbytes), peer)?;
            return submit(Posted::Net(op));
        }
        let (member, peer, nbytes) = p2p_member(comm, count, datatype, peer)?;
        if nbytes > 0 && sendbuff.is_null() {
            return Err((ncclInvalidArgument, "null send buffer".into()));
        }
        let message = bytes(sendbuff, nbytes).to_vec();
        let mut state = member.group.lock();
        let channel = state.channels.entry((member.rank, peer)).or_default();
        channel.queue.push_back(message);
        let seq = channel.sent;
        channel.sent += 1;
        drop(state);
        member.group.changed.notify_all();
        submit(Posted::Send { member, peer, seq })
    })();
    code(outcome)
}

pub unsafe fn ncclRecv(
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataType_t,
    peer: c_int,
    comm: ncclComm_t,
    _stream: cudaStream_t,
) -> ncclResult_t {
    let outcome = (|| {
        if let Some(net) = net_comm(comm) {
            let (peer, nbytes) = p2p_net(&net, count, datatype, peer)?;
            if nbytes > 0 && recvbuff.is_null() {
                return Err((ncclInvalidArgument, "null receive buffer".into()));
            }
            net.check_live()?;
            return submit(Posted::Net(net::Op::Recv {
                comm: net,
                peer,
                recvbuff: recvbuff as *mut u8,
                nbytes,
            }));
        }
        let (member, peer, nbytes) = p2p_member(comm, count, datatype, peer)?;
        if nbytes > 0 && recvbuff.is_null() {
            return Err((ncclInvalidArgument, "null receive buffer".into()));
        }
        submit(Posted::Recv {
            member,
            peer,
            recvbuff: recvbuff as *mut u8,
            nbytes,
        })
    })();
    code(outcome)
}

pub unsafe fn ncclGroupStart() -> ncclResult_t {
    GROUP.with(|g| g.borrow_mut().0 += 1);
    ncclSuccess
}

pub unsafe fn ncclGroupEnd() -> ncclResult_t {
    let posted = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        match g.0 {
            0 => None,
            1 => {
                g.0 = 0;
                Some(std::mem::take(&mut g.1))
            }
            _ => {
                g.0 -= 1;
                Some(Vec::new())
            }
        }
    });
    let Some(posted) = posted else {
        return fail(
            ncclInvalidUsage,
            "ncclGroupEnd without ncclGroupStart".into(),
        );
    };
    // Sends and collective contributions are already posted. Complete receives and collectives first
    // (they need only what peers posted), then the sends (they wait for peers' receives), keeping the
    // first error.
    let (sends, others): (Vec<Posted>, Vec<Posted>) = posted.into_iter().partition(|op| match op {
        Posted::Send { .. } => true,
        Posted::Net(op) => op.is_send(),
        _ => false,
    });
    let mut first = Ok(());
    for op in others.into_iter().chain(sends) {
        let outcome = complete(op);
        if first.is_ok() {
            first = outcome;
        }
    }
    code(first)
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
    use super::*;
    use std::thread;

    fn uid() -> ncclUniqueId {
        let mut id = ncclUniqueId { internal: [0; 128] };
        // SAFETY: valid out-pointer.
        assert_eq!(unsafe { ncclGetUniqueId(&mut id) }, ncclSuccess);
        id
    }

    fn init(id: ncclUniqueId, n: i32, r: i32, tcp: bool) -> usize {
        let mut comm: ncclComm_t = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        let rc = code(unsafe { init_rank(&mut comm, n, id, r, timeout(), tcp) });
        assert_eq!(rc, ncclSuccess);
        assert_eq!(registry().nets.contains_key(&(comm as usize)), tcp);
        comm as usize
    }

    /// Runs `body` on `n` threads, over the in-process communicator or (`tcp`) the loopback one.
    fn ranks<T: Send + 'static>(
        tcp: bool,
        n: i32,
        body: impl Fn(usize, i32) -> T + Send + Sync + 'static,
    ) -> Vec<T> {
        let id = uid();
        let body = Arc::new(body);
        let handles: Vec<_> = (0..n)
            .map(|r| {
                let body = Arc::clone(&body);
                thread::spawn(move || body(init(id, n, r, tcp), r))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn all_reduce_sum_max_avg_f32_and_i32() {
        all_reduce_sum_max_avg_f32_and_i32_over(false);
        all_reduce_sum_max_avg_f32_and_i32_over(true);
    }

    fn all_reduce_sum_max_avg_f32_and_i32_over(tcp: bool) {
        let out = ranks(tcp, 3, |comm, r| {
            let comm = comm as ncclComm_t;
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
            // SAFETY: live handle, destroyed once.
            assert_eq!(unsafe { ncclCommDestroy(comm) }, ncclSuccess);
            (got, ints[0])
        });
        for (got, avg) in out {
            assert_eq!(got, vec![[6.0, -3.0], [3.0, 0.0], [1.0, -2.0], [2.0, -1.0]]);
            assert_eq!(avg, 11); // (1 + 11 + 21) / 3
        }
    }

    #[test]
    fn half_precision_round_trips() {
        for v in [
            0.0f32,
            1.0,
            -2.5,
            65504.0,
            6.1035156e-5,
            5.9604645e-8,
            0.333_251_95,
        ] {
            assert_eq!(f16_to_f32(f32_to_f16(v)), v, "{v}");
        }
        assert_eq!(f32_to_f16(1.0), 0x3c00);
        assert_eq!(f32_to_f16(1e6), 0x7c00);
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(bf16_to_f32(f32_to_bf16(-3.5)), -3.5);
    }

    #[test]
    fn send_recv_and_broadcast() {
        send_recv_and_broadcast_over(false);
        send_recv_and_broadcast_over(true);
    }

    fn send_recv_and_broadcast_over(tcp: bool) {
        let out = ranks(tcp, 2, |comm, r| {
            let comm = comm as ncclComm_t;
            let mut data = [0u8; 5];
            if r == 0 {
                data = *b"hello";
            }
            // SAFETY: 5-byte buffers.
            unsafe {
                assert_eq!(
                    ncclBroadcast(
                        data.as_ptr().cast(),
                        data.as_mut_ptr().cast(),
                        5,
                        ncclInt8,
                        0,
                        comm,
                        std::ptr::null_mut()
                    ),
                    ncclSuccess
                );
                // Grouped exchange both ways: would deadlock if sends did not wait for the group end.
                let mine = [r as u8; 3];
                let mut theirs = [9u8; 3];
                let peer = 1 - r;
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
                assert_eq!(ncclGroupEnd(), ncclSuccess);
                ncclCommDestroy(comm);
                (data, theirs)
            }
        });
        assert_eq!(out[0], (*b"hello", [1, 1, 1]));
        assert_eq!(out[1], (*b"hello", [0, 0, 0]));
    }

    #[test]
    fn abort_wakes_a_blocked_peer() {
        abort_wakes_a_blocked_peer_over(false);
        abort_wakes_a_blocked_peer_over(true);
    }

    fn abort_wakes_a_blocked_peer_over(tcp: bool) {
        let out = ranks(tcp, 2, |comm, r| {
            let comm = comm as ncclComm_t;
            let mut buf = [0u8; 4];
            // SAFETY: 4-byte buffer; the handle is live until abort/destroy.
            unsafe {
                if r == 0 {
                    thread::sleep(Duration::from_millis(50));
                    assert_eq!(ncclCommAbort(comm), ncclSuccess);
                    // Stale handle: an error, not a crash.
                    assert_eq!(ncclCommAbort(comm), ncclInvalidArgument);
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
                    let mut async_error = 0;
                    assert_eq!(ncclCommGetAsyncError(comm, &mut async_error), ncclSuccess);
                    assert_eq!(async_error, ncclRemoteError);
                    ncclCommDestroy(comm);
                    rc
                }
            }
        });
        assert_eq!(out[1], ncclRemoteError);
    }

    #[test]
    fn mismatched_world_size_and_foreign_id_are_errors() {
        let mut id = uid();
        let mut comm: ncclComm_t = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        unsafe {
            assert_eq!(ncclCommInitRank(&mut comm, 2, id, 5), ncclInvalidArgument);
            id.internal[40] ^= 1; // a token the rendezvous did not issue
            assert_eq!(ncclCommInitRank(&mut comm, 1, id, 0), ncclInvalidArgument);
            let msg = std::ffi::CStr::from_ptr(ncclGetLastError(std::ptr::null_mut()));
            assert!(msg.to_string_lossy().contains("not issued"), "{msg:?}");
        }
    }

    #[test]
    fn init_times_out_when_a_rank_never_joins() {
        let id = uid();
        let mut comm: ncclComm_t = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        let rc = code(unsafe { init_rank(&mut comm, 2, id, 0, Duration::from_millis(200), false) });
        assert_eq!(rc, ncclSystemError);
        // The pending group is gone: the registry keeps nothing for an abandoned id.
        assert!(!registry()
            .pending
            .contains_key(&id.internal.iter().map(|&c| c as u8).collect::<Vec<_>>()));
    }
}
