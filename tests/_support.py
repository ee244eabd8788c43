"""Helpers shared by the tests (a unique module name: subdirectories have conftest.py files of their own)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOOLCHAINS = Path(os.environ.get("MONARCH_TOOLCHAINS", Path.home() / ".cache" / "monarch-runtime" / "toolchains"))
FLAVOURS = ("cpu", "cuda", "rocm")
SOURCE_DATE_EPOCH = "1700000000"  # every test build uses it, so builds can be compared byte for byte


@dataclass(frozen=True)
class Toolchains:
    cuda_home: Path
    nccl_home: Path
    rccl_home: Path
    rocm_home: Path

    def env_for(self, flavour: str) -> dict[str, str]:
        """A clean environment selecting ``flavour`` the way a user would."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("CUDA_HOME", "CUDA_PATH", "ROCM_HOME", "ROCM_PATH") and not k.startswith("MONARCH_")
        }
        env["HIP_PLATFORM"] = "amd"
        if flavour == "cuda":
            env["CUDA_HOME"] = str(self.cuda_home)
        elif flavour == "rocm":
            env["ROCM_HOME"] = str(self.rocm_home)
            env["RCCL_HOME"] = str(self.rccl_home)
        return env


def temp_env(tmpdir: Path) -> dict[str, str]:
    """TMPDIR, TMP and TEMP pointing at ``tmpdir``, created empty (so a test can check nothing is left there)."""
    tmpdir.mkdir(parents=True)
    return dict.fromkeys(("TMPDIR", "TMP", "TEMP"), str(tmpdir))


def tree_digest(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def pip_wheel(source: Path, out: Path, env: Mapping[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    """Build with pip (no isolation: the test venv has cmake, ninja and maturin) and return the process."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            *extra,
        ],
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
    )


@dataclass(frozen=True)
class BuildOutcome:
    wheel: Path | None
    log: str
    tmpdir: Path  # the build's TMPDIR (and TMP, TEMP): empty before the build, and after it too
    build_dir: Path


@dataclass(frozen=True)
class InstalledWheel:
    python: Path
    site_packages: Path
    wheel: Path

    def run(self, code: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.python), "-c", code],
            capture_output=True,
            text=True,
            check=False,
            env=dict(env) if env is not None else None,
        )


def make_venv(path: Path) -> Path:
    venv.EnvBuilder(with_pip=False, clear=True).create(path)
    return path / "bin" / "python"


def copy_tree(dest: Path) -> Path:
    """A copy of the files git knows in this checkout (tracked, or untracked and not ignored)."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for name in files:
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(src.read_bytes())
            (dest / name).chmod(src.stat().st_mode)
    return dest


# The session fixtures that build wheels (directly or through the ones they use): a test that reaches one
# of them builds a wheel, so it must carry the slow mark (`-m "not slow"` is the quick run).
WHEEL_FIXTURES = frozenset({"all_builds", "root_builds"})


def unmarked_wheel_tests(items: Sequence[Any]) -> list[str]:
    """The tests that reach a wheel-building fixture without the slow mark."""
    return [
        item.nodeid
        for item in items
        if WHEEL_FIXTURES & set(getattr(item, "fixturenames", ())) and item.get_closest_marker("slow") is None
    ]
