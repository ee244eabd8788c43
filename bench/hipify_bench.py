"""hipify end to end, start-up included: ours against hipify_torch v2 and hipify-clang, side by side.

    python bench/hipify_bench.py --hipify-torch /tmp/pb/hipify_torch [--cuda-headers /tmp/pb/cuda12/include]
    python bench/hipify_bench.py --corpus DIR [--corpus DIR]... [--out-parent /dev/shm] [--runs 5]

The corpora (default: NVIDIA/cuda-samples and karpathy/llm.c under /tmp/pb/corpora, as bench/README.md's
"Inputs" gets them; without them, a generated one, bench/hipify_corpus.py). On each, each tool's command line
hipifies the whole tree into a fresh directory: ``python -m tools hipify SRC -o OUT -q`` (ours), hipify_torch's
``hipify_cli.py --v2`` (a checkout, ``--hipify-torch``) and hipify-clang 7.2.4 (in the ROCm 7.2 root made with
``ci/rocm-root.sh make 7.2 DIR --with-hipify-clang``, given CUDA <= 12.9 headers with ``--cuda-headers``; one call
per CUDA-bearing file, ~1 s each, so only on corpora with at most ``--clang-max-files`` of them). Ours and
hipify_torch: one untimed run each (byte-code written), then ``--runs`` runs alternating the two, best and median
wall time; CPU time of all the tool's processes; peak memory (the largest process's maximum RSS, from GNU time's
``%M``: a fresh process forked by a small one, so no parent's pages are counted). hipify-clang: one run. Every
output tree is kept until the last run (a journal-less ext4 makes creating files slow for minutes after deleting
many: bench/README.md). Also: ours on one small file against a bare interpreter (start-up), and ours' no-op rerun.
``--compare-with DIR`` adds another checkout of this project (e.g. an older commit), run the same way, with the
same interpreter. It ends with the target, marked "meets target" or "SHORT of target".

Prints figures; it is not a timed test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

import port_quality as pq  # noqa: E402
from hipify_corpus import make_corpus  # noqa: E402

from tools.hipify.tree import SOURCE_SUFFIXES  # noqa: E402

DEFAULT_CORPORA = [Path("/tmp/pb/corpora/cuda-samples"), Path("/tmp/pb/corpora/llm.c")]
TARGET = ("cuda-samples", 2.5)  # ours at least 2.5x hipify_torch's throughput (wall, start-up included)


@dataclass
class Runs:
    """One tool's runs on one corpus: wall and CPU seconds, peak RSS (MiB) of each."""

    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    peaks: list[float] = field(default_factory=list)

    def add(self, wall: float, cpu: float, peak: float | None) -> None:
        self.walls.append(wall)
        self.cpus.append(cpu)
        if peak is not None:
            self.peaks.append(peak)

    @property
    def best(self) -> float:
        return min(self.walls)

    def cell(self, mb: float) -> str:
        peak = f", peak {max(self.peaks):.0f} MiB" if self.peaks else ""
        return (
            f"{self.best * 1000:.0f} ms (median {statistics.median(self.walls) * 1000:.0f}), {mb / self.best:.1f} MB/s;"
            f" CPU {min(self.cpus) * 1000:.0f} ms{peak}"
        )


def _gnu_time() -> str | None:
    path = shutil.which("time") or ("/usr/bin/time" if os.path.exists("/usr/bin/time") else None)
    if path is None:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False, timeout=10)
    except OSError:
        return None
    return path if "GNU" in out.stdout + out.stderr else None


def measure(cmd: list[str], env: dict[str, str], cwd: Path, gnu_time: str | None) -> tuple[float, float, float | None]:
    """Run ``cmd``: (wall seconds, CPU seconds of it and the processes it waited for, peak RSS MiB or None)."""
    fd, memfile = tempfile.mkstemp(prefix="hipify-bench-rss-")
    os.close(fd)
    argv = [gnu_time, "-f", "%M", "-o", memfile, *cmd] if gnu_time else cmd
    try:
        t = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        err = proc.stderr.read()
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        proc.stderr.close()
        if proc.returncode != 0:
            sys.exit(f"hipify_bench: {' '.join(cmd[:4])} ... failed ({proc.returncode}):\n{err.decode()[-3000:]}")
        text = Path(memfile).read_text().strip().splitlines() if gnu_time else []
        peak = int(text[-1]) / 1024 if text and text[-1].isdigit() else None
    finally:
        os.unlink(memfile)
    return wall, usage.ru_utime + usage.ru_stime, peak


def _sizes(corpus: Path) -> tuple[int, float, float]:
    """(files, MB, MB of sources: what is translated)"""
    files = total = sources = 0
    for dirpath, _dirs, names in os.walk(corpus):
        for name in names:
            size = os.lstat(os.path.join(dirpath, name)).st_size
            files += 1
            total += size
            if os.path.splitext(name)[1].lower() in SOURCE_SUFFIXES:
                sources += size
    return files, total / 1e6, sources / 1e6


