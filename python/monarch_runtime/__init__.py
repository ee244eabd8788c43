"""monarch-runtime: GPU building blocks for checkpoint-less recovery, one API on CPU, CUDA and ROCm.

>>> import monarch_runtime as m
>>> m.build_info()["platform"]   # "cpu", "cuda" or "rocm"

The API (docs/runtime.md): ``devices()``, ``Buffer``, ``from_dlpack``, ``Stream``, ``Event``,
``Communicator``, ``checksum``, ``transfer_state``. On the CPU build every call works on host memory
and communicators connect threads or processes of one machine (loopback TCP); on a GPU build the
same calls run on the device with NCCL/RCCL.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

from monarch_runtime import _hip_runtime


@lru_cache(maxsize=1)
def _recorded() -> dict[str, Any]:
    text = resources.files(__name__).joinpath("build_info.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


def _needed_hip_runtime() -> str | None:
    """The HIP runtime soname a ROCm build links (build_info.json), None on other builds."""
    try:
        value = _recorded().get("hip_runtime")
    except OSError:
        return None
    return value if isinstance(value, str) else None


# Before the extension loads: bind it to the HIP runtime a ROCm torch in this environment would use, so the
# process never maps two (see _hip_runtime.py). Set once, at import.
_HIP_PRELOADED = _hip_runtime.preload(_needed) if (_needed := _needed_hip_runtime()) else None

from monarch_runtime import _native, _state  # noqa: E402 - after the HIP runtime choice, on purpose
from monarch_runtime._native import (  # noqa: E402
    PLATFORM,
    ChecksumMismatch,
    CollectiveError,
    CollectiveNoDeviceError,
    CommunicatorAborted,
    Event,
    MonarchError,
    NoDeviceError,
    Stream,
    TransferAborted,
    TransferError,
    all_reduce_single_rank,
    device_count,
    device_properties,
    kernels,
    launch_kernel,
)
from monarch_runtime._native import checksum as _checksum  # noqa: E402
from monarch_runtime._native import checksum_reference as _checksum_reference  # noqa: E402
from monarch_runtime._native import collective_info as _collective_info  # noqa: E402

__all__ = [
    "DEFAULT_STAGING_BYTES",
    "PLATFORM",
    "Buffer",
    "ChecksumMismatch",
    "CollectiveError",
    "CollectiveNoDeviceError",
    "Communicator",
    "CommunicatorAborted",
    "Event",
    "MonarchError",
    "NoDeviceError",
    "Stream",
    "TransferAborted",
    "TransferError",
    "all_reduce_single_rank",
    "build_info",
    "checksum",
    "checksum_reference",
    "device_count",
    "device_properties",
    "devices",
    "from_dlpack",
    "kernels",
    "launch_kernel",
    "transfer_state",
]

#: Default chunk (and receiver staging) size of ``transfer_state``: 64 MiB.
DEFAULT_STAGING_BYTES = 64 << 20

Progress = Callable[[str, int, int], object]


def build_info() -> dict[str, Any]:
    """How this wheel was built (platform, archs, toolkit, collective library), plus the collective
    library's run-time state: whether it loads here and its version (e.g. 23203 for NCCL 2.32.3)."""
    info = dict(_recorded())
    info["native_platform"] = PLATFORM
    if info.get("platform") == "rocm":
        info["hip_runtime_loaded"] = _hip_runtime.mapped()  # the file(s) this process maps: one
    collective = _collective_info()
    info["collective_loaded"] = collective["loaded"]
    info["collective_version"] = collective["version"]
    if collective["error"]:
        info["collective_error"] = collective["error"]
    return info


def devices() -> list[dict[str, Any]]:
    """Every visible GPU: index, name, arch (``sm_90``, ``gfx90a``...), total_memory, free_memory,
    warp_size, multiprocessors, major, minor. ``[]`` on the CPU build; NoDeviceError on a GPU build
    without a usable GPU."""
    return list(_native.devices())


def _bytes_view(data: Any) -> memoryview:
    view = memoryview(data)
    return view if view.format == "B" and view.ndim == 1 and view.c_contiguous else view.cast("B")


def _as_bytes(data: Any) -> bytes:
    return data if isinstance(data, bytes) else bytes(_bytes_view(data))


