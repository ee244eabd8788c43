"""The native lane-mask classification and downgrade rewrite (rust/hipify_native/src/engine/masks.rs and
downgrade.rs, through the test hooks in src/py_masks.rs) against the Python reference (tools/hipify/masks.py,
tools/hipify/downgrade.py): the same first argument, class, explanation and unresolved name at every warp
``*_sync`` call of the repository's C++ (golden files, test data, csrc/) and of the warp-sync tests' cases, on
generated masks (literals, casts, operators, names defined by #define, declarations, parameters and project
headers), the same header constants and merged project tables, and the same call rewrites.

Skipped when the native module is not importable, unless ``MONARCH_TEST_REQUIRE_NATIVE=1`` (then a failure).
``MONARCH_MASKS_CORPUS=dir[:dir...]`` adds a comparison over every call site of those trees (the manual check
on real corpora: cuda-samples, llm.c)."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _native_support import load, skip_unless_usable
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tools.hipify import masks
from tools.hipify.downgrade import ACTIONS, Downgrade, load_downgrades, rewrite_call

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
REQUIRE_NATIVE = os.environ.get("MONARCH_TEST_REQUIRE_NATIVE") == "1"
SOURCE_SUFFIXES = {".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc", ".c", ".hh", ".inl", ".cxx", ".expected"}


NATIVE, PROBLEM = load("_masks_classify")
pytestmark = skip_unless_usable(PROBLEM, "masks comparisons")


def native() -> Any:
    if NATIVE is None:
        pytest.fail(f"MONARCH_TEST_REQUIRE_NATIVE=1, but the native module is not usable: {PROBLEM}")
    return NATIVE


# --- comparisons ------------------------------------------------------------------------------------------

Rows = tuple[tuple[str, str, int, int, bool], ...]


def py_classify(data: bytes, start: int, mask: bytes, rows: Rows = ()) -> tuple[str, str, bytes]:
    m = masks.classify(data, start, mask, masks.known_masks(rows))
    return m.cls, m.how, m.unresolved


def check_classify(data: bytes, start: int, mask: bytes, rows: Rows = ()) -> tuple[str, str, bytes]:
    expected = py_classify(data, start, mask, rows)
    got = tuple(native()._masks_classify(data, start, mask, rows))
    assert got == expected, (mask, data[max(0, start - 300) : start + 80])
    return expected


NAMES = tuple(sorted(masks.SYNC_NAMES))
SITE = re.compile(rb"(?<![A-Za-z0-9_\x80-\xff])(" + b"|".join(NAMES) + rb")(?![A-Za-z0-9_\x80-\xff])")
DOWNGRADES = load_downgrades((5, 0))


def check_file(data: bytes, rows: Rows = ()) -> tuple[int, set[bytes]]:
    """Every *_sync / __activemask site of ``data``: first_argument, classify (with ``rows``) and every
    rewrite_call that could apply there. Returns (sites classified, unresolved names)."""
    n = native()
    count = 0
    unresolved: set[bytes] = set()
    for m in SITE.finditer(data):
        start, end = m.span()
        span = masks.first_argument(data, end)
        assert n._masks_first_argument(data, end) == span, data[start : end + 80]
        if span is not None:
            mask = data[span[0] : span[1]]
            assert n._masks_is_name(mask) == masks.is_name(mask)
            _cls, _how, name = check_classify(data, start, mask, rows)
            if name:
                unresolved.add(name)
            count += 1
        name = m.group(1)
        dgs = [DOWNGRADES[name]] if name in DOWNGRADES else []
        dgs += [Downgrade(name.decode(), (6, 2), b"R", action) for action in ACTIONS]
        for dg in dgs:
            check_rewrite(data, end, dg)
    return count, unresolved


def check_rewrite(data: bytes, end: int, dg: Downgrade) -> None:
    expected = rewrite_call(data, end, dg)
    below = (*dg.below, 0, 0)[:2]
    got = native()._downgrade_rewrite(data, end, dg.cuda_name, below, dg.replacement, dg.action)
    assert (None if got is None else tuple(got)) == expected, (dg.action, data[end : end + 80])


def check_tree(files: list[bytes]) -> int:
    """check_file over ``files``, then again with the project masks their headers define for the names the
    first pass left unresolved (as the tree pass does)."""
    total = 0
    wanted: set[bytes] = set()
    for data in files:
        count, names = check_file(data)
        total += count
        wanted |= names
    if wanted:
        tables = [check_header(data, wanted) for data in files]
        rows = check_merge(tables)
        for data in files:
            check_file(data, rows)
    return total


def check_header(data: bytes, wanted: set[bytes]) -> dict[bytes, tuple[str, masks.Value]]:
    expected = masks.header_masks(data, frozenset(wanted))
    got = native()._masks_header_masks(data, sorted(wanted))
    assert list(got.items()) == list(expected.items()), data[:300]
    return expected


def check_merge(tables: list[dict[bytes, tuple[str, masks.Value]]]) -> Rows:
    expected = masks.merge_header_masks(tables)
    got = native()._masks_merge([list(t.items()) for t in tables])
    assert got == expected
    assert native()._masks_roundtrip(expected) == expected
    return expected


def source_files(*roots: Path) -> Iterator[Path]:
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and (path.suffix.lower() in SOURCE_SUFFIXES or path.name.endswith(".expected")):
                yield path


# --- the repository's code and the warp-sync tests' cases -------------------------------------------------


def test_repository_call_sites() -> None:
    files = [p.read_bytes() for p in source_files(HERE / "golden", HERE / "data", REPO / "csrc")]
    assert check_tree(files) > 10


def _test_strings() -> list[bytes]:
    """Every string constant of the warp-sync and downgrade tests (their masks, kernels and expected texts)."""
    out: list[bytes] = []
    for name in ("test_warp_sync.py", "test_downgrade.py", "test_native.py", "test_translate.py"):
        tree = ast.parse((HERE / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
                value = node.value if isinstance(node.value, bytes) else node.value.encode("utf-8")
                if value not in out:
                    out.append(value)
    return out


def kernel(body: bytes, before: bytes = b"") -> bytes:
    """test_warp_sync.py's kernel()."""
    return before + b"__global__ void k(float* d, unsigned param) {\n  float v = d[threadIdx.x];\n" + body + b"\n}\n"


