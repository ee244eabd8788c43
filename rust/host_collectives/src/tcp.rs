//! Communicators across processes of one machine: loopback TCP (127.0.0.1 only).
//!
//! Why TCP on the loopback rather than Unix sockets or shared memory: a recovering replica must
//! survive its peer being SIGKILLed, and a killed process leaves behind any file it created (a
//! socket path, a `/dev/shm` segment) but never a TCP port: the kernel closes its sockets, so the
//! survivor sees EOF at once and nothing needs cleaning up. A port fits in the unique id, so the id
//! stays self-contained (no shared directory to agree on), and the same protocol would work between
//! machines. Loopback TCP moves a few GB/s here, the same order as a copy through a pipe.
//!
//! After the rendezvous (`rendezvous.rs`) the ranks connect pairwise (the higher rank of a pair
//! dials the lower one's data listener and proves itself with the id's key: HELLO), close the
//! listeners and run **one reader thread per connection**. Frames (`wire.rs`):
//!
//! - DATA: a send's payload. When its receive is posted (or gets posted within `DIRECT_WAIT`), a
//!   message of `HANDOFF_MIN` (1 MiB) or more is read by the receiving thread straight into its
//!   buffer (no intermediate copy): the reader hands it the socket and waits. Otherwise the reader
//!   queues a copy. The receiver answers ACK when the data is in place, and a send completes on that ACK:
//!   as in NCCL (and the in-process communicator) a send completes when the peer has received.
//! - COLL: a collective contribution (sequence number, the call's signature, the bytes). Every rank
//!   sends its contribution to every other and combines them locally in rank order (`Signature::
//!   combine`, so every rank gets the same bits); signatures that differ fail on every rank.
//! - BYE (destroy), ABORT (abort): the peer left, or aborted the communicator.
//!
//! A connection that ends without BYE or ABORT means the peer process died: every operation of the
//! communicator then fails with a remote failure naming the rank and its pid. Aborting shuts the
//! sockets down, which frees a thread blocked on this communicator (in a read, a write or a wait)
//! and tells the peers. No data operation has a timeout of its own, as in NCCL: a live but hung peer
//! is a watchdog's job (which then aborts).
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::failure::{Failure, Result};
use crate::rendezvous::Roster;
use crate::signature::{Signature, SIGNATURE_BYTES};
use crate::sync::{lock, wait, wait_timeout};
use crate::unique_id::{IdInfo, KEY_BYTES};
use crate::wire::{
    loopback, read_control, read_header, remaining, u32_at, u64_at, write_frame, ABORT, ACK, BYE,
    COLL, DATA, HELLO,
};

/// Messages at least this large are read by the receiving thread straight into its buffer (the
/// reader hands it the socket), waiting up to DIRECT_WAIT for the receive to be posted. Smaller ones
/// the reader reads and queues: on 2 busy cores copying up to 1 MiB costs about what the two extra
/// thread wake-ups of a handoff do (measured with 64 KiB to 8 MiB messages between two threads).
const HANDOFF_MIN: usize = 1 << 20;
const DIRECT_WAIT: Duration = Duration::from_millis(100);
/// How long a failed write waits for the connection's reader to say why the connection ended.
const WRITE_FAILURE_WAIT: Duration = Duration::from_secs(2);

/// Where a posted receive and its peer's reader thread stand on handing the socket over.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Handoff {
    /// Nothing handed over; the reader reads the socket.
    Idle,
    /// The reader found the posted receive's payload next on the socket and waits for the receiver.
    Ready,
    /// The receiver is reading the payload into its buffer.
    Reading,
    /// The receiver is done with the payload: Err(why) when the connection broke mid-payload.
    Done(std::result::Result<(), String>),
}

struct Inbox {
    /// Messages that arrived before their receive was posted.
    queue: VecDeque<Vec<u8>>,
    /// The length of the receive waiting for its data, if one is posted (set by the receiver,
    /// taken by the reader when it hands the payload over).
    posted: Option<usize>,
    handoff: Handoff,
}

