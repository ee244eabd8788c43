"""The hipified sources compile with HIP 5.2 (Debian's clang-15, syntax only, gfx90a) - or the report said
why they would not. Skipped where clang++-15 or the HIP headers are missing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tools.hipify import HipifyOptions, hipify_tree

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
CLANG = shutil.which("clang++-15")
RCCL_INCLUDE = Path.home() / ".cache/monarch-runtime/toolchains/rccl/usr/include"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CLANG is None or not Path("/usr/include/hip/hip_runtime.h").is_file(),
        reason="needs clang++-15 and HIP 5.2 headers (bash ci/install-toolchains.sh)",
    ),
]


def _syntax_only(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    assert CLANG is not None
    cmd = [
        CLANG,
        "-x",
        "hip",
        "--offload-arch=gfx90a",
        "-std=c++17",
        "--rocm-path=/usr",
        "--hip-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
        "-fsyntax-only",
        f"-I{path.parent}",
        *extra,
        str(path),
    ]
    env = {**os.environ, "HIP_PLATFORM": "amd"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=120)


def test_golden_runtime_output_compiles() -> None:
    proc = _syntax_only(GOLDEN / "runtime.cu.expected")
    assert proc.returncode == 0, proc.stderr


def test_hipified_csrc_compiles_or_report_explains(tmp_path: Path) -> None:
    csrc = REPO / "csrc"
    if not any(csrc.glob("*.cu")):
        pytest.skip("no csrc/*.cu yet")
    res = hipify_tree([csrc], tmp_path / "hip", HipifyOptions(hip_version=(5, 2)))
    reported = {f.name for f in res.findings if f.blocking}
    extra = [f"-I{RCCL_INCLUDE}", '-DMONARCH_COLLECTIVE_SONAME="librccl.so.1"']
    for src, out in res.outputs.items():
        if out.suffix != ".hip":
            continue
        proc = _syntax_only(out, *extra)
        if proc.returncode == 0:
            continue
        # Every undeclared name the compiler trips on must be in the report, as blocking.
        undeclared = set(re.findall(r"undeclared identifier '(\w+)'", proc.stderr))
        undeclared |= set(re.findall(r"no matching function for call to '(\w+)'", proc.stderr))
        assert undeclared, f"{src.name}: compile failed for a reason hipify did not report:\n{proc.stderr}"
        assert undeclared <= reported, f"{src.name}: unreported: {undeclared - reported}\n{proc.stderr}"
        assert res.blocking
