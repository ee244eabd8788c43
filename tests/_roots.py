"""The current-ROCm roots (Debian sid + HIP 6.4, Debian experimental's HIP 7.2 + RCCL 7.2), made by
ci/rocm-root.sh under $MONARCH_TOOLCHAINS/roots by ci/install-toolchains.sh, and how tests run commands
in them. A test that needs a root skips when it is missing, unless MONARCH_TEST_REQUIRE_ROOTS=1 (which
ci/run-tests.sh sets): then a missing root fails the test instead of hiding it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from _support import ROOT, TOOLCHAINS

ROOT_SCRIPT = ROOT / "ci" / "rocm-root.sh"
ROCM_ROOT_VERSIONS = ("6.4", "7.2")


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
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` inside the root of ROCm ``version``; ``binds`` appear there at the same paths. The
    environment inside is clean (see ci/rocm-root.sh) plus ``env``."""
    root = require_root(version)
    cmd = ["bash", str(ROOT_SCRIPT), "run", str(root)]
    for path in binds:
        cmd += ["--bind", str(path)]
    for path in ro_binds:
        cmd += ["--ro-bind", str(path)]
    for key, value in (env or {}).items():
        cmd += ["--env", f"{key}={value}"]
    if cwd is not None:
        cmd += ["--cwd", str(cwd)]
    cmd += ["--", *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"in the ROCm {version} root, {' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n"
            f"{proc.stderr[-4000:]}"
        )
    return proc
