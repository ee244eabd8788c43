//! Peer state transfer for checkpoint-less recovery: a healthy donor rank streams a named set of
//! buffers to a recovering receiver rank over a communicator.
//!
//! Protocol (all point-to-point between donor and receiver, on the communicator's stream):
//!
//! 1. donor -> receiver: a 16-byte header (manifest length, chunk size) and the manifest: per leaf
//!    its name, kind (tensor or value), dtype, shape, byte size and the donor's mr-sum64 computed on
//!    the device just before; a value leaf (a step counter, a learning rate: anything that is not a
//!    tensor) carries its encoded bytes instead. Checksumming every tensor before the first chunk
//!    leaves is what makes the checksums a consistent snapshot: a donor whose state changes while it
//!    is being sent gives a mismatch, never a torn state (per-chunk checksums taken as each chunk is
//!    sent would not).
//! 2. receiver -> donor: a 16-byte header (rejection length, manifest length), why the receiver
//!    rejects the state if it does (its own problems: the chunk exceeds its staging size, a
//!    read-only target, no room for a device shadow) and its own manifest. Each side compares the
//!    two manifests with the same function, so both raise TransferError naming the same first
//!    differing leaf (name, kind, dtype, shape or size) before any data moves.
//! 3. donor -> receiver: every buffer in chunks of at most `chunk` bytes, sent from the donor's
//!    buffers directly. The receiver keeps them in a shadow of the incoming state:
//!    - a device shadow (one allocation for the whole state, allocated before the reply): each
//!      chunk is received in place and a checker thread adds its partial checksum while the next
//!      one arrives. On the CPU build a prefault thread takes the fresh shadow's first-touch page
//!      faults ahead of the receive, from the allocation on (`memory::Buffer::prefault`);
//!    - a host shadow: each chunk is received into one staging buffer of `chunk` bytes (the only
//!      device memory the transfer needs), checksummed there and copied to host memory.
//!
//!    - no shadow (`Shadow::None`, for scratch targets only): each chunk is received straight
//!      into the receiver's own buffer and checksummed there; nothing to commit, and no guarantee
//!      for the targets when the transfer fails.
//!
//!    A buffer's checksum is complete, and compared with the manifest, when its last chunk has
//!    been checksummed.
//! 4. receiver -> donor: the verdict (the names of the buffers that did not match, NUL-separated).
//!    Both raise ChecksumMismatch naming them; the communicator stays usable (retry is possible).
//! 5. Only when every buffer matched does the receiver copy the shadow into its own buffers, so a
//!    transfer interrupted at any point before (abort, a peer failure, a checksum mismatch) leaves
//!    the receiver's previous state untouched. The shadow costs memory equal to the state, freed
//!    when the transfer returns.
//!
//! A transfer that fails mid-stream for any other reason (a progress callback raising, a device
//! error) aborts the communicator, so the peer gets an error instead of hanging.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use rocm_compat::checksum::finalize;

use crate::comm::Communicator;
use crate::error::{Error, Result};
use crate::memory::{Buffer, Prefault, PREFAULT_USEFUL};

const MAGIC: &[u8; 8] = b"MRSTATE2";
/// Where each tensor starts in a device shadow (one allocation for the whole state).
const SHADOW_ALIGN: usize = 256;
/// How much of the shadow the prefault thread readies at a time (it checks for a stop in between).
const PREFAULT_STEP: usize = 8 << 20;
/// How much of the shadow the commit copies before handing it on to be released.
const COMMIT_PIECE: usize = 32 << 20;

/// One leaf of a state as the transfer sees it.
pub enum Leaf<'a> {
    /// A tensor (or a plain buffer: dtype "uint8", shape [nbytes]): its bytes move.
    Tensor {
        buffer: &'a Buffer,
        dtype: String,
        shape: Vec<i64>,
    },
    /// Anything else, encoded by the caller: carried in the manifest, donor to receiver.
    Value(Vec<u8>),
}

