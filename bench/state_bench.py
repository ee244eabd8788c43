"""transfer_state between two processes on the CPU build, against what bounds it, printed as ratios.

For each state size (64 MiB to 4 GiB by default, as memory allows: the donor holds the state, the
receiver its own copy plus the shadow, so about 3x the size is needed), in 8 buffers, on one
communicator between this process (the receiver, rank 1) and a donor process it starts (rank 0):

- raw: ``send``/``recv`` of the same bytes in the same chunks (``--staging-mib``), nothing else;
- transfer: ``transfer_state`` with its checksums (the donor's before sending, the receiver's per
  chunk), shadow and commit;
- memcpy: one device-to-device copy of the state in one process (host memory here).

Times are the receiver's, from a barrier to its last byte (transfer: to its commit), best of
``--repeat`` (raw and transfer interleaved, after a warm-up round). The warm-up round's transfer is
printed too ("first transfer": fresh buffers on both sides, and a fresh process for the first size),
since a recovery is one transfer. Not a test: nothing is asserted.

    python bench/state_bench.py [--sizes-mib 64,256,1024,2048,4096] [--staging-mib 64] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import monarch_runtime as m

BUFFERS = 8


def available_bytes() -> int:
    with open("/proc/meminfo", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def state(nbytes: int, fill: int) -> dict[str, m.Buffer]:
    bufs = {f"b{i}": m.Buffer(nbytes // BUFFERS) for i in range(BUFFERS)}
    for b in bufs.values():
        b.fill(fill)
    return bufs


def chunks(bufs: dict[str, m.Buffer], chunk: int) -> list[tuple[m.Buffer, int, int]]:
    return [(b, off, min(chunk, b.nbytes - off)) for b in bufs.values() for off in range(0, b.nbytes, chunk)]


def run_rank(comm: m.Communicator, rank: int, sizes: list[int], chunk: int, repeat: int) -> list[dict[str, Any]]:
    out = []
    for nbytes in sizes:
        bufs = state(nbytes, 0x5A if rank == 0 else 0)
        pieces = chunks(bufs, chunk)

        def raw(bufs: dict[str, m.Buffer] = bufs, pieces: list[tuple[m.Buffer, int, int]] = pieces) -> None:
            for b, off, n in pieces:
                if rank == 0:
                    comm.send(b, 1, offset=off, nbytes=n)
                else:
                    comm.recv(b, 0, offset=off, nbytes=n)

        def transfer(bufs: dict[str, m.Buffer] = bufs) -> None:
            m.transfer_state(comm, bufs, donor=0, receiver=1, staging_bytes=chunk)

        times: dict[str, list[float]] = {"raw": [], "transfer": []}
        cpu: dict[str, list[float]] = {"raw": [], "transfer": []}
        # Interleaved (raw, transfer, raw, ...) so that a busy neighbour slows both alike; the first
        # round is a warm-up.
        for _ in range(repeat + 1):
            for name, fn in (("raw", raw), ("transfer", transfer)):
                comm.barrier()
                t0, c0 = time.perf_counter(), time.process_time()
                fn()
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
        row: dict[str, Any] = {
            "bytes": nbytes,
            "raw_s": min(times["raw"][1:]),
            "transfer_s": min(times["transfer"][1:]),
            # the warm-up round's transfer: fresh buffers (and, for the first size, a fresh process)
            "transfer_first_s": times["transfer"][0],
            # CPU seconds of this process (all its threads), median: what a busy machine cannot hide
            "raw_cpu_s": sorted(cpu["raw"][1:])[len(cpu["raw"][1:]) // 2],
            "transfer_cpu_s": sorted(cpu["transfer"][1:])[len(cpu["transfer"][1:]) // 2],
        }
        if rank == 1:
            dst = state(nbytes, 0)
            copies = []
            for _ in range(repeat + 1):
                t0 = time.perf_counter()
                for name, b in bufs.items():
                    dst[name].copy_from_buffer(b)
                copies.append(time.perf_counter() - t0)
            row["memcpy_s"] = min(copies[1:])
            del dst
        del bufs, pieces
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes-mib", default="64,256,1024,2048,4096")
    p.add_argument("--staging-mib", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", action="store_true")
    p.add_argument("--donor", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    chunk = args.staging_mib << 20
    wanted = [int(s) << 20 for s in args.sizes_mib.split(",") if s]
    if args.donor:
        orders = json.loads(args.donor)
        with m.Communicator(bytes.fromhex(orders["uid"]), 2, 0) as comm:
            rows = run_rank(comm, 0, orders["sizes"], chunk, args.repeat)
        print("DONOR " + json.dumps(rows), flush=True)
        return 0
    room = available_bytes()
    sizes = [s for s in wanted if 3.3 * s + (1 << 30) < room]
    skipped = [s >> 20 for s in wanted if s not in sizes]
    uid = m.Communicator.unique_id()
    orders = json.dumps({"uid": uid.hex(), "sizes": sizes})
    donor = subprocess.Popen(
        [
            sys.executable,
            os.path.abspath(__file__),
            "--donor",
            orders,
            "--staging-mib",
            str(args.staging_mib),
            "--repeat",
            str(args.repeat),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    with m.Communicator(uid, 2, 1) as comm:
        rows = run_rank(comm, 1, sizes, chunk, args.repeat)
    out, _ = donor.communicate()
    donor_rows = json.loads(next(line[6:] for line in out.splitlines() if line.startswith("DONOR ")))
    for r, d in zip(rows, donor_rows):
        # both processes' CPU seconds
        r["raw_cpu_s"] += d["raw_cpu_s"]
        r["transfer_cpu_s"] += d["transfer_cpu_s"]
        r["cpu_ratio"] = r["raw_cpu_s"] / r["transfer_cpu_s"]
    for r in rows:
        r["raw_gbps"] = r["bytes"] / r["raw_s"] / 1e9
        r["transfer_gbps"] = r["bytes"] / r["transfer_s"] / 1e9
        r["transfer_first_gbps"] = r["bytes"] / r["transfer_first_s"] / 1e9
        r["memcpy_gbps"] = r["bytes"] / r["memcpy_s"] / 1e9
        r["transfer_vs_raw"] = r["raw_s"] / r["transfer_s"]
        r["transfer_vs_memcpy"] = r["memcpy_s"] / r["transfer_s"]
    result = {
        "platform": m.PLATFORM,
        "staging_mib": args.staging_mib,
        "cpus": os.cpu_count(),
        "rows": rows,
        "skipped_mib": skipped,
        "available_gib": round(room / 2**30, 1),
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"{m.PLATFORM} build, 2 processes on one machine ({os.cpu_count()} CPUs), chunks of {args.staging_mib} MiB, best of {args.repeat}"
    )
    print(
        f"{'state':>9} {'raw send/recv':>14} {'transfer_state':>15} {'memcpy':>9} {'transfer/raw':>13}"
        f" {'transfer/memcpy':>16}   CPU s raw/transfer (ratio)   first transfer"
    )
    for r in rows:
        print(
            f"{r['bytes'] >> 20:>5} MiB {r['raw_gbps']:>9.2f} GB/s {r['transfer_gbps']:>10.2f} GB/s {r['memcpy_gbps']:>6.2f} GB/s"
            f" {r['transfer_vs_raw']:>13.2f} {r['transfer_vs_memcpy']:>16.2f}"
            f"   {r['raw_cpu_s']:.2f}/{r['transfer_cpu_s']:.2f} ({r['cpu_ratio']:.2f})"
            f"   {r['transfer_first_gbps']:>9.2f} GB/s"
        )
    if skipped:
        print(f"skipped (needs ~3.3x the state in free memory, {result['available_gib']} GiB available): {skipped} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
