"""The current-ROCm roots (Debian sid + HIP 6.4, Debian experimental's HIP 7.2 + RCCL 7.2), made by
ci/rocm-root.sh under $MONARCH_TOOLCHAINS/roots by ci/install-toolchains.sh, and how tests run commands
in them. A test that needs a root skips when it is missing, unless MONARCH_TEST_REQUIRE_ROOTS=1 (which
ci/run-tests.sh sets): then a missing root fails the test instead of hiding it."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from _support import SOURCE_DATE_EPOCH, TOOLCHAINS

from ci.roots import RootCache, run_argv

ROCM_ROOT_VERSIONS = ("6.4", "7.2")


# What a build inside each root needs beyond ROCM_HOME=/usr: the 6.4 root has RCCL's header only (see
# ci/rocm-root.sh), the 7.2 root RCCL itself.
BUILD_ENV = {"6.4": {"RCCL_HOME": "/opt/rccl/usr"}, "7.2": {}}


@dataclass(frozen=True)
class RootBuild:
    version: str
    wheel: Path | None
    log: str
    build_dir: Path
    source: Path


def host_hip52() -> bool:
    """Whether HIP 5.2 is on the host (Debian 12's clang++-15 and /usr/include/hip: bash ci/install-toolchains.sh)."""
    return shutil.which("clang++-15") is not None and Path("/usr/include/hip/hip_runtime.h").is_file()


def root_dir(version: str) -> Path:
    return TOOLCHAINS / "roots" / f"rocm{version}"


def require_root(version: str) -> Path:
    """The root of ROCm ``version``, or skip (fail under MONARCH_TEST_REQUIRE_ROOTS=1) when it is not made."""
    path = root_dir(version)
    if (path / ".monarch-root").is_file():
        return path
    why = f"the ROCm {version} root {path} is not made (bash ci/install-toolchains.sh makes it)"
    if os.environ.get("MONARCH_TEST_REQUIRE_ROOTS") == "1":
        pytest.fail(why + "; MONARCH_TEST_REQUIRE_ROOTS=1 requires it")
    pytest.skip(why)


def run_in_root(
    version: str,
    argv: Sequence[str],
    *,
    binds: Sequence[Path] = (),
    ro_binds: Sequence[Path] = (),
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 900,
    check: bool = False,
    path_front: Sequence[Path] = (),
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` inside the root of ROCm ``version``; ``binds`` appear there at the same paths. The
    environment inside is clean (see ci/rocm-root.sh) plus ``env``; ``path_front`` goes first on PATH."""
    cmd = run_argv(require_root(version), argv, binds=binds, ro_binds=ro_binds, env=env, cwd=cwd, path_front=path_front)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"in the ROCm {version} root, {' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n"
            f"{proc.stderr[-4000:]}"
        )
    return proc


def make_amd_layout(version: str, dest: Path) -> Path:
    """An AMD-style installation (``opt/rocm-X.Y.0`` with its LLVM under ``lib/llvm``, ``.info/version``, and
    ``opt/rocm`` linking to it) under ``dest``, made of links into the root's files, which resolve inside
    the root. Returns the ``opt/rocm`` link, what a user would put in ROCM_PATH."""
    root = require_root(version)
    llvm = sorted(root.glob("usr/lib/llvm-*"), key=lambda p: int(p.name.split("-")[1]))[-1]
    amd = dest / "opt" / f"rocm-{version}.0"
    for sub in ("bin", "include", "lib/cmake", ".info"):
        (amd / sub).mkdir(parents=True, exist_ok=True)
    links = {
        "lib/llvm": f"/usr/lib/{llvm.name}",
        "include/hip": "/usr/include/hip",
        "bin/hipcc": "/usr/bin/hipcc",
        "lib/cmake/hip": "/usr/lib/x86_64-linux-gnu/cmake/hip",
        "lib/cmake/hip-lang": "/usr/lib/x86_64-linux-gnu/cmake/hip-lang",
    }
    if (root / "usr/include/rccl").is_dir():
        links["include/rccl"] = "/usr/include/rccl"
    for lib in sorted((root / "usr/lib/x86_64-linux-gnu").glob("libamdhip64.so*")):
        links[f"lib/{lib.name}"] = f"/usr/lib/x86_64-linux-gnu/{lib.name}"
    for name, target in links.items():
        (amd / name).symlink_to(target)
    (amd / ".info" / "version").write_text(f"{version}.0-43\n", encoding="utf-8")
    (dest / "opt" / "rocm").symlink_to(amd.name)
    return dest / "opt" / "rocm"


def build_in_root(
    version: str,
    source: Path,
    out: Path,
    build_dir: Path,
    binds: Sequence[Path],
    rocm: Mapping[str, str],
    *,
    cache: RootCache | None = None,
) -> RootBuild:
    """``pip wheel`` of ``source`` inside the root (no build isolation: the root's venv has the build tools),
    with ``rocm`` (ROCM_HOME=/usr, or ROCM_PATH=...) selecting the installation; through ``cache``'s compiler
    cache (-C compiler-launcher=..., its variables, mounts and PATH, and its ``after`` shell) when given."""
    out.mkdir(parents=True, exist_ok=True)
    argv = ["python", "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-w", str(out), "-v"]
    argv += ["-C", f"build-dir={build_dir}"]
    env = {**BUILD_ENV[version], **rocm, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
    if cache is not None:
        argv += ["-C", f"compiler-launcher={cache.launcher}"]
        env.update(cache.env)
        if cache.after:
            argv = ["sh", "-c", f'status=0; "$@" || status=$?; {cache.after}; exit $status', "sh", *argv]
    proc = run_in_root(
        version,
        argv,
        binds=[*binds, *(cache.binds if cache else ())],
        ro_binds=cache.ro_binds if cache else (),
        env=env,
        cwd=source,
        path_front=cache.path if cache else (),
    )
    wheels = sorted(out.glob("*.whl"))
    wheel = wheels[0] if proc.returncode == 0 and len(wheels) == 1 else None
    return RootBuild(version, wheel, proc.stdout + proc.stderr, build_dir, source)
