"""port/check without compilers: planted hazards at their lines, the terminal view, usage errors,
skipped sides, line mapping, manifest registration. Fast (hipify only)."""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _port_support import DATA, Runner
from _support import ROOT

from tools.errors import ToolError
from tools.hipify import HipifyOptions, hipify_tree
from tools.hipify.lint import _RULES  # the lint's rule table
from tools.port.engine import OutputMapper, PortRequest, run_port
from tools.port.linemap import LineMap
from tools.port.render import caret_line
from tools.port.report import SECTIONS, write_report
from tools.port.sources import resolve_includes, stage
from tools.port.toolkits import Side

HAZARDS = DATA / "hazards"
KERNELS = DATA / "kernels"
_EXPECT = re.compile(r'//\s*expect:\s*([\w-]+)\s+"([^"]+)"')
NO_SIDES = [Side("cuda", None, "disabled for the test."), Side("rocm", None, "disabled for the test.")]


def _expected(path: Path) -> set[tuple[str, int, int]]:
    """``// expect: RULE "token"`` on a line: a finding of RULE (or kind) at the token's column."""
    out = set()
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        for m in _EXPECT.finditer(line):
            out.add((m.group(1), lineno, line.index(m.group(2)) + 1))
    return out


def _port(*files: Path, hip: tuple[int, int] = (5, 2)):  # type: ignore[no-untyped-def]
    return run_port(PortRequest(files=list(files), include_dirs=[ROOT / "csrc"], sides=NO_SIDES, hip_version=hip))


@pytest.mark.parametrize("path", sorted(HAZARDS.glob("*.cu")), ids=lambda p: p.stem)
def test_planted_hazard_class_found_at_its_lines(path: Path) -> None:
    expected = _expected(path)
    result = _port(path)
    found = {(f.rule or f.kind, f.line, f.column) for f in result.findings if f.file == path}
    assert expected <= found, f"missing {expected - found}; found {found}"
    blocking = {(f.rule or f.kind, f.line, f.column) for f in result.findings if f.blocking}
    # nothing blocking that was not planted (non-blocking notes such as sync-mask-dropped may come along)
    assert blocking <= expected, f"unexpected blocking findings {blocking - expected}"
    if path.stem == "clean":
        assert not expected and not result.findings and not result.problems(strict=False)
    else:
        assert any(f.blocking for f in result.findings) or path.stem in ("texture",)


def test_every_hazard_class_is_planted() -> None:
    planted = {rule for p in HAZARDS.glob("*.cu") for rule, _, _ in _expected(p)}
    assert set(_RULES) | {"cuda-only-header", "version", "unsupported"} <= planted


def test_version_blocked_names_api_and_version() -> None:
    result = _port(HAZARDS / "version.cu")
    reasons = {f.name: f.reason for f in result.blocking}
    assert "cudaGraphAddNode" in reasons and "6.2" in reasons["cudaGraphAddNode"]
    problems = result.problems(strict=False)
    assert problems and "cudaGraphAddNode" in problems[0]
    # the same kernel is fine for a HIP that has the API
    newer = _port(HAZARDS / "version.cu", hip=(6, 2))
    assert not [f for f in newer.findings if f.kind == "version"]


def test_project_headers_are_hipified_with_the_file() -> None:
    result = _port(KERNELS / "scale2.cu")
    names = {p.name for p in result.sources}
    assert names == {"scale2.cu", "scale2_params.h", "bridge.h"}
    assert result.outputs[ROOT / "csrc" / "bridge.h"].name == "bridge_hip.h"
    hip = result.outputs[KERNELS / "scale2.cu"]
    assert hip.name == "scale2.hip"
    diff = next(d.text for d in result.diffs if d.source == KERNELS / "scale2.cu")
    assert '-#include "bridge.h"' in diff and '+#include "bridge_hip.h"' in diff
    assert '+extern "C" hipError_t mr_kernel_scale2' in diff


