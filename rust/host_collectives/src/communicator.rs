//! The communicator: one rank's handle, whichever transport joined it, and batches of operations
//! posted together and completed together (what NCCL's group calls do).
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::failure::{Failure, Result};
use crate::local::LocalComm;
use crate::options::Options;
use crate::reduce::{DataType, ReduceOp};
use crate::rendezvous;
use crate::signature::Signature;
use crate::tcp::{self, TcpComm};
use crate::unique_id::UniqueId;

impl UniqueId {
    /// A fresh id, registered with this process's rendezvous server (started by the first id and
    /// kept for the process's life). Every rank joins with the same id; this process must be alive
    /// while they join.
    pub fn generate() -> UniqueId {
        rendezvous::issue()
    }
}

/// How the ranks of a communicator talk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Every rank is a thread of this process: shared memory under a lock, no sockets.
    Threads,
    /// Loopback TCP, a connection and a reader thread per peer.
    Tcp,
}

#[derive(Clone)]
enum Link {
    Local(Arc<LocalComm>),
    Tcp(Arc<TcpComm>),
}

/// One rank of a communicator. Operations take `&self`, so another thread can `abort` while one is
/// blocked; operations of one communicator must not run concurrently on several threads (as in
/// NCCL). Dropping it destroys it.
pub struct Communicator {
    link: Link,
    /// Destroyed or aborted through this handle.
    closed: AtomicBool,
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.rank())
            .field("nranks", &self.nranks())
            .field("transport", &self.transport())
            .finish()
    }
}

impl Communicator {
    /// Joins the communicator of `id` as `rank` of `nranks`; blocks until every rank has joined
    /// (and, across processes, connected), or fails after `options.timeout` naming the ranks that
    /// never came.
    pub fn join(
        id: &UniqueId,
        nranks: usize,
        rank: usize,
        options: &Options,
    ) -> Result<Communicator> {
        if nranks < 1 || rank >= nranks {
            return Err(Failure::invalid_argument(format!(
                "rank {rank} is not in 0..{nranks} (world size {nranks})"
            )));
        }
        let info = id.parse()?;
        let start = Instant::now();
        let link = if info.port != 0 {
            // Rendezvous through the id's server: in-process if every rank turns out to be here.
            let (listener, port) = rendezvous::listen()?;
            let roster = rendezvous::rendezvous(&info, nranks, rank, port, options.timeout)?;
            let left = options.timeout.saturating_sub(start.elapsed());
            if options.force_tcp || roster.iter().any(|(pid, _)| *pid != std::process::id()) {
                Link::Tcp(tcp::connect(&info, &roster, rank, listener, left)?)
            } else {
                drop(listener);
                // Every rank has passed the rendezvous, so they all join here at once.
                let left = left.max(Duration::from_secs(1));
                Link::Local(Arc::new(LocalComm::join(id, nranks, rank, left)?))
            }
        } else if info.pid == std::process::id() {
            Link::Local(Arc::new(LocalComm::join(
                id,
                nranks,
                rank,
                options.timeout,
            )?))
        } else {
            return Err(Failure::invalid_argument(
                "the unique id was made in another process by one that could not listen on 127.0.0.1, so it \
                 connects threads of that process only",
            ));
        };
        Ok(Communicator {
            link,
            closed: AtomicBool::new(false),
        })
    }

    pub fn rank(&self) -> usize {
        match &self.link {
            Link::Local(l) => l.rank(),
            Link::Tcp(t) => t.rank(),
        }
    }

    pub fn nranks(&self) -> usize {
        match &self.link {
            Link::Local(l) => l.nranks(),
            Link::Tcp(t) => t.nranks(),
        }
    }

    pub fn transport(&self) -> Transport {
        match &self.link {
            Link::Local(_) => Transport::Threads,
            Link::Tcp(_) => Transport::Tcp,
        }
    }

    /// Element-wise reduction of every rank's `send` into every rank's `recv` (same length, a whole
    /// number of `datatype` elements).
    pub fn all_reduce(
        &self,
        send: &[u8],
        recv: &mut [u8],
        datatype: DataType,
        op: ReduceOp,
    ) -> Result<()> {
        let mut batch = Batch::new();
        batch.all_reduce(self, send, recv, datatype, op)?;
        batch.finish()
    }

