"""What the native-engine parity tests share: loading the module (skipped when it is not usable, a failure under
``MONARCH_TEST_REQUIRE_NATIVE=1``, which ci/run-tests.sh sets) and the corpora they compare the engines on."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

from tools.errors import ToolError
from tools.hipify import native as native_mod

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
REQUIRE_NATIVE = os.environ.get("MONARCH_TEST_REQUIRE_NATIVE") == "1"


def load(attr: str | None = None) -> tuple[Any, str | None]:
    """(the native module, None) under ``MONARCH_HIPIFY_NATIVE=1``, or (None, why it is not usable): not
    importable, built for another interface, or without ``attr`` (built from an older tree)."""
    try:
        module = native_mod.load({"MONARCH_HIPIFY_NATIVE": "1"})
    except ToolError as err:
        return None, str(err)
    if module is None:
        return None, "not importable"
    if attr is not None and not hasattr(module, attr):
        return None, f"the native module has no {attr} (built from an older tree): pip install ./rust/hipify_native"
    return module, None


def skip_unless_usable(problem: str | None, what: str) -> pytest.MarkDecorator:
    """Skip when the module is not usable, unless it is required (then the tests run, and fail)."""
    return pytest.mark.skipif(
        problem is not None and not REQUIRE_NATIVE,
        reason=f"native hipify module not usable, {what} skipped: {problem} "
        "(MONARCH_TEST_REQUIRE_NATIVE=1 makes this a failure)",
    )


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def make_generated(root: Path, size: int) -> None:
    """bench/hipify_bench.py's synthetic tree (templates, csrc/, golden files, Latin-1 files) of ``size`` bytes."""
    spec = importlib.util.spec_from_file_location("_hipify_corpus_for_tests", REPO / "bench" / "hipify_corpus.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    files, total = bench.make_corpus(root, size)
    assert files > 20 and total >= size


#: the repository's corpora (the generated one is the ``generated_corpus`` fixture of conftest.py)
CORPORA = {
    "golden": lambda: files_under(HERE / "golden"),
    "data": lambda: files_under(HERE / "data"),
    "csrc": lambda: files_under(REPO / "csrc"),
}


#: the byte-soup tokens the engine comparisons draw from: the tokenizer's edges, directives, names of each
#: mapping class, the target rules' triggers, the lint's patterns
SOUP_TOKENS = [
    # comments, literals and the tokeniser's edges
    b"//",
    b"/*",
    b"*/",
    b"/*/",
    b'"',
    b"'",
    b"\\",
    b"\\\r\n",
    b"\\\n",
    b"\r\n",
    b"\n",
    b'R"',
    b'R"x(',
    b')x"',
    b'u8"',
    b"L'",
    b'LR"(',
    b")",
    b"1'000",
    b"0x1CU",
    # directives
    b"#include <cuda_runtime.h>",
    b'# include_next "a.h"',
    b'#include "cuda_fp16.h"',
    b"#includex",
    b"#include <cuda/pipeline>",
    b"#define cudaFooBar 1",
    # launches, namespaces, members
    b"<<<",
    b"<<",
    b">>>",
    b"::",
    b"cub::",
    b"namespace cub",
    b"cub",
    b".",
    b"->",
    # CUDA names from the database (and one it does not have)
    b"cudaMalloc",
    b"cudaMemcpyAsync",
    b"__shfl_down_sync",
    b"__shfl_sync",
    b"cudaStream_t",
    b"CUresult",
    b"cuGetErrorString",
    b"cudaGraphCreate",
    b"cublasCreate",
    b"cudaErrorInvalidTexture",
    b"cudaFooBar",
    b"void ",
    # identifier glue
    b"x",
    b"_",
    b"9",
    b"R",
    b"cu",
    b"\xe9",
    b"\xff",
    b" ",
    b"\t",
    b"(",
    b",",
    b";",
    # lint triggers
    b"0xffffffff",
    b"0xffffffffu",
    b"32",
    b"32u",
    b"32ul",
    b"& 31",
    b"& 0x1f",
    b"% 32",
    b">> 5",
    b"threadIdx.x",
    b"lane",
    b"for (int o = 16; o > 0; o /= 2)",
    b"asm volatile(",
    b"__asm__(",
    b"__ballot_sync(",
    b"unsigned m = ",
    b"__popc(",
    b"__CUDA_ARCH__ >= 7",
    b"texture<",
    b"tex1Dfetch<float>(",
    b"this_grid().sync(",
    b"memcpy_async",
    b"hipify: ignore",
    b"hipify: ignore(lane-math)",
    b"__global__ void k() {",
    # target rules: masks, statements that discard hipError_t
    b"cudaFree(p);",
    b"cudaDeviceSynchronize()",
    b"(void)",
    b"if (x) ",
    b"else ",
    b"case 1: ",
    b"#endif\n",
    b"#define FULL 0xffffffff\n",
    b"const unsigned kFull = 0xffffffffu;",
    b"unsigned m = __activemask();",
    b"__activemask()",
    b"~0u",
    b"-1",
    b"0x0000ffff",
    b"__syncwarp(",
    b"__match_any_sync(",
    b"/* c */",
    # the per-file pass's own edges (tests/hipify/test_native_translate.py)
    b"\x00",
    b"#include <cuda_bf16.h>",
    b"#include <cuda_fp4.h>",
    b"#include <cublas_v2.h>",
    b"#include <cuda_profiler_api.h>",
    b"#include <nvtx3/nvToolsExt.h>",
    b"#include <crt/x.h>",
    b"k",
    b"k<T>",
    b"ns::k",
    b"<<<g, b>>>(x)",
    b"<<<1, 2, 0, s>>>();",
    b"__shfl_xor_sync(",
    b"__any_sync(",
    b"__syncwarp()",
    b"cuFooBar",
    b"CU_FOO",
    b"nvrtcFoo",
    b"cudaThreadSynchronize",
    b"cudaLaunchCooperativeKernelMultiDevice",
    b"__nv_bfloat16",
    b"cuCtxCreate(&c, 0, d);",
    b"cudaMallocAsync",
    b"fftw_plan",
    b"fftw_execute_dft",
    b"FFTW_FORWARD",
    b"_CubLog",
    b"#include <cub/cub.cuh>",
    b"#include <cuda.h>",
    b"int ",
    b"struct ",
    b"return ",
    b"=",
    b"{",
    b"}",
    b"?",
    b":",
    b"cudaMemset(p, 0, n) /* c */;",
    b"for (;;) ",
    b"do ",
    b"FULL_MASK",
    b"kHalfWarp",
    b"kWide",
    b"mask",
]
