"""Peer recovery inside TorchFT: ``PeerTransport``, a ``torchft`` ``CheckpointTransport`` that heals a
recovering replica with ``transfer_state`` (checked on both sides, checksummed, abort-safe).

    from monarch_runtime.torchft import PeerTransport

    manager = torchft.Manager(..., checkpoint_transport=PeerTransport(
        timeout=timedelta(seconds=60),
        state_dict=lambda: manager._manager_state_dict(),   # optional: receive in place, as PGTransport's
    ))

Needs ``pip install monarch-runtime[torchft]`` (torch, torchft); ``import monarch_runtime`` alone never
imports torch. How a heal goes (docs/runtime.md, "Use with TorchFT"):

1. Every replica's ``metadata()`` (TorchFT calls it at each quorum) opens, if it has none, a listening
   socket and returns its address and a fresh random token; the Manager hands the donor's to the
   recovering replicas.
2. Each receiver makes a fresh communicator id (``Communicator.unique_id()``) and sends it to the donor
   with the token and the step it expects. The donor checks token and step (a differing step is a
   ``StepMismatch`` on both sides), and answers with its step and the state's skeleton: the tree of the
   state, each tensor's dtype and shape.
3. Donor and receiver join that id (a communicator of two, fresh per heal: NCCL/RCCL on GPU builds, the
   loopback process communicator on the CPU build) and run ``transfer_state``. Several receivers are
   served at once, each on its own communicator. The receiver's tensors are written only when every
   one arrived with the donor's checksum: copied in from a shadow (``commit="copy"``), or, with
   ``commit="swap"``, taking over the memory they were received in where that cannot be observed.
4. ``disallow_checkpoint()`` closes the listener (no later receiver can connect) and aborts any
   transfer still running (its receiver keeps its own state); ``shutdown()`` does the same for good.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar, cast

try:
    import torch
    from torch.utils import _pytree as pytree
    from torchft.checkpointing.transport import CheckpointTransport  # type: ignore[import-untyped]
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"monarch_runtime.torchft needs torch and torchft ({err}): pip install 'monarch-runtime[torchft]'"
    ) from err

import monarch_runtime as m
from monarch_runtime import _state

__all__ = ["PeerTransport", "StepMismatch"]

T = TypeVar("T")

#: What the metadata and the handshake say they are (a metadata string of another transport is refused).
PROTOCOL = "monarch_runtime.PeerTransport/1"
#: The largest handshake message accepted (the skeleton of a very large state is a few MiB).
MESSAGE_LIMIT = 256 << 20
#: How often a donor waiting for receivers looks whether it was told to stop.
POLL_S = 0.2
#: How a receiver's own tensors take the verified state (``PeerTransport(commit=...)``).
COMMITS = ("copy", "swap")

Progress = Callable[[str, int, int], object]


class StepMismatch(m.TransferError):  # type: ignore[misc]
    """The donor sends one step and the receiver expects another: raised on both, before any data moves."""


@dataclass
class _Listener:
    sock: socket.socket
    host: str
    port: int
    token: str


@dataclass
class _Leaf:
    """One leaf of a state as it goes on the wire: ``wire`` is what transfer_state sees (the tensor itself,
    or a contiguous copy on the transport's device), ``target`` the tensor the data ends up in."""

    name: str
    value: Any
    wire: Any = None
    target: Any = None
    #: ``wire`` is the transport's own (a fresh allocation or a staging copy), no one else's state.
    scratch: bool = False
    #: ``wire`` is a receive buffer the transport keeps between heals (``commit="swap"``).
    kept: bool = False

    @property
    def tensor(self) -> bool:
        return self.wire is not None

    @property
    def staged(self) -> bool:
        return self.target is not None and self.target is not self.wire

    def describe(self) -> list[Any]:
        """The leaf in the skeleton a donor sends: ``[name]`` for a value, ``[name, dtype, shape]``."""
        if not self.tensor:
            return [self.name]
        return [self.name, str(self.wire.dtype).removeprefix("torch."), list(self.wire.shape)]


def _leaf_name(path: tuple[Any, ...]) -> str:
    parts = []
    for key in path:
        for attr in ("key", "idx", "name"):
            if hasattr(key, attr):
                parts.append(str(getattr(key, attr)))
                break
        else:
            parts.append(str(key))
    return ".".join(parts)


def _seconds(timeout: timedelta | float) -> float:
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    if seconds <= 0:
        raise ValueError(f"timeout must be positive, not {timeout!r}")
    return seconds


def _left(deadline: float, what: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise m.TransferAborted(f"PeerTransport: timed out {what}")
    return left


def _send_message(sock: socket.socket, message: Mapping[str, Any]) -> None:
    data = json.dumps(message, separators=(",", ":")).encode("utf-8")
    sock.sendall(len(data).to_bytes(8, "little") + data)


def _recv_exact(sock: socket.socket, nbytes: int) -> bytes:
    chunks = []
    while nbytes:
        chunk = sock.recv(min(nbytes, 1 << 20))
        if not chunk:
            raise ConnectionError("the peer closed the connection")
        chunks.append(chunk)
        nbytes -= len(chunk)
    return b"".join(chunks)


def _recv_message(sock: socket.socket) -> dict[str, Any]:
    size = int.from_bytes(_recv_exact(sock, 8), "little")
    if size > MESSAGE_LIMIT:
        raise ConnectionError(f"a handshake message of {size} bytes (limit {MESSAGE_LIMIT}): not a PeerTransport")
    message = json.loads(_recv_exact(sock, size).decode("utf-8"))
    if not isinstance(message, dict) or message.get("protocol") != PROTOCOL:
        raise ConnectionError(f"not a {PROTOCOL} message")
    return message


class PeerTransport(CheckpointTransport[T]):  # type: ignore[misc]
    """TorchFT's ``CheckpointTransport`` over ``monarch_runtime.transfer_state``.

    ``timeout``: the default bound for a heal (TorchFT passes its own to each call, which wins).
    ``state_dict``: called on a receiver for its own state, in the form the donor sends (with a
    Manager: ``lambda: manager._manager_state_dict()``, as for TorchFT's ``PGTransport``); tensors found
    there under the donor's names are received in place (contiguous ones on the transport's device
    directly, others through a copy written back at the end), the rest are allocated. Either way a
    receiver's tensors change only once every tensor arrived intact.
    ``device``: the GPU to use on GPU builds (default: torch's current device); the CPU build uses host
    memory. ``host``: the address the donor listens on and advertises (default 127.0.0.1 on the CPU
    build, whose communicators are local; this machine's name on GPU builds).
    ``staging_bytes``, ``shadow``: as for ``transfer_state``. ``progress(name, offset, nbytes)``: called
    for each chunk, on both sides (progress bars; the tests inject faults with it).
    ``commit``: how the receiver's own tensors take the verified state. ``"copy"`` (default): received
    into a shadow, copied in. ``"swap"`` (host memory): received into buffers the transport keeps
    between heals; a tensor that nothing else can see the memory of (not a view, its storage its own
    and shared with no other tensor, torch's own memory, not exported to NumPy or DLPack, not shared
    or pinned, a leaf) takes over its buffer's memory (``set_``: the same object, ``requires_grad``,
    ``grad`` and hooks; a new address), and its old memory becomes the buffer of the next heal; the
    others are copied from theirs. Re-heals and retries then write into memory already mapped, at the
    cost of one copy of the received state held between heals (docs/runtime.md, "Use with TorchFT").

    After each send or receive, ``reports`` holds ``transfer_state``'s report for each receiver (without
    the state): bytes, chunks, seconds, checksums; on the receiver also ``commit``, ``swapped`` (the
    names of the tensors that took their buffer's memory) and ``copied`` (name -> why it was copied).
    """

    def __init__(
        self,
        timeout: timedelta | float = timedelta(seconds=60),
        *,
        state_dict: Callable[[], object] | None = None,
        device: torch.device | str | int | None = None,
        host: str | None = None,
        staging_bytes: int = m.DEFAULT_STAGING_BYTES,
        shadow: str = "auto",
        progress: Progress | None = None,
        commit: str = "copy",
    ) -> None:
        if commit not in COMMITS:
            raise ValueError(f"commit must be one of {', '.join(map(repr, COMMITS))}, not {commit!r}")
        self._timeout = _seconds(timeout)
        self._state_dict = state_dict
        self._device = self._check_device(device)
        self._bind_host = host or ("127.0.0.1" if m.PLATFORM == "cpu" else "")
        self._advertised_host = host or ("127.0.0.1" if m.PLATFORM == "cpu" else socket.getfqdn())
        if staging_bytes < 8:
            raise ValueError(f"staging_bytes must be at least 8, not {staging_bytes}")
        self._staging_bytes = staging_bytes
        self._shadow = shadow
        self._progress = progress
        self._commit = commit
        #: commit="swap": leaf name -> the receive buffer kept for the next heal (memory no one else sees).
        self._buffers: dict[str, torch.Tensor] = {}
        self._lock = threading.Lock()
        self._listener: _Listener | None = None
        self._live: dict[m.Communicator, bool] = {}  # communicator -> whether it sends
        self._serving: set[threading.Thread] = set()
        self._stopping = threading.Event()
        self._closed = False
        self.reports: list[dict[str, Any]] = []

    # -- devices ------------------------------------------------------------------------------------

    @staticmethod
    def _check_device(device: torch.device | str | int | None) -> torch.device | None:
        if device is None:
            return None
        dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
        if m.PLATFORM == "cpu" and dev.type != "cpu":
            raise ValueError(f"device {dev} on the CPU build of monarch_runtime: its communicators use host memory")
        if m.PLATFORM != "cpu" and dev.type != "cuda":
            raise ValueError(f"device {dev} on the {m.PLATFORM} build: pass a GPU (torch.device('cuda', i))")
        return dev

    def _torch_device(self) -> torch.device:
        if m.PLATFORM == "cpu":
            return torch.device("cpu")
        if self._device is not None and self._device.index is not None:
            return self._device
        return torch.device("cuda", torch.cuda.current_device())

    def _comm_device(self, dev: torch.device) -> int | None:
        return None if m.PLATFORM == "cpu" else (dev.index if dev.index is not None else torch.cuda.current_device())

    def _synchronize(self, dev: torch.device) -> None:
        # The runtime works on the device's default stream; TorchFT heals on a recovery stream.
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    # -- CheckpointTransport ------------------------------------------------------------------------

    def metadata(self) -> str:
        with self._lock:
            if self._closed:
                raise RuntimeError("PeerTransport.metadata() after shutdown()")
            if self._listener is None:
                family = socket.AF_INET6 if ":" in self._bind_host else socket.AF_INET
                sock = socket.create_server((self._bind_host, 0), family=family, backlog=64)
                sock.settimeout(POLL_S)
                self._listener = _Listener(sock, self._advertised_host, sock.getsockname()[1], secrets.token_hex(16))
                self._stopping.clear()
            where = self._listener
        return json.dumps({"protocol": PROTOCOL, "host": where.host, "port": where.port, "token": where.token})

    def send_checkpoint(self, dst_ranks: list[int], step: int, state_dict: T, timeout: timedelta) -> None:
        """Serves ``state_dict`` at ``step`` to ``len(dst_ranks)`` receivers, each on a communicator of its
        own and all at once; returns when every one was served. Raises the first receiver's error
        (``ChecksumMismatch``, ``TransferAborted``, ``StepMismatch``...) after all have finished, and
        ``TransferAborted`` if not all of them came within ``timeout``. A state that cannot be sent (a
        leaf transfer_state cannot carry) is refused to each receiver, and raised here."""
        self.reports = []
        if not dst_ranks:
            return
        deadline = time.monotonic() + _seconds(timeout or self._timeout)
        with self._lock:
            listener = None if self._closed else self._listener
        if listener is None:
            raise m.TransferError(
                "PeerTransport.send_checkpoint() with no metadata() published since the last "
                "disallow_checkpoint() or after shutdown(): receivers have nowhere to connect"
            )
        refusal: BaseException | None = None
        flat: dict[str, Any] = {}
        skeleton: dict[str, Any] = {}
        try:
            dev = self._torch_device()
            self._synchronize(dev)
            leaves, spec = self._donor_leaves(state_dict, dev)
            flat = {leaf.name: (leaf.wire if leaf.tensor else leaf.value) for leaf in leaves}
            skeleton = {"treespec": pytree.treespec_dumps(spec), "leaves": [leaf.describe() for leaf in leaves]}
        except Exception as err:
            refusal = err
        errors: list[BaseException] = []
        reports: list[dict[str, Any]] = []
        threads: list[threading.Thread] = []
        handled = 0
        try:
            while handled < len(dst_ranks):
                if self._stopping.is_set():
                    raise m.TransferAborted(
                        f"PeerTransport: disallow_checkpoint() or shutdown() while serving step {step} "
                        f"({handled} of {len(dst_ranks)} receivers came)"
                    )
                if time.monotonic() >= deadline:
                    raise m.TransferAborted(
                        f"PeerTransport: timed out waiting for receivers of step {step}: "
                        f"{handled} of {len(dst_ranks)} came (replica ranks {dst_ranks})"
                    )
                try:
                    conn, _ = listener.sock.accept()
                except (TimeoutError, socket.timeout):
                    continue
                except OSError as err:
                    raise m.TransferAborted(
                        f"PeerTransport: the listener closed while serving step {step}: {err}"
                    ) from None
                outcome = self._greet(conn, listener.token, step, skeleton, deadline, refusal=refusal)
                if outcome is None:
                    continue  # not a receiver of this quorum
                handled += 1
                if isinstance(outcome, BaseException):
                    errors.append(outcome)
                    continue
                thread = threading.Thread(
                    target=self._serve,
                    args=(outcome, flat, deadline, reports, errors),
                    name=f"monarch-peer-send-{handled}",
                )
                with self._lock:
                    self._serving.add(thread)
                thread.start()
                threads.append(thread)
        finally:
            for thread in threads:
                thread.join()
            with self._lock:
                self._serving.difference_update(threads)
            self.reports = reports
        if refusal is not None:
            raise refusal
        if errors:
            raise errors[0]

    def recv_checkpoint(self, src_rank: int, metadata: str, step: int, timeout: timedelta) -> T:
        """Receives the donor's state at ``step``; returns it in the donor's structure, holding this
        replica's own tensors (``state_dict``) where the names match, or fresh ones."""
        self.reports = []
        deadline = time.monotonic() + _seconds(timeout or self._timeout)
        where = self._parse_metadata(metadata, src_rank)
        dev = self._torch_device()
        comm_device = self._comm_device(dev)
        uid = m.Communicator.unique_id()
        reply = self._handshake(where, uid, step, src_rank, deadline)
        # commit="swap": the buffers kept from the last heal (taken, so that no other call uses them).
        spare = self._take_buffers() if self._commit == "swap" else None
        leaves: list[_Leaf] = []
        try:
            # The donor is joining now: join at once, and abort if anything fails here before the
            # transfer (the donor then fails at once instead of waiting for a transfer that never starts).
            self._synchronize(dev)
            comm = m.Communicator(uid, 2, 1, comm_device)
            try:
                self._track(comm, sending=False)
                try:
                    spec = pytree.treespec_loads(reply["skeleton"]["treespec"])
                    local = self._local_leaves()
                    leaves = [self._receiver_leaf(entry, local, dev, spare) for entry in reply["skeleton"]["leaves"]]
                except BaseException:
                    comm.abort()
                    raise
                flat = {leaf.name: (leaf.wire if leaf.tensor else None) for leaf in leaves}
                # When every tensor arrives in memory of the transport's own (nothing received in
                # place), that memory is the shadow: transfer_state needs no second one (a failure
                # drops it all).
                scratch_only = all(leaf.scratch for leaf in leaves if leaf.tensor)
                shadow = "none" if self._shadow == "auto" and scratch_only else self._shadow
                report = m.transfer_state(
                    comm,
                    flat,
                    donor=0,
                    receiver=1,
                    staging_bytes=int(reply["staging_bytes"]),
                    progress=self._progress,
                    timeout=_left(deadline, f"receiving step {step} from replica {src_rank}"),
                    shadow=shadow,
                )
            finally:
                self._untrack(comm)
                comm.destroy()
        except BaseException:
            if spare is not None:
                # Nothing was committed: this attempt's buffers are still the transport's alone, and
                # their pages are mapped: the retry receives into them.
                self._keep_buffers({**spare, **{leaf.name: leaf.wire for leaf in leaves if leaf.kept}})
            raise
        # Every tensor arrived with the donor's checksum: the staged ones go home.
        report.update(self._commit_staged(leaves))
        self._synchronize(dev)
        values = report["values"]
        report.pop("state", None)
        report["step"] = step
        self.reports = [report]
        out = [(leaf.target if leaf.tensor else values[leaf.name]) for leaf in leaves]
        return cast(T, pytree.tree_unflatten(out, spec))

    def disallow_checkpoint(self) -> None:
        """The state may change from now on: no receiver can connect any more (the listener is closed;
        the next ``metadata()`` opens a new one) and transfers still running are aborted (their
        receivers keep their own state). Returns once nothing is being sent."""
        self._stop()

    def shutdown(self, wait: bool = True) -> None:
        """Closes the listener and aborts what is running; nothing of the transport stays behind
        (``wait`` is accepted for TorchFT: serving threads are always joined by the call that started
        them, and aborting makes them return at once)."""
        with self._lock:
            self._closed = True
            self._buffers = {}
        self._stop(receives=True)

    # -- the parts ----------------------------------------------------------------------------------

    def _stop(self, receives: bool = False) -> None:
        """Closes the listener and aborts the running sends (and receives, for shutdown)."""
        with self._lock:
            listener, self._listener = self._listener, None
            live = [comm for comm, sending in self._live.items() if sending or receives]
            serving = list(self._serving)
            self._stopping.set()
        if listener is not None:
            listener.sock.close()
        for comm in live:
            comm.abort()
        # Aborted, they return at once: once they have, nothing of the state is being sent.
        for thread in serving:
            if thread is not threading.current_thread():
                thread.join()

    def _track(self, comm: m.Communicator, sending: bool) -> None:
        with self._lock:
            self._live[comm] = sending
            stopped = self._closed or (sending and self._stopping.is_set())
        if stopped:
            comm.abort()  # stopped while it was joining: it fails at once, the receiver keeps its state

    def _untrack(self, comm: m.Communicator) -> None:
        with self._lock:
            self._live.pop(comm, None)

    def _donor_leaves(self, state_dict: object, dev: torch.device) -> tuple[list[_Leaf], Any]:
        flat, spec = pytree.tree_flatten_with_path(state_dict)
        leaves = []
        for path, value in flat:
            name = _leaf_name(path)
            if isinstance(value, torch.Tensor):
                tensor = _plain(value, name).detach()
                wire = tensor if _direct(tensor, dev) else tensor.to(dev).contiguous()
                leaves.append(_Leaf(name, None, wire, tensor))
            else:
                _state.encode_value(value, name)  # a value transfer_state cannot carry: refused now
                leaves.append(_Leaf(name, value))
        return leaves, spec

    def _local_leaves(self) -> dict[str, Any]:
        if self._state_dict is None:
            return {}
        flat, _ = pytree.tree_flatten_with_path(self._state_dict())
        return {_leaf_name(path): value for path, value in flat if isinstance(value, torch.Tensor)}

    def _receiver_leaf(
        self, entry: list[Any], local: Mapping[str, Any], dev: torch.device, spare: dict[str, torch.Tensor] | None
    ) -> _Leaf:
        """Where one of the donor's leaves arrives: this replica's own tensor of that name (in place when
        transfer_state can use its memory, else through a copy written back at the end; with
        commit="swap", host tensors through a kept buffer, ``spare``) or a fresh one. An own tensor of
        another dtype or shape is handed to transfer_state as it is (or a buffer like it), which names
        the difference on both sides before any data moves."""
        name = str(entry[0])
        if len(entry) == 1:
            return _Leaf(name, None)  # a value: the donor's arrives in the manifest
        dtype = getattr(torch, str(entry[1]), None)
        if not isinstance(dtype, torch.dtype):
            raise m.TransferError(f"leaf {name!r}: the donor's dtype {entry[1]!r} is not a torch dtype here")
        shape = [int(d) for d in entry[2]]
        own = local.get(name)
        if own is None:
            fresh = _buffer(spare, name, shape, dtype, dev)
            return _Leaf(name, None, fresh, fresh, scratch=True)
        own = _plain(own, name)
        # (An inference tensor can be neither set_ nor copied into here: it stays with transfer_state.)
        if spare is not None and dev.type == "cpu" and own.device == dev and not own.is_inference():
            # The object itself is the target (not a detached alias): it is the one that takes the memory.
            buffer = _buffer(spare, name, list(own.shape), own.dtype, dev)
            return _Leaf(name, None, buffer, own, scratch=True, kept=True)
        own = own.detach()
        if _direct(own, dev):
            return _Leaf(name, None, own, own)
        return _Leaf(name, None, torch.empty(own.shape, dtype=own.dtype, device=dev), own, scratch=True)

    def _commit_staged(self, leaves: list[_Leaf]) -> dict[str, Any]:
        """Every tensor arrived intact: the staged ones go home (copied; with commit="swap" the targets
        nothing else can see the memory of take over their buffer's). Returns the report's ``commit``,
        ``swapped`` and ``copied`` (name -> why)."""
        swapped: list[str] = []
        copied: dict[str, str] = {}
        kept: dict[str, torch.Tensor] = {}
        baseline = _storage_refs(torch.empty(1)) if self._commit == "swap" else 0
        with torch.no_grad():
            for leaf in leaves:
                if not leaf.tensor or (leaf.target is leaf.wire and leaf.scratch):
                    continue  # a value, or a fresh tensor that is the caller's now
                why = "commit='copy'"
                if leaf.kept:
                    refusal = _swap_refusal(leaf.target, leaf.wire, baseline)
                    if refusal is None:
                        kept[leaf.name] = _take_memory(leaf.target, leaf.wire)
                        swapped.append(leaf.name)
                        continue
                    kept[leaf.name], why = leaf.wire, refusal
                elif self._commit == "swap" and leaf.target.is_inference():
                    why = "an inference tensor (received as with commit='copy')"
                elif self._commit == "swap":
                    why = f"{leaf.target.device} memory (swapped only in host memory, on the CPU build)"
                if leaf.staged:
                    leaf.target.copy_(leaf.wire)  # else received in place, through transfer_state's shadow
                copied[leaf.name] = why
        if self._commit == "swap":
            self._keep_buffers(kept)
        return {"commit": self._commit, "swapped": swapped, "copied": copied}

    def _take_buffers(self) -> dict[str, torch.Tensor]:
        with self._lock:
            spare, self._buffers = self._buffers, {}
        return spare

    def _keep_buffers(self, buffers: dict[str, torch.Tensor]) -> None:
        with self._lock:
            if not self._closed:
                self._buffers = buffers

    def _parse_metadata(self, metadata: str, src_rank: int) -> dict[str, Any]:
        try:
            where = json.loads(metadata)
            if not isinstance(where, dict) or where.get("protocol") != PROTOCOL:
                raise ValueError
            return {"host": str(where["host"]), "port": int(where["port"]), "token": str(where["token"])}
        except (ValueError, KeyError, TypeError):
            raise m.TransferError(
                f"PeerTransport: the metadata of replica {src_rank} is not a PeerTransport's ({metadata[:80]!r}): "
                "every replica of the job must use monarch_runtime.torchft.PeerTransport"
            ) from None

    def _handshake(
        self, where: Mapping[str, Any], uid: bytes, step: int, src_rank: int, deadline: float
    ) -> dict[str, Any]:
        donor = f"replica {src_rank} at {where['host']}:{where['port']}"
        hello = {"protocol": PROTOCOL, "token": where["token"], "step": step, "uid": uid.hex(), "pid": os.getpid()}
        try:
            with socket.create_connection(
                (where["host"], where["port"]), timeout=_left(deadline, f"connecting to {donor}")
            ) as sock:
                _send_message(sock, hello)
                sock.settimeout(_left(deadline, f"waiting for {donor} to answer"))
                reply = _recv_message(sock)
        except (OSError, ConnectionError, ValueError) as err:
            raise m.TransferAborted(
                f"PeerTransport: no answer from the donor, {donor}: {err} (it died, or no longer serves: "
                "disallow_checkpoint() closed its listener); this replica's state is unchanged"
            ) from None
        if not reply.get("ok"):
            error = StepMismatch if reply.get("kind") == "step" else m.TransferError
            raise error(f"PeerTransport: the donor, {donor}, refused: {reply.get('error')}")
        if int(reply["step"]) != step:
            raise StepMismatch(
                f"PeerTransport: the donor, {donor}, sends step {reply['step']}, this replica expects {step}"
            )
        return reply

    def _greet(
        self,
        conn: socket.socket,
        token: str,
        step: int,
        skeleton: Mapping[str, Any],
        deadline: float,
        *,
        refusal: BaseException | None,
    ) -> bytes | BaseException | None:
        """Reads one receiver's hello and answers it. Returns its communicator id (go ahead), an error
        (it was refused: it counts as served), or None (not a receiver of this quorum: a stale token, or
        not a PeerTransport)."""
        with conn:
            try:
                conn.settimeout(max(0.001, min(deadline - time.monotonic(), 30.0)))
                hello = _recv_message(conn)
                answer: dict[str, Any] = {"protocol": PROTOCOL, "ok": False, "step": step}
                if hello.get("token") != token:
                    answer["error"] = "the token is not this quorum's (metadata of an earlier quorum?)"
                    _send_message(conn, answer)
                    return None
                if int(hello["step"]) != step:
                    message = (
                        f"the donor sends step {step} and the receiver (pid {hello.get('pid')}) "
                        f"expects step {hello['step']}"
                    )
                    _send_message(conn, {**answer, "kind": "step", "error": message})
                    return StepMismatch(f"PeerTransport: {message}")
                if refusal is not None:
                    message = f"the donor cannot send its state: {type(refusal).__name__}: {refusal}"
                    _send_message(conn, {**answer, "kind": type(refusal).__name__, "error": message})
                    refused: BaseException = m.TransferError(f"PeerTransport: {message}")
                    return refused
                uid = bytes.fromhex(str(hello["uid"]))
                reply = {**answer, "ok": True, "skeleton": skeleton, "staging_bytes": self._staging_bytes}
                _send_message(conn, reply)
                return uid
            except (OSError, ConnectionError, ValueError, KeyError, TypeError):
                return None

    def _serve(
        self,
        uid: bytes,
        flat: Mapping[str, Any],
        deadline: float,
        reports: list[dict[str, Any]],
        errors: list[BaseException],
    ) -> None:
        try:
            comm = m.Communicator(uid, 2, 0, self._comm_device(self._torch_device()))
            try:
                self._track(comm, sending=True)
                report = m.transfer_state(
                    comm,
                    flat,
                    donor=0,
                    receiver=1,
                    staging_bytes=self._staging_bytes,
                    progress=self._progress,
                    timeout=_left(deadline, "sending"),
                    shadow=self._shadow,
                )
            finally:
                self._untrack(comm)
                comm.destroy()
            report.pop("state", None)
            with self._lock:
                reports.append(report)
        except BaseException as err:
            with self._lock:
                errors.append(err)


def _plain(tensor: torch.Tensor, name: str) -> torch.Tensor:
    if type(tensor) not in (torch.Tensor, torch.nn.Parameter):
        raise TypeError(
            f"leaf {name!r} is a {type(tensor).__name__}: PeerTransport moves plain tensors (not DTensor or "
            "other tensor subclasses)"
        )
    return tensor


def _buffer(
    spare: dict[str, torch.Tensor] | None, name: str, shape: list[int], dtype: torch.dtype, dev: torch.device
) -> torch.Tensor:
    """A receive buffer for leaf ``name``: the one kept from the last heal if it fits, else a fresh one."""
    kept = spare.pop(name, None) if spare is not None else None
    if kept is not None and kept.dtype == dtype and list(kept.shape) == shape and kept.device == dev:
        return kept
    return torch.empty(shape, dtype=dtype, device=dev)


def _storage_refs(tensor: torch.Tensor) -> int:
    """Python references to the tensor's storage object (compared with a fresh tensor's: a higher count
    means someone holds ``untyped_storage()``/``storage()`` of it, which would keep the old memory)."""
    storage = tensor.untyped_storage()
    return sys.getrefcount(storage)


def _swap_refusal(target: torch.Tensor, wire: torch.Tensor, baseline: int) -> str | None:
    """Why ``target`` cannot take over ``wire``'s memory without anyone seeing more than its data change
    (None: it can). Everything that may hold the old memory is refused: other tensors on it (views,
    detached aliases), references from C++ (DLPack exports, an autograd graph that saved it), the
    storage object held in Python, memory torch did not allocate or exported to NumPy/DLPack (its
    storage is then not resizable), shared or pinned memory."""
    if target.device != wire.device or target.device.type != "cpu":
        return f"{target.device} memory (swapped only in host memory)"
    if target.layout != torch.strided or target.is_conj() or target.is_neg():
        return "not a plain strided tensor"
    if target._base is not None:
        return "a view of another tensor"
    if target.storage_offset() != 0 or not target.is_contiguous():
        return "not contiguous from the start of its storage"
    if target.grad_fn is not None:
        return "not a leaf of autograd"
    if target.numel() == 0:
        return "empty"
    storage = target.untyped_storage()
    if storage.nbytes() != target.numel() * target.element_size():
        return "its storage holds more than the tensor"
    if not storage.resizable():
        return "memory torch did not allocate, or exported (NumPy .numpy(), DLPack, from_numpy, frombuffer)"
    if storage.is_shared():
        return "shared memory (other processes may map it)"
    if target.is_pinned():
        return "pinned memory"
    storage_uses = getattr(torch._C, "_storage_Use_Count", None)
    if storage_uses is None or not hasattr(target, "_use_count"):
        return f"torch {torch.__version__} cannot say who else uses the memory"
    if storage_uses(storage._cdata) != 2:  # the target and `storage` here
        return "its storage is shared with another tensor (a view, or a detached alias: Module.state_dict()'s)"
    if target._use_count() != 1:
        return "referenced from C++ (a DLPack export, an autograd graph that saved it, DDP's reducer)"
    del storage
    if _storage_refs(target) != baseline:
        return "its storage object is held (untyped_storage() or storage() of it)"
    return None


def _take_memory(target: torch.Tensor, wire: torch.Tensor) -> torch.Tensor:
    """``target`` (the same object, shape and strides: contiguous, so the bytes lie as in ``wire``) takes
    ``wire``'s memory; returns a tensor on its old memory, which no one else holds now
    (``_swap_refusal``): the next heal's buffer."""
    old = target.untyped_storage()
    target.set_(wire.untyped_storage(), 0, target.shape, target.stride())
    strides: list[int] = []  # row-major (the tensor is not empty: every size is at least 1)
    step = 1
    for size in reversed(target.shape):
        strides.insert(0, step)
        step *= size
    return torch.empty(0, dtype=target.dtype, device=target.device).set_(old, 0, target.shape, strides)


def _direct(tensor: torch.Tensor, dev: torch.device) -> bool:
    """Whether transfer_state can use the tensor's own memory (else it goes through a copy)."""
    return (
        tensor.is_contiguous()
        and tensor.device.type == dev.type
        and (dev.type == "cpu" or tensor.device.index == dev.index)
    )
