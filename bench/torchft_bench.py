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
seconds, GB/s and the ratio ``PeerTransport throughput / PGTransport throughput`` (goal: >= 0.8), and
each transport's first heal of the size apart (its warm-up: for ``commit="swap"`` the heal whose
buffers are fresh memory; the later ones receive into the memory the previous one displaced).
``--commit copy,swap`` runs one ``PeerTransport`` per commit, interleaved with ``PGTransport``.

    python bench/torchft_bench.py [--mib 64,256,1024] [--repeat 3] [--device cpu|cuda] [--receive inplace|allocate]
                                  [--commit copy|swap|copy,swap] [--shadow auto|device|host|none] [--json]

Needs torch and torchft (``pip install monarch-runtime[torchft]``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
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


def worker(
    rank: int, port: int, sizes: list[int], repeat: int, device: str, shadow: str, receive: str, commits: list[str]
) -> None:
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
        transports: dict[str, Any] = {
            "PGTransport": PGTransport(pg, timeout=TIMEOUT, device=torch.device(device), state_dict=own)
        }
        for commit in commits:
            transports[peer_name(commit)] = PeerTransport(TIMEOUT, state_dict=own, shadow=shadow, commit=commit)
        for trial in range(repeat + 1):
            for name, transport in transports.items():
                if rank == 1:  # the receiver starts from its own state each time
                    gc.collect()  # PGTransport's views of the targets wait in reference cycles (a swap refuses them)
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
                    report = transport.reports[0] if name != "PGTransport" else {}
                    results.append(
                        {
                            "mib": mib,
                            "transport": name,
                            "trial": trial,
                            "seconds": seconds,
                            "transfer_state_s": report.get("seconds"),
                            "swapped": len(report.get("swapped", [])),
                            "copied": sorted(set(report.get("copied", {}).values())),
                        }
                    )
        for name, transport in transports.items():
            if name != "PGTransport":
                transport.shutdown()
        del state, tensors, transports
    if rank == 1:
        print("RESULTS " + json.dumps(results), flush=True)


def peer_name(commit: str) -> str:
    return f"PeerTransport[{commit}]"


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
    parser.add_argument(
        "--commit", default="copy", help="PeerTransport's commit: copy, swap, or both (copy,swap) side by side"
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(x) for x in args.mib.split(",")]
    commits = args.commit.split(",")
    if not commits or any(c not in ("copy", "swap") for c in commits) or len(set(commits)) != len(commits):
        parser.error(f"--commit: copy, swap or copy,swap, not {args.commit!r}")
    if args.worker is not None:
        worker(args.worker, args.port, sizes, args.repeat, args.device, args.shadow, args.receive, commits)
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
                "--commit",
                args.commit,
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
    peers = [peer_name(c) for c in commits]
    table: list[dict[str, Any]] = []
    for mib in sizes:
        runs = {
            name: [r for r in results if r["mib"] == mib and r["transport"] == name] for name in ["PGTransport", *peers]
        }
        warm = {name: [r["seconds"] for r in rs if r["trial"]] for name, rs in runs.items()}
        best = {name: min(times) for name, times in warm.items()}
        gbs = {name: (mib << 20) / s / 1e9 for name, s in best.items()}
        table.append(
            {
                "mib": mib,
                "seconds": best,
                "median_s": {name: statistics.median(times) for name, times in warm.items()},
                "first_heal_s": {name: rs[0]["seconds"] for name, rs in runs.items()},
                "gb_per_s": gbs,
                "ratio": {name: gbs[name] / gbs["PGTransport"] for name in peers},
                "peer_transfer_state_s": {
                    name: min(r["transfer_state_s"] for r in runs[name] if r["trial"]) for name in peers
                },
                "swapped": {name: min(r["swapped"] for r in runs[name]) for name in peers},
                "copied": {name: sorted({w for r in runs[name] for w in r["copied"]}) for name in peers},
            }
        )
    if args.json:
        print(json.dumps({"platform": m.PLATFORM, "device": args.device, "load": os.getloadavg(), "sizes": table}))
        return
    print(
        f"monarch_runtime {m.PLATFORM} build, device {args.device}, receive {args.receive}, shadow {args.shadow}, "
        f"best of {args.repeat} after a first heal; load {os.getloadavg()[0]:.1f}"
    )
    header = f"{'state':>9} | {'PGTransport':>20}"
    for name in peers:
        header += f" | {name:>25} | transfer_state | Peer/PG"
    print(header + " | first heal: " + ", ".join(["PG", *peers]))
    for row in table:
        pg = row["seconds"]["PGTransport"]
        line = f"{row['mib']:>5} MiB | {pg:7.3f} s {row['gb_per_s']['PGTransport']:5.2f} GB/s"
        for name in peers:
            ratio = row["ratio"][name]
            line += (
                f" | {row['seconds'][name]:12.3f} s {row['gb_per_s'][name]:5.2f} GB/s"
                f" | {row['peer_transfer_state_s'][name]:12.3f} s | {ratio:5.2f}" + (" " if ratio >= 0.8 else "*")
            )
        first = row["first_heal_s"]
        print(line + " | " + ", ".join(f"{first[n]:.3f} s" for n in ["PGTransport", *peers]))
    print("* short of the 0.8 goal")
    for row in table:
        for name in peers:
            if name == peer_name("swap") and row["swapped"][name] < TENSORS:
                print(
                    f"{row['mib']} MiB, {name}: only {row['swapped'][name]} of {TENSORS} swapped: {row['copied'][name]}"
                )


if __name__ == "__main__":
    main()