def start_up(tmp: Path, env: dict[str, str], gnu_time: str | None, runs: int) -> str:
    """Ours on one small file against a bare interpreter, interleaved (medians)."""
    tiny = tmp / "tiny"
    tiny.mkdir()
    (tiny / "k.cu").write_bytes(b"#include <cuda_runtime.h>\nvoid f() { cudaDeviceSynchronize(); }\n")
    ours = [sys.executable, "-m", "tools", "hipify", str(tiny), "-q", "--hip-version", "7.2", "-o"]
    measure([*ours, str(tmp / "tiny-warm")], env, REPO, None)
    bare, run = Runs(), Runs()
    for i in range(runs):
        bare.add(*measure([sys.executable, "-c", "pass"], env, REPO, gnu_time))
        run.add(*measure([*ours, str(tmp / f"tiny-{i}")], env, REPO, gnu_time))
    med = statistics.median
    return (
        f"start-up, ours on one file (median of {runs}): {med(run.walls) * 1000:.0f} ms wall, {med(run.cpus) * 1000:.0f}"
        f" ms CPU, peak {max(run.peaks or [0]):.0f} MiB; a bare `python -c pass` {med(bare.walls) * 1000:.0f} ms wall, "
        f"{med(bare.cpus) * 1000:.0f} ms CPU: hipify's own share {(med(run.cpus) - med(bare.cpus)) * 1000:.0f} ms CPU"
    )


def bench_corpus(corpus: Path, parent: Path, args: argparse.Namespace, gnu_time: str | None) -> dict[str, str]:
    """The figures of every tool on ``corpus``, as printed; and the ratios (name -> text)."""
    nfiles, mb, src_mb = _sizes(corpus)
    print(f"\n{corpus.name}: {corpus} ({nfiles} files, {mb:.1f} MB, of which {src_mb:.1f} MB of sources)")
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # (byte-code allowed)
    ours_env = {**base_env, "PYTHONPATH": str(REPO)}
    work = Path(tempfile.mkdtemp(prefix=f"{corpus.name}-", dir=parent))
    files = pq.corpus_files(corpus)
    include_dirs = pq.infer_include_dirs(corpus, files)
    ignores = pq.non_utf8(files) if args.hipify_torch else []
    runs = {name: Runs() for name in ("ours", "hipify_torch", "other")}

    def ours(i: int) -> None:
        cmd = [sys.executable, "-m", "tools", "hipify", str(corpus), "-o", str(work / f"ours-{i}"), "-q"]
        result = measure(cmd, ours_env, REPO, gnu_time)
        if i:
            runs["ours"].add(*result)

    def hipify_torch(i: int) -> None:
        out = work / f"ht-{i}"
        cmd, env = pq.hipify_torch_command(corpus, out, args.hipify_torch.resolve(), include_dirs, ignores, base_env)
        result = measure(cmd, env, work, gnu_time)
        if i:
            runs["hipify_torch"].add(*result)

    def other(i: int) -> None:
        cmd = [sys.executable, "-m", "tools", "hipify", str(corpus), "-o", str(work / f"other-{i}"), "-q"]
        result = measure(cmd, {**base_env, "PYTHONPATH": str(args.compare_with.resolve())}, work, gnu_time)
        if i:
            runs["other"].add(*result)

    steps = [ours]
    if args.hipify_torch:
        steps.append(hipify_torch)
    if args.compare_with:
        steps.append(other)
    for i in range(args.runs + 1):  # run 0: untimed (byte-code)
        for step in steps:
            step(i)
    t = time.perf_counter()
    measure(
        [sys.executable, "-m", "tools", "hipify", str(corpus), "-o", str(work / "ours-1"), "-q"], ours_env, REPO, None
    )
    noop = time.perf_counter() - t
    mine = runs["ours"]
    print(f"  ours, python -m tools hipify:          {mine.cell(src_mb)}; no-op rerun {noop * 1000:.0f} ms")
    ratios: dict[str, str] = {}
    if args.hipify_torch:
        ht = runs["hipify_torch"]
        ratio = ht.best / mine.best
        ratios["hipify_torch"] = f"{ratio:.2f}x"
        left = f" ({len(ignores)} non-UTF-8 files passed to --ignores: it stops on them)" if ignores else ""
        print(
            f"  hipify_torch v2, hipify_cli.py --v2:   {ht.cell(src_mb)}{left}\n"
            f"    -> ours {ratio:.2f}x its throughput (wall, best of {args.runs}); CPU {min(ht.cpus) / min(mine.cpus):.2f}x"
        )
    else:
        print("  hipify_torch: skipped (give --hipify-torch DIR, a ROCm/hipify_torch checkout)")
    if args.compare_with:
        oth = runs["other"]
        print(
            f"  {args.compare_with} (python -m tools hipify): {oth.cell(src_mb)}\n"
            f"    -> ours {oth.best / mine.best:.2f}x its throughput (wall), CPU {min(oth.cpus) / min(mine.cpus):.2f}x"
        )
    clang = hipify_clang(corpus, work, files, include_dirs, args)
    if isinstance(clang, str):
        print(f"  hipify-clang: {clang}")
    else:
        took, whole, bearing, failed = clang
        ratios["hipify-clang"] = f"{whole / mine.best:.0f}x"
        print(
            f"  hipify-clang 7.2.4 (one call per CUDA-bearing file, {bearing} files, 1 at a time, in the 7.2 root): "
            f"{took:.1f} s inside the root, {whole:.1f} s with the root's set-up and copying the files it did not "
            f"write; {src_mb / whole:.3f} MB/s (failed on {failed} files)\n    -> ours {whole / mine.best:.0f}x"
        )
    return ratios


