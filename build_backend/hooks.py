"""The PEP 517 hooks' error rendering: a user's mistake or a failed tool (any ``buildcore.errors.UserError``)
becomes one paragraph on stderr and exit status 1, never a traceback."""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from build_backend.signals import interruptible
from buildcore.errors import UserError

T = TypeVar("T")


@contextmanager
def rendered_errors() -> Iterator[None]:
    """Turn a UserError (a BuildError, or a ToolError from tools/) into one message on stderr and exit status 1."""
    try:
        with interruptible():
            yield
    except UserError as err:
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
