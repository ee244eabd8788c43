"""The compile-failure classifier (tools/port/classify.py): fixture diagnostics against a small project and a
stand-in HIP include directory, then real HIP-Clang output from the ROCm 6.4 root (tests/_roots.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _roots import require_root, run_in_root

from tools.hipify.mapping import load_database
from tools.hipify.model import KINDS
from tools.port.classify import CLASSES, Classifier, Project, diagnostic_rules, header_table, lookup_header

# A stand-in for <ROCm>/include/hip: what HIP declares (the classifier reads identifiers from it).
HIP_RUNTIME = """#define HIP_INCLUDE_HIP_HIP_RUNTIME_H
struct dim3 { unsigned x, y, z; };
extern const dim3 blockIdx, threadIdx;
typedef struct { float x, y; } float2;
int hipMalloc(void** p, unsigned long n);
int hipFuncGetAttributes(void* attr, const void* func);
"""


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    hip = tmp_path / "rocm" / "include" / "hip"
    hip.mkdir(parents=True)
    (hip / "hip_runtime.h").write_text(HIP_RUNTIME)
    (tmp_path / "libs" / "hipblas").mkdir(parents=True)
    (tmp_path / "libs" / "hipblas" / "hipblas.h").write_text("int hipblasCreate(void*);\n")
    proj = tmp_path / "proj"
    proj.mkdir()
    return proj, hip


def classify(
    proj: Path, hip: Path, unit: str, output: str, *, version: tuple[int, int] = (6, 4), command: tuple[str, ...] = ()
) -> tuple[str, str, str]:
    files = [p for p in proj.rglob("*") if p.is_file()]
    c = Classifier(load_database(), version, hip, Project(files), arch="gfx942")
    cause = c.classify(proj / unit, proj / unit, output, list(command))
    assert cause.cls in CLASSES
    assert cause.reason and cause.suggestion
    return cause.cls, cause.subject, cause.reason


def err(proj: Path, unit: str, line: int, col: int, message: str, *, kind: str = "error") -> str:
    return f"{proj / unit}:{line}:{col}: {kind}: {message}\n"


def test_tables_load_and_every_rule_has_a_handler() -> None:
    assert diagnostic_rules()  # an unknown handler would raise
    table = header_table()
    assert {"rocm", "cuda-only", "third-party", "windows"} <= {h.provider for h in table.values()}
    assert (
        lookup_header("hipcub/hipcub.hpp") is not None and lookup_header("hipcub/hipcub.hpp").debian == "libhipcub-dev"
    )  # type: ignore[union-attr]
    assert lookup_header("cuda/std/atomic").provider == "cuda-only"  # type: ignore[union-attr]
    assert lookup_header("no/such.h") is None


def test_missing_library_header_names_the_packages(setup: tuple[Path, Path]) -> None:
    proj, hip = setup
    (proj / "k.hip").write_text("#include <hipsparse/hipsparse.h>\n")
    out = err(proj, "k.hip", 1, 10, "'hipsparse/hipsparse.h' file not found", kind="fatal error")
    cls, subject, reason = classify(proj, hip, "k.hip", out)
    assert (cls, subject) == ("missing-header", "hipsparse/hipsparse.h")
    assert "libhipsparse-dev (Debian)" in reason and "hipsparse-dev (AMD ROCm)" in reason


def test_flat_library_header_says_where_rocm6_puts_it(setup: tuple[Path, Path]) -> None:
    proj, hip = setup
    (proj / "k.hip").write_text("#include <hipblas.h>\n")
    libs = hip.parents[2] / "libs"
    out = f"{proj / 'k.hip'}:1:10: fatal error: 'hipblas.h' file not found\n"
    cls, _subject, reason = classify(proj, hip, "k.hip", out, command=("clang++", f"-I{libs}"))
    assert cls == "missing-header" and "<hipblas/hipblas.h>" in reason and "installed" in reason


@pytest.mark.parametrize(
    ("header", "cls", "words"),
    [
        ("GL/gl.h", "missing-header", "libgl-dev"),
        ("omp.h", "missing-header", "libomp-dev"),
        ("d3d11.h", "missing-header", "Windows"),
        ("cuda/pipeline", "hip-lacks", "libcu++"),
        ("cooperative_groups/reduce.h", "hip-lacks", "reduce"),
        ("cudaProfilerSomething.h", "hip-lacks", "CUDA header"),
        ("cuda_runtime.h", "untranslated", "<hip/hip_runtime.h>"),
        ("zlib_like_nobody_has.h", "missing-header", "no known package"),
    ],
)
def test_header_classes(setup: tuple[Path, Path], header: str, cls: str, words: str) -> None:
    proj, hip = setup
    (proj / "k.hip").write_text(f"#include <{header}>\n")
    out = f"{proj / 'k.hip'}:1:10: fatal error: '{header}' file not found\n"
    got, subject, reason = classify(proj, hip, "k.hip", out)
    assert (got, subject) == (cls, header) and words in reason


def test_project_header_off_the_include_path(setup: tuple[Path, Path]) -> None:
    proj, hip = setup
    (proj / "inc").mkdir()
    (proj / "inc" / "grid.h").write_text("int grid;\n")
    (proj / "src").mkdir()
    (proj / "src" / "k.hip").write_text('#include "grid.h"\n')
    out = f"{proj / 'src/k.hip'}:1:10: fatal error: 'grid.h' file not found\n"
    cls, _subject, reason = classify(proj, hip, "src/k.hip", out)
    assert cls == "missing-header" and "inc/grid.h" in reason and "include path" in reason


def test_unit_included_by_another_is_not_standalone(setup: tuple[Path, Path]) -> None:
    proj, hip = setup
    (proj / "main.hip").write_text('#include <hip/hip_runtime.h>\n#define N 4\n#include "kernel.hip"\n')
    (proj / "kernel.hip").write_text("__global__ void k(float* p) { p[N] = 0; }\n")
    out = err(proj, "kernel.hip", 1, 37, "use of undeclared identifier 'N'")
    cls, _subject, reason = classify(proj, hip, "kernel.hip", out)
    assert cls == "not-standalone" and "main.hip" in reason


def test_name_defined_in_a_file_the_unit_does_not_include(setup: tuple[Path, Path]) -> None:
    proj, hip = setup
    (proj / "params.h").write_text("#define BLOCK_ROWS 8\n")
    (proj / "k.hip").write_text("int rows = BLOCK_ROWS;\n")
    cls, subject, reason = classify(
        proj, hip, "k.hip", err(proj, "k.hip", 1, 12, "use of undeclared identifier 'BLOCK_ROWS'")
    )
    assert (cls, subject) == ("not-standalone", "BLOCK_ROWS") and "params.h:1" in reason


@pytest.mark.parametrize(
    ("name", "version", "cls", "words"),
    [
        ("cudaGraphConditionalHandle", (6, 4), "hip-lacks", "HIPIFY lists it as unsupported"),
        ("cudaGraphAddNode", (5, 2), "hip-lacks", "needs HIP >= 6.2"),
        ("cudaMalloc", (6, 4), "untranslated", "maps it to hipMalloc"),
        ("cudaSomethingNobodyMapped", (6, 4), "untranslated", "do not know it"),
        ("blockIdx", (6, 4), "missing-include", "runtime header"),
        ("hipNotInThisHip", (6, 4), "hip-lacks", "does not declare hipNotInThisHip"),
    ],
)
def test_undeclared_names(setup: tuple[Path, Path], name: str, version: tuple[int, int], cls: str, words: str) -> None:
    proj, hip = setup
    (proj / "k.hip").write_text(f"void f() {{ {name}; }}\n")
    out = err(proj, "k.hip", 1, 12, f"use of undeclared identifier '{name}'")
    got, subject, reason = classify(proj, hip, "k.hip", out, version=version)
    assert (got, subject) == (cls, name) and words in reason, reason


def test_hip_name_declared_but_runtime_included_is_a_conditional_declaration(setup: tuple[Path, Path]) -> None:
    proj, hip = setup
    (hip / "amd_warp.h").write_text(
        "#ifdef HIP_ENABLE_WARP_SYNC_BUILTINS\nint __shfl_up_sync(unsigned long long, int, int);\n#endif\n"
    )
    (proj / "k.hip").write_text("#include <hip/hip_runtime.h>\nint v = __shfl_up_sync(0, 1, 1);\n")
    out = err(proj, "k.hip", 2, 9, "use of undeclared identifier '__shfl_up_sync'")
    cls, _subject, reason = classify(proj, hip, "k.hip", out)
    assert cls == "hip-lacks" and "condition" in reason


def test_helper_defined_under_a_runtime_guard_needs_the_runtime_first(setup: tuple[Path, Path]) -> None:
    proj, hip = setup
    (proj / "helper.h").write_text(
        "#ifndef HELPER_H\n#define HELPER_H\n#ifdef HIP_INCLUDE_HIP_HIP_RUNTIME_H\ninline int findDevice() { return 0; }\n#endif\n#endif\n"
    )
    (proj / "k.hip").write_text('#include "helper.h"\n#include <hip/hip_runtime.h>\nint d = findDevice();\n')
    out = err(proj, "k.hip", 3, 9, "use of undeclared identifier 'findDevice'")
    cls, _subject, reason = classify(proj, hip, "k.hip", out)
    assert cls == "missing-include" and "helper.h:4" in reason and "HIP_INCLUDE_HIP_HIP_RUNTIME_H" in reason


def test_texture_unavailable_on_the_target(setup: tuple[Path, Path]) -> None:
    proj, hip = setup
    (proj / "k.hip").write_text("x\n")
    out = err(
        proj, "k.hip", 1, 1, "'tex2D<float, nullptr>' is unavailable: The image/texture API not supported on the device"
    )
    cls, subject, reason = classify(proj, hip, "k.hip", out)
    assert (cls, subject) == ("hip-lacks", "tex2D") and "gfx942" in reason and "image/texture" in reason


def test_other_signature_and_clash_with_hip(setup: tuple[Path, Path]) -> None:
    proj, hip = setup
    (proj / "k.hip").write_text("x\n")
    call = err(proj, "k.hip", 1, 1, "no matching function for call to 'hipFuncGetAttributes'")
    call += f"{hip}/hip_runtime.h:6:5: note: candidate function not viable: no known conversion to 'const void *'\n"
    cls, subject, reason = classify(proj, hip, "k.hip", call)
    assert (cls, subject) == ("hip-lacks", "hipFuncGetAttributes") and "const void *" in reason
    amb = err(
        proj, "k.hip", 1, 1, "use of overloaded operator '/' is ambiguous (with operand types 'float2' and 'float2')"
    )
    amb += f"{proj / 'k.hip'}:1:1: note: candidate function\n{hip}/hip_runtime.h:4:1: note: candidate function\n"
    cls, subject, reason = classify(proj, hip, "k.hip", amb)
    assert (cls, subject) == ("hip-conflict", "/") and "HIP" in reason


def test_cuda_macro_selected_the_broken_branch(setup: tuple[Path, Path]) -> None:
    proj, hip = setup
    (proj / "k.hip").write_text("#if CUDART_VERSION >= 2020\nint ok;\n#else\nint x = ,;\n#endif\n")
    cls, subject, reason = classify(proj, hip, "k.hip", err(proj, "k.hip", 4, 9, "expected expression"))
    assert (cls, subject) == ("untranslated", "CUDART_VERSION") and "#else" in reason


def test_unknown_error_is_other_with_its_position(setup: tuple[Path, Path]) -> None:
    proj, hip = setup
    (proj / "k.hip").write_text("int a = b c;\n")
    out = err(proj, "k.hip", 1, 10, "expected ';' at end of declaration")
    cls, subject, reason = classify(proj, hip, "k.hip", out)
    assert (cls, subject) == ("other", "") and "k.hip:1:10" in reason and "expected ';'" in reason
    cls, _s, reason = classify(proj, hip, "k.hip", "clang++: error: unable to execute command: Killed\n")
    assert cls == "other" and "Killed" in reason


def test_known_rules_from_the_table(setup: tuple[Path, Path]) -> None:
    proj, hip = setup
    (proj / "k.hip").write_text("int a[n] = {0};\n")
    out = err(proj, "k.hip", 1, 7, "variable-sized object may not be initialized")
    cls, _subject, reason = classify(proj, hip, "k.hip", out)
    assert cls == "compiler-dialect" and "variable-length array" in reason and "k.hip:1:7" in reason
    out = err(proj, "k.hip", 1, 1, "reference to __global__ function 'child' in __global__ function")
    cls, subject, reason = classify(proj, hip, "k.hip", out)
    assert (cls, subject) == ("hip-lacks", "child") and "dynamic parallelism" in reason
    out = err(proj, "k.hip", 1, 1, "device-side kernel call/launch is not supported")  # clang 22's wording
    cls, _subject, reason = classify(proj, hip, "k.hip", out)
    assert cls == "hip-lacks" and "dynamic parallelism" in reason


def test_overload_compiled_out_under_a_cuda_guard(setup: tuple[Path, Path]) -> None:
    proj, hip = setup
    (proj / "helper.h").write_text(
        "#ifdef _CUFFT_H_\nstatic const char* errorName(hipfftResult e) { return 0; }\n#endif\n"
        "static const char* errorName(hipError_t e) { return 0; }\n"
        "template <class T> void check(T r) { errorName(r); }\n"
    )
    (proj / "k.hip").write_text('#include "helper.h"\n')
    out = err(proj, "helper.h", 5, 39, "no matching function for call to 'errorName'")
    out += f"{proj / 'helper.h'}:4:20: note: candidate function not viable: no known conversion from 'hipfftResult' to 'hipError_t' for 1st argument\n"
    cls, subject, reason = classify(proj, hip, "k.hip", out)
    assert (cls, subject) == ("untranslated", "_CUFFT_H_") and "helper.h:2" in reason


# -- real HIP-Clang output (ROCm 6.4 root) ------------------------------------------------------------------------
REAL = {
    "runtime.hip": "__global__ void k(float* p) { p[blockIdx.x] = 0; }\n",
    "flatblas.hip": "#include <hip/hip_runtime.h>\n#include <hipblas.h>\n",
    "texture.hip": (
        "#include <hip/hip_runtime.h>\n__global__ void k(hipTextureObject_t t, float* o) { o[0] = tex2D<float>(t, 0.f, 0.f); }\n"
    ),
    "unsupported.hip": "#include <hip/hip_runtime.h>\ncudaGraphConditionalHandle v;\n",
    "vecops.hip": (
        "#include <hip/hip_runtime.h>\ninline __host__ __device__ float2 operator/(float2 a, float2 b) "
        "{ return make_float2(a.x / b.x, a.y / b.y); }\n__global__ void k(float2* p) { p[0] = p[0] / p[1]; }\n"
    ),
}
EXPECT = {
    "runtime.hip": ("missing-include", "blockIdx"),
    "flatblas.hip": ("missing-header", "hipblas.h"),
    "texture.hip": ("hip-lacks", "tex2D"),
    "unsupported.hip": ("hip-lacks", "cudaGraphConditionalHandle"),
    "vecops.hip": ("hip-conflict", "/"),
}


@pytest.mark.slow
def test_real_hip_clang_failures_in_the_rocm64_root(tmp_path: Path) -> None:
    root = require_root("6.4")
    libs = root / "opt" / "rocm-libs" / "usr" / "include"
    if not (libs / "hipblas").is_dir():
        why = f"the 6.4 root has no library headers (ci/rocm-root.sh make 6.4 {root} --with-libs)"
        if os.environ.get("MONARCH_TEST_REQUIRE_ROOTS") == "1":  # ci/install-toolchains.sh makes them
            pytest.fail(why)
        pytest.skip(why)
    src = tmp_path / "src"
    src.mkdir()
    for name, text in REAL.items():
        (src / name).write_text(text)
    script = (
        'for f in "$0"/*.hip; do clang++-21 -x hip --offload-arch=gfx942 -std=c++17 -fsyntax-only '
        '-I/opt/rocm-libs/usr/include "$f" > "$f.log" 2>&1; echo $? > "$f.rc"; done'
    )
    run_in_root("6.4", ["bash", "-c", script, str(src)], binds=[tmp_path], timeout=300, check=True)
    files = [p for p in src.iterdir() if p.suffix == ".hip"]
    c = Classifier(load_database(), (6, 4), root / "usr" / "include" / "hip", Project(files), arch="gfx942")
    got = {}
    for name in REAL:
        unit = src / name
        assert (src / f"{name}.rc").read_text().strip() != "0", f"{name} compiled: the fixture no longer fails"
        output = (src / f"{name}.log").read_text()
        cause = c.classify(unit, unit, output, ["clang++-21", "-I/opt/rocm-libs/usr/include"])
        got[name] = (cause.cls, cause.subject)
    assert got == EXPECT, json.dumps(got, indent=1)


# -- tools port inside a root (ROCM_HOME=/usr, the repository bound at its own path) ------------------------------
BROKEN = (
    "#include <cuda_runtime.h>\n#include <cublas_v2.h>\n"
    "__global__ void k(float* p) { p[threadIdx.x] = 0; }\n"
    "void f() { cudaGraphConditionalHandle v; (void)v; }\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("root", ["7.2", "6.4"])
def test_port_inside_a_root_targets_its_hip_and_names_the_cause(tmp_path: Path, root: str) -> None:
    require_root(root)
    repo = Path(__file__).resolve().parents[2]
    other = "6.4" if root == "7.2" else "7.2"
    # the 6.4 root has RCCL's header unpacked, not installed (ci/rocm-root.sh)
    env = {"ROCM_HOME": "/usr", **({"RCCL_HOME": "/opt/rccl/usr"} if root == "6.4" else {})}
    unit = tmp_path / "k.cu"
    unit.write_text(BROKEN)
    runs = {}
    for label, extra in (("found", []), ("explicit", ["--hip-version", other])):
        report = tmp_path / f"{label}.json"
        argv = ["python3", "-m", "tools", "port", str(unit), "--no-cuda", "--rocm-archs", "gfx942", "--no-diff"]
        proc = run_in_root(
            root,
            [*argv, *extra, "--report", str(report)],
            binds=[repo, tmp_path],
            env=env,
            cwd=repo,
            timeout=300,
        )
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
        runs[label] = json.loads(report.read_text())
    found, explicit = runs["found"], runs["explicit"]
    assert found["hip_version"] == root and explicit["hip_version"] == other  # the root's HIP, or --hip-version
    unit_result = found["sides"]["rocm"]["units"][0]
    compile_findings = [f for f in found["findings"] if f["kind"] == "compile"]
    has_hipblas = (require_root(root) / "usr" / "include" / "hipblas" / "hipblas.h").is_file()
    # ci/install-toolchains.sh makes the 6.4 root --with-libs (the libraries' headers where Debian installs them)
    assert has_hipblas == (root == "6.4"), f"bash ci/rocm-root.sh make 6.4 {require_root(root)} --with-libs"
    if has_hipblas:
        # found with no flag, and the unit fails further on, at the CUDA type HIP lacks
        assert not unit_result["ok"] and unit_result["cause"]["class"] == "hip-lacks"
        assert unit_result["cause"]["subject"] == "cudaGraphConditionalHandle"
        assert [(f["rule"], f["line"], f["blocking"]) for f in compile_findings] == [("hip-lacks", 4, True)]
    else:  # (the 7.2 root has no library headers)
        assert not unit_result["ok"] and unit_result["cause"]["class"] == "missing-header"
        assert unit_result["cause"]["subject"].startswith("hipblas")  # not installed in this ROCm
        assert "libhipblas-dev (Debian)" in unit_result["cause"]["reason"]
        assert [(f["rule"], f["line"], f["blocking"]) for f in compile_findings] == [("missing-header", 2, True)]
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((repo / "tools" / "port" / "data" / "port-report.schema.json").read_text())
    jsonschema.validate(found, schema)


def test_report_schema_knows_every_finding_kind() -> None:
    """Every kind hipify writes (notes too) and the port's own compile kind."""
    repo = Path(__file__).resolve().parents[2]
    schema = json.loads((repo / "tools" / "port" / "data" / "port-report.schema.json").read_text())
    kinds = schema["properties"]["findings"]["items"]["properties"]["kind"]["enum"]
    assert kinds == [*KINDS, "compile"]


