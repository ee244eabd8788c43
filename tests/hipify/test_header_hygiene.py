"""Header hygiene (class 7): the runtime include goes inside the guard that holds a header's CUDA code, so a header
that was valid C (or C++ without CUDA) stays valid; checked by compiling the translated header as C11 with the host
compiler here (and as C++ and HIP in the ROCm roots: test_report_compile.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tools.hipify import HipifyOptions, hipify_tree

# a public C header of a library with a CUDA backend: its CUDA parts only for CUDA compilers
PUBLIC_C = """/* mylib.h: the C API */
#ifndef MYLIB_H
#define MYLIB_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
int mylib_sum(const int* v, size_t n);
#ifdef __CUDACC__
void mylib_sum_async(const int* v, size_t n, cudaStream_t stream);
__host__ __device__ inline int mylib_twice(int x) { return 2 * x; }
#endif
#ifdef __cplusplus
}
#endif
#endif
"""

# the same with its CUDA code in two guarded places
TWO_GUARDS = """#ifndef TWO_H
#define TWO_H
#if defined(__CUDACC__)
void two_a(cudaStream_t s);
#endif
int two_cpu(void);
#if defined(__CUDACC__) || defined(__CUDA_ARCH__)
__device__ int two_b(void);
#endif
#endif
"""

OPEN = "#ifndef O_H\n#define O_H\nvoid o(cudaStream_t s);\n#endif\n"  # CUDA code not guarded: not valid C anyway


def translate(tmp_path: Path, name: str, text: str) -> bytes:
    (tmp_path / "src").mkdir(parents=True, exist_ok=True)
    (tmp_path / "src" / name).write_text(text)
    res = hipify_tree([tmp_path / "src"], tmp_path / "out", HipifyOptions(hip_version=(6, 4), jobs=1))
    (out,) = res.outputs.values()
    return out.read_bytes()


CPP_HEADER = "#pragma once\nint cpu_only();\n#ifdef __CUDACC__\n__device__ int dev_only();\n#endif\n"


def test_the_include_goes_inside_the_guard(tmp_path: Path) -> None:
    out = translate(tmp_path, "dev.h", CPP_HEADER).decode()
    lines = out.splitlines()
    assert lines[2] == "#ifdef __HIPCC__" and lines[3].startswith("#include <hip/hip_runtime.h>")
    assert out.count("hip/hip_runtime.h") == 1


def test_never_inside_extern_c(tmp_path: Path) -> None:
    """A C header's CUDA code inside its extern "C" block: the include (C++ templates) goes at the top, guarded."""
    out = translate(tmp_path, "mylib.h", PUBLIC_C).decode()
    lines = out.splitlines()
    top = lines.index("#ifdef __HIPCC__  // [hipify] this file's CUDA code is for CUDA/HIP compilers only")
    assert lines[top - 1] == "#define MYLIB_H" and lines[top + 1].startswith("#include <hip/hip_runtime.h>")
    assert out.count("hip/hip_runtime.h") == 1


def test_several_guarded_places_get_a_guard_of_their_own(tmp_path: Path) -> None:
    out = translate(tmp_path, "two.h", TWO_GUARDS).decode()
    lines = out.splitlines()
    top = lines.index("#ifdef __HIPCC__  // [hipify] this file's CUDA code is for CUDA/HIP compilers only")
    assert lines[top - 1] == "#define TWO_H" and lines[top + 1].startswith("#include <hip/hip_runtime.h>")
    assert lines[top + 2] == "#endif"


def test_unguarded_cuda_code_gets_the_include_at_the_top(tmp_path: Path) -> None:
    out = translate(tmp_path, "o.h", OPEN).decode().splitlines()
    assert out[2].startswith("#include <hip/hip_runtime_api.h>")


def test_a_guarded_header_is_renamed_only_for_its_cuda_content(tmp_path: Path) -> None:
    """A header whose guarded CUDA code the translation leaves (__host__ __device__ is HIP's too) gets the runtime
    for CUDA compilers only and its compiler macro renamed: it keeps its name, and so do its includers (CPU files).
    One whose CUDA names change (cudaStream_t) is renamed, and its includers with it."""
    (tmp_path / "src").mkdir()
    keeps = PUBLIC_C.replace("void mylib_sum_async(const int* v, size_t n, cudaStream_t stream);\n", "")
    (tmp_path / "src" / "mylib.h").write_text(keeps)
    (tmp_path / "src" / "use.c").write_text('#include "mylib.h"\nint main(void) { return mylib_sum(0, 0); }\n')
    res = hipify_tree([tmp_path / "src"], tmp_path / "out", HipifyOptions(hip_version=(6, 4), jobs=1))
    assert sorted(p.name for p in res.outputs.values()) == ["mylib.h", "use.c"]
    assert b"#ifdef __HIPCC__  // [hipify]" in (tmp_path / "out" / "mylib.h").read_bytes()
    (tmp_path / "src" / "mylib.h").write_text(PUBLIC_C)
    res = hipify_tree([tmp_path / "src"], tmp_path / "out", HipifyOptions(hip_version=(6, 4), jobs=1))
    assert sorted(p.name for p in res.outputs.values()) == ["mylib_hip.h", "use_hip.c"]


@pytest.mark.parametrize("std", ["c11", "c++17"])
def test_a_valid_c_header_stays_valid(tmp_path: Path, std: str) -> None:
    cc = shutil.which("cc" if std == "c11" else "c++")
    if cc is None:
        pytest.skip("no host compiler")
    for name, text in (("mylib.h", PUBLIC_C), ("two.h", TWO_GUARDS), ("dev.h", CPP_HEADER)):
        original = tmp_path / "orig" / name
        original.parent.mkdir(parents=True, exist_ok=True)
        original.write_text(text)
        translated = tmp_path / "tr" / name
        translated.parent.mkdir(parents=True, exist_ok=True)
        translated.write_bytes(translate(tmp_path / name, name, text))
        lang = "c" if std == "c11" else "c++"
        for header in (original, translated):
            unit = header.with_name(header.stem + "_use." + ("c" if lang == "c" else "cpp"))
            unit.write_text(f'#include "{header.name}"\n')  # (a header is not a main file: #pragma once)
            proc = subprocess.run(
                [cc, f"-std={std}", "-Wall", "-Werror", "-fsyntax-only", "-x", lang, str(unit)],
                capture_output=True,
                text=True,
                check=False,
            )
            assert proc.returncode == 0, f"{header}:\n{header.read_text()}\n{proc.stderr}"
