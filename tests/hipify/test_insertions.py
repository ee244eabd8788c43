"""#include <hip/hip_runtime.h> where nvcc's implicit include was relied on (tools/hipify/insert.py and the tree
pass): which files get it, where it goes (guards, #pragma once, leading comments and defines, include order), and
that a second run adds nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tools.hipify import HipifyOptions, hipify_tree
from tools.hipify.insert import insertion_point, render

Write = Callable[[Path, dict[str, bytes | str]], None]
RUNTIME = render(None, b"hip/hip_runtime.h", False)
API = render(None, b"hip/hip_runtime_api.h", False)
OPTS = HipifyOptions(hip_version=(7, 2), jobs=1)
KERNEL = "__global__ void k(float* d) { d[threadIdx.x] = 0.f; }\n"


def run(tmp_path: Path, write: Write, files: dict[str, bytes | str], out: str = "out") -> dict[str, bytes]:
    write(tmp_path / "src", files)
    res = hipify_tree([tmp_path / "src"], tmp_path / out, OPTS)
    got = {p.name: p.read_bytes() for p in res.outputs.values() if p.is_file()}
    got["__notes__"] = "\n".join(f"{f.file.name}:{f.line}:{f.rule}" for f in res.findings if f.kind == "note").encode()
    return got


@pytest.mark.parametrize(
    ("source", "head"),
    [
        (KERNEL, b""),
        ("// licence\n// more\n\n" + KERNEL, b"// licence\n// more\n\n"),
        ("/* licence\n * x */\n#pragma once\n" + KERNEL, b"/* licence\n * x */\n#pragma once\n"),
        ("#ifndef K_CUH\n#define K_CUH\n" + KERNEL + "#endif\n", b"#ifndef K_CUH\n#define K_CUH\n"),
        ("#if !defined(K_CUH)\n#define K_CUH\n" + KERNEL + "#endif\n", b"#if !defined(K_CUH)\n#define K_CUH\n"),
        ("#define USE_FAST 1\n#include <stdio.h>\n" + KERNEL, b"#define USE_FAST 1\n"),  # the user's macro first
        ("#include <stdio.h>\n" + KERNEL, b""),  # before the first include
        ("#ifdef EXTRA\n#include <extra.h>\n#endif\n" + KERNEL, b""),  # not inside a conditional
        ("#ifndef NDEBUG\n#include <assert.h>\n#endif\n" + KERNEL, b""),  # an #ifndef that is no guard
    ],
)
def test_placement(tmp_path: Path, write: Write, source: str, head: bytes) -> None:
    out = run(tmp_path, write, {"k.cu": source})["k.hip"]
    assert out.startswith(head + RUNTIME), out
    assert out.count(b"#include <hip/hip_runtime.h>") == 1


def test_crlf_and_bom(tmp_path: Path, write: Write) -> None:
    src = b"\xef\xbb\xbf// c\r\n" + KERNEL.replace("\n", "\r\n").encode()
    out = run(tmp_path, write, {"k.cu": src})["k.hip"]
    assert out.startswith(b"\xef\xbb\xbf// c\r\n" + render(None, b"hip/hip_runtime.h", True))


def test_who_gets_it(tmp_path: Path, write: Write) -> None:
    out = run(
        tmp_path,
        write,
        {
            "has.cu": "#include <cuda_runtime.h>\n" + KERNEL,  # includes it (after translation)
            "host.cu": "void f(void* p) { (void)cudaFree(p); }\n",  # API names only: the API header
            "host.cpp": "void f(void* p) { (void)cudaFree(p); }\n",  # built by the host compiler: nothing implicit
            "api.cu": "#include <cuda_runtime_api.h>\nvoid f(void* p) { (void)cudaFree(p); }\n",  # has that
            "plain.cu": "int add(int a, int b) { return a + b; }  // cudaFree in a comment\n",
            "str.cu": 'const char* s = "__global__ threadIdx";\n',  # in a literal: not code
            "dev.cuh": "#pragma once\n__device__ inline float twice(float x) { return 2 * x; }\n",
            "user.cu": '#include "dev.cuh"\n' + KERNEL,  # dev.cuh gets the include: provides it
            "rt.h": "#pragma once\n#include <cuda_runtime.h>\n",
            "via.cu": '#include "rt.h"\n' + KERNEL,  # a project header includes it
            "deep.h": '#pragma once\n#include "rt.h"\n',
            "via2.cu": '#include "deep.h"\n' + KERNEL,  # transitively
        },
    )
    assert RUNTIME not in out["has.hip"] and out["has.hip"].startswith(b"#include <hip/hip_runtime.h>")
    # A .cu unit that uses CUDA gets the whole runtime first, as nvcc included it before anything else, also
    # when it includes only the API header, or a project header that includes the runtime (headers may test
    # for it: #ifdef __CUDA_RUNTIME_H__).
    assert out["host.hip"].startswith(RUNTIME)
    assert out["api.hip"].startswith(RUNTIME + b"#include <hip/hip_runtime_api.h>")
    for name in ("user.hip", "via.hip", "via2.hip"):
        assert out[name].startswith(RUNTIME), name
    assert out["host_hip.cpp"] == b"void f(void* p) { (void)hipFree(p); }\n"  # host compiler: nothing implicit
    assert out["plain.hip"] == b"int add(int a, int b) { return a + b; }  // cudaFree in a comment\n"
    assert out["str.hip"] == b'const char* s = "__global__ threadIdx";\n'
    assert (
        out["dev_hip.cuh"]
        == b"#pragma once\n" + RUNTIME + b"__device__ inline float twice(float x) { return 2 * x; }\n"
    )
    assert API not in out["rt_hip.h"] and RUNTIME not in out["rt_hip.h"]  # a header that includes it: nothing
    notes = out["__notes__"].decode().splitlines()
    assert sorted(n for n in notes if n.endswith("runtime-include")) == [
        "api.cu:1:runtime-include",
        "dev.cuh:2:runtime-include",
        "host.cu:1:runtime-include",
        "user.cu:1:runtime-include",
        "via.cu:1:runtime-include",
        "via2.cu:1:runtime-include",
    ]


def test_idempotent(tmp_path: Path, write: Write) -> None:
    files: dict[str, bytes | str] = {
        "a.cu": "// a\n#ifndef A\n#define A\n" + KERNEL + "#endif\n",
        "b.cuh": "#pragma once\n__device__ float f(float v) { return __shfl_sync(0xffffffff, v, 0); }\n",
        "c.cuh": "void g(cudaStream_t s) { cudaStreamSynchronize(s); }\n",
    }
    write(tmp_path / "src", files)
    first = tmp_path / "first"
    hipify_tree([tmp_path / "src"], first, HipifyOptions(hip_version=(6, 4), jobs=1))
    second = tmp_path / "second"
    res = hipify_tree([first], second, HipifyOptions(hip_version=(6, 4), jobs=1, naming="keep"))
    for p in first.iterdir():
        if p.is_file() and p.suffix != ".json":
            assert (second / p.name).read_bytes() == p.read_bytes(), p.name
    assert not [f for f in res.findings if f.kind == "note"]  # nothing left to do
    # and the incremental record: an unchanged input is not translated again, the output stays
    again = hipify_tree([tmp_path / "src"], first, HipifyOptions(hip_version=(6, 4), jobs=1))
    assert not again.written and {f.rule for f in again.findings} >= {"runtime-include", "warp-sync-define"}


def test_insertion_point_edges() -> None:
    assert insertion_point(b"") == 0
    assert insertion_point(b"// only a comment") == len(b"// only a comment")
    assert insertion_point(b"/* unterminated") == len(b"/* unterminated")
    assert insertion_point(b"/* a */ int x;\n") == 0  # code after the comment, on its line
    assert insertion_point(b"#define M(a) \\\n  (a)\nint x;\n") == len(b"#define M(a) \\\n  (a)\n")
    assert insertion_point(b"#pragma once\n#ifndef G\n#define G\nint x;\n") == len(
        b"#pragma once\n#ifndef G\n#define G\n"
    )
