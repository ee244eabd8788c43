"""The error base: a problem the user can fix, shown as one paragraph without a traceback.

Every layer raises a subclass of :class:`UserError` for a user's mistake or a failed tool: the build
(:class:`BuildError`, here, since detection and settings raise it too) and the commands under ``tools/``
(``tools.errors.ToolError``). The two entry points render any of them the same way: the PEP 517 hooks
(``build_backend.hooks``) and ``python -m tools`` (``tools.__main__``).
"""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix. ``str()`` is a paragraph saying what was probed and how to fix it;
    ``exit_code`` is the status the command exits with."""

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class BuildError(UserError):
    """A build that cannot go on (exit status 1)."""
