"""The rows this machine can run, end to end, exactly as the workflow runs them.

The wheels come from the session fixture ``built_wheels`` (tests/conftest.py): each flavour is built
once per session and shared, so ``python -m ci run ROW --wheel W`` validates and tests it here without
rebuilding. The build step itself is covered by test_build_plumbing with a stand-in interpreter.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from ci_wheels import WheelFactory

from ci.matrix import REPO_ROOT, Matrix

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
# built_wheels key -> the matrix row it is built for.
ROWS = {"cpu": "cpu-x86_64", "cuda": "cuda13-x86_64", "rocm": "rocm5.2-x86_64"}

x86_only = pytest.mark.skipif(platform.machine() != "x86_64", reason="the local rows are x86_64 rows")


@pytest.mark.slow
@x86_only
@pytest.mark.parametrize("flavour", sorted(ROWS))
def test_row_end_to_end(flavour: str, built_wheels: dict[str, Path], real_matrix: Matrix) -> None:
    row = real_matrix.row(ROWS[flavour])
    assert row.flavour.platform == flavour
    # The CPU wheel is tested on every python of the axis; the GPU wheels (which pull the ~300 MB
    # NCCL wheel into each venv) on the oldest and the current one.
    pythons = list(row.pythons) if flavour == "cpu" else sorted({real_matrix.build_python, PY})
    args = [a for py in pythons for a in ("--python", py)]
    res = subprocess.run(
        [sys.executable, "-m", "ci", "run", row.name, "--wheel", str(built_wheels[flavour]), *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert res.returncode == 0, res.stdout + res.stderr[-4000:]
    assert f"row {row.name}: PASSED" in res.stdout


STAND_IN = """#!{python}
# Stands in for the build interpreter: records how it was called, then "builds" a prepared wheel.
import json, os, shutil, sys
argv = sys.argv[1:]
out = argv[argv.index("-w") + 1]
keys = ("CUDA_HOME", "NCCL_HOME", "ROCM_HOME", "HIP_PLATFORM", "RCCL_HOME")
with open({record!r}, "w") as fh:
    json.dump({{"argv": argv, "env": {{k: os.environ.get(k) for k in keys}}}}, fh)
shutil.copy({wheel!r}, out)
"""


@x86_only
def test_build_plumbing(tmp_path: Path, make_wheel: WheelFactory) -> None:
    """`ci build` calls pip wheel with the row's platform, archs and toolchain environment."""
    wheel = make_wheel(flavour="cpu", local="cpu")
    record = tmp_path / "record.json"
    fake = tmp_path / "python-stand-in"
    fake.write_text(STAND_IN.format(python=sys.executable, record=str(record), wheel=str(wheel)))
    fake.chmod(0o755)
    out = tmp_path / "dist"

    def build(row: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ci", "build", row, "--out", str(out), "--build-python", str(fake), *extra],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
        )

    res = build("cpu-x86_64", "--build-mode", "pip")
    assert res.returncode == 0, res.stderr
    built = Path(res.stdout.strip().splitlines()[-1])
    assert built == out / wheel.name
    assert [p.name for p in out.glob("*.whl")] == [wheel.name]
    called = json.loads(record.read_text())
    argv = called["argv"]
    assert argv[:3] == ["-m", "pip", "wheel"] and "--no-deps" in argv
    assert argv[argv.index("platform=cpu") - 1] == "--config-settings"
    assert not any(a.startswith("archs=") for a in argv)
    assert "--no-build-isolation" not in argv  # pip's own isolation
    # A second build into the same directory is refused: the output must be unambiguous.
    res = build("cpu-x86_64", "--build-mode", "pip")
    assert res.returncode != 0 and "already holds" in res.stderr and "Traceback" not in res.stderr
    # --archs and --no-build-isolation reach pip.
    for stale in out.glob("*.whl"):
        stale.unlink()
    res = build("cpu-x86_64", "--archs", "x;y", "--no-build-isolation")
    assert res.returncode == 0, res.stderr
    argv = json.loads(record.read_text())["argv"]
    assert "archs=x;y" in argv and "--no-build-isolation" in argv
