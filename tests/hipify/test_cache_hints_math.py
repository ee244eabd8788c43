"""Two rules production CUDA (karpathy/llm.c) needs, checked by what the translation writes and by compiles:

- Cache-hint loads and stores (``__ldcs``, ``__stcs``, ... : the compat header's ``cache-hint`` family,
  tools/hipify/data/hipify_compat.h): HIP 5.2, 6.4 and 7.2 declare ``__ldcg/__ldca/__ldcs`` for ``__half``/``__half2``
  only. The header's templates are plain loads and stores, beside HIP's own overloads and a project's.
- ``#include <math.h>`` where CUDA's runtime header brought it: host code calling ``isfinite(x)`` & co. unqualified
  compiles with nvcc (cuda_runtime.h includes <math.h>), not with HIP-Clang (hip_runtime.h declares them for device
  code only).

The compiles run in the ROCm 6.4 and 7.2 roots (tests/_roots.py) and with HIP 5.2 (clang-15) on the host; the
translation without the added lines fails there, so the compile tests can fail."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from _roots import ROCM_ROOT_VERSIONS, host_hip52, require_root, run_in_root
from _trees import hipify_files as _hipify

from tools.hipify import insert, simd
from tools.hipify.targets import load_target

CLANG = {"6.4": "clang++-21", "7.2": "clang++-22"}
FLAGS = ["-x", "hip", "-std=c++17", "-Wall", "-Wextra", "-Werror"]
HIP52 = [
    "clang++-15",
    "--offload-arch=gfx90a",
    "--rocm-path=/usr",
    "--hip-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
]
MATH_LINE = "#include <math.h>  // [hipify]"


# -- <math.h>: which files get it ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "uses"),
    [
        ("int f(float x) { return isfinite(x); }", True),
        ("int f(float x) { return isnan (x) || isinf(x) || signbit(x) || isnormal(x); }", True),
        ("int f(float x) { return fpclassify(x) == FP_NAN; }", True),
        ("int f(float x) { return isgreaterequal(x, 1.f) + islessgreater(x, 2.f) + isunordered(x, x); }", True),
        ("int f(float x) { return ::isnan(x); }", True),  # the global one: device-only in HIP too
        ("int f(float x) { return std::isfinite(x) + std :: isnan(x); }", False),
        ("int f(V v) { return v.isnan() + p->isinf(); }", False),
        ("int f(float x) { return my_isnan(x) + isnan_fast(x); }", False),
        ('// isfinite(x)\nconst char* s = "isnan(x)";', False),
        ("bool isnan_ = true; int isfinite;", False),
    ],
)
def test_what_counts_as_a_call(text: str, uses: bool) -> None:
    data = text.encode()
    spans = [(m.start(), m.end()) for m in re.finditer(rb'//[^\n]*|"[^"]*"', data)]
    rows = load_target((6, 4)).runtime_includes
    math = next(i for i, row in enumerate(rows) if row.header == b"math.h")
    assert bool(insert.runtime_include_uses(data, spans, rows, 0) & insert.uses_include(math)) is uses


HOST_MATH = "int finite_count(const float* v, int n) { int k = 0; for (int i = 0; i < n; ++i) k += isfinite(v[i]); return k; }\n"


def test_math_h_where_the_runtime_is_and_they_are_called(tmp_path: Path) -> None:
    res, out = _hipify(
        tmp_path,
        {
            # a unit nvcc gave cuda_runtime.h implicitly
            "unit.cu": "__global__ void k() {}\n" + HOST_MATH,
            # a header that includes the runtime itself (llm.c's dev/cuda/common.h)
            "common.h": "#include <cuda_runtime.h>\n#include <stdlib.h>\n" + HOST_MATH,
            # a header that relies on its includer's runtime: the includer gets <math.h>, the header stays as it is
            "bare.h": "#pragma once\ninline int bare(float x) { return isnan(x); }\n",
            "via.cu": '#include "bare.h"\n__global__ void k2() {}\n',
            # not these: includes <math.h> itself; std::isfinite; no runtime (a host compiler's file)
            "own.cu": "#include <math.h>\n__global__ void k3() {}\n" + HOST_MATH,
            "std.cu": "#include <cmath>\n__global__ void k4() {}\nint g(float x) { return std::isfinite(x); }\n",
            "host.cpp": HOST_MATH,
            "comment.cu": "__global__ void k5() {}\n// isfinite(x) is what we do not call\n",
        },
    )
    assert res.blocking == 0
    text = {p.name: p.read_text() for p in out.rglob("*") if p.is_file() and not p.name.startswith(".")}
    for name in ("unit.hip", "common_hip.h", "via.hip"):
        assert text[name].count(MATH_LINE) == 1, (name, text[name])
    for name in ("own.hip", "std.hip", "host.cpp", "comment.hip", "bare.h"):
        assert MATH_LINE not in text[name], name
    assert text["bare.h"] == (tmp_path / "src" / "bare.h").read_text()  # untouched, not renamed
    # after the runtime include the translation adds (the order does not matter to HIP-Clang; this reads as nvcc's)
    lines = text["unit.hip"].splitlines()
    assert lines[lines.index(next(x for x in lines if x.startswith(MATH_LINE))) - 1].startswith(
        "#include <hip/hip_runtime.h>"
    )
    again, _out = _hipify(tmp_path, {})  # a second run adds nothing more
    assert again.blocking == 0 and (out / "unit.hip").read_text().count(MATH_LINE) == 1


# -- cache hints: what the translation provides ---------------------------------------------------------------------
HINTS = """#include <cuda_runtime.h>
#include <cuda_fp16.h>
__global__ void copy(const int4* a, int4* b, const float* f, float* g, const __half* h, __half* hh) {
  __stcs(b, __ldcs(a));
  g[0] = __ldcg(f) + __ldca(f + 1) + __ldlu(f + 2) + __ldcv(f + 3);
  __stwb(g + 1, 1.0);  // a double: converted to float, as CUDA's overload for float does
  __stcg(g + 2, __ldcs(f));
  __stwt(hh, __ldcs(h));  // HIP's own __half overload is chosen before the template
}
"""
OWN_OVERLOAD = """typedef unsigned short word_t;
struct floatX { unsigned short bits; };
__device__ floatX __ldcs(const floatX* address) { return floatX{__ldcs(reinterpret_cast<const word_t*>(address))}; }
__device__ void __stcs(floatX* address, floatX value) { __stcs(reinterpret_cast<word_t*>(address), value.bits); }
__global__ void own(const floatX* x, floatX* y) { __stcs(y, __ldcs(x)); }
"""


def test_cache_hints_are_provided_beside_a_projects_own_overloads(tmp_path: Path) -> None:
    res, out = _hipify(
        tmp_path, {"hints.cu": HINTS, "llmc/common.h": OWN_OVERLOAD, "use.cu": '#include "llmc/common.h"\n'}
    )
    header = (out / simd.OUTPUT_NAME).read_text()
    provided = set(re.findall(r"@begin (\w+)", header))
    assert provided == {"__ldcs", "__ldcg", "__ldca", "__ldlu", "__ldcv", "__stcs", "__stwb", "__stcg", "__stwt"}
    assert "template <typename T>" in header and "__v" not in "".join(re.findall(r"@begin (\w+)", header))
    assert '#include "../hipify_compat.h"' in (out / "llmc" / "common_hip.h").read_text()
    found = [f for f in res.findings if f.rule == "cache-hint"]
    assert found and not any(f.blocking for f in found) and res.blocking == 0
    assert all("Load Functions Using Cache Hints" in f.reason and simd.OUTPUT_NAME in f.reason for f in found)
    # the overloads' own lines are no uses (the calls inside them are)
    own_lines = {f.line for f in found if f.file.name == "common.h"}
    assert own_lines == {3, 4, 5}


def test_a_projects_own_template_is_the_same_function(tmp_path: Path) -> None:
    own = "template <typename T>\n__device__ __forceinline__ T __ldcs(const T* p) { return *p; }\n"
    res, out = _hipify(tmp_path, {"vendor.h": own, "k.cu": '#include "vendor.h"\n' + HINTS})
    provided = set(re.findall(r"@begin (\w+)", (out / simd.OUTPUT_NAME).read_text()))
    assert "__ldcs" not in provided and "__stcs" in provided
    assert not any(f.name == "__ldcs" for f in res.findings if f.rule == "cache-hint")


def test_without_the_header_the_hints_block_with_the_fix(tmp_path: Path) -> None:
    res, _out = _hipify(tmp_path, {simd.OUTPUT_NAME: "// the project's own\n", "k.cu": HINTS})
    found = [f for f in res.findings if f.rule == "cache-hint"]
    assert found and all(f.blocking and f.kind == "unsupported" for f in found)
    assert "plain load or store" in found[0].suggestion and "__half and __half2 only" in found[0].reason


# -- compiles ----------------------------------------------------------------------------------------------------
def _sources(bf16: bool) -> dict[str, str]:
    """A CUDA tree like llm.c's: kernels with cache hints on vector, float, __half (and bf16) types beside a project
    overload, host code calling isfinite & co.; and a host program (no kernels: it runs without a GPU) that loads and
    stores through the header's functions and checks the values."""
    bf16_include = "#include <cuda_bf16.h>\n" if bf16 else ""
    bf16_kernel = "__global__ void bf(const __nv_bfloat16* a, __nv_bfloat16* b) { __stcs(b, __ldcs(a)); }\n"
    bf16_host = (
        "  __nv_bfloat16 bh = __float2bfloat16(3.5f), bo; __stcs(&bo, __ldcs(&bh));\n"
        '  if (__bfloat162float(bo) != 3.5f) { printf("bf16\\n"); return 1; }\n'
    )
    host = (
        "#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n" + bf16_include + "#include <stdio.h>\n"
        "struct floatX { unsigned short bits; };\n"
        "floatX __ldcs(const floatX* p) { floatX r = *p; r.bits |= 1; return r; }  // the project's own overload\n"
        "int main() {\n"
        "  int4 a = make_int4(1, -2, 3, 2147483647), b; __stcs(&b, __ldcs(&a));\n"
        '  if (b.x != 1 || b.y != -2 || b.z != 3 || b.w != 2147483647) { printf("int4\\n"); return 1; }\n'
        "  float4 f = make_float4(1.5f, -0.0f, 1e30f, 7.f), g; __stwt(&g, __ldcg(&f));\n"
        '  if (g.x != 1.5f || g.z != 1e30f || g.w != 7.f) { printf("float4\\n"); return 1; }\n'
        "  double d = 0; __stwb(&d, 2.25f); long long l = 0; __stcg(&l, __ldlu(&a.w));\n"
        '  if (d != 2.25 || l != 2147483647 || __ldcv(&d) != 2.25 || __ldca(&l) != l) { printf("scalar\\n"); return 1; }\n'
        "  __half h = __float2half(2.5f), ho; __stcs(&ho, __ldcs(&h));\n"
        '  if (__half2float(ho) != 2.5f) { printf("half\\n"); return 1; }\n'
        + (bf16_host if bf16 else "")
        + '  floatX x = {4}; if (__ldcs(&x).bits != 5) { printf("overload\\n"); return 1; }\n'
        '  printf("ok %d\\n", isfinite(g.x) + isnan(g.y) + signbit(g.y) + isless(g.x, g.w));\n'
        "  return 0;\n}\n"
    )
    kernels = HINTS + (bf16_include + bf16_kernel if bf16 else "") + HOST_MATH
    return {
        "kernels.cu": kernels,
        "llmc/common.h": OWN_OVERLOAD,
        "own.cu": '#include "llmc/common.h"\n',
        "host.cu": host,
    }


