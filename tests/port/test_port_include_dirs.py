"""``tools port -I DIR``: a kernel whose headers live in another tree (tests/port/data/elsewhere: app/ and
lib/include/mylib/), hipified with it out of tree and passed to both compiles; the short default output (a summary
and the blocking findings in the files the units include); the ROCm libraries' headers found in the ROCm root."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _port_support import DATA, Runner
from _roots import require_root, run_in_root
from _support import ROOT, tree_digest

from buildcore.toolchain import Toolchain
from tools.port.engine import PortRequest, hipified_dir, run_port
from tools.port.sources import resolve_includes, stage
from tools.port.toolkits import Side, compile_command, read_depfile

ELSEWHERE = DATA / "elsewhere"
APP = ELSEWHERE / "app"
LIB = ELSEWHERE / "lib" / "include"
NO_SIDES = [Side("cuda", None, "disabled for the test."), Side("rocm", None, "disabled for the test.")]
SHOWN = "tests/port/data/elsewhere"  # how the port names these files (relative to the checkout, where it runs)


def test_angled_and_quoted_includes_are_found_through_the_include_dirs() -> None:
    files = resolve_includes([APP / "reduce.cu"], [LIB, ROOT / "csrc"])
    assert files == [
        APP / "reduce.cu",
        LIB / "mylib" / "block_sum.cuh",  # <mylib/block_sum.cuh>: only through -I
        APP / "launch.h",  # "launch.h": beside its includer
        LIB / "mylib" / "detail" / "lanes.cuh",  # "detail/lanes.cuh": beside block_sum.cuh
        LIB / "mylib" / "detail" / "other_backend.cuh",  # (every #include line: also one in a dead #if)
    ]
    # <cstdio>, <cuda_runtime.h>, <cub/cub.cuh> are the system's and the toolkits': never the project's
    assert resolve_includes([APP / "reduce.cu"], [ROOT / "csrc"]) == [APP / "reduce.cu", APP / "launch.h"]


def test_the_rocm_side_gets_each_include_dir_where_hipify_put_it(tmp_path: Path) -> None:
    files = resolve_includes([APP / "reduce.cu"], [LIB, ROOT / "csrc"])
    staged = stage(files, [LIB, ROOT / "csrc"], tmp_path / "stage")
    out = tmp_path / "hip"
    assert hipified_dir(LIB, staged, out) == out  # a source root of its own: mirrored into the output root
    assert hipified_dir(LIB / "mylib", staged, out) == out / "mylib"
    assert hipified_dir(ROOT / "csrc", staged, out) is None  # nothing of it was reached
    # a directory inside a root, named like CUDA's: hipify renames it (cuda -> hip), and so does the -I given
    nested = tmp_path / "proj"
    (nested / "cuda_inc").mkdir(parents=True)
    (nested / "cuda_inc" / "x.cuh").write_text("#pragma once\n")
    (nested / "k.cu").write_text("#include <x.cuh>\n")
    inner = stage(resolve_includes([nested / "k.cu"], [nested / "cuda_inc"]), [nested / "cuda_inc"], tmp_path / "s2")
    assert hipified_dir(nested / "cuda_inc", inner, out) == out / "hip_inc"


def test_headers_elsewhere_are_hipified_out_of_tree_and_the_output_is_short(
    tools_cli: Runner, bare_env: dict[str, str], tmp_path: Path
) -> None:
    before = tree_digest(ELSEWHERE)
    work = tmp_path / "work"
    args = ["port", APP / "reduce.cu", APP / "blas_user.cu", APP / "unused.cuh", "-I", LIB, "--no-cuda", "--no-rocm"]
    proc = tools_cli(*args, "--hip-version", "6.4", "-o", work, env=bare_env)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # two blocking findings remain
    assert tree_digest(ELSEWHERE) == before  # never in place
    hip = work / "hip"
    # the library's headers are translated with the units, renamed and included as hipify's tree pass does
    assert "#include <mylib/block_sum_hip.cuh>" in (hip / "reduce.hip").read_text()
    assert '#include "detail/lanes_hip.cuh"' in (hip / "mylib" / "block_sum_hip.cuh").read_text()
    assert "#include <hipcub/hipcub.hpp>" in (hip / "mylib" / "block_sum_hip.cuh").read_text()
    assert "#include <hipblas/hipblas.h>" in (hip / "mylib" / "blas_hip.h").read_text()

    lines = proc.stdout.splitlines()
    assert 12 <= len(lines) <= 30, proc.stdout
    assert lines[0] == "port: 8 files (2 translation units, 6 other), target HIP 6.4"
    # (the notes' number follows the translation rules: the runtime includes added, HIPBLAS_V2, ...)
    total = int(next(ln for ln in lines if ln.startswith("findings: ")).split()[1])
    notes = total - 3
    assert f"findings: {total} (3 blocking)" in lines and notes >= 5
    # no compile ran: every #include line counts (other_backend.cuh sits in an #if no build here compiles)
    assert "  blocking, in the files the units include: 2" in lines
    assert f"  blocking, in files no unit includes: 1 ({SHOWN}/app/unused.cuh 1; --verbose lists them)" in lines
    assert f"  not blocking: {notes} (note {notes}; --verbose lists them)" in lines
    # the one blocking finding the units read, with its line, a caret and the fix
    at = lines.index(f"{SHOWN}/lib/include/mylib/detail/lanes.cuh:3:54: hazard [lane-math] (blocking)")
    assert lines[at + 2] == "      3 | __device__ inline int lane_id() { return threadIdx.x & 31; }"
    assert lines[at + 3] == "        | " + " " * 53 + "^"
    assert lines[at + 4].startswith("  fix: use warpSize")
    assert f"{SHOWN}/lib/include/mylib/detail/other_backend.cuh:3:57: hazard [lane-math] (blocking)" in lines
    assert "unused.cuh:3" not in proc.stdout and "note" not in proc.stdout.replace(f"note {notes}", "")
    assert "diff CUDA -> HIP" not in proc.stdout and "+++ " not in proc.stdout
    remain = "  - 3 blocking findings remain: % 32 [lane-math]; & 31 [lane-math]; >> 5 [lane-math]"
    assert lines[-2:] == ["port: FAILED", remain]

    verbose = tools_cli(*args, "--hip-version", "6.4", "--verbose", env=bare_env)
    assert f"{SHOWN}/app/unused.cuh:3:58: hazard [lane-math] (blocking)" in verbose.stdout
    assert verbose.stdout.count("(warning)") == notes and "diff CUDA -> HIP: 8 files changed" in verbose.stdout
    assert len(verbose.stdout.splitlines()) > 2 * len(lines)


def test_findings_of_files_no_unit_includes_are_not_listed() -> None:
    result = run_port(
        PortRequest(
            files=[APP / "reduce.cu", APP / "unused.cuh"], include_dirs=[LIB], sides=NO_SIDES, hip_version=(6, 4)
        )
    )
    assert result.included == {  # (no compile ran: every #include line)
        APP / "reduce.cu",
        APP / "launch.h",
        LIB / "mylib" / "block_sum.cuh",
        LIB / "mylib" / "detail" / "lanes.cuh",
        LIB / "mylib" / "detail" / "other_backend.cuh",
    }
    # only headers given: they are what is "read"
    alone = run_port(PortRequest(files=[APP / "unused.cuh"], include_dirs=[LIB], sides=NO_SIDES, hip_version=(6, 4)))
    assert alone.included == {APP / "unused.cuh"}


def _bad_dir(tmp_path: Path, kind: str) -> Path:
    if kind == "missing":
        return tmp_path / "missing"
    if kind == "file":
        (tmp_path / "a-file").write_text("x")
        return tmp_path / "a-file"
    toolkit = tmp_path / "cuda" / "include"  # a CUDA toolkit's include directory
    toolkit.mkdir(parents=True)
    (toolkit / "cuda_runtime.h").write_text("")
    return toolkit


@pytest.mark.parametrize(
    ("kind", "message"),
    [("missing", "does not exist"), ("file", "is a file, not a directory"), ("toolkit", "CUDA toolkit's include")],
)
def test_a_bad_include_dir_is_one_clear_paragraph(
    tools_cli: Runner, bare_env: dict[str, str], tmp_path: Path, kind: str, message: str
) -> None:
    bad = _bad_dir(tmp_path, kind)
    proc = tools_cli("port", APP / "reduce.cu", "-I", LIB, "-I", bad, "--no-cuda", "--no-rocm", env=bare_env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"-I {bad}: " in proc.stderr and message in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1 and not proc.stdout


@pytest.mark.slow
def test_the_cuda_side_compiles_with_the_include_dirs(
    tools_cli: Runner, port_env: dict[str, str], tmp_path: Path
) -> None:
    report = tmp_path / "port.json"
    proc = tools_cli(
        "port", APP / "reduce.cu", "-I", LIB, "--no-rocm", "--cuda-archs", "80", "--report", report, env=port_env
    )
    assert f"CUDA  ok  {SHOWN}/app/reduce.cu (sm_80)" in proc.stdout, proc.stdout + proc.stderr
    # what nvcc read (its -MD file): not the header of the #if this build leaves out
    other = f"{SHOWN}/lib/include/mylib/detail/other_backend.cuh"
    assert f"  blocking, in files no unit includes: 1 ({other} 1; --verbose lists them)" in proc.stdout
    (unit,) = json.loads(report.read_text())["sides"]["cuda"]["units"]
    assert f"-I{LIB}" in unit["command"]
    without = tools_cli("port", APP / "reduce.cu", "--no-rocm", "--cuda-archs", "80", env=port_env)
    assert "CUDA  FAILED" in without.stdout and "mylib/block_sum.cuh" in without.stdout


@pytest.mark.slow
def test_in_the_rocm64_root_hipcub_and_hipblas_are_found_without_flags(tmp_path: Path) -> None:
    """The 6.4 root holds hipCUB/rocPRIM/rocThrust/hipBLAS & co. where Debian installs them (ci/rocm-root.sh
    --with-libs): detection finds them, and the units that need them compile with nothing but -I for the library
    of the kernel's own project; the output stays short."""
    root = require_root("6.4")
    if not (root / "usr" / "include" / "hipcub" / "hipcub.hpp").is_file():
        pytest.fail(f"the 6.4 root has no hipCUB in /usr/include: bash ci/rocm-root.sh make 6.4 {root} --with-libs")
    copy = tmp_path / "elsewhere"
    shutil.copytree(ELSEWHERE, copy)  # (the root sees tmp_path and the checkout, bound at their own paths)
    report = tmp_path / "port.json"
    units = [str(copy / "app" / name) for name in ("reduce.cu", "blas_user.cu", "broken.cu")]
    argv = ["python3", "-m", "tools", "port", *units]
    argv += ["-I", str(copy / "lib" / "include"), "--no-cuda", "--rocm-archs", "gfx942", "--report", str(report)]
    proc = run_in_root(
        "6.4",
        argv,
        binds=[ROOT, tmp_path],
        env={"ROCM_HOME": "/usr", "RCCL_HOME": "/opt/rccl/usr"},
        cwd=ROOT,
        timeout=600,
    )
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr  # the lane-math finding blocks; two of the units compile
    lines = out.splitlines()
    assert 10 <= len(lines) <= 36, out
    assert "  ROCm 6.4 (HIP-Clang " in out
    libraries = next(ln for ln in lines if ln.startswith("    libraries: "))
    for name in ("hipCUB", "rocPRIM", "rocThrust", "hipBLAS"):
        assert name in libraries and "(/usr/include)" in libraries
    assert any(ln.startswith(f"  ROCm  ok  {copy}/app/reduce.cu (gfx942)") for ln in lines), out
    assert any(ln.startswith(f"  ROCm  ok  {copy}/app/blas_user.cu (gfx942)") for ln in lines), out
    # the failing unit's first error, at its line
    assert any(ln.startswith(f"  ROCm  FAILED  {copy}/app/broken.cu (gfx942)") for ln in lines), out
    assert f"    {copy}/app/broken.cu:4:15: error: static assertion failed" in out
    # the compiles read lanes.cuh, not other_backend.cuh (its #if is false in this build; also for the unit that
    # fails, whose includes a preprocessing pass lists): only lanes.cuh's is listed
    assert "  blocking, in the files the units include: 1 (and 1 compile failure, above)" in lines
    assert f"{copy}/lib/include/mylib/detail/lanes.cuh:3:54: hazard [lane-math] (blocking)" in lines
    other = f"{copy}/lib/include/mylib/detail/other_backend.cuh"
    assert f"  blocking, in files no unit includes: 1 ({other} 1; --verbose lists them)" in lines
    assert "port: FAILED" in lines and "  - the ROCm side does not compile: " in out
    data = json.loads(report.read_text())
    commands = [u["command"] for u in data["sides"]["rocm"]["units"]]
    assert all(not any(a.startswith("-isystem") or "rocm-libs" in a for a in c) for c in commands)  # no flag needed
    # without -I the library's header is found nowhere, and the cause says which option adds it
    alone = run_in_root(
        "6.4",
        ["python3", "-m", "tools", "port", str(copy / "app" / "reduce.cu"), "--no-cuda", "--rocm-archs", "gfx942"],
        binds=[ROOT, tmp_path],
        env={"ROCM_HOME": "/usr", "RCCL_HOME": "/opt/rccl/usr"},
        cwd=ROOT,
        timeout=600,
    )
    assert "ROCm  FAILED" in alone.stdout and "cause: [missing-header]" in alone.stdout, alone.stdout
    assert "'mylib/block_sum.cuh' was found nowhere" in alone.stdout and "-I DIR (tools port -I DIR)" in alone.stdout