def hipify_clang(
    corpus: Path, work: Path, files: list[Path], include_dirs: list[str], args: argparse.Namespace
) -> str | tuple[float, float, int, int]:
    """hipify-clang's run: (seconds in the root, seconds in all, CUDA-bearing files, failed files), or why not."""
    root72 = (args.roots or pq.ROOTS) / "rocm7.2"
    if not (root72 / "usr" / "bin" / "hipify-clang").is_file():
        return f"skipped: not in the 7.2 root {root72} (ci/rocm-root.sh make 7.2 DIR --with-hipify-clang; --roots)"
    if args.cuda_headers is None or not (args.cuda_headers / "cuda.h").is_file():
        return "skipped: give --cuda-headers DIR with CUDA <= 12.9's headers (bench/README.md, 'Inputs')"
    bearing = pq.cuda_bearing(files)
    if args.clang_max_files and len(bearing) > args.clang_max_files:
        return (
            f"skipped: {len(bearing)} CUDA-bearing files (~1 s each) > --clang-max-files {args.clang_max_files} "
            "(0: no limit)"
        )
    out = work / "hipify-clang"
    out.mkdir()
    t = time.perf_counter()
    took, _mapping, failed = pq.run_hipify_clang(
        corpus, out, files, include_dirs, args.cuda_headers.resolve(), root72, 1
    )
    return took, time.perf_counter() - t, len(bearing), len(failed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, action="append", help="a CUDA tree (repeat; default: cuda-samples, llm.c)")
    ap.add_argument("--hipify-torch", type=Path, help="a ROCm/hipify_torch checkout (its hipify_cli.py)")
    ap.add_argument("--cuda-headers", type=Path, help="CUDA <= 12.9 include directory, for hipify-clang")
    ap.add_argument("--roots", type=Path, help="where the rocm7.2 root is (default: the toolchains' roots)")
    ap.add_argument("--clang-max-files", type=int, default=150, help="hipify-clang on corpora with at most this many")
    ap.add_argument("--compare-with", type=Path, help="another checkout of this project, run the same way")
    ap.add_argument("--runs", type=int, default=5, help="timed runs of ours and hipify_torch per corpus (best of)")
    ap.add_argument("--start-up-runs", type=int, default=11, help="runs of the start-up comparison (median of)")
    ap.add_argument("--size-mb", type=float, default=6.0, help="size of the generated corpus, without --corpus")
    ap.add_argument("--out-parent", type=Path, help="where the output trees go (e.g. /dev/shm: no disk)")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    gnu_time = _gnu_time()
    load = os.getloadavg()
    print(
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}; {os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} "
        f"{load[2]:.1f}; Python {sys.version.split()[0]}; peak memory "
        + ("from GNU time" if gnu_time else "not measured (no GNU time: apt-get install time)")
    )
    with tempfile.TemporaryDirectory(prefix="hipify-bench-", dir=args.out_parent) as tmpdir:
        tmp = Path(tmpdir)
        corpora = args.corpus or [c for c in DEFAULT_CORPORA if c.is_dir()]
        if not corpora:
            generated = tmp / "generated"
            files, size = make_corpus(generated, int(args.size_mb * 1e6))
            print(f"(no corpus given and none in /tmp/pb/corpora: a generated one, {files} files, {size / 1e6:.1f} MB)")
            corpora = [generated]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPATH"] = str(REPO)
        print(start_up(tmp, env, gnu_time, args.start_up_runs))
        results = {c.name: bench_corpus(c.resolve(), tmp, args, gnu_time) for c in corpora}
    name, want = TARGET
    if name in results and "hipify_torch" in results[name]:
        got = float(results[name]["hipify_torch"].rstrip("x"))
        verdict = "meets target" if got >= want else "SHORT of target"
        print(f"\ntarget: ours >= {want}x hipify_torch v2 on {name}, end to end: {got:.2f}x   {verdict}")
    else:
        print(
            f"\ntarget: ours >= {want}x hipify_torch v2 on {name}: not measured (give that corpus and --hipify-torch)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