def test_staging_never_writes_sources_and_maps_back(tmp_path: Path) -> None:
    files = resolve_includes([KERNELS / "scale2.cu"], [ROOT / "csrc"])
    before = {p: p.read_bytes() for p in files}
    staged = stage(files, [ROOT / "csrc"], tmp_path / "stage")
    assert {staged.original(s) for s in staged.origin} == set(files)
    assert all(not str(s).startswith(str(ROOT)) for s in staged.origin)
    assert before == {p: p.read_bytes() for p in files}


def test_linemap_follows_inserted_and_changed_lines() -> None:
    src = b"a\nb cudaX\nc\nd\n"
    out = b"a\nb hipX\nnew1\nnew2\nc\nd\n"
    lm = LineMap(src, out)
    assert [lm.source_line(n) for n in (1, 2, 5, 6)] == [1, 2, 3, 4]
    assert lm.source_column(2, 3) == 3  # "hipX" starts where "cudaX" did
    same = LineMap(b"  cudaStream_t s; int t = f();\n", b"  hipStream_t s; int t = f();\n")
    assert same.source_column(1, 27) == 28  # "f" moved one column left in the HIP file


def test_caret_counts_bytes_and_keeps_tabs() -> None:
    assert caret_line("\tint x = y;", 6) == "\t    ^"
    assert caret_line("  é = 1;", 6) == "    ^"  # é is two bytes


def test_report_has_every_section(tmp_path: Path) -> None:
    result = _port(HAZARDS / "lane_math.cu")
    md = write_report(tmp_path / "r.md", result, title="port: lane_math.cu", strict=False).read_text()
    html = write_report(tmp_path / "r.html", result, title="port: lane_math.cu", strict=False).read_text()
    for section in SECTIONS:
        assert f"## {section}\n" in md
    for anchor in ('id="summary"', 'id="findings"', 'id="cuda-compile"', 'id="rocm-compile"', 'id="diff"'):
        assert anchor in html
    assert "lane_math.cu:5:26" in md and "lane_math.cu:5:26" in html
    assert "Skipped" in md and "disabled for the test" in md  # why each compile side was skipped
    assert "-#include &lt;cuda_runtime.h&gt;" in html and "+#include <hip/hip_runtime.h>" in md
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")