def test_warp_sync_test_cases() -> None:
    strings = _test_strings()
    sites = 0
    for s in strings:
        if len(s) < 200 and b"\n" not in s:
            check_classify(b"", 0, s)
            data = kernel(b"  v += __shfl_down_sync(" + s + b", v, 1);")
            sites += check_file(data)[0]
        sites += check_file(s)[0]
        sites += check_file(kernel(s))[0]
    assert sites > 50


SPECIAL = [
    b"0xffffffff",
    b"0x'ff'ff'ff'ff",
    b"0x'",
    b"0b'",
    b"0b1111'1111",
    b"0xffffffffULLu",
    b"4294967295",
    b"2147483648",
    b"9223372036854775807",
    b"9223372036854775808",
    b"18446744073709551615",
    b"18446744073709551616",
    b"99999999999999999999999999999",
    b"0x1ffffffffffffffff",
    b"1 << 31",
    b"1u << 31",
    b"1 << 32",
    b"1ull << 63",
    b"1ull << 64",
    b"1ull << 200",
    b"~0u >> 70",
    b"-1 >> 1",
    b"(int)-1",
    b"(long)-1",
    b"(long)(unsigned)-1",
    b"(unsigned long long)(int)-1",
    b"static_cast< std::uint32_t >(~0)",
    b"static_cast<unsigned long long>(-1)",
    b"(std::size_t)-1",
    b"(abstd::x)-1",
    b"(unsigned)",
    b"unsigned(-1)",
    b"uint64_t(0xffffffff) | 0",
    b"((void)m, __activemask())",
    b"(void)0, 0xffffffff",
    b"(unsigned)__activemask()",
    b"(uint32_t)__ballot_sync(FULL, p)",
    b"__ballot_sync(0xffffffff, p)",
    b"(unsigned)__ballot(1)",
    b"f(x)",
    b"::FULL",
    b":: \n FULL",
    b"(unsigned)FULL",
    b"0xffffffff & ~(1u << 3)",
    b"1 2",
    b"((((((1))))))",
    b"(1",
    b"1)",
    b"~~~~~~~~0",
    b"- - -1",
    b"0xffff'ffff'",
    b"0x",
    b"0b2",
    b"1e5",
    b"'a'",
    b"\xe9t\xe9",
    b"a\xe9",
]


