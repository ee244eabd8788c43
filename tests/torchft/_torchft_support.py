"""Helpers of the TorchFT tests (tests/torchft/conftest.py and the tests): the toolchain's torch + torchft
venv, venvs that see it, offline installs into them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _support import TOOLCHAINS, make_venv

TORCHFT_VENV = TOOLCHAINS / "torchft-venv"


def purelib(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def venv_seeing(base: Path, site: Path | None) -> Path:
    """A fresh venv (no pip) whose site-packages also sees ``site`` (a .pth file), when given."""
    python = make_venv(base)
    if site is not None:
        (purelib(python) / "torchft-venv.pth").write_text(f"{site}\n", encoding="utf-8")
    return python


def pip_install(python: Path, *requirements: str) -> subprocess.CompletedProcess[str]:
    """pip of the test venv installs into ``python``'s venv, offline (the wheel file; torch must be there)."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--quiet", *requirements],
        capture_output=True,
        text=True,
        check=False,
    )
