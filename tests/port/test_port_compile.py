"""port and check with the real compilers: nvcc (CUDA 13, sm_80) and HIP-Clang (HIP 5.2, gfx90a).
One arch per side keeps each compile to a few seconds on 2 cores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _port_support import DATA, Runner
from _support import ROOT, temp_env, tree_digest

from tools.port.report import SECTIONS

pytestmark = pytest.mark.slow
ARCHS = ("--cuda-archs", "80", "--rocm-archs", "gfx90a")
KERNELS = DATA / "kernels"


def test_clean_kernel_compiles_both_sides(tools_cli: Runner, port_env: dict[str, str], tmp_path: Path) -> None:
    report = tmp_path / "scale2.html"
    proc = tools_cli("port", KERNELS / "scale2.cu", *ARCHS, "--report", report, env=port_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "CUDA  ok  tests/port/data/kernels/scale2.cu (sm_80)" in out
    assert "ROCm  ok  tests/port/data/kernels/scale2.cu (gfx90a)" in out
    assert "findings: 0 (0 blocking)" in out and "port: ok" in out
    html = report.read_text()
    assert '<td class="ok">passes</td>' in html
    assert html.count('<span class="ok">compiles</span>') == 2
    assert "+#include &quot;scale2_params_hip.h&quot;" in html  # the project header it includes was ported too


def test_api_missing_in_target_hip_blocks_naming_api_and_version(
    tools_cli: Runner, port_env: dict[str, str], tmp_path: Path
) -> None:
    report = tmp_path / "version.md"
    proc = tools_cli(
        "port", DATA / "hazards" / "version.cu", *ARCHS, "--hip-version", "5.2", "--report", report, env=port_env
    )
    assert proc.returncode == 1
    assert "CUDA  ok" in proc.stdout  # valid CUDA 13 ...
    assert "cudaGraphAddNode -> hipGraphAddNode needs HIP >= 6.2 (target 5.2)" in proc.stdout  # ... blocked for HIP 5.2
    verdict = proc.stdout[proc.stdout.index("port: FAILED") :]
    assert "cudaGraphAddNode" in verdict and "6.2" in verdict
    md = report.read_text()
    for section in SECTIONS:
        assert f"## {section}\n" in md
    assert "| Verdict | FAILED |" in md and "needs HIP >= 6.2" in md


def test_rocm_only_break_names_the_rocm_side_at_the_cuda_line(
    tools_cli: Runner, port_env: dict[str, str], tmp_path: Path
) -> None:
    src = KERNELS / "rocm_only.cu"
    tmpdir = tmp_path / "tmpdir"
    proc = tools_cli("port", src, *ARCHS, env={**port_env, **temp_env(tmpdir)})
    assert proc.returncode == 1
    assert not list(tmpdir.iterdir())  # a failed compile leaves nothing in TMPDIR either
    assert "CUDA  ok" in proc.stdout and "ROCm  FAILED" in proc.stdout
    line = src.read_text().splitlines()[5]
    col = line.index("__reduce_add_sync") + 1  # in the CUDA source; the HIP file has it one column left
    where = f"tests/port/data/kernels/rocm_only.cu:6:{col}"
    assert f"the ROCm side does not compile: {where}: use of undeclared identifier '__reduce_add_sync'" in proc.stdout
    assert "the CUDA side" not in proc.stdout
    assert ".hip:" not in proc.stdout  # every compiler position is mapped back to the CUDA source


def test_cuda_only_break_names_the_cuda_side(tools_cli: Runner, port_env: dict[str, str], tmp_path: Path) -> None:
    report = tmp_path / "cuda_only.md"
    proc = tools_cli("port", KERNELS / "cuda_only.cu", *ARCHS, "--report", report, env=port_env)
    assert proc.returncode == 1
    assert "CUDA  FAILED" in proc.stdout and "ROCm  ok" in proc.stdout
    assert (
        'the CUDA side does not compile: tests/port/data/kernels/cuda_only.cu:5:21: identifier "__builtin_amdgcn_readfirstlane" is undefined'
        in proc.stdout
    )
    assert "the ROCm side" not in proc.stdout
    md = report.read_text()
    assert "| CUDA compile | FAILS (sm_80): 1 error |" in md and "| ROCm compile | compiles (gfx90a) |" in md
    assert "`tests/port/data/kernels/cuda_only.cu:5:21`" in md


def test_one_side_missing_still_compiles_the_other(tools_cli: Runner, port_env: dict[str, str]) -> None:
    env = {k: v for k, v in port_env.items() if k not in ("ROCM_HOME", "ROCM_PATH")}
    env["ROCM_HOME"] = "/nonexistent/rocm"
    proc = tools_cli("port", KERNELS / "scale2.cu", "--cuda-archs", "80", "--hip-version", "5.2", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "CUDA  ok" in proc.stdout and "ROCm  skipped: ROCM_HOME=/nonexistent/rocm" in proc.stdout
    assert "port: ok, with the ROCm side skipped" in proc.stdout
    strict = tools_cli("port", KERNELS / "scale2.cu", "--cuda-archs", "80", "--hip-version", "5.2", "--strict", env=env)
    assert strict.returncode == 1 and "the ROCm side was skipped (--strict)" in strict.stdout


def test_rejected_arch_skips_the_side_with_the_reason(tools_cli: Runner, port_env: dict[str, str]) -> None:
    proc = tools_cli("port", KERNELS / "scale2.cu", "--no-cuda", "--rocm-archs", "gfx942", "--strict", env=port_env)
    assert proc.returncode == 1
    out = proc.stdout
    assert "none of the requested ROCm architectures gfx942 (" in out
    assert "rejects it) (from --rocm-archs) can be built" in out


def test_check_over_csrc_passes_both_sides(tools_cli: Runner, port_env: dict[str, str], tmp_path: Path) -> None:
    before = tree_digest(ROOT / "csrc")
    report = tmp_path / "check.md"
    tmpdir = tmp_path / "tmpdir"
    proc = tools_cli(
        "check", *ARCHS, "--strict", "--report", report, env={**port_env, "CI": "true", **temp_env(tmpdir)}
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # HIP-Clang 15 leaves empty directories in its TMPDIR for every compile: check points it at its own, removed
    assert not list(tmpdir.iterdir()), "check left files in the user's temporary directory"
    units = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "csrc").rglob("*.cu"))
    for unit in units:
        assert f"CUDA  ok  {unit} (sm_80)" in proc.stdout
        assert f"ROCm  ok  {unit} (gfx90a)" in proc.stdout
    assert "check: ok" in proc.stdout and "\033[" not in proc.stdout
    assert "## ROCm compile" in report.read_text()
    assert tree_digest(ROOT / "csrc") == before  # csrc/ is never written


def test_messages_in_a_hipified_header_map_to_the_cuda_header(tools_cli: Runner, port_env: dict[str, str]) -> None:
    header = KERNELS / "warp_total.cuh"
    proc = tools_cli("port", KERNELS / "uses_header.cu", *ARCHS, "--no-diff", env=port_env)
    assert proc.returncode == 1
    line = header.read_text().splitlines()[6]
    col = line.index("__reduce_add_sync") + 1
    assert f"tests/port/data/kernels/warp_total.cuh:7:{col}: error: use of undeclared identifier" in proc.stdout
    assert f"      7 | {line}" in proc.stdout
    assert "warp_total_hip.cuh" not in proc.stdout.split("compile\n", 1)[1].split("port: FAILED")[0]
    assert "CUDA  ok" in proc.stdout


def test_defines_reach_hipify_and_both_compiles(tools_cli: Runner, port_env: dict[str, str], tmp_path: Path) -> None:
    """-D/-U as the build gives them: hipify leaves out what they decide against (the inline PTX under an
    undefined macro) and both compilers get them (the #error unless SQUARE_MODE=2), in the report too."""
    src = KERNELS / "macros.cu"
    bare = tools_cli("port", src, *ARCHS, env=port_env)
    assert bare.returncode == 1
    assert "CUDA  FAILED" in bare.stdout and "ROCm  FAILED" in bare.stdout, bare.stdout  # the #error, both sides
    assert "asm" in bare.stdout  # the PTX branch is undecided: reported
    report = tmp_path / "macros.json"
    built = tools_cli("port", src, *ARCHS, "-D", "SQUARE_MODE=2", "-U", "USE_PTX_FMA", "--report", report, env=port_env)
    assert built.returncode == 0, built.stdout + built.stderr
    assert "with -DSQUARE_MODE=2 -UUSE_PTX_FMA" in built.stdout
    assert "CUDA  ok" in built.stdout and "ROCm  ok" in built.stdout and "findings: 0 (0 blocking)" in built.stdout
    assert json.loads(report.read_text())["defines"] == ["-DSQUARE_MODE=2", "-UUSE_PTX_FMA"]
    ptx = tools_cli("port", src, *ARCHS, "-D", "SQUARE_MODE=2", "-D", "USE_PTX_FMA", env=port_env)
    assert ptx.returncode == 1
    assert "CUDA  ok" in ptx.stdout and "ROCm  FAILED" in ptx.stdout, ptx.stdout  # the PTX, now compiled