impl Leaf<'_> {
    fn buffer(&self) -> Option<&Buffer> {
        match self {
            Leaf::Tensor { buffer, .. } => Some(buffer),
            Leaf::Value(_) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub tensor: bool,
    pub dtype: String,
    pub shape: Vec<i64>,
    pub nbytes: usize,
    pub checksum: u64,
    /// A value leaf's bytes (empty for a tensor).
    pub value: Vec<u8>,
}

impl Entry {
    fn describe(&self) -> String {
        if self.tensor {
            format!(
                "a {} tensor of shape {:?} ({} bytes)",
                self.dtype, self.shape, self.nbytes
            )
        } else {
            "a non-tensor value".into()
        }
    }
}

/// The manifest entries of `leaves` (checksums when `checksum` is given).
fn entries_of(
    leaves: &[(String, Leaf<'_>)],
    mut checksum: impl FnMut(&Buffer) -> Result<u64>,
) -> Result<Vec<Entry>> {
    leaves
        .iter()
        .map(|(name, leaf)| {
            Ok(match leaf {
                Leaf::Tensor {
                    buffer,
                    dtype,
                    shape,
                } => Entry {
                    name: name.clone(),
                    tensor: true,
                    dtype: dtype.clone(),
                    shape: shape.clone(),
                    nbytes: buffer.nbytes(),
                    checksum: checksum(buffer)?,
                    value: Vec::new(),
                },
                Leaf::Value(v) => Entry {
                    name: name.clone(),
                    tensor: false,
                    dtype: String::new(),
                    shape: Vec::new(),
                    nbytes: 0,
                    checksum: 0,
                    value: v.clone(),
                },
            })
        })
        .collect()
}

/// Where the receiver keeps the incoming state until every buffer has matched its checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shadow {
    /// Device memory when the device has room for the whole state (plus a margin), else host memory.
    Auto,
    /// Host memory: the device needs only one staging chunk, so a state larger than free device
    /// memory still moves; each byte makes a device-to-host and a host-to-device trip.
    Host,
    /// Device memory: no host round trip, but the device needs room for a second copy of the state.
    Device,
    /// No shadow: each chunk lands straight in the receiver's own buffer (checksummed there as for a
    /// device shadow). Without the all-or-nothing guarantee, so only for buffers that are scratch until
    /// the transfer succeeds (freshly allocated targets, copied elsewhere afterwards): a failed transfer
    /// leaves them partly written. Costs no second copy of the state and no commit.
    None,
}

pub fn parse_shadow(name: &str) -> Result<Shadow> {
    match name {
        "auto" => Ok(Shadow::Auto),
        "host" => Ok(Shadow::Host),
        "device" => Ok(Shadow::Device),
        "none" => Ok(Shadow::None),
        other => Err(Error::Value(format!(
            "shadow {other:?} is not one of auto, host, device, none"
        ))),
    }
}

#[derive(Debug, Clone)]
pub struct Report {
    /// "donor", "receiver" or "idle" (a rank that is neither).
    pub role: &'static str,
    /// Where the receiver kept the incoming state: "host", "device", "none" ("" on the donor).
    pub shadow: &'static str,
    pub peer: i32,
    pub buffers: usize,
    pub bytes: u64,
    pub chunks: u64,
    pub chunk_bytes: usize,
    pub seconds: f64,
    /// The donor's checksum of each buffer (verified on the receiver).
    pub checksums: Vec<(String, u64)>,
    /// The donor's value leaves (on the receiver; the caller decodes them).
    pub values: Vec<(String, Vec<u8>)>,
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u64).to_le_bytes());
    out.extend_from_slice(b);
}

fn encode(entries: &[Entry]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for e in entries {
        put_bytes(&mut out, e.name.as_bytes());
        out.push(u8::from(e.tensor));
        put_bytes(&mut out, e.dtype.as_bytes());
        out.extend_from_slice(&(e.shape.len() as u64).to_le_bytes());
        for d in &e.shape {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&(e.nbytes as u64).to_le_bytes());
        out.extend_from_slice(&e.checksum.to_le_bytes());
        put_bytes(&mut out, &e.value);
    }
    out
}

fn decode(data: &[u8]) -> Option<Vec<Entry>> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Option<&[u8]> {
        let piece = data.get(at..at.checked_add(n)?)?;
        at += n;
        Some(piece)
    };
    let u64_at = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
    if take(8)? != MAGIC {
        return None;
    }
    let count = u64_at(take(8)?) as usize;
    let mut entries = Vec::with_capacity(count.min(1 << 16));
    for _ in 0..count {
        let len = u64_at(take(8)?) as usize;
        let name = String::from_utf8(take(len)?.to_vec()).ok()?;
        let tensor = take(1)?[0] != 0;
        let len = u64_at(take(8)?) as usize;
        let dtype = String::from_utf8(take(len)?.to_vec()).ok()?;
        let ndim = u64_at(take(8)?) as usize;
        let mut shape = Vec::with_capacity(ndim.min(64));
        for _ in 0..ndim {
            shape.push(u64_at(take(8)?) as i64);
        }
        let nbytes = u64_at(take(8)?) as usize;
        let checksum = u64_at(take(8)?);
        let len = u64_at(take(8)?) as usize;
        let value = take(len)?.to_vec();
        entries.push(Entry {
            name,
            tensor,
            dtype,
            shape,
            nbytes,
            checksum,
            value,
        });
    }
    Some(entries)
}

fn u64_le(data: &[u8]) -> u64 {
    u64::from_le_bytes(data[..8].try_into().unwrap_or([0; 8]))
}

