"""The Rust workspace on the CPU platform: unit tests and clippy with warnings denied."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from _support import ROOT

pytestmark = pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo not installed")


def cargo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["cargo", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_cargo_test_workspace() -> None:
    proc = cargo("test", "--workspace", "--quiet")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "test result: ok" in proc.stdout


def test_clippy_denies_warnings() -> None:
    proc = cargo("clippy", "--workspace", "--all-targets", "--quiet", "--", "-D", "warnings")
    assert proc.returncode == 0, proc.stderr[-5000:]
