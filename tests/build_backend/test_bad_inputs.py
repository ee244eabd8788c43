"""Every bad input gets one clear paragraph naming what was probed and the fix, a non-zero exit, no
traceback, and no wheel left behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _support import ROOT, Toolchains, pip_wheel

pytestmark = pytest.mark.fault

HOOK = "import sys, json, build_backend\nbuild_backend.build_wheel(sys.argv[1], json.loads(sys.argv[2]))\n"


def call_backend(out: Path, env: dict[str, str], **config: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", HOOK, str(out), json.dumps(config)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def assert_user_error(proc: subprocess.CompletedProcess[str], out: Path, *needles: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "monarch-runtime: error:" in proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr
    assert not list(out.glob("*.whl")) and not list(out.glob(".*partial"))


@pytest.fixture
def out(tmp_path: Path) -> Path:
    d = tmp_path / "dist"
    d.mkdir()
    return d


def test_both_toolkits_set(out: Path, clean_env: dict[str, str], tmp_path: Path) -> None:
    env = {**clean_env, "CUDA_HOME": str(tmp_path / "cuda"), "ROCM_PATH": str(tmp_path / "rocm")}
    assert_user_error(
        call_backend(out, env), out, "both toolkits are set", "CUDA_HOME=", "ROCM_PATH=", "-C platform=cuda"
    )


def test_cuda_home_missing_directory(out: Path, clean_env: dict[str, str], tmp_path: Path) -> None:
    env = {**clean_env, "CUDA_HOME": str(tmp_path / "no such dir")}
    assert_user_error(call_backend(out, env), out, "does not exist", "no such dir")


def test_cuda_home_without_nvcc(out: Path, clean_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "cuda" / "bin").mkdir(parents=True)
    env = {**clean_env, "CUDA_PATH": str(tmp_path / "cuda")}
    assert_user_error(call_backend(out, env), out, "has no compiler", "nvcc")


def test_rocm_home_without_hip(out: Path, clean_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "rocm").mkdir()
    env = {**clean_env, "ROCM_HOME": str(tmp_path / "rocm")}
    assert_user_error(call_backend(out, env), out, "hip_version.h")


def test_rocm_without_a_hip_compiler(out: Path, clean_env: dict[str, str], tmp_path: Path) -> None:
    root = tmp_path / "rocm"
    (root / "include" / "hip").mkdir(parents=True)
    (root / "include" / "hip" / "hip_version.h").write_text(
        "#define HIP_VERSION_MAJOR 6\n#define HIP_VERSION_MINOR 1\n"
    )
    env = {**clean_env, "ROCM_HOME": str(root), "PATH": str(tmp_path / "empty-bin")}
    assert_user_error(call_backend(out, env), out, "no HIP-capable compiler", "probed")


def test_explicit_cuda_without_any_toolkit(out: Path, clean_env: dict[str, str]) -> None:
    if Path("/usr/local/cuda").exists():
        pytest.skip("this machine has /usr/local/cuda")
    assert_user_error(call_backend(out, clean_env, platform="cuda"), out, "no toolkit was found", "CUDA_HOME")


@pytest.mark.parametrize(
    ("config", "needles"),
    [
        ({"platform": "metal"}, ["platform='metal'", "cpu, cuda, rocm"]),
        ({"colour": "blue"}, ["unknown setting 'colour'", "archs:", "build-dir:"]),
        ({"debug": "maybe"}, ["not a boolean"]),
        ({"jobs": "0"}, ["at least 1"]),
        ({"archs": "80;$(touch /tmp/monarch-injected)"}, ["not an architecture name"]),
        ({"archs": "90", "platform": "cpu"}, ["compiles no device code"]),
        ({"hip-version": "six"}, ["not X.Y"]),
        (
            {"compiler-launcher": "distcc"},
            ["compiler-launcher='distcc'", "ccache, sccache or ccache+sccache", "CMAKE_<LANG>"],
        ),
    ],
)
def test_bad_config_values(out: Path, clean_env: dict[str, str], config: dict[str, str], needles: list[str]) -> None:
    assert_user_error(call_backend(out, clean_env, **config), out, *needles)
    assert not Path("/tmp/monarch-injected").exists()


def test_bad_environment_value(out: Path, clean_env: dict[str, str]) -> None:
    env = {**clean_env, "MONARCH_PLATFORM": "tpu"}
    assert_user_error(call_backend(out, env), out, "MONARCH_PLATFORM", "tpu")


def test_compiler_launcher_not_on_path(out: Path, clean_env: dict[str, str], tmp_path: Path) -> None:
    """A compiler cache that is asked for but missing stops in detect, before CMake or cargo run."""
    tools = tmp_path / "cc-only-bin"  # a C compiler for Rust's linker (detect asks for one first), no ccache
    tools.mkdir()
    (tools / "cc").symlink_to(shutil.which("cc") or "/usr/bin/cc")
    env = {**clean_env, "PATH": f"{tools}{os.pathsep}{Path(sys.executable).parent}"}
    proc = call_backend(out, env, **{"compiler-launcher": "ccache"})
    assert_user_error(
        proc, out, "compiler-launcher=ccache", "not found on PATH", "cc-only-bin", "apt-get install ccache"
    )
    assert "detect:" in proc.stderr and "cargo:" not in proc.stderr


def test_launcher_variable_naming_nothing(out: Path, clean_env: dict[str, str]) -> None:
    env = {**clean_env, "CMAKE_CXX_COMPILER_LAUNCHER": "/no/such/ccache"}
    assert_user_error(
        call_backend(out, env), out, "CMAKE_CXX_COMPILER_LAUNCHER", "/no/such/ccache", "not an executable"
    )


def test_cuda_arch_the_compiler_rejects(out: Path, toolchains: Toolchains) -> None:
    proc = call_backend(out, toolchains.env_for("cuda"), archs="20")
    assert_user_error(proc, out, "'20'", "not accepted by this nvcc", "It accepts:")
    assert "configure:" not in proc.stderr  # rejected before any compiling started


def test_rocm_arch_the_compiler_rejects(out: Path, toolchains: Toolchains) -> None:
    proc = call_backend(out, toolchains.env_for("rocm"), archs="gfx90a;gfx942")
    assert_user_error(proc, out, "gfx942", "rejects it", "cannot be built with HIP 5.2", "gfx90a, gfx940")
    assert "configure:" not in proc.stderr


def test_pip_shows_the_message_without_traceback(out: Path, clean_env: dict[str, str], tmp_path: Path) -> None:
    env = {**clean_env, "CUDA_HOME": str(tmp_path / "c"), "ROCM_HOME": str(tmp_path / "r")}
    proc = pip_wheel(ROOT, out, env)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "both toolkits are set" in text
    assert "Traceback" not in text
    assert not list(out.glob("*.whl"))


def test_environment_does_not_leak_between_tests() -> None:
    assert "MONARCH_PLATFORM" not in os.environ


def test_rocm_without_rccl_header(out: Path, toolchains: Toolchains) -> None:
    env = {k: v for k, v in toolchains.env_for("rocm").items() if k != "RCCL_HOME"}
    if Path("/usr/include/rccl/rccl.h").exists() or Path("/opt/rocm/include/rccl/rccl.h").exists():
        pytest.skip("this machine has a system RCCL header")
    proc = call_backend(out, env)
    assert_user_error(proc, out, "rccl/rccl.h", "probed", "RCCL_HOME")
    assert "configure:" not in proc.stderr


def test_rocm_home_at_a_file(out: Path, toolchains: Toolchains) -> None:
    hipcc = toolchains.rocm_home / "bin" / "hipcc"
    if not hipcc.is_file():
        pytest.skip(f"{hipcc} is not installed")
    env = {**toolchains.env_for("rocm"), "ROCM_HOME": str(hipcc)}
    proc = call_backend(out, env)
    assert_user_error(proc, out, f"ROCM_HOME={hipcc} is a file, not a directory", f"that is {toolchains.rocm_home}")


def test_rocm_home_at_a_cuda_toolkit(out: Path, toolchains: Toolchains) -> None:
    env = {**toolchains.env_for("rocm"), "ROCM_HOME": str(toolchains.cuda_home)}
    proc = call_backend(out, env)
    assert_user_error(
        proc, out, "is a CUDA toolkit", "bin/nvcc", f"CUDA_HOME={toolchains.cuda_home}", "unset ROCM_HOME"
    )


def test_rocm_home_whose_compiler_lacks_every_requested_arch(out: Path, toolchains: Toolchains) -> None:
    proc = call_backend(out, toolchains.env_for("rocm"), archs="gfx942;gfx950")  # HIP 5.2's clang-15
    assert_user_error(
        proc,
        out,
        "none of the requested ROCm architectures",
        "gfx942",
        "gfx950",
        "rejects it",
        "point ROCM_HOME (or ROCM_PATH) at a ROCm that builds them",
    )


def test_rocm_arch_the_device_libraries_lack(out: Path, toolchains: Toolchains) -> None:
    """clang-15 compiles for gfx1100, but Debian 12's device libraries (HIP 5.2) carry no bitcode for it."""
    proc = call_backend(out, toolchains.env_for("rocm"), archs="gfx1100")
    assert_user_error(proc, out, "gfx1100", "no oclc_isa_version bitcode for it", "-C archs=")
    assert "rejects it" not in proc.stderr and "configure:" not in proc.stderr


