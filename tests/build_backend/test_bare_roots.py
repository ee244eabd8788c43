"""Where users are: the ROCm roots carry what Debian's ROCm packages install (hipcc, libamdhip64-dev, RCCL,
python3-venv) and nothing of gcc, g++ or cc. There the ROCm wheel builds with the ROCm clang alone (the
root_builds wheels, checked in test_rocm_roots.py), and the CPU and CUDA builds, which need a host
compiler, stop in detect with one paragraph. archs=native asks the root's amdgpu-arch/offload-arch, and
rocm-bootstrap where it is installed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _roots import BUILD_ENV, ROCM_ROOT_VERSIONS, require_root, run_in_root
from _support import TOOLCHAINS, copy_tree

HOST_COMPILERS = ("cc", "c++", "gcc", "g++")
DETECT = "import os, sys\nfrom buildcore.settings import Settings\nfrom buildcore.toolchain import detect\n"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of this checkout (a build in the root writes nothing into the checkout itself)."""
    return copy_tree(tmp_path_factory.mktemp("bare-root-tree") / "src")


def pip_wheel_in_root(version: str, tree: Path, out: Path, env: dict[str, str], *config: str) -> tuple[int, str]:
    argv = ["python", "-m", "pip", "wheel", str(tree), "--no-deps", "--no-build-isolation", "-w", str(out)]
    argv += [f"--config-settings={c}" for c in config]
    proc = run_in_root(version, argv, binds=[tree.parent, out.parent], env=env, cwd=tree, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr


def assert_stopped_in_detect(rc: int, log: str, out: Path, *needles: str) -> str:
    assert rc != 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    (line,) = [x for x in log.splitlines() if "monarch-runtime: error:" in x]
    for needle in needles:
        assert needle in line, line
    assert "configure:" not in log and "cargo:" not in log, log[-3000:]  # nothing compiled
    assert not list(out.glob("*.whl"))
    return line


@pytest.mark.parametrize("version", ROCM_ROOT_VERSIONS)
def test_the_root_has_no_host_compiler(version: str) -> None:
    """Neither programs nor packages: the recipe is no kinder than a user's machine (ci/rocm-root.sh)."""
    root = require_root(version)
    found = run_in_root(version, ["sh", "-c", f"for p in {' '.join(HOST_COMPILERS)}; do command -v $p; done; true"])
    assert found.returncode == 0 and found.stdout.strip() == "", found.stdout
    status = (root / "var" / "lib" / "dpkg" / "status").read_text(encoding="utf-8", errors="replace")
    installed = {
        block.split("\n", 1)[0].removeprefix("Package: ")
        for block in status.split("\n\n")
        if "Status: install ok installed" in block
    }
    assert installed & {"clang-22", "clang-21"}, "no ROCm clang in the root?"
    compilers = sorted(p for p in installed if p.split("-")[0] in ("gcc", "g++", "cpp") and p != "gcc-16-base")
    assert not compilers, compilers


@pytest.mark.fault
def test_cpu_build_in_a_bare_root_stops_in_detect(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "dist"
    rc, log = pip_wheel_in_root("7.2", tree, out, {})
    line = assert_stopped_in_detect(
        rc,
        log,
        out,
        "the CPU build needs a C compiler as Rust's linker",
        "cc, gcc and clang on PATH=",
        "apt-get install gcc",
    )
    assert "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER" in line


@pytest.mark.fault
def test_cuda_build_in_a_bare_root_stops_in_detect(tree: Path, tmp_path: Path) -> None:
    """The PyPI CUDA 13 toolkit and NCCL of this machine, bound into the root: everything the CUDA build
    needs is there except a host compiler for nvcc."""
    require_root("7.2")
    cuda, nccl = (TOOLCHAINS / "cuda-home").resolve(), (TOOLCHAINS / "nccl-home").resolve()
    if not (cuda / "bin" / "nvcc").is_file():
        pytest.fail(f"the CUDA toolkit is not installed at {cuda}; run bash ci/install-toolchains.sh")
    out = tmp_path / "dist"
    argv = ["python", "-m", "pip", "wheel", str(tree), "--no-deps", "--no-build-isolation", "-w", str(out)]
    proc = run_in_root(
        "7.2",
        argv,
        binds=[tree.parent, out.parent],
        ro_binds=[cuda, nccl],
        env={"CUDA_HOME": str(cuda), "NCCL_HOME": str(nccl)},
        cwd=tree,
        timeout=600,
    )
    assert_stopped_in_detect(
        proc.returncode,
        proc.stdout + proc.stderr,
        out,
        "the CUDA build needs a host C++ compiler",
        "CUDAHOSTCXX and CXX: unset; c++, g++ and clang++ on PATH=",
        "apt-get install g++",
        "set CUDAHOSTCXX (or CXX)",
    )


@pytest.mark.fault
@pytest.mark.parametrize("version", ROCM_ROOT_VERSIONS)
def test_native_without_a_gpu_in_the_root(tree: Path, tmp_path: Path, version: str) -> None:
    out = tmp_path / "dist"
    rc, log = pip_wheel_in_root(version, tree, out, {"ROCM_HOME": "/usr", **BUILD_ENV[version]}, "archs=native")
    llvm = "llvm-22" if version == "7.2" else "llvm-21"
    assert_stopped_in_detect(
        rc,
        log,
        out,
        "archs=native (from -C archs) builds for this machine's GPUs, and none was found",
        "rocm-bootstrap (not installed)",
        f"/usr/lib/{llvm}/bin/amdgpu-arch (found no GPU)",
        f"/usr/lib/{llvm}/bin/offload-arch (found no GPU)",
        "-C archs=gfx942",
    )


@pytest.mark.parametrize("version", ROCM_ROOT_VERSIONS)
def test_native_through_rocm_bootstrap_in_the_root(tree: Path, tmp_path: Path, version: str) -> None:
    """rocm-bootstrap (pure Python; the test venv's copy, put on the root python's PYTHONPATH) with its forced
    arch stands in for a GPU; detection in the bare root takes it, and the ROCm clang for host code."""
    import rocm_bootstrap  # noqa: PLC0415 - ci/requirements-test.txt

    site = tmp_path / "site"
    shutil.copytree(Path(rocm_bootstrap.__file__).parent, site / "rocm_bootstrap")
    code = DETECT + (
        "tc = detect(Settings(platform='rocm', archs=('native',), sources={'archs': '-C archs'}), os.environ)\n"
        "print('ARCHS', ';'.join(tc.archs))\nprint('HOST', tc.host.describe())\n"
    )
    env = {"ROCM_HOME": "/usr", "ROCM_BOOTSTRAP_FORCE_GFX_ARCH": "gfx950,gfx942", **BUILD_ENV[version]}
    env["PYTHONPATH"] = f"{site}:{tree}"
    proc = run_in_root(version, ["python", "-c", code], binds=[tree.parent, tmp_path], env=env, cwd=tree)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ARCHS gfx950;gfx942" in proc.stdout, proc.stdout
    assert "C++ compiler /usr/lib/llvm-" in proc.stdout and "(the ROCm clang: no c++ on PATH)" in proc.stdout
