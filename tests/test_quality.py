"""mypy --strict and ruff over the Python that ships or builds (build_backend/, tools/, ci/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _support import ROOT

BIN = Path(sys.executable).parent


def test_mypy_strict() -> None:
    proc = subprocess.run(
        [str(BIN / "mypy"), "--strict", "buildcore", "build_backend", "tools", "ci"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-5000:]


PYTHON_DIRS = ("buildcore", "build_backend", "tools", "ci", "tests", "bench", "python")


def test_ruff() -> None:
    proc = subprocess.run(
        [str(BIN / "ruff"), "check", *PYTHON_DIRS], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout[-5000:]


def test_ruff_format() -> None:
    proc = subprocess.run(
        [str(BIN / "ruff"), "format", "--check", *PYTHON_DIRS], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
