"""The runtime on a real GPU (skipped without one): checksum kernel vs the host reference, a
single-rank all-reduce through NCCL/RCCL, DLPack with torch (and CuPy when installed) CUDA tensors
(zero copy: the same data pointer; the device checksum of a tensor equals the host reference), and
two-rank transfers (Buffers, and a torch state_dict) when two GPUs are visible.

Run on a GPU machine with ``tests/gpu/run.sh WHEEL`` (it installs the wheel and runs this file with
pytest, or without it: ``python tests/gpu/test_gpu.py`` runs the same tests with a tiny runner).
"""

from __future__ import annotations

import os
import random
import struct
import sys
import threading
from collections.abc import Callable
from typing import Any

try:
    import pytest
except ImportError:  # the fallback runner below needs no pytest
    pytest = None  # type: ignore[assignment]


class Skip(Exception):
    pass


def skip(reason: str) -> None:
    if pytest is not None:
        pytest.skip(reason)
    raise Skip(reason)


def _gpus() -> tuple[Any, int, str]:
    try:
        import monarch_runtime as m  # noqa: PLC0415 - optional at collection time
    except ImportError as err:
        return None, 0, f"monarch_runtime is not installed: {err}"
    try:
        count = int(m.device_count())
        return m, count, "" if count else f"device_count() == 0 on the {m.PLATFORM} build"
    except m.NoDeviceError as err:
        return m, 0, str(err)


M, GPUS, WHY = _gpus()
if pytest is not None:
    pytestmark = [
        pytest.mark.gpu,
        pytest.mark.skipif(GPUS == 0, reason=f"no GPU: {WHY}"),
    ]

HANG_S = 120.0


def needs_collectives() -> None:
    info = M.build_info()
    if not info["collective_loaded"]:
        skip(f"no collective library: {info.get('collective_error')}")


def test_devices_report_the_hardware() -> None:
    devs = M.devices()
    assert len(devs) == GPUS > 0
    for d in devs:
        assert d["arch"].startswith(("sm_", "gfx")), d
        assert d["warp_size"] in (32, 64), d
        assert 0 < d["free_memory"] <= d["total_memory"], d
    print(f"devices: {[(d['name'], d['arch'], d['warp_size']) for d in devs]}")


def test_checksum_on_device_matches_host_reference() -> None:
    rng = random.Random(7)
    sizes = [0, 1, 7, 8, 9, 31, 32, 33, 255, 256, 257, 4099, 65536 + 5, (1 << 22) + 3]
    sizes += [rng.randrange(1, 1 << 16) for _ in range(20)]
    for size in sizes:
        data = rng.randbytes(size)
        ref = M.checksum_reference(data)
        buf = M.Buffer.from_bytes(data)
        assert buf.checksum() == ref, size  # the kernel on the buffer in place
        assert M.checksum(data) == ref, size  # bytes copied to the device first
    # Large: more words than the grid covers in one pass (grid-stride loop), 8-byte aligned loads.
    big = rng.randbytes(64 << 20)
    assert M.Buffer.from_bytes(big).checksum() == M.checksum_reference(big)


def test_checksum_kernel_path_boundaries_match_host_reference() -> None:
    """Sizes at the edges of the kernel's paths (csrc/checksum.cu): 16-byte loads of word pairs, 4 pairs
    in flight per thread, the tail words read one by one, and the grid-stride loop of a grid of
    (blocks per SM) x SMs blocks of 256 threads. The kernel takes blocks per SM from its occupancy (8
    on sm_90 and gfx90a); a range is covered so that a different occupancy is covered too."""
    dev = M.devices()[0]
    units = int(dev["multiprocessors"])
    words = {15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256, 257, 1023, 1024, 1025, 2047, 2048, 2049}
    for per_unit in (1, 2, 4, 8, 16):
        threads = units * per_unit * 256
        # pairs per thread: 1 (one pass, no unrolled round), 4 (exactly one unrolled round),
        # 5 (a round and a remainder), 8 (two rounds)
        for pairs in (1, 4, 5, 8):
            w = 2 * threads * pairs
            words |= {w - 1, w, w + 1}
    pool = random.Random(11).randbytes(8 * max(words) + 8)
    checked = 0
    for w in sorted(words):
        deltas = (-7, -1, 0, 1, 7) if w < 4096 else (-1, 0, 1)
        for size in sorted({8 * w + d for d in deltas}):
            data = pool[:size]
            ref = M.checksum_reference(data)
            assert M.Buffer.from_bytes(data).checksum() == ref, (w, size)
            checked += 1
    # The one-shot path (bytes copied to a device buffer of their own) runs the same kernel.
    assert M.checksum(pool[: 8 * 33 + 3]) == M.checksum_reference(pool[: 8 * 33 + 3])
    print(f"checksum path boundaries: {checked} sizes up to {max(words) * 8 >> 20} MiB ({units} SMs/CUs)")


