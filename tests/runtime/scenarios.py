"""Runtime scenarios, run inside a venv where a wheel is installed (stdlib + monarch_runtime only).

``python scenarios.py NAME`` runs one; it asserts as it goes and exits non-zero with the traceback
on failure. Ranks are threads (in-process communicators, or the loopback transport between threads
with MONARCH_HOST_COMM_TRANSPORT=tcp; tests/runtime/replicas.py has ranks as processes); every multi-rank
scenario has a watchdog that aborts all communicators if a rank hangs, so a bug fails the test
instead of wedging it.
"""

from __future__ import annotations

import array
import os
import random
import struct
import sys
import threading
from collections.abc import Callable
from typing import Any

import monarch_runtime as m

HANG_S = 60.0
Body = Callable[[int, Any], Any]
#: Where the receiver shadows the incoming state (transfer_state's ``shadow``); the tests run both.
SHADOW = os.environ.get("MR_TEST_SHADOW", "auto")


def transfer(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return m.transfer_state(*args, shadow=SHADOW, **kwargs)


def run_ranks(n: int, body: Body, *, uid: bytes | None = None) -> tuple[list[Any], list[BaseException | None]]:
    """Runs ``body(rank, comm)`` on ``n`` threads sharing a fresh communicator; returns results and errors."""
    uid = uid or m.Communicator.unique_id()
    comms: list[Any] = [None] * n
    results: list[Any] = [None] * n
    errors: list[BaseException | None] = [None] * n

    def worker(rank: int) -> None:
        try:
            comms[rank] = m.Communicator(uid, n, rank)
            results[rank] = body(rank, comms[rank])
        except BaseException as err:  # reported to the caller
            errors[rank] = err

    threads = [threading.Thread(target=worker, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_S)
    if any(t.is_alive() for t in threads):
        for c in comms:
            if c is not None:
                c.abort()
        for t in threads:
            t.join(10)
        raise AssertionError(f"ranks hung; states: results={results} errors={errors}")
    for c in comms:
        if c is not None:
            c.destroy()
    return results, errors


def no_errors(errors: list[BaseException | None]) -> None:
    for rank, err in enumerate(errors):
        if err is not None:
            raise AssertionError(f"rank {rank} failed: {type(err).__name__}: {err}") from err


# --------------------------------------------------------------------------------------------------


def devices_and_build_info() -> None:
    assert m.PLATFORM == "cpu"
    assert m.devices() == []
    assert m.device_count() == 0
    info = m.build_info()
    assert info["platform"] == "cpu" and info["native_platform"] == "cpu"
    # On the CPU build the communicators are the host emulation, not a loaded library.
    assert info["collective_loaded"] is False
    assert "host emulation" in info["collective_error"]
    for name in (
        "MonarchError",
        "NoDeviceError",
        "CollectiveError",
        "CommunicatorAborted",
        "TransferAborted",
        "TransferError",
        "ChecksumMismatch",
    ):
        assert issubclass(getattr(m, name), m.MonarchError), name
    assert issubclass(m.ChecksumMismatch, m.TransferError)
    assert issubclass(m.TransferAborted, m.CollectiveError)


def buffer_copies() -> None:
    b = m.Buffer(16)
    assert b.nbytes == 16 and len(b) == 16 and b.device == 0
    assert b.to_bytes() == bytes(16)  # zero-filled
    b.copy_from(b"abcd", offset=4)
    b.copy_from(bytearray(b"XY"), offset=14)
    assert b.to_bytes() == b"\0" * 4 + b"abcd" + b"\0" * 6 + b"XY"
    out = bytearray(4)
    assert b.copy_to(out, offset=4) is out and out == b"abcd"
    assert b.copy_to(offset=14) == b"XY"
    floats = array.array("f", [1.5, -2.0, 3.25])
    fb = m.Buffer.from_bytes(floats)
    assert fb.nbytes == 12
    back = array.array("f", [0.0, 0.0, 0.0])
    fb.copy_to(back)
    assert back == floats
    mv = memoryview(bytes(range(10)))[2:7]
    assert m.Buffer.from_bytes(mv).to_bytes() == bytes(range(2, 7))
    for bad in (lambda: b.copy_from(b"12345", offset=12), lambda: b.copy_to(bytearray(20)), lambda: m.Buffer(4, 1)):
        try:
            bad()
        except (ValueError, m.MonarchError):
            pass
        else:
            raise AssertionError("out-of-range copy or device accepted")
    b.fill(7)
    assert b.to_bytes() == bytes([7]) * 16
    c = m.Buffer(8)
    c.copy_from_buffer(b, offset=2, src_offset=0, nbytes=4)
    assert c.to_bytes() == bytes([0, 0, 7, 7, 7, 7, 0, 0])
    empty = m.Buffer(0)
    assert empty.to_bytes() == b"" and m.checksum(empty) == m.checksum_reference(b"")
    try:
        import numpy as np  # noqa: PLC0415 - optional
    except ImportError:
        return
    arr = np.arange(6, dtype=np.float32)
    nb = m.Buffer.from_bytes(arr)
    assert (nb.numpy("float32") == arr).all()


def stream_and_event() -> None:
    s = m.Stream()
    start, end = m.Event(), m.Event()
    start.record(s)
    m.Buffer(1 << 16).fill(3)
    end.record(s)
    end.synchronize()
    s.synchronize()
    elapsed = start.elapsed_time(end)
    assert isinstance(elapsed, float) and elapsed >= 0.0
    default = m.Event()
    default.record()
    default.synchronize()


def checksum_random() -> None:
    rng = random.Random(20261129)
    sizes = [0, 1, 7, 8, 9, 15, 16, 63, 64, 65, 4099, (1 << 20) + 3] + [rng.randrange(1, 5000) for _ in range(40)]
    for size in sizes:
        data = rng.randbytes(size)
        ref = m.checksum_reference(data)
        assert m.checksum(data) == ref, size
        buf = m.Buffer.from_bytes(data)
        assert m.checksum(buf) == ref == buf.checksum(), size
        if size:
            flipped = bytearray(data)
            flipped[rng.randrange(size)] ^= 1 << rng.randrange(8)
            assert m.checksum(bytes(flipped)) != ref, size
    # Known value (pins the algorithm, docs/design.md): mr-sum64 of the empty input is mix64(0) = 0.
    assert m.checksum_reference(b"") == 0


def _f16(values: list[float]) -> bytes:
    return struct.pack(f"<{len(values)}e", *values)


def _bf16(values: list[float]) -> bytes:
    return b"".join(struct.pack("<f", v)[2:] for v in values)  # exact for these values


def _from_bf16(data: bytes) -> list[float]:
    return [struct.unpack("<f", b"\0\0" + data[i : i + 2])[0] for i in range(0, len(data), 2)]


def all_reduce_ops_and_dtypes() -> None:
    n = 3
    per_rank = [[1.0, -2.0, 4.0], [3.0, 0.5, -1.0], [-0.5, 8.0, 2.0]]
    expect = {
        "sum": [sum(col) for col in zip(*per_rank)],
        "max": [max(col) for col in zip(*per_rank)],
        "min": [min(col) for col in zip(*per_rank)],
        "avg": [sum(col) / n for col in zip(*per_rank)],
    }

    def body(rank: int, comm: Any) -> dict[str, Any]:
        got: dict[str, Any] = {}
        for op in ("sum", "max", "min", "avg"):
            b = m.Buffer.from_bytes(struct.pack("<3f", *per_rank[rank]))
            comm.all_reduce(b, op=op, dtype="f32")
            got["f32", op] = list(struct.unpack("<3f", b.to_bytes()))
            h = m.Buffer.from_bytes(_f16(per_rank[rank]))
            comm.all_reduce(h, op=op, dtype="f16")
            got["f16", op] = list(struct.unpack("<3e", h.to_bytes()))
            bf = m.Buffer.from_bytes(_bf16(per_rank[rank]))
            comm.all_reduce(bf, op=op, dtype="bf16")
            got["bf16", op] = _from_bf16(bf.to_bytes())
            i = m.Buffer.from_bytes(struct.pack("<2i", rank * 10 + 1, -(rank + 1)))
            comm.all_reduce(i, op=op, dtype="i32")
            got["i32", op] = list(struct.unpack("<2i", i.to_bytes()))
        return got

    results, errors = run_ranks(n, body)
    no_errors(errors)
    ints = {"sum": [33, -6], "max": [21, -1], "min": [1, -3], "avg": [11, -2]}
    for rank, got in enumerate(results):
        for op, values in expect.items():
            # Exact where the result is representable; avg (/3) rounds to the element type.
            for dtype, tol in (("f32", 1e-6), ("f16", 2.0**-10), ("bf16", 2.0**-7)):
                close = all(abs(a - b) <= tol * max(1.0, abs(b)) for a, b in zip(got[dtype, op], values))
                assert close, (rank, dtype, op, got[dtype, op], values)
                if op != "avg":
                    assert got[dtype, op] == values, (rank, dtype, op, got[dtype, op])
            assert got["i32", op] == ints[op], (rank, op, got["i32", op])


def broadcast_send_recv_barrier() -> None:
    def body(rank: int, comm: Any) -> tuple[bytes, bytes, bytes]:
        assert (comm.rank, comm.world_size, comm.device, comm.live, comm.aborted) == (rank, 3, 0, True, False)
        b = m.Buffer.from_bytes(b"root says hi" if rank == 1 else bytes(12))
        comm.broadcast(b, root=1)
        # A ring: each rank sends to the next and receives from the previous; even ranks send first.
        mine = m.Buffer.from_bytes(bytes([rank]) * 5)
        theirs = m.Buffer(5)
        nxt, prev = (rank + 1) % 3, (rank - 1) % 3
        if rank % 2 == 0:
            comm.send(mine, nxt)
            comm.recv(theirs, prev)
        else:
            comm.recv(theirs, prev)
            comm.send(mine, nxt)
        # Part of a buffer: offset/nbytes.
        part = m.Buffer(6)
        if rank == 0:
            comm.send(m.Buffer.from_bytes(b"abcdef"), 2, offset=1, nbytes=3)
        elif rank == 2:
            comm.recv(part, 0, offset=3, nbytes=3)
        comm.barrier()
        return b.to_bytes(), theirs.to_bytes(), part.to_bytes()

    results, errors = run_ranks(3, body)
    no_errors(errors)
    for rank, (bcast, ring, part) in enumerate(results):
        assert bcast == b"root says hi"
        assert ring == bytes([(rank - 1) % 3]) * 5
        assert part == (b"\0\0\0bcd" if rank == 2 else bytes(6))


def collective_errors() -> None:
    # Ranks disagree on the element count: NCCL's ncclInvalidUsage, named, on every rank.
    def body(rank: int, comm: Any) -> None:
        comm.all_reduce(m.Buffer(8 if rank == 0 else 12), dtype="f32")

    _, errors = run_ranks(2, body)
    for err in errors:
        assert isinstance(err, m.CollectiveError), err
        assert "ncclInvalidUsage" in str(err) and "ncclAllReduce" in str(err), err
        assert err.result == 5 and err.result_name == "ncclInvalidUsage"
    for bad in (
        lambda: m.Communicator(b"short", 1, 0),
        lambda: m.Communicator(m.Communicator.unique_id(), 2, 2),
    ):
        try:
            bad()
        except ValueError:
            pass
        else:
            raise AssertionError("bad communicator arguments accepted")
    # Ids cross processes now (their rendezvous checks a random token): a tampered one is refused.
    forged = bytearray(m.Communicator.unique_id())
    forged[40] ^= 0xFF
    try:
        m.Communicator(bytes(forged), 1, 0)
    except m.CollectiveError as err:
        assert "ncclInvalidArgument" in str(err) and "not issued" in str(err), err
    else:
        raise AssertionError("a forged unique id was accepted")
    with m.Communicator(m.Communicator.unique_id(), 1, 0) as solo:
        b = m.Buffer(8)
        for bad in (
            lambda: solo.all_reduce(b, dtype="f64"),
            lambda: solo.all_reduce(b, op="prod"),
            lambda: solo.all_reduce(m.Buffer(6), dtype="f32"),
            lambda: solo.send(b, 3),
        ):
            try:
                bad()
            except ValueError:
                pass
            else:
                raise AssertionError("bad collective arguments accepted")
        solo.all_reduce(b, dtype="i32")
    assert not solo.live
    try:
        solo.barrier()
    except m.CommunicatorAborted as err:
        assert "destroyed" in str(err)
    else:
        raise AssertionError("a destroyed communicator was used")


def init_timeout() -> None:
    # MONARCH_HOST_COMM_TIMEOUT is set by the test: one rank of two never joins.
    try:
        m.Communicator(m.Communicator.unique_id(), 2, 0)
    except m.CollectiveError as err:
        assert "ncclCommInitRank" in str(err) and "ncclSystemError" in str(err) and "[1]" in str(err), err
    else:
        raise AssertionError("init without the other rank succeeded")


def abort_wakes_blocked_ops() -> None:
    ready = threading.Event()
    holder: dict[int, Any] = {}

    def body(rank: int, comm: Any) -> str:
        holder[rank] = comm
        if rank == 1:
            ready.set()
            try:
                comm.recv(m.Buffer(4), 0)  # rank 0 never sends: only abort frees this
            except m.CommunicatorAborted as err:
                assert "aborted" in str(err)
            else:
                raise AssertionError("recv returned without data")
            assert comm.aborted and not comm.live
            try:
                comm.barrier()
            except m.CommunicatorAborted:
                pass
            else:
                raise AssertionError("an aborted communicator was used")
            comm.abort()  # idempotent
            return "woken"
        ready.wait(10)
        aborter = threading.Timer(0.2, lambda: holder[1].abort())
        aborter.start()
        aborter.join()
        # The peer is gone: rank 0's next operation fails with the remote error instead of hanging.
        try:
            comm.send(m.Buffer(4), 1)
        except m.CollectiveError as err:
            assert "ncclRemoteError" in str(err) and err.result == 6, err
        else:
            raise AssertionError("send to an aborted peer succeeded")
        return "peer saw it"

    results, errors = run_ranks(2, body)
    no_errors(errors)
    assert results == ["peer saw it", "woken"]


def _state(rank: int, sizes: dict[str, int], seed: int) -> tuple[dict[str, Any], dict[str, bytes]]:
    rng = random.Random(seed * 1000 + rank)
    data = {name: rng.randbytes(size) for name, size in sizes.items()}
    return {name: m.Buffer.from_bytes(d) for name, d in data.items()}, data


SIZES = {"w1": 40_000, "w2": 123_457, "bias": 13, "empty": 0, "w3": 70_000}
STAGING = 4096


def transfer_larger_than_staging() -> None:
    def body(rank: int, comm: Any) -> tuple[dict[str, Any], dict[str, bytes], dict[str, bytes]]:
        bufs, before = _state(rank, SIZES, 1)
        seen: list[tuple[str, int, int]] = []
        report = transfer(
            comm, bufs, donor=0, receiver=1, staging_bytes=STAGING, progress=lambda *chunk: seen.append(chunk)
        )
        report["seen"] = seen
        return report, before, {n: b.to_bytes() for n, b in bufs.items()}

    results, errors = run_ranks(2, body)
    no_errors(errors)
    (donor_report, donor_before, donor_after), (recv_report, _, recv_after) = results
    total = sum(SIZES.values())
    assert total > 50 * STAGING
    assert recv_after == donor_before == donor_after
    chunks = sum(-(-size // STAGING) for size in SIZES.values())
    # auto: the CPU build reports the host's available memory as the device's, so the state is shadowed in place
    assert recv_report["shadow"] == ("device" if SHADOW == "auto" else SHADOW)
    for report, role in ((donor_report, "donor"), (recv_report, "receiver")):
        assert report["role"] == role and report["bytes"] == total and report["chunks"] == chunks, report
        assert report["chunk_bytes"] == STAGING
        assert report["checksums"] == {n: m.checksum_reference(d) for n, d in donor_before.items()}
        assert len(report["seen"]) == chunks
        assert all(0 < nbytes <= STAGING and offset % 8 == 0 for _, offset, nbytes in report["seen"])
    assert [c[0] for c in recv_report["seen"]][:1] == ["w1"]


def transfer_detects_corruption() -> None:
    def body(rank: int, comm: Any) -> tuple[str, list[str], bool, bool]:
        bufs, before = _state(rank, SIZES, 2)

        def corrupt(name: str, offset: int, nbytes: int) -> None:
            # After the donor checksummed its state: chunk 3 of w2 changes before it is sent.
            if rank == 0 and name == "w2" and offset == 3 * STAGING:
                bufs["w2"].copy_from(bytes([0xA5]) * 16, offset=offset + 100)

        try:
            transfer(comm, bufs, donor=0, receiver=1, staging_bytes=STAGING, progress=corrupt)
        except m.ChecksumMismatch as err:
            message, names = str(err), list(err.buffers)
        else:
            raise AssertionError("corruption not detected")
        intact = all(bufs[n].to_bytes() == before[n] for n in SIZES) if rank == 1 else True
        # The communicator is still usable: a retry moves the (now changed) donor state.
        transfer(comm, bufs, donor=0, receiver=1, staging_bytes=STAGING)
        return message, names, intact, comm.live

    results, errors = run_ranks(2, body)
    no_errors(errors)
    for message, names, intact, live in results:
        assert names == ["w2"], names
        assert "'w2'" in message or '"w2"' in message, message
        assert intact and live
    assert "unchanged" in results[1][0]


def abort_mid_transfer_keeps_state() -> None:
    def body(rank: int, comm: Any) -> tuple[str, bool, Any]:
        bufs, before = _state(rank, SIZES, 3)

        def die(name: str, offset: int, nbytes: int) -> None:
            if rank == 0 and name == "w2" and offset == 5 * STAGING:
                comm.abort()  # the donor fails mid-transfer

        try:
            transfer(comm, bufs, donor=0, receiver=1, staging_bytes=STAGING, progress=die)
        except m.TransferAborted as err:
            kind, message = type(err).__name__, str(err)
        else:
            raise AssertionError("transfer survived an abort")
        intact = all(bufs[n].to_bytes() == before[n] for n in SIZES)
        return message, intact, kind

    results, errors = run_ranks(2, body)
    no_errors(errors)
    (donor_msg, donor_intact, _), (recv_msg, recv_intact, _) = results
    assert recv_intact and donor_intact
    assert "receiver's buffers are unchanged" in recv_msg and "'w2'" in recv_msg.replace('"', "'"), recv_msg
    assert "ncclRemoteError" in recv_msg, recv_msg
    assert "aborted" in donor_msg


def watchdog_abort_frees_receiver() -> None:
    stalled, release = threading.Event(), threading.Event()
    holder: dict[int, Any] = {}

    def body(rank: int, comm: Any) -> tuple[str, bool]:
        holder[rank] = comm
        bufs, before = _state(rank, SIZES, 4)

        def hang(name: str, offset: int, nbytes: int) -> None:
            if rank == 0 and name == "w1" and offset == 2 * STAGING:
                stalled.set()
                release.wait(HANG_S)  # a hung donor

        if rank == 1:
            threading.Thread(target=lambda: (stalled.wait(HANG_S), holder[1].abort()), daemon=True).start()
        try:
            transfer(comm, bufs, donor=0, receiver=1, staging_bytes=STAGING, progress=hang)
        except m.TransferAborted as err:
            outcome = str(err)
        finally:
            if rank == 1:
                release.set()
        intact = all(bufs[n].to_bytes() == before[n] for n in SIZES)
        return outcome, intact

    results, errors = run_ranks(2, body)
    no_errors(errors)
    (donor_msg, _), (recv_msg, recv_intact) = results
    assert recv_intact and "unchanged" in recv_msg and "aborted" in recv_msg
    assert "ncclRemoteError" in donor_msg, donor_msg  # the donor, released, finds the receiver gone


def transfer_timeout_aborts_a_hung_transfer() -> None:
    release = threading.Event()

    def body(rank: int, comm: Any) -> tuple[str, bool]:
        bufs, before = _state(rank, SIZES, 8)

        def hang(name: str, offset: int, nbytes: int) -> None:
            if rank == 0 and name == "w2" and offset == 0:
                release.wait(HANG_S)  # a hung donor, released once the receiver gave up

        try:
            if rank == 1:
                transfer(comm, bufs, donor=0, receiver=1, staging_bytes=STAGING, timeout=0.5)
            else:
                transfer(comm, bufs, donor=0, receiver=1, staging_bytes=STAGING, progress=hang)
        except m.TransferAborted as err:
            outcome = str(err)
        else:
            raise AssertionError("a hung transfer completed")
        finally:
            if rank == 1:
                release.set()
        return outcome, all(bufs[n].to_bytes() == before[n] for n in SIZES)

    results, errors = run_ranks(2, body)
    no_errors(errors)
    (donor_msg, _), (recv_msg, recv_intact) = results
    assert recv_intact and "timed out after 0.5 s" in recv_msg and "unchanged" in recv_msg, recv_msg
    assert "ncclRemoteError" in donor_msg, donor_msg


def transfer_rejects_mismatched_state() -> None:
    def body(rank: int, comm: Any) -> str:
        sizes = dict(SIZES, w3=SIZES["w3"] + (8 if rank == 1 else 0))
        bufs, before = _state(rank, sizes, 5)
        try:
            transfer(comm, bufs, donor=0, receiver=1, staging_bytes=STAGING)
        except m.TransferError as err:
            assert not isinstance(err, m.ChecksumMismatch)
            assert all(bufs[n].to_bytes() == before[n] for n in sizes)
            return str(err)
        raise AssertionError("mismatched state accepted")

    results, errors = run_ranks(2, body)
    no_errors(errors)
    for message in results:
        assert "w3" in message and "70000" in message and "70008" in message, message

    def staging(rank: int, comm: Any) -> str:
        bufs, _ = _state(rank, {"x": 100}, 6)
        try:
            transfer(comm, bufs, donor=0, receiver=1, staging_bytes=64 if rank == 0 else 32)
        except m.TransferError as err:
            return str(err)
        raise AssertionError("a chunk larger than the receiver's staging was accepted")

    results, errors = run_ranks(2, staging)
    no_errors(errors)
    assert all("staging_bytes" in msg for msg in results), results


def transfer_idle_rank_and_arguments() -> None:
    def body(rank: int, comm: Any) -> str:
        bufs, _ = _state(rank, {"x": 1000}, 7)
        for bad in (
            lambda: transfer(comm, bufs, donor=0, receiver=0),
            lambda: transfer(comm, bufs, donor=0, receiver=5),
            lambda: transfer(comm, bufs, donor=0, receiver=1, staging_bytes=4),
            lambda: transfer(comm, {"x": object()}, donor=0, receiver=1),  # neither a tensor nor a plain value
        ):
            try:
                bad()
            except (ValueError, TypeError):
                pass
            else:
                raise AssertionError("bad transfer arguments accepted")
        return str(transfer(comm, bufs, donor=2, receiver=0, staging_bytes=256)["role"])

    results, errors = run_ranks(3, body)
    no_errors(errors)
    assert results == ["receiver", "idle", "donor"]


def gpu_build_without_gpu() -> None:
    """On a CUDA/ROCm build on a machine without a GPU: imports, and every GPU function names the cause."""
    assert m.PLATFORM in ("cuda", "rocm")
    calls: dict[str, Callable[[], object]] = {
        "devices": m.devices,
        "Buffer": lambda: m.Buffer(8),
        "Buffer.from_bytes": lambda: m.Buffer.from_bytes(b"abc"),
        "Stream": m.Stream,
        "Event": m.Event,
        "Communicator": lambda: m.Communicator(bytes(128), 1, 0),
        "checksum": lambda: m.checksum(b"abc"),
        "all_reduce_single_rank": lambda: m.all_reduce_single_rank([1.0]),
    }
    for name, call in calls.items():
        try:
            call()
        except m.NoDeviceError as err:
            assert "no usable gpu" in str(err).lower() and m.PLATFORM in str(err), (name, err)
            if name in ("Communicator", "all_reduce_single_rank") and isinstance(err, m.CollectiveError):
                # A collective call says what the library answered, and is a NoDeviceError too.
                assert isinstance(err, m.CollectiveNoDeviceError) and err.result_name in str(err), (name, err)
        else:
            raise AssertionError(f"{name} worked without a GPU")
    # An id needs no device where the library makes one without (NCCL does, RCCL does not): either it is
    # the id's 128 bytes, or the error names the library's answer and the missing device.
    try:
        assert len(m.Communicator.unique_id()) == 128
    except m.CollectiveNoDeviceError as err:
        assert err.result_name in str(err) and "no usable gpu" in str(err).lower(), err
    assert m.checksum_reference(b"abc") == m.checksum_reference(bytearray(b"abc"))


if __name__ == "__main__":
    globals()[sys.argv[1]]()
    print("OK", sys.argv[1], os.getpid())
