//! Ranks as threads of this process, on both transports: the in-process communicator, and loopback
//! TCP forced between threads (`Options::force_tcp`). The same scenarios must behave the same.
use std::thread;
use std::time::Duration;

use host_collectives::{
    Batch, Communicator, DataType, FailureKind, Options, ReduceOp, Transport, UniqueId,
};

fn options(tcp: bool) -> Options {
    Options {
        timeout: Duration::from_secs(30),
        force_tcp: tcp,
    }
}

/// Runs `body` as each of `n` ranks, one thread each; their results by rank.
fn ranks<T: Send>(tcp: bool, n: usize, body: impl Fn(Communicator) -> T + Sync) -> Vec<T> {
    let id = UniqueId::generate();
    let body = &body;
    thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|r| {
                s.spawn(move || {
                    let comm = Communicator::join(&id, n, r, &options(tcp)).unwrap();
                    let want = if tcp {
                        Transport::Tcp
                    } else {
                        Transport::Threads
                    };
                    assert_eq!(comm.transport(), want);
                    body(comm)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn f32s(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn all_reduce_sum_max_min_avg() {
    for tcp in [false, true] {
        let out = ranks(tcp, 3, |comm| {
            let r = comm.rank() as f32;
            let send = f32s(&[r + 1.0, -r]);
            let mut got = vec![];
            for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg] {
                let mut recv = vec![0u8; 8];
                comm.all_reduce(&send, &mut recv, DataType::F32, op)
                    .unwrap();
                let value =
                    |i: usize| f32::from_le_bytes(recv[4 * i..4 * i + 4].try_into().unwrap());
                got.push([value(0), value(1)]);
            }
            let mut ints = (comm.rank() as i32 * 10 + 1).to_le_bytes();
            comm.all_reduce_in_place(&mut ints, DataType::I32, ReduceOp::Avg)
                .unwrap();
            (got, i32::from_le_bytes(ints))
        });
        for (got, avg) in out {
            // (The max of 0, -1, -2 is -0.0 here: rank 0 sends -0.0; it equals 0.0.)
            assert_eq!(
                got,
                [[6.0, -3.0], [3.0, 0.0], [1.0, -2.0], [2.0, -1.0]],
                "tcp={tcp}"
            );
            assert_eq!(avg, 11, "(1 + 11 + 21) / 3"); // integer averages truncate
        }
    }
}

#[test]
fn broadcast_and_a_batched_exchange_both_ways() {
    for tcp in [false, true] {
        let out = ranks(tcp, 2, |comm| {
            let r = comm.rank();
            let mut data = if r == 0 { *b"hello" } else { [0u8; 5] };
            comm.broadcast_in_place(&mut data, DataType::I8, 0).unwrap();
            // Each rank sends before it receives: a batch completes both together.
            let mine = [r as u8; 3];
            let mut theirs = [9u8; 3];
            let mut batch = Batch::new();
            batch.send(&comm, &mine, 1 - r).unwrap();
            batch.recv(&comm, &mut theirs, 1 - r).unwrap();
            batch.finish().unwrap();
            (data, theirs)
        });
        assert_eq!(out[0], (*b"hello", [1, 1, 1]), "tcp={tcp}");
        assert_eq!(out[1], (*b"hello", [0, 0, 0]), "tcp={tcp}");
    }
}

#[test]
fn abort_wakes_a_blocked_peer() {
    for tcp in [false, true] {
        let out = ranks(tcp, 2, |comm| {
            if comm.rank() == 0 {
                thread::sleep(Duration::from_millis(50));
                comm.abort();
                comm.abort(); // idempotent
                None
            } else {
                let err = comm.recv(&mut [0u8; 4], 0).unwrap_err();
                Some((err.kind, comm.remote_failure().map(|f| f.kind)))
            }
        });
        assert_eq!(
            out[1],
            Some((FailureKind::RemoteError, Some(FailureKind::RemoteError))),
            "tcp={tcp}"
        );
    }
}

#[test]
fn sending_to_oneself_works_between_threads_only() {
    for tcp in [false, true] {
        let out = ranks(tcp, 1, |comm| {
            let mut got = [0u8; 2];
            let mut batch = Batch::new();
            let sent = batch.send(&comm, b"me", 0);
            let received = batch.recv(&comm, &mut got, 0);
            let finished = batch.finish();
            (
                sent.map_err(|f| f.kind),
                received.is_ok(),
                finished.is_ok(),
                got,
            )
        });
        if tcp {
            assert_eq!(out[0].0, Err(FailureKind::InvalidUsage));
        } else {
            assert_eq!(out[0], (Ok(()), true, true, *b"me"));
        }
    }
}

#[test]
fn arguments_that_do_not_fit_are_refused() {
    let id = UniqueId::generate();
    let err = Communicator::join(&id, 2, 2, &options(false)).unwrap_err();
    assert_eq!(err.kind, FailureKind::InvalidArgument, "{err}");
    let comm = Communicator::join(&id, 1, 0, &options(false)).unwrap();
    let err = comm
        .all_reduce(&[0; 4], &mut [0; 8], DataType::F32, ReduceOp::Sum)
        .unwrap_err();
    assert_eq!(err.kind, FailureKind::InvalidArgument, "{err}");
    let err = comm
        .all_reduce_in_place(&mut [0; 6], DataType::F32, ReduceOp::Sum)
        .unwrap_err();
    assert!(err.message.contains("not a whole number of F32"), "{err}");
    let err = comm.send(b"x", 1).unwrap_err();
    assert_eq!(err.kind, FailureKind::InvalidArgument, "{err}");
    comm.destroy();
    let err = comm.barrier().unwrap_err();
    assert_eq!(err.kind, FailureKind::InvalidUsage, "{err}");
    assert!(err.message.contains("destroyed"), "{err}");
}