/// One rank's contribution to a collective: its call's signature and its bytes.
type Part = (Signature, Vec<u8>);

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

impl NetState {
    fn has_part(&self, seq: u64, rank: usize) -> bool {
        self.rounds
            .get(&seq)
            .is_some_and(|parts| parts[rank].is_some())
    }
}

struct Conn {
    /// Writes (frames are written whole under this lock).
    writer: Mutex<TcpStream>,
    /// Reads of a handed-over payload, and shutdown without taking the writer's lock.
    socket: TcpStream,
}

/// One rank of a communicator across processes.
pub(crate) struct TcpComm {
    rank: usize,
    nranks: usize,
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

/// Connects this rank to every other of the roster (the higher rank of a pair dials the lower
/// one), then starts a reader thread per connection.
pub(crate) fn connect(
    info: &IdInfo,
    roster: &Roster,
    rank: usize,
    listener: TcpListener,
    limit: Duration,
) -> Result<Arc<TcpComm>> {
    let nranks = roster.len();
    let deadline = Instant::now() + limit;
    let mut streams: Vec<Option<TcpStream>> = (0..nranks).map(|_| None).collect();
    let failed = |peer: usize, e: &dyn std::fmt::Display| {
        Failure::system(format!(
            "rank {rank} could not connect to rank {peer} (pid {}): {e}",
            roster[peer].0
        ))
    };
    for (peer, slot) in streams.iter_mut().enumerate().take(rank) {
        let left = remaining(deadline).unwrap_or(Duration::from_millis(1));
        let s = TcpStream::connect_timeout(&loopback(roster[peer].1), left)
            .map_err(|e| failed(peer, &e))?;
        write_frame(&s, HELLO, &[&hello(info, rank)]).map_err(|e| failed(peer, &e))?;
        *slot = Some(s);
    }
    listener
        .set_nonblocking(true)
        .map_err(|e| failed(rank, &e))?;
    let mut waiting = nranks - rank - 1;
    while waiting > 0 {
        match listener.accept() {
            Ok((s, _)) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                if let Ok(Some((HELLO, h))) = read_control(&s) {
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
                    return Err(Failure::system(format!(
                        "rank {rank}: ranks {missing:?} joined the rendezvous but never connected within {:.1} s",
                        limit.as_secs_f64()
                    )));
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
                let socket = s.try_clone().map_err(|e| failed(peer, &e))?;
                conns.push(Some(Conn {
                    writer: Mutex::new(s),
                    socket,
                }));
                readers.push((peer, reader));
            }
        }
    }
    let comm = Arc::new(TcpComm {
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
            inbox: (0..nranks)
                .map(|_| Inbox {
                    queue: VecDeque::new(),
                    posted: None,
                    handoff: Handoff::Idle,
                })
                .collect(),
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
                return Err(Failure::system(format!(
                    "cannot start a reader thread: {e}"
                )));
            }
        }
    }
    *lock(&comm.readers) = handles;
    Ok(comm)
}

