//! Communicators across processes on one machine, for the CPU build: loopback TCP (127.0.0.1 only).
//!
//! Why TCP on the loopback rather than Unix sockets or shared memory: a recovering replica must
//! survive its peer being SIGKILLed, and a killed process leaves behind any file it created
//! (a socket path, a `/dev/shm` segment) but never a TCP port: the kernel closes its sockets, so the
//! survivor sees EOF at once and nothing needs cleaning up. A port fits in the unique id, so the id
//! stays self-contained (no shared directory to agree on), and the same wire protocol would work
//! between machines. Loopback TCP moves a few GB/s here, the same order as a copy through a pipe.
//!
//! **Unique id** (128 bytes, `ncclGetUniqueId`): magic, the creating process's pid, a counter and a
//! nonce (as before), then the port of that process's *rendezvous server* and a 16-byte random
//! token. The server is one thread and one listening socket per process, started by the first
//! `ncclGetUniqueId` and kept for the process's life (so ids cost nothing more, and counting threads
//! or descriptors before and after a communicator sees no change).
//!
//! **Rendezvous** (`ncclCommInitRank`): every rank, in whatever process, connects to the server
//! named by the id and sends JOIN (the id, world size, rank, pid, the port of a data listener it has
//! just opened). The server answers each with STATUS (who has joined) whenever that changes and,
//! once all have joined, with the ROSTER (every rank's pid and data port) and forgets the id (an id
//! makes one communicator, as in NCCL). It refuses ids it did not issue (a corrupt or stale id)
//! and inconsistent world sizes or ranks. A rank waits at most `MONARCH_HOST_COMM_TIMEOUT` seconds
//! (default 120) and then fails naming the ranks that never came.
//!
//! If every rank of the roster is in this process, the communicator is the in-process one
//! (`nccl.rs`: threads, no sockets). Otherwise the ranks connect pairwise (the higher rank dials the
//! lower one's data listener and proves itself with the token), close the listeners and run
//! **one reader thread per connection**. Frames: a 16-byte header (kind, length) and a payload:
//!
//! - DATA: a `ncclSend` payload. The reader writes it straight into the matching posted receive
//!   buffer when there is one (no intermediate copy), else queues it. The receiver answers ACK when
//!   the data is in place, and `ncclSend` completes on that ACK: as in NCCL (and the in-process
//!   emulation) a send completes when the peer has received.
//! - COLL: a collective contribution (sequence number, the call's signature, the bytes). Every rank
//!   sends its contribution to every other and reduces locally in rank order (the same f64
//!   accumulation as in-process, so every rank gets the same bits); signatures that differ are
//!   `ncclInvalidUsage` on every rank.
//! - BYE (`ncclCommDestroy`), ABORT (`ncclCommAbort`): the peer left, or aborted the communicator.
//!
//! A connection that ends without BYE or ABORT means the peer process died: every operation of the
//! communicator then fails with `ncclRemoteError` naming the rank and its pid (NCCL reports a dead
//! peer asynchronously the same way). `ncclCommAbort` shuts the sockets down, which frees a thread
//! blocked on this communicator (in a read, a write or a wait) and tells the peers. No data
//! operation has a timeout of its own, as in NCCL: a live but hung peer is a watchdog's job
//! (`transfer_state(timeout=...)`).
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::nccl::{reduce, Failure, Signature};
use crate::nccl::*;

/// Bytes of the id that identify it (magic, pid, counter, nonce, port, version, token).
pub(super) const KEY_BYTES: usize = 48;
pub(super) type Key = [u8; KEY_BYTES];
const ID_VERSION: u8 = 1;

const JOIN: u32 = 1;
const STATUS: u32 = 2;
const ROSTER: u32 = 3;
const REFUSED: u32 = 4;
const HELLO: u32 = 5;
const DATA: u32 = 10;
const ACK: u32 = 11;
const COLL: u32 = 12;
const BYE: u32 = 13;
const ABORT: u32 = 14;
const HEADER: usize = 16;
/// Messages at least this large wait up to DIRECT_WAIT for their receive to be posted.
const DIRECT_MIN: usize = 256 << 10;
const DIRECT_WAIT: Duration = Duration::from_millis(100);
/// Largest control payload accepted (JOIN, ROSTER, ...): a sanity bound on a garbage peer.
const CONTROL_MAX: u64 = 1 << 20;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

fn write_frame(w: &mut TcpStream, kind: u32, parts: &[&[u8]]) -> io::Result<()> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let mut header = [0u8; HEADER];
    header[..4].copy_from_slice(&kind.to_le_bytes());
    header[8..].copy_from_slice(&(len as u64).to_le_bytes());
    w.write_all(&header)?;
    for p in parts {
        w.write_all(p)?;
    }
    Ok(())
}