    /// `all_reduce` with `buf` as both the contribution and the result.
    pub fn all_reduce_in_place(
        &self,
        buf: &mut [u8],
        datatype: DataType,
        op: ReduceOp,
    ) -> Result<()> {
        let mut batch = Batch::new();
        batch.all_reduce_in_place(self, buf, datatype, op)?;
        batch.finish()
    }

    /// The root's `send` into every rank's `recv` (`send` is read on the root only; other ranks may
    /// pass an empty slice).
    pub fn broadcast(
        &self,
        send: &[u8],
        recv: &mut [u8],
        datatype: DataType,
        root: usize,
    ) -> Result<()> {
        let mut batch = Batch::new();
        batch.broadcast(self, send, recv, datatype, root)?;
        batch.finish()
    }

    /// The root's `buf` into every other rank's `buf`.
    pub fn broadcast_in_place(
        &self,
        buf: &mut [u8],
        datatype: DataType,
        root: usize,
    ) -> Result<()> {
        let mut batch = Batch::new();
        batch.broadcast_in_place(self, buf, datatype, root)?;
        batch.finish()
    }

    /// Sends `data` to `peer`; returns when the peer has received it.
    pub fn send(&self, data: &[u8], peer: usize) -> Result<()> {
        let mut batch = Batch::new();
        batch.send(self, data, peer)?;
        batch.finish()
    }

    /// Receives `peer`'s next message into `buf`, which must be exactly as long as the message.
    pub fn recv(&self, buf: &mut [u8], peer: usize) -> Result<()> {
        let mut batch = Batch::new();
        batch.recv(self, buf, peer)?;
        batch.finish()
    }

    /// Returns when every rank has called it: an all-reduce of one i32, as the runtime's barrier
    /// is on every platform (NCCL has no barrier).
    pub fn barrier(&self) -> Result<()> {
        let mut one = [0u8; 4];
        self.all_reduce_in_place(&mut one, DataType::I32, ReduceOp::Sum)
    }

    /// Leaves the communicator: peers waiting on this rank fail instead of hanging. Idempotent
    /// (also after `abort`).
    pub fn destroy(&self) {
        self.leave(false);
    }

    /// Aborts the communicator: every operation blocked on it, on this rank (from any thread) and
    /// on its peers, fails at once. Idempotent (also after `destroy`).
    pub fn abort(&self) {
        self.leave(true);
    }

    fn leave(&self, abort: bool) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        match &self.link {
            Link::Local(l) => l.leave(abort),
            Link::Tcp(t) => t.close(abort),
        }
    }

    /// A peer's failure, seen without an operation (NCCL's asynchronous error): another rank
    /// aborted, or a peer's process died.
    pub fn remote_failure(&self) -> Option<Failure> {
        match &self.link {
            Link::Local(l) => l.remote_failure(),
            Link::Tcp(t) => t.remote_failure(),
        }
    }

    fn check_peer(&self, what: &str, peer: usize) -> Result<()> {
        if peer >= self.nranks() {
            return Err(Failure::invalid_argument(format!(
                "{what} {peer} is not a rank"
            )));
        }
        if what == "peer" && peer == self.rank() && self.transport() == Transport::Tcp {
            return Err(Failure::invalid_usage(format!(
                "rank {peer} cannot send to or receive from itself over the loopback transport"
            )));
        }
        Ok(())
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        self.destroy();
    }
}

/// Elements in `len` bytes of `datatype`.
fn count_of(len: usize, datatype: DataType) -> Result<usize> {
    let size = datatype.size();
    if len.rem_euclid(size) != 0 {
        return Err(Failure::invalid_argument(format!(
            "a buffer of {len} bytes is not a whole number of {datatype:?} elements ({size} bytes each)"
        )));
    }
    Ok(len / size)
}

enum Op<'a> {
    Collective {
        seq: u64,
        signature: Signature,
        /// This rank's contribution (kept for the transports that combine at completion).
        mine: Vec<u8>,
        recv: &'a mut [u8],
    },
    Send {
        peer: usize,
        seq: u64,
    },
    Recv {
        peer: usize,
        recv: &'a mut [u8],
    },
}

struct Posted<'a> {
    link: Link,
    op: Op<'a>,
}

