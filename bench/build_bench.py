"""Build-time benchmark (issue 5): cold build per flavour, a no-op rebuild (same build directory,
nothing changed: Ninja has no work, cargo is Fresh) and a rebuild after editing one kernel (one
translation unit recompiled). Prints the figures and the no-op/cold ratio (target: <= 0.25).

    python bench/build_bench.py [cpu cuda rocm rocm6.4 rocm7.2]

Uses the toolchains from ci/install-toolchains.sh; a flavour whose toolchain is missing is skipped.
`rocm` is Debian 12's HIP 5.2 on this machine; `rocm6.4` and `rocm7.2` build inside their Debian sid
roots (ci/rocm-root.sh, as root), with the root's own build tools, which is how their wheels are made.
Runs on a copy of the tree so the checkout is never edited."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TC = Path(os.environ.get("MONARCH_TOOLCHAINS", Path.home() / ".cache" / "monarch-runtime" / "toolchains"))


ROOT_BUILDS = {"rocm6.4": {"ROCM_HOME": "/usr", "RCCL_HOME": "/opt/rccl/usr"}, "rocm7.2": {"ROCM_HOME": "/usr"}}


def root_of(flavour: str) -> Path | None:
    root = TC / "roots" / flavour
    return root if flavour in ROOT_BUILDS and (root / ".monarch-root").is_file() else None


def env_for(flavour: str) -> dict[str, str] | None:
    if flavour in ROOT_BUILDS:
        return dict(ROOT_BUILDS[flavour]) if root_of(flavour) else None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "ROCM_", "MONARCH_"))}
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


def build(tree: Path, build_dir: Path, env: dict[str, str], root: Path | None = None) -> tuple[float, str]:
    out = build_dir.parent / "dist"
    argv = [
        "-m",
        "pip",
        "wheel",
        str(tree),
        "--no-deps",
        "--no-build-isolation",
        "-v",
        "-w",
        str(out),
        "-C",
        f"build-dir={build_dir}",
    ]
    if root is None:
        argv, run_env = [sys.executable, *argv], env
    else:  # inside the root: the same command with its python, the tree and build directory bound in
        prefix = ["bash", str(ROOT / "ci" / "rocm-root.sh"), "run", str(root), "--bind", str(build_dir.parent)]
        prefix += [a for k, v in env.items() for a in ("--env", f"{k}={v}")]
        argv, run_env = [*prefix, "--", "python", *argv], None
    start = time.perf_counter()
    proc = subprocess.run(argv, env=run_env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"build failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return elapsed, proc.stdout + proc.stderr


def compile_line(log: str) -> str:
    m = re.search(r"compile: (ninja: no work to do|\d+ translation units rebuilt)", log)
    return m.group(1) if m else "no device code"


def main(flavours: list[str]) -> None:
    print(
        f"{'flavour':8} {'cold s':>8} {'no-op s':>8} {'ratio':>6} {'1 kernel s':>10}  no-op compile / after one kernel edit"
    )
    for flavour in flavours:
        env = env_for(flavour)
        if env is None:
            print(f"{flavour:8} skipped: toolchain not installed")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "tree"
            files = subprocess.run(
                ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
            ).stdout.split()
            for name in files:
                if (ROOT / name).is_file():
                    (tree / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(ROOT / name, tree / name)
            build_dir = Path(tmp) / "build"
            root = root_of(flavour)
            cold, _ = build(tree, build_dir, env, root)
            noop, noop_log = build(tree, build_dir, env, root)
            kernel = tree / "csrc" / "checksum.cu"
            kernel.write_text(kernel.read_text() + "\n// benchmark edit\n")
            edit, edit_log = build(tree, build_dir, env, root)
            print(
                f"{flavour:8} {cold:8.1f} {noop:8.1f} {noop / cold:6.2f} {edit:10.1f}  "
                f"{compile_line(noop_log)} / {compile_line(edit_log)}"
            )


if __name__ == "__main__":
    main(sys.argv[1:] or ["cpu", "cuda", "rocm", "rocm6.4", "rocm7.2"])
