"""Fixtures for tests/ci. The repository root is put on sys.path so that `import ci` works under plain `pytest`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="session")
def rocm72_wheel(root_builds: dict[str, Any]) -> Path:
    """The rocm7.2-x86_64 wheel, shared with tests/build_backend/test_rocm_roots.py: tests/conftest.py's ``root_builds``
    builds it once per session inside the ROCm 7.2 root (pip wheel there, ROCM_HOME=/usr, the default archs
    -- the row's). Skips when the roots are not made (fails under MONARCH_TEST_REQUIRE_ROOTS=1, as in CI).
    `python -m ci build` for a root row itself is exercised by test_ci_roots.py (a stand-in for the root)."""
    build = root_builds["7.2"]
    if build.wheel is None:
        pytest.fail(f"the ROCm 7.2 wheel did not build in its root:\n{build.log[-5000:]}")
    wheel: Path = build.wheel
    return wheel
