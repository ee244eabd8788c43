//! Ranks as processes. Each test re-executes this test binary once per rank, filtered to that one
//! test (`<name> --exact`), with the rank's role in `HOST_COLLECTIVES_ROLE`; the test function sees
//! the role and runs the rank's side. Without a role it is the supervisor: it makes the unique id
//! (its process hosts the rendezvous), starts the ranks, kills them past a deadline and fails with
//! their output unless every rank exits cleanly. Each rank runs alone in its process, so counting
//! its threads and descriptors (`/proc/self/task`, `/proc/self/fd`) sees nothing else.
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use host_collectives::{
    bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, Batch, Communicator, DataType, FailureKind,
    Options, ReduceOp, Transport, UniqueId, UNIQUE_ID_BYTES,
};

const ROLE: &str = "HOST_COLLECTIVES_ROLE";
/// How long a test's ranks may take, all together (debug builds on 2 busy cores).
const DEADLINE: Duration = Duration::from_secs(90);
/// The line a rank prints when the supervisor may act on it (kill it).
const READY: &str = "HOST_COLLECTIVES_READY";

/// What a rank process is told.
struct Role {
    rank: usize,
    nranks: usize,
    id: UniqueId,
}

impl Role {
    fn join(&self) -> Communicator {
        Communicator::join(&self.id, self.nranks, self.rank, &options(30.0))
            .unwrap_or_else(|f| panic!("rank {} could not join: {f}", self.rank))
    }
}

fn options(timeout_s: f64) -> Options {
    Options {
        timeout: Duration::from_secs_f64(timeout_s),
        force_tcp: false,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> UniqueId {
    let mut bytes = [0u8; UNIQUE_ID_BYTES];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex id");
    }
    UniqueId::from_bytes(bytes)
}

/// This process's role in `test`, if it is one of that test's ranks.
fn role(test: &str) -> Option<Role> {
    let value = std::env::var(ROLE).ok()?;
    let mut fields = value.split(':');
    if fields.next()? != test {
        return None;
    }
    let rank = fields.next()?.parse().ok()?;
    let nranks = fields.next()?.parse().ok()?;
    let id = unhex(fields.next()?);
    Some(Role { rank, nranks, id })
}

/// A rank process and its output (stdout lines also come through `lines`, as they arrive).
struct RankProcess {
    child: Child,
    lines: Receiver<String>,
    readers: Vec<JoinHandle<String>>,
}

impl RankProcess {
    fn start(
        test: &str,
        rank: usize,
        nranks: usize,
        id: &UniqueId,
        env: &[(&str, String)],
    ) -> Self {
        let exe = std::env::current_exe().expect("the test binary");
        let mut command = Command::new(exe);
        command
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(
                ROLE,
                format!("{test}:{rank}:{nranks}:{}", hex(id.as_bytes())),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("start a rank process");
        let (tx, lines) = channel();
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let out = thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                all.push_str(&line);
                all.push('\n');
                let _ = tx.send(line);
            }
            all
        });
        let err = thread::spawn(move || {
            let mut all = String::new();
            let _ = stderr.read_to_string(&mut all);
            all
        });
        RankProcess {
            child,
            lines,
            readers: vec![out, err],
        }
    }

    /// Waits for the line `READY` (bounded by the deadline).
    fn wait_ready(&self, deadline: Instant) {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                // libtest may have started the line (`test name ... `).
                Ok(line) if line.ends_with(READY) => return,
                Ok(_) => {}
                Err(e) => panic!("the rank never printed {READY}: {e}"),
            }
        }
    }
}

