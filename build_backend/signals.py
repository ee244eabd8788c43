"""SIGTERM and SIGHUP raise KeyboardInterrupt in the backend, like SIGINT does, so every stage unwinds:
the running tool is killed by subprocess.run, temporary files are removed, and nothing half-written
is renamed into place. (SIGKILL cannot be caught: atomic renames cover it, see docs/reliability.md.)"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextmanager
def interruptible() -> Iterator[None]:
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        for sig in previous:
            signal.signal(sig, _interrupt)
    except ValueError:  # not the main thread: leave the handlers alone
        previous = {}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