def test_special_masks() -> None:
    data = (
        b"#define FULL 0xffffffff\n#define HALF (FULL >> 16)\n#define BAD \\\n  1\n"
        b"__device__ void f(unsigned p, unsigned long long q) {\n"
        b"  const unsigned m = __activemask();\n  unsigned long long w = __ballot_sync(FULL, p);\n"
        b"  int x; x = 3;\n  x++;\n  auto a = __activemask();\n"
    )
    rows: Rows = (("KNOWN", "#define KNOWN 0xff", 255, 32, True), ("FULL", "const int FULL = -1", 0xFFFFFFFF, 32, True))
    for mask in [
        *SPECIAL,
        b"HALF",
        b"BAD",
        b"m",
        b"w",
        b"x",
        b"a",
        b"p",
        b"q",
        b"KNOWN",
        b"(unsigned)w",
        b"HALF|KNOWN",
    ]:
        for rows_ in ((), rows):
            check_classify(data, len(data), mask, rows_)
            check_classify(b"", 0, mask, rows_)
        assert native()._masks_is_name(mask) == masks.is_name(mask)
        assert native()._masks_constant(mask) == masks.constant(mask)
    # a name after "::" and a newline: _declaration looks for it re.escape'd with the newline still escaped
    quirk = b"void f() {\n  unsigned \\\n FULL = 0xffffffff;\n  unsigned long long \n FULL = 1;\n"
    for mask in (b":: \n FULL", b"::\n FULL", b"::FULL", b":: FULL"):
        check_classify(quirk, len(quirk), mask)


# --- generated masks --------------------------------------------------------------------------------------

POOL = [b"FULL", b"mask", b"m2", b"kLanes", b"lane_mask", b"param"]
SUFFIXES = [b"", b"u", b"U", b"l", b"L", b"ul", b"UL", b"ull", b"ULL", b"ll", b"LL", b"lu", b"LLU", b"uLL"]
TYPES = [
    b"unsigned",
    b"unsigned int",
    b"int",
    b"uint32_t",
    b"std::uint32_t",
    b"unsigned long long",
    b"uint64_t",
    b"long",
    b"size_t",
    b"auto",
    b"short",
    b"float",
    b"const unsigned",
    b"static constexpr uint64_t",
    b"__device__ const int",
    b"volatile unsigned",
    b"unsigned  long",
]
CASTS = [
    b"unsigned",
    b"unsigned int",
    b"uint32_t",
    b"std::uint32_t",
    b"unsigned long long",
    b"uint64_t",
    b"int",
    b"long",
    b"float",
]


def _digits(draw: Any, alphabet: str, lo: int, hi: int) -> bytes:
    text = draw(st.text(alphabet=alphabet, min_size=lo, max_size=hi))
    if text and draw(st.booleans()):
        i = draw(st.integers(0, len(text)))
        text = text[:i] + "'" + text[i:]
    return text.encode()


@st.composite
def literals(draw: Any) -> bytes:
    kind = draw(st.sampled_from(["hex", "dec", "bin", "word", "small"]))
    suffix = draw(st.sampled_from(SUFFIXES))
    if kind == "hex":
        body = draw(st.sampled_from([b"0x", b"0X"])) + _digits(draw, "0123456789abcdefABCDEF", 1, 18)
    elif kind == "bin":
        body = draw(st.sampled_from([b"0b", b"0B"])) + _digits(draw, "01", 1, 40)
    elif kind == "dec":
        body = str(draw(st.integers(0, 2**70))).encode()
    elif kind == "word":
        body = draw(
            st.sampled_from([b"0xffffffff", b"0xFFFFFFFF", b"4294967295", b"0xffffffffffffffff", b"-1", b"~0", b"0"])
        )
        return body + suffix
    else:
        body = str(draw(st.integers(0, 70))).encode()
    return body + suffix


