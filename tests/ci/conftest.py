"""Fixtures for tests/ci. The repository root is put on sys.path so that `import ci` works under plain `pytest`."""

from __future__ import annotations

import os
import subprocess
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


@pytest.fixture(scope="session")
def rocm72_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rocm7.2-x86_64 wheel, built ONCE per session inside the ROCm 7.2 root by
    `python -m ci build rocm7.2-x86_64` (about a minute). Skips when the root is not made (fails under
    MONARCH_TEST_REQUIRE_ROOTS=1, as in CI). Other suites that need a 7.2 wheel can share it."""
    from _roots import require_root  # noqa: PLC0415 (tests/_roots.py: found through tests/conftest.py's path)

    require_root("7.2")
    base = tmp_path_factory.mktemp("rocm72")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci",
            "build",
            "rocm7.2-x86_64",
            "--out",
            str(base / "out"),
            "--build-dir",
            str(base / "build"),
        ],
        cwd=ROOT,
        env={**os.environ, "SOURCE_DATE_EPOCH": "1700000000"},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if res.returncode != 0:
        pytest.fail(f"python -m ci build rocm7.2-x86_64 failed:\n{res.stdout[-3000:]}\n{res.stderr[-6000:]}")
    return Path(res.stdout.strip().splitlines()[-1])
