"""The error the tools raise for a user's mistake; rendered without a traceback by ``python -m tools``."""

from __future__ import annotations

from buildcore.errors import UserError


class ToolError(UserError):
    """A problem the user can fix: bad path, bad option, missing compiler. ``str()`` is the message;
    exit status 2 unless given (a usage error, as argparse's)."""

    def __init__(self, message: str, *, exit_code: int = 2) -> None:
        super().__init__(message, exit_code=exit_code)