def _script(tmp_path: Path, compiler: list[str], version: tuple[int, int], bf16: bool) -> tuple[str, Path]:
    res, out = _hipify(tmp_path, _sources(bf16), version)
    assert res.blocking == 0, [f.to_json() for f in res.findings if f.blocking]
    naive = tmp_path / "naive"  # the translation without the two rules: what HIP itself offers
    naive.mkdir()
    for name in ("kernels.hip", "host.hip"):
        text = re.sub(
            r'#include "hipify_compat.h"[^\n]*\n|#include <math.h>  // \[hipify\][^\n]*\n', "", (out / name).read_text()
        )
        (naive / name).write_text(text)
    units = {
        "kernels": [*compiler, *FLAGS, "-c", "-o", "/dev/null", str(out / "kernels.hip")],
        "own": [*compiler, *FLAGS, "-c", "-o", "/dev/null", str(out / "own.hip")],
        "host": [*compiler, *FLAGS, "--cuda-host-only", "-o", str(out / "host"), str(out / "host.hip")],
        "naive_kernels": [*compiler, *FLAGS, "-c", "-o", "/dev/null", str(naive / "kernels.hip")],
        "naive_host": [*compiler, *FLAGS, "--cuda-host-only", "-fsyntax-only", str(naive / "host.hip")],
    }
    script = "".join(f"echo '@@ {n} start'; {shlex.join(c)} 2>&1; echo '@@ {n} rc='$?; " for n, c in units.items())
    script += f"{shlex.quote(str(out / 'host'))}; echo '@@ run rc='$?; "
    return script, out


