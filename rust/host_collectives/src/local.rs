//! Communicators whose ranks are threads of this process: shared state under one mutex per
//! communicator, no sockets.
//!
//! Ranks join by the unique id in a process-wide registry of groups still waiting for ranks (removed
//! once complete, or when its last waiting rank gives up). Collectives are matched by their order on
//! each rank: round `n` collects every rank's `n`-th contribution, the last to arrive computes the
//! result, each rank copies it out. A send queues its message on the (source, destination) channel
//! and completes when the destination has taken it, as NCCL's send completes only when the receiver
//! has the data. A rank that left (destroyed or aborted) makes operations waiting on it fail instead
//! of hanging; an abort wakes every waiting rank.
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::failure::{Failure, Result};
use crate::signature::Signature;
use crate::sync::{lock, wait, wait_timeout};
use crate::unique_id::UniqueId;

struct Round {
    signature: Signature,
    parts: Vec<Option<Vec<u8>>>,
    arrived: usize,
    result: Option<Result<Arc<Vec<u8>>>>,
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
    /// Rank that aborted, if any.
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
        lock(&self.state)
    }

    /// Blocks until `ready` gives an outcome, failing if the group is aborted meanwhile.
    fn wait_until<T>(
        &self,
        rank: usize,
        mut ready: impl FnMut(&mut GroupState) -> Option<Result<T>>,
    ) -> Result<T> {
        let mut state = self.lock();
        loop {
            if let Some(outcome) = ready(&mut state) {
                return outcome;
            }
            if let Some(by) = state.aborted_by {
                return Err(aborted(by, rank));
            }
            state = wait(&self.changed, state);
        }
    }
}

fn aborted(by: usize, rank: usize) -> Failure {
    if by == rank {
        Failure::invalid_usage(format!(
            "rank {rank}'s communicator was aborted while this operation was in progress"
        ))
    } else {
        Failure::remote(format!(
            "rank {by} aborted the communicator; rank {rank}'s operation cannot complete"
        ))
    }
}

/// Groups still waiting for ranks to join, by unique id.
fn pending() -> MutexGuard<'static, HashMap<UniqueId, Arc<Group>>> {
    static PENDING: OnceLock<Mutex<HashMap<UniqueId, Arc<Group>>>> = OnceLock::new();
    lock(PENDING.get_or_init(Mutex::default))
}

/// One rank of an in-process communicator.
pub(crate) struct LocalComm {
    group: Arc<Group>,
    rank: usize,
}

impl LocalComm {
    /// Joins the group of `id` as `rank` of `nranks`; blocks until all have joined or `limit` passes.
    pub fn join(id: &UniqueId, nranks: usize, rank: usize, limit: Duration) -> Result<LocalComm> {
        let group = {
            let mut pending = pending();
            let group = Arc::clone(
                pending
                    .entry(*id)
                    .or_insert_with(|| Arc::new(Group::new(nranks))),
            );
            if group.nranks != nranks {
                return Err(Failure::invalid_argument(format!(
                    "rank {rank} asked for {nranks} ranks; the ranks already joined asked for {}",
                    group.nranks
                )));
            }
            let mut state = group.lock();
            if state.joined[rank] {
                return Err(Failure::invalid_usage(format!(
                    "rank {rank} joined this communicator twice"
                )));
            }
            state.joined[rank] = true;
            state.count += 1;
            if state.count == nranks {
                pending.remove(id);
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
                    let mut pending = pending();
                    if pending.get(id).is_some_and(|g| Arc::ptr_eq(g, &group)) {
                        pending.remove(id);
                    }
                }
                return Err(Failure::system(format!(
                    "rank {rank} waited {:.1} s for ranks {missing:?} of {nranks} to join; \
                     set MONARCH_HOST_COMM_TIMEOUT to wait longer",
                    limit.as_secs_f64()
                )));
            }
            state = wait_timeout(&group.changed, state, deadline - now);
        }
        drop(state);
        Ok(LocalComm { group, rank })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn nranks(&self) -> usize {
        self.group.nranks
    }

    /// Fails when the communicator cannot take a new operation: aborted, or left by this rank.
    fn check_live(&self, state: &GroupState) -> Result<()> {
        if let Some(by) = state.aborted_by {
            return Err(Failure::remote(format!(
                "the communicator was aborted by rank {by}"
            )));
        }
        if state.departed[self.rank] {
            return Err(Failure::invalid_usage(format!(
                "rank {}'s communicator was destroyed",
                self.rank
            )));
        }
        Ok(())
    }

