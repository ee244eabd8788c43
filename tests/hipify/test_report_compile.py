"""Real compiles for the report's classes (issue 22, classes 5-9), in the ROCm 6.4 and 7.2 roots (tests/_roots.py)
and with HIP 5.2 on the host: what the translation writes compiles where the report says it does, and what the report
calls blocking does not.

- SIMD intrinsics: a kernel calling all 82 of them, hipified, compiles for gfx942 (6.4, 7.2) and gfx90a (5.2) with
  -Wall -Wextra -Werror; without the compat header it does not (HIP has none of them).
- Header hygiene: a public C header whose CUDA code is under #ifdef __CUDACC__, hipified, compiles as C++ and as HIP.
- CUDA-only headers: the include the report flags is missing, and tools port's classifier says what the table says.
- __CUDA_ARCH__: the branch the finding says HIP takes in device code is the branch HIP-Clang's device pass takes.
- Defines: with -D the hand-ported branch is the one compiled, and the report has nothing blocking; without, the
  PTX branch is reported, and it does not compile.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from _roots import ROCM_ROOT_VERSIONS, require_root, run_in_root
from test_header_hygiene import PUBLIC_C
from test_simd import arities

from tools.hipify import HipifyOptions, HipifyResult, hipify_tree, simd
from tools.hipify.headers import table_row
from tools.hipify.mapping import load_database
from tools.port.classify import Classifier, Project

CLANG = {"6.4": "clang++-21", "7.2": "clang++-22"}
FLAGS = ["-std=c++17", "-fPIC", "-Wall", "-Wextra", "-Werror"]


def _simd_kernel() -> str:
    calls = [
        f"  out[{i}] = {name}(a[{i}]{', b[' + str(i) + ']' if n == 2 else ''});"
        for i, (name, n) in enumerate(sorted(arities().items()))
    ]
    return (
        "#include <cuda_runtime.h>\n"
        "__global__ void simd_all(const unsigned* a, const unsigned* b, unsigned* out) {\n" + "\n".join(calls) + "\n}\n"
        "__device__ int ggml_like(int a, int b) { return __vsubss4(a, b) & __vcmpne4(a, 0); }\n"
    )


ARCH = """#include <cuda_runtime.h>
#if __CUDA_ARCH__ >= 700
int branch_ge_700;
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 610
int branch_ne_610;
#endif
#if __CUDA_ARCH__ < 800
int branch_lt_800;
#elif __CUDA_ARCH__ >= 900
int branch_ge_900;
#endif
"""

HAND_PORTED = """#include <cuda_runtime.h>
__device__ unsigned lane_id() {
  unsigned l;
#ifndef MYLIB_USE_HIP
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));
#else
  l = __lane_id();
