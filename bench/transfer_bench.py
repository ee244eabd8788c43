"""Throughput of the runtime's fault-tolerance path, printed as ratios against what bounds it.

- checksum: mr-sum64 of a buffer (GB/s of data read) vs the device's memory bandwidth, measured here as
  a device-to-device copy (bytes read + written per second);
- transfer: ``transfer_state`` (chunked, checksummed, committed) vs raw ``send``/``recv`` of the same
  bytes on the same communicator (GB/s of state moved).

On the CPU build "device" memory is host memory and the two ranks are threads of this process; on a
GPU build with two GPUs the ranks are threads driving GPU 0 and 1 over NCCL/RCCL (one GPU: the
transfer part is skipped, NCCL refuses two ranks on one GPU).

    python bench/transfer_bench.py [--mib 256] [--buffers 8] [--staging-mib 64] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import monarch_runtime as m


def best_seconds(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench_checksum(nbytes: int, repeat: int, device: int | None) -> dict[str, float]:
    src = m.Buffer.from_bytes(os.urandom(1 << 20) * (nbytes >> 20), device=device)
    dst = m.Buffer(src.nbytes, device=device)
    done = m.Event(device)

    def copy() -> None:
        dst.copy_from_buffer(src)  # device-to-device cudaMemcpy may return before it finishes
        done.record()
        done.synchronize()

    copy_s = best_seconds(copy, repeat)
    sum_s = best_seconds(src.checksum, repeat)
    bandwidth = 2 * src.nbytes / copy_s / 1e9  # a copy reads and writes every byte
    throughput = src.nbytes / sum_s / 1e9
    return {
        "bytes": src.nbytes,
        "checksum_gbps": throughput,
        "copy_bandwidth_gbps": bandwidth,
        "ratio": throughput / bandwidth,
    }


def two_ranks(devices: tuple[int, int], body: Callable[[int, Any], Any]) -> list[Any]:
    uid = m.Communicator.unique_id()
    out: list[Any] = [None, None]
    errs: list[BaseException | None] = [None, None]

    def worker(rank: int) -> None:
        try:
            with m.Communicator(uid, 2, rank, device=devices[rank]) as comm:
                out[rank] = body(rank, comm)
        except BaseException as err:  # reported below
            errs[rank] = err

    threads = [threading.Thread(target=worker, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for err in errs:
        if err is not None:
            raise err
    return out


def bench_transfer(
    nbytes: int, nbuffers: int, staging: int, repeat: int, devices: tuple[int, int], shadow: str
) -> dict[str, Any]:
    size = nbytes // nbuffers

    used: list[str] = []

    def body(rank: int, comm: Any) -> dict[str, float]:
        bufs = {f"b{i}": m.Buffer(size, device=devices[rank]) for i in range(nbuffers)}
        if rank == 0:
            for b in bufs.values():
                b.fill(0x5A)

        def raw() -> None:
            for b in bufs.values():
                (comm.send if rank == 0 else comm.recv)(b, 1 - rank)

        def transfer() -> None:
            used.append(
                m.transfer_state(comm, bufs, donor=0, receiver=1, staging_bytes=staging, shadow=shadow)["shadow"]
            )

        raw_times, xfer_times = [], []
        for fn, times in ((raw, raw_times), (transfer, xfer_times)):
            comm.barrier()
            fn()  # warm-up
            for _ in range(repeat):
                comm.barrier()
                t0 = time.perf_counter()
                fn()
                comm.barrier()
                times.append(time.perf_counter() - t0)
        return {
            "raw_s": min(raw_times),
            "transfer_s": min(xfer_times),
            "transfer_median_s": statistics.median(xfer_times),
        }

    r0, r1 = two_ranks(devices, body)
    total = size * nbuffers
    raw_s = max(r0["raw_s"], r1["raw_s"])
    xfer_s = max(r0["transfer_s"], r1["transfer_s"])
    return {
        "bytes": total,
        "buffers": nbuffers,
        "staging_bytes": staging,
        "raw_sendrecv_gbps": total / raw_s / 1e9,
        "transfer_gbps": total / xfer_s / 1e9,
        "ratio": raw_s / xfer_s,
        "shadow": sorted(set(used) - {""}),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mib", type=int, default=0, help="state size in MiB (default: 1024 on a GPU, 64 on CPU)")
    p.add_argument("--buffers", type=int, default=8)
    p.add_argument("--staging-mib", type=int, default=0, help="chunk/staging size (default: 64 on a GPU, 4 on CPU)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--shadow", default="auto", choices=["auto", "host", "device"], help="receiver's shadow")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = p.parse_args(argv)

    info = m.build_info()
    gpus = len(m.devices())
    mib = args.mib or (1024 if gpus else 64)
    staging = (args.staging_mib or (64 if gpus else 4)) << 20
    result: dict[str, Any] = {"platform": info["platform"], "gpus": gpus, "devices": [d["name"] for d in m.devices()]}
    result["checksum"] = bench_checksum(mib << 20, args.repeat, 0 if gpus else None)
    if gpus >= 2 or (gpus == 0 and info["platform"] == "cpu"):
        devs = (0, 1) if gpus >= 2 else (0, 0)
        if gpus and not info["collective_loaded"]:
            result["transfer"] = {"skipped": f"no collective library: {info.get('collective_error')}"}
        else:
            result["transfer"] = bench_transfer(mib << 20, args.buffers, staging, args.repeat, devs, args.shadow)
    else:
        result["transfer"] = {"skipped": f"needs two GPUs (NCCL refuses two ranks on one GPU); {gpus} visible"}

    if args.json:
        print(json.dumps(result))
        return 0
    c, t = result["checksum"], result["transfer"]
    print(f"platform {result['platform']}, {gpus} GPU(s) {result['devices']}")
    print(
        f"checksum  {c['bytes'] >> 20} MiB: {c['checksum_gbps']:.2f} GB/s vs copy bandwidth "
        f"{c['copy_bandwidth_gbps']:.2f} GB/s -> ratio {c['ratio']:.2f}"
    )
    if "skipped" in t:
        print(f"transfer  skipped: {t['skipped']}")
    else:
        print(
            f"transfer  {t['bytes'] >> 20} MiB in {t['buffers']} buffers, staging {t['staging_bytes'] >> 20} MiB: "
            f"{t['transfer_gbps']:.2f} GB/s ({'/'.join(t['shadow'])} shadow) vs raw send/recv {t['raw_sendrecv_gbps']:.2f} GB/s -> ratio {t['ratio']:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
