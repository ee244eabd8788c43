"""Where cargo sees the Rust workspace: under a compiler cache for rustc, a copy at a path that does not depend
on the checkout, so that the workspace's own crates hit the cache from any checkout, as the registry's do.

sccache keys a rustc compile by its arguments, its working directory and its ``CARGO_`` variables. For the
workspace's crates cargo makes the working directory the workspace root and ``CARGO_MANIFEST_DIR`` the crate's
directory, both inside the checkout, and the checkout's path map (rustc_wrapper.py) names it too: from another
checkout they always missed. So, with a cache for rustc, the build copies the workspace (``Cargo.toml``,
``Cargo.lock`` and ``rust/``) into a slot, ``<cache>/monarch-runtime/cargo-workspaces/<n>``: the first one no
other build holds (an flock on ``<n>.lock``, held until cargo is done). A build alone takes slot 0 every time;
builds running at the same time take 1, 2, ..., which costs them hits, never a wrong build.

The slot is synced file by file and given the checkout's modification times, so cargo, whose target directory
stays the build directory's own, decides what is fresh exactly as it would in the checkout. cargo's config and
rustup's toolchain file are still found from the build directory, where maturin runs. A ``Cargo.lock`` that cargo
wrote is copied back. Without a cache for rustc, or where no slot can be made (a read-only cache directory, a
file system without locks), cargo builds the checkout itself, as before."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from build_backend import log

SLOTS = "cargo-workspaces"
WORKSPACE_FILES = ("Cargo.toml", "Cargo.lock")
WORKSPACE_DIR = "rust"
LOCK_FILE = "Cargo.lock"
# cargo marks its target directories with this file; one under rust/ (a `cargo build` run inside a crate) is
# an output, not a source.
TARGET_MARK = "CACHEDIR.TAG"
# Builds at the same time beyond this many share nothing with the cache and build in the checkout.
MAX_SLOTS = 64


@contextmanager
def workspace(source: Path, store: Path | None) -> Iterator[Path]:
    """The workspace root cargo is to build (``Cargo.toml`` there): a slot under ``store``, held and synced
    with ``source`` for as long as the context lasts; ``source`` itself where ``store`` is None or no slot can
    be had."""
    if store is None:
        yield source
        return
    try:
        fd, slot = _acquire(store)
    except OSError as err:
        log.info(
            f"cargo: building the workspace in the checkout: no slot under {store} ({err.strerror or err}); "
            "its own crates will miss the compiler cache from other checkouts"
        )
        yield source
        return
    try:
        root = slot
        try:
            _sync(source, slot)
        except OSError as err:
            log.info(
                f"cargo: building the workspace in the checkout: could not copy it into {slot} "
                f"({err.strerror or err}); its own crates will miss the compiler cache from other checkouts"
            )
            root = source
        yield root
        if root == slot:
            _copy_lock_back(slot, source)
    finally:
        os.close(fd)  # releases the flock (the kernel drops it too if this process is killed)


def _acquire(store: Path) -> tuple[int, Path]:
    store.mkdir(parents=True, exist_ok=True)
    for n in range(MAX_SLOTS):
        fd = os.open(store / f"{n}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        except OSError:
            os.close(fd)
            raise
        slot = store / str(n)
        slot.mkdir(exist_ok=True)
        return fd, slot
    raise OSError(f"all {MAX_SLOTS} slots are in use")


def sources(source: Path) -> list[Path]:
    """The workspace's files, relative to ``source``: the root's manifest and lock file, and everything under
    ``rust/`` but cargo target directories."""
    found = [Path(name) for name in WORKSPACE_FILES if (source / name).is_file()]
    for top, dirs, files in os.walk(source / WORKSPACE_DIR):
        here = Path(top)
        dirs[:] = sorted(d for d in dirs if not (here / d / TARGET_MARK).is_file())
        found += [(here / name).relative_to(source) for name in sorted(files)]
        # A symbolic link to a directory is copied as the link (os.walk does not enter it).
        found += [(here / d).relative_to(source) for d in dirs if (here / d).is_symlink()]
    return found


def _sync(source: Path, slot: Path) -> None:
    wanted = sources(source)
    keep = {slot / rel for rel in wanted}
    for rel in wanted:
        _make_parents(slot, rel)
        _sync_file(source / rel, slot / rel)
        keep.update((slot / rel).parents)
    # What the checkout no longer has (a removed file, or another checkout's).
    for name in WORKSPACE_FILES:
        stale = slot / name
        if stale not in keep and (stale.exists() or stale.is_symlink()):
            stale.unlink()
    tree = slot / WORKSPACE_DIR
    if tree.exists():
        for top, dirs, files in os.walk(tree, topdown=False):
            here = Path(top)
            for name in [*files, *dirs]:
                path = here / name
                if path not in keep:
                    if path.is_dir() and not path.is_symlink():
                        shutil.rmtree(path)
                    else:
                        path.unlink()
    # Directories keep the checkout's times too (cargo's rerun-if-changed on a directory looks into it): those
    # the copied files are in, deepest first (writing into one changed its time).
    copied_dirs = {parent for rel in wanted for parent in rel.parents if parent.parts[:1] == (WORKSPACE_DIR,)}
    for rel in sorted(copied_dirs, key=lambda d: len(d.parts), reverse=True):
        st = (source / rel).stat()
        os.utime(slot / rel, ns=(st.st_atime_ns, st.st_mtime_ns))


def _make_parents(slot: Path, rel: Path) -> None:
    """The directories above ``slot / rel``, where another checkout may have left a file (or a link) instead."""
    here = slot
    for part in rel.parts[:-1]:
        here = here / part
        if here.is_symlink() or (here.exists() and not here.is_dir()):
            here.unlink()
        here.mkdir(exist_ok=True)


def _sync_file(src: Path, dst: Path) -> None:
    if dst.is_dir() and not dst.is_symlink():
        shutil.rmtree(dst)
    if src.is_symlink():
        target = os.readlink(src)
        if not (dst.is_symlink() and os.readlink(dst) == target):
            dst.unlink(missing_ok=True)
            os.symlink(target, dst)
        return
    st = src.stat()
    data = src.read_bytes()
    if dst.is_symlink() or not dst.is_file() or dst.read_bytes() != data:
        tmp = dst.with_name(f".{dst.name}.partial")
        tmp.write_bytes(data)
        tmp.replace(dst)
    if (dst.stat().st_mode & 0o7777) != (st.st_mode & 0o7777):
        os.chmod(dst, st.st_mode & 0o7777)
    if dst.stat().st_mtime_ns != st.st_mtime_ns:
        os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))


def _copy_lock_back(slot: Path, source: Path) -> None:
    """cargo writes ``Cargo.lock`` when the checkout has none or it is out of date: the checkout gets it, as
    it would have in place."""
    made, mine = slot / LOCK_FILE, source / LOCK_FILE
    if not made.is_file():
        return
    data = made.read_bytes()
    if mine.is_file() and mine.read_bytes() == data:
        return
    tmp = mine.with_name(f".{LOCK_FILE}.partial")
    try:
        tmp.write_bytes(data)
        tmp.replace(mine)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        log.info(f"cargo: could not write the updated {mine}: {err.strerror}")