def test_add_refuses_a_kernel_whose_headers_need_an_include_dir(
    tools_cli: Runner, bare_env: dict[str, str], tmp_path: Path
) -> None:
    """The wheel's build sees csrc/ only: a kernel reaching headers through -I cannot be registered as it is."""
    project = tmp_path / "project"
    (project / "csrc").mkdir(parents=True)
    kernel = tmp_path / "app" / "lanes.cu"
    kernel.parent.mkdir()
    kernel.write_text(
        "#include <mylib/detail/lanes.cuh>\n"
        'extern "C" cudaError_t mr_kernel_lanes(void* data, size_t nbytes, cudaStream_t stream) { return cudaSuccess; }\n'
    )
    proc = tools_cli("port", kernel, "-I", LIB, "--no-cuda", "--no-rocm", "--add", "--project", project, env=bare_env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    header = LIB / "mylib" / "detail" / "lanes.cuh"
    assert f"lanes.cu includes {header}, outside its directory and outside csrc/" in proc.stderr
    assert list((project / "csrc").iterdir()) == []


def test_library_dirs_the_compiler_does_not_search_are_passed() -> None:
    root = Path("/opt/rocm")
    tc = Toolchain(
        platform="rocm",
        root=root,
        compiler=root / "lib" / "llvm" / "bin" / "clang++",
        archs=("gfx942",),
        libraries=(("hipCUB", root / "include"), ("hipBLAS", root / "hipblas" / "include")),
    )
    side = Side("rocm", tc)
    cmd = compile_command(side, Path("k.hip"), Path("k.o"), [Path("/w/hip")])
    assert "-isystem/opt/rocm/hipblas/include" in cmd  # AMD's per-library layout: not searched by itself
    assert not any(a.startswith("-isystem") and a.endswith("/opt/rocm/include") for a in cmd)  # --rocm-path's
    assert side.libraries_line() == "libraries: hipCUB (/opt/rocm/include); hipBLAS (/opt/rocm/hipblas/include)"
    bare = Side("rocm", Toolchain(platform="rocm", root=root, compiler=tc.compiler, archs=("gfx942",)))
    assert bare.libraries_line() == "libraries: none of hipCUB, rocThrust, hipBLAS, ... in /opt/rocm/include"


def test_a_dependency_file_is_read_as_make_writes_it(tmp_path: Path) -> None:
    dep = tmp_path / "k.o.d"
    dep.write_text("k.o : k.cu \\\n    /usr/include/stdio.h \\\n    sub/../h.h dir\\ with\\ space/x.h\n")
    assert read_depfile(dep, tmp_path) == [
        tmp_path / "k.cu",
        Path("/usr/include/stdio.h"),
        tmp_path / "h.h",
        tmp_path / "dir with space" / "x.h",
    ]
    assert read_depfile(tmp_path / "none.d", tmp_path) is None  # (none written: a compile stopped early)
