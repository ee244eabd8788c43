//! Where the ranks of a communicator meet: one rendezvous server per process (a thread blocking in
//! `accept` on one loopback socket), started by the first id this process makes and kept for the
//! process's life, so ids cost nothing more and counting threads or descriptors before and after a
//! communicator sees no change.
//!
//! Every rank, in whatever process, connects to the server named by the id and sends JOIN (the id's
//! key, world size, rank, pid, the port of a data listener it has just opened). The server answers
//! each with STATUS (who has joined) whenever that changes and, once all have joined, with the ROSTER
//! (every rank's pid and data port) and forgets the id: an id makes one communicator, as in NCCL. It
//! refuses (REFUSED, with why) ids it did not issue (a corrupt or stale id), world sizes that differ
//! from the first rank's and a rank joining twice. A rank waits at most its timeout and then fails
//! naming the ranks that never came.
use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{TcpListener, TcpStream};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::failure::{Failure, Result};
use crate::sync::lock;
use crate::unique_id::{random_token, IdInfo, Key, UniqueId, KEY_BYTES};
use crate::wire::{
    loopback, read_control, remaining, u32_at, write_frame, JOIN, REFUSED, ROSTER, STATUS,
};

/// Every rank's pid and data port, by rank.
pub(crate) type Roster = Vec<(u32, u16)>;

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

/// This process's server; None when it cannot listen on the loopback.
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

/// A fresh unique id, registered with this process's server. Without a server (the process cannot
/// listen on the loopback) the id joins threads of this process only.
pub(crate) fn issue() -> UniqueId {
    let Some(server) = server() else {
        return UniqueId::compose(None);
    };
    let id = UniqueId::compose(Some((server.port, random_token())));
    if let Ok(info) = id.parse() {
        lock(&server.state).issued.insert(info.key);
    }
    id
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

fn refuse(stream: &TcpStream, why: &str) {
    let _ = write_frame(stream, REFUSED, &[why.as_bytes()]);
}

impl Server {
    fn handle(&self, stream: TcpStream) {
        // A client that connects and says nothing must not hold up the others for long.
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = stream.set_nodelay(true);
        let Ok(Some((JOIN, join))) = read_control(&stream) else {
            return;
        };
        let _ = stream.set_read_timeout(None);
        if join.len() < KEY_BYTES + 14 {
            return refuse(&stream, "malformed JOIN");
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
                &stream,
                &format!(
                    "this unique id was not issued by the rendezvous it names (127.0.0.1:{}, pid {}): it is \
                     corrupt, or its communicator already formed (an id makes one communicator; make a new \
                     unique id)",
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
            return refuse(&stream, &why);
        }
        if pending.members[rank].is_some() {
            return refuse(
                &stream,
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
            for m in done.members.into_iter().flatten() {
                let _ = write_frame(&m.stream, ROSTER, &[&roster]);
            }
        } else {
            let joined: Vec<u8> = pending
                .members
                .iter()
                .map(|m| u8::from(m.is_some()))
                .collect();
            for m in pending.members.iter().flatten() {
                let _ = write_frame(&m.stream, STATUS, &[&joined]);
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

/// The data listener a rank opens before joining (closed once its peers are connected).
pub(crate) fn listen() -> Result<(TcpListener, u16)> {
    let listener = TcpListener::bind(loopback(0))
        .map_err(|e| Failure::system(format!("cannot listen on 127.0.0.1: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| Failure::system(e.to_string()))?
        .port();
    Ok((listener, port))
}

/// Joins the rendezvous named by `info` as `rank` of `nranks`, announcing the data port `port`;
/// returns the roster once every rank has joined.
pub(crate) fn rendezvous(
    info: &IdInfo,
    nranks: usize,
    rank: usize,
    port: u16,
    limit: Duration,
) -> Result<Roster> {
    let deadline = Instant::now() + limit;
    let at = loopback(info.port);
    let stream = TcpStream::connect_timeout(&at, limit).map_err(|e| {
        Failure::system(format!(
            "rank {rank} cannot reach the rendezvous of this unique id at {at}: {e}; the process that made \
             the id (pid {}) has exited, or the id is stale",
            info.pid
        ))
    })?;
    let _ = stream.set_nodelay(true);
    let mut join = info.key.to_vec();
    join.extend_from_slice(&(nranks as u32).to_le_bytes());
    join.extend_from_slice(&(rank as u32).to_le_bytes());
    join.extend_from_slice(&std::process::id().to_le_bytes());
    join.extend_from_slice(&port.to_le_bytes());
    write_frame(&stream, JOIN, &[&join]).map_err(|e| {
        Failure::system(format!(
            "rank {rank}: the rendezvous at {at} (pid {}) failed: {e}",
            info.pid
        ))
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
        Failure::system(format!(
            "rank {rank} waited {:.1} s for ranks {missing:?} of {nranks} to join (joined: {came:?}, \
             rendezvous at {at}); set MONARCH_HOST_COMM_TIMEOUT to wait longer",
            limit.as_secs_f64()
        ))
    };
    loop {
        let Some(left) = remaining(deadline) else {
            return Err(gave_up(&joined));
        };
        let _ = stream.set_read_timeout(Some(left));
        match read_control(&stream) {
            Ok(Some((STATUS, status))) if status.len() == nranks => joined = status,
            Ok(Some((ROSTER, roster))) if roster.len() == 6 * nranks => {
                return Ok(roster
                    .chunks_exact(6)
                    .map(|c| (u32_at(c, 0), u16::from_le_bytes([c[4], c[5]])))
                    .collect());
            }
            Ok(Some((REFUSED, why))) => {
                return Err(Failure::invalid_argument(format!(
                    "the rendezvous at {at} refused rank {rank}: {}",
                    String::from_utf8_lossy(&why)
                )))
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
                return Err(Failure::system(format!(
                    "rank {rank}: the rendezvous at {at} (pid {}) failed: {what}; its process may have exited",
                    info.pid
                )));
            }
        }
    }
}
