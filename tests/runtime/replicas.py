"""Replicas as processes: peer recovery of a numpy training state between real processes on the CPU
build, with real process death. Runs inside a venv where the CPU wheel is installed, with numpy
importable (tests/runtime/test_processes.py puts it on PYTHONPATH).

``python replicas.py SCENARIO`` runs one scenario in this process, which plays one replica (the
receiver, or the donor) and starts the other as a child process (``python replicas.py child`` with
its orders in ``MR_CHILD``: the unique id as hex, its role, its state's seed, and a fault: SIGKILL
itself after N chunks, SIGSTOP itself, corrupt a chunk after its checksum). Each child prints one
``RESULT {json}`` line. Scenarios assert as they go and print ``OK name`` at the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

import monarch_runtime as m
import numpy as np

HERE = os.path.abspath(__file__)
STAGING = 64 << 10
#: The child's own bound: a child that never finishes fails the scenario instead of hanging it.
CHILD_S = 60.0


def make_state(seed: int, scale: int = 1) -> dict[str, Any]:
    """A model's and an optimizer's state_dict, shaped like PyTorch's (nested, int keys, param_groups),
    with numpy arrays for tensors; ~0.6 MB per unit of ``scale``."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((96 * scale, 512), dtype=np.float32)
    b = rng.standard_normal(512, dtype=np.float32)
    head = rng.standard_normal((512, 10)).astype(np.float16)
    return {
        "model": {
            "encoder.weight": w,
            "encoder.bias": b,
            "head.weight": head,
            "head.step_count": np.array(seed, dtype=np.int64),  # a 0-d tensor
            "vocab_ids": rng.integers(0, 255, 4099, dtype=np.uint8),  # odd size: a partial last word
        },
        "optim": {
            "state": {
                0: {"step": seed, "exp_avg": np.full_like(w, seed % 7), "exp_avg_sq": np.full_like(w, 0.5)},
                1: {"step": seed, "exp_avg": np.zeros_like(b), "exp_avg_sq": np.ones_like(b)},
            },
            "param_groups": [{"lr": 1e-3 * (1 + seed % 5), "betas": (0.9, 0.999), "eps": 1e-8, "params": [0, 1]}],
        },
        "meta": {"epoch": seed % 100, "run": f"run-{seed}", "cursor": bytes([seed % 256]) * 5},
    }


def tensors(state: Mapping[str, Any], prefix: str = "") -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for key, value in state.items():
        name = f"{prefix}{key}"
        if isinstance(value, np.ndarray):
            out[name] = value
        elif isinstance(value, Mapping):
            out.update(tensors(value, name + "."))
    return out


def digest(state: Mapping[str, Any]) -> dict[str, int]:
    """mr-sum64 of every tensor (the host reference): equal digests, equal bytes (for our purposes)."""
    return {name: m.checksum_reference(arr.tobytes()) for name, arr in tensors(state).items()}


def values(state: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "step": state["optim"]["state"][0]["step"],
        "lr": state["optim"]["param_groups"][0]["lr"],
        "epoch": state["meta"]["epoch"],
        "cursor": state["meta"]["cursor"].hex(),
    }


