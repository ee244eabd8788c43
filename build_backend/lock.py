"""One build at a time per build directory. A second build of the same tree into the same build
directory waits for the first (saying who holds the lock) instead of corrupting CMake, cargo or the
hipify cache; builds into different directories run in parallel."""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from build_backend import log
from buildcore.errors import BuildError

LOCK_NAME = ".monarch-build.lock"
WAIT_SECONDS = 3600.0


@contextmanager
def build_lock(build_dir: Path, wait: float = WAIT_SECONDS) -> Iterator[None]:
    path = build_dir / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "another build"
            log.info(f"lock: {build_dir} is in use by {holder}; waiting for it to finish")
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise BuildError(
                            f"the build directory {build_dir} has been locked by {holder} for over {wait:.0f} s. "
                            "Wait for that build, or use another directory with -C build-dir=PATH."
                        ) from None
                    time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%H:%M:%S')}".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the flock; the kernel also drops it if this process is killed
