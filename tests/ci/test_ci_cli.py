"""`python -m ci` as a user sees it: list, run/validate/test on wheels, collect, and clear errors."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ci_wheels import ElfSpec, WheelFactory

from ci import pythons
from ci.matrix import DEFAULT_MATRIX, REPO_ROOT, Matrix, host_arch

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


def ci(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ci", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def assert_user_error(res: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert res.returncode != 0
    assert "Traceback" not in res.stderr
    assert res.stderr.startswith("error: ")
    for needle in needles:
        assert needle in res.stderr, res.stderr


def matrix_without_toolchain(tmp_path: Path) -> Path:
    """The real matrix, with the CUDA toolchain probed at a path that does not exist."""
    text = DEFAULT_MATRIX.read_text().replace(
        'probe = ["{toolchains}/cuda-home/bin/nvcc"', 'probe = ["/nonexistent/cuda-home/bin/nvcc"'
    )
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    return path


def test_list_shows_every_row_and_why_not(real_matrix: Matrix, tmp_path: Path) -> None:
    res = ci("--matrix", str(matrix_without_toolchain(tmp_path)), "list")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    for row in real_matrix.rows:
        assert row.name in out
    for name, _ in real_matrix.excluded_rows:
        assert f"excluded: {name}" in out
    other = "aarch64" if host_arch() == "x86_64" else "x86_64"
    assert f"needs an {other} machine" in out
    cuda_line = next(line for line in out.splitlines() if line.startswith(f"cuda13-{host_arch()}"))
    assert cuda_line.split()[-1] in ("no", "test-only")
    assert "/nonexistent/cuda-home/bin/nvcc does not exist" in out
    assert "install-toolchains.sh" in out
    assert "abi3" in out


def test_run_explains_missing_toolchain(tmp_path: Path) -> None:
    res = ci("--matrix", str(matrix_without_toolchain(tmp_path)), "run", "cuda13")
    assert_user_error(res, "cannot be built on this machine", "/nonexistent/cuda-home/bin/nvcc", "--wheel")


def test_unknown_row_and_bad_wheel_are_user_errors(tmp_path: Path) -> None:
    assert_user_error(ci("run", "cuda12"), "unknown row 'cuda12'")
    assert_user_error(ci("run", "cpu", "--wheel", str(tmp_path / "none.whl")), "does not exist")
    assert_user_error(ci("validate", "--row", "cpu", "--dist", str(tmp_path)), "holds 0 wheels")
    assert_user_error(ci("--matrix", str(tmp_path / "absent.toml"), "list"), "does not exist")


def test_other_arch_row_cannot_test_here(tmp_path: Path, make_wheel: WheelFactory) -> None:
    other = "aarch64" if host_arch() == "x86_64" else "x86_64"
    assert_user_error(ci("run", f"cpu-{other}", "--wheel", str(make_wheel())), f"needs an {other} machine")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="synthetic wheels are tagged x86_64")
def test_run_with_wheel_passes_on_a_good_wheel_and_fails_on_a_bad_one(make_wheel: WheelFactory) -> None:
    good = make_wheel()
    res = ci("run", "cpu-x86_64", "--wheel", str(good), "--python", PY)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "row cpu-x86_64: PASSED" in res.stdout
    assert f"import py{PY}" in res.stdout
    # A linux_<arch> wheel (no repair ran) fails...
    unrepaired = make_wheel(plat="linux_x86_64")
    res = ci("run", "cpu-x86_64", "--wheel", str(unrepaired), "--python", PY)
    assert res.returncode == 1
    assert "FAIL tag: platform tag 'linux_x86_64'" in res.stdout
    assert "not manylinux-tagged" in res.stdout
    assert "row cpu-x86_64: FAILED" in res.stdout
    # A wheel that leaks the build machine's path in its RPATH fails.
    leaky = make_wheel(elves=[ElfSpec(rpath="/home/runner/work/target")])
    res = ci("run", "cpu-x86_64", "--wheel", str(leaky), "--python", PY, "--no-test")
    assert res.returncode == 1 and "FAIL rpath" in res.stdout


@pytest.mark.skipif(platform.machine() != "x86_64", reason="synthetic wheels are tagged x86_64")
def test_a_declared_repair_step_runs_on_a_copy(make_wheel: WheelFactory, tmp_path: Path) -> None:
    """A flavour's `repair` argv (here auditwheel repair) runs after the build, and with --wheel on a copy."""
    text = DEFAULT_MATRIX.read_text()
    start = text.index("[flavour.cpu]")
    at = text.index("repair = []", start)
    path = tmp_path / "matrix.toml"
    path.write_text(text[:at] + 'repair = ["auditwheel", "repair", "-w", "{outdir}", "{wheel}"]' + text[at + 11 :])
    unrepaired = make_wheel(plat="linux_x86_64")
    res = ci("--matrix", str(path), "run", "cpu-x86_64", "--wheel", str(unrepaired), "--python", PY)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "as cpu-x86_64: " in res.stdout and "-manylinux" in res.stdout
    assert unrepaired.exists()  # the given wheel is left alone
    res = ci("--matrix", str(path), "run", "cpu-x86_64", "--wheel", str(unrepaired), "--python", PY, "--no-repair")
    assert res.returncode == 1