/// The next frame's kind and length; None on a clean end of stream before a header.
fn read_header(r: &mut TcpStream) -> io::Result<Option<(u32, u64)>> {
    let mut header = [0u8; HEADER];
    let mut got = 0;
    while got < HEADER {
        match r.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let kind = u32::from_le_bytes(header[..4].try_into().unwrap_or_default());
    let len = u64::from_le_bytes(header[8..].try_into().unwrap_or_default());
    Ok(Some((kind, len)))
}

fn read_control(r: &mut TcpStream) -> io::Result<Option<(u32, Vec<u8>)>> {
    let Some((kind, len)) = read_header(r)? else {
        return Ok(None);
    };
    if len > CONTROL_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "oversized control frame",
        ));
    }
    let mut payload = vec![0u8; len as usize];
    r.read_exact(&mut payload)?;
    Ok(Some((kind, payload)))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .unwrap_or(0)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// The unique id.

/// What a unique id says about its rendezvous.
#[derive(Clone, Copy, Debug)]
pub(super) struct IdInfo {
    pub key: Key,
    /// The process that made the id (and runs its rendezvous server).
    pub pid: u32,
    /// The rendezvous server's port; 0 when the process could not listen (in-process ids only).
    pub port: u16,
}

impl IdInfo {
    pub fn parse(raw: &[u8]) -> IdInfo {
        let mut key = [0u8; KEY_BYTES];
        key.copy_from_slice(&raw[..KEY_BYTES]);
        let port = if raw[30] == ID_VERSION {
            u16::from_le_bytes([raw[28], raw[29]])
        } else {
            0
        };
        IdInfo {
            key,
            pid: u32_at(raw, 8),
            port,
        }
    }
}

fn random_token() -> [u8; 16] {
    let mut token = [0u8; 16];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut token));
    if from_os.is_err() {
        // std's hasher keys are random per process: good enough to make a token unguessable here.
        use std::hash::{BuildHasher, Hasher};
        for (i, piece) in token.chunks_mut(8).enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(i);
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0),
            );
            piece.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    token
}

/// Completes a fresh id (bytes 0..28 already hold magic, pid, counter, nonce): the rendezvous
/// server's port and a random token, and registers it with the server. Without a server (the
/// process cannot listen on the loopback) the id works in this process only.
pub(super) fn issue(raw: &mut [u8; 128]) {
    let Some(server) = server() else {
        return;
    };
    raw[28..30].copy_from_slice(&server.port.to_le_bytes());
    raw[30] = ID_VERSION;
    raw[32..48].copy_from_slice(&random_token());
    let info = IdInfo::parse(raw);
    lock(&server.state).issued.insert(info.key);
}

// ---------------------------------------------------------------------------------------------
// The rendezvous server: one thread per process, blocking in accept.

struct Joined {
    stream: TcpStream,
    pid: u32,
    port: u16,
}

struct Pending {
    nranks: usize,
    members: Vec<Option<Joined>>,
}

#[derive(Default)]
struct ServerState {
    issued: HashSet<Key>,
    pending: HashMap<Key, Pending>,
}

struct Server {
    port: u16,
    state: Mutex<ServerState>,
}

fn server() -> Option<&'static Server> {
    static SERVER: OnceLock<Option<Server>> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            let listener = TcpListener::bind(loopback(0)).ok()?;
            let port = listener.local_addr().ok()?.port();
            let spawned = std::thread::Builder::new()
                .name("mr-rendezvous".into())
                .spawn(move || {
                    for stream in listener.incoming().flatten() {
                        if let Some(server) = server() {
                            server.handle(stream);
                        }
                    }
                });
            spawned.ok()?;
            Some(Server {
                port,
                state: Mutex::new(ServerState::default()),
            })
        })
        .as_ref()
}

/// Whether the other end of `stream` is still there (no EOF or error pending).
fn alive(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return false;
    }
    let mut byte = [0u8; 1];
    let live = match stream.peek(&mut byte) {
        Ok(0) => false,
        Ok(_) => true,
        Err(e) => e.kind() == io::ErrorKind::WouldBlock,
    };
    live && stream.set_nonblocking(false).is_ok()
}

fn refuse(stream: &mut TcpStream, why: &str) {
    let _ = write_frame(stream, REFUSED, &[why.as_bytes()]);
}

