"""Helpers of the port/check tests (a unique module name: ``conftest`` is ambiguous between test directories)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from _support import ROOT

DATA = Path(__file__).resolve().parent / "data"

Runner = Callable[..., subprocess.CompletedProcess[str]]


def run_tools(
    *args: str | Path, env: Mapping[str, str], cwd: Path = ROOT, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``python -m tools ARGS`` from ``cwd`` (the checkout's root by default)."""
    return subprocess.run(
        [sys.executable, "-m", "tools", *map(str, args)],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