@pytest.mark.skipif(platform.machine() != "x86_64", reason="synthetic wheels are tagged x86_64")
def test_validate_and_test_commands(make_wheel: WheelFactory) -> None:
    cuda_wheel = make_wheel(flavour="cuda13", local="cu13")
    res = ci("validate", str(cuda_wheel), "--row", "cuda13-x86_64", "--no-smoke")
    assert res.returncode == 0, res.stdout + res.stderr
    # The same wheel is not a ROCm wheel.
    res = ci("validate", str(cuda_wheel), "--row", "rocm5.2-x86_64", "--no-smoke", "--no-audit")
    assert res.returncode == 1 and "FAIL build_info" in res.stdout
    # --archs follows the build's -C archs.
    res = ci("validate", str(cuda_wheel), "--row", "cuda13", "--archs", "80;90;100", "--no-smoke", "--no-audit")
    assert res.returncode == 1 and "archs" in res.stdout
    res = ci("test", "cuda13-x86_64", "--wheel", str(cuda_wheel), "--python", PY)
    assert res.returncode == 0, res.stdout + res.stderr
    res = ci("test", "cuda13-x86_64", "--wheel", str(cuda_wheel), "--python", "2.7")
    assert_user_error(res, "not on row cuda13-x86_64's python axis")


def test_collect(tmp_path: Path, real_matrix: Matrix) -> None:
    house = tmp_path / "wheelhouse"
    house.mkdir()
    for row in real_matrix.rows:
        name = f"monarch_runtime-0.1.0+{row.flavour.local_version}-cp39-abi3-manylinux_2_28_{row.arch}.whl"
        (house / name).write_bytes(b"x")
    res = ci("collect", str(house))
    assert res.returncode == 0, res.stderr
    next(house.glob("*+cpu-*x86_64.whl")).unlink()
    assert_user_error(ci("collect", str(house)), "row cpu-x86_64: 0 wheels")


def test_help_lists_commands() -> None:
    res = ci("--help")
    assert res.returncode == 0
    for command in ("list", "run", "build", "validate", "test", "setup", "generate", "collect"):
        assert command in res.stdout


def test_python_m_ci_needs_no_third_party_packages_for_list(tmp_path: Path) -> None:
    """`list` and `generate --check` run on a bare 3.11+ interpreter (no pyelftools/auditwheel needed)."""
    bare = shutil.which("python3.11") or shutil.which("python3")
    if bare is None:
        pytest.skip("no python3 on PATH")
    res = subprocess.run([bare, "-m", "ci", "generate", "--check"], cwd=REPO_ROOT, capture_output=True, text=True)
    if "tomllib" in res.stderr:
        pytest.skip("python3 on PATH is older than 3.11")
    assert res.returncode == 0, res.stderr


def test_old_python_gets_a_clear_message() -> None:
    old = pythons.find("3.9") or pythons.find("3.10")
    if old is None:
        pytest.skip("no python 3.9/3.10 here")
    res = subprocess.run([old, "-m", "ci", "list"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert_user_error(res, "needs Python 3.11 or newer")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the root rows are x86_64 rows")
def test_root_rows_without_their_root_are_user_errors(tmp_path: Path, make_wheel: WheelFactory) -> None:
    """No root made (an empty MONARCH_TOOLCHAINS): build, run and test say so and how to make it."""
    env = {"MONARCH_TOOLCHAINS": str(tmp_path / "tc")}
    wheel = make_wheel(flavour="cpu", local="rocm7.2")
    stamp = f"{tmp_path}/tc/roots/rocm7.2/.monarch-root does not exist"
    res = ci("build", "rocm7.2-x86_64", "--out", str(tmp_path / "out"), env=env)
    assert_user_error(res, "cannot be built on this machine", stamp, "python -m ci setup rocm7.2-x86_64")
    res = ci("run", "rocm7.2", "--wheel", str(wheel), env=env)
    assert_user_error(
        res, "tested inside its ROCm root, which cannot be entered here", stamp, "ci/rocm-root.sh make 7.2"
    )
    res = ci("test", "rocm7.2-x86_64", "--wheel", str(wheel), "--python", "3.12", env=env)
    assert_user_error(res, "tested with its root's own python (3.14), not 3.12")
