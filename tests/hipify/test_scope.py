"""The report does not cry wolf (tools/hipify/scope.py and the tree pass): blocking findings only in CUDA units and
the headers they include; no findings in branches the build's -D/-U decide against; a file renamed only when its CUDA
content changes; every __CUDA_ARCH__ comparison named whole, with the branch HIP takes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tools.errors import ToolError
from tools.hipify import HipifyOptions, HipifyResult, cond, hipify_tree, scope
from tools.hipify.lint import lint_bytes
from tools.hipify.mapping import load_database
from tools.hipify.translate import Translator, positions

Write = Callable[[Path, dict[str, bytes | str]], None]
REPO = Path(__file__).resolve().parents[2]

PTX = 'asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));'
X86 = '__asm__ __volatile__("cpuid" : "=a"(a) : "a"(0));'


def _run(
    tmp_path: Path, write: Write, files: dict[str, str], **options: object
) -> tuple[dict[str, list[str]], HipifyResult]:
    """The findings by file name as "line:rule-or-kind:B|-" (the runtime-include notes left out), and the result."""
    write(tmp_path / "src", files)
    opts = HipifyOptions(hip_version=(6, 4), jobs=1, **options)  # type: ignore[arg-type]
    res = hipify_tree([tmp_path / "src"], tmp_path / "out", opts)
    found: dict[str, list[str]] = {}
    for f in res.findings:
        if f.rule != "runtime-include":
            found.setdefault(f.file.name, []).append(f"{f.line}:{f.rule or f.kind}:{'B' if f.blocking else '-'}")
    return found, res


# -- (a) blocking only in CUDA units and the headers they include ---------------------------------------------
TREE = {
    "k.cu": '#include "dev.h"\n__global__ void k(int* p) { int l; ' + PTX + " p[0] = l; }\n",
    "dev.h": "inline int dev_helper(int l) { " + PTX.replace("l)", "l)") + " return l; }\n",
    "cpu/timer.cpp": '#include "timer.h"\nint t() { int a; ' + X86 + " texture<float> t; return a; }\n",
    "cpu/timer.h": "static inline int cycles() { int a; " + X86 + " return a; }\n",  # CPU assembly: not PTX
}


def test_cpu_files_get_one_note_each(tmp_path: Path, write: Write) -> None:
    found, res = _run(tmp_path, write, TREE)
    assert found["k.cu"] == ["2:inline-asm:B"] and found["dev.h"] == ["1:inline-asm:B"]
    # a CPU template named texture<> in CPU code: one note for the file, nothing blocks; x86 assembly is no PTX
    assert found["timer.cpp"] == ["2:outside-cuda:-"] and "timer.h" not in found
    note = next(f for f in res.findings if f.file.name == "timer.cpp")
    assert "1 finding (1 texture-reference; 2:texture" in note.reason and not note.in_cuda_unit
    roles = {p.name: r for p, r in res.roles.items()}
    assert roles == {"k.cu": "cuda-unit", "dev.h": "cuda-header", "timer.cpp": "other", "timer.h": "other"}
    report = res.to_json()
    assert {f["source"].rsplit("/", 1)[1]: f["role"] for f in report["files"]}["dev.h"] == "cuda-header"
    assert all(f["in_cuda_unit"] for f in report["findings"] if f["blocking"])


def test_cuda_host_code_keeps_its_cuda_names_blocking(tmp_path: Path, write: Write) -> None:
    """A .cpp that includes a CUDA header (here through its own header) is compiled against CUDA: its CUDA names
    block, its assembly is the CPU's (one note; a template in a macro may be anything)."""
    files = {
        "conv.cpp": '#include "conv.h"\nint f() { int a; asm(CPU_TEMPLATE); cudnnFrontendThing(); return a; }\n',
        "conv.h": "#include <cudnn.h>\nvoid g(cudnnHandle_t h);\n",
        "plain.cpp": "int p() { int a; asm(CPU_TEMPLATE); return a; }\n",
        "fe.cpp": "void q() { cudnnStatus_t s = cudnnFrontendCall(); }\n",  # CUDA's API by name: host code too
    }
    found, res = _run(tmp_path, write, files)
    assert sorted(found["conv.cpp"]) == ["2:outside-cuda:-", "2:unmapped:B"]
    assert found["fe.cpp"] == ["1:unmapped:B", "1:unmapped:B"]
    roles = {p.name: r for p, r in res.roles.items()}
    assert roles == {"conv.cpp": "cuda-host", "conv.h": "cuda-host", "plain.cpp": "other", "fe.cpp": "cuda-host"}
    note = next(f for f in res.findings if f.rule == "outside-cuda" and f.file.name == "conv.cpp")
    assert "CUDA host code" in note.reason and note.in_cuda_unit
    assert found["plain.cpp"] == ["1:outside-cuda:-"]