impl Server {
    fn handle(&self, mut stream: TcpStream) {
        // A client that connects and says nothing must not hold up the others for long.
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = stream.set_nodelay(true);
        let Ok(Some((JOIN, join))) = read_control(&mut stream) else {
            return;
        };
        let _ = stream.set_read_timeout(None);
        if join.len() < KEY_BYTES + 14 {
            return refuse(&mut stream, "malformed JOIN");
        }
        let mut key = [0u8; KEY_BYTES];
        key.copy_from_slice(&join[..KEY_BYTES]);
        let nranks = u32_at(&join, KEY_BYTES) as usize;
        let rank = u32_at(&join, KEY_BYTES + 4) as usize;
        let pid = u32_at(&join, KEY_BYTES + 8);
        let port = u16::from_le_bytes([join[KEY_BYTES + 12], join[KEY_BYTES + 13]]);
        let mut state = lock(&self.state);
        // Joins abandoned by ranks that gave up (timed out, died) are dropped here.
        state.pending.retain(|_, p| {
            for m in p.members.iter_mut() {
                if m.as_ref().is_some_and(|j| !alive(&j.stream)) {
                    *m = None;
                }
            }
            p.members.iter().any(Option::is_some)
        });
        if !state.issued.contains(&key) {
            return refuse(
                &mut stream,
                &format!(
                    "this unique id was not issued by the rendezvous it names (127.0.0.1:{}, pid {}): it is \
                     corrupt, or its communicator already formed (an id makes one communicator; make a new one \
                     with ncclGetUniqueId)",
                    self.port,
                    std::process::id()
                ),
            );
        }
        let pending = state.pending.entry(key).or_insert_with(|| Pending {
            nranks,
            members: (0..nranks).map(|_| None).collect(),
        });
        if pending.nranks != nranks || rank >= nranks {
            let why = format!(
                "rank {rank} joins with world size {nranks}, but the ranks already there joined with {}",
                pending.nranks
            );
            return refuse(&mut stream, &why);
        }
        if pending.members[rank].is_some() {
            return refuse(
                &mut stream,
                &format!("rank {rank} joined this communicator twice"),
            );
        }
        pending.members[rank] = Some(Joined { stream, pid, port });
        if pending.members.iter().all(Option::is_some) {
            let Some(done) = state.pending.remove(&key) else {
                return;
            };
            state.issued.remove(&key);
            drop(state);
            let mut roster = Vec::with_capacity(done.nranks * 6);
            for m in done.members.iter().flatten() {
                roster.extend_from_slice(&m.pid.to_le_bytes());
                roster.extend_from_slice(&m.port.to_le_bytes());
            }
            for mut m in done.members.into_iter().flatten() {
                let _ = write_frame(&mut m.stream, ROSTER, &[&roster]);
            }
        } else {
            let joined: Vec<u8> = pending
                .members
                .iter()
                .map(|m| u8::from(m.is_some()))
                .collect();
            for m in pending.members.iter_mut().flatten() {
                let _ = write_frame(&mut m.stream, STATUS, &[&joined]);
            }
        }
    }

    /// Drops a rank's pending join (it gave up waiting).
    fn forget(&self, key: &Key, rank: usize) {
        let mut state = lock(&self.state);
        if let Some(p) = state.pending.get_mut(key) {
            if let Some(slot) = p.members.get_mut(rank) {
                *slot = None;
            }
            if p.members.iter().all(Option::is_none) {
                state.pending.remove(key);
            }
        }
    }
}

/// Every rank's pid and data port, by rank.
pub(super) type Roster = Vec<(u32, u16)>;

fn remaining(deadline: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}

