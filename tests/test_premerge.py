"""The pre-merge check CI runs on every change: `python -m tools check --strict` over csrc/ (lint, nvcc for
the CUDA archs and HIP-Clang for the ROCm archs) passes on this tree."""

from __future__ import annotations

import subprocess
import sys

import pytest
from _support import ROOT, Toolchains

pytestmark = pytest.mark.slow


def test_tools_check_strict_passes_on_csrc(toolchains: Toolchains) -> None:
    env = {**toolchains.env_for("rocm"), "CUDA_HOME": str(toolchains.cuda_home), "CI": "true"}
    proc = subprocess.run(
        [sys.executable, "-m", "tools", "check", "--strict"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "check: ok" in proc.stdout + proc.stderr
    for side in ("CUDA  ok", "ROCm  ok"):
        assert side in proc.stdout + proc.stderr