def test_checksum_from_concurrent_threads_matches_host_reference() -> None:
    """Rank threads call the checksum concurrently, each on its own stream (the bridge's per-call
    device accumulator must not be shared between calls in flight)."""
    rng = random.Random(5)
    datas = [rng.randbytes(rng.randrange(1, 3 << 20)) for _ in range(24)]
    refs = [M.checksum_reference(d) for d in datas]
    bufs = [M.Buffer.from_bytes(d) for d in datas]
    errors: list[str] = []

    def worker(first: int) -> None:
        stream = M.Stream()
        try:
            for rep in range(20):
                i = (first + rep) % len(bufs)
                if bufs[i].checksum(stream) != refs[i]:
                    errors.append(f"thread {first} buffer {i} ({len(datas[i])} bytes)")
        except BaseException as err:  # reported below
            errors.append(f"thread {first}: {type(err).__name__}: {err}")

    # more threads than the bridge keeps accumulator slots for (32 per device)
    threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_S)
    assert not any(t.is_alive() for t in threads), "checksum threads hung"
    assert errors == []


def test_stream_and_event_time_device_work() -> None:
    s = M.Stream()
    a, b = M.Event(), M.Event()
    buf = M.Buffer(256 << 20)
    a.record(s)
    buf.fill(1)
    b.record(s)
    b.synchronize()
    assert a.elapsed_time(b) >= 0.0


def _values(dtype: str) -> tuple[bytes, Callable[[bytes], list[float]]]:
    vals = [1.0, -2.5, 3.0, 0.25]
    if dtype == "f32":
        return struct.pack("<4f", *vals), lambda d: list(struct.unpack("<4f", d))
    if dtype == "f16":
        return struct.pack("<4e", *vals), lambda d: list(struct.unpack("<4e", d))
    if dtype == "bf16":
        return (
            b"".join(struct.pack("<f", v)[2:] for v in vals),
            lambda d: [struct.unpack("<f", b"\0\0" + d[i : i + 2])[0] for i in range(0, len(d), 2)],
        )
    return struct.pack("<4i", 1, -2, 3, 7), lambda d: [float(x) for x in struct.unpack("<4i", d)]


def test_single_rank_all_reduce() -> None:
    needs_collectives()
    with M.Communicator(M.Communicator.unique_id(), 1, 0, device=0) as comm:
        for dtype in ("f32", "f16", "bf16", "i32"):
            for op in ("sum", "max", "min", "avg"):
                data, decode = _values(dtype)
                buf = M.Buffer.from_bytes(data, device=0)
                comm.all_reduce(buf, op=op, dtype=dtype)
                assert decode(buf.to_bytes()) == decode(data), (dtype, op)
        b = M.Buffer.from_bytes(b"x" * 100, device=0)
        comm.broadcast(b, root=0)
        comm.barrier()
        assert b.to_bytes() == b"x" * 100
    assert M.all_reduce_single_rank([1.0, 2.0]) == [1.0, 2.0]


def _two_ranks(body: Callable[[int, Any], Any]) -> list[Any]:
    uid = M.Communicator.unique_id()
    comms: list[Any] = [None, None]
    out: list[Any] = [None, None]
    errs: list[BaseException | None] = [None, None]

    def worker(rank: int) -> None:
        try:
            comms[rank] = M.Communicator(uid, 2, rank, device=rank)
            out[rank] = body(rank, comms[rank])
        except BaseException as err:  # reported below
            errs[rank] = err

    threads = [threading.Thread(target=worker, args=(r,), daemon=True) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_S)
    if any(t.is_alive() for t in threads):
        for c in comms:
            if c is not None:
                c.abort()
        raise AssertionError(f"ranks hung: {out} {errs}")
    for rank, err in enumerate(errs):
        if err is not None:
            raise AssertionError(f"rank {rank}: {type(err).__name__}: {err}") from err
    for c in comms:
        c.destroy()
    return out