impl TcpComm {
    fn lock(&self) -> MutexGuard<'_, NetState> {
        lock(&self.state)
    }

    fn wait<'a>(&'a self, st: MutexGuard<'a, NetState>) -> MutexGuard<'a, NetState> {
        wait(&self.changed, st)
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn nranks(&self) -> usize {
        self.nranks
    }

    fn who(&self, rank: usize) -> String {
        format!("rank {rank} (pid {})", self.pids[rank])
    }

    /// Why the communicator cannot go on, if it cannot; `peer`: the rank an operation waits on.
    fn failure(&self, st: &NetState, peer: Option<usize>) -> Option<Failure> {
        let me = self.rank;
        if let Some(by) = st.aborted_by {
            return Some(if by == me {
                Failure::invalid_usage(format!(
                    "rank {me}'s communicator was aborted while this operation was in progress"
                ))
            } else {
                self.aborted_by_peer(by)
            });
        }
        if let Some((_, why)) = &st.died {
            return Some(Failure::remote(why.clone()));
        }
        if st.closing {
            return Some(Failure::invalid_usage(format!(
                "rank {me}'s communicator was destroyed"
            )));
        }
        match peer {
            Some(p) if st.ended[p] => Some(Failure::remote(format!(
                "{} left the communicator (destroyed it) while rank {me} was waiting on it",
                self.who(p)
            ))),
            _ => None,
        }
    }

    fn aborted_by_peer(&self, by: usize) -> Failure {
        Failure::remote(format!(
            "{} aborted the communicator; rank {}'s operation cannot complete",
            self.who(by),
            self.rank
        ))
    }

    fn send_frame(&self, peer: usize, kind: u32, parts: &[&[u8]]) -> Result<()> {
        let Some(conn) = &self.conns[peer] else {
            return Err(Failure::invalid_argument(format!(
                "peer {peer} is this rank"
            )));
        };
        let written = write_frame(&lock(&conn.writer), kind, parts);
        written.map_err(|e| {
            // A write fails when the connection is broken, and then its reader sees the end too
            // and records why (the peer died, aborted, left): report that rather than the errno,
            // once the reader has (it does at once; the bound is for safety only).
            let deadline = Instant::now() + WRITE_FAILURE_WAIT;
            let mut st = self.lock();
            while !st.ended[peer] {
                let Some(left) = remaining(deadline) else {
                    break;
                };
                st = wait_timeout(&self.changed, st, left);
            }
            self.failure(&st, Some(peer)).unwrap_or_else(|| {
                Failure::remote(format!(
                    "rank {} could not write to {}: {e} (the process died?)",
                    self.rank,
                    self.who(peer)
                ))
            })
        })
    }

    /// A peer's failure that operations will report: another rank aborted, or a process died.
    pub fn remote_failure(&self) -> Option<Failure> {
        let st = self.lock();
        match (st.aborted_by, &st.died) {
            (Some(by), _) if by != self.rank => Some(self.aborted_by_peer(by)),
            (_, Some((_, why))) => Some(Failure::remote(why.clone())),
            _ => None,
        }
    }

    /// Fails now if the communicator cannot take a new operation.
    pub fn check_live(&self) -> Result<()> {
        let st = self.lock();
        match self.failure(&st, None) {
            Some(f) => Err(f),
            None => Ok(()),
        }
    }

    /// Sends `data` to `peer` now (its reader always drains the socket); returns the message's
    /// sequence number for `complete_send`.
    pub fn post_send(&self, data: &[u8], peer: usize) -> Result<u64> {
        self.check_live()?;
        let seq = {
            let mut st = self.lock();
            st.sent[peer] += 1;
            st.sent[peer] - 1
        };
        self.send_frame(peer, DATA, &[data])?;
        Ok(seq)
    }

    /// Waits for `peer`'s ACK of message `seq`.
    pub fn complete_send(&self, peer: usize, seq: u64) -> Result<()> {
        let mut st = self.lock();
        loop {
            if st.acked[peer] > seq {
                return Ok(());
            }
            if let Some(f) = self.failure(&st, Some(peer)) {
                return Err(f);
            }
            st = self.wait(st);
        }
    }

    /// Receives the next message from `peer` into `recv` (which must fit it exactly), then ACKs it.
    pub fn complete_recv(&self, peer: usize, recv: &mut [u8]) -> Result<()> {
        let mut st = self.lock();
        let outcome = loop {
            if st.inbox[peer].handoff == Handoff::Ready {
                st.inbox[peer].handoff = Handoff::Reading;
                drop(st);
                let read = self.read_payload(peer, recv);
                st = self.lock();
                st.inbox[peer].handoff =
                    Handoff::Done(read.as_ref().map(|_| ()).map_err(|e| e.to_string()));
                self.changed.notify_all();
                if read.is_ok() {
                    break Ok(());
                }
                // The reader ends this connection next: report why it ended (which the reader
                // records), not just that the read failed.
                while !st.ended[peer] {
                    st = self.wait(st);
                }
                break Err(self.failure(&st, Some(peer)).unwrap_or_else(|| {
                    Failure::remote(format!(
                        "the connection to {} failed mid-message",
                        self.who(peer)
                    ))
                }));
            }
            if let Some(message) = st.inbox[peer].queue.pop_front() {
                st.inbox[peer].posted = None;
                if message.len() != recv.len() {
                    break Err(Failure::invalid_usage(format!(
                        "rank {} posted a receive of {} bytes from rank {peer}, which sent {} bytes",
                        self.rank,
                        recv.len(),
                        message.len()
                    )));
                }
                recv.copy_from_slice(&message);
                break Ok(());
            }
            if let Some(f) = self.failure(&st, Some(peer)) {
                st.inbox[peer].posted = None;
                break Err(f);
            }
            if st.inbox[peer].posted.is_none() {
                st.inbox[peer].posted = Some(recv.len());
                self.changed.notify_all(); // a reader may be waiting for it
            }
            st = self.wait(st);
        };
        drop(st);
        outcome?;
        self.send_frame(peer, ACK, &[])
    }

    /// Reads a handed-over payload (the reader thread waits meanwhile) straight into `recv`.
    fn read_payload(&self, peer: usize, recv: &mut [u8]) -> io::Result<()> {
        match &self.conns[peer] {
            Some(conn) => (&conn.socket).read_exact(recv),
            None => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    /// Sends this rank's contribution to the next collective to every other rank; returns its
    /// sequence number for `complete_collective`.
    pub fn post_collective(&self, signature: Signature, contribution: &[u8]) -> Result<u64> {
        self.check_live()?;
        let seq = {
            let mut st = self.lock();
            st.collectives += 1;
            st.collectives - 1
        };
        let mut head = seq.to_le_bytes().to_vec();
        head.extend_from_slice(&signature.encode());
        // A broadcast's non-root ranks contribute nothing but their signature.
        let payload: &[u8] = if signature.contributes(self.rank) {
            contribution
        } else {
            &[]
        };
        for peer in 0..self.nranks {
            if peer != self.rank {
                self.send_frame(peer, COLL, &[&head, payload])?;
            }
        }
        Ok(seq)
    }

    /// Waits for every rank's contribution to collective `seq`, combines them with this rank's
    /// (`mine`) and writes the result into `recv`.
    pub fn complete_collective(
        &self,
        seq: u64,
        signature: Signature,
        mine: Vec<u8>,
        recv: &mut [u8],
    ) -> Result<()> {
        let n = self.nranks;
        let me = self.rank;
        let mut st = self.lock();
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
            if let Some(f) = self.failure(&st, None) {
                return Err(f);
            }
            if let Some(p) = (0..n).find(|&r| r != me && st.ended[r] && !st.has_part(seq, r)) {
                return Err(Failure::remote(format!(
                    "{} left the communicator before joining collective #{seq}",
                    self.who(p)
                )));
            }
            st = self.wait(st);
        };
        drop(st);
        parts[me] = Some((signature, mine));
        if let Some((r, (other, _))) = parts
            .iter()
            .enumerate()
            .filter_map(|(r, p)| p.as_ref().map(|p| (r, p)))
            .find(|(_, (s, _))| *s != signature)
        {
            return Err(Failure::invalid_usage(format!(
                "collective #{seq} differs between ranks: {signature:?} on rank {me} vs {other:?} on rank {r}"
            )));
        }
        let slices: Vec<&[u8]> = parts
            .iter()
            .map(|p| p.as_ref().map_or(&[][..], |(_, d)| d.as_slice()))
            .collect();
        let result = signature.combine(&slices);
        if result.len() != recv.len() {
            return Err(Failure::internal("collective result has the wrong size"));
        }
        recv.copy_from_slice(&result);
        Ok(())
    }

    fn read_loop(self: Arc<Self>, peer: usize, stream: TcpStream) {
        let ended = loop {
            let (kind, len) = match read_header(&stream) {
                Ok(Some(h)) => h,
                Ok(None) => break None,
                Err(e) => break Some(e),
            };
            let outcome = match kind {
                DATA => usize::try_from(len)
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "oversized message"))
                    .and_then(|len| self.on_data(peer, &stream, len)),
                COLL => usize::try_from(len)
                    .map_err(|_| {
                        io::Error::new(io::ErrorKind::InvalidData, "oversized contribution")
                    })
                    .and_then(|len| self.on_collective(peer, &stream, len)),
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
        drop(st);
        self.changed.notify_all();
    }

    fn on_data(&self, peer: usize, stream: &TcpStream, len: usize) -> io::Result<()> {
        // A large message waits a little for its receive to be posted (a receiver busy with the
        // previous chunk, e.g. checksumming it), so it lands in place instead of in a temporary
        // copy; the bounded wait keeps every pattern that NCCL allows free of deadlock. A small one
        // is never handed over (see HANDOFF_MIN).
        let patience = if len >= HANDOFF_MIN {
            DIRECT_WAIT
        } else {
            Duration::ZERO
        };
        let deadline = Instant::now() + patience;
        let mut st = self.lock();
        let handed = loop {
            let inbox = &mut st.inbox[peer];
            if len >= HANDOFF_MIN && inbox.queue.is_empty() && inbox.posted == Some(len) {
                inbox.posted = None;
                inbox.handoff = Handoff::Ready;
                break true;
            }
            let Some(left) = remaining(deadline) else {
                break false;
            };
            if st.closing {
                break false;
            }
            st = wait_timeout(&self.changed, st, left);
        };
        if handed {
            self.changed.notify_all();
            // The receiver reads the payload from its own handle on this socket; the stream stays
            // untouched here until it is done.
            loop {
                match &st.inbox[peer].handoff {
                    Handoff::Done(outcome) => {
                        let outcome = outcome.clone();
                        st.inbox[peer].handoff = Handoff::Idle;
                        return outcome.map_err(|why| {
                            io::Error::new(io::ErrorKind::BrokenPipe, format!("mid-message: {why}"))
                        });
                    }
                    _ => st = self.wait(st),
                }
            }
        }
        drop(st);
        let mut message = vec![0u8; len];
        let mut reader = stream;
        reader.read_exact(&mut message)?;
        self.lock().inbox[peer].queue.push_back(message);
        self.changed.notify_all();
        Ok(())
    }

    fn on_collective(&self, peer: usize, stream: &TcpStream, len: usize) -> io::Result<()> {
        let mut payload = vec![0u8; len];
        let mut reader = stream;
        reader.read_exact(&mut payload)?;
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed collective frame");
        if payload.len() < 8 + SIGNATURE_BYTES {
            return Err(bad());
        }
        let seq = u64_at(&payload, 0);
        let signature = Signature::decode(&payload[8..8 + SIGNATURE_BYTES]).ok_or_else(bad)?;
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
    /// Idempotent.
    pub fn close(&self, abort: bool) {
        {
            let mut st = self.lock();
            if st.closing {
                return;
            }
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
            if let Some(w) = writer {
                let _ = w.set_write_timeout(Some(Duration::from_millis(200)));
                let _ = write_frame(&w, if abort { ABORT } else { BYE }, &[]);
            }
            let _ = conn.socket.shutdown(Shutdown::Both);
        }
        let readers = std::mem::take(&mut *lock(&self.readers));
        for h in readers {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    //! Rank 0 of a two-rank communicator whose rank 1 is the test itself, writing frames by hand:
    //! what a real peer cannot be made to do on cue (die mid-payload, send garbage).
    use super::*;
    use crate::failure::FailureKind;
    use crate::rendezvous::listen;
    use std::io::Write;

    const FAKE_PID: u32 = 4242;

    fn with_fake_peer() -> (Arc<TcpComm>, TcpStream) {
        let (listener, port) = listen().unwrap();
        let info = IdInfo {
            key: [7; KEY_BYTES],
            pid: std::process::id(),
            port: 0,
        };
        let roster = vec![(std::process::id(), port), (FAKE_PID, 0)];
        let dial = std::thread::spawn(move || {
            let s = TcpStream::connect(loopback(port)).unwrap();
            write_frame(&s, HELLO, &[&hello(&info, 1)]).unwrap();
            s
        });
        let comm = connect(&info, &roster, 0, listener, Duration::from_secs(5)).unwrap();
        (comm, dial.join().unwrap())
    }

    fn header(kind: u32, len: u64) -> [u8; 16] {
        let mut h = [0u8; 16];
        h[..4].copy_from_slice(&kind.to_le_bytes());
        h[8..].copy_from_slice(&len.to_le_bytes());
        h
    }

    /// Waits (bounded) until `ready` holds of rank 0's state.
    fn wait_for(comm: &TcpComm, ready: impl Fn(&NetState) -> bool) {
        for _ in 0..2500 {
            if ready(&comm.lock()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        panic!("rank 0 never got there");
    }

    #[test]
    fn a_peer_dying_mid_payload_fails_the_receive_reading_in_place() {
        let (comm, peer) = with_fake_peer();
        let len = 1 << 20;
        let err = std::thread::scope(|s| {
            let receiver = s.spawn(|| comm.complete_recv(1, &mut vec![0u8; len]));
            wait_for(&comm, |st| st.inbox[1].posted == Some(len));
            let mut w = &peer;
            w.write_all(&header(DATA, len as u64)).unwrap();
            w.write_all(&[1u8; 1000]).unwrap();
            wait_for(&comm, |st| st.inbox[1].handoff == Handoff::Reading);
            peer.shutdown(Shutdown::Both).unwrap();
            receiver.join().unwrap().unwrap_err()
        });
        assert_eq!(err.kind, FailureKind::RemoteError, "{err}");
        assert!(
            err.message
                .contains("rank 1 (pid 4242) broke its connection (mid-message")
                && err.message.contains("died or was killed"),
            "{err}"
        );
        comm.close(false);
    }

    #[test]
    fn an_early_message_is_queued_checked_and_acknowledged() {
        let (comm, peer) = with_fake_peer();
        let mut w = &peer;
        for message in [&b"hello"[..], b"toolong"] {
            w.write_all(&header(DATA, message.len() as u64)).unwrap();
            w.write_all(message).unwrap();
        }
        wait_for(&comm, |st| st.inbox[1].queue.len() == 2);
        let mut buf = [0u8; 5];
        comm.complete_recv(1, &mut buf).unwrap();
        assert_eq!(&buf, b"hello");
        let mut ack = [0u8; 16];
        (&peer).read_exact(&mut ack).unwrap();
        assert_eq!(ack, header(ACK, 0));
        let err = comm.complete_recv(1, &mut buf).unwrap_err();
        assert_eq!(err.kind, FailureKind::InvalidUsage, "{err}");
        assert!(
            err.message
                .contains("receive of 5 bytes from rank 1, which sent 7"),
            "{err}"
        );
        comm.close(false);
    }

    #[test]
    fn a_garbage_frame_ends_the_connection_as_a_dead_peer() {
        let (comm, peer) = with_fake_peer();
        (&peer).write_all(&header(99, 3)).unwrap();
        wait_for(&comm, |st| st.ended[1]);
        let err = comm.complete_send(1, 0).unwrap_err();
        assert_eq!(err.kind, FailureKind::RemoteError, "{err}");
        assert!(
            err.message.contains("unexpected frame 99 of 3 bytes"),
            "{err}"
        );
        assert!(comm.remote_failure().is_some());
        comm.close(true);
    }
}