/// Waits for every rank (killing all of them past `deadline`); their exit statuses and output.
fn wait_all(ranks: Vec<RankProcess>, deadline: Instant) -> Vec<(ExitStatus, String)> {
    let mut ranks = ranks;
    let mut statuses: Vec<Option<ExitStatus>> = ranks.iter().map(|_| None).collect();
    let mut overrun = false;
    while statuses.iter().any(Option::is_none) {
        for (r, p) in ranks.iter_mut().enumerate() {
            if statuses[r].is_none() {
                statuses[r] = p.child.try_wait().expect("wait for a rank");
            }
        }
        if Instant::now() >= deadline {
            overrun = true;
            for (r, p) in ranks.iter_mut().enumerate() {
                if statuses[r].is_none() {
                    let _ = p.child.kill();
                    statuses[r] = p.child.wait().ok();
                }
            }
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    let results: Vec<(ExitStatus, String)> = ranks
        .into_iter()
        .zip(statuses)
        .map(|(p, status)| {
            let output: Vec<String> = p
                .readers
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect();
            (
                status.expect("an exit status"),
                output.join("\n--- stderr ---\n"),
            )
        })
        .collect();
    assert!(
        !overrun,
        "ranks still running after {DEADLINE:?}:\n{}",
        report(&results)
    );
    results
}

fn report(results: &[(ExitStatus, String)]) -> String {
    results
        .iter()
        .enumerate()
        .map(|(r, (status, output))| format!("=== rank {r}: {status} ===\n{output}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `body` as every rank of `test` (`nranks` processes) and checks that they all succeed; in
/// a rank process, runs that rank's `body`.
fn ranks(test: &str, nranks: usize, body: fn(Role)) {
    ranks_with(test, nranks, UniqueId::generate, &[], body, wait_all);
}

/// `ranks` with an id maker, extra environment and a supervisor of its own (which returns every
/// rank's status and output); fails with every rank's output unless each rank succeeded. Returns
/// the statuses and outputs (none in a rank process).
fn ranks_with(
    test: &str,
    nranks: usize,
    make_id: fn() -> UniqueId,
    env: &[(&str, String)],
    body: fn(Role),
    supervise: impl FnOnce(Vec<RankProcess>, Instant) -> Vec<(ExitStatus, String)>,
) -> Vec<(ExitStatus, String)> {
    ranks_killing(test, nranks, make_id, env, body, None, supervise)
}

/// `ranks_with` whose supervisor kills rank `killed`: that one must end by a signal instead.
fn ranks_killing(
    test: &str,
    nranks: usize,
    make_id: fn() -> UniqueId,
    env: &[(&str, String)],
    body: fn(Role),
    killed: Option<usize>,
    supervise: impl FnOnce(Vec<RankProcess>, Instant) -> Vec<(ExitStatus, String)>,
) -> Vec<(ExitStatus, String)> {
    if let Some(role) = role(test) {
        body(role);
        return Vec::new();
    }
    let id = make_id();
    let deadline = Instant::now() + DEADLINE;
    let procs = (0..nranks)
        .map(|r| RankProcess::start(test, r, nranks, &id, env))
        .collect();
    let results = supervise(procs, deadline);
    for (r, (status, _)) in results.iter().enumerate() {
        let ok = if killed == Some(r) {
            status.code().is_none() // killed by a signal, not a failed assertion (101)
        } else {
            status.success()
        };
        assert!(ok, "rank {r} of {test} failed:\n{}", report(&results));
    }
    results
}

/// Ids for more communicators of one test, from the supervisor (`HOST_COLLECTIVES_MORE_IDS`).
fn more_ids(n: usize) -> (&'static str, String) {
    let ids: Vec<String> = (0..n)
        .map(|_| hex(UniqueId::generate().as_bytes()))
        .collect();
    ("HOST_COLLECTIVES_MORE_IDS", ids.join(","))
}

fn read_more_ids() -> Vec<UniqueId> {
    std::env::var("HOST_COLLECTIVES_MORE_IDS")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(unhex)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// What the ranks check.

fn count_dir(path: &str) -> usize {
    std::fs::read_dir(path).map_or(0, |d| d.count())
}

/// This process's threads and open descriptors.
fn resources() -> (usize, usize) {
    (count_dir("/proc/self/task"), count_dir("/proc/self/fd"))
}

/// Rank `rank`'s value of element `i` (small integers, exact in every type; signed types and
/// floats alternate signs).
fn value(rank: usize, i: usize, signed: bool) -> i64 {
    let magnitude = ((i % 5) as i64 + 1) * (rank as i64 + 1) + rank as i64;
    if signed && i % 2 == 1 {
        -magnitude
    } else {
        magnitude
    }
}

fn is_signed(datatype: DataType) -> bool {
    !matches!(datatype, DataType::U8 | DataType::U32 | DataType::U64)
}

fn encode(datatype: DataType, values: &[f64]) -> Vec<u8> {
    let mut out = Vec::new();
    for &v in values {
        match datatype {
            DataType::I8 => out.extend_from_slice(&(v as i8).to_le_bytes()),
            DataType::U8 => out.extend_from_slice(&(v as u8).to_le_bytes()),
            DataType::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
            DataType::U32 => out.extend_from_slice(&(v as u32).to_le_bytes()),
            DataType::I64 => out.extend_from_slice(&(v as i64).to_le_bytes()),
            DataType::U64 => out.extend_from_slice(&(v as u64).to_le_bytes()),
            DataType::F16 => out.extend_from_slice(&f32_to_f16(v as f32).to_le_bytes()),
            DataType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            DataType::F64 => out.extend_from_slice(&v.to_le_bytes()),
            DataType::BF16 => out.extend_from_slice(&f32_to_bf16(v as f32).to_le_bytes()),
        }
    }
    out
}

fn decode(datatype: DataType, bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(datatype.size())
        .map(|c| match datatype {
            DataType::I8 => c[0] as i8 as f64,
            DataType::U8 => c[0] as f64,
            DataType::I32 => i32::from_le_bytes(c.try_into().unwrap()) as f64,
            DataType::U32 => u32::from_le_bytes(c.try_into().unwrap()) as f64,
            DataType::I64 => i64::from_le_bytes(c.try_into().unwrap()) as f64,
            DataType::U64 => u64::from_le_bytes(c.try_into().unwrap()) as f64,
            DataType::F16 => f16_to_f32(u16::from_le_bytes(c.try_into().unwrap())) as f64,
            DataType::F32 => f32::from_le_bytes(c.try_into().unwrap()) as f64,
            DataType::F64 => f64::from_le_bytes(c.try_into().unwrap()),
            DataType::BF16 => bf16_to_f32(u16::from_le_bytes(c.try_into().unwrap())) as f64,
        })
        .collect()
}

/// What an all-reduce of `value(r, i)` over `nranks` ranks gives, computed here element by element
/// in i64 (integers wrap to their type as the reduction does) or f64 (rounded once, as documented).
fn expected(datatype: DataType, op: ReduceOp, nranks: usize, count: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..count {
        let vals: Vec<i64> = (0..nranks)
            .map(|r| value(r, i, is_signed(datatype)))
            .collect();
        let sum: i64 = vals.iter().sum();
        let exact = match op {
            ReduceOp::Sum => sum,
            ReduceOp::Prod => vals.iter().product(),
            ReduceOp::Max => *vals.iter().max().unwrap(),
            ReduceOp::Min => *vals.iter().min().unwrap(),
            // Integer averages truncate toward zero.
            ReduceOp::Avg => sum / nranks as i64,
        };
        let v = exact;
        match datatype {
            DataType::I8 => out.extend_from_slice(&(v as i8).to_le_bytes()),
            DataType::U8 => out.extend_from_slice(&(v as u8).to_le_bytes()),
            DataType::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
            DataType::U32 => out.extend_from_slice(&(v as u32).to_le_bytes()),
            DataType::I64 => out.extend_from_slice(&v.to_le_bytes()),
            DataType::U64 => out.extend_from_slice(&(v as u64).to_le_bytes()),
            _ => {
                let real = if op == ReduceOp::Avg {
                    sum as f64 / nranks as f64
                } else {
                    exact as f64
                };
                out.extend_from_slice(&encode(datatype, &[real]));
            }
        }
    }
    out
}

/// A message of `len` bytes that differs with its size and direction.
fn pattern(len: usize, from: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(31) ^ (len * 7) ^ (from * 101)) as u8)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The tests.

#[test]
fn three_processes_all_reduce_every_op_and_dtype_in_and_out_of_place() {
    ranks(
        "three_processes_all_reduce_every_op_and_dtype_in_and_out_of_place",
        3,
        |role| {
            let comm = role.join();
            assert_eq!(comm.transport(), Transport::Tcp);
            assert_eq!((comm.rank(), comm.nranks()), (role.rank, 3));
            let count = 7; // odd, and past one element of every width
            for datatype in DataType::ALL {
                for op in ReduceOp::ALL {
                    let mine: Vec<f64> = (0..count)
                        .map(|i| value(role.rank, i, is_signed(datatype)) as f64)
                        .collect();
                    let send = encode(datatype, &mine);
                    let want = expected(datatype, op, 3, count);
                    let mut recv = vec![0xAAu8; send.len()];
                    comm.all_reduce(&send, &mut recv, datatype, op)
                        .unwrap_or_else(|f| panic!("{datatype:?} {op:?}: {f}"));
                    assert_eq!(recv, want, "{datatype:?} {op:?}");
                    let mut buf = send.clone();
                    comm.all_reduce_in_place(&mut buf, datatype, op).unwrap();
                    assert_eq!(buf, recv, "in place, {datatype:?} {op:?}");
                }
            }
            // Nothing at all is a valid all-reduce too.
            comm.all_reduce(&[], &mut [], DataType::F32, ReduceOp::Sum)
                .unwrap();
        },
    );
}

#[test]
fn broadcast_from_every_root_in_and_out_of_place() {
    ranks("broadcast_from_every_root_in_and_out_of_place", 2, |role| {
        let comm = role.join();
        for root in 0..2 {
            let source = pattern(1001, root);
            let send = if role.rank == root {
                source.clone()
            } else {
                Vec::new()
            };
            let mut recv = vec![0u8; 1001];
            comm.broadcast(&send, &mut recv, DataType::U8, root)
                .unwrap();
            assert_eq!(recv, source);
            let mut buf = if role.rank == root {
                encode(DataType::F32, &[1.5, -2.0, 3.25])
            } else {
                vec![0; 12]
            };
            comm.broadcast_in_place(&mut buf, DataType::F32, root)
                .unwrap();
            assert_eq!(decode(DataType::F32, &buf), [1.5, -2.0, 3.25]);
        }
        let err = comm
            .broadcast_in_place(&mut [0; 4], DataType::U8, 2)
            .unwrap_err();
        assert_eq!(err.kind, FailureKind::InvalidArgument, "{err}");
    });
}

#[test]
fn send_recv_large_and_odd_sizes_both_ways() {
    ranks("send_recv_large_and_odd_sizes_both_ways", 2, |role| {
        let comm = role.join();
        let (me, peer) = (role.rank, 1 - role.rank);
        // Around the size from which a receive reads in place, and past a socket buffer.
        let sizes = [0, 1, 7, 4097, (1 << 20) - 1, 1 << 20, (8 << 20) + 5];
        for &len in &sizes {
            for from in 0..2 {
                if me == from {
                    comm.send(&pattern(len, from), peer).unwrap();
                } else {
                    let mut buf = vec![0u8; len];
                    comm.recv(&mut buf, peer).unwrap();
                    assert!(
                        buf == pattern(len, from),
                        "{len} bytes from rank {from} differ"
                    );
                }
            }
        }
        // Both ranks send before receiving: only a batch (NCCL's group) makes this safe.
        let len = (3 << 20) + 1;
        let mine = pattern(len, me);
        let mut theirs = vec![0u8; len];
        let mut batch = Batch::new();
        batch.send(&comm, &mine, peer).unwrap();
        batch.recv(&comm, &mut theirs, peer).unwrap();
        batch.finish().unwrap();
        assert!(theirs == pattern(len, peer));
    });
}

#[test]
fn barrier_waits_for_every_rank() {
    let marker =
        std::env::temp_dir().join(format!("host-collectives-barrier-{}", std::process::id()));
    let env = [("HOST_COLLECTIVES_MARKER", marker.display().to_string())];
    let _ = std::fs::remove_file(&marker);
    ranks_with(
        "barrier_waits_for_every_rank",
        2,
        UniqueId::generate,
        &env,
        |role| {
            let marker = std::env::var("HOST_COLLECTIVES_MARKER").unwrap();
            let comm = role.join();
            if role.rank == 1 {
                // Late, so that a barrier that did not wait would let rank 0 look too early.
                thread::sleep(Duration::from_millis(300));
                std::fs::write(&marker, b"here").unwrap();
            }
            comm.barrier().unwrap();
            if role.rank == 0 {
                assert!(
                    std::path::Path::new(&marker).exists(),
                    "rank 0 left the barrier first"
                );
            }
            comm.barrier().unwrap();
        },
        wait_all,
    );
    let _ = std::fs::remove_file(&marker);
}

#[test]
fn destroy_leaves_no_thread_or_socket_behind() {
    let test = "destroy_leaves_no_thread_or_socket_behind";
    let env = if role(test).is_some() {
        Vec::new()
    } else {
        vec![more_ids(2)]
    };
    ranks_with(
        test,
        2,
        UniqueId::generate,
        &env,
        |role| {
            let before = resources();
            let ids: Vec<UniqueId> = std::iter::once(role.id).chain(read_more_ids()).collect();
            assert_eq!(ids.len(), 3);
            for (round, id) in ids.iter().enumerate() {
                let comm = Communicator::join(id, 2, role.rank, &options(30.0)).unwrap();
                // Before the barrier the peer cannot have left yet (its reader here is alive).
                let during = resources();
                assert!(
                    during.0 > before.0 && during.1 > before.1,
                    "{before:?} {during:?}"
                );
                comm.barrier().unwrap();
                let peer = 1 - role.rank;
                let mut buf = [0u8; 3];
                let mut batch = Batch::new();
                batch.send(&comm, &[role.rank as u8; 3], peer).unwrap();
                batch.recv(&comm, &mut buf, peer).unwrap();
                batch.finish().unwrap();
                assert_eq!(buf, [peer as u8; 3]);
                // Destroying and aborting both release everything.
                if round == 1 {
                    comm.abort();
                } else {
                    comm.destroy();
                }
                drop(comm);
                assert_eq!(resources(), before, "round {round}: (threads, descriptors)");
            }
        },
        wait_all,
    );
}

/// Rank 1 prints READY and waits to be killed; rank 0 gets a clear failure naming it, not a hang.
fn killed_peer(test: &str) {
    let results = ranks_killing(
        test,
        2,
        UniqueId::generate,
        &[("HOST_COLLECTIVES_TEST", test.to_string())],
        |role| {
            let before = resources();
            let comm = role.join();
            comm.barrier().unwrap();
            if role.rank == 1 {
                println!("{READY}");
                // Killed long before this ends; the sleep is bounded so nothing can hang.
                thread::sleep(Duration::from_secs(60));
                panic!("rank 1 was not killed");
            }
            let test = std::env::var("HOST_COLLECTIVES_TEST").unwrap();
            let survivor = SURVIVORS.iter().find(|(name, _)| *name == test).unwrap().1;
            let err = survivor(&comm).expect_err("an operation with a dead peer");
            assert_eq!(err.kind, FailureKind::RemoteError, "{err}");
            assert!(
                err.message.contains("rank 1 (pid") && err.message.contains("died or was killed"),
                "{err}"
            );
            let later = comm
                .remote_failure()
                .expect("the failure, asynchronously too");
            assert_eq!(later.kind, FailureKind::RemoteError);
            let err = comm.send(&[1, 2, 3], 1).unwrap_err();
            assert_eq!(err.kind, FailureKind::RemoteError, "{err}");
            drop(comm);
            assert_eq!(
                resources(),
                before,
                "(threads, descriptors) after the peer died"
            );
        },
        Some(1),
        |mut procs, deadline| {
            procs[1].wait_ready(deadline);
            // Give rank 0 time to block in its operation (it fails the same way if it is late).
            thread::sleep(Duration::from_millis(200));
            procs[1].child.kill().expect("kill rank 1");
            wait_all(procs, deadline)
        },
    );
    assert!(results.is_empty() || results[0].0.success());
}

type Survivor = fn(&Communicator) -> host_collectives::Result<()>;

/// What rank 0 is doing when rank 1 is killed, by test.
const SURVIVORS: [(&str, Survivor); 3] = [
    ("a_peer_killed_mid_recv_fails_the_receive", |comm| {
        comm.recv(&mut [0u8; 16], 1)
    }),
    ("a_peer_killed_mid_all_reduce_fails_it", |comm| {
        comm.all_reduce_in_place(&mut [0u8; 64], DataType::F32, ReduceOp::Sum)
    }),
    ("a_peer_killed_mid_send_fails_the_send", |comm| {
        // 64 MiB: rank 1's reader is still taking it in, or it sits in rank 1's queue for a
        // receive that never comes, when rank 1 dies; either way no receipt will come.
        comm.send(&vec![7u8; 64 << 20], 1)
    }),
];

#[test]
fn a_peer_killed_mid_recv_fails_the_receive() {
    killed_peer("a_peer_killed_mid_recv_fails_the_receive");
}

#[test]
fn a_peer_killed_mid_all_reduce_fails_it() {
    killed_peer("a_peer_killed_mid_all_reduce_fails_it");
}

#[test]
fn a_peer_killed_mid_send_fails_the_send() {
    killed_peer("a_peer_killed_mid_send_fails_the_send");
}

#[test]
fn abort_from_another_thread_frees_both_ranks() {
    ranks("abort_from_another_thread_frees_both_ranks", 2, |role| {
        let before = resources();
        let comm = role.join();
        comm.barrier().unwrap();
        let peer = 1 - role.rank;
        if role.rank == 0 {
            let err = thread::scope(|s| {
                let blocked = s.spawn(|| comm.recv(&mut [0u8; 8], peer));
                thread::sleep(Duration::from_millis(200));
                comm.abort();
                blocked.join().unwrap().unwrap_err()
            });
            assert_eq!(err.kind, FailureKind::InvalidUsage, "{err}");
            assert!(err.message.contains("aborted"), "{err}");
            // A stale handle is an error, not a crash; aborting again changes nothing.
            comm.abort();
            let err = comm.recv(&mut [0u8; 8], peer).unwrap_err();
            assert_eq!(err.kind, FailureKind::InvalidUsage, "{err}");
        } else {
            let err = comm.recv(&mut [0u8; 8], peer).unwrap_err();
            assert_eq!(err.kind, FailureKind::RemoteError, "{err}");
            assert!(
                err.message.contains("rank 0 (pid") && err.message.contains("aborted"),
                "{err}"
            );
            let later = comm
                .remote_failure()
                .expect("the abort, asynchronously too");
            assert_eq!(later.kind, FailureKind::RemoteError);
        }
        drop(comm);
        assert_eq!(
            resources(),
            before,
            "(threads, descriptors) after the abort"
        );
    });
}

#[test]
fn a_rank_that_never_joins_times_the_others_out() {
    // Three ranks, two processes: rank 2 never comes.
    let test = "a_rank_that_never_joins_times_the_others_out";
    ranks_with(
        test,
        2,
        UniqueId::generate,
        &[],
        |role| {
            let started = Instant::now();
            let err = Communicator::join(&role.id, 3, role.rank, &options(0.5)).unwrap_err();
            assert_eq!(err.kind, FailureKind::SystemError, "{err}");
            assert!(
                err.message.contains("ranks [2] of 3") && err.message.contains("0.5 s"),
                "{err}"
            );
            assert!(
                started.elapsed() >= Duration::from_millis(500),
                "gave up early"
            );
        },
        wait_all,
    );
}

#[test]
fn a_different_world_size_is_refused() {
    // Rank 0 asks for 2 ranks, rank 1 for 3. Whichever joins second is refused at once; the first
    // waits for a rank that never comes and times out. Which is which depends on timing, so each
    // rank reports its outcome and the supervisor checks that there is one of each.
    let results = ranks_with(
        "a_different_world_size_is_refused",
        2,
        UniqueId::generate,
        &[],
        |role| {
            let nranks = 2 + role.rank;
            let err = Communicator::join(&role.id, nranks, role.rank, &options(2.0)).unwrap_err();
            match err.kind {
                FailureKind::InvalidArgument => assert!(
                    err.message.contains(&format!(
                        "world size {nranks}, but the ranks already there joined with {}",
                        5 - nranks
                    )),
                    "{err}"
                ),
                FailureKind::SystemError => assert!(
                    err.message.contains(&format!("of {nranks} to join")),
                    "{err}"
                ),
                _ => panic!("{err}"),
            }
            println!("\nOUTCOME {:?}", err.kind);
        },
        wait_all,
    );
    if !results.is_empty() {
        let mut outcomes: Vec<&str> = results
            .iter()
            .filter_map(|(_, out)| out.lines().find_map(|l| l.strip_prefix("OUTCOME ")))
            .collect();
        outcomes.sort_unstable();
        assert_eq!(
            outcomes,
            ["InvalidArgument", "SystemError"],
            "{}",
            report(&results)
        );
    }
}

fn tampered_id() -> UniqueId {
    let mut bytes = *UniqueId::generate().as_bytes();
    bytes[40] ^= 1; // a token the rendezvous did not issue
    UniqueId::from_bytes(bytes)
}

#[test]
fn a_tampered_id_is_refused_in_every_process() {
    ranks_with(
        "a_tampered_id_is_refused_in_every_process",
        2,
        tampered_id,
        &[],
        |role| {
            let err = Communicator::join(&role.id, 2, role.rank, &options(5.0)).unwrap_err();
            assert_eq!(err.kind, FailureKind::InvalidArgument, "{err}");
            assert!(err.message.contains("not issued"), "{err}");
        },
        wait_all,
    );
}

#[test]
fn an_id_makes_one_communicator() {
    ranks("an_id_makes_one_communicator", 2, |role| {
        let comm = role.join();
        comm.barrier().unwrap();
        drop(comm);
        let err = Communicator::join(&role.id, 2, role.rank, &options(5.0)).unwrap_err();
        assert_eq!(err.kind, FailureKind::InvalidArgument, "{err}");
        assert!(err.message.contains("already formed"), "{err}");
    });
}

#[test]
fn a_foreign_id_and_one_whose_maker_exited_are_refused() {
    let test = "a_foreign_id_and_one_whose_maker_exited_are_refused";
    if role(test).is_some() {
        // The maker: prints an id and exits (taking its rendezvous with it).
        println!("ID {}", hex(UniqueId::generate().as_bytes()));
        return;
    }
    let maker = RankProcess::start(test, 0, 1, &UniqueId::generate(), &[]);
    let deadline = Instant::now() + DEADLINE;
    let results = wait_all(vec![maker], deadline);
    assert!(results[0].0.success(), "{}", report(&results));
    let line = results[0]
        .1
        .lines()
        .find_map(|l| l.split_once("ID ").map(|(_, id)| id))
        .expect("the id");
    let err = Communicator::join(&unhex(line), 2, 0, &options(5.0)).unwrap_err();
    assert_eq!(err.kind, FailureKind::SystemError, "{err}");
    assert!(
        err.message.contains("cannot reach the rendezvous") && err.message.contains("has exited"),
        "{err}"
    );
    let err = Communicator::join(
        &UniqueId::from_bytes([0x5a; UNIQUE_ID_BYTES]),
        2,
        0,
        &options(5.0),
    )
    .unwrap_err();
    assert_eq!(err.kind, FailureKind::InvalidArgument, "{err}");
}

#[test]
fn ranks_that_disagree_fail_together_and_carry_on() {
    ranks(
        "ranks_that_disagree_fail_together_and_carry_on",
        2,
        |role| {
            let comm = role.join();
            let op = if role.rank == 0 {
                ReduceOp::Sum
            } else {
                ReduceOp::Max
            };
            let err = comm
                .all_reduce_in_place(&mut [0u8; 8], DataType::I32, op)
                .unwrap_err();
            assert_eq!(err.kind, FailureKind::InvalidUsage, "{err}");
            assert!(err.message.contains("differs between ranks"), "{err}");
            // The next collective matches again.
            comm.barrier().unwrap();
            // A receive shorter than the message fails on the receiver; the sender, waiting for a
            // receipt that never comes, fails once the receiver leaves.
            if role.rank == 0 {
                let err = comm.send(&[1u8; 10], 1).unwrap_err();
                assert_eq!(err.kind, FailureKind::RemoteError, "{err}");
                assert!(err.message.contains("left the communicator"), "{err}");
            } else {
                let err = comm.recv(&mut [0u8; 12], 0).unwrap_err();
                assert_eq!(err.kind, FailureKind::InvalidUsage, "{err}");
                assert!(
                    err.message.contains("receive of 12 bytes") && err.message.contains("sent 10"),
                    "{err}"
                );
                comm.destroy();
            }
        },
    );
}
