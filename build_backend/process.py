"""Running external tools: argument lists only (never a shell), output captured, and on failure a
BuildError that names the command and shows the last lines of its output."""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from build_backend.errors import BuildError

TAIL_LINES = 40


def run(
    args: Sequence[str | Path],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    what: str,
    fix: str = "",
) -> str:
    """Run ``args``; return its combined output. ``what`` says in words what the command does."""
    argv = [os.fspath(a) for a in args]
    try:
        proc = subprocess.run(
            argv,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            check=False,
        )
    except OSError as err:
        raise BuildError(f"could not start {what}: {argv[0]}: {err.strerror}. {fix}".strip()) from None
    output = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0 and "No space left on device" in output:
        raise BuildError(
            f'{what} ran out of disk space ("No space left on device")'
            + (f" while working in {cwd}" if cwd else "")
            + ". Free some space or choose a build directory on a larger disk with -C build-dir=PATH; "
            "the next build resumes from what was completed."
        )
    if proc.returncode != 0:
        tail = "\n".join(output.rstrip().splitlines()[-TAIL_LINES:])
        command = " ".join(shlex.quote(a) for a in argv)
        raise BuildError(
            f"{what} failed (exit status {proc.returncode}).\ncommand: {command}\n"
            f"last lines of its output:\n{tail}\n{fix}".rstrip()
        )
    return output
