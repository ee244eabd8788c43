"""The one exception type ``python -m ci`` turns into a clear message and a non-zero exit."""

from __future__ import annotations


class CIError(Exception):
    """A user-facing error: printed as one paragraph, no traceback."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
