"""Progress lines for each stage: what it does and how long it took. Plain text, one line per event,
so it reads the same in pip's verbose log, in CI and on a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


def info(message: str) -> None:
    print(f"[monarch-runtime] {message}", file=sys.stderr, flush=True)


@contextmanager
def stage(name: str, what: str) -> Iterator[None]:
    info(f"{name}: {what}")
    start = time.perf_counter()
    yield
    info(f"{name}: done in {time.perf_counter() - start:.2f} s")
