"""Running programs: argument lists only, echoed like a CI log, errors as CIError."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ci.errors import CIError


def tool_path(extra: Sequence[Path] = ()) -> str:
    """PATH for subprocesses: this interpreter's bin dir (its venv's tools), ~/.cargo/bin, then PATH."""
    dirs = [str(d) for d in extra]
    dirs.append(str(Path(sys.executable).parent))
    cargo = Path.home() / ".cargo" / "bin"
    if cargo.is_dir():
        dirs.append(str(cargo))
    dirs.append(os.environ.get("PATH", ""))
    return os.pathsep.join(dirs)


def which(name: str) -> str | None:
    return shutil.which(name, path=tool_path())


def log(message: str) -> None:
    print(f"[ci] {message}", file=sys.stderr, flush=True)


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    capture: bool = False,
    check: bool = True,
    what: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run argv (never through a shell). env entries are added to os.environ."""
    full_env = dict(os.environ)
    full_env["PATH"] = tool_path()
    if env:
        full_env.update(env)
    log("$ " + shlex.join(argv))
    try:
        proc = subprocess.run(
            list(argv),
            env=full_env,
            cwd=cwd,
            text=True,
            capture_output=capture,
            check=False,
        )
    except FileNotFoundError:
        raise CIError(f"{what or 'a step'} failed: program {argv[0]!r} was not found on PATH.") from None
    if check and proc.returncode != 0:
        detail = ""
        if capture:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-25:]
            detail = "\n" + "\n".join(tail)
        raise CIError(f"{what or shlex.join(argv)} failed with exit status {proc.returncode}.{detail}", exit_code=1)
    return proc