def test_bad_report_name_is_a_usage_error(tools_cli: Runner, bare_env: dict[str, str], tmp_path: Path) -> None:
    proc = tools_cli("port", HAZARDS / "clean.cu", "--report", tmp_path / "r.txt", env=bare_env)
    assert proc.returncode == 2 and "must end in .md, .html or .json" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.cu"], "source not found"),
        ([str(HAZARDS / "clean.cu"), "--hip-version", "five"], "bad HIP version"),
        ([str(HAZARDS / "clean.cu"), str(HAZARDS / "lane_math.cu"), "--add"], "exactly one .cu file"),
        ([str(HAZARDS / "clean.cu"), "--name", "x"], "--name and --entry go with --add"),
        ([str(HAZARDS / "clean.cu"), "-D", "2FAST"], "bad define '2FAST'"),
        ([str(HAZARDS / "clean.cu"), "-U", "X=1"], "bad define 'X=1'"),
        ([str(HAZARDS / "clean.cu"), "--add", "-D", "FAST"], "the build compiles csrc/ without your -D/-U"),
    ],
)
def test_usage_errors_are_one_line(tools_cli: Runner, bare_env: dict[str, str], args: list[str], message: str) -> None:
    proc = tools_cli("port", *args, "--no-cuda", "--no-rocm", env=bare_env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_missing_toolkit_side_is_skipped_with_reason(tools_cli: Runner, bare_env: dict[str, str]) -> None:
    env = {**bare_env, "CUDA_HOME": "/nonexistent/cuda", "ROCM_HOME": "/nonexistent/rocm"}
    proc = tools_cli("port", HAZARDS / "clean.cu", "--hip-version", "5.2", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "CUDA  skipped: CUDA_HOME=/nonexistent/cuda does not exist" in proc.stdout
    assert "ROCm  skipped: ROCM_HOME=/nonexistent/rocm does not exist" in proc.stdout
    strict = tools_cli("port", HAZARDS / "clean.cu", "--hip-version", "5.2", "--strict", env=env)
    assert strict.returncode == 1
    assert "the CUDA side was skipped (--strict)" in strict.stdout
    assert "the ROCm side was skipped (--strict)" in strict.stdout


def test_blocking_findings_fail_and_show_caret(tools_cli: Runner, bare_env: dict[str, str]) -> None:
    proc = tools_cli("port", HAZARDS / "lane_math.cu", "--no-cuda", "--no-rocm", "--hip-version", "5.2", env=bare_env)
    assert proc.returncode == 1
    out = proc.stdout
    assert "lane_math.cu:5:26: hazard [lane-math] (blocking)" in out
    line = '  int lane = threadIdx.x & 31;  // expect: lane-math "& 31"'
    assert f"      5 | {line}" in out
    caret_row = out.splitlines()[out.splitlines().index(f"      5 | {line}") + 1]
    assert caret_row == "        | " + " " * 25 + "^"
    assert "fix: use warpSize" in out
    assert "\033[" not in out  # piped: plain text
    diff = "--- a/tests/port/data/hazards/lane_math.cu"
    assert diff not in out  # the diff is behind --diff (and --verbose)
    args = ("port", HAZARDS / "lane_math.cu", "--no-cuda", "--no-rocm", "--hip-version", "5.2")
    for flag in ("--diff", "--verbose"):
        shown = tools_cli(*args, flag, env=bare_env).stdout
        assert diff in shown and "+++ b/lane_math.hip" in shown, flag
    assert diff not in tools_cli(*args, "--verbose", "--no-diff", env=bare_env).stdout


def test_colour_forced_and_ci_plain(tools_cli: Runner, bare_env: dict[str, str]) -> None:
    args = ("port", HAZARDS / "lane_math.cu", "--no-cuda", "--no-rocm", "--hip-version", "5.2")
    assert "\033[" in tools_cli(*args, "--color", "always", env=bare_env).stdout
    assert "\033[" not in tools_cli(*args, "--color", "never", env=bare_env).stdout


def _on_terminal(args: list[str], env: dict[str, str]) -> str:
    """Run with stdout and stderr on a pseudo-terminal; return what it printed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools", *args], cwd=ROOT, env=env, stdout=follower, stderr=follower, close_fds=True
    )
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")


def test_terminal_gets_colour_and_progress_ci_does_not(bare_env: dict[str, str]) -> None:
    args = ["port", str(HAZARDS / "lane_math.cu"), "--no-cuda", "--no-rocm", "--hip-version", "5.2"]
    shown = _on_terminal(args, {**bare_env, "TERM": "xterm"})
    assert "\033[1;31m" in shown or "\033[31;1m" in shown or "\033[31;" in shown
    assert "[0/1] hipify" in shown
    ci = _on_terminal(args, {**bare_env, "TERM": "xterm", "CI": "true"})
    assert "\033[" not in ci and "[0/1]" not in ci and "lane-math" in ci


def test_registered_in_main_commands(tools_cli: Runner, bare_env: dict[str, str]) -> None:
    proc = tools_cli("--help", env=bare_env)
    assert re.search(r"^\s+port\s", proc.stdout, re.M) and re.search(r"^\s+check\s", proc.stdout, re.M)


def test_no_files_is_an_error() -> None:
    with pytest.raises(ToolError, match="nothing to port"):
        run_port(PortRequest(files=[], include_dirs=[ROOT / "csrc"], sides=NO_SIDES))


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "csrc").mkdir(parents=True)
    shutil.copy(ROOT / "csrc" / "bridge.h", project / "csrc" / "bridge.h")
    return project


def test_add_refused_when_the_port_fails(tools_cli: Runner, bare_env: dict[str, str], tmp_path: Path) -> None:
    project = _project(tmp_path)
    kernel = tmp_path / "lanes.cu"
    kernel.write_text(
        (KERNELS / "scale2.cu")
        .read_text()
        .replace("if (i < n) x[i] *= kScale;", "if (i < n) x[i] *= (threadIdx.x & 31);")
    )
    shutil.copy(KERNELS / "scale2_params.h", tmp_path)
    proc = tools_cli("port", kernel, "--no-cuda", "--no-rocm", "--add", "--project", project, env=bare_env)
    assert proc.returncode == 1
    assert "lane-math" in proc.stdout and "add: not registered" in proc.stderr
    assert sorted(p.name for p in (project / "csrc").iterdir()) == ["bridge.h"]


def test_add_with_sides_skipped_registers(tools_cli: Runner, bare_env: dict[str, str], tmp_path: Path) -> None:
    project = _project(tmp_path)
    proc = tools_cli(
        "port", KERNELS / "scale2.cu", "--no-cuda", "--no-rocm", "--add", "--project", project, env=bare_env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "add: registered kernel 'scale2'" in proc.stdout
    assert (project / "csrc" / "kernels" / "scale2.cu").is_file()
    strict = tools_cli(
        "port", KERNELS / "scale2.cu", "--no-cuda", "--no-rocm", "--add", "--strict", "--project", project, env=bare_env
    )
    assert strict.returncode == 1  # --strict: a skipped side fails the port, so nothing more is done


def test_work_dir_must_not_overlap_sources(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="overlaps the sources"):
        run_port(
            PortRequest(
                files=[HAZARDS / "clean.cu"], include_dirs=[ROOT / "csrc"], sides=NO_SIDES, work_dir=ROOT / "csrc" / "x"
            )
        )
    assert not (ROOT / "csrc" / "x").exists()


def test_check_reports_hazards_and_manifest_problems(
    tools_cli: Runner, bare_env: dict[str, str], tmp_path: Path
) -> None:
    project = _project(tmp_path)
    csrc = project / "csrc"
    shutil.copy(HAZARDS / "lane_math.cu", csrc / "lanes.cu")
    (csrc / "manifest.toml").write_text('[[kernel]]\nname = "lanes"\nsource = "lanes.cu"\nentry = "mr_kernel_lanes"\n')
    report = tmp_path / "check.md"
    proc = tools_cli("check", "--project", project, "--no-cuda", "--no-rocm", "--report", report, env=bare_env)
    assert proc.returncode == 1
    assert "csrc/lanes.cu:5:26: hazard [lane-math] (blocking)" in proc.stdout.replace(str(project) + "/", "")
    assert "manifest: kernel 'lanes': lanes.cu does not define extern \"C\" cudaError_t mr_kernel_lanes" in proc.stdout
    assert "## Findings" in report.read_text()
    (csrc / "lanes.cu").write_text((HAZARDS / "clean.cu").read_text())
    (csrc / "manifest.toml").unlink()
    clean = tools_cli("check", "--project", project, "--no-cuda", "--no-rocm", env=bare_env)
    assert clean.returncode == 0, clean.stdout
    assert "check: ok, with the CUDA side skipped and the ROCm side skipped" in clean.stdout
    assert tools_cli("check", "--project", project, "--no-cuda", "--no-rocm", "--strict", env=bare_env).returncode == 1


def test_compiler_output_is_mapped_to_cuda_positions(tmp_path: Path) -> None:
    src = KERNELS / "rocm_only.cu"
    staged = stage([src], [ROOT / "csrc"], tmp_path / "stage")
    result = hipify_tree(staged.roots, tmp_path / "hip", HipifyOptions(hip_version=(5, 2)))
    (out,) = result.outputs.values()
    hip_line = out.read_text().splitlines()[5]
    hip_col = hip_line.index("__reduce_add_sync") + 1
    cuda_col = src.read_text().splitlines()[5].index("__reduce_add_sync") + 1
    assert hip_col != cuda_col  # the line got shorter: the mapping has work to do
    mapper = OutputMapper(result.outputs, staged)
    raw = f"In file included from {out}:1:\n{out}:6:{hip_col}: error: use of undeclared identifier 'x'\n"
    mapped = mapper.text(raw)
    shown_src = src.relative_to(ROOT).as_posix()  # the tests run from the checkout's root
    assert mapped == (
        f"In file included from {shown_src}:1:\n{shown_src}:6:{cuda_col}: error: use of undeclared identifier 'x'\n"
    )
    (diag,) = mapper.diagnostics(mapped, 1)
    assert (diag.file, diag.line, diag.column, diag.severity) == (shown_src, 6, cuda_col, "error")
    assert "__reduce_add_sync(__activemask(), v)" in diag.source_text