class Buffer(_native.Buffer):  # type: ignore[misc]
    """Device memory (host memory on the CPU build), zero-filled: ``Buffer(nbytes, device=None)``;
    or a tensor's own memory, wrapped without a copy: ``from_dlpack(x)``.

    Copy in and out with any bytes-like object (the buffer protocol: bytes, bytearray, memoryview,
    array.array, numpy arrays); ``numpy()`` needs numpy, nothing else does. A Buffer is a DLPack
    producer itself (``__dlpack__``, ``__dlpack_device__``): ``numpy.from_dlpack(buf)`` or
    ``torch.from_dlpack(buf)`` view its memory without a copy. ``dtype``, ``shape``: the wrapped
    tensor's (``"uint8"``, ``(nbytes,)`` for a plain buffer); ``read_only``; ``data_ptr``."""

    @classmethod
    def from_bytes(cls, data: Any, device: int | None = None) -> Buffer:
        """A new buffer holding a copy of ``data`` (any bytes-like object, numpy arrays included)."""
        view = _bytes_view(data)
        buf = cls(view.nbytes, device)
        buf.copy_from(view)
        return buf

    def copy_from(self, data: Any, offset: int = 0) -> None:
        """Copies a bytes-like object into the buffer at byte ``offset``."""
        self._write(_as_bytes(data), offset)

    def copy_to(self, out: Any = None, offset: int = 0) -> Any:
        """Copies the buffer from ``offset`` into the writable bytes-like ``out`` (as many bytes as it
        holds) and returns it; with no ``out``, returns the bytes from ``offset`` to the end."""
        if out is None:
            return self._read(offset)
        view = _bytes_view(out)
        view[:] = self._read(offset, view.nbytes)
        return out

    def to_bytes(self) -> bytes:
        return bytes(self._read())

    def numpy(self, dtype: Any = "uint8") -> Any:
        """A numpy copy of the buffer viewed as ``dtype`` (requires numpy)."""
        try:
            import numpy as np  # noqa: PLC0415 - optional dependency
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError("Buffer.numpy() needs numpy; copy_to()/to_bytes() do not") from err
        return np.frombuffer(self._read(), dtype=dtype).copy()

    def __repr__(self) -> str:
        view = f" viewing a {self.dtype} tensor of shape {tuple(self.shape)}" if self.is_view else ""
        ro = " read-only" if self.read_only else ""
        return f"<monarch_runtime.Buffer {self.nbytes} bytes on device {self.device} ({PLATFORM}){view}{ro}>"


def from_dlpack(tensor: Any) -> Buffer:
    """The memory of ``tensor`` (any DLPack producer: a numpy array on the CPU build, a torch or CuPy
    tensor on GPU builds) as a Buffer, without copying; the producer is kept alive as long as the
    Buffer (``buf.owner``). Writes through the Buffer (a receive, a transfer's commit) change the
    tensor. The versioned DLPack 1.x protocol is asked for first, the legacy one accepted.

    Raises ``ValueError`` naming the problem for a tensor on another device (or host memory given to
    a GPU build), a non-contiguous tensor, a dtype that is not whole bytes per element (vector and
    sub-byte types), and ``TypeError`` for an object that is not a DLPack producer. A read-only array
    gives a read-only Buffer, which refuses to be written (``ValueError``). A Buffer is returned as is.
    """
    if isinstance(tensor, Buffer):
        return tensor
    return Buffer(_dlpack=tensor)


class Communicator(_native.Communicator):  # type: ignore[misc]
    """One rank of a communicator: ``Communicator(unique_id, world_size, rank, device=None)``.

    ``Communicator.unique_id()`` makes the id: 128 bytes to give every rank, in this process or
    another (by file, environment or pipe: ``uid.hex()`` / ``bytes.fromhex``); the constructor blocks
    until all ranks joined. Operations block until done with the GIL released; ``abort()`` from
    another thread frees a blocked one. NCCL on CUDA, RCCL on ROCm; on the CPU build the ranks are
    threads or processes of this machine (loopback TCP between processes; the process that made the
    id must be alive while the ranks join; ``MONARCH_HOST_COMM_TIMEOUT`` bounds the join, default
    120 s, and the error names the ranks that never came). Usable as a context manager (destroyed
    on exit)."""

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()

    def __repr__(self) -> str:
        state = "aborted" if self.aborted else ("live" if self.live else "destroyed")
        return f"<monarch_runtime.Communicator rank {self.rank}/{self.world_size} device {self.device} {state}>"


def checksum(data: Any) -> int:
    """mr-sum64 of a Buffer (in place, by the device kernel) or of a bytes-like object (copied to the
    device first); the host reference on the CPU build. Equals ``checksum_reference`` bit for bit."""
    if isinstance(data, _native.Buffer):
        return int(data.checksum())
    return int(_checksum(_as_bytes(data)))


def checksum_reference(data: Any) -> int:
    """mr-sum64 computed by the host reference (docs/design.md); a Buffer is read back first."""
    if isinstance(data, _native.Buffer):
        data = data._read()
    return int(_checksum_reference(_as_bytes(data)))