/// How the donor's manifest and the receiver's differ, first differing leaf first (in the donor's
/// order, then leaves only the receiver has). Empty: they agree on every name, kind, dtype, shape
/// and size. Both sides run it on the same two manifests, so they name the same leaves.
pub fn mismatches(donor: &[Entry], receiver: &[Entry]) -> Vec<String> {
    let mut problems = Vec::new();
    for e in donor {
        match receiver.iter().find(|r| r.name == e.name) {
            None => problems.push(format!(
                "leaf {:?} ({} on the donor) is missing on the receiver",
                e.name,
                e.describe()
            )),
            Some(r)
                if r.tensor != e.tensor
                    || (e.tensor
                        && (r.dtype != e.dtype || r.shape != e.shape || r.nbytes != e.nbytes)) =>
            {
                problems.push(format!(
                    "leaf {:?} is {} on the donor and {} on the receiver",
                    e.name,
                    e.describe(),
                    r.describe()
                ))
            }
            Some(_) => {}
        }
    }
    for r in receiver {
        if !donor.iter().any(|e| e.name == r.name) {
            problems.push(format!(
                "leaf {:?} ({} on the receiver) is not in the donor's state",
                r.name,
                r.describe()
            ));
        }
    }
    problems
}

/// One line for a list of problems: the first in full, then how many more (the first few named).
fn summary(problems: &[String]) -> String {
    let mut text = problems.first().cloned().unwrap_or_default();
    if problems.len() > 1 {
        let more: Vec<&str> = problems[1..].iter().take(4).map(String::as_str).collect();
        text.push_str(&format!(
            " (and {} more: {}{})",
            problems.len() - 1,
            more.join("; "),
            if problems.len() > 5 { "; ..." } else { "" }
        ));
    }
    text
}