def test_two_rank_transfer() -> None:
    if GPUS < 2:
        skip(f"a two-rank transfer needs two GPUs (NCCL/RCCL refuse two ranks on one); this machine has {GPUS}")
    needs_collectives()
    sizes = {"w1": 48 << 20, "w2": (17 << 20) + 5, "bias": 12, "empty": 0}
    staging = 4 << 20

    def body(rank: int, comm: Any) -> tuple[Any, ...]:
        rng = random.Random(rank)
        before = {n: rng.randbytes(s) for n, s in sizes.items()}
        bufs = {n: M.Buffer.from_bytes(d, device=rank) for n, d in before.items()}
        report = M.transfer_state(comm, bufs, donor=0, receiver=1, staging_bytes=staging)
        after = {n: b.checksum() for n, b in bufs.items()}

        def corrupt(name: str, offset: int, nbytes: int) -> None:
            if rank == 0 and name == "w1" and offset == 2 * staging:
                bufs["w1"].copy_from(b"\xff" * 64, offset=offset + 8)

        kept = {n: b.checksum() for n, b in bufs.items()}
        try:
            M.transfer_state(comm, bufs, donor=0, receiver=1, staging_bytes=staging, progress=corrupt)
            mismatch: list[str] = []
        except M.ChecksumMismatch as err:
            mismatch = list(err.buffers)
        unchanged = {n: b.checksum() for n, b in bufs.items()} == kept or rank == 0
        return report, after, {n: M.checksum_reference(d) for n, d in before.items()}, mismatch, unchanged

    (rep0, after0, ref0, mis0, _), (rep1, after1, _, mis1, unchanged1) = _two_ranks(body)
    assert after1 == after0 == ref0
    assert rep0["chunks"] == rep1["chunks"] == sum(-(-s // staging) for s in sizes.values())
    assert mis0 == mis1 == ["w1"] and unchanged1
    print(f"transfer: {rep1['bytes'] / rep1['seconds'] / 1e9:.2f} GB/s over {rep1['chunks']} chunks")


def test_two_rank_transfer_odd_chunks() -> None:
    """Chunks of an odd number of words: each chunk's partial checksum starts at an odd word offset and,
    with device shadows, at an address 8 bytes past a 16-byte boundary (the kernel's lone head word)."""
    if GPUS < 2:
        skip(f"a two-rank transfer needs two GPUs (NCCL/RCCL refuse two ranks on one); this machine has {GPUS}")
    needs_collectives()
    chunk = 8 * ((1 << 16) + 1)
    staging = chunk + 3  # rounded down to whole words by transfer_state
    sizes = {"a": 3 * chunk + 5, "b": chunk, "c": chunk - 1, "d": 13, "e": 2 * chunk + 8, "f": 8 * 33}

    def body(rank: int, comm: Any) -> list[Any]:
        rng = random.Random(100 + rank)
        out = []
        for shadow in ("device", "host"):
            before = {n: rng.randbytes(s) for n, s in sizes.items()}
            bufs = {n: M.Buffer.from_bytes(d, device=rank) for n, d in before.items()}
            M.transfer_state(comm, bufs, donor=0, receiver=1, staging_bytes=staging, shadow=shadow)
            out.append(
                ({n: b.checksum() for n, b in bufs.items()}, {n: M.checksum_reference(d) for n, d in before.items()})
            )
        return out

    donor, receiver = _two_ranks(body)
    for (after0, ref0), (after1, _) in zip(donor, receiver):
        assert after1 == after0 == ref0


def _torch_cuda() -> Any:
    try:
        import torch  # noqa: PLC0415 - optional: the GPU image has it, the wheel does not need it
    except ImportError:
        skip("torch is not installed")
    if not torch.cuda.is_available():
        skip("torch sees no CUDA/ROCm device")
    return torch


def _host_bytes(t: Any) -> bytes:
    """The bytes of a torch tensor, through the host (no numpy needed)."""
    import ctypes  # noqa: PLC0415

    cpu = t.detach().contiguous().cpu()
    return ctypes.string_at(cpu.data_ptr(), cpu.numel() * cpu.element_size())


def test_from_dlpack_torch_cuda_tensor_is_zero_copy() -> None:
    torch = _torch_cuda()
    t = torch.arange(1 << 20, dtype=torch.float32, device="cuda:0").reshape(256, 4096)
    b = M.from_dlpack(t)
    assert b.data_ptr == t.data_ptr() and b.nbytes == t.numel() * 4, (b.data_ptr, t.data_ptr())
    assert (b.device, b.dtype, tuple(b.shape), b.read_only) == (0, "float32", (256, 4096), False)
    assert b.owner is t
    b.fill(0)  # through the Buffer: the tensor's own memory
    torch.cuda.synchronize()
    assert int(t.abs().sum().item()) == 0
    back = torch.from_dlpack(b)  # and the other way: torch views the Buffer's memory
    assert back.data_ptr() == t.data_ptr() and back.device == t.device
    plain = M.Buffer(64, device=0)
    view = torch.from_dlpack(plain)
    assert view.data_ptr() == plain.data_ptr and view.dtype == torch.uint8 and view.is_cuda
    # Errors: host memory on a GPU build, a non-contiguous tensor, a dtype the collectives cannot reduce.
    for bad, words in (
        (torch.zeros(4), "host memory"),
        (t.t(), "not contiguous"),
    ):
        try:
            M.from_dlpack(bad)
        except ValueError as err:
            assert words in str(err), err
        else:
            raise AssertionError(f"accepted: {words}")
    try:
        import cupy  # noqa: PLC0415 - optional
    except ImportError:
        return
    c = cupy.arange(1000, dtype=cupy.int32)
    cb = M.from_dlpack(c)
    assert cb.data_ptr == c.data.ptr and cb.dtype == "int32"
    assert cb.checksum() == M.checksum_reference(c.get().tobytes())


def test_device_checksum_of_torch_tensor_matches_host_reference() -> None:
    torch = _torch_cuda()
    g = torch.Generator(device="cuda").manual_seed(3)
    cases = [
        (((1 << 22) + 3,), torch.float32),
        ((4096, 1027), torch.bfloat16),
        ((17,), torch.float16),
        ((), torch.int64),
        ((0, 5), torch.float32),
    ]
    for shape, dtype in cases:
        t = (torch.randn(shape, generator=g, device="cuda") * 100).to(dtype)
        assert M.from_dlpack(t).checksum() == M.checksum_reference(_host_bytes(t)), (shape, dtype)
    # Offset views (byte_offset or a shifted data pointer): the kernel's unaligned head words.
    base = torch.randn(1 << 16, generator=g, device="cuda")
    for start in (1, 2, 3, 5):
        v = base[start:]
        assert M.from_dlpack(v).checksum() == M.checksum_reference(_host_bytes(v)), start


def test_two_rank_transfer_of_a_torch_state_dict() -> None:
    """transfer_state with torch tensors, nested like model + optimizer state_dicts, straight into the
    receiver's own tensors (same data pointers)."""
    if GPUS < 2:
        skip(f"a two-rank transfer needs two GPUs (NCCL/RCCL refuse two ranks on one); this machine has {GPUS}")
    needs_collectives()
    torch = _torch_cuda()

    def body(rank: int, comm: Any) -> tuple[Any, ...]:
        g = torch.Generator(device=f"cuda:{rank}").manual_seed(rank)
        dev = f"cuda:{rank}"
        state = {
            "model": {
                "w": torch.randn(1024, 1024, generator=g, device=dev),
                "b": torch.randn(1024, generator=g, device=dev),
            },
            "optim": {
                "state": {0: {"step": 10 + rank, "exp_avg": torch.randn(1024, 1024, generator=g, device=dev)}},
                "param_groups": [{"lr": 0.1 * (rank + 1), "params": [0]}],
            },
        }
        ptrs = [state["model"]["w"].data_ptr(), state["optim"]["state"][0]["exp_avg"].data_ptr()]
        report = M.transfer_state(comm, state, donor=0, receiver=1, staging_bytes=4 << 20)
        sums = {n: M.from_dlpack(t).checksum() for n, t in (("w", state["model"]["w"]), ("b", state["model"]["b"]))}
        return report, sums, ptrs

    (rep0, sums0, _), (rep1, sums1, ptrs1) = _two_ranks(body)
    assert (rep0["role"], rep1["role"]) == ("donor", "receiver")
    assert sums0 == sums1
    got = rep1["state"]
    assert [got["model"]["w"].data_ptr(), got["optim"]["state"][0]["exp_avg"].data_ptr()] == ptrs1
    assert got["optim"]["state"][0]["step"] == 10 and got["optim"]["param_groups"][0]["lr"] == 0.1


def _main() -> int:
    """Runs the tests without pytest: prints PASS/SKIP/FAIL per test, exit status 1 on a failure."""
    if GPUS == 0:
        print(f"SKIP all: no GPU ({WHY})")
        return 0
    failed = 0
    for name, fn in sorted(globals().items()):
        if not (name.startswith("test_") and callable(fn)):
            continue
        try:
            fn()
            print(f"PASS {name}")
        except BaseException as err:  # the runner reports every outcome
            if isinstance(err, Skip) or type(err).__name__ == "Skipped":  # ours, or pytest.skip's
                print(f"SKIP {name}: {err}")
            elif isinstance(err, KeyboardInterrupt):
                raise
            else:
                failed += 1
                print(f"FAIL {name}: {type(err).__name__}: {err}")
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(_main())
