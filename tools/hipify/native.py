"""The optional native scanner (rust/hipify_native, module ``monarch_hipify_native``).

The pure-Python engine in translate.py is the reference; the native one runs the same pass several
times faster and is used when installed (``pip install ./rust/hipify_native``; the test toolchain installs
it). ``MONARCH_HIPIFY_NATIVE`` chooses: ``auto`` (default: native when importable and built from this
tree's interface), ``0`` (always Python), ``1`` (native or a clear error).
"""

from __future__ import annotations

import importlib
import os

from tools.errors import ToolError

# typing costs ~5 ms to import, and start-up time counts: the protocols below exist for the type checker only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Protocol
else:
    Protocol = object

#: the Python <-> Rust contract; rust/hipify_native/src/lib.rs has the same number
INTERFACE = 3

Edit = tuple[int, int, bytes]  # put bytes in place of data[start:end]


class NativeScanner(Protocol):
    def translate(  # noqa: PLR0917 - the native method's positional-only signature
        self,
        data: bytes,
        classify: Callable[[bytes], bytes | bool | tuple[bytes] | None],
        on_name: Callable[[int, int], tuple[bytes, int, bool] | None],
        on_include: Callable[[int, int, int, bool, int], Edit | None],
        on_text: Callable[[int, int], bytes | None],
        on_statement: Callable[[int, int], bool],
        /,
    ) -> tuple[bytes | None, list[tuple[int, int]], list[tuple[int, int]]]: ...


class NativeLintScanner(Protocol):
    def scan(self, data: bytes, /) -> tuple[bool, int, list[tuple[int, int, int]]]: ...


class NativeModule(Protocol):
    INTERFACE: int

    def Scanner(self, prefixes: list[bytes], launch: bool, literals: bool, /) -> NativeScanner: ...

    def LintScanner(
        self, patterns: list[tuple[str, bytes, bytes, bool]], device_markers: list[bytes], markers: list[bytes], /
    ) -> NativeLintScanner: ...


_INSTALL = "pip install ./rust/hipify_native (from the repository root; needs cargo)"


def load(env: Mapping[str, str] | None = None) -> NativeModule | None:
    """The native module to use, or None for the Python engine (see the module doc for the choice)."""
    choice = (os.environ if env is None else env).get("MONARCH_HIPIFY_NATIVE", "auto").strip().lower()
    if choice in ("0", "off", "no", "false", "python"):
        return None
    if choice not in ("", "auto", "1", "on", "yes", "true", "native"):
        raise ToolError(
            f"MONARCH_HIPIFY_NATIVE={choice!r} is not one of auto, 0 (Python engine), 1 (native engine). "
            "Unset it to use the native scanner when it is installed."
        )
    required = choice in ("1", "on", "yes", "true", "native")
    try:
        module = importlib.import_module("monarch_hipify_native")  # optional; imported only here (start-up)
    except ImportError as err:
        if required:
            raise ToolError(
                f"MONARCH_HIPIFY_NATIVE={choice} asks for the native hipify scanner, but it is not importable "
                f"({err}). Install it with {_INSTALL}, or unset MONARCH_HIPIFY_NATIVE."
            ) from None
        return None
    found = getattr(module, "INTERFACE", None)
    if found != INTERFACE:
        if required:
            raise ToolError(
                f"the installed monarch_hipify_native ({getattr(module, '__file__', '?')}) speaks interface "
                f"{found}, this tree needs {INTERFACE}: it was built from another version. Rebuild it with "
                f"{_INSTALL}, or unset MONARCH_HIPIFY_NATIVE."
            )
        return None  # a stale build: the Python engine gives the same results
    return module  # (checked above: it speaks this interface)