#endif
  return l;
}
__global__ void k(unsigned* p) { p[threadIdx.x] = lane_id(); }
"""

REDUCE = "#include <cooperative_groups.h>\n#include <cooperative_groups/memcpy_async.h>\n__global__ void k() {}\n"


def _hipify(src_dir: Path, out: Path, version: tuple[int, int], **options: object) -> HipifyResult:
    return hipify_tree([src_dir], out, HipifyOptions(hip_version=version, jobs=1, **options))  # type: ignore[arg-type]


def _tree(tmp_path: Path, version: tuple[int, int]) -> dict[str, object]:
    src = tmp_path / "src"
    src.mkdir()
    (src / "simd.cu").write_text(_simd_kernel())
    (src / "mylib.h").write_text(PUBLIC_C)
    (src / "arch.cu").write_text(ARCH)
    (src / "ported.cu").write_text(HAND_PORTED)
    (src / "reduce.cu").write_text(REDUCE)
    plain = _hipify(src, tmp_path / "out", version)
    defined = _hipify(src, tmp_path / "out-d", version, defines=(("MYLIB_USE_HIP", "1"),))
    out = tmp_path / "out"
    naive = tmp_path / "naive"
    naive.mkdir()
    # the translation without the compat header: what HIP itself offers
    (naive / "simd.hip").write_text(re.sub(r'#include "hipify_compat.h"[^\n]*\n', "", (out / "simd.hip").read_text()))
    return {"plain": plain, "defined": defined, "out": out, "out_d": tmp_path / "out-d", "naive": naive}


def _blocking(res: object, name: str) -> list[str]:
    assert isinstance(res, HipifyResult)
    return [f"{f.rule or f.kind}:{f.name}" for f in res.findings if f.blocking and f.file.name == name]


def _check(tmp_path: Path, t: dict[str, object], compile_cmd: list[str], run: object, label: str) -> None:
    out, out_d, naive = Path(str(t["out"])), Path(str(t["out_d"])), Path(str(t["naive"]))
    assert _blocking(t["plain"], "simd.cu") == []  # provided
    use = out / "mylib_use.cpp"
    use.write_text('#include "mylib_hip.h"\n')  # (the header as its consumers include it)
    units = {
        "simd": [*compile_cmd, "-x", "hip", "-c", "-o", "/dev/null", str(out / "simd.hip")],
        "naive": [*compile_cmd, "-x", "hip", "-c", "-o", "/dev/null", str(naive / "simd.hip")],
        "cxx": [compile_cmd[0], *FLAGS, "-x", "c++", "-fsyntax-only", str(use)],
        "hip": [*compile_cmd, "-x", "hip", "-fsyntax-only", str(use)],
        "ported_d": [*compile_cmd, "-x", "hip", "-DMYLIB_USE_HIP", "-c", "-o", "/dev/null", str(out_d / "ported.hip")],
        "ported": [*compile_cmd, "-x", "hip", "--cuda-device-only", "-c", "-o", "/dev/null", str(out / "ported.hip")],
        "reduce": [*compile_cmd, "-x", "hip", "-fsyntax-only", str(out / "reduce.hip")],
        "arch": [
            *compile_cmd,
            "-x",
            "hip",
            "--cuda-device-only",
            "-E",
            "-o",
            str(out / "arch.i"),
            str(out / "arch.hip"),
        ],
    }
    script = "".join(f"echo '@@ {n} start'; {shlex.join(cmd)} 2>&1; echo '@@ {n} rc='$?; " for n, cmd in units.items())
    log = run(script)  # type: ignore[operator]
    rc = dict(re.findall(r"^@@ (\w+) rc=(\d+)$", log, re.M))
    assert set(rc) == set(units), log[-4000:]
    for ok in ("simd", "cxx", "hip", "ported_d"):
        assert rc[ok] == "0", f"{label}: {ok} does not compile:\n{log[-6000:]}"
    assert rc["naive"] != "0" and "use of undeclared identifier '__v" in log, log[-3000:]
    # the PTX branch: blocking in the report without -D, and it does not compile for AMD
    assert _blocking(t["plain"], "ported.cu") == ["inline-asm:asm volatile("] and rc["ported"] != "0"
    assert _blocking(t["defined"], "ported.cu") == []
    # the CUDA-only header: missing, and the classifier says what hipify's table says
    assert rc["reduce"] != "0" and "cooperative_groups/memcpy_async.h" in _blocking(t["plain"], "reduce.cu")[0]
    # __CUDA_ARCH__: the branches the device pass keeps are the ones the findings say HIP takes
    taken = set(re.findall(r"\b(branch_\w+)", (out / "arch.i").read_text()))
    assert taken == {"branch_ne_610", "branch_lt_800"}, log[-3000:]
    res = t["plain"]
    assert isinstance(res, HipifyResult)
    reasons = {f.name: f.reason for f in res.findings if f.rule == "cuda-arch-compare" and f.file.name == "arch.cu"}
    assert "HIP skips this #if's branch" in reasons["__CUDA_ARCH__ >= 700"]
    assert "HIP takes this #if's branch" in reasons["__CUDA_ARCH__ != 610"]
    assert "HIP takes this #if's branch" in reasons["__CUDA_ARCH__ < 800"]
    # (the #elif after a taken #if is not reported: HIP's device pass never reads it)
    assert "__CUDA_ARCH__ >= 900" not in reasons


@pytest.mark.slow
@pytest.mark.parametrize("version", ROCM_ROOT_VERSIONS)
def test_in_the_roots(tmp_path: Path, version: str) -> None:
    require_root(version)
    t = _tree(tmp_path, (int(version[0]), int(version[2])))
    compile_cmd = [CLANG[version], "--offload-arch=gfx942", *FLAGS]

    def run(script: str) -> str:
        proc = run_in_root(version, ["bash", "-c", script], binds=[tmp_path], timeout=600)
        return proc.stdout + proc.stderr

    _check(tmp_path, t, compile_cmd, run, f"HIP {version}")
    # tools port's classifier on the real failure: the table's text
    log = run(shlex.join([*compile_cmd, "-x", "hip", "-fsyntax-only", str(Path(str(t["out"])) / "reduce.hip")]))
    unit = Path(str(t["out"])) / "reduce.hip"
    hip = require_root(version) / "usr" / "include" / "hip"
    cause = Classifier(load_database(), (int(version[0]), int(version[2])), hip, Project([unit])).classify(
        unit, unit, log
    )
    row = table_row("cooperative_groups/memcpy_async.h")
    assert row is not None and cause.cls == "hip-lacks" and row.instead in cause.reason


@pytest.mark.slow
def test_with_hip_52_on_the_host(tmp_path: Path) -> None:
    clang = shutil.which("clang++-15")
    if clang is None or not Path("/usr/include/hip/hip_runtime.h").is_file():
        pytest.skip("HIP 5.2 (clang++-15, /usr/include/hip) is not installed")
    t = _tree(tmp_path, (5, 2))
    compile_cmd = [
        clang,
        "--offload-arch=gfx90a",
        "--rocm-path=/usr",
        "--hip-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
        *FLAGS,
    ]

    def run(script: str) -> str:
        proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=600, check=False)
        return proc.stdout + proc.stderr

    _check(tmp_path, t, compile_cmd, run, "HIP 5.2")
    assert (Path(str(t["out"])) / simd.OUTPUT_NAME).is_file()