def test_rocm_native_on_a_machine_without_a_gpu(out: Path, toolchains: Toolchains) -> None:
    env = {**toolchains.env_for("rocm"), "ROCM_BOOTSTRAP_FORCE_GFX_ARCH": ""}
    proc = call_backend(out, env, archs="native")
    assert_user_error(proc, out, "archs=native (from -C archs)", "none was found", "amdgpu-arch", "-C archs=gfx942")
    assert "configure:" not in proc.stderr


def test_cuda_native_without_nvidia_smi(out: Path, toolchains: Toolchains, tmp_path: Path) -> None:
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")
    proc = call_backend(out, toolchains.env_for("cuda"), archs="native")
    assert_user_error(proc, out, "archs=native", "nvidia-smi --query-gpu=compute_cap", "not on PATH", "-C archs=80;90")


def test_cuda_native_reads_nvidia_smi(out: Path, toolchains: Toolchains, tmp_path: Path) -> None:
    """A stand-in nvidia-smi reporting an H100 and an A100: native is sm_90 and sm_80 (then the build goes on,
    so it is stopped by an arch nvcc rejects, named beside them: the error shows what native became)."""
    bin_dir = tmp_path / "smi"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(
        '#!/bin/sh\n[ "$1 $2" = "--query-gpu=compute_cap --format=csv,noheader" ] || exit 9\nprintf "9.0\\n8.0\\n9.0\\n"\n'
    )
    (bin_dir / "nvidia-smi").chmod(0o755)
    env = toolchains.env_for("cuda")
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    proc = call_backend(out, env, archs="native;20")
    assert_user_error(proc, out, "'20'", "native: 90, 80 found by nvidia-smi", "not accepted by this nvcc")


