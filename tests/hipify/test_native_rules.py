"""The native ports of tools/hipify/insert.py (uses, defines_and_lines, insertion_point, render), lint.py
(lint_bytes, silenced) and translate.py (positions, line_starts) against the Python reference, through the
module's test hooks (rust/hipify_native/src/py_insert.rs), on the golden files, tests/hipify/data, csrc/,
a generated corpus and hypothesis token soup.

Skipped when the native module is not usable, unless ``MONARCH_TEST_REQUIRE_NATIVE=1`` (then they fail).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from _native_support import CORPORA, load, skip_unless_usable
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tools.hipify import insert, lint
from tools.hipify.mapping import MappingDatabase
from tools.hipify.translate import RawFinding, Translator, line_starts, positions

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SYNC_MACRO = "HIP_ENABLE_WARP_SYNC_BUILTINS"


NATIVE, PROBLEM = load("_lint_bytes")
pytestmark = skip_unless_usable(PROBLEM, "insert/lint comparisons")


def native() -> Any:
    if NATIVE is None:
        pytest.fail(f"MONARCH_TEST_REQUIRE_NATIVE=1, but the native hipify module is not usable: {PROBLEM}")
    return NATIVE


@pytest.fixture(scope="module")
def tr(db: MappingDatabase) -> Translator:
    return Translator(db, engine="python", hip_version=(6, 4))


# --- insert.py, positions -------------------------------------------------------------------------------


def insert_differences(tr: Translator, data: bytes) -> list[str]:
    """Where the native insert/positions functions disagree with Python on ``data`` (and its translation)."""
    n = native()
    fr = tr.translate(data)
    spans = [tuple(s) for s in fr.comment_spans]
    out: list[str] = []

    def check(what: str, want: object, got: object) -> None:
        if want != got:
            out.append(f"{what}: python {want!r:.200} != native {got!r:.200}")

    check("uses", insert.uses(data, spans), n._insert_uses(data, spans))
    check("uses (no spans)", insert.uses(data, []), n._insert_uses(data, []))
    for macro in (SYNC_MACRO, None, "", "M"):
        check(
            f"defines_and_lines {macro}",
            insert.defines_and_lines(data, macro),
            n._insert_defines_and_lines(data, macro),
        )
    for text in (data, fr.data):
        check("insertion_point", insert.insertion_point(text), n._insert_insertion_point(text))
    check("line_starts", line_starts(data), n._line_starts(data))
    offsets = [f.offset for f in fr.findings] + [0, len(data), len(data) + 3] + list(range(0, len(data), 97))
    check("positions", positions(data, offsets), n._positions(data, offsets))
    return out


@pytest.mark.parametrize("corpus", sorted([*CORPORA, "generated"]))
def test_insert_agrees_on_corpus(tr: Translator, corpus: str, request: pytest.FixtureRequest) -> None:
    files = request.getfixturevalue("generated_corpus") if corpus == "generated" else CORPORA[corpus]()
    assert files
    bad = {str(f): d for f in files if (d := insert_differences(tr, f.read_bytes()))}
    assert not bad, f"{len(bad)} of {len(files)} files differ, e.g.: {next(iter(bad.items()))}"


@pytest.mark.parametrize("define", [None, "", SYNC_MACRO])
@pytest.mark.parametrize("runtime", [None, b"", insert.RUNTIME_HEADER, insert.RUNTIME_API_HEADER])
@pytest.mark.parametrize("crlf", [False, True])
def test_render_agrees(define: str | None, runtime: bytes | None, crlf: bool) -> None:
    assert native()._insert_render(define, runtime, crlf) == insert.render(define, runtime, crlf)


HEAD_TOKENS = [
    b"\xef\xbb\xbf",
    b"\n",
    b"\r\n",
    b"\r",
    b" ",
    b"\t",
    b"\x0b",
    b"\x0c",
    b"\\",
    b"\\\n",
    b"\\\r\n",
    b"//",
    b"// c\n",
    b"/*",
    b"*/",
    b"/* c */",
    b"/* a\n * b */",
    b"#",
    b"# ",
    b"#pragma once",
    b"#pragma  once\n",
    b"#pragma",
    b"once",
    b"#ifndef G\n",
    b"#ifndef",
    b"#ifndef G_H",
    b"#define G\n",
    b"#define G_H 1\n",
    b"#define",
    b"# define G\n",
    b"#if !defined(G)\n",
    b"#if ! defined G\n",
    b"#if !definedG\n",
    b"#if defined(G)\n",
    b"#if",
    b"#undef X\n",
    b"#include <a.h>\n",
    b"#include",
    b"#endif\n",
    b"#else\n",
    b"G",
    b"int x;\n",
    b"x",
    b"__global__ void k() {}\n",
    b"cudaMalloc",
    b"hipFoo",
    b"cuda",
    b"cudax",
    b"<<<",
    b"__device__",
    b"_",
    b"\xe9",
    b'"',
    b'"__global__"',
    b"#define HIP_ENABLE_WARP_SYNC_BUILTINS\n",
    b"#define HIP_ENABLE_WARP_SYNC_BUILTINSX\n",
    b"HIP_ENABLE_WARP_SYNC_BUILTINS",
    b"define",
]
HEAD_SOUP = st.lists(st.sampled_from(HEAD_TOKENS), max_size=30).map(b"".join)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=HEAD_SOUP)
@example(data=b"\xef\xbb\xbf#pragma once\n#ifndef G\n#define G\nint x;\n")
@example(data=b"#if !defined(G)\n#define G\n/* a */ /* b */ // c\n#include <x>\n")
@example(data=b"/* a */ /* b")
@example(data=b"#ifndef G\n/* c */\n")
def test_insert_agrees_on_file_heads(tr: Translator, data: bytes) -> None:
    assert insert_differences(tr, data) == []


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), offsets=st.lists(st.integers(0, 260), max_size=20))
def test_positions_agree_on_bytes(data: bytes, offsets: list[int]) -> None:
    assert native()._positions(data, offsets) == positions(data, offsets)
    assert native()._line_starts(data) == line_starts(data)


# --- lint.py ----------------------------------------------------------------------------------------------


@cache
def plan_json() -> str:
    return json.dumps(lint.export_plan())


def _tuple(f: RawFinding) -> tuple[object, ...]:
    return (f.offset, f.name, f.kind, f.reason, f.suggestion, f.blocking, f.rule)


RULE_IDS = [*sorted({r for r, *_ in lint._COMPILED}), "", "lane", "lane-math ", "cuda-only-header"]


def lint_differences(data: bytes, spans: list[tuple[int, int]]) -> list[str]:
    """Where the native lint disagrees with Python's (``engine="python"``) on ``data``."""
    want = [_tuple(f) for f in lint.lint_bytes(data, spans, engine="python")]
    got = native()._lint_bytes(plan_json(), data, spans)
    out = [] if want == got else [f"lint_bytes: python {want!r:.400} != native {got!r:.400}"]
    if b"hipify:" in data:
        offsets = sorted({0, len(data), *(i for i in range(len(data)) if data[i : i + 1] in b"3&%>_act\n")})
        for off in offsets[:400]:
            for rule in RULE_IDS:
                if lint.silenced(data, off, rule) != native()._lint_silenced(data, off, rule):
                    out.append(f"silenced({off}, {rule!r}) differs")
    return out


