"""rocm_compat compiles for cuda and rocm against the real CI toolchains, clippy-clean: the generated Rust
declarations and the C thunks (whose static checks compare every prototype and enum value with the
headers found). The library only: linking needs the compiled bridge, which the wheel tests build."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLCHAINS = Path(os.environ.get("MONARCH_TOOLCHAINS", Path.home() / ".cache" / "monarch-runtime" / "toolchains"))
ROCM = Path(os.environ.get("MONARCH_TEST_ROCM", "/usr"))

PLATFORMS = {
    "cuda": (
        TOOLCHAINS / "cuda-home" / "include" / "cuda_runtime_api.h",
        {"MONARCH_CUDA_HOME": str(TOOLCHAINS / "cuda-home")},
    ),
    "rocm": (
        ROCM / "include" / "hip" / "hip_runtime_api.h",
        {"MONARCH_ROCM_PATH": str(ROCM), "MONARCH_HIP_LIB_DIR": str(ROCM / "lib" / "x86_64-linux-gnu")},
    ),
}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo not installed")
@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_rocm_compat_builds_clippy_clean_for(platform: str, tmp_path: Path) -> None:
    header, extra = PLATFORMS[platform]
    if not header.is_file():
        pytest.skip(f"{header} not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONARCH_")}
    env.update(extra)
    env["MONARCH_GPU_PLATFORM"] = platform
    env["MONARCH_BRIDGE_LIB_DIR"] = str(tmp_path)  # not linked when building the library alone
    env["CARGO_TARGET_DIR"] = str(REPO / "target" / f"compat-{platform}")
    proc = subprocess.run(
        ["cargo", "clippy", "-p", "rocm_compat", "--lib", "--quiet", "--", "-D", "warnings"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