def test_report_schema_knows_every_class() -> None:
    repo = Path(__file__).resolve().parents[2]
    schema = json.loads((repo / "tools" / "port" / "data" / "port-report.schema.json").read_text())
    assert schema["$defs"]["cause"]["properties"]["class"]["enum"] == list(CLASSES)


def test_runtime_call_from_device_code(setup: tuple[Path, Path]) -> None:
    proj, hip = setup
    (proj / "k.hip").write_text("x\n")
    out = err(proj, "k.hip", 1, 1, "no matching function for call to 'hipMalloc'")
    out += f"{hip}/hip_runtime.h:5:5: note: candidate function not viable: call to __host__ function from __global__ function\n"
    cls, subject, reason = classify(proj, hip, "k.hip", out)
    assert (cls, subject) == ("hip-lacks", "hipMalloc") and "device-side runtime" in reason


def test_a_pathological_line_does_not_stall_the_search(setup: tuple[Path, Path]) -> None:
    """Looking for where a name is defined reads every project line: a long run of '*'/'&' between words once
    made a nested pattern backtrack exponentially (the whole benchmark stalled on one file)."""
    proj, hip = setup
    (proj / "noise.h").write_text("  " + "int * & " * 40 + "helper_fn;\n" + "  " + "*& " * 40 + "helper_fn;\n")
    (proj / "k.hip").write_text("int v = helper_fn();\n")
    cls, _subject, _reason = classify(
        proj, hip, "k.hip", err(proj, "k.hip", 1, 9, "use of undeclared identifier 'helper_fn'")
    )
    assert cls == "other"


