"""Heal time of TorchFT's ``PGTransport`` and our ``PeerTransport`` on the same states, side by side.

Two processes (a donor and a recovering receiver) hold states of the same structure (8 float32 tensors;
64 MiB, 256 MiB, 1 GiB in all); for each size the receiver heals from the donor through each transport in
turn, both receiving in place into its own tensors (``state_dict=``; ``--receive allocate``: both into
tensors they allocate, as without ``state_dict=``), and the time from the receiver's
``recv_checkpoint`` call to its return is measured (best of ``--repeat`` after a warm-up; interleaved).
``PGTransport`` runs over torchft's ``ProcessGroupGloo`` (loopback here; give it a ``ProcessGroupNCCL``
on GPUs with ``--device cuda``); ``PeerTransport`` over the CPU build's process communicator (NCCL/RCCL on
GPU builds) and checks every tensor's checksum, the names, dtypes, shapes and the step on both sides.
Each heal is verified after it is timed (the receiver's tensors equal the donor's). It prints heal
seconds, GB/s and the ratio ``PeerTransport throughput / PGTransport throughput`` (goal: >= 0.8).

    python bench/torchft_bench.py [--mib 64,256,1024] [--repeat 3] [--device cpu|cuda] [--receive inplace|allocate]
                                  [--shadow auto|device|host|none] [--json]

Needs torch and torchft (``pip install monarch-runtime[torchft]``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from typing import Any

TENSORS = 8
TIMEOUT = timedelta(seconds=300)


def make_state(mib: int, seed: int, device: str) -> dict[str, Any]:
    import torch  # noqa: PLC0415

    n = (mib << 20) // 4 // TENSORS
    gen = torch.Generator().manual_seed(seed)
    return {"user": {"default": {f"layer{i}.weight": torch.rand(n, generator=gen).to(device) for i in range(TENSORS)}}}


def worker(rank: int, port: int, sizes: list[int], repeat: int, device: str, shadow: str, receive: str) -> None:
    import torch  # noqa: PLC0415
    from monarch_runtime.torchft import PeerTransport  # noqa: PLC0415
    from torch.distributed import TCPStore  # noqa: PLC0415
    from torchft.checkpointing.pg_transport import PGTransport  # noqa: PLC0415
    from torchft.process_group import ProcessGroupGloo, ProcessGroupNCCL  # noqa: PLC0415

    torch.set_num_threads(1)
    if device == "cuda":
        torch.cuda.set_device(rank)  # one GPU per rank (NCCL/RCCL refuse two ranks on one GPU)
    store = TCPStore("127.0.0.1", port, world_size=2, is_master=False, wait_for_workers=False)
    pg = ProcessGroupNCCL(timeout=TIMEOUT) if device == "cuda" else ProcessGroupGloo(timeout=TIMEOUT)
    pg.configure(f"127.0.0.1:{port}/bench", "bench", rank, 2, quorum_id=1, group_rank=0, group_world_size=1)
    count = 0

    def barrier() -> None:
        nonlocal count
        count += 1
        key = f"barrier{count}"
        store.add(key, 1)
        while store.add(key, 0) < 2:
            time.sleep(0.001)

    results: list[dict[str, Any]] = []
    for mib in sizes:
        state = make_state(mib, 1 if rank == 0 else 2, device)
        tensors = list(state["user"]["default"].values())
        own = (lambda s=state: s) if receive == "inplace" else None
        transports = {
            "PGTransport": PGTransport(pg, timeout=TIMEOUT, device=torch.device(device), state_dict=own),
            "PeerTransport": PeerTransport(TIMEOUT, state_dict=own, shadow=shadow),
        }
        for trial in range(repeat + 1):
            for name, transport in transports.items():
                if rank == 1:  # the receiver starts from its own state each time
                    for i, t in enumerate(tensors):
                        t.fill_(float(i))
                meta = transport.metadata()
                key = f"meta-{mib}-{trial}-{name}"
                if rank == 0:
                    store.set(key, meta)
                barrier()
                got: Any = None
                start = time.perf_counter()
                if rank == 0:
                    transport.send_checkpoint([1], 1, state, TIMEOUT)
                else:
                    got = transport.recv_checkpoint(0, store.get(key).decode(), 1, TIMEOUT)
                seconds = time.perf_counter() - start
                transport.disallow_checkpoint()
                barrier()
                if rank == 1:
                    # Verified after the clock: the receiver now holds the donor's state, bit for bit.
                    want = make_state(mib, 1, device)["user"]["default"]
                    have = tensors if own else list(got["user"]["default"].values())
                    assert all(torch.equal(a, b) for a, b in zip(have, want.values())), f"{name}: wrong state"
                    del have
                    if trial:
                        inner = transport.reports[0]["seconds"] if name == "PeerTransport" else None
                        results.append(
                            {
                                "mib": mib,
                                "transport": name,
                                "trial": trial,
                                "seconds": seconds,
                                "transfer_state_s": inner,
                            }
                        )
        transports["PeerTransport"].shutdown()
        del state, tensors, transports
    if rank == 1:
        print("RESULTS " + json.dumps(results), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", default="64,256,1024", help="state sizes in MiB, comma separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument(
        "--shadow", default="auto", choices=["auto", "device", "host", "none"], help="PeerTransport's shadow"
    )
    parser.add_argument(
        "--receive",
        default="inplace",
        choices=["inplace", "allocate"],
        help="into the receiver's own tensors (state_dict=), or into tensors the transports allocate",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(x) for x in args.mib.split(",")]
    if args.worker is not None:
        worker(args.worker, args.port, sizes, args.repeat, args.device, args.shadow, args.receive)
        return
    import monarch_runtime as m  # noqa: PLC0415
    from torch.distributed import TCPStore  # noqa: PLC0415

    store = TCPStore("127.0.0.1", 0, world_size=2, is_master=True, wait_for_workers=False)
    env = {**os.environ, "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", "lo")}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--worker",
                str(r),
                "--port",
                str(store.port),
                "--mib",
                args.mib,
                "--repeat",
                str(args.repeat),
                "--device",
                args.device,
                "--shadow",
                args.shadow,
                "--receive",
                args.receive,
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for r in (0, 1)
    ]
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"a worker failed: exit codes {[p.returncode for p in procs]}")
    (line,) = [x for x in outs[1].splitlines() if x.startswith("RESULTS ")]
    results = json.loads(line[len("RESULTS ") :])
    table = []
    for mib in sizes:
        best = {
            name: min(r["seconds"] for r in results if r["mib"] == mib and r["transport"] == name)
            for name in ("PGTransport", "PeerTransport")
        }
        gbs = {name: (mib << 20) / s / 1e9 for name, s in best.items()}
        inner = min(r["transfer_state_s"] for r in results if r["mib"] == mib and r["transport"] == "PeerTransport")
        table.append(
            {
                "mib": mib,
                "seconds": best,
                "gb_per_s": gbs,
                "ratio": gbs["PeerTransport"] / gbs["PGTransport"],
                "peer_transfer_state_s": inner,
            }
        )
    if args.json:
        print(json.dumps({"platform": m.PLATFORM, "device": args.device, "load": os.getloadavg(), "sizes": table}))
        return
    print(
        f"monarch_runtime {m.PLATFORM} build, device {args.device}, receive {args.receive}, shadow {args.shadow}, "
        f"best of {args.repeat}; load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'state':>9} | {'PGTransport':>20} | {'PeerTransport':>20} | of which transfer_state | Peer/PG throughput")
    for row in table:
        pg, peer = row["seconds"]["PGTransport"], row["seconds"]["PeerTransport"]
        print(
            f"{row['mib']:>5} MiB | {pg:7.3f} s {row['gb_per_s']['PGTransport']:5.2f} GB/s | "
            f"{peer:7.3f} s {row['gb_per_s']['PeerTransport']:5.2f} GB/s | {row['peer_transfer_state_s']:19.3f} s | "
            f"{row['ratio']:.2f}" + ("" if row["ratio"] >= 0.8 else "  (SHORT of the 0.8 goal)")
        )


if __name__ == "__main__":
    main()
