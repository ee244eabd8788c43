"""The one exception type every tool raises for a user's mistake; rendered without a traceback."""

from __future__ import annotations


class ToolError(Exception):
    """A problem the user can fix: bad path, bad option, missing compiler. ``str()`` is the message."""

    def __init__(self, message: str, *, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