    /// Contributes to the next collective; returns its sequence number for `complete_collective`.
    pub fn post_collective(&self, signature: Signature, contribution: &[u8]) -> Result<u64> {
        let n = self.group.nranks;
        let me = self.rank;
        let mut state = self.group.lock();
        self.check_live(&state)?;
        let seq = state.collectives_posted[me];
        state.collectives_posted[me] += 1;
        let round = state.rounds.entry(seq).or_insert_with(|| Round {
            signature,
            parts: vec![None; n],
            arrived: 0,
            result: None,
            taken: 0,
        });
        if round.signature != signature && round.result.is_none() {
            round.result = Some(Err(Failure::invalid_usage(format!(
                "collective #{seq} differs between ranks: {:?} vs {:?} on rank {me}",
                round.signature, signature
            ))));
        }
        round.parts[me] = Some(if signature.contributes(me) {
            contribution.to_vec()
        } else {
            Vec::new()
        });
        round.arrived += 1;
        if round.arrived == n && round.result.is_none() {
            let parts: Vec<&[u8]> = round
                .parts
                .iter()
                .map(|p| p.as_deref().unwrap_or(&[]))
                .collect();
            round.result = Some(Ok(Arc::new(signature.combine(&parts))));
        }
        drop(state);
        self.group.changed.notify_all();
        Ok(seq)
    }

    /// Waits for collective `seq` and copies its result into `recv`.
    pub fn complete_collective(&self, seq: u64, recv: &mut [u8]) -> Result<()> {
        let group = &self.group;
        let n = group.nranks;
        let data = group.wait_until(self.rank, |state| {
            let round = state.rounds.get(&seq)?;
            match &round.result {
                Some(result) => Some(result.clone()),
                None => (0..n)
                    .find(|&r| state.departed[r] && round.parts[r].is_none())
                    .map(|r| {
                        Err(Failure::remote(format!(
                            "rank {r} left the communicator before joining collective #{seq}"
                        )))
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
        if data.len() != recv.len() {
            return Err(Failure::internal("collective result has the wrong size"));
        }
        recv.copy_from_slice(&data);
        Ok(())
    }

    /// Queues `data` for `peer`; returns the message's sequence number for `complete_send`.
    pub fn post_send(&self, data: &[u8], peer: usize) -> Result<u64> {
        let mut state = self.group.lock();
        self.check_live(&state)?;
        let channel = state.channels.entry((self.rank, peer)).or_default();
        channel.queue.push_back(data.to_vec());
        let seq = channel.sent;
        channel.sent += 1;
        drop(state);
        self.group.changed.notify_all();
        Ok(seq)
    }

    /// Waits until `peer` has received message `seq` of this rank.
    pub fn complete_send(&self, peer: usize, seq: u64) -> Result<()> {
        let me = self.rank;
        self.group.wait_until(me, |state| {
            if state
                .channels
                .get(&(me, peer))
                .is_some_and(|c| c.received > seq)
            {
                Some(Ok(()))
            } else if state.departed[peer] {
                Some(Err(Failure::remote(format!(
                    "rank {peer} left the communicator before receiving from rank {me}"
                ))))
            } else {
                None
            }
        })
    }

    /// Fails now if a receive could not be posted (the communicator is aborted or left).
    pub fn check_recv(&self) -> Result<()> {
        self.check_live(&self.group.lock())
    }

    /// Waits for the next message from `peer` and copies it into `recv` (which must fit it exactly).
    pub fn complete_recv(&self, peer: usize, recv: &mut [u8]) -> Result<()> {
        let me = self.rank;
        let message = self.group.wait_until(me, |state| {
            let channel = state.channels.entry((peer, me)).or_default();
            if let Some(message) = channel.queue.pop_front() {
                channel.received += 1;
                Some(Ok(message))
            } else if state.departed[peer] {
                Some(Err(Failure::remote(format!(
                    "rank {peer} left the communicator before sending to rank {me}"
                ))))
            } else {
                None
            }
        });
        self.group.changed.notify_all(); // the sender waits for `received`
        let message = message?;
        if message.len() != recv.len() {
            return Err(Failure::invalid_usage(format!(
                "rank {me} posted a receive of {} bytes from rank {peer}, which sent {} bytes",
                recv.len(),
                message.len()
            )));
        }
        recv.copy_from_slice(&message);
        Ok(())
    }

    /// Leaves the communicator (`abort`: and wakes every rank waiting in it).
    pub fn leave(&self, abort: bool) {
        let mut state = self.group.lock();
        state.departed[self.rank] = true;
        if abort && state.aborted_by.is_none() {
            state.aborted_by = Some(self.rank);
        }
        drop(state);
        self.group.changed.notify_all();
    }

    /// A peer's failure that operations will report: another rank aborted.
    pub fn remote_failure(&self) -> Option<Failure> {
        match self.group.lock().aborted_by {
            Some(by) if by != self.rank => Some(aborted(by, self.rank)),
            _ => None,
        }
    }
}

/// Whether a group for `id` is still waiting for ranks (tests: an abandoned id leaves nothing).
#[cfg(test)]
pub(crate) fn is_pending(id: &UniqueId) -> bool {
    pending().contains_key(id)
}