@st.composite
def expressions(draw: Any, depth: int = 0, names: tuple[bytes, ...] = tuple(POOL)) -> bytes:
    atoms = [literals()]
    if names:
        atoms.append(st.sampled_from(names))
    atoms.append(
        st.sampled_from(
            [b"__activemask()", b"__ballot_sync(FULL, p)", b"__ballot(1)", b"f(x)", b"__match_any_sync(0xffffffff, p)"]
        )
    )
    if depth >= 3:
        return draw(st.one_of(*atoms))
    form = draw(st.integers(0, 9))
    sub = expressions(depth + 1, names)
    if form <= 2:
        return draw(st.one_of(*atoms))
    if form == 3:
        return draw(st.sampled_from([b"~", b"-", b"+", b"~ "])) + draw(sub)
    if form == 4:
        return b"(" + draw(sub) + b")"
    if form == 5:
        op = draw(st.sampled_from([b"|", b"&", b"^", b"+", b"-", b"*", b" | ", b"&&", b"/"]))
        return draw(sub) + op + draw(sub)
    if form == 6:  # shifts by small counts (Python's unbounded shifts of huge counts take forever)
        op = draw(st.sampled_from([b"<<", b">>", b" << ", b" >> "]))
        return draw(sub) + op + str(draw(st.integers(0, 70))).encode() + draw(st.sampled_from(SUFFIXES[:3]))
    if form == 7:
        t = draw(st.sampled_from(CASTS))
        style = draw(st.integers(0, 3))
        if style == 0:
            return b"(" + t + b")" + draw(sub)
        if style == 1:
            return b"static_cast<" + t + b">(" + draw(sub) + b")"
        if style == 2:
            return t.replace(b" ", b"") + b"(" + draw(sub) + b")"
        return b"( " + t + b" )(" + draw(sub) + b")"
    if form == 8:
        return b"((void)" + draw(sub) + b", " + draw(sub) + b")"
    return draw(sub).replace(b" ", draw(st.sampled_from([b" ", b"\n", b"\t", b"  "])))


@st.composite
def programs(draw: Any) -> tuple[bytes, bytes, Rows]:
    """A file defining some of POOL (each from the names before it), a call whose mask is an expression, and
    a project table with some names."""
    lines: list[bytes] = []
    params: list[bytes] = [b"float* d"]
    for i, name in enumerate(POOL):
        earlier = tuple(POOL[:i])
        how = draw(st.integers(0, 9))
        expr = draw(expressions(1, earlier))
        t = draw(st.sampled_from(TYPES))
        if how == 0:
            lines.append(b"#define " + name + b" " + expr.replace(b"\n", b" "))
        elif how == 1:
            lines.append(b"  " + t + b" " + name + b" = " + expr + b";")
        elif how == 2:
            lines.append(b"  " + t + b" " + name + b"{" + expr + b"};")
            lines.append(b"  " + name + draw(st.sampled_from([b" = 3;", b"++;", b" |= 1;", b" == 2;", b".x = 1;"])))
        elif how == 3:
            params.append(t + b" " + name)
        elif how == 4:
            lines.append(b"  " + t + b" " + name + b";")
        elif how == 5:
            lines.append(b"  for (" + t + b" " + name + b" = " + expr + b"; ; ) {}")
        elif how == 6:
            lines.append(b"  return " + name + b" = " + expr + b";")
        # else: not defined here
    mask = draw(expressions(0))
    body = b"\n".join(lines)
    head = b"__global__ void k(" + b", ".join(params) + b") {\n"
    if draw(st.booleans()):
        head, body = body + b"\n" + head, b""
    call = b"  v = __shfl_sync(" + mask + b", v, 1);\n"
    data = head + body + b"\n" + call + b"}\n"
    rows: list[tuple[str, str, int, int, bool]] = []
    for name in sorted(draw(st.sets(st.sampled_from(POOL), max_size=3))):
        width = draw(st.sampled_from([32, 64]))
        value = draw(st.sampled_from([0xFFFFFFFF, 2**64 - 1, 0xFF, 0]))
        rows.append((name.decode(), f"#define {name.decode()} {value:#x}", value & ((1 << width) - 1), width, False))
    return data, mask, tuple(rows)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs())