def test_helper_under_a_cuda_guard_left_as_is(setup: tuple[Path, Path]) -> None:
    proj, hip = setup
    (proj / "helper.h").write_text("#ifdef __DRIVER_TYPES_H__\n#define checkErrors(x) (x)\n#endif\n")
    (proj / "k.hip").write_text('#include <hip/hip_runtime.h>\n#include "helper.h"\nint v = checkErrors(1);\n')
    out = err(proj, "k.hip", 3, 9, "use of undeclared identifier 'checkErrors'")
    cls, subject, reason = classify(proj, hip, "k.hip", out)
    assert (cls, subject) == ("untranslated", "__DRIVER_TYPES_H__") and "HIP_INCLUDE_HIP_DRIVER_TYPES_H" in reason


def test_include_the_translation_lost(tmp_path: Path) -> None:
    hip = tmp_path / "rocm" / "include" / "hip"
    hip.mkdir(parents=True)
    (hip / "hip_runtime.h").write_text(HIP_RUNTIME)
    cuda, out = tmp_path / "cuda", tmp_path / "out"
    for d in (cuda, out):
        d.mkdir()
        (d / "helper_cuda.h").write_text("inline int findDevice() { return 0; }\n")
    (cuda / "k.cu").write_text("#include <helper_cuda.h>\nint d = findDevice();\n")
    (out / "k.cu").write_text("#include <helper_hip.h>\nint d = findDevice();\n")  # the include the translator rewrote
    origin = {out / "k.cu": cuda / "k.cu", out / "helper_cuda.h": cuda / "helper_cuda.h"}
    c = Classifier(load_database(), (6, 4), hip, Project(list(origin), origin=origin), arch="gfx942")
    cause = c.classify(cuda / "k.cu", out / "k.cu", err(out, "k.cu", 2, 9, "use of undeclared identifier 'findDevice'"))
    assert cause.cls == "missing-include" and "<helper_cuda.h>" in cause.reason
