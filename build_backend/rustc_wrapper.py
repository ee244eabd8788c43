"""cargo's RUSTC_WRAPPER for one build directory: a small shell script, written into it by rust.py, that makes
every crate compile with the same command line (and inputs) from any checkout, so that a compiler cache hits
them from anywhere, and runs every rustc through the build's compiler cache (or the user's own RUSTC_WRAPPER),
if any.

The workspace's own crates: the workspace's path map (``--remap-path-prefix=<workspace>=...``), appended, and
before it the build directory's where the crate's OUT_DIR stays there. Passed to every crate in RUSTFLAGS they
would put those paths into the command line of every crate, which sccache hashes as it is. The workspace is the
checkout, or, under a compiler cache, a copy at a path that does not depend on it (cargo_workspace.py), so the
map names nothing of the checkout either.

Every crate (the registry's, whose sources under CARGO_HOME are mapped for all in RUSTFLAGS, and the
workspace's): the build-script output directory it compiles against (OUT_DIR, under the build directory) moved
to a copy in a per-user directory named by its contents (``<out dirs>/<package>-<sha256>``, made once, never
changed): a crate that reads OUT_DIR (``env!("OUT_DIR")``: pyo3-build-config, target-lexicon) has its value in
sccache's key, and pyo3-build-config compiles it into its code, whence into pyo3-macros and so into the key of
pyo3. Where the copy cannot be made the crate keeps its OUT_DIR (a cache miss, nothing worse; a workspace crate
then gets the build directory's map). A build script that writes into another crate's OUT_DIR after that
crate's compile would write into the shared copy: pyo3's does, into pyo3-build-config's (the path compiled
into it), when cross-compiling or under its PYO3_CROSS* variables; rust.py then moves nothing (``out_dirs``
None). A copy so changed no longer equals any OUT_DIR and is never taken again.

Which crate is which: by CARGO_MANIFEST_DIR, which cargo sets for every crate it compiles (build scripts too);
under CARGO_HOME first (which may be inside the checkout), then under the workspace. cargo's probes
(``rustc -vV``, ``rustc - --print=...``) go through the wrapper too, without it: they get nothing.

Why not cargo's RUSTC_WORKSPACE_WRAPPER, which applies to workspace members only: with sccache as RUSTC_WRAPPER,
cargo runs ``sccache <workspace wrapper> rustc ...``, and sccache 0.16 fails its compiler probe there ("Compiler
not supported": it runs the wrapper as a C compiler), or, where it gets past it, runs rustc itself without
what the workspace wrapper adds. A wrapper in front of the cache runs ``<cache> rustc ... <flags>`` instead.
A user's own RUSTC_WORKSPACE_WRAPPER is untouched: cargo runs ``<this> <theirs> rustc ...``, and this runs
``<cache> <theirs> rustc ... <flags>``."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

WRAPPER_NAME = "rustc-wrapper"

# OUT_DIR -> <out dirs>/<package>-<sha256 of its files' names and contents>, made through a temporary directory
# renamed into place (a concurrent build that made it first wins; the contents are the same). The copies keep
# the build script's modification times: cargo takes an input newer than the start of the compile that read it
# for a change, and would rebuild that crate next time. Only a copy equal to OUT_DIR, file for file, stands in
# for it (a store changed by hand, or tools that hash wrongly, cost a cache miss, never a wrong build); any
# failure leaves OUT_DIR as it is.
_RELOCATE = """relocate_out_dir() {{
  [ -d "${{OUT_DIR-}}" ] || return 0
  sum=$(cd "$OUT_DIR" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum | sha256sum) || return 0
  dest={store}/"${{CARGO_PKG_NAME:-crate}}-${{sum%% *}}"
  if [ ! -d "$dest" ]; then
    mkdir -p {store} && tmp=$(mktemp -d {store}/.partial.XXXXXX) || return 0
    if cp -pR "$OUT_DIR/." "$tmp/" && mv -T "$tmp" "$dest" 2>/dev/null; then :; else rm -rf "$tmp"; fi
  fi
  diff -r "$OUT_DIR" "$dest" >/dev/null 2>&1 || return 0
  OUT_DIR=$dest
  export OUT_DIR
}}
"""


def script(
    workspace: Path,
    registry: Path,
    *,
    workspace_flags: Sequence[str],
    out_dirs: Path | None,
    launcher: str | None,
    build: Path | None = None,
    build_flags: Sequence[str] = (),
) -> str:
    """The wrapper's text. Every crate's OUT_DIR is moved into ``out_dirs`` (None: left); the crates under
    ``workspace`` but not under ``registry`` (CARGO_HOME) get ``build_flags`` where their OUT_DIR is still under
    ``build`` (no copy could be made), then ``workspace_flags``; then ``launcher`` (a program, as RUSTC_WRAPPER
    names one) runs the command, or the command runs itself."""
    q = shlex.quote

    def under(path: Path) -> str:
        return f"{q(os.fspath(path))}|{q(os.fspath(path))}/*"

    relocate = "relocate_out_dir" if out_dirs is not None else ":"
    member = [f"  {under(workspace)})", f"    {relocate}"]
    if build is not None and build_flags:
        flags = " ".join(q(f) for f in build_flags)
        member.append(f'    case "${{OUT_DIR-}}" in {under(build)}) set -- "$@" {flags} ;; esac')
    member.append(f'    set -- "$@" {" ".join(q(f) for f in workspace_flags)} ;;')
    lines = [
        "#!/bin/sh",
        "# Written by the monarch-runtime build backend (build_backend/rustc_wrapper.py) as cargo's RUSTC_WRAPPER:",
        "# every crate's OUT_DIR in a copy named by its contents; the workspace's path maps for its own crates;",
        "# then the compiler cache, if any.",
        *([_RELOCATE.format(store=q(os.fspath(out_dirs)))] if out_dirs is not None else []),
        'case "${CARGO_MANIFEST_DIR-}" in',
        f"  {under(registry)}) {relocate} ;;",
        *member,
        "esac",
        f'exec {q(launcher)} "$@"' if launcher else 'exec "$@"',
    ]
    return "\n".join(lines) + "\n"


def write(
    build_dir: Path,
    *,
    workspace: Path,
    registry: Path,
    workspace_flags: Sequence[str],
    out_dirs: Path | None,
    launcher: str | None,
    build_flags: Sequence[str] = (),
) -> Path:
    """Write the wrapper into ``build_dir`` (replacing the last build's at once) and return its path;
    ``build_flags`` are for the workspace's crates whose OUT_DIR stays in ``build_dir``."""
    path = build_dir / WRAPPER_NAME
    tmp = path.with_name(f".{WRAPPER_NAME}.tmp")
    text = script(
        workspace,
        registry,
        workspace_flags=workspace_flags,
        out_dirs=out_dirs,
        launcher=launcher,
        build=build_dir,
        build_flags=build_flags,
    )
    tmp.write_bytes(text.encode("utf-8", "surrogateescape"))
    tmp.chmod(0o755)
    tmp.replace(path)
    return path