def test_cuda_units_are_what_the_build_says(tmp_path: Path, write: Write) -> None:
    found, _res = _run(tmp_path, write, TREE, cuda_units=(".cu", ".cpp"))
    assert found["timer.cpp"] == ["2:texture-reference:B"]  # compiled as HIP: its findings block
    assert "timer.h" not in found


def test_a_header_with_device_code_is_cuda_even_when_nothing_includes_it(tmp_path: Path, write: Write) -> None:
    found, res = _run(tmp_path, write, {"lib.h": "__device__ int f() { int l; " + PTX + " return l; }\n"})
    assert found["lib.h"] == ["1:inline-asm:B"] and set(res.roles.values()) == {"cuda-header"}


def test_amd_assembly_and_compiler_barriers_are_not_ptx(tmp_path: Path, write: Write) -> None:
    src = (
        '__device__ float f(float a) {\n  asm volatile("v_dot2_f32_f16 %0, %1, %2, %0" : "+v"(a));\n'
        '  asm volatile("" ::: "memory");\n  asm("\\n \\\n    v_add3_u32 %0, %1, %2, %0 \\n" : "+v"(a));\n'
        '  asm("mov.u32 %0, 1;" : "=r"(a));\n  return a;\n}\n'
    )
    found, _res = _run(tmp_path, write, {"k.cu": src})
    assert found["k.cu"] == ["6:inline-asm:B"]


# -- (b) the build's defines decide branches ------------------------------------------------------------------
HAND_PORTED = (
    """#include "common.cuh"
#if !defined(MYLIB_USE_HIP) && __CUDA_ARCH__ >= 800
#define FAST_ASYNC
#endif
#ifdef FAST_ASYNC
__device__ void cp(int* l) { """
    + PTX.replace("(l)", "(*l)")
    + """ }
#endif
#ifndef MYLIB_USE_HIP
__device__ void w(int* l) { """
    + PTX.replace("(l)", "(*l)")
    + """ }
#else
__device__ void w(int* l) { *l = __lane_id(); }
#endif
#if defined(MYLIB_OTHER) || CUDART_VERSION >= 12000
__device__ void v(int* l) { """
    + PTX.replace("(l)", "(*l)")
    + """ }
#endif
"""
)


def test_findings_in_branches_the_build_does_not_compile(tmp_path: Path, write: Write) -> None:
    files = {"k.cu": HAND_PORTED, "common.cuh": "#pragma once\n"}
    # without defines: FAST_ASYNC's only #define sits where __CUDA_ARCH__ >= 800 holds for no AMD GPU (1 >= 800) and
    # on no host pass (0 >= 800): it is never defined, and line 6 is never compiled; MYLIB_USE_HIP is not decided
    without, res0 = _run(tmp_path / "a", write, files)
    assert [x for x in without["k.cu"] if x.endswith(":B")] == [
        "2:cuda-arch-compare:B",
        "9:inline-asm:B",
        "13:unsupported:B",
        "14:inline-asm:B",
    ]
    assert res0.skipped == 1
    # -D MYLIB_USE_HIP: the hand-ported branches are taken, the CUDA ones (and FAST_ASYNC, defined only in one of
    # them) are not; MYLIB_OTHER is not decided, so line 14 stays; the comparison on line 2 decides nothing
    with_d, res = _run(tmp_path / "b", write, files, defines=(("MYLIB_USE_HIP", "1"),))
    assert [x for x in with_d["k.cu"] if x.endswith(":B")] == ["13:unsupported:B", "14:inline-asm:B"]
    assert res.skipped == 3 and res.to_json()["defines"] == ["-DMYLIB_USE_HIP=1"]
    # -U MYLIB_OTHER too: CUDART_VERSION is not defined by HIP, so line 14's branch is decided against as well (its
    # finding on line 13 says just that)
    both, _res = _run(tmp_path / "c", write, files, defines=(("MYLIB_USE_HIP", "1"), ("MYLIB_OTHER", None)))
    assert [x for x in both["k.cu"] if x.endswith(":B")] == ["13:unsupported:B"]


def test_cpu_code_under_a_cuda_guard_is_decided_by_the_compiler(tmp_path: Path, write: Write) -> None:
    """A CPU header only .cpp files include: its #ifdef __CUDACC__ part is for CUDA compilers, not compiled there."""
    files = {
        "m.cpp": '#include "m.h"\nint main() { return f(); }\n',
        "m.h": "#ifdef __CUDACC__\nvoid g(cudaGraphConditionalHandle h);\n#else\nint f();\n#endif\n",
    }
    found, res = _run(tmp_path, write, files)
    assert "m.h" not in found and res.skipped == 1
    found, res = _run(tmp_path / "b", write, {**files, "k.cu": '#include "m.h"\n'})  # a CUDA unit includes it too
    assert found["m.h"] == ["2:unsupported:B"] and res.skipped == 0