def bare_path(tmp_path: Path, *programs: str) -> str:
    """A PATH of one directory with links to only these programs of this machine (no cc, c++, gcc, g++)."""
    bin_dir = tmp_path / "bare-bin"
    bin_dir.mkdir()
    cargo_bin = Path.home() / ".cargo" / "bin"
    for name in programs:
        found = shutil.which(name) or shutil.which(name, path=str(cargo_bin))
        assert found, name
        (bin_dir / name).symlink_to(found)
    return str(bin_dir)


def test_cpu_without_cc_on_path_stops_in_detect(out: Path, clean_env: dict[str, str], tmp_path: Path) -> None:
    """The host-side complement of the bare root (test_bare_roots.py): this machine has cc, a PATH without
    it stands for one that has not."""
    env = {**clean_env, "PATH": bare_path(tmp_path, "cargo", "rustc")}
    env.pop("CC", None)
    proc = call_backend(out, env)
    assert_user_error(
        proc, out, "the CPU build needs a C compiler as Rust's linker", "CARGO_TARGET_", "apt-get install gcc"
    )
    assert "cargo:" not in proc.stderr


def test_cuda_without_a_host_compiler_on_path_stops_in_detect(
    out: Path, toolchains: Toolchains, tmp_path: Path
) -> None:
    env = {**toolchains.env_for("cuda"), "PATH": bare_path(tmp_path, "cargo", "rustc")}
    proc = call_backend(out, env)
    assert_user_error(proc, out, "the CUDA build needs a host C++ compiler", "CUDAHOSTCXX", "apt-get install g++")
    assert "configure:" not in proc.stderr