def test_generated_masks(program: tuple[bytes, bytes, Rows]) -> None:
    data, mask, rows = program
    start = data.rindex(b"__shfl_sync(")
    end = start + len(b"__shfl_sync")
    span = masks.first_argument(data, end)
    assert native()._masks_first_argument(data, end) == span
    check_classify(data, start, mask, rows)
    if span is not None:
        check_classify(data, start, data[span[0] : span[1]], rows)
        check_classify(data, start, data[span[0] : span[1]], ())


SOUP = [
    b"#define ",
    b"# define ",
    b"const ",
    b"constexpr ",
    b"unsigned ",
    b"long ",
    b"int ",
    b"auto ",
    b"uint64_t ",
    b"return ",
    b"for (",
    b"if(",
    b"FULL",
    b"mask",
    b"m2",
    b"xmask",
    b"mask_",
    b" ",
    b"\t",
    b"\n",
    b"\r\n",
    b"\\\n",
    b"=",
    b"==",
    b"|=",
    b"<<=",
    b"++",
    b"--",
    b"->",
    b".",
    b">",
    b"::",
    b";",
    b",",
    b"(",
    b")",
    b"{",
    b"}",
    b"[",
    b"]",
    b"//",
    b"/*",
    b"*/",
    b"'",
    b'"',
    b"0xffffffff",
    b"0xffu",
    b"~0",
    b"-1",
    b"1 << 31",
    b"__activemask()",
    b"__ballot_sync(",
    b"(unsigned)",
    b"static_cast<uint32_t>(",
    b"\xe9",
]


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    st.lists(st.sampled_from(SOUP), max_size=60).map(b"".join),
    st.lists(st.sampled_from(SOUP), min_size=1, max_size=8).map(b"".join),
    st.sampled_from([b"", b", v, 1);", b")", b";"]),
)
def test_token_soup(before: bytes, mask: bytes, after: bytes) -> None:
    """Declarations, defines, assignments and parameter lists in any order around a call."""
    data = before + b"__shfl_sync(" + mask + after + b"\n}"
    start = len(before)
    check_file(data)
    check_classify(data, start, mask)
    check_classify(data, start, mask.strip(), (("FULL", "#define FULL 0xffffffff", 0xFFFFFFFF, 32, False),))


@settings(max_examples=300, deadline=None)
@given(expressions(0, ()))
@example(b"~0<<0-1l")  # a shift by 2**64-1 (0 - 1 as unsigned): the Python engine once built that int
@example(b"1u << (2 - 3)")
@example(b"0 | " + b"(" * 63 + b"1" + b")" * 63)  # nested as deep as both evaluators go
@example(b"0 | " + b"(" * 64 + b"1" + b")" * 64)  # one deeper: not a constant, for both
@example(b"0 | " + b"(" * 900 + b"1" + b")" * 900)  # (Python's recursion limit is never reached)
@example(b"-" * 70 + b"1")
def test_generated_constants(text: bytes) -> None:
    assert native()._masks_constant(text) == masks.constant(text)
    check_classify(b"", 0, text)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from([b"const", b"unsigned", b"long", b"int", b"std::uint32_t", b"static", b"short", b"x"]),
        max_size=5,
    ),
    st.sampled_from([b" ", b"\t", b"\n ", b"  "]),
)
def test_int_type(words: list[bytes], sep: bytes) -> None:
    text = sep.join(words)
    assert native()._masks_int_type(text) == masks.int_type(text)


# --- headers ----------------------------------------------------------------------------------------------


