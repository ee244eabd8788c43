"""The C/C++ headers CUDA's runtime header includes that the target's hip_runtime.h does not make usable in host code
(data/targets.tsv ``runtime-include`` rows: ``<math.h>`` for every HIP, ``<string.h>`` and ``<assert.h>`` from HIP
7.0): what the loader gives per target, which uses count, where the translation includes them, and compiles.

The rows are checked against the compilers (``test_the_rows_are_what_the_compilers_say``, the probe the rows'
sources name): in the ROCm 6.4 and 7.2 roots and with HIP 5.2 on the host, a host function calling each name of each
row with only ``#include <hip/hip_runtime.h>`` fails exactly where the row applies, and compiles with the row's
header (and with each other header the row says provides it). The end-to-end compile translates a tree like
llm.c's for each target and compiles it with -Werror; the translation without the added lines fails on HIP 7.2."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from _roots import ROCM_ROOT_VERSIONS, host_hip52, require_root, run_in_root
from _trees import hipify_files as _hipify

from tools.errors import ToolError
from tools.hipify import insert
from tools.hipify.mapping import Version
from tools.hipify.targets import load_target, read_rows

CLANG = {"6.4": ["clang++-21", "--offload-arch=gfx942"], "7.2": ["clang++-22", "--offload-arch=gfx942"]}
HIP52 = [
    "clang++-15",
    "--offload-arch=gfx90a",
    "--rocm-path=/usr",
    "--hip-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
]
FLAGS = ["-x", "hip", "-std=c++17", "-Wall", "-Wextra", "-Werror"]
ADDED = re.compile(r"^#include <([\w./]+)>  // \[hipify\] CUDA's runtime header includes it[^\n]*\n", re.M)


def _headers(version: Version | None) -> list[str]:
    return [row.header.decode() for row in load_target(version).runtime_includes]


# -- the rows, by target ------------------------------------------------------------------------------------------
def test_the_rows_follow_the_target() -> None:
    assert _headers((5, 2)) == _headers((6, 4)) == ["math.h"]
    assert _headers((7, 2)) == _headers(None) == ["math.h", "string.h", "assert.h"]
    string_h = load_target((7, 2)).runtime_includes[1]
    assert string_h.provided_by == {b"string.h", b"cstring"} and b"memset" in string_h.name_set
    math_h = load_target((7, 2)).runtime_includes[0]
    assert math_h.provided_by == {b"math.h"}  # <cmath> declares std::isfinite only: it does not provide them
    assert b"isless" in math_h.needles and b"islessequal" not in math_h.needles  # (found by isless's scan)
    assert string_h.needles == (b"mem", b"str")  # a scan per group of names sharing their first three letters
    for row in load_target(None).runtime_includes:
        assert all(any(n.startswith(x) for x in row.needles) for n in row.names) and len(row.needles) <= len(row.names)


def test_every_row_names_its_cuda_line_and_probe() -> None:
    rows = [r for r in read_rows() if r[0] == "runtime-include"]
    assert {r[1] for r in rows} == {"math.h", "string.h", "assert.h"}
    text = (Path(__file__).resolve().parents[2] / "tools/hipify/data/targets.tsv").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.startswith("runtime-include\t"):
            source = line.split("\t")[5]
            assert re.search(r"CUDA 13 crt/\w+\.h:\d+ #include <", source) and "probe" in source, line


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("string.h", ""),
        ("string.h", "<cstring>"),
        ("string.h", "memset <cstring> 9lives"),
        ("string.h", "mem-set"),
        ("strïng.h", "memset"),
        ("", "memset"),
    ],
)
def test_bad_rows_are_user_errors(tmp_path: Path, header: str, value: str) -> None:
    bad = tmp_path / "targets.tsv"
    row = f"runtime-include\t{header}\t7.0\t\t{value}\ts\n"
    bad.write_text("rule\tkey\thip_from\thip_before\tvalue\tsource\n" + row, encoding="utf-8")
    with pytest.raises(ToolError, match=r"bad (runtime-include )?row"):
        load_target((7, 2), bad)


# -- what counts as a use -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("void f(char* p) { memset(p, 0, 4); }", {"string.h"}),
        ("void f(char* p) { ::memcpy (p, p + 1, 1); }", {"string.h"}),  # the global one
        ("int f(const char* s) { return strlen(s) + strcmp(s, s); }", {"string.h"}),
        ("int f(int n) { assert(n > 0); return isnan(1.f); }", {"assert.h", "math.h"}),
        ("void f(char* p) { std::memset(p, 0, 4); std :: strlen(p); }", set()),  # <cstring>'s: the file includes it
        ("void f(char* p) { cudaMemset(p, 0, 4); my_memset(p); memset_fast(p); v.memset(p); q->memcpy(p); }", set()),
        ('static_assert(sizeof(int) == 4, "int"); void f() { CHECK_ASSERT(1); }', set()),
        ('// memset(p, 0, 4)\nconst char* s = "assert(x)"; /* strlen(s) */', set()),
        ("int memset; bool strlen_ok = true;", set()),  # not called
    ],
)
def test_what_counts_as_a_use(text: str, want: set[str]) -> None:
    data = text.encode()
    spans = [(m.start(), m.end()) for m in re.finditer(rb'//[^\n]*|/\*.*?\*/|"[^"]*"', data, re.S)]
    rows = load_target((7, 2)).runtime_includes
    bits = insert.runtime_include_uses(data, spans, rows, 0)
    assert {row.header.decode() for i, row in enumerate(rows) if bits & insert.uses_include(i)} == want


def test_an_included_header_is_not_looked_for() -> None:
    rows = load_target((7, 2)).runtime_includes
    data = b"void f(char* p, int n) { memset(p, 0, n); assert(n); }"
    has = insert.has_include(1) | insert.has_include(2)
    assert insert.runtime_include_uses(data, [], rows, has) == 0


# -- where the translation includes them --------------------------------------------------------------------------
HOST = "void zero(float* a, int n) { memset(a, 0, n * sizeof(float)); assert(n > 0); }\n"
TREE = {
    # a header that includes the runtime itself (llm.c's dev/cuda/common.h:251)
    "common.h": "#pragma once\n#include <cuda_runtime.h>\n#include <stdlib.h>\n#include <stdio.h>\n" + HOST,
    # a unit nvcc gave cuda_runtime.h implicitly, with its own <cstring>: only <assert.h> is missing
    "own.cu": "#include <cstring>\n__global__ void k() {}\n" + HOST,
    # a header without the runtime that relies on its includer's: the includer gets the lines
    "bare.h": "#pragma once\ninline void clear(char* p) { memcpy(p, p + 1, 1); }\n",
    "via.cu": '#include "bare.h"\n__global__ void k2() {}\n',
    # no runtime: a host compiler's file, which includes what it uses itself
    "host.cpp": "#include <string.h>\n#include <assert.h>\n" + HOST,
    # std::memset (the file's own <cstring>), assert in a comment
    "std.cu": "#include <cstring>\n__global__ void k3() {}\nvoid f(char* p) { std::memset(p, 0, 1); }  // assert(p)\n",
    # the headers through a project header that includes them: nothing (nor for a header without the runtime that
    # has them so)
    "strings.h": "#pragma once\n#include <string.h>\n#include <cassert>\n",
    "through.cu": '#include "strings.h"\n__global__ void k4() {}\n' + HOST,
    "helper.h": '#pragma once\n#include "strings.h"\ninline void fill(char* p) { memset(p, 1, 1); assert(p); }\n',
    "helped.cu": '#include "helper.h"\n__global__ void k5() {}\n',
}


def _added(text: str) -> list[str]:
    return ADDED.findall(text)


@pytest.mark.parametrize(
    ("version", "want"),
    [
        ((7, 2), {"common_hip.h": ["string.h", "assert.h"], "own.hip": ["assert.h"], "via.hip": ["string.h"]}),
        ((6, 4), {}),
        ((5, 2), {}),
    ],
)
def test_where_they_are_included(tmp_path: Path, version: Version, want: dict[str, list[str]]) -> None:
    res, out = _hipify(tmp_path, TREE, version)
    assert res.blocking == 0, [f.to_json() for f in res.findings if f.blocking]
    text = {p.name: p.read_text() for p in out.rglob("*") if p.is_file() and not p.name.startswith(".")}
    got = {name: _added(body) for name, body in text.items() if _added(body)}
    assert got == want
    for name in ("bare.h", "host.cpp", "strings.h", "helper.h"):
        assert text[name] == TREE[name], name  # untouched
    if want:
        # with the runtime include's lines: after the one the translation adds, as nvcc's came first
        lines = text["via.hip"].splitlines()
        assert lines[0].startswith("#include <hip/hip_runtime.h>") and lines[1].startswith("#include <string.h>")
        # a header with its own runtime include: at the insertion point (after #pragma once)
        assert text["common_hip.h"].splitlines()[1].startswith("#include <string.h>  // [hipify]")
        assert "declare memset, memcpy, ... for host code" in text["common_hip.h"]
    again, _out = _hipify(tmp_path, {}, version)  # a second run adds nothing more
    assert again.blocking == 0
    assert {p.name: _added(p.read_text()) for p in out.rglob("*.h*") if _added(p.read_text())} == want


def test_inside_the_guard_of_a_header_whose_cuda_code_is_guarded(tmp_path: Path) -> None:
    guarded = (
        "#ifndef API_H\n#define API_H\nint api_version(void);\n#ifdef __CUDACC__\n"
        "__device__ inline void dclear(char* p) { memset(p, 0, 1); }\n"
        "inline void hclear(char* p) { memset(p, 0, 1); }\n#endif\n#endif\n"
    )
    res, out = _hipify(tmp_path, {"api.h": guarded}, (7, 2))
    assert res.blocking == 0
    lines = (out / "api.h").read_text().splitlines()  # (not renamed: a host compiler reads the same)
    at = lines.index("#ifdef __HIPCC__")
    assert lines[at + 1].startswith("#include <hip/hip_runtime.h>") and lines[at + 2].startswith("#include <string.h>")


# -- compiles -----------------------------------------------------------------------------------------------------
# A call of each name of the rows, in a host function (the probe the rows' sources name). A row with a name that has
# no call here fails the test: a new name is probed before it is trusted.
CALLS = {
    "isfinite": "(void)isfinite(1.f);",
    "isnan": "(void)isnan(1.f);",
    "isinf": "(void)isinf(1.f);",
    "isnormal": "(void)isnormal(1.f);",
    "signbit": "(void)signbit(1.f);",
    "fpclassify": "(void)fpclassify(1.f);",
    "isgreater": "(void)isgreater(1.f, 2.f);",
    "isgreaterequal": "(void)isgreaterequal(1.f, 2.f);",
    "isless": "(void)isless(1.f, 2.f);",
    "islessequal": "(void)islessequal(1.f, 2.f);",
    "islessgreater": "(void)islessgreater(1.f, 2.f);",
    "isunordered": "(void)isunordered(1.f, 2.f);",
    "memset": "char b[4]; memset(b, 0, 4);",
    "memcpy": "char a[4] = {}, b[4]; memcpy(b, a, 4);",
    "memmove": "char b[4] = {}; memmove(b, b + 1, 2);",
    "memcmp": "char a[4] = {}; (void)memcmp(a, a, 4);",
    "memchr": "char a[4] = {}; (void)memchr(a, 1, 4);",
    "strlen": 'char s[2] = "x"; (void)strlen(s);',
    "strcmp": '(void)strcmp("a", "b");',
    "strncmp": '(void)strncmp("a", "b", 1);',
    "strcpy": 'char b[4]; strcpy(b, "x");',
    "strncpy": 'char b[4]; strncpy(b, "x", 4);',
    "strcat": 'char b[4] = {}; strcat(b, "x");',
    "strncat": 'char b[4] = {}; strncat(b, "x", 1);',
    "strchr": "(void)strchr(\"ab\", 'a');",
    "strrchr": "(void)strrchr(\"ab\", 'a');",
    "strstr": '(void)strstr("ab", "a");',
    "strspn": '(void)strspn("ab", "a");',
    "strcspn": '(void)strcspn("ab", "a");',
    "strpbrk": '(void)strpbrk("ab", "a");',
    "strerror": "(void)strerror(1);",
    "strtok": 'char b[4] = {}; (void)strtok(b, ",");',
    "strdup": 'char* s = strdup("x"); (void)s;',
    "assert": "assert(1 == 1);",
}


def _probe(tmp_path: Path, compiler: list[str]) -> tuple[str, dict[int, tuple[str, str]]]:
    """Files in ``tmp_path``: ``bare.hip`` (only the runtime, and a host function per name of every row: its line
    -> (header, name)); ``with_0.hip`` (every row's header first), ``with_<n>.hip`` (one of the other headers the
    rows say provide their names). Returns the shell lines that compile them (``@@ stem rc=N`` after each)."""
    rows = load_target(None).runtime_includes
    missing = {n.decode() for row in rows for n in row.names} - set(CALLS)
    assert not missing, f"probe these names first (a call in CALLS): {sorted(missing)}"
    lines = ["#include <hip/hip_runtime.h>", "__global__ void k() {}"]
    where: dict[int, tuple[str, str]] = {}
    for row in rows:
        for name in row.names:
            lines.append(f"void use_{name.decode()}() {{ {CALLS[name.decode()]} }}")
            where[len(lines)] = (row.header.decode(), name.decode())
    body = "\n".join(lines) + "\n"
    (tmp_path / "bare.hip").write_text(body)
    others = sorted({s.decode() for row in rows for s in row.provided_by - {row.header}})
    for n, chosen in enumerate([[row.header.decode() for row in rows], *([s] for s in others)]):
        (tmp_path / f"with_{n}.hip").write_text("".join(f"#include <{h}>\n" for h in chosen) + body)
    script = ""
    for path in sorted(tmp_path.glob("*.hip")):
        # each pass alone: the driver skips the device pass after a failed host pass, and a host function calling
        # assert fails only in the device pass (HIP 7.2 declares it for the host pass only)
        for one in ("host", "device"):
            argv = [*compiler, *FLAGS, f"--cuda-{one}-only", "-fsyntax-only", "-ferror-limit=0", str(path)]
            script += f"{shlex.join(argv)} 2>&1; echo '@@ {path.stem}_{one} rc='$?; "
    return script, where


def _check_rows(log: str, tmp_path: Path, where: dict[int, tuple[str, str]], version: Version, label: str) -> None:
    rc = dict(re.findall(r"^@@ (\w+) rc=(\d+)$", log, re.M))
    assert {"bare_host", "bare_device", "with_0_host", "with_0_device"} <= set(rc), log[-3000:]
    applies = set(_headers(version))

    def failed(name: str, offset: int) -> set[tuple[str, str]]:
        found = {int(n) - offset for n in re.findall(rf"/{re.escape(name)}:(\d+):\d+: error:", log)}
        assert found <= set(where), f"{label}: {name}: errors outside the probes:\n{log[-4000:]}"
        return {where[n] for n in found}

    # with only the runtime, every name of every row that applies fails, and no name of another row
    want = {hn for hn in where.values() if hn[0] in applies}
    got = failed("bare.hip", 0)
    assert got == want, f"{label}: failed unexpectedly {sorted(got - want)}; compiled {sorted(want - got)}"
    assert rc["with_0_host"] == rc["with_0_device"] == "0", f"{label}: with every row's header:\n{log[-4000:]}"
    for path in sorted(tmp_path.glob("with_*.hip")):
        chosen = re.findall(r"^#include <([\w./]+)>$", path.read_text(), re.M)[:-1]  # (the last: the runtime)
        if len(chosen) == 1:  # another header that provides a row's names: they compile with it alone
            (row,) = [
                r.header.decode() for r in load_target(None).runtime_includes if chosen[0].encode() in r.provided_by
            ]
            assert not {hn for hn in failed(path.name, 1) if hn[0] == row}, f"{label}: <{chosen[0]}>:\n{log[-4000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("version", ROCM_ROOT_VERSIONS)
def test_the_rows_are_what_the_compilers_say(tmp_path: Path, version: str) -> None:
    require_root(version)
    script, where = _probe(tmp_path, CLANG[version])
    proc = run_in_root(version, ["bash", "-c", script], binds=[tmp_path], timeout=600)
    _check_rows(proc.stdout + proc.stderr, tmp_path, where, (int(version[0]), int(version[2])), f"HIP {version}")


def _hip52() -> None:
    if not host_hip52():
        pytest.skip("HIP 5.2 (clang++-15, /usr/include/hip) is not installed")


@pytest.mark.slow
def test_the_rows_are_what_hip_52_says(tmp_path: Path) -> None:
    _hip52()
    script, where = _probe(tmp_path, HIP52)
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=600, check=False)
    _check_rows(proc.stdout + proc.stderr, tmp_path, where, (5, 2), "HIP 5.2")


# A tree like llm.c's: dev/cuda/common.h includes cuda_runtime.h, stdlib and stdio, never string.h, and zeroes a host
# buffer with memset; a unit includes it, checks with assert and isfinite in host code; a kernel uses memcpy in
# device code (HIP's __device__ one: the added <string.h> must not disturb it).
LLMC = {
    "dev/cuda/common.h": (
        "#pragma once\n#include <cuda_runtime.h>\n#include <stdlib.h>\n#include <stdio.h>\n#include <float.h>\n"
        "inline float* make_zeros_float(size_t N) {\n"
        "  float* arr = (float*)malloc(N * sizeof(float));\n  memset(arr, 0, N * sizeof(float));\n  return arr;\n}\n"
    ),
    "dev/cuda/kernel.cu": (
        '#include "common.h"\n'
        "__global__ void copy4(const float* in, float* out) {\n"
        "  float v[4]; memcpy(v, in + 4 * threadIdx.x, sizeof v); memcpy(out + 4 * threadIdx.x, v, sizeof v);\n}\n"
        "int check(size_t n) {\n  float* z = make_zeros_float(n);\n  assert(z != NULL);\n"
        '  int ok = isfinite(z[0]) && strlen("ok") == 2;\n  free(z);\n  return ok;\n}\n'
    ),
}


def _llmc_script(tmp_path: Path, compiler: list[str], version: Version) -> tuple[str, Path]:
    res, out = _hipify(tmp_path, LLMC, version)
    assert res.blocking == 0, [f.to_json() for f in res.findings if f.blocking]
    naive = tmp_path / "naive"  # the same translation without the added runtime includes
    for p in out.rglob("*"):
        if p.is_file() and p.suffix in (".hip", ".h"):
            target = naive / p.relative_to(out)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(ADDED.sub("", p.read_text()))
    unit = Path("dev/hip/kernel.hip")  # (the directory named cuda is renamed too)
    units = {
        "ported": [*compiler, *FLAGS, "-c", "-o", "/dev/null", str(out / unit)],
        "naive": [*compiler, *FLAGS, "-c", "-o", "/dev/null", str(naive / unit)],
    }
    script = "".join(f"echo '@@ {n} start'; {shlex.join(c)} 2>&1; echo '@@ {n} rc='$?; " for n, c in units.items())
    return script, out


def _check_llmc(log: str, version: Version, label: str) -> None:
    rc = dict(re.findall(r"^@@ (\w+) rc=(\d+)$", log, re.M))
    assert rc.get("ported") == "0", f"{label}: the translation fails:\n{log[-6000:]}"
    assert rc.get("naive") != "0", f"{label}: without the added includes it compiles too:\n{log[-3000:]}"
    assert "'isfinite'" in log  # <math.h>: every target
    if "string.h" in _headers(version):
        assert "no matching function for call to 'memset'" in log, log[-4000:]
        assert "use of undeclared identifier 'strlen'" in log and "undeclared identifier 'assert'" in log, log[-4000:]


@pytest.mark.slow
@pytest.mark.parametrize("version", ROCM_ROOT_VERSIONS)
def test_a_tree_like_llmc_compiles_in_the_roots(tmp_path: Path, version: str) -> None:
    require_root(version)
    v = (int(version[0]), int(version[2]))
    script, _out = _llmc_script(tmp_path, CLANG[version], v)
    proc = run_in_root(version, ["bash", "-c", script], binds=[tmp_path], timeout=600)
    _check_llmc(proc.stdout + proc.stderr, v, f"HIP {version}")


@pytest.mark.slow
def test_a_tree_like_llmc_compiles_with_hip_52(tmp_path: Path) -> None:
    _hip52()
    script, _out = _llmc_script(tmp_path, HIP52, (5, 2))
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=600, check=False)
    _check_llmc(proc.stdout + proc.stderr, (5, 2), "HIP 5.2")
