//! Collectives on host memory between the ranks of one machine: threads of one process, or
//! processes over loopback TCP. This is the communicator of the CPU build: `rocm_compat`'s `cpu`
//! platform gives it NCCL's names and signatures (`ncclCommInitRank`, `ncclAllReduce`, ...), and
//! nothing here knows about NCCL, CUDA or raw pointers (`unsafe` is forbidden in this crate).
//!
//! ```
//! use host_collectives::{Communicator, DataType, Options, ReduceOp, UniqueId};
//!
//! let id = UniqueId::generate(); // pass `id.as_bytes()` to the other ranks
//! let comm = Communicator::join(&id, 1, 0, &Options::default())?;
//! let mut buf = 3i32.to_le_bytes();
//! comm.all_reduce_in_place(&mut buf, DataType::I32, ReduceOp::Sum)?;
//! assert_eq!(i32::from_le_bytes(buf), 3);
//! # Ok::<(), host_collectives::Failure>(())
//! ```
//!
//! Semantics follow NCCL, strictly enough that code which works here does not deadlock on NCCL:
//!
//! - **Joining** (`Communicator::join`) blocks until every rank has joined, or fails with
//!   `SystemError` after `Options::timeout` (`MONARCH_HOST_COMM_TIMEOUT`, default 120 s) naming the
//!   ranks that never came. A unique id makes one communicator. An id that this crate did not make,
//!   that its rendezvous did not issue (corrupt, or already used), a world size that differs between
//!   ranks, or a rank joining twice: `InvalidArgument`/`InvalidUsage`. An id whose maker process has
//!   exited: `SystemError` at once.
//! - **Transport**: when every rank turns out to be a thread of this process, the in-process
//!   communicator (no sockets); otherwise loopback TCP (`Options::force_tcp` forces it).
//! - **Collectives** are matched by their order on each rank; ranks that disagree about a
//!   collective (count, type, op, root) all get `InvalidUsage`. See `reduce` for what reductions
//!   compute (the same bits on every rank and transport).
//! - **Send** completes when the peer has received (a rendezvous). A `Batch` posts operations and
//!   completes them together, so a batched send+receive pair between two ranks does not deadlock.
//! - Operations complete before they return (the host has no streams).
//! - **Failures**: `abort` wakes every rank blocked on the communicator: peers get `RemoteError`,
//!   the aborting rank's own blocked operations `InvalidUsage`. A peer that destroyed or aborted
//!   its communicator, or whose process died, makes operations waiting on it fail with
//!   `RemoteError` naming the rank (and pid) instead of hanging. No data operation has a timeout of
//!   its own (as in NCCL): a live but hung peer is a watchdog's to abort.
//!
//! Modules, from the bottom up; each uses (`crate::...`) only modules listed before it:
//!
//! 1. `failure`: `Failure`, `FailureKind`, `Result`.
//! 2. `sync`: poison-tolerant locks and waits.
//! 3. `reduce`: `DataType`, `ReduceOp`, the reductions.
//! 4. `signature`: a collective call's `Signature` and how contributions combine.
//! 5. `unique_id`: the 128-byte `UniqueId` and its layout.
//! 6. `options`: `Options` (timeout, transport).
//! 7. `wire`: frames on the loopback sockets.
//! 8. `rendezvous`: the per-process rendezvous server and the join protocol.
//! 9. `local`: communicators whose ranks are threads of this process.
//! 10. `tcp`: communicators across processes.
//! 11. `communicator`: `Communicator`, `Batch`, `Transport` (over `local` and `tcp`).
//!
//! `tests/layers.rs` fails when a module uses one at or below its own place in this list.
#![forbid(unsafe_code)]

mod communicator;
mod failure;
mod local;
mod options;
mod reduce;
mod rendezvous;
mod signature;
mod sync;
mod tcp;
mod unique_id;
mod wire;

pub use communicator::{Batch, Communicator, Transport};
pub use failure::{Failure, FailureKind, Result};
pub use options::{Options, DEFAULT_TIMEOUT_S};
pub use reduce::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, reduce, DataType, ReduceOp};
pub use unique_id::{UniqueId, UNIQUE_ID_BYTES};