def _check(log: str, label: str) -> None:
    rc = dict(re.findall(r"^@@ (\w+) rc=(\d+)$", log, re.M))
    assert set(rc) == {"kernels", "own", "host", "naive_kernels", "naive_host", "run"}, log[-4000:]
    for ok in ("kernels", "own", "host", "run"):
        assert rc[ok] == "0", f"{label}: {ok} failed:\n{log[-6000:]}"
    assert re.search(r"^ok 3$", log, re.M), log[-2000:]
    # without the header and <math.h>, HIP's own declarations do not do
    assert rc["naive_kernels"] != "0" and rc["naive_host"] != "0", log[-4000:]
    assert re.search(r"no matching function for call to '__ldcs'|use of undeclared identifier '__stcs'", log), log
    assert "call to __device__ function from __host__ function" in log and "'isfinite'" in log, log[-4000:]


@pytest.mark.slow
@pytest.mark.parametrize("version", ROCM_ROOT_VERSIONS)
def test_in_the_roots(tmp_path: Path, version: str) -> None:
    require_root(version)
    script, _out = _script(
        tmp_path, [CLANG[version], "--offload-arch=gfx942"], (int(version[0]), int(version[2])), True
    )
    proc = run_in_root(version, ["bash", "-c", script], binds=[tmp_path], timeout=600)
    _check(proc.stdout + proc.stderr, f"HIP {version}")


@pytest.mark.slow
def test_with_hip_52_on_the_host(tmp_path: Path) -> None:
    if not host_hip52():
        pytest.skip("HIP 5.2 (clang++-15, /usr/include/hip) is not installed")
    script, _out = _script(tmp_path, HIP52, (5, 2), False)  # (HIP 5.2 has no <hip/hip_bf16.h>)
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=600, check=False)
    _check(proc.stdout + proc.stderr, "HIP 5.2")