@st.composite
def headers(draw: Any) -> bytes:
    lines: list[bytes] = []
    for _ in range(draw(st.integers(0, 8))):
        name = draw(st.sampled_from(POOL))
        expr = draw(expressions(2, ())).replace(b"\n", b" ")
        kind = draw(st.integers(0, 5))
        sp = draw(st.sampled_from([b" ", b"  ", b"\t", b" \t"]))
        if kind == 0:
            line = b"#" + draw(st.sampled_from([b"", b" "])) + b"define" + sp + name + sp + expr
            line += draw(st.sampled_from([b"", b" // c", b" /* c */", b" \\", b"  "]))
        elif kind == 1:
            quals = draw(st.sampled_from([b"", b"static ", b"static inline ", b"__device__ ", b"inline"]))
            konst = draw(st.sampled_from([b"const", b"constexpr", b"constexprx"]))
            t = draw(st.sampled_from(TYPES))
            line = quals + konst + sp + t + sp + name + draw(st.sampled_from([b" = ", b"=", b" =\t"])) + expr + b";"
        elif kind == 2:
            line = b"const " + draw(st.sampled_from(TYPES)) + b" " + name + b"[2] = {1, 2};"
        elif kind == 3:
            line = b"  " + name + b" = " + expr + b";"
        elif kind == 4:
            line = b"#define " + name + b"(x) " + expr
        else:
            line = b"constexpr unsigned " + name + b" = " + expr + b"; const int other = 1;"
        lines.append(line)
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))
    return eol.join(lines) + draw(st.sampled_from([b"", eol]))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(headers(), min_size=1, max_size=4), st.sets(st.sampled_from(POOL), min_size=1))
def test_generated_headers(files: list[bytes], wanted: set[bytes]) -> None:
    tables = [check_header(data, wanted) for data in files]
    check_merge(tables)


# --- call rewrites ----------------------------------------------------------------------------------------

ARG_PIECES = [
    b"v",
    b"x + 1",
    b"(a, b)",
    b"f(c)",
    b" 16 ",
    b"{1, 2}",
    b"a[i]",
    b";",
    b"",
    b"\t",
    b"\n",
    b"(",
    b")",
    b"]",
]


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from([b"__shfl_down_sync", b"__activemask", b"__syncwarp", b"__ballot_sync"]),
    st.sampled_from([b"", b" ", b"\t ", b"\n"]),
    st.lists(st.lists(st.sampled_from(ARG_PIECES), max_size=3).map(b"".join), max_size=4),
    st.sampled_from([b")", b");", b"", b") + 1;"]),
    st.sampled_from(ACTIONS),
)
def test_generated_rewrites(name: bytes, gap: bytes, args: list[bytes], close: bytes, action: str) -> None:
    data = b"x = " + name + gap + b"(" + b", ".join(args) + close
    for replacement in (b"R", b"__ballot(1)", b""):
        check_rewrite(data, 4 + len(name), Downgrade(name.decode(), (6, 2), replacement, action))


def test_downgrade_json() -> None:
    n = native()
    assert n._downgrade_from_json('["__shfl_sync", [6, 2], "__shfl", "drop-first-arg"]') == (
        "__shfl_sync",
        (6, 2),
        "__shfl",
        "drop-first-arg",
    )
    assert n._downgrade_from_json(
        '{"cuda_name": "__syncwarp", "below": [7, 0, 1], "replacement": "__builtin_amdgcn_wave_barrier()", '
        '"action": "call"}'
    ) == ("__syncwarp", (7, 0), "__builtin_amdgcn_wave_barrier()", "call")
    with pytest.raises(ValueError):
        n._downgrade_from_json('["x", [6, 2], "y", "drop"]')


# --- real corpora (manual: MONARCH_MASKS_CORPUS) ----------------------------------------------------------


@pytest.mark.skipif(not os.environ.get("MONARCH_MASKS_CORPUS"), reason="MONARCH_MASKS_CORPUS not set")
def test_corpus() -> None:
    for root in os.environ["MONARCH_MASKS_CORPUS"].split(":"):
        files = [p.read_bytes() for p in source_files(Path(root))]
        sites = check_tree(files)
        print(f"{root}: {len(files)} files, {sites} call sites compared")
