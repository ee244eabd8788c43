"""Progress lines for each stage: what it does and how long it took. Plain text, one line per event,
so it reads the same in pip's verbose log, in CI and on a terminal."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


def info(message: str) -> None:
    print(f"[monarch-runtime] {message}", file=sys.stderr, flush=True)


# Fault injection for the reliability tests (docs/reliability.md): with MONARCH_FAULT_PAUSE_AT=<stage>
# the build stops at the start of that stage until it is signalled, so a test can interrupt it there.
FAULT_PAUSE_ENV = "MONARCH_FAULT_PAUSE_AT"


@contextmanager
def stage(name: str, what: str) -> Iterator[None]:
    info(f"{name}: {what}")
    if os.environ.get(FAULT_PAUSE_ENV) == name:
        info(f"fault-injection: paused at {name}")
        time.sleep(3600)
    start = time.perf_counter()
    yield
    info(f"{name}: done in {time.perf_counter() - start:.2f} s")
