"""Peer recovery between two replica processes, with a donor that dies part-way.

    python -m monarch_runtime.examples.peer_recovery [--mib 384] [--kill-at 0.4] [--staging-mib 16]

Needs numpy (the state is numpy arrays, as a model's and an optimizer's state_dict would be tensors).
It starts two replica processes on this machine:

1. a *receiver* (a recovering replica) with its own, stale state; it makes the communicator's unique
   id and hands it over through its standard output (any pipe, file or environment variable would do);
2. a *donor* holding the good state, which SIGKILLs itself after ``--kill-at`` of the bytes: the
   receiver gets ``TransferAborted`` at once, and its state is checked to be bit for bit unchanged;
3. a *fresh donor*, which completes the transfer: the receiver checks every tensor against the
   donor's checksums and prints the figures.

The receiver draws a progress bar from ``transfer_state``'s ``progress`` callback. The same code runs
on a CUDA/ROCm build with torch tensors (``device=`` one GPU per process); here it is the CPU build's
loopback transport.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import monarch_runtime as m


def make_state(seed: int, mib: int) -> dict[str, Any]:
    """A model (~1/3 of ``mib``) and its Adam state (~2/3), shaped like PyTorch's state_dicts."""
    import numpy as np  # noqa: PLC0415 - only the example needs numpy

    rng = np.random.default_rng(seed)
    rows = max(1, (mib << 20) // 3 // 4 // 4096 // 4)
    layers = {f"layers.{i}.weight": rng.standard_normal((rows, 4096), dtype=np.float32) for i in range(4)}
    model = {**layers, "head.bias": rng.standard_normal(4096, dtype=np.float32)}
    optim_state = {
        i: {"step": 1000 + seed, "exp_avg": np.full_like(w, 0.01 * seed), "exp_avg_sq": np.full_like(w, 1e-4)}
        for i, w in enumerate(layers.values())
    }
    return {
        "model": model,
        "optimizer": {
            "state": optim_state,
            "param_groups": [{"lr": 3e-4, "betas": (0.9, 0.95), "params": [0, 1, 2, 3]}],
        },
        "step": 1000 + seed,
    }


def digest(state: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}

    def walk(obj: Any, name: str) -> None:
        if hasattr(obj, "__dlpack__"):
            out[name] = m.from_dlpack(obj).checksum()
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{name}.{k}" if name else str(k))

    walk(state, "")
    return out


class Bar:
    """A one-line progress bar on stderr, fed by transfer_state's progress(name, offset, nbytes)."""

    def __init__(self, total: int, label: str) -> None:
        self.total, self.label, self.done, self.start = total, label, 0, time.perf_counter()

    def __call__(self, name: str, offset: int, nbytes: int) -> None:
        self.done += nbytes
        frac = self.done / max(1, self.total)
        rate = self.done / max(1e-9, time.perf_counter() - self.start) / 1e9
        filled = int(30 * frac)
        sys.stderr.write(
            f"\r  {self.label} [{'#' * filled}{'.' * (30 - filled)}] {frac:6.1%} "
            f"{self.done >> 20:6d}/{self.total >> 20} MiB {rate:5.2f} GB/s  {name[-28:]:<28}"
        )
        sys.stderr.flush()

    def end(self) -> None:
        sys.stderr.write("\n")


def receiver(args: argparse.Namespace) -> int:
    state = make_state(1, args.mib)
    total = sum(v.nbytes for v in _arrays(state))
    before = digest(state)
    print(f"receiver (pid {os.getpid()}): stale state of {total / 1e6:.0f} MB, step {state['step']}", flush=True)
    for attempt in (1, 2):
        uid = m.Communicator.unique_id()
        print("UID " + uid.hex(), flush=True)
        bar = Bar(total, f"attempt {attempt}")
        with m.Communicator(uid, 2, 1) as comm:
            try:
                report = m.transfer_state(
                    comm, state, donor=0, receiver=1, staging_bytes=args.staging_mib << 20, progress=bar, timeout=120
                )
            except m.TransferAborted as err:
                bar.end()
                unchanged = digest(state) == before
                print(f"receiver: TransferAborted after {bar.done / 1e6:.0f} MB: {str(err)[:160]}...", flush=True)
                print(f"receiver: own state bit for bit unchanged: {unchanged} (step {state['step']})", flush=True)
                if not unchanged:
                    return 1
                continue
        bar.end()
        new = report["state"]
        ok = digest(state) == report["checksums"] == digest(make_state(2, args.mib))
        figures = {
            "bytes": report["bytes"],
            "seconds": round(report["seconds"], 3),
            "GB/s": round(report["bytes"] / report["seconds"] / 1e9, 2),
            "chunks": report["chunks"],
            "shadow": report["shadow"],
            "verified": ok,
            "step": new["step"],
            "lr": new["optimizer"]["param_groups"][0]["lr"],
        }
        print("receiver: recovered from a fresh donor: " + json.dumps(figures), flush=True)
        return 0 if ok and new["step"] == 1002 else 1
    return 1


def _arrays(state: Any) -> list[Any]:
    if hasattr(state, "__dlpack__"):
        return [state]
    if isinstance(state, dict):
        return [a for v in state.values() for a in _arrays(v)]
    return []


def donor(args: argparse.Namespace) -> int:
    state = make_state(2, args.mib)
    total = sum(v.nbytes for v in _arrays(state))
    sent = 0

    def progress(name: str, offset: int, nbytes: int) -> None:
        nonlocal sent
        sent += nbytes
        if args.kill_at and sent > args.kill_at * total:
            print(f"donor (pid {os.getpid()}): dies now (SIGKILL), {sent / 1e6:.0f} MB sent", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    with m.Communicator(bytes.fromhex(args.uid), 2, 0) as comm:
        m.transfer_state(comm, state, donor=0, receiver=1, staging_bytes=args.staging_mib << 20, progress=progress)
    print(f"donor (pid {os.getpid()}): sent {total / 1e6:.0f} MB", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mib", type=int, default=384, help="state size in MiB (model + optimizer)")
    p.add_argument("--kill-at", type=float, default=0.4, help="fraction of the bytes after which the first donor dies")
    p.add_argument("--staging-mib", type=int, default=16, help="chunk size")
    p.add_argument("--role", choices=["launcher", "receiver", "donor"], default="launcher", help=argparse.SUPPRESS)
    p.add_argument("--uid", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        import numpy  # noqa: F401, PLC0415
    except ImportError:
        print("this example needs numpy: pip install numpy", file=sys.stderr)
        return 2
    if args.role == "receiver":
        return receiver(args)
    if args.role == "donor":
        return donor(args)
    return launch(args)


def launch(args: argparse.Namespace) -> int:
    me = [sys.executable, "-m", "monarch_runtime.examples.peer_recovery", "--mib", str(args.mib)]
    me += ["--staging-mib", str(args.staging_mib)]
    print(
        f"peer recovery on the {m.PLATFORM} build: a {args.mib} MiB state; the first donor dies at {args.kill_at:.0%}"
    )
    t0 = time.perf_counter()
    recv = subprocess.Popen([*me, "--role", "receiver"], stdout=subprocess.PIPE, text=True)
    donors: list[subprocess.Popen[bytes]] = []

    def start_donor(kill_at: float) -> Callable[[str], None]:
        return lambda uid: donors.append(
            subprocess.Popen([*me, "--role", "donor", "--uid", uid, "--kill-at", str(kill_at)])
        )

    on_uid = [start_donor(args.kill_at), start_donor(0.0)]
    assert recv.stdout is not None
    for line in recv.stdout:
        if line.startswith("UID ") and on_uid:
            on_uid.pop(0)(line[4:].strip())
        else:
            print(line, end="", flush=True)
    status = recv.wait()
    for d in donors:
        d.wait()
    killed = [d.returncode for d in donors]
    print(f"donor exit statuses {killed} (-9: SIGKILL); receiver {status}; {time.perf_counter() - t0:.1f} s in all")
    return status


if __name__ == "__main__":
    sys.exit(main())