impl Posted<'_> {
    fn complete(self) -> Result<()> {
        match (self.link, self.op) {
            (Link::Local(l), Op::Collective { seq, recv, .. }) => l.complete_collective(seq, recv),
            (Link::Local(l), Op::Send { peer, seq }) => l.complete_send(peer, seq),
            (Link::Local(l), Op::Recv { peer, recv }) => l.complete_recv(peer, recv),
            (
                Link::Tcp(t),
                Op::Collective {
                    seq,
                    signature,
                    mine,
                    recv,
                },
            ) => t.complete_collective(seq, signature, mine, recv),
            (Link::Tcp(t), Op::Send { peer, seq }) => t.complete_send(peer, seq),
            (Link::Tcp(t), Op::Recv { peer, recv }) => t.complete_recv(peer, recv),
        }
    }
}

/// Operations posted one by one and completed together by `finish` (NCCL's group): a send and a
/// receive between two ranks in one batch on each do not deadlock. Buffers are borrowed until the
/// batch is finished. Operations may belong to different communicators. Dropping an unfinished
/// batch abandons its operations without blocking (sends already handed over stay sent; its
/// receives never read anything), which leaves the peers waiting as NCCL would.
#[must_use = "a batch's operations complete when it is finished"]
#[derive(Default)]
pub struct Batch<'a> {
    ops: Vec<Posted<'a>>,
}

impl<'a> Batch<'a> {
    pub fn new() -> Batch<'a> {
        Batch { ops: Vec::new() }
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Posts an all-reduce (see `Communicator::all_reduce`).
    pub fn all_reduce(
        &mut self,
        comm: &Communicator,
        send: &[u8],
        recv: &'a mut [u8],
        datatype: DataType,
        op: ReduceOp,
    ) -> Result<()> {
        if send.len() != recv.len() {
            return Err(Failure::invalid_argument(format!(
                "an all-reduce from {} bytes into {} bytes: the buffers must be as long",
                send.len(),
                recv.len()
            )));
        }
        self.all_reduce_from(comm, Some(send), recv, datatype, op)
    }

    /// Posts an in-place all-reduce.
    pub fn all_reduce_in_place(
        &mut self,
        comm: &Communicator,
        buf: &'a mut [u8],
        datatype: DataType,
        op: ReduceOp,
    ) -> Result<()> {
        self.all_reduce_from(comm, None, buf, datatype, op)
    }

    fn all_reduce_from(
        &mut self,
        comm: &Communicator,
        send: Option<&[u8]>,
        recv: &'a mut [u8],
        datatype: DataType,
        op: ReduceOp,
    ) -> Result<()> {
        let count = count_of(recv.len(), datatype)?;
        let signature = Signature::AllReduce {
            count,
            datatype,
            op,
        };
        self.collective(comm, signature, send, recv)
    }

    /// Posts a broadcast (see `Communicator::broadcast`).
    pub fn broadcast(
        &mut self,
        comm: &Communicator,
        send: &[u8],
        recv: &'a mut [u8],
        datatype: DataType,
        root: usize,
    ) -> Result<()> {
        if root == comm.rank() && send.len() != recv.len() {
            return Err(Failure::invalid_argument(format!(
                "a broadcast from {} bytes into {} bytes: the buffers must be as long",
                send.len(),
                recv.len()
            )));
        }
        self.broadcast_from(comm, Some(send), recv, datatype, root)
    }

    /// Posts an in-place broadcast.
    pub fn broadcast_in_place(
        &mut self,
        comm: &Communicator,
        buf: &'a mut [u8],
        datatype: DataType,
        root: usize,
    ) -> Result<()> {
        self.broadcast_from(comm, None, buf, datatype, root)
    }

    fn broadcast_from(
        &mut self,
        comm: &Communicator,
        send: Option<&[u8]>,
        recv: &'a mut [u8],
        datatype: DataType,
        root: usize,
    ) -> Result<()> {
        comm.check_peer("root", root)?;
        let count = count_of(recv.len(), datatype)?;
        let signature = Signature::Broadcast {
            count,
            datatype,
            root,
        };
        self.collective(comm, signature, send, recv)
    }