def transfer_state(
    comm: Communicator,
    state: Mapping[Any, Any],
    *,
    donor: int,
    receiver: int,
    staging_bytes: int = DEFAULT_STAGING_BYTES,
    progress: Progress | None = None,
    timeout: float | None = None,
    shadow: str = "auto",
) -> dict[str, Any]:
    """Moves a training state from rank ``donor`` to rank ``receiver`` of ``comm``.

    ``state`` is a mapping, nested as deep as needed (a model's or an optimizer's ``state_dict()``,
    or a dict of both), whose leaves are tensors (any DLPack producer, or Buffers) or plain values
    (step counters, learning rates, small bytes: see ``monarch_runtime._state``). Tensors are wrapped
    with ``from_dlpack``: no copy; a leaf's name is its dotted path (``"model.layer.0.weight"``).
    Both ranks call it with states of the same structure (other ranks return at once, role
    ``"idle"``).

    Before any data moves each side sends its manifest (every leaf's name, kind, dtype, shape and
    size) and both compare the two: a difference is a ``TransferError`` on both ranks naming the
    first differing leaf. The donor checksums its tensors on the device and streams them in chunks
    of at most ``staging_bytes`` (pass the same value on both ranks). The receiver keeps what
    arrives in a *shadow* (``shadow="host"``, ``"device"`` or ``"auto"``, see docs/runtime.md),
    verifies each tensor's mr-sum64, and only when all match copies the shadow into its own tensors,
    in place (``shadow="none"``: no shadow, straight into the receiver's tensors, for scratch targets
    only: a failed transfer leaves them partly written, and the guarantees below do not hold). So:

    - ``ChecksumMismatch`` (``.buffers`` names the leaves) on both ranks if a tensor arrived
      different; the receiver's tensors are unchanged and the communicator stays usable;
    - ``TransferAborted`` if the communicator is aborted (by either rank, a watchdog, ``timeout``) or
      the peer fails or dies mid-transfer; the receiver's tensors are unchanged (bit for bit);
    - ``TransferError`` if the two states differ (names, kinds, dtypes, shapes, sizes), or the
      receiver cannot take them (a read-only target, different ``staging_bytes``).

    ``progress(name, offset, nbytes)`` is called before each chunk is sent (donor) and after each is
    received (receiver); if it raises, the communicator is aborted (so the peer does not hang) and
    the exception propagates. ``timeout`` (seconds) arms a watchdog that aborts the communicator if
    this rank's part has not finished by then: ``TransferAborted`` saying it timed out.

    Returns a report: role, peer, buffers (tensor leaves), bytes, chunks, chunk_bytes, seconds,
    shadow, checksums (name -> the donor's mr-sum64), values (name -> the donor's non-tensor leaves,
    on the receiver) and ``state``: on the receiver, ``state``'s own structure holding its own
    tensors (now the donor's data) and the donor's values, ready for ``load_state_dict``; on the
    donor and idle ranks, ``state`` itself.
    """
    leaves = _state.flatten(state, _native.Buffer)
    items: list[tuple[str, Any]] = []
    for name, _path, leaf, tensor in leaves:
        if not tensor:
            items.append((name, _state.encode_value(leaf, name)))
            continue
        try:
            items.append((name, from_dlpack(leaf)))
        except (TypeError, ValueError, BufferError) as err:
            raise type(err)(f"leaf {name!r}: {err}") from err
    report = _run_transfer(
        comm,
        items,
        donor=donor,
        receiver=receiver,
        staging_bytes=staging_bytes,
        progress=progress,
        timeout=timeout,
        shadow=shadow,
    )
    values = {name: _state.decode_value(data) for name, data in report.get("values", {}).items()}
    report["values"] = values
    report["state"] = _state.rebuild(state, values, _native.Buffer) if report["role"] == "receiver" else state
    return report


def _run_transfer(
    comm: Communicator,
    items: list[tuple[str, Any]],
    *,
    donor: int,
    receiver: int,
    staging_bytes: int,
    progress: Progress | None,
    timeout: float | None,
    shadow: str,
) -> dict[str, Any]:
    if timeout is None:
        return dict(comm._transfer_state(items, donor, receiver, staging_bytes, progress, shadow))
    if timeout <= 0:
        raise ValueError(f"timeout must be positive seconds, not {timeout}")
    fired = threading.Event()

    def expire() -> None:
        fired.set()
        comm.abort()

    watchdog = threading.Timer(timeout, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        return dict(comm._transfer_state(items, donor, receiver, staging_bytes, progress, shadow))
    except CollectiveError as err:
        if not fired.is_set():
            raise
        timed_out = TransferAborted(f"state transfer timed out after {timeout} s and aborted the communicator: {err}")
        timed_out.result = getattr(err, "result", None)
        timed_out.result_name = getattr(err, "result_name", None)
        raise timed_out from err
    finally:
        watchdog.cancel()
        # The timer thread is gone when this returns (callers count threads: no stragglers).
        if watchdog.is_alive() and watchdog is not threading.current_thread():
            watchdog.join()