/// Joins the rendezvous named by `info` as `rank` of `nranks`, announcing the data port `port`.
pub(super) fn rendezvous(
    info: &IdInfo,
    nranks: usize,
    rank: usize,
    port: u16,
    limit: Duration,
) -> Result<Roster, Failure> {
    let deadline = Instant::now() + limit;
    let at = loopback(info.port);
    let mut stream = TcpStream::connect_timeout(&at, limit).map_err(|e| {
        (
            ncclSystemError,
            format!(
                "rank {rank} cannot reach the rendezvous of this unique id at {at}: {e}; the process that made \
                 the id (pid {}) has exited, or the id is stale",
                info.pid
            ),
        )
    })?;
    let _ = stream.set_nodelay(true);
    let mut join = info.key.to_vec();
    join.extend_from_slice(&(nranks as u32).to_le_bytes());
    join.extend_from_slice(&(rank as u32).to_le_bytes());
    join.extend_from_slice(&std::process::id().to_le_bytes());
    join.extend_from_slice(&port.to_le_bytes());
    write_frame(&mut stream, JOIN, &[&join]).map_err(|e| {
        (
            ncclSystemError,
            format!(
                "rank {rank}: the rendezvous at {at} (pid {}) failed: {e}",
                info.pid
            ),
        )
    })?;
    let mut joined = vec![0u8; nranks];
    joined[rank] = 1;
    let gave_up = |joined: &[u8]| {
        if info.pid == std::process::id() {
            if let Some(server) = server() {
                server.forget(&info.key, rank);
            }
        }
        let missing: Vec<usize> = (0..nranks).filter(|&r| joined[r] == 0).collect();
        let came: Vec<usize> = (0..nranks).filter(|&r| joined[r] != 0).collect();
        (
            ncclSystemError,
            format!(
                "rank {rank} waited {:.1} s for ranks {missing:?} of {nranks} to join (ncclCommInitRank; joined: \
                 {came:?}, rendezvous at {at}); set MONARCH_HOST_COMM_TIMEOUT to wait longer",
                limit.as_secs_f64()
            ),
        )
    };
    loop {
        let Some(left) = remaining(deadline) else {
            return Err(gave_up(&joined));
        };
        let _ = stream.set_read_timeout(Some(left));
        match read_control(&mut stream) {
            Ok(Some((STATUS, status))) if status.len() == nranks => joined = status,
            Ok(Some((ROSTER, roster))) if roster.len() == 6 * nranks => {
                return Ok(roster
                    .chunks_exact(6)
                    .map(|c| (u32_at(c, 0), u16::from_le_bytes([c[4], c[5]])))
                    .collect());
            }
            Ok(Some((REFUSED, why))) => {
                return Err((
                    ncclInvalidArgument,
                    format!(
                        "the rendezvous at {at} refused rank {rank}: {}",
                        String::from_utf8_lossy(&why)
                    ),
                ))
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(gave_up(&joined))
            }
            other => {
                let what = match other {
                    Err(e) => e.to_string(),
                    _ => "it closed the connection".into(),
                };
                return Err((
                    ncclSystemError,
                    format!(
                        "rank {rank}: the rendezvous at {at} (pid {}) failed: {what}; its process may have exited",
                        info.pid
                    ),
                ));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A communicator across processes.

/// The data listener a rank opens before joining (closed once its peers are connected).
pub(super) fn listen() -> Result<(TcpListener, u16), Failure> {
    let listener = TcpListener::bind(loopback(0))
        .map_err(|e| (ncclSystemError, format!("cannot listen on 127.0.0.1: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| (ncclSystemError, e.to_string()))?
        .port();
    Ok((listener, port))
}

/// A receive posted before its data arrived: the reader thread fills it in place.
struct Slot {
    ptr: usize,
    len: usize,
    state: SlotState,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Posted,
    Filling,
    Filled,
    Failed,
}

#[derive(Default)]
struct Inbox {
    queue: VecDeque<Vec<u8>>,
    slot: Option<Slot>,
}

/// One rank's contribution to a collective: its call's signature and its bytes.
type Part = (Signature, Vec<u8>);

fn has_part(st: &NetState, seq: u64, rank: usize) -> bool {
    match st.rounds.get(&seq) {
        Some(parts) => parts[rank].is_some(),
        None => false,
    }
}

struct NetState {
    /// Set by destroy/abort here: connections ending after it are not a peer's failure.
    closing: bool,
    aborted_by: Option<usize>,
    /// A peer whose connection ended without BYE or ABORT, and how.
    died: Option<(usize, String)>,
    bye: Vec<bool>,
    /// No more frames will come from this peer.
    ended: Vec<bool>,
    inbox: Vec<Inbox>,
    sent: Vec<u64>,
    acked: Vec<u64>,
    collectives: u64,
    /// Collective contributions received, by sequence number: per rank, its signature and bytes.
    rounds: HashMap<u64, Vec<Option<Part>>>,
}

struct Conn {
    /// Writes (frames are written whole under this lock).
    writer: Mutex<TcpStream>,
    /// For shutdown without taking the writer's lock.
    control: TcpStream,
}

pub(super) struct NetComm {
    pub rank: usize,
    pub nranks: usize,
    pids: Vec<u32>,
    conns: Vec<Option<Conn>>,
    state: Mutex<NetState>,
    changed: Condvar,
    readers: Mutex<Vec<JoinHandle<()>>>,
}

fn hello(info: &IdInfo, rank: usize) -> Vec<u8> {
    let mut h = info.key.to_vec();
    h.extend_from_slice(&(rank as u32).to_le_bytes());
    h
}

/// Connects this rank to every other (the higher rank of a pair dials the lower one), then starts
/// a reader thread per connection.
pub(super) fn connect(
    info: &IdInfo,
    roster: &Roster,
    rank: usize,
    listener: TcpListener,
    limit: Duration,
) -> Result<Arc<NetComm>, Failure> {
    let nranks = roster.len();
    let deadline = Instant::now() + limit;
    let mut streams: Vec<Option<TcpStream>> = (0..nranks).map(|_| None).collect();
    let failed = |peer: usize, e: &dyn std::fmt::Display| {
        (
            ncclSystemError,
            format!(
                "rank {rank} could not connect to rank {peer} (pid {}): {e}",
                roster[peer].0
            ),
        )
    };
    for (peer, slot) in streams.iter_mut().enumerate().take(rank) {
        let left = remaining(deadline).unwrap_or(Duration::from_millis(1));
        let mut s = TcpStream::connect_timeout(&loopback(roster[peer].1), left)
            .map_err(|e| failed(peer, &e))?;
        write_frame(&mut s, HELLO, &[&hello(info, rank)]).map_err(|e| failed(peer, &e))?;
        *slot = Some(s);
    }
    listener
        .set_nonblocking(true)
        .map_err(|e| failed(rank, &e))?;
    let mut waiting = nranks - rank - 1;
    while waiting > 0 {
        match listener.accept() {
            Ok((mut s, _)) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                if let Ok(Some((HELLO, h))) = read_control(&mut s) {
                    let peer = u32_at(&h, KEY_BYTES) as usize;
                    if h.len() == KEY_BYTES + 4
                        && h[..KEY_BYTES] == info.key
                        && peer > rank
                        && peer < nranks
                        && streams[peer].is_none()
                    {
                        let _ = s.set_read_timeout(None);
                        streams[peer] = Some(s);
                        waiting -= 1;
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if remaining(deadline).is_none() {
                    let missing: Vec<usize> = (rank + 1..nranks)
                        .filter(|&p| streams[p].is_none())
                        .collect();
                    return Err((
                        ncclSystemError,
                        format!(
                            "rank {rank}: ranks {missing:?} joined the rendezvous but never connected within {:.1} s",
                            limit.as_secs_f64()
                        ),
                    ));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(failed(rank, &e)),
        }
    }
    drop(listener);
    let mut conns = Vec::with_capacity(nranks);
    let mut readers = Vec::new();
    for (peer, s) in streams.into_iter().enumerate() {
        match s {
            None => conns.push(None),
            Some(s) => {
                let _ = s.set_nodelay(true);
                let reader = s.try_clone().map_err(|e| failed(peer, &e))?;
                let control = s.try_clone().map_err(|e| failed(peer, &e))?;
                conns.push(Some(Conn {
                    writer: Mutex::new(s),
                    control,
                }));
                readers.push((peer, reader));
            }
        }
    }
    let comm = Arc::new(NetComm {
        rank,
        nranks,
        pids: roster.iter().map(|r| r.0).collect(),
        conns,
        state: Mutex::new(NetState {
            closing: false,
            aborted_by: None,
            died: None,
            bye: vec![false; nranks],
            ended: vec![false; nranks],
            inbox: (0..nranks).map(|_| Inbox::default()).collect(),
            sent: vec![0; nranks],
            acked: vec![0; nranks],
            collectives: 0,
            rounds: HashMap::new(),
        }),
        changed: Condvar::new(),
        readers: Mutex::new(Vec::new()),
    });
    let mut handles = Vec::new();
    for (peer, stream) in readers {
        let c = Arc::clone(&comm);
        let spawned = std::thread::Builder::new()
            .name(format!("mr-comm-r{rank}-p{peer}"))
            .spawn(move || c.read_loop(peer, stream));
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                *lock(&comm.readers) = handles;
                comm.close(false);
                return Err((
                    ncclSystemError,
                    format!("cannot start a reader thread: {e}"),
                ));
            }
        }
    }
    *lock(&comm.readers) = handles;
    Ok(comm)
}

/// A posted operation of a cross-process communicator (completed at once, or at ncclGroupEnd).
pub(super) enum Op {
    Send {
        comm: Arc<NetComm>,
        peer: usize,
        seq: u64,
    },
    Recv {
        comm: Arc<NetComm>,
        peer: usize,
        recvbuff: *mut u8,
        nbytes: usize,
    },
    Collective {
        comm: Arc<NetComm>,
        seq: u64,
        signature: Signature,
        mine: Vec<u8>,
        recvbuff: *mut u8,
        nbytes: usize,
    },
}

impl Op {
    pub fn is_send(&self) -> bool {
        matches!(self, Op::Send { .. })
    }
}

impl NetComm {
    fn lock(&self) -> MutexGuard<'_, NetState> {
        lock(&self.state)
    }

    fn who(&self, rank: usize) -> String {
        format!("rank {rank} (pid {})", self.pids[rank])
    }

    /// Why the communicator cannot go on, if it cannot; `peer`: the rank an operation waits on.
    fn failure(&self, st: &NetState, peer: Option<usize>) -> Option<Failure> {
        let me = self.rank;
        if let Some(by) = st.aborted_by {
            return Some(if by == me {
                (
                    ncclInvalidUsage,
                    format!("rank {me}'s communicator was aborted (ncclCommAbort) while this operation was in progress"),
                )
            } else {
                (
                    ncclRemoteError,
                    format!("{} aborted the communicator (ncclCommAbort); rank {me}'s operation cannot complete", self.who(by)),
                )
            });
        }
        if let Some((_, why)) = &st.died {
            return Some((ncclRemoteError, why.clone()));
        }
        if st.closing {
            return Some((
                ncclInvalidUsage,
                format!("rank {me}'s communicator was destroyed"),
            ));
        }
        match peer {
            Some(p) if st.ended[p] => Some((
                ncclRemoteError,
                format!(
                    "{} left the communicator (ncclCommDestroy) while rank {me} was waiting on it",
                    self.who(p)
                ),
            )),
            _ => None,
        }
    }

    fn wait<'a>(&'a self, st: MutexGuard<'a, NetState>) -> MutexGuard<'a, NetState> {
        self.changed.wait(st).unwrap_or_else(|e| e.into_inner())
    }

    fn send_frame(&self, peer: usize, kind: u32, parts: &[&[u8]]) -> Outcome {
        let Some(conn) = &self.conns[peer] else {
            return Err((ncclInvalidArgument, format!("peer {peer} is this rank")));
        };
        let mut w = lock(&conn.writer);
        write_frame(&mut w, kind, parts).map_err(|e| {
            let st = self.lock();
            self.failure(&st, Some(peer)).unwrap_or_else(|| {
                (
                    ncclRemoteError,
                    format!(
                        "rank {} could not write to {}: {e} (the process died?)",
                        self.rank,
                        self.who(peer)
                    ),
                )
            })
        })
    }

    pub fn async_error(&self) -> ncclResult_t {
        let st = self.lock();
        match st.aborted_by {
            Some(by) if by != self.rank => ncclRemoteError,
            _ if st.died.is_some() => ncclRemoteError,
            _ => ncclSuccess,
        }
    }

    pub fn check_live(&self) -> Outcome {
        let st = self.lock();
        match self.failure(&st, None) {
            Some(f) => Err(f),
            None => Ok(()),
        }
    }

    /// Posts a send: the frame is written now (the peer's reader always drains it).
    pub fn post_send(self: &Arc<Self>, data: &[u8], peer: usize) -> Result<Op, Failure> {
        self.check_live()?;
        let seq = {
            let mut st = self.lock();
            st.sent[peer] += 1;
            st.sent[peer] - 1
        };
        self.send_frame(peer, DATA, &[data])?;
        Ok(Op::Send {
            comm: Arc::clone(self),
            peer,
            seq,
        })
    }

    pub fn post_collective(
        self: &Arc<Self>,
        signature: Signature,
        mine: Vec<u8>,
        recvbuff: *mut u8,
        nbytes: usize,
    ) -> Result<Op, Failure> {
        self.check_live()?;
        let seq = {
            let mut st = self.lock();
            st.collectives += 1;
            st.collectives - 1
        };
        let mut head = seq.to_le_bytes().to_vec();
        head.extend_from_slice(&encode_signature(&signature));
        // A broadcast's non-root ranks contribute nothing but their signature.
        let payload: &[u8] = match signature {
            Signature::Broadcast { root, .. } if root != self.rank => &[],
            _ => &mine,
        };
        for peer in 0..self.nranks {
            if peer != self.rank {
                self.send_frame(peer, COLL, &[&head, payload])?;
            }
        }
        Ok(Op::Collective {
            comm: Arc::clone(self),
            seq,
            signature,
            mine,
            recvbuff,
            nbytes,
        })
    }

    fn read_loop(self: Arc<Self>, peer: usize, mut stream: TcpStream) {
        let ended = loop {
            let (kind, len) = match read_header(&mut stream) {
                Ok(Some(h)) => h,
                Ok(None) => break None,
                Err(e) => break Some(e),
            };
            let outcome = match kind {
                DATA => self.on_data(peer, &mut stream, len as usize),
                COLL => self.on_collective(peer, &mut stream, len as usize),
                ACK | BYE | ABORT if len == 0 => {
                    let mut st = self.lock();
                    match kind {
                        ACK => st.acked[peer] += 1,
                        BYE => st.bye[peer] = true,
                        _ => {
                            st.aborted_by.get_or_insert(peer);
                        }
                    }
                    drop(st);
                    self.changed.notify_all();
                    Ok(())
                }
                _ => Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("unexpected frame {kind} of {len} bytes"),
                )),
            };
            if let Err(e) = outcome {
                break Some(e);
            }
        };
        let mut st = self.lock();
        st.ended[peer] = true;
        if !st.closing && !st.bye[peer] && st.aborted_by.is_none() && st.died.is_none() {
            let how = match ended {
                None => "closed its connection".to_string(),
                Some(e) => format!("broke its connection ({e})"),
            };
            st.died = Some((
                peer,
                format!(
                    "{} {how} without destroying its communicator: the process died or was killed",
                    self.who(peer)
                ),
            ));
        }
        if let Some(slot) = st.inbox[peer].slot.as_mut() {
            if slot.state == SlotState::Filling {
                slot.state = SlotState::Failed;
            }
        }
        drop(st);
        self.changed.notify_all();
    }

    fn on_data(&self, peer: usize, stream: &mut TcpStream, len: usize) -> io::Result<()> {
        // A large message waits a little for its receive to be posted (a receiver busy with the
        // previous chunk, e.g. checksumming it), so it lands in place instead of in a temporary
        // copy; the bounded wait keeps every pattern that NCCL allows free of deadlock.
        let patience = if len >= DIRECT_MIN {
            DIRECT_WAIT
        } else {
            Duration::ZERO
        };
        let deadline = Instant::now() + patience;
        let mut st = self.lock();
        let direct = loop {
            let inbox = &mut st.inbox[peer];
            if let Some(slot) = inbox.slot.as_mut() {
                if inbox.queue.is_empty() && slot.state == SlotState::Posted && slot.len == len {
                    slot.state = SlotState::Filling;
                    break Some(slot.ptr);
                }
            }
            let Some(left) = remaining(deadline) else {
                break None;
            };
            if st.closing {
                break None;
            }
            st = self
                .changed
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        drop(st);
        match direct {
            Some(ptr) => {
                let target = if len == 0 {
                    &mut [][..]
                } else {
                    // SAFETY: the receive that posted this slot holds `len` writable bytes at `ptr`
                    // and does not return while the slot is Filling (see `complete`).
                    unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, len) }
                };
                let read = stream.read_exact(target);
                let mut st = self.lock();
                if let Some(slot) = st.inbox[peer].slot.as_mut() {
                    slot.state = if read.is_ok() {
                        SlotState::Filled
                    } else {
                        SlotState::Failed
                    };
                }
                drop(st);
                self.changed.notify_all();
                read
            }
            None => {
                let mut message = vec![0u8; len];
                stream.read_exact(&mut message)?;
                self.lock().inbox[peer].queue.push_back(message);
                self.changed.notify_all();
                Ok(())
            }
        }
    }

    fn on_collective(&self, peer: usize, stream: &mut TcpStream, len: usize) -> io::Result<()> {
        let mut payload = vec![0u8; len];
        stream.read_exact(&mut payload)?;
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed collective frame");
        if payload.len() < 8 + SIGNATURE_BYTES {
            return Err(bad());
        }
        let seq = u64_at(&payload, 0);
        let signature = decode_signature(&payload[8..8 + SIGNATURE_BYTES]).ok_or_else(bad)?;
        let data = payload.split_off(8 + SIGNATURE_BYTES);
        let mut st = self.lock();
        let n = self.nranks;
        let parts = st
            .rounds
            .entry(seq)
            .or_insert_with(|| (0..n).map(|_| None).collect());
        parts[peer] = Some((signature, data));
        drop(st);
        self.changed.notify_all();
        Ok(())
    }

    /// Tells the peers (BYE, or ABORT), shuts every connection down and joins the reader threads.
    pub fn close(&self, abort: bool) {
        {
            let mut st = self.lock();
            st.closing = true;
            if abort {
                st.aborted_by.get_or_insert(self.rank);
            }
        }
        self.changed.notify_all();
        for conn in self.conns.iter().flatten() {
            // A writer blocked mid-frame holds the lock: then the peer sees the connection end
            // without a goodbye, which it reports as this rank's failure (true enough after an abort).
            let writer = if abort {
                conn.writer.try_lock().ok()
            } else {
                Some(lock(&conn.writer))
            };
            if let Some(mut w) = writer {
                let _ = w.set_write_timeout(Some(Duration::from_millis(200)));
                let _ = write_frame(&mut w, if abort { ABORT } else { BYE }, &[]);
            }
            let _ = conn.control.shutdown(Shutdown::Both);
        }
        let readers = std::mem::take(&mut *lock(&self.readers));
        for h in readers {
            let _ = h.join();
        }
    }
}

type Outcome = Result<(), Failure>;

/// Completes a posted operation: waits for its ACK, its data or every rank's contribution.
pub(super) fn complete(op: Op) -> Outcome {
    match op {
        Op::Send { comm, peer, seq } => {
            let mut st = comm.lock();
            loop {
                if st.acked[peer] > seq {
                    return Ok(());
                }
                if let Some(f) = comm.failure(&st, Some(peer)) {
                    return Err(f);
                }
                st = comm.wait(st);
            }
        }
        Op::Recv {
            comm,
            peer,
            recvbuff,
            nbytes,
        } => {
            let mut st = comm.lock();
            let outcome = loop {
                let state = st.inbox[peer].slot.as_ref().map(|s| s.state);
                match state {
                    Some(SlotState::Filled) => {
                        st.inbox[peer].slot = None;
                        break Ok(());
                    }
                    Some(SlotState::Failed) => {
                        st.inbox[peer].slot = None;
                        break Err(comm.failure(&st, Some(peer)).unwrap_or((
                            ncclRemoteError,
                            format!("the connection to {} failed mid-message", comm.who(peer)),
                        )));
                    }
                    // The reader is writing into the buffer: it must finish (or fail) first.
                    Some(SlotState::Filling) => {}
                    Some(SlotState::Posted) | None => {
                        if let Some(message) = st.inbox[peer].queue.pop_front() {
                            st.inbox[peer].slot = None;
                            if message.len() != nbytes {
                                break Err((
                                    ncclInvalidUsage,
                                    format!(
                                        "rank {} posted a receive of {nbytes} bytes from rank {peer}, which sent {} bytes",
                                        comm.rank,
                                        message.len()
                                    ),
                                ));
                            }
                            if nbytes > 0 {
                                // SAFETY: the caller guaranteed `recvbuff` holds `nbytes` writable bytes.
                                unsafe {
                                    std::ptr::copy_nonoverlapping(
                                        message.as_ptr(),
                                        recvbuff,
                                        nbytes,
                                    )
                                };
                            }
                            break Ok(());
                        }
                        if let Some(f) = comm.failure(&st, Some(peer)) {
                            st.inbox[peer].slot = None;
                            break Err(f);
                        }
                        if state.is_none() {
                            st.inbox[peer].slot = Some(Slot {
                                ptr: recvbuff as usize,
                                len: nbytes,
                                state: SlotState::Posted,
                            });
                            comm.changed.notify_all(); // a reader may be waiting for it
                        }
                    }
                }
                st = comm.wait(st);
            };
            drop(st);
            outcome?;
            comm.send_frame(peer, ACK, &[])
        }
        Op::Collective {
            comm,
            seq,
            signature,
            mine,
            recvbuff,
            nbytes,
        } => {
            let n = comm.nranks;
            let me = comm.rank;
            let mut st = comm.lock();
            let mut parts = loop {
                let complete = st
                    .rounds
                    .get(&seq)
                    .is_some_and(|p| (0..n).all(|r| r == me || p[r].is_some()));
                if complete || n == 1 {
                    break st
                        .rounds
                        .remove(&seq)
                        .unwrap_or_else(|| (0..n).map(|_| None).collect());
                }
                if let Some(f) = comm.failure(&st, None) {
                    return Err(f);
                }
                if let Some(p) = (0..n).find(|&r| r != me && st.ended[r] && !has_part(&st, seq, r))
                {
                    return Err((
                        ncclRemoteError,
                        format!(
                            "{} left the communicator before joining collective #{seq}",
                            comm.who(p)
                        ),
                    ));
                }
                st = comm.wait(st);
            };
            drop(st);
            parts[me] = Some((signature, mine));
            if let Some((r, (other, _))) = parts
                .iter()
                .enumerate()
                .filter_map(|(r, p)| p.as_ref().map(|p| (r, p)))
                .find(|(_, (s, _))| *s != signature)
            {
                return Err((
                    ncclInvalidUsage,
                    format!(
                        "collective #{seq} differs between ranks: {signature:?} on rank {me} vs {other:?} on rank {r}"
                    ),
                ));
            }
            let result = match signature {
                Signature::AllReduce { datatype, op, .. } => {
                    let slices: Vec<&[u8]> = parts
                        .iter()
                        .map(|p| p.as_ref().map_or(&[][..], |(_, d)| d.as_slice()))
                        .collect();
                    reduce(&slices, datatype, op)
                }
                Signature::Broadcast { root, .. } => {
                    parts[root].take().map(|(_, d)| d).unwrap_or_default()
                }
            };
            if result.len() != nbytes {
                return Err((
                    ncclInternalError,
                    "collective result has the wrong size".into(),
                ));
            }
            if nbytes > 0 {
                // SAFETY: the caller guaranteed `recvbuff` holds `nbytes` writable bytes.
                unsafe { std::ptr::copy_nonoverlapping(result.as_ptr(), recvbuff, nbytes) };
            }
            Ok(())
        }
    }
}

const SIGNATURE_BYTES: usize = 1 + 8 + 4 + 8;

fn encode_signature(s: &Signature) -> [u8; SIGNATURE_BYTES] {
    let (kind, count, datatype, extra) = match *s {
        Signature::AllReduce {
            count,
            datatype,
            op,
        } => (0u8, count, datatype, op as u64),
        Signature::Broadcast {
            count,
            datatype,
            root,
        } => (1u8, count, datatype, root as u64),
    };
    let mut out = [0u8; SIGNATURE_BYTES];
    out[0] = kind;
    out[1..9].copy_from_slice(&(count as u64).to_le_bytes());
    out[9..13].copy_from_slice(&datatype.to_le_bytes());
    out[13..].copy_from_slice(&extra.to_le_bytes());
    out
}

fn decode_signature(b: &[u8]) -> Option<Signature> {
    let count = u64_at(b, 1) as usize;
    let datatype = u32_at(b, 9) as ncclDataType_t;
    let extra = u64_at(b, 13);
    match b.first()? {
        0 => Some(Signature::AllReduce {
            count,
            datatype,
            op: extra as ncclRedOp_t,
        }),
        1 => Some(Signature::Broadcast {
            count,
            datatype,
            root: extra as usize,
        }),
        _ => None,
    }
}
