"""Find a CPython interpreter for a MAJOR.MINOR version: PATH, pyenv, manylinux's /opt/python, uv."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

from ci import proc


def _version_of(exe: str) -> str | None:
    try:
        out = subprocess.run(
            [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2], sys.implementation.name)"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = out.stdout.split()
    if out.returncode != 0 or len(parts) != 2 or parts[1] != "cpython":
        return None
    return parts[0]


def candidates(version: str) -> Iterator[str]:
    """Interpreters that may be CPython `version`, cheapest first (pyenv shims skipped: slow)."""
    pyenv_root = Path(os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv")))
    for p in sorted((pyenv_root / "versions").glob(f"{version}.*/bin/python{version}")):
        yield str(p)
    tag = "cp" + version.replace(".", "")
    for p in sorted(Path("/opt/python").glob(f"{tag}-{tag}/bin/python")):
        yield str(p)
    exe = proc.which(f"python{version}")
    if exe and "/shims/" not in exe:
        yield exe
    uv = proc.which("uv")
    if uv:
        try:
            out = subprocess.run(
                [uv, "python", "find", "--no-project", version],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return
        if out.returncode == 0 and out.stdout.strip():
            yield out.stdout.strip()


def find(version: str) -> str | None:
    """The first working CPython MAJOR.MINOR interpreter, or None."""
    for exe in candidates(version):
        if _version_of(exe) == version:
            return exe
    return None


def find_all(versions: Iterable[str]) -> dict[str, str | None]:
    return {v: find(v) for v in versions}
