"""The one exception type for a user's mistake or a failed tool, rendered without a traceback."""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


class BuildError(Exception):
    """A build that cannot go on. ``str()`` is a paragraph saying what was probed and how to fix it."""


@contextmanager
def rendered_errors() -> Iterator[None]:
    """Turn a BuildError (or a ToolError from tools/) into one message on stderr and exit status 1."""
    from build_backend.signals import interruptible  # noqa: PLC0415 - avoids an import cycle
    from tools.errors import ToolError  # noqa: PLC0415 - tools is imported only when a hook runs

    try:
        with interruptible():
            yield
    except (BuildError, ToolError) as err:
        print(f"\nmonarch-runtime: error: {err}\n", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    except OSError as err:  # our own reads and writes: disk full, permissions, a vanished file
        where = f" {err.filename}" if err.filename else ""
        hint = (
            "Free some space or choose a build directory on a larger disk with -C build-dir=PATH."
            if err.errno == errno.ENOSPC
            else "Check the path and its permissions."
        )
        print(f"\nmonarch-runtime: error: {err.strerror or err}:{where}. {hint}\n", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        print("\nmonarch-runtime: interrupted", file=sys.stderr, flush=True)
        raise SystemExit(130) from None


def hook(function: Callable[..., T]) -> Callable[..., T]:
    """Decorate a PEP 517 hook so user errors never show a traceback."""

    def wrapper(*args: object, **kwargs: object) -> T:
        with rendered_errors():
            return function(*args, **kwargs)
        raise AssertionError("unreachable")  # pragma: no cover

    wrapper.__name__ = function.__name__
    wrapper.__doc__ = function.__doc__
    return wrapper
