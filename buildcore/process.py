"""Running external tools: argument lists only (never a shell), output captured, and on failure a
BuildError that names the command and shows the last lines of its output. Every tool runs with TMPDIR,
TMP and TEMP pointing at a directory of ours (private_tmpdir), removed afterwards, so nothing it leaves
behind reaches the user's temporary directory (Debian's clang-15 leaves empty directories there for every
HIP compile; see docs/reliability.md)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from buildcore.errors import BuildError

TAIL_LINES = 40
TEMP_VARIABLES = ("TMPDIR", "TMP", "TEMP")


def tool_env(env: Mapping[str, str] | None, tmpdir: Path) -> dict[str, str]:
    """The environment a tool runs in: ``env`` (this process's when None) with its temporary directory
    pointed at ``tmpdir``. The one place that builds a child's environment from the caller's."""
    base = os.environ if env is None else env
    return {**base, **dict.fromkeys(TEMP_VARIABLES, os.fspath(tmpdir))}


@contextmanager
def private_tmpdir(path: Path | None = None) -> Iterator[Path]:
    """A temporary directory for tools, removed on the way out, also on an error or an interruption.
    ``path``: that directory, emptied first (what a killed build left there); None: a fresh one in the
    user's temporary directory, for one-shot probes."""
    if path is None:
        made = Path(tempfile.mkdtemp(prefix="monarch-build-"))
    else:
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True, exist_ok=True)
        made = path
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


def run(
    args: Sequence[str | Path],
    *,
    env: Mapping[str, str] | None = None,
    tmpdir: Path,
    cwd: Path | None = None,
    what: str,
    fix: str = "",
) -> str:
    """Run ``args``; return its combined output. ``what`` says in words what the command does; ``tmpdir``
    is the tool's temporary directory (see tool_env)."""
    argv = [os.fspath(a) for a in args]
    try:
        proc = subprocess.run(
            argv,
            env=tool_env(env, tmpdir),
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
