"""The native per-file pass (rust/hipify_native/src/engine/translate.rs, driven by ``Translator.export_plan()``)
against the Python reference ``Translator.translate``: byte-identical output and the same findings (same order,
same texts), includes, defines, comment spans, facts and unresolved lane-mask names, on the golden files, csrc/,
tests/hipify/data, a generated corpus and token soup, for the targets None, 5.2, 6.4 and 7.2 with the launch,
comments-and-strings and unmapped options and with project masks; BOM, CRLF, Latin-1 and NUL bytes included.

Skipped without the native module unless ``MONARCH_TEST_REQUIRE_NATIVE=1`` (then a failure), as test_native.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _native_support import CORPORA, REQUIRE_NATIVE, SOUP_TOKENS, load, skip_unless_usable
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tools.hipify import masks
from tools.hipify.mapping import MappingDatabase
from tools.hipify.translate import FileResult, Translator

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
NATIVE, NATIVE_PROBLEM = load("NativeTranslator")
needs_native = skip_unless_usable(NATIVE_PROBLEM, "native translation comparisons")

# Option sets (keyword arguments of Translator).
OPTIONS: dict[str, dict[str, Any]] = {
    "newest": {"hip_version": None},
    "hip5.2": {"hip_version": (5, 2)},  # downgrades: *_sync calls rewritten, their masks dropped
    "hip6.4": {"hip_version": (6, 4)},  # 64-bit masks, the warp-sync macro, (void) on discarded hipError_t
    "hip7.2": {"hip_version": (7, 2)},
    "literals": {"hip_version": (5, 2), "translate_comments_and_strings": True},
    "launch": {"hip_version": (6, 4), "launch": True},
    "launch7.2": {"hip_version": (7, 2), "launch": True, "translate_comments_and_strings": True},
    "no-unmapped": {"hip_version": (5, 2), "report_unmapped": False},
    "no-unmapped7.2": {"hip_version": (7, 2), "report_unmapped": False, "launch": True},
    "everything": {"hip_version": None, "translate_comments_and_strings": True, "launch": True},
}
# Lane masks the project's headers define (masks.merge_header_masks' rows): name, how, value, width, signed.
PROJECT_MASKS = (
    ("FULL_MASK", "#define FULL_MASK 0xffffffff", 0xFFFFFFFF, 32, False),
    ("kHalfWarp", "const unsigned kHalfWarp = 0x0000ffff", 0xFFFF, 32, False),
    ("kWide", "constexpr uint64_t kWide = ~0ull", 0xFFFFFFFFFFFFFFFF, 64, False),
)


class Pair:
    """The reference Translator and the native one built from its plan (each reused across files)."""

    def __init__(self, db: MappingDatabase, options: dict[str, Any], project_masks: tuple[Any, ...] = ()) -> None:
        self.python = Translator(db, engine="python", project_masks=project_masks, **options)
        self.plan = json.dumps(self.python.export_plan())
        assert NATIVE is not None
        self.native = NATIVE.NativeTranslator(self.plan, project_masks)


@pytest.fixture(scope="session")
def pairs() -> dict[tuple[str, bool], Pair]:
    if REQUIRE_NATIVE and NATIVE_PROBLEM is not None:
        pytest.fail(f"MONARCH_TEST_REQUIRE_NATIVE=1, but the native translator is not usable: {NATIVE_PROBLEM}")
    return {}


def pair(db: MappingDatabase, pairs: dict[tuple[str, bool], Pair], name: str, masks: bool = False) -> Pair:
    p = pairs.get((name, masks))
    if p is None:
        p = pairs[name, masks] = Pair(db, OPTIONS[name], PROJECT_MASKS if masks else ())
    return p


def snapshot(res: FileResult) -> dict[str, Any]:
    return {
        "data": res.data,
        "changed": res.changed,
        "findings": [(f.offset, f.name, f.kind, f.reason, f.suggestion, f.blocking, f.rule) for f in res.findings],
        "includes": [(i.out_start, i.out_end, i.spelling, i.angled, i.in_offset, i.mapped) for i in res.includes],
        "defines": list(res.defines),
        "comment_spans": [tuple(s) for s in res.comment_spans],
        "facts": res.facts,
        "unresolved": list(res.unresolved),
    }


def native_snapshot(t: tuple[Any, ...]) -> dict[str, Any]:
    data, changed, findings, includes, defines, spans, facts, unresolved = t
    return {
        "data": data,
        "changed": changed,
        "findings": list(findings),
        "includes": list(includes),
        "defines": list(defines),
        "comment_spans": [tuple(s) for s in spans],
        "facts": facts,
        "unresolved": list(unresolved),
    }


def differences(p: Pair, data: bytes) -> list[str]:
    want = snapshot(p.python.translate(data))
    got = native_snapshot(p.native.translate(data))
    return [f"{k}: python {want[k]!r:.400} != native {got[k]!r:.400}" for k in want if want[k] != got[k]]


# --- corpora -----------------------------------------------------------------------------------------


@needs_native
@pytest.mark.parametrize("option_set", sorted(OPTIONS))
@pytest.mark.parametrize("corpus", [*CORPORA, "generated"])
def test_native_translation_agrees_on_corpus(
    db: MappingDatabase,
    pairs: dict[tuple[str, bool], Pair],
    request: pytest.FixtureRequest,
    corpus: str,
    option_set: str,
) -> None:
    files = request.getfixturevalue("generated_corpus") if corpus == "generated" else CORPORA[corpus]()
    assert files, f"no files in corpus {corpus}"
    p = pair(db, pairs, option_set, masks=option_set in ("hip6.4", "launch7.2"))
    bad = {str(f): d for f in files if (d := differences(p, f.read_bytes()))}
    assert not bad, f"{len(bad)} of {len(files)} files differ, e.g.: {next(iter(bad.items()))}"


# --- adversarial inputs ------------------------------------------------------------------------------

TOKENS = SOUP_TOKENS
SOUP = st.lists(st.sampled_from(TOKENS), max_size=60).map(b"".join)
BOM = b"\xef\xbb\xbf"


@needs_native
@pytest.mark.parametrize(
    ("option_set", "masks"),
    [
        ("newest", False),
        ("hip5.2", False),
        ("hip6.4", True),
        ("hip7.2", False),
        ("launch7.2", True),
        ("everything", False),
        ("no-unmapped", False),
    ],
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=SOUP)
@example(data=BOM + b'#include <cuda_runtime.h>\ncudaMalloc(u8"cudaFree"); // cudaStream_t\n')
@example(data=BOM + b"cudaMalloc")
@example(data=BOM)
@example(data=b"")
@example(data=b"k<<<g, b>>>(x);\r\n#include <cuda_runtime.h>\r\ncudaFree(p);\r\n")
@example(data=b"__shfl_sync(FULL_MASK, v, 0); __shfl_sync(kHalfWarp, v, 0); __any_sync(kWide, 1); __all_sync(m, 1);")
@example(data=b"cudaFree(p);\x00cudaFree(q);\n\xe9cudaMalloc cuda\xe9Malloc \xffcudaFooBar")
def test_native_translation_agrees_on_token_soup(
    db: MappingDatabase, pairs: dict[tuple[str, bool], Pair], option_set: str, masks: bool, data: bytes
) -> None:
    assert differences(pair(db, pairs, option_set, masks), data) == []


# single bytes of the grammar's edges among a few names: unbalanced brackets, launches and directives cut anywhere
BYTES = [bytes([c]) for c in b"()[]{}<>;,:\"'\\/*#\n\r\t ?=&R0x.-\xe9"] + [
    b"<<<",
    b">>>",
    b"k",
    b"cudaFree",
    b"__shfl_sync",
    b"__activemask()",
    b"FULL_MASK",
    b"if",
    b"else",
    b"::",
    b"int ",
    b"cudaFooBar",
    b"include",
    b"0xffffffff",
    b"__syncwarp",
    b"cub",
    b"namespace ",
]
BYTE_SOUP = st.lists(st.sampled_from(BYTES), max_size=80).map(b"".join)


@needs_native
@pytest.mark.parametrize("option_set", ["hip5.2", "launch7.2", "everything"])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=BYTE_SOUP)
def test_native_translation_agrees_on_byte_soup(
    db: MappingDatabase, pairs: dict[tuple[str, bool], Pair], option_set: str, data: bytes
) -> None:
    assert differences(pair(db, pairs, option_set, True), data) == []


@needs_native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=SOUP)
def test_native_translation_agrees_after_a_bom(
    db: MappingDatabase, pairs: dict[tuple[str, bool], Pair], data: bytes
) -> None:
    assert differences(pair(db, pairs, "launch7.2", True), BOM + data) == []


@needs_native
@pytest.mark.parametrize("option_set", sorted(OPTIONS))
def test_native_translation_of_encodings(
    db: MappingDatabase, pairs: dict[tuple[str, bool], Pair], option_set: str
) -> None:
    src = (
        b'#include "cuda_fp16.h"\r\n/* cudaFree \xe9 */ cudaStream_t s; cudaMalloc(&p, 32);\r\n'
        b'L"cudaFree \xff" \x00 cudaMemcpy(a, b, n, cudaMemcpyHostToDevice);\r\n'
        b"__global__ void k(unsigned m) { __shfl_sync(m, 1, 0); __syncwarp(); }\r\nk<<<1, 2>>>(3);\r\n"
    )
    p = pair(db, pairs, option_set)
    for data in (src, BOM + src, src.replace(b"\r\n", b"\n"), src.decode("latin-1").encode("utf-8")):
        assert differences(p, data) == []


@needs_native
def test_project_masks_reach_the_native_pass(db: MappingDatabase, pairs: dict[tuple[str, bool], Pair]) -> None:
    src = b"__global__ void k(float v) { v = __shfl_sync(FULL_MASK, v, 0); v = __shfl_sync(UNKNOWN_MASK, v, 0); }\n"
    with_masks = pair(db, pairs, "hip7.2", masks=True)
    without = pair(db, pairs, "hip7.2")
    assert differences(with_masks, src) == [] and differences(without, src) == []
    got = native_snapshot(with_masks.native.translate(src))
    assert b"(FULL_MASK | 0xffffffff00000000ULL)" in got["data"]
    assert got["unresolved"] == ["UNKNOWN_MASK"]
    assert native_snapshot(without.native.translate(src))["unresolved"] == ["FULL_MASK", "UNKNOWN_MASK"]
    # the same plan with other masks
    again = native_snapshot(without.native.with_masks(PROJECT_MASKS).translate(src))
    assert again == got


# --- the plan and the bindings -----------------------------------------------------------------------


@pytest.mark.parametrize("option_set", ["hip5.2", "hip7.2", "no-unmapped"])
def test_plan_gives_back_every_decision(db: MappingDatabase, option_set: str) -> None:
    """(No native module needed.) The plan's rows, read as the Rust side reads them, are action() and
    header_action() of every name and header: replacement, flags and the finding texts (templates filled)."""
    tr = Translator(db, engine="python", **OPTIONS[option_set])
    plan = json.loads(json.dumps(tr.export_plan()))
    texts, findings = plan["texts"], plan["findings"]

    def spec(k: int, name: str) -> tuple[str, str, str, bool] | None:
        if k < 0:
            return None
        kind, reason, sugg, flags = findings[k]
        fill = (lambda t: t.replace("\0", name)) if flags & 2 else (lambda t: t)
        return texts[kind], fill(texts[reason]), fill(texts[sugg]), bool(flags & 1)

    names = {row[0] for row in plan["names"]}
    assert {n for n in db.names() if db.lookup(n).kind != "header"} <= names  # type: ignore[union-attr]
    for name, repl, finding, flags in plan["names"]:
        act = tr.action(name.encode("latin-1"))
        assert (repl, spec(finding, name)) == (
            None if act.replacement is None else act.replacement.decode("latin-1"),
            act.finding,
        ), name
        masked = name.encode("latin-1") in masks.MASKED
        assert flags == (
            act.namespace_only | act.sync << 1 | act.stmt << 2 | (act.downgrade is not None) << 3 | masked << 4
        ), name
    for path, repl, finding in plan["headers"]:
        want = tr.header_action(path.encode("latin-1"))
        assert (repl, spec(finding, path)) == (None if want[0] is None else want[0].decode("latin-1"), want[1])
    # the findings of names and headers no table has
    assert spec(plan["unmapped"], "cudaNoSuchName") == tr.action(b"cudaNoSuchName").finding
    assert spec(plan["cuda_only_header"], "crt/x.h") == tr.header_action(b"crt/x.h")[1]
    assert plan["downgrades"] == [
        [dg.cuda_name, list(dg.below), dg.replacement.decode("latin-1"), dg.action]
        for _, dg in sorted(tr.downgrades.items())
    ]


@needs_native
@pytest.mark.parametrize("option_set", ["newest", "hip5.2", "launch7.2", "no-unmapped"])
def test_plan_is_plain_data(db: MappingDatabase, pairs: dict[tuple[str, bool], Pair], option_set: str) -> None:
    p = pair(db, pairs, option_set)
    plan = json.loads(p.plan)
    assert plan == json.loads(json.dumps(p.python.export_plan()))  # deterministic
    assert plan["format"] == 1
    assert len(plan["names"]) > 9000 and len(p.plan) < 1_000_000
    opts = OPTIONS[option_set]
    assert plan["report_unmapped"] == opts.get("report_unmapped", True)
    assert plan["launch"] == opts.get("launch", False)
    assert (plan["unmapped"] >= 0) == plan["report_unmapped"]
    # every name row's finding and every header's finding is in the table
    assert all(-1 <= row[2] < len(plan["findings"]) for row in plan["names"])
    assert all(-1 <= row[2] < len(plan["findings"]) for row in plan["headers"])
    parse, total = NATIVE._plan_parse_seconds(p.plan, 3)
    assert 0 < parse <= total


@needs_native
def test_translate_file_is_the_translator(db: MappingDatabase, pairs: dict[tuple[str, bool], Pair]) -> None:
    p = pair(db, pairs, "hip6.4", masks=True)
    src = (HERE / "golden" / "runtime.cu").read_bytes()
    assert NATIVE._translate_file(p.plan, PROJECT_MASKS, src) == p.native.translate(src)


@needs_native
def test_bad_plans_are_refused(db: MappingDatabase, pairs: dict[tuple[str, bool], Pair]) -> None:
    p = pair(db, pairs, "newest")
    with pytest.raises(ValueError, match="plan"):
        NATIVE.NativeTranslator("{", ())
    plan = json.loads(p.plan)
    with pytest.raises(ValueError, match="format"):
        NATIVE.NativeTranslator(json.dumps({**plan, "format": 99}), ())
    with pytest.raises(ValueError, match="finding"):
        NATIVE.NativeTranslator(json.dumps({**plan, "names": [["cudaX", None, 10**6, 0]]}), ())
    with pytest.raises(ValueError, match="Latin-1"):
        NATIVE.NativeTranslator(json.dumps({**plan, "names": [["cuda\u0100", None, -1, 0]]}), ())