@pytest.mark.parametrize("corpus", sorted([*CORPORA, "generated"]))
def test_lint_agrees_on_corpus(tr: Translator, corpus: str, request: pytest.FixtureRequest) -> None:
    files = request.getfixturevalue("generated_corpus") if corpus == "generated" else CORPORA[corpus]()
    bad = {}
    for f in files:
        data = f.read_bytes()
        spans = [tuple(s) for s in tr.translate(data).comment_spans]
        d = lint_differences(data, spans) + lint_differences(data, [])
        if d:
            bad[str(f)] = d
    assert not bad, f"{len(bad)} of {len(files)} files differ, e.g.: {next(iter(bad.items()))}"


LINT_TOKENS = [
    b"32",
    b"32u",
    b"32U",
    b"32ul",
    b"32LLU",
    b"32.",
    b"1.32",
    b"32'",
    b"int32_t",
    b"& 31",
    b"&31",
    b"& 0x1f",
    b"&0x1F",
    b"& 31u",
    b"% 32",
    b"%32",
    b">> 5",
    b">>5",
    b">> 5.",
    b"x",
    b"_",
    b".",
    b" ",
    b"\t",
    b"\n",
    b"\r\n",
    b"\x85",
    b"\xa0",
    b"\xe9",
    b"threadIdx.x",
    b"blockDim",
    b"lane",
    b"warp",
    b"WARP",
    b"tid",
    b"tidx",
    b"__shared__ ",
    b"__shfl_down_sync(",
    b"__global__ void k() {",
    b"__device__ ",
    b"for (",
    b"for(int o = 16; o > 0; o /= 2)",
    b"for (int o = 16; o; o >>= 1)",
    b"for (o = 16 ; ",
    b"; o /= 2)",
    b"asm(",
    b"asm volatile(",
    b"asm __volatile__ (",
    b"__asm__(",
    b"__asm(",
    b"x__asm(",
    b"__ballot(",
    b"__ballot_sync(",
    b"__activemask()",
    b"unsigned m = ",
    b"unsigned int m = ",
    b"uint32_t m = ",
    b"int m=",
    b"__popc(",
    b"__ffs (",
    b"__CUDA_ARCH__ >= 700",
    b"__CUDA_ARCH__<8",
    b"__CUDA_ARCH__ == ",
    b"texture<",
    b"texture <float>",
    b"surface<",
    b"tex1Dfetch<float>(",
    b"tex2D(",
    b"texCubemapLayered (",
    b"surf2Dwrite(",
    b"this_grid().sync(",
    b"this_grid ( ) . sync (",
    b"grid.sync(",
    b"memcpy_async",
    b"this_cluster",
    b"wait_prior<1>",
    b"// ",
    b"/* ",
    b" */",
    b'"',
    b"'",
    b"// hipify: ignore",
    b"// hipify: ignore(lane-math)",
    b"// hipify:ignore( warp-size-literal , ballot-32 )",
    b"// hipify: ignore(",
    b"hipify: ignore(hipify: ignore)",
    b"hipify:",
    b"(",
    b")",
    b";",
    b",",
    b"=",
]
LINT_SOUP = st.lists(st.sampled_from(LINT_TOKENS), max_size=50).map(b"".join)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=LINT_SOUP)
@example(data=b"__global__ void k() { int l = threadIdx.x & 31; unsigned m = __ballot_sync(~0u, 1); }")
@example(data=b"__device__ int w = 32; // hipify: ignore(warp-size-literal)\n")
@example(data=b'__global__ void k() { asm volatile(""); } // hipify: ignore')
def test_lint_agrees_on_token_soup(tr: Translator, data: bytes) -> None:
    spans = [tuple(s) for s in tr.translate(data).comment_spans]
    assert lint_differences(data, spans) == []


def test_lint_plan_errors() -> None:
    plan = lint.export_plan()
    bad = [
        {**plan, "context": "("},
        {**plan, "rules": [{**plan["rules"][0], "check": "nope"}]},  # type: ignore[index]
        {**plan, "extra": 1},
        {k: v for k, v in plan.items() if k != "ballot_lhs"},
    ]
    for p in bad:
        with pytest.raises(ValueError, match="lint plan"):
            native()._lint_bytes(json.dumps(p), b"32", [])
