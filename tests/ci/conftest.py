"""Fixtures for tests/ci. The repository root is put on sys.path so that `import ci` works under plain `pytest`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
for entry in (str(ROOT), str(HERE)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from ci_wheels import WheelFactory, wheel_factory  # noqa: E402

from ci import matrix as matrix_mod  # noqa: E402


@pytest.fixture(scope="session")
def real_matrix() -> matrix_mod.Matrix:
    return matrix_mod.load()


@pytest.fixture
def make_wheel(tmp_path: Path) -> WheelFactory:
    """make_wheel(**WheelSpec fields) -> path of a synthetic monarch_runtime wheel."""
    return wheel_factory(tmp_path)