    /// Posts a collective: the contribution is `send`, or `recv` itself when in place.
    fn collective(
        &mut self,
        comm: &Communicator,
        signature: Signature,
        send: Option<&[u8]>,
        recv: &'a mut [u8],
    ) -> Result<()> {
        let contributes = signature.contributes(comm.rank());
        let (seq, mine) = match &comm.link {
            Link::Local(l) => (
                l.post_collective(signature, send.unwrap_or(recv))?,
                Vec::new(),
            ),
            Link::Tcp(t) => {
                let mine = if contributes {
                    send.unwrap_or(recv).to_vec()
                } else {
                    Vec::new()
                };
                (t.post_collective(signature, &mine)?, mine)
            }
        };
        self.ops.push(Posted {
            link: comm.link.clone(),
            op: Op::Collective {
                seq,
                signature,
                mine,
                recv,
            },
        });
        Ok(())
    }

    /// Posts a send of `data` to `peer` (the data is taken now; the send completes at `finish`,
    /// when the peer has received it).
    pub fn send(&mut self, comm: &Communicator, data: &[u8], peer: usize) -> Result<()> {
        comm.check_peer("peer", peer)?;
        let seq = match &comm.link {
            Link::Local(l) => l.post_send(data, peer)?,
            Link::Tcp(t) => t.post_send(data, peer)?,
        };
        self.ops.push(Posted {
            link: comm.link.clone(),
            op: Op::Send { peer, seq },
        });
        Ok(())
    }

    /// Posts a receive of `peer`'s next message into `buf` (filled by `finish`).
    pub fn recv(&mut self, comm: &Communicator, buf: &'a mut [u8], peer: usize) -> Result<()> {
        comm.check_peer("peer", peer)?;
        match &comm.link {
            Link::Local(l) => l.check_recv()?,
            Link::Tcp(t) => t.check_live()?,
        }
        self.ops.push(Posted {
            link: comm.link.clone(),
            op: Op::Recv { peer, recv: buf },
        });
        Ok(())
    }

    /// Completes every posted operation: receives and collectives first (they need only what peers
    /// posted), then sends (they wait for the peers' receives). The first failure is returned; the
    /// other operations are completed (or fail) all the same.
    pub fn finish(self) -> Result<()> {
        complete_all(self.ops)
    }
}

fn complete_all(ops: Vec<Posted<'_>>) -> Result<()> {
    let (sends, others): (Vec<Posted>, Vec<Posted>) = ops
        .into_iter()
        .partition(|p| matches!(p.op, Op::Send { .. }));
    let mut first = Ok(());
    for posted in others.into_iter().chain(sends) {
        let outcome = posted.complete();
        if first.is_ok() {
            first = outcome;
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::FailureKind;
    use crate::local;

    fn quick(timeout_ms: u64) -> Options {
        Options {
            timeout: Duration::from_millis(timeout_ms),
            force_tcp: false,
        }
    }

    #[test]
    fn a_threads_only_id_joins_threads_and_forgets_an_abandoned_join() {
        // The id a process that cannot listen makes: no rendezvous, threads of this process only.
        let id = UniqueId::compose(None);
        let err = Communicator::join(&id, 2, 0, &quick(150)).unwrap_err();
        assert_eq!(err.kind, FailureKind::SystemError, "{err}");
        assert!(err.message.contains("ranks [1] of 2"), "{err}");
        assert!(!local::is_pending(&id), "the abandoned group is gone");
        let id = UniqueId::compose(None);
        let sums = std::thread::scope(|s| {
            let ranks: Vec<_> = (0..2)
                .map(|r| {
                    s.spawn(move || {
                        let comm = Communicator::join(&id, 2, r, &quick(5000)).unwrap();
                        assert_eq!(comm.transport(), Transport::Threads);
                        let mut v = (r as u32 + 1).to_le_bytes();
                        comm.all_reduce_in_place(&mut v, DataType::U32, ReduceOp::Sum)
                            .unwrap();
                        u32::from_le_bytes(v)
                    })
                })
                .collect();
            ranks
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        });
        assert_eq!(sums, [3, 3]);
        assert!(!local::is_pending(&id));
    }

    #[test]
    fn a_threads_only_id_from_another_process_is_refused() {
        let mut bytes = *UniqueId::compose(None).as_bytes();
        bytes[8..12].copy_from_slice(&(std::process::id() ^ 1).to_le_bytes());
        let err = Communicator::join(&UniqueId::from_bytes(bytes), 1, 0, &quick(100)).unwrap_err();
        assert_eq!(err.kind, FailureKind::InvalidArgument, "{err}");
        assert!(err.message.contains("could not listen"), "{err}");
    }
}