def resources() -> dict[str, Any]:
    shm = sorted(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else []
    return {
        "fds": len(os.listdir("/proc/self/fd")),
        "threads": len(os.listdir("/proc/self/task")),
        "shm": shm,
    }


# --------------------------------------------------------------------------------------------------
# The child replica.


def child() -> None:
    cfg = json.loads(os.environ["MR_CHILD"])
    role, rank = cfg["role"], (0 if cfg["role"] == "donor" else 1)
    state = make_state(cfg["seed"], cfg.get("scale", 1))
    flat = tensors(state)
    chunks = 0

    def progress(name: str, offset: int, nbytes: int) -> None:
        nonlocal chunks
        chunks += 1
        if cfg.get("kill_after") == chunks:
            os.kill(os.getpid(), signal.SIGKILL)
        if cfg.get("stop_after") == chunks:
            os.kill(os.getpid(), signal.SIGSTOP)
        if cfg.get("corrupt_at") == chunks and role == "donor":
            # After the donor's checksum, before this chunk is sent: a bit flips in it.
            flat[name].reshape(-1).view(np.uint8)[offset + 3] ^= 0x10

    out: dict[str, Any]
    with m.Communicator(bytes.fromhex(cfg["uid"]), 2, rank) as comm:
        try:
            report = m.transfer_state(
                comm,
                state,
                donor=0,
                receiver=1,
                staging_bytes=cfg.get("staging", STAGING),
                progress=progress,
                timeout=cfg.get("timeout"),
            )
            out = {"ok": True, "chunks": report["chunks"], "bytes": report["bytes"]}
        except m.MonarchError as err:
            out = {"ok": False, "error": type(err).__name__, "message": str(err)}
            out["buffers"] = list(getattr(err, "buffers", []) or [])
    out["digest"] = digest(state)
    print("RESULT " + json.dumps(out), flush=True)


def spawn(uid: bytes, role: str, seed: int, **fault: Any) -> subprocess.Popen[str]:
    orders = {"uid": uid.hex(), "role": role, "seed": seed, **fault}
    return subprocess.Popen(
        [sys.executable, HERE, "child"],
        env={**os.environ, "MR_CHILD": json.dumps(orders)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = CHILD_S) -> tuple[int, dict[str, Any] | None, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"child hung: {out[-2000:]} {err[-2000:]}") from None
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    return proc.returncode, (json.loads(lines[-1][7:]) if lines else None), err


def receive(
    seed: int, state: dict[str, Any], staging: int = STAGING, **fault: Any
) -> tuple[dict[str, Any] | BaseException, float, int, dict[str, Any] | None, str]:
    """This process receives from a fresh donor process (seed ``seed``, ``fault``): outcome, seconds
    the receiver's part took, the child's exit status and result."""
    uid = m.Communicator.unique_id()
    proc = spawn(uid, "donor", seed, staging=staging, **fault)
    outcome: dict[str, Any] | BaseException
    try:
        with m.Communicator(uid, 2, 1) as comm:
            t0 = time.monotonic()
            try:
                outcome = m.transfer_state(comm, state, donor=0, receiver=1, staging_bytes=staging, timeout=10.0)
            except m.MonarchError as err:
                outcome = err
            elapsed = time.monotonic() - t0
    finally:
        if fault.get("stop_after"):
            proc.send_signal(signal.SIGKILL)
    rc, result, err = finish(proc)
    return outcome, elapsed, rc, result, err


# --------------------------------------------------------------------------------------------------
# Scenarios.


def donor_killed_then_new_donor_recovers() -> None:
    mine = make_state(1000)
    before = digest(mine)
    outcome, elapsed, rc, result, err = receive(7, mine, kill_after=5)
    assert rc == -signal.SIGKILL and result is None, (rc, result, err[-2000:])
    assert isinstance(outcome, m.TransferAborted), outcome
    text = str(outcome)
    assert "unchanged" in text and "ncclRemoteError" in text and "died or was killed" in text, text
    assert elapsed < 10.0, elapsed  # within the timeout: the death is seen at once (EOF), not by the watchdog
    assert digest(mine) == before and values(mine) == values(make_state(1000))  # bit for bit

    outcome, _, rc, result, err = receive(8, mine)
    assert rc == 0 and result and result["ok"], (rc, result, err[-2000:])
    assert isinstance(outcome, dict), outcome
    donor = make_state(8)
    assert digest(mine) == digest(donor) == result["digest"]
    got = outcome["state"]
    assert got["model"]["encoder.weight"] is mine["model"]["encoder.weight"]  # the receiver's own arrays
    assert values(got) == values(donor), (values(got), values(donor))
    assert got["optim"]["param_groups"][0]["betas"] == (0.9, 0.999)


def receiver_killed_donor_errors() -> None:
    mine = make_state(11)
    before = digest(mine)
    uid = m.Communicator.unique_id()
    proc = spawn(uid, "receiver", 12, kill_after=3)
    with m.Communicator(uid, 2, 0) as comm:
        t0 = time.monotonic()
        try:
            m.transfer_state(comm, mine, donor=0, receiver=1, staging_bytes=STAGING)
        except m.TransferAborted as err:
            text = str(err)
        else:
            raise AssertionError("the donor finished although its receiver died")
        elapsed = time.monotonic() - t0
    rc, result, err = finish(proc)
    assert rc == -signal.SIGKILL and result is None, (rc, err[-2000:])
    assert "rank 1" in text and ("died or was killed" in text or "could not write" in text), text
    assert elapsed < 10.0, elapsed
    assert digest(mine) == before


def corrupted_chunk_both_sides() -> None:
    mine = make_state(21)
    before = digest(mine)
    outcome, _, rc, result, err = receive(22, mine, corrupt_at=2)
    assert rc == 0 and result is not None, (rc, err[-2000:])
    assert isinstance(outcome, m.ChecksumMismatch), outcome
    assert result["error"] == "ChecksumMismatch", result
    assert list(outcome.buffers) == result["buffers"] == ["model.encoder.weight"], (outcome.buffers, result)
    assert digest(mine) == before


def hung_donor_times_out() -> None:
    mine = make_state(31)
    before = digest(mine)
    uid = m.Communicator.unique_id()
    proc = spawn(uid, "donor", 32, stop_after=2)
    try:
        with m.Communicator(uid, 2, 1) as comm:
            t0 = time.monotonic()
            try:
                m.transfer_state(comm, mine, donor=0, receiver=1, staging_bytes=STAGING, timeout=1.0)
            except m.TransferAborted as err:
                text = str(err)
            else:
                raise AssertionError("a stopped donor's transfer completed")
            elapsed = time.monotonic() - t0
    finally:
        proc.send_signal(signal.SIGKILL)
    finish(proc)
    assert "timed out after 1.0 s" in text and "unchanged" in text, text
    assert elapsed < 5.0, elapsed
    assert digest(mine) == before


def mismatched_states_named_on_both_sides() -> None:
    mine = make_state(41)
    mine["model"]["head.weight"] = mine["model"]["head.weight"].astype(np.float32)  # dtype differs
    before = digest(mine)
    outcome, _, rc, result, err = receive(42, mine)
    assert rc == 0 and result is not None, (rc, err[-2000:])
    assert isinstance(outcome, m.TransferError) and not isinstance(outcome, m.ChecksumMismatch), outcome
    assert result["error"] == "TransferError", result
    for text in (str(outcome), result["message"]):
        assert "'model.head.weight'" in text.replace('"', "'") and "float16" in text and "float32" in text, text
    assert digest(mine) == before


def read_only_target_refused_on_both_sides() -> None:
    mine = make_state(51)
    mine["model"]["encoder.bias"].flags.writeable = False
    outcome, _, rc, result, err = receive(52, mine)
    assert rc == 0 and result is not None, (rc, err[-2000:])
    assert isinstance(outcome, m.TransferError), outcome
    for text in (str(outcome), result["message"]):
        assert "read-only" in text and "model.encoder.bias" in text, text


def large_state_killed_then_recovers() -> None:
    """A ~48 MB state: above the size the CPU build maps on its own, so the receiver's shadow is one
    mapping prefaulted by a helper thread (huge pages where they are cheaper). The donor is killed
    part-way (the receiver intact, the helper stopped), then a fresh donor completes."""
    scale, staging = 80, 4 << 20
    mine = make_state(70, scale)
    before = digest(mine)
    outcome, elapsed, rc, result, err = receive(71, mine, staging, scale=scale, kill_after=4)
    assert rc == -signal.SIGKILL and result is None, (rc, result, err[-2000:])
    assert isinstance(outcome, m.TransferAborted), outcome
    assert elapsed < 10.0, elapsed
    assert digest(mine) == before
    outcome, _, rc, result, err = receive(72, mine, staging, scale=scale)
    assert rc == 0 and result and result["ok"], (rc, result, err[-2000:])
    assert isinstance(outcome, dict) and outcome["bytes"] > 32 << 20, outcome
    assert digest(mine) == digest(make_state(72, scale)) == result["digest"]
    assert values(outcome["state"]) == values(make_state(72, scale))


def kill_and_recover_rounds() -> None:
    """20 rounds of: a donor killed part-way (at a different chunk each time), then a fresh donor
    completes. Nothing lost; no descriptors, threads or /dev/shm entries left behind."""
    mine = make_state(60)
    outcome, *_ = receive(61, mine)  # warm-up: the rendezvous thread and its socket exist from here on
    assert isinstance(outcome, dict), outcome
    start = resources()
    for round_ in range(20):
        before = digest(mine)
        outcome, _, rc, _, err = receive(100 + round_, mine, kill_after=1 + (round_ * 7) % 14)  # the state is 15 chunks
        assert isinstance(outcome, m.TransferAborted), (round_, outcome, err[-1000:])
        assert rc == -signal.SIGKILL, (round_, rc)
        assert digest(mine) == before, round_
        outcome, _, rc, result, err = receive(200 + round_, mine)
        assert isinstance(outcome, dict) and rc == 0, (round_, outcome, err[-1000:])
        assert digest(mine) == digest(make_state(200 + round_)) == result["digest"], round_
        assert values(outcome["state"]) == values(make_state(200 + round_)), round_
    end = resources()
    new_shm = [n for n in set(end["shm"]) - set(start["shm"]) if "monarch" in n.lower() or n.startswith("mr")]
    assert end["fds"] == start["fds"], (start["fds"], end["fds"])
    assert end["threads"] == start["threads"], (start["threads"], end["threads"])
    assert not new_shm, new_shm
    print(
        f"resources before {start['fds']} fds {start['threads']} threads; after {end['fds']} fds {end['threads']} threads"
    )


def peer_never_arrives() -> None:
    # MONARCH_HOST_COMM_TIMEOUT=1 is set by the test.
    t0 = time.monotonic()
    try:
        m.Communicator(m.Communicator.unique_id(), 2, 1)
    except m.CollectiveError as err:
        text = str(err)
    else:
        raise AssertionError("joined without the other rank")
    assert time.monotonic() - t0 < 5.0
    assert "ncclSystemError" in text and "[0]" in text and "1.0 s" in text, text
    # An id whose maker has exited: an error naming it, at once.
    maker = subprocess.run(
        [sys.executable, "-c", "import monarch_runtime as m; print(m.Communicator.unique_id().hex())"],
        capture_output=True,
        text=True,
        check=True,
    )
    try:
        m.Communicator(bytes.fromhex(maker.stdout.strip()), 2, 0)
    except m.CollectiveError as err:
        text = str(err)
    else:
        raise AssertionError("joined a rendezvous whose process is gone")
    assert "cannot reach the rendezvous" in text and "has exited" in text, text
    # A tampered id (its token): refused by the rendezvous, named.
    uid = bytearray(m.Communicator.unique_id())
    uid[40] ^= 0xFF
    try:
        m.Communicator(bytes(uid), 1, 0)
    except m.CollectiveError as err:
        assert "ncclInvalidArgument" in str(err) and "not issued" in str(err), err
    else:
        raise AssertionError("a tampered id was accepted")


def collectives_across_processes() -> None:
    """The child runs the mirror image of this: all-reduce, broadcast, send/recv, barrier."""
    uid = m.Communicator.unique_id()
    code = (
        "import monarch_runtime as m, numpy as np, sys\n"
        "with m.Communicator(bytes.fromhex(sys.argv[1]), 2, 0) as c:\n"
        "    x = np.array([1.5, -2.0, 4.0], np.float32); c.all_reduce(m.from_dlpack(x))\n"
        "    i = np.array([7, -1], np.int32); c.all_reduce(m.from_dlpack(i), op='max')\n"
        "    b = np.frombuffer(b'root says hi', np.uint8).copy(); c.broadcast(m.from_dlpack(b), root=0)\n"
        "    c.send(m.Buffer.from_bytes(b'ping'), 1); r = m.Buffer(4); c.recv(r, 1); c.barrier()\n"
        "    print('CHILD', x.tolist(), i.tolist(), r.to_bytes().decode())\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, uid.hex()], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    with m.Communicator(uid, 2, 1) as c:
        x = np.array([0.5, 1.0, -1.0], np.float32)
        c.all_reduce(m.from_dlpack(x))
        i = np.array([3, 5], np.int32)
        c.all_reduce(m.from_dlpack(i), op="max")
        b = np.zeros(12, np.uint8)
        c.broadcast(m.from_dlpack(b), root=0)
        r = m.Buffer(4)
        c.recv(r, 0)
        c.send(m.Buffer.from_bytes(b"pong"), 0)
        c.barrier()
    out, err = proc.communicate(timeout=CHILD_S)
    assert proc.returncode == 0, err[-3000:]
    assert list(x) == [2.0, -1.0, 3.0] and list(i) == [7, 5], (x, i)
    assert b.tobytes() == b"root says hi" and r.to_bytes() == b"ping"
    assert "CHILD [2.0, -1.0, 3.0] [7, 5] pong" in out, out


# --------------------------------------------------------------------------------------------------
# DLPack (in one process).


def _capsule_name_is(capsule: object, name: bytes) -> bool:
    import ctypes  # noqa: PLC0415

    is_valid = ctypes.pythonapi.PyCapsule_IsValid
    is_valid.restype = ctypes.c_int
    is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return bool(is_valid(capsule, name))


class Producer:
    """Hands out a capsule made beforehand (to look at it after a consumer took it), or forwards."""

    def __init__(self, capsule: object, device: tuple[int, int] = (1, 0), legacy_only: bool = False) -> None:
        self.capsule, self.device, self.legacy_only = capsule, device, legacy_only

    def __dlpack__(self, **kwargs: Any) -> object:
        if self.legacy_only and kwargs.keys() - {"stream"}:
            raise TypeError("__dlpack__() got an unexpected keyword argument")  # like numpy < 2
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


def dlpack_zero_copy_and_keepalive() -> None:
    import gc  # noqa: PLC0415
    import weakref  # noqa: PLC0415

    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    alive = weakref.ref(a)
    buf = m.from_dlpack(a)
    assert buf.data_ptr == a.ctypes.data and buf.nbytes == a.nbytes and buf.is_view and not buf.read_only
    assert (buf.dtype, tuple(buf.shape)) == ("float32", (2, 3, 4))
    assert buf.checksum() == m.checksum_reference(a.tobytes())
    buf.copy_from(b"\0\0\x80\x3f", offset=4)  # writes reach the array: a[0, 0, 1] = 1.0
    assert a[0, 0, 1] == 1.0
    assert m.from_dlpack(buf) is buf
    del a
    gc.collect()
    assert alive() is not None  # the Buffer keeps its producer alive
    assert np.frombuffer(buf.to_bytes(), np.float32)[1] == 1.0
    del buf
    gc.collect()
    assert alive() is None  # and lets it go with it
    # Export: a Buffer is a producer; numpy views its memory (versioned capsule), a legacy consumer too.
    plain = m.Buffer.from_bytes(bytes(range(16)))
    view = np.from_dlpack(plain)
    assert view.ctypes.data == plain.data_ptr and view.dtype == np.uint8 and view.tolist() == list(range(16))
    view[0] = 99
    assert plain.to_bytes()[0] == 99
    typed = m.from_dlpack(np.ones((2, 2), np.int16))
    back = np.from_dlpack(typed)
    assert back.dtype == np.int16 and back.shape == (2, 2) and back.ctypes.data == typed.data_ptr
    cap = plain.__dlpack__(max_version=(1, 0))
    assert _capsule_name_is(cap, b"dltensor_versioned")
    np.from_dlpack(Producer(cap))
    assert _capsule_name_is(cap, b"used_dltensor_versioned")  # numpy consumed it
    legacy = plain.__dlpack__()
    assert _capsule_name_is(legacy, b"dltensor")
    del legacy  # never consumed: its destructor frees the export (no leak, no crash)
    # Import marks what it consumed; the legacy form is used for producers that know no max_version.
    src = np.arange(5, dtype=np.int64)
    cap = src.__dlpack__(max_version=(1, 1))
    wrapped = m.from_dlpack(Producer(cap))
    assert _capsule_name_is(cap, b"used_dltensor_versioned") and wrapped.data_ptr == src.ctypes.data
    cap = src.__dlpack__()
    old = m.from_dlpack(Producer(cap, legacy_only=True))
    assert _capsule_name_is(cap, b"used_dltensor") and old.data_ptr == src.ctypes.data
    # A copy on request is flagged as one and is not the original memory.
    copied = np.from_dlpack(plain, copy=True)
    assert copied.ctypes.data != plain.data_ptr and copied.tolist() == view.tolist()
    # An empty and a 0-d array.
    assert m.from_dlpack(np.zeros((0, 3), np.float32)).nbytes == 0
    assert tuple(m.from_dlpack(np.array(3.5)).shape) == ()


def dlpack_errors() -> None:
    def refused(make: Any, *words: str, kind: type[BaseException] = ValueError) -> None:
        try:
            make()
        except kind as err:
            assert all(w in str(err) for w in words), (words, err)
        else:
            raise AssertionError(f"accepted: {words}")

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    refused(lambda: m.from_dlpack(a.T), "not contiguous", "strides")
    refused(lambda: m.from_dlpack(a[:, ::2]), "not contiguous")
    refused(lambda: m.from_dlpack(object()), "not a DLPack producer", kind=TypeError)
    # A tensor on a GPU handed to the CPU build.
    cap = np.zeros(4, np.float32).__dlpack__(max_version=(1, 1))
    refused(lambda: m.from_dlpack(Producer(cap, device=(2, 0))), "kDLCUDA", "CPU build")
    assert _capsule_name_is(cap, b"dltensor_versioned")  # refused: not consumed, the capsule frees it
    # A dtype that is not whole bytes per element, or a vector type: crafted in a capsule of our own.
    import ctypes  # noqa: PLC0415

    class DLTensor(ctypes.Structure):
        _fields_ = [
            ("data", ctypes.c_void_p),
            ("device_type", ctypes.c_int32),
            ("device_id", ctypes.c_int32),
            ("ndim", ctypes.c_int32),
            ("code", ctypes.c_uint8),
            ("bits", ctypes.c_uint8),
            ("lanes", ctypes.c_uint16),
            ("shape", ctypes.c_void_p),
            ("strides", ctypes.c_void_p),
            ("byte_offset", ctypes.c_uint64),
        ]

    class Versioned(ctypes.Structure):
        _fields_ = [
            ("major", ctypes.c_uint32),
            ("minor", ctypes.c_uint32),
            ("ctx", ctypes.c_void_p),
            ("deleter", ctypes.c_void_p),
            ("flags", ctypes.c_uint64),
            ("tensor", DLTensor),
        ]

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    for code, bits, lanes, words in ((17, 4, 1, "sub-byte"), (2, 32, 4, "lanes"), (1, 4, 1, "whole bytes")):
        cap = m.Buffer(16).__dlpack__(max_version=(1, 0))
        t = Versioned.from_address(get(cap, b"dltensor_versioned")).tensor
        t.code, t.bits, t.lanes = code, bits, lanes
        refused(lambda cap=cap: m.from_dlpack(Producer(cap)), "cannot be checksummed or transferred", words)
    # Collectives: a dtype they cannot reduce.
    with m.Communicator(m.Communicator.unique_id(), 1, 0) as solo:
        refused(lambda: solo.all_reduce(m.from_dlpack(np.zeros(4, np.float64))), "float64", "cannot be reduced")
        i = m.from_dlpack(np.array([3, 4], np.int32))
        solo.all_reduce(i)  # int32 taken from the tensor
        # A read-only array: a read-only Buffer, refused as any write's target.
        ro = np.arange(8, dtype=np.int32)
        ro.flags.writeable = False
        rb = m.from_dlpack(ro)
        assert rb.read_only and rb.checksum() == m.checksum_reference(ro.tobytes())
        refused(lambda: rb.fill(0), "read-only")
        refused(lambda: rb.copy_from(b"x"), "read-only")
        refused(lambda: solo.all_reduce(rb), "read-only")
        refused(lambda: solo.recv(rb, 0), "read-only")
        refused(lambda: np.from_dlpack(rb, copy=False).__setitem__(0, 1), "read-only")  # numpy sees the flag
        refused(lambda: rb.__dlpack__(), "read-only", kind=BufferError)  # the legacy form cannot say so
    assert ro.tolist() == list(range(8))


if __name__ == "__main__":
    if sys.argv[1] == "child":
        child()
    else:
        globals()[sys.argv[1]]()
        print("OK", sys.argv[1], os.getpid())
