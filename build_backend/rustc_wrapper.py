"""cargo's RUSTC_WRAPPER for one build directory: a small shell script, written into it by rust.py, that gives
the crates whose sources are in the checkout (the workspace's own) flags that the others do not get, and runs
every rustc through the build's compiler cache (or the user's own RUSTC_WRAPPER), if any.

Why: the reproducibility path maps name the checkout and the build directory (``--remap-path-prefix=<source>=
...``). Passed to every crate in RUSTFLAGS, they put those paths in the command line of every crate, so a
compiler cache (sccache hashes rustc's arguments as they are) could hit a registry crate only from the same
checkout. Given to the workspace's crates alone, the registry's crates (their sources in CARGO_HOME, mapped for
all) get the same command line from any checkout.

Why not cargo's RUSTC_WORKSPACE_WRAPPER, which applies to workspace members only: with sccache as RUSTC_WRAPPER,
cargo runs ``sccache <workspace wrapper> rustc ...``, and sccache 0.16 fails its compiler probe there ("Compiler
not supported": it runs the wrapper as a C compiler), or, where it gets past it, runs rustc itself without
what the workspace wrapper adds. A wrapper in front of the cache runs ``<cache> rustc ... <flags>`` instead.

Which crates are the workspace's: those whose CARGO_MANIFEST_DIR (cargo sets it for every crate it compiles,
build scripts included) is in the source tree and not in CARGO_HOME (which may be inside it). cargo runs its
probes (``rustc -vV``, ``rustc - --print=...``) through the wrapper too, without it: they get nothing.
A user's own RUSTC_WORKSPACE_WRAPPER is untouched: cargo runs ``<this> <theirs> rustc ...``, and this script runs
``<cache> <theirs> rustc ... <flags>``."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

WRAPPER_NAME = "rustc-wrapper"


def script(members: Path, outside: Sequence[Path], member_flags: Sequence[str], launcher: str | None) -> str:
    """The wrapper's text: ``member_flags`` appended for crates under ``members`` but not under ``outside``;
    then ``launcher`` (a program, as RUSTC_WRAPPER names one) runs the command, or the command runs itself."""
    q = shlex.quote

    def under(path: Path) -> str:
        return f"{q(os.fspath(path))}|{q(os.fspath(path))}/*"

    lines = [
        "#!/bin/sh",
        "# Written by the monarch-runtime build backend (build_backend/rustc_wrapper.py) as cargo's RUSTC_WRAPPER:",
        "# the path maps of the checkout for its own crates only; then the compiler cache, if any.",
        'case "${CARGO_MANIFEST_DIR-}" in',
        *(f"  {under(p)}) ;;" for p in outside),
        f'  {under(members)}) set -- "$@" {" ".join(q(f) for f in member_flags)} ;;',
        "esac",
        f'exec {q(launcher)} "$@"' if launcher else 'exec "$@"',
    ]
    return "\n".join(lines) + "\n"


def write(
    build_dir: Path, members: Path, outside: Sequence[Path], member_flags: Sequence[str], launcher: str | None
) -> Path:
    """Write the wrapper into ``build_dir`` (replacing the last build's at once) and return its path."""
    path = build_dir / WRAPPER_NAME
    tmp = path.with_name(f".{WRAPPER_NAME}.tmp")
    tmp.write_bytes(script(members, outside, member_flags, launcher).encode("utf-8", "surrogateescape"))
    tmp.chmod(0o755)
    tmp.replace(path)
    return path