/// Transfers `buffers` from rank `donor` to rank `receiver`; every rank of the pair calls it with
/// buffers of the same names and sizes (other ranks return at once). `progress(name, offset, len)`
/// runs before each chunk is sent (donor) and after each chunk is received (receiver).
pub fn transfer_state(
    comm: &Communicator,
    leaves: &[(String, Leaf<'_>)],
    donor: i32,
    receiver: i32,
    staging_bytes: usize,
    shadow: Shadow,
    progress: &mut dyn FnMut(&str, usize, usize) -> Result<()>,
) -> Result<Report> {
    let world = comm.world_size();
    for (what, r) in [("donor", donor), ("receiver", receiver)] {
        if r < 0 || r >= world {
            return Err(Error::Value(format!(
                "{what} {r} is not a rank (world size {world})"
            )));
        }
    }
    if donor == receiver {
        return Err(Error::Value(format!(
            "donor and receiver are both rank {donor}"
        )));
    }
    if staging_bytes < 8 {
        return Err(Error::Value(format!(
            "staging_bytes must be at least 8, not {staging_bytes}"
        )));
    }
    for (i, (name, leaf)) in leaves.iter().enumerate() {
        if leaves[..i].iter().any(|(n, _)| n == name) {
            return Err(Error::Value(format!("buffer name {name:?} appears twice")));
        }
        let Some(buffer) = leaf.buffer() else {
            continue;
        };
        if buffer.device() != comm.device() {
            return Err(Error::Value(format!(
                "buffer {name:?} is on device {} and the communicator on device {}",
                buffer.device(),
                comm.device()
            )));
        }
    }
    let chunk = staging_bytes / 8 * 8;
    let start = Instant::now();
    let mut report = Report {
        role: "idle",
        shadow: "",
        peer: -1,
        buffers: leaves.iter().filter(|(_, l)| l.buffer().is_some()).count(),
        bytes: leaves
            .iter()
            .filter_map(|(_, l)| l.buffer())
            .map(|b| b.nbytes() as u64)
            .sum(),
        chunks: 0,
        chunk_bytes: chunk,
        seconds: 0.0,
        checksums: Vec::new(),
        values: Vec::new(),
    };
    if comm.rank() == donor {
        report.role = "donor";
        report.peer = receiver;
        donate(comm, leaves, receiver, chunk, progress, &mut report)?;
    } else if comm.rank() == receiver {
        report.role = "receiver";
        report.peer = donor;
        receive(comm, leaves, donor, chunk, shadow, progress, &mut report)?;
    } else {
        report.bytes = 0;
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}

/// Aborts the communicator after a mid-stream failure that is not the communicator's own, so the
/// peer is not left waiting.
fn abort_on_local_failure(comm: &Communicator, err: Error) -> Error {
    if !matches!(err, Error::Nccl { .. } | Error::Aborted(_)) {
        let _ = comm.abort();
    }
    err
}

fn interrupted(role: &str, err: Error, done: u64, total: u64, at: &str, keep: &str) -> Error {
    match err {
        Error::Nccl {
            result, message, ..
        } => Error::TransferAborted {
            message: format!(
                "state transfer interrupted on the {role} after {done} of {total} bytes (buffer {at:?}): {message}; {keep}"
            ),
            result: Some(result),
        },
        Error::Aborted(message) => Error::TransferAborted {
            message: format!(
                "state transfer interrupted on the {role} after {done} of {total} bytes (buffer {at:?}): {message}; {keep}"
            ),
            result: None,
        },
        other => other,
    }
}

fn donate(
    comm: &Communicator,
    leaves: &[(String, Leaf<'_>)],
    receiver: i32,
    chunk: usize,
    progress: &mut dyn FnMut(&str, usize, usize) -> Result<()>,
    report: &mut Report,
) -> Result<()> {
    let entries = entries_of(leaves, |b| b.checksum(Some(comm.stream())))?;
    report.checksums = entries
        .iter()
        .filter(|e| e.tensor)
        .map(|e| (e.name.clone(), e.checksum))
        .collect();
    let manifest = encode(&entries);
    let keep = "the donor's buffers are unchanged";
    let handshake = |err| interrupted("donor", err, 0, report.bytes, "", keep);
    let mut header = (manifest.len() as u64).to_le_bytes().to_vec();
    header.extend_from_slice(&(chunk as u64).to_le_bytes());
    comm.send_host(&header, receiver).map_err(handshake)?;
    comm.send_host(&manifest, receiver).map_err(handshake)?;
    let reply = comm.recv_host(16, receiver).map_err(handshake)?;
    let (rejection_len, theirs_len) = (u64_le(&reply) as usize, u64_le(&reply[8..]) as usize);
    let rejection = if rejection_len > 0 {
        comm.recv_host(rejection_len, receiver).map_err(handshake)?
    } else {
        Vec::new()
    };
    let theirs = comm.recv_host(theirs_len, receiver).map_err(handshake)?;
    // The donor checks the receiver's manifest itself too: both sides name the same leaf.
    let mut problems = match decode(&theirs) {
        Some(theirs) => mismatches(&entries, &theirs),
        None => vec!["the receiver's manifest is malformed".into()],
    };
    if !rejection.is_empty() {
        problems.push(String::from_utf8_lossy(&rejection).into_owned());
    }
    if !problems.is_empty() {
        return Err(Error::Transfer(format!(
            "the receiver (rank {receiver}) does not match this donor's state; nothing was sent: {}",
            summary(&problems)
        )));
    }
    let mut done = 0u64;
    for (name, leaf) in leaves {
        let Some(buffer) = leaf.buffer() else {
            continue;
        };
        let mut offset = 0;
        while offset < buffer.nbytes() {
            let len = chunk.min(buffer.nbytes() - offset);
            let sent =
                progress(name, offset, len).and_then(|()| comm.send(buffer, offset, len, receiver));
            if let Err(err) = sent {
                let err = abort_on_local_failure(comm, err);
                return Err(interrupted("donor", err, done, report.bytes, name, keep));
            }
            offset += len;
            done += len as u64;
            report.chunks += 1;
        }
    }
    let verdict_len = comm
        .recv_host(8, receiver)
        .map_err(|err| interrupted("donor", err, done, report.bytes, "", keep))?;
    let verdict_len = u64_le(&verdict_len) as usize;
    if verdict_len > 0 {
        let verdict = comm
            .recv_host(verdict_len, receiver)
            .map_err(|err| interrupted("donor", err, done, report.bytes, "", keep))?;
        let names: Vec<String> = String::from_utf8_lossy(&verdict)
            .split('\0')
            .map(str::to_string)
            .collect();
        return Err(Error::Checksum {
            message: format!(
                "the receiver (rank {receiver}) found a checksum mismatch in buffer(s) {}: the data changed \
                 after the donor's checksum or was corrupted in flight; the receiver's state is unchanged",
                quoted(&names)
            ),
            buffers: names,
        });
    }
    Ok(())
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[allow(clippy::too_many_arguments)]
fn receive(
    comm: &Communicator,
    leaves: &[(String, Leaf<'_>)],
    donor: i32,
    chunk: usize,
    shadow: Shadow,
    progress: &mut dyn FnMut(&str, usize, usize) -> Result<()>,
    report: &mut Report,
) -> Result<()> {
    let keep = if shadow == Shadow::None {
        "the receiver's buffers (no shadow) may be partly written"
    } else {
        "the receiver's buffers are unchanged"
    };
    let handshake = |err| interrupted("receiver", err, 0, 0, "", keep);
    let header = comm.recv_host(16, donor).map_err(handshake)?;
    let (manifest_len, donor_chunk) = (u64_le(&header) as usize, u64_le(&header[8..]) as usize);
    let manifest = comm.recv_host(manifest_len, donor).map_err(handshake)?;
    let mine = entries_of(leaves, |_| Ok(0))?;
    let (all_entries, mut problems) = match decode(&manifest) {
        Some(entries) => {
            let problems = mismatches(&entries, &mine);
            (entries, problems)
        }
        None => (
            Vec::new(),
            vec!["the donor's manifest is malformed".to_string()],
        ),
    };
    let structural = problems.len();
    for (name, leaf) in leaves {
        if leaf.buffer().is_some_and(Buffer::is_read_only) {
            problems.push(format!(
                "leaf {name:?} is read-only on the receiver (a read-only array or tensor cannot be a receive target)"
            ));
        }
    }
    if donor_chunk == 0 || donor_chunk.rem_euclid(8) != 0 || donor_chunk > chunk {
        problems.push(format!(
            "the donor sends chunks of {donor_chunk} bytes and the receiver stages at most {chunk}: \
             pass the same staging_bytes on both ranks"
        ));
    }
    report.values = all_entries
        .iter()
        .filter(|e| !e.tensor)
        .map(|e| (e.name.clone(), e.value.clone()))
        .collect();
    let entries: Vec<Entry> = all_entries.into_iter().filter(|e| e.tensor).collect();
    // The device shadow (one allocation for the whole state, each tensor at a multiple of
    // SHADOW_ALIGN) is allocated before answering, so a forced "device" that does not fit is a
    // rejection rather than a failure mid-stream.
    let mut places = Vec::with_capacity(entries.len());
    let mut shadow_bytes = 0usize;
    for e in &entries {
        places.push(shadow_bytes);
        shadow_bytes = shadow_bytes
            .checked_add(e.nbytes.next_multiple_of(SHADOW_ALIGN))
            .ok_or_else(|| Error::Value("the state's size overflows".into()))?;
    }
    let state_bytes: usize = entries.iter().map(|e| e.nbytes).sum();
    // Straight into the receiver's own buffers (Shadow::None): the target of each entry.
    let direct: Option<Vec<&Buffer>> = (shadow == Shadow::None && problems.is_empty()).then(|| {
        entries
            .iter()
            .filter_map(|e| {
                leaves
                    .iter()
                    .find(|(n, _)| *n == e.name)
                    .and_then(|(_, l)| l.buffer())
            })
            .collect()
    });
    let want_device = problems.is_empty()
        && match shadow {
            Shadow::Host | Shadow::None => false,
            Shadow::Device => true,
            Shadow::Auto => crate::memory::mem_info(comm.device())
                .map(|(free, _)| free >= state_bytes + state_bytes / 8 + (256 << 20))
                .unwrap_or(false),
        };
    let mut device_shadow: Option<Buffer> = None;
    if want_device {
        match Buffer::new_uninit(shadow_bytes, Some(comm.device())) {
            Ok(buffer) => device_shadow = Some(buffer),
            Err(err) if shadow == Shadow::Device => problems.push(format!(
                "the receiver cannot hold a device shadow of the {state_bytes}-byte state ({err}); \
                 use shadow=\"host\""
            )),
            Err(_) => {}
        }
    }
    report.shadow = if device_shadow.is_some() {
        "device"
    } else if direct.is_some() {
        "none"
    } else {
        "host"
    };
    // Where the prefault thread should be at least: the middle of the chunk being received (the
    // transport fills a chunk from its start; a prefault thread that has fallen behind jumps there
    // and leaves the first half to the receive, measured better than the chunk's start or end).
    let cursor = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let outcome = std::thread::scope(|scope| -> Result<Vec<Vec<u8>>> {
        // Every way out of this closure stops the helper threads before the scope joins them.
        let _stop = SetOnDrop(&stop);
        // A fresh device shadow's first-touch page faults (host memory on the CPU build) are taken
        // by a helper thread ahead of the receive, starting while the handshake finishes.
        if let Some(shadow) = device_shadow.as_ref().filter(|_| PREFAULT_USEFUL) {
            let (cursor, stop) = (&cursor, &stop);
            scope.spawn(move || {
                let mut state = Prefault::new();
                let mut at = 0;
                while at < shadow_bytes && !stop.load(Ordering::Relaxed) {
                    at = at.max(cursor.load(Ordering::Relaxed));
                    let len = PREFAULT_STEP.min(shadow_bytes.saturating_sub(at));
                    if len == 0 || !shadow.prefault(at, len, &mut state) {
                        break;
                    }
                    at += len;
                }
            });
        }
        // Problems of this receiver's own (not in the manifests) go to the donor as text.
        let rejection = problems[structural..].join("; ");
        let own = encode(&mine);
        let mut reply = (rejection.len() as u64).to_le_bytes().to_vec();
        reply.extend_from_slice(&(own.len() as u64).to_le_bytes());
        comm.send_host(&reply, donor).map_err(handshake)?;
        if !rejection.is_empty() {
            comm.send_host(rejection.as_bytes(), donor)
                .map_err(handshake)?;
        }
        comm.send_host(&own, donor).map_err(handshake)?;
        if !problems.is_empty() {
            return Err(Error::Transfer(format!(
                "the state from the donor (rank {donor}) does not match this receiver's; nothing was received: {}",
                summary(&problems)
            )));
        }
        report.checksums = entries
            .iter()
            .map(|e| (e.name.clone(), e.checksum))
            .collect();
        report.chunk_bytes = donor_chunk;
        let largest = entries.iter().map(|e| e.nbytes).max().unwrap_or(0);
        // A device shadow (or, with no shadow, each target) receives in place, and a checker
        // thread checksums each chunk (on a stream of its own) while the next one arrives.
        let (chunks_tx, chunks_rx) = std::sync::mpsc::channel::<(usize, usize, usize)>();
        let in_place = device_shadow.is_some() || direct.is_some();
        let checker = in_place.then(|| {
            let device = comm.device();
            let (places, device_shadow, direct) = (&places, &device_shadow, &direct);
            let count = entries.len();
            scope.spawn(move || -> Result<Vec<u64>> {
                let stream = crate::memory::Stream::new(Some(device))?;
                let mut sums = vec![0u64; count];
                for (index, offset, len) in chunks_rx {
                    let (buffer, at) = match (device_shadow, direct) {
                        (Some(shadow), _) => (shadow, places[index] + offset),
                        (None, Some(targets)) => (targets[index], offset),
                        (None, None) => unreachable!("checked on spawning"),
                    };
                    let s = buffer.partial_checksum(at, len, (offset / 8) as u64, Some(&stream))?;
                    sums[index] = sums[index].wrapping_add(s);
                }
                Ok(sums)
            })
        });
        let mut entry_sums = vec![0u64; entries.len()];
        // A host shadow receives through one staging chunk.
        let staging = if in_place {
            None
        } else {
            Some(Buffer::new_uninit(
                donor_chunk.min(largest),
                Some(comm.device()),
            )?)
        };
        let mut shadows = Vec::with_capacity(entries.len());
        let mut bad = Vec::new();
        let mut done = 0u64;
        for (index, entry) in entries.iter().enumerate() {
            let mut host = vec![0u8; if staging.is_some() { entry.nbytes } else { 0 }];
            let mut sum = 0u64;
            let mut offset = 0;
            while offset < entry.nbytes {
                let len = donor_chunk.min(entry.nbytes - offset);
                // The chunk's partial checksum is salted for its place in the buffer (offset is a
                // multiple of 8).
                let step = (|| {
                    let sum_here = match (&staging, &device_shadow, &direct) {
                        (Some(staging), _, _) => {
                            comm.recv(staging, 0, len, donor)?;
                            let s = staging.partial_checksum(
                                0,
                                len,
                                (offset / 8) as u64,
                                Some(comm.stream()),
                            )?;
                            staging.read(0, &mut host[offset..offset + len])?;
                            s
                        }
                        (None, Some(shadow), _) => {
                            let at = places[index] + offset;
                            cursor.store(at + len / 2, Ordering::Relaxed);
                            comm.recv(shadow, at, len, donor)?;
                            // Checksummed by the checker thread (a send fails only if it stopped
                            // on an error, which its join reports).
                            let _ = chunks_tx.send((index, offset, len));
                            0
                        }
                        (None, None, Some(targets)) => {
                            comm.recv(targets[index], offset, len, donor)?;
                            let _ = chunks_tx.send((index, offset, len));
                            0
                        }
                        (None, None, None) => {
                            unreachable!("a staging buffer, a device shadow or the targets")
                        }
                    };
                    progress(&entry.name, offset, len)?;
                    Ok(sum_here)
                })();
                match step {
                    Ok(s) => sum = sum.wrapping_add(s),
                    Err(err) => {
                        let err = abort_on_local_failure(comm, err);
                        return Err(interrupted(
                            "receiver",
                            err,
                            done,
                            report.bytes,
                            &entry.name,
                            keep,
                        ));
                    }
                }
                offset += len;
                done += len as u64;
                report.chunks += 1;
            }
            entry_sums[index] = sum;
            shadows.push(host);
        }
        drop(chunks_tx);
        if let Some(checker) = checker {
            entry_sums = checker
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e))
                .map_err(|err| {
                    let err = abort_on_local_failure(comm, err);
                    interrupted("receiver", err, done, report.bytes, "", keep)
                })?;
        }
        for (entry, sum) in entries.iter().zip(&entry_sums) {
            if finalize(*sum, entry.nbytes) != entry.checksum {
                bad.push(entry.name.clone());
            }
        }
        let verdict = bad.join("\0");
        let send_verdict = || -> Result<()> {
            comm.send_host(&(verdict.len() as u64).to_le_bytes(), donor)?;
            if !verdict.is_empty() {
                comm.send_host(verdict.as_bytes(), donor)?;
            }
            Ok(())
        };
        send_verdict().map_err(|err| interrupted("receiver", err, done, report.bytes, "", keep))?;
        if !bad.is_empty() {
            return Err(Error::Checksum {
                message: format!(
                    "checksum mismatch in buffer(s) {} received from rank {donor} (mr-sum64 of the arrived \
                     bytes differs from the donor's); {keep}",
                    quoted(&bad)
                ),
                buffers: bad,
            });
        }
        Ok(shadows)
    })?;
    // Commit: every buffer arrived and matched.
    let dest_of = |entry: &Entry| {
        leaves
            .iter()
            .find(|(n, _)| *n == entry.name)
            .and_then(|(_, l)| l.buffer())
            .expect("matched against the manifest")
    };
    match &device_shadow {
        // In pieces; on the CPU build a helper thread returns each committed piece of the shadow
        // to the system while the next is copied (freeing the memory costs about as much as
        // copying it, and would otherwise follow it).
        Some(shadow) => std::thread::scope(|scope| -> Result<()> {
            let (done_tx, done_rx) = std::sync::mpsc::channel::<(usize, usize)>();
            if PREFAULT_USEFUL {
                scope.spawn(move || {
                    for (offset, len) in done_rx {
                        if !shadow.release(offset, len) {
                            break;
                        }
                    }
                });
            }
            for (index, entry) in entries.iter().enumerate() {
                let dest = dest_of(entry);
                let mut offset = 0;
                while offset < entry.nbytes {
                    let len = COMMIT_PIECE.min(entry.nbytes - offset);
                    dest.copy_from(offset, shadow, places[index] + offset, len)?;
                    let _ = done_tx.send((places[index] + offset, len));
                    offset += len;
                }
            }
            Ok(())
        })?,
        // No shadow: every chunk is already where it belongs.
        None if direct.is_some() => {}
        None => {
            for (entry, host) in entries.iter().zip(&outcome) {
                dest_of(entry).write(0, host)?;
            }
        }
    }
    Ok(())
}

/// Sets the flag when dropped (however the scope that holds it is left).
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::unique_id;
    use std::thread;

    fn tensor(name: &str, dtype: &str, shape: &[i64], nbytes: usize) -> Entry {
        Entry {
            name: name.into(),
            tensor: true,
            dtype: dtype.into(),
            shape: shape.to_vec(),
            nbytes,
            checksum: 7,
            value: Vec::new(),
        }
    }

    #[test]
    fn manifest_round_trip_and_mismatches() {
        let step = Entry {
            name: "opt.step".into(),
            tensor: false,
            dtype: String::new(),
            shape: Vec::new(),
            nbytes: 0,
            checksum: 0,
            value: b"5".to_vec(),
        };
        let entries = vec![
            tensor("w", "float32", &[2, 5], 40),
            tensor("é", "uint8", &[0], 0),
            step.clone(),
        ];
        assert_eq!(decode(&encode(&entries)), Some(entries.clone()));
        assert_eq!(decode(b"garbage"), None);
        let mut same = entries.clone();
        same[2].value = b"0".to_vec(); // values differ in content only: fine
        assert!(mismatches(&entries, &same).is_empty());
        let other = vec![
            tensor("w", "float16", &[2, 5], 20),
            tensor("x", "uint8", &[1], 1),
            step,
        ];
        let problems = mismatches(&entries, &other);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(
            problems[0].contains("\"w\"") && problems[0].contains("float16"),
            "{problems:?}"
        );
        assert!(summary(&problems).starts_with("leaf \"w\""));
        // The same first difference seen from the other side.
        assert!(mismatches(&other, &entries)[0].contains("\"w\""));
    }

    /// Two threads: the donor's state moves in many chunks; with `abort_at`, the donor aborts after
    /// that many chunks and the receiver keeps its state.
    fn run(
        abort_at: Option<usize>,
        shadow: Shadow,
    ) -> (Result<Report>, Result<Report>, Vec<u8>, Vec<u8>) {
        run_sized(&[1000, 37, 0, 4096], 64, abort_at, shadow)
    }

    fn run_sized(
        sizes: &[usize],
        staging: usize,
        abort_at: Option<usize>,
        shadow: Shadow,
    ) -> (Result<Report>, Result<Report>, Vec<u8>, Vec<u8>) {
        let id = unique_id().unwrap();
        let sizes = sizes.to_vec();
        let handles: Vec<_> = (0..2)
            .map(|rank| {
                let sizes = sizes.clone();
                thread::spawn(move || {
                    let comm = Communicator::new(&id, 2, rank, None).unwrap();
                    let fill = if rank == 0 { 0xAB } else { 0x11 };
                    let bufs: Vec<(String, Buffer)> = sizes
                        .iter()
                        .enumerate()
                        .map(|(i, &n)| {
                            let b = Buffer::new(n, None).unwrap();
                            b.fill(fill + i as u8).unwrap();
                            (format!("b{i}"), b)
                        })
                        .collect();
                    let refs: Vec<(String, Leaf<'_>)> = bufs
                        .iter()
                        .map(|(n, b)| {
                            let leaf = Leaf::Tensor {
                                buffer: b,
                                dtype: "uint8".into(),
                                shape: vec![b.nbytes() as i64],
                            };
                            (n.clone(), leaf)
                        })
                        .collect();
                    let mut chunks = 0;
                    let mut progress = |_: &str, _: usize, _: usize| {
                        chunks += 1;
                        if rank == 0 && Some(chunks) == abort_at {
                            comm.abort()?;
                        }
                        Ok(())
                    };
                    let outcome =
                        transfer_state(&comm, &refs, 0, 1, staging, shadow, &mut progress);
                    let mut all = Vec::new();
                    for (_, b) in &bufs {
                        let mut out = vec![0u8; b.nbytes()];
                        b.read(0, &mut out).unwrap();
                        all.extend(out);
                    }
                    (outcome, all)
                })
            })
            .collect();
        let mut out: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let (r1, after1) = out.pop().unwrap();
        let (r0, after0) = out.pop().unwrap();
        (r0, r1, after0, after1)
    }

    #[test]
    fn state_moves_in_chunks() {
        for shadow in [Shadow::Host, Shadow::Device] {
            let (r0, r1, after0, after1) = run(None, shadow);
            let (r0, r1) = (r0.unwrap(), r1.unwrap());
            assert_eq!(after0, after1);
            assert_eq!(
                r1.shadow,
                if shadow == Shadow::Host {
                    "host"
                } else {
                    "device"
                }
            );
            assert_eq!(r0.chunks, r1.chunks);
        }
        let (r0, r1, after0, after1) = run(None, Shadow::Auto);
        let (r0, r1) = (r0.unwrap(), r1.unwrap());
        assert_eq!(after0, after1);
        assert_eq!(r0.chunks, 16 + 1 + 64);
        assert_eq!((r0.role, r1.role), ("donor", "receiver"));
        assert_eq!(r0.checksums, r1.checksums);
    }

    #[test]
    fn no_shadow_receives_straight_into_the_targets() {
        let (r0, r1, after0, after1) = run(None, Shadow::None);
        let (r0, r1) = (r0.unwrap(), r1.unwrap());
        assert_eq!(after0, after1);
        assert_eq!(r1.shadow, "none");
        assert_eq!(r0.checksums, r1.checksums);
        // Interrupted: both sides fail (the targets may hold part of the data: no guarantee here).
        let (r0, r1, _, _) = run(Some(5), Shadow::None);
        assert!(matches!(r1, Err(Error::TransferAborted { .. })), "{r1:?}");
        assert!(matches!(r0, Err(Error::TransferAborted { .. })), "{r0:?}");
    }

    #[test]
    fn abort_mid_transfer_keeps_the_receivers_state() {
        for shadow in [Shadow::Host, Shadow::Device] {
            abort_mid_transfer(shadow);
        }
    }

    fn abort_mid_transfer(shadow: Shadow) {
        let (r0, r1, _, after1) = run(Some(5), shadow);
        assert!(matches!(r1, Err(Error::TransferAborted { .. })), "{r1:?}");
        assert!(matches!(r0, Err(Error::TransferAborted { .. })), "{r0:?}");
        let sizes = [1000usize, 37, 0, 4096];
        let expected: Vec<u8> = sizes
            .iter()
            .enumerate()
            .flat_map(|(i, &n)| vec![0x11 + i as u8; n])
            .collect();
        assert_eq!(after1, expected);
    }

    #[test]
    fn large_state_through_a_prefaulted_shadow() {
        // Above the size the CPU build maps on its own (the shadow is then prefaulted by a helper
        // thread, with huge pages where they are cheaper), odd sizes, one shadow for all.
        let sizes = [(20 << 20) + 3, 0, (17 << 20) + 5, 1 << 20];
        for shadow in [Shadow::Auto, Shadow::Device, Shadow::Host] {
            let (r0, r1, after0, after1) = run_sized(&sizes, 4 << 20, None, shadow);
            let (r0, r1) = (r0.unwrap(), r1.unwrap());
            assert!(after0 == after1, "{shadow:?}: the receiver's state differs");
            assert_eq!(r0.checksums, r1.checksums);
            assert_eq!(r1.chunks, 6 + 5 + 1);
        }
        // Interrupted part-way: the prefault thread stops, the receiver's state is untouched.
        let (r0, r1, _, after1) = run_sized(&sizes, 4 << 20, Some(4), Shadow::Auto);
        assert!(matches!(r1, Err(Error::TransferAborted { .. })), "{r1:?}");
        assert!(matches!(r0, Err(Error::TransferAborted { .. })), "{r0:?}");
        let expected: Vec<u8> = sizes
            .iter()
            .enumerate()
            .flat_map(|(i, &n)| vec![0x11 + i as u8; n])
            .collect();
        assert!(after1 == expected, "the receiver's state changed");
    }
}
