"""The TorchFT tests' environment: a venv holding the session's CPU wheel, installed as a user would
(``pip install monarch-runtime[torchft]``, from the wheel file, no index), that sees torch and torchft
from the toolchain venv ci/install-toolchains.sh makes (``$MONARCH_TOOLCHAINS/torchft-venv``, from
ci/requirements-torchft.txt) through a .pth file, and nothing of the test tools. Without that venv the
tests skip, naming it; ci/run-tests.sh sets MONARCH_TEST_REQUIRE_TORCHFT=1, which makes them fail."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from _torchft_support import TORCHFT_VENV, pip_install, purelib, venv_seeing


@pytest.fixture(scope="session")
def torchft_site() -> Path:
    """site-packages of the toolchain's torch + torchft venv (skips, or fails where required, without it)."""
    python = TORCHFT_VENV / "bin" / "python"
    probe = (
        subprocess.run([str(python), "-c", "import torch, torchft"], capture_output=True, text=True, check=False)
        if python.exists()
        else None
    )
    if probe is None or probe.returncode != 0:
        why = f"torch/torchft not installed in {TORCHFT_VENV} (run ci/install-toolchains.sh)"
        if probe is not None:
            why += f": {probe.stderr.strip()[-500:]}"
        if os.environ.get("MONARCH_TEST_REQUIRE_TORCHFT") == "1":
            pytest.fail(why + "; MONARCH_TEST_REQUIRE_TORCHFT=1 requires them")
        pytest.skip(why)
    return purelib(python)


@pytest.fixture(scope="session")
def torchft_python(built_wheels: dict[str, Path], torchft_site: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The job venv's python: the CPU wheel with its [torchft] extra satisfied by the toolchain's torch."""
    python = venv_seeing(tmp_path_factory.mktemp("torchft-job") / "venv", torchft_site)
    proc = pip_install(python, f"{built_wheels['cpu']}[torchft]")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return python