def test_project_macro_defined_only_where_the_build_does_not_look() -> None:
    files = {
        "a.h": cond.directives(b"#if !defined(USE_HIP)\n#define HAVE_X\n#endif\n"),
        "b.h": cond.directives(b"#ifdef HAVE_X\nx\n#endif\n#ifdef HAVE_Y\ny\n#endif\n#define HAVE_Y\n"),
    }
    envs = {"a.h": (scope.DEVICE, scope.HOST), "b.h": (scope.DEVICE, scope.HOST)}
    b = scope.Branches(files, envs, [("USE_HIP", "1")], lambda n: n, lambda n: False)
    assert b.settled == {"HAVE_X"} and b.dead == {"a.h": [(2, 2)], "b.h": [(2, 2)]}  # HAVE_Y: defined, so not decided
    b = scope.Branches(files, envs, [], lambda n: n, lambda n: False)
    assert b.dead == {}


def test_defines_on_the_command_line(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "src", {"k.cu": HAND_PORTED, "common.cuh": "#pragma once\n"})
    for tool, extra in (("hipify", ["-o", str(tmp_path / "out")]), ("lint", [])):
        argv = [sys.executable, "-m", "tools", tool, str(tmp_path / "src"), *extra, "--hip-version", "6.4"]
        proc = subprocess.run(
            [
                *argv,
                "-DMYLIB_USE_HIP",
                "--undefine",
                "MYLIB_OTHER",
                "--report" if tool == "hipify" else "--json",
                *(["-"] if tool == "hipify" else []),
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
            check=False,
        )
        assert proc.returncode == (0 if tool == "hipify" else 1), proc.stderr
        assert (
            "in branches the" in proc.stderr
            and "1 blocking" in proc.stderr
            and "CUDART_VERSION" in proc.stdout + proc.stderr
        )
        assert "inline-asm" not in proc.stdout + proc.stderr
        bad = subprocess.run([*argv, "-D", "1X"], capture_output=True, text=True, cwd=REPO, check=False)
        assert bad.returncode != 0 and "bad define '1X'" in bad.stderr and "Traceback" not in bad.stderr


def test_parse_define() -> None:
    assert scope.parse_define("A") == ("A", "1") and scope.parse_define("A=") == ("A", "")
    assert scope.parse_define("B=0x10") == ("B", "0x10") and scope.parse_define("C", undefine=True) == ("C", None)
    assert scope.define_values([("A", "1"), ("A", None), ("S", '"x"'), ("E", "")]) == {
        "A": cond.UNDEF,
        "S": cond.DEFINED,
        "E": 0,
    }
    for bad in ("", "1A", "A-B", "A B"):
        with pytest.raises(ToolError):
            scope.parse_define(bad)
    with pytest.raises(ToolError):
        scope.parse_define("A=1", undefine=True)


# -- (c) renamed only when the CUDA content changes ---------------------------------------------------------------
def test_a_compiler_macro_alone_does_not_rename(tmp_path: Path, write: Write) -> None:
    files = {
        "platform.h": "#if defined(_WIN32) && defined(__CUDACC__)\n#define PLATFORM_GPU 1\n#endif\n",
        "cpu.cpp": '#include "platform.h"\nint f() { return 0; }\n',
        "gpu.h": "#include <cuda_runtime.h>\ncudaStream_t s();\n",
        "user.cpp": '#include "gpu.h"\n',
    }
    _found, res = _run(tmp_path, write, files)
    names = {src.name: dst.name for src, dst in res.outputs.items()}
    assert names == {"platform.h": "platform.h", "cpu.cpp": "cpu.cpp", "gpu.h": "gpu_hip.h", "user.cpp": "user_hip.cpp"}
    assert (tmp_path / "out" / "platform.h").read_text().startswith("#if defined(_WIN32) && defined(__HIPCC__)")


def test_cuda_content_means_cuda_names_device_code_and_includes(tr64: Translator) -> None:
    for src, renamed in [
        (b"#ifdef __NVCC__\n#endif\n#if __CUDA_ARCH__ >= 700\n#endif\n", False),
        (b"#ifdef __CUDACC__\nvoid f(cudaStream_t);\n#endif\n", True),
        (b"#include <cuda_runtime.h>\n", True),
        (b"#ifdef __CUDACC__\n#define HD __host__ __device__\n#endif\n", False),  # nothing of it changes
    ]:
        res = tr64.translate(src)
        assert res.changed == (src != res.data) and res.cuda_changed == renamed, src


# -- __CUDA_ARCH__ comparisons --------------------------------------------------------------------------------------
def _arch(src: bytes) -> list[tuple[int, int, str, str]]:
    out = []
    for f in lint_bytes(src, []):
        if f.rule == "cuda-arch-compare":
            line, col = positions(src, [f.offset])[f.offset]
            out.append((line, col, f.name, f.reason))
    return out


def test_every_comparison_named_whole_with_the_branch_hip_takes() -> None:
    src = (
        b"#if defined(FP16_AVAILABLE) && __CUDA_ARCH__ != 610\n#endif\n"
        b"#if __CUDA_ARCH__ >= GGML_CUDA_CC_VOLTA\n#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700 && \\\n"
        b"    __CUDA_ARCH__ < 800\n#endif\n"
        b"#if 700 <= __CUDA_ARCH__\n#endif\n#if __CUDA_ARCH__\n#endif\n"
        b"__device__ void f() { if constexpr (__CUDA_ARCH__ >= 800) {} }\n"
    )
    got = _arch(src)
    assert [(line, col, name) for line, col, name, _r in got] == [
        (1, 32, "__CUDA_ARCH__ != 610"),
        (3, 5, "__CUDA_ARCH__ >= GGML_CUDA_CC_VOLTA"),
        (4, 33, "__CUDA_ARCH__ >= 700"),
        (5, 5, "__CUDA_ARCH__ < 800"),
        (7, 5, "700 <= __CUDA_ARCH__"),
        (11, 37, "__CUDA_ARCH__ >= 800"),
    ]  # (a bare "#if __CUDA_ARCH__" means the same under HIP: no finding)
    reasons = [r for *_x, r in got]
    assert "1 != 610, true for every AMD GPU" in reasons[0] and "depends on FP16_AVAILABLE" in reasons[0]
    assert "HIP compares 1 against GGML_CUDA_CC_VOLTA" in reasons[1]
    assert "1 >= 700, false" in reasons[2] and "HIP skips this #elif's branch in device code" in reasons[2]
    assert "700 <= 1, false" in reasons[4] and "1 >= 800, false" in reasons[5]


def test_a_comparison_the_defines_make_irrelevant_is_not_reported(tmp_path: Path, write: Write) -> None:
    src = (
        "#if defined(USE_HIP) || __CUDA_ARCH__ >= 600\n#endif\n"
        "#if !defined(USE_HIP) && __CUDA_ARCH__ >= 700\n#endif\n"
        "#if defined(USE_HIP)\n#elif __CUDA_ARCH__ >= 800\n#endif\n"
        "#if __CUDA_ARCH__ >= 900\n#endif\n"
    )
    found, _res = _run(tmp_path / "a", write, {"k.cu": src})
    assert found["k.cu"] == [
        "1:cuda-arch-compare:B",
        "3:cuda-arch-compare:B",
        "6:cuda-arch-compare:B",
        "8:cuda-arch-compare:B",
    ]
    found, _res = _run(tmp_path / "b", write, {"k.cu": src}, defines=(("USE_HIP", "1"),))
    assert found["k.cu"] == ["8:cuda-arch-compare:B"]  # the one that still switches a path off silently


@pytest.fixture(scope="module")
def tr64() -> Translator:
    return Translator(load_database(), (6, 4))


def test_macros_table_loads() -> None:
    table = scope.load_macros()
    assert {"__CUDACC__", "__NVCC__", "__CUDA_ARCH__"} <= table.compiler_ids
    assert table.values["__HIP_DEVICE_COMPILE__"] == (1, cond.UNDEF, cond.UNDEF)
    assert table.values["__HIPCC__"] == (1, 1, cond.UNDEF)


def test_report_schema(tmp_path: Path, write: Write) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    _found, res = _run(tmp_path, write, TREE, defines=(("A", "1"), ("B", None)))
    schema = json.loads((REPO / "tools" / "hipify" / "data" / "report.schema.json").read_text())
    jsonschema.validate(res.to_json(), schema)


def test_a_rename_never_takes_another_files_name(tmp_path: Path, write: Write) -> None:
    """ggml's vendors/cuda.h (CUDA content: renamed) beside its hand-written vendors/hip.h: cuda_hip.h, no collision."""
    files = {
        "vendors/cuda.h": "#include <cuda_runtime.h>\n",
        "vendors/hip.h": "#pragma once\nint hand_port;\n",
        "common.cuh": '#ifdef USE_HIP\n#include "vendors/hip.h"\n#else\n#include "vendors/cuda.h"\n#endif\n',
    }
    _found, res = _run(tmp_path, write, files)
    names = {src.name: dst.relative_to(tmp_path / "out").as_posix() for src, dst in res.outputs.items()}
    assert names == {"cuda.h": "vendors/cuda_hip.h", "hip.h": "vendors/hip.h", "common.cuh": "common_hip.cuh"}
    assert not [f for f in res.findings if f.rule == "output-collision"]
    assert b'#include "vendors/cuda_hip.h"' in (tmp_path / "out" / "common_hip.cuh").read_bytes()
