"""The rows this machine can run, end to end, exactly as the workflow runs them.

The wheels come from the session fixture ``built_wheels`` (tests/conftest.py): each flavour is built
once per session and shared, so ``python -m ci run ROW --wheel W`` validates and tests it here without
rebuilding. The build step itself is covered by test_build_plumbing with a stand-in interpreter. The
root row rocm7.2-x86_64 runs on the 7.2 wheel the session builds once inside its root (``rocm72_wheel``,
tests/ci/conftest.py, shared with tests/build_backend/test_rocm_roots.py): validated here, tested in the root.
"""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ci_wheels import WheelFactory

from ci import validate
from ci.matrix import DEFAULT_MATRIX, REPO_ROOT, Matrix

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


@pytest.mark.slow
@x86_only
def test_root_row_end_to_end(rocm72_wheel: Path) -> None:
    """`python -m ci run rocm7.2-x86_64 --wheel W` on the wheel built in the root: validated here
    (auditwheel with the ROCm libraries external, the glibc ceiling), tested in the root's python."""
    res = subprocess.run(
        [sys.executable, "-m", "ci", "run", "rocm7.2-x86_64", "--wheel", str(rocm72_wheel)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    out = res.stdout
    assert res.returncode == 0, out + res.stderr[-4000:]
    assert "row rocm7.2-x86_64: PASSED" in out
    tag = re.fullmatch(r".*-cp39-abi3-manylinux_2_(\d+)_x86_64\.whl", rocm72_wheel.name)
    assert tag and int(tag[1]) <= 34, rocm72_wheel.name  # installs on RHEL 9 / Ubuntu 22.04 and later
    for needle in (
        "ok   glibc-ceiling: tag claims glibc",
        "ok   auditwheel: external libraries ['libamdhip64.so.7']",
        "ok   needed: monarch_runtime/_native.abi3.so",
        "ok   import py3.14 (in the root)",
        "ok   device: device_count() raised NoDeviceError",
        "hipErrorNoDevice",
        "ok   collective: collective_loaded True",
        "ok   build_info: build_info() in the ROCm 7.2 root: archs ['gfx90a', 'gfx942', 'gfx950']",
    ):
        assert needle in out, needle


@x86_only
@pytest.mark.slow
def test_root_wheel_against_a_lower_ceiling(rocm72_wheel: Path, tmp_path: Path) -> None:
    """The same real wheel fails validation when the ceiling is put one glibc below what it needs."""
    needed = validate.glibc_needed(list(validate.iter_elves(rocm72_wheel)))
    lower = f"{needed[0]}.{needed[1] - 1}"
    text = DEFAULT_MATRIX.read_text()
    start = text.index('[flavour."rocm7.2"]')
    at = text.index('glibc_max = "2.34"', start)
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(text[:at] + f'glibc_max = "{lower}"' + text[at + len('glibc_max = "2.34"') :])
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci",
            "--matrix",
            str(matrix),
            "validate",
            str(rocm72_wheel),
            "--row",
            "rocm7.2",
            "--no-smoke",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"FAIL glibc-ceiling: newest GLIBC_{needed[0]}.{needed[1]}, ceiling GLIBC_{lower}" in res.stdout
    # The tag claims at least what the symbols need, so it is above the ceiling too.
    assert f"FAIL glibc-ceiling: tag claims glibc {needed[0]}." in res.stdout and f"; ceiling {lower} (" in res.stdout
