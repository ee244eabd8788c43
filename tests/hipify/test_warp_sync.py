"""Warp *_sync lane masks by target (tools/hipify/masks.py, data/targets.tsv): full-warp masks in every spelling
become full-wavefront 64-bit masks on HIP >= 6.2, partial and run-time masks are blocking findings that say why,
HIP 6.2-6.x get the macro that declares the builtins, and the warp-size lint keeps reporting 32-lane code."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tools.hipify import HipifyOptions, hipify_tree
from tools.hipify.lint import lint_bytes
from tools.hipify.mapping import MappingDatabase
from tools.hipify.masks import MASKED, classify
from tools.hipify.translate import FileResult, RawFinding, Translator

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "warp_sync"
FULL = b"0xffffffffffffffffULL"
Write = Callable[[Path, dict[str, bytes | str]], None]


@pytest.fixture(scope="module")
def tr64(db: MappingDatabase) -> Translator:
    return Translator(db, (6, 4))


@pytest.fixture(scope="module")
def tr72(db: MappingDatabase) -> Translator:
    return Translator(db, (7, 2))


def kernel(body: str, before: str = "") -> bytes:
    return (
        before + "__global__ void k(float* d, unsigned param) {\n  float v = d[threadIdx.x];\n" + body + "\n}\n"
    ).encode()


def rules(res: FileResult) -> list[tuple[str, str, bool]]:
    return [(f.rule, f.name, f.blocking) for f in res.findings]


@pytest.mark.parametrize(
    "mask",
    [
        "0xffffffff",
        "0xFFFFFFFF",
        "0xffffffffu",
        "0xFFFFFFFFU",
        "0xffffffffUL",
        "0xffffffffull",  # the value names 32 lanes, whatever the type
        "4294967295u",
        "4294967295",
        "~0u",
        "~0",
        "~0x0",
        "-1",
        "-1u",
        "(unsigned)-1",
        "(unsigned int)0xffffffff",
        "static_cast<unsigned>(0xffffffff)",
        "static_cast<uint32_t>(-1)",
        "uint32_t(-1)",
        "( 0xffffffff )",
        "(uint64_t)~0u",
    ],
)
def test_full_warp_literals_become_the_full_wavefront(tr64: Translator, tr72: Translator, mask: str) -> None:
    src = kernel(f"  v += __shfl_down_sync({mask}, v, 1);")
    for tr in (tr64, tr72):
        res = tr.translate(src)
        assert b"__shfl_down_sync(" + FULL + b", v, 1);" in res.data, (mask, res.data)
        assert ("sync-mask-widened", "__shfl_down_sync", False) in rules(res)
        assert not [f for f in res.findings if f.blocking and f.rule == "lane-mask-32"]


@pytest.mark.parametrize("mask", ["0xffffffffffffffffULL", "~0ull", "~0ULL", "-1LL", "(unsigned long long)-1"])
def test_full_wavefront_masks_are_left_alone(tr72: Translator, mask: str) -> None:
    src = kernel(f"  v += __shfl_xor_sync({mask}, v, 1);")
    res = tr72.translate(src)
    assert f"__shfl_xor_sync({mask}, v, 1)".encode() in res.data
    assert not [f for f in res.findings if f.rule in ("sync-mask-widened", "lane-mask-32")]


def test_names_holding_a_full_mask_keep_the_name(tr72: Translator) -> None:
    before = (
        "#define FULL_MASK 0xffffffff\n"
        "#define ALIAS FULL_MASK\n"
        "constexpr unsigned kFull = 0xffffffffu;\n"
        "static const uint32_t kAll = ~0u;\n"
        "const unsigned long long kWide = 0xffffffff;\n"  # 64-bit, but only 32 lanes
    )
    body = "\n".join(f"  v += __shfl_sync({n}, v, 0);" for n in ("FULL_MASK", "ALIAS", "kFull", "kAll", "kWide"))
    res = tr72.translate(kernel(body, before))
    for name in ("FULL_MASK", "ALIAS", "kFull", "kAll", "kWide"):
        assert f"__shfl_sync(({name} | 0xffffffff00000000ULL), v, 0);".encode() in res.data
    widened = [f for f in res.findings if f.rule == "sync-mask-widened"]
    assert len(widened) == 5 and not any(f.blocking for f in res.findings)
    assert "#define FULL_MASK 0xffffffff" in widened[0].reason  # the report says what the name is
    assert tr72.translate(res.data).data == res.data  # a second run: 64-bit full masks, nothing to do


def test_activemask(tr72: Translator) -> None:
    body = (
        "  v += __shfl_sync(__activemask(), v, 0);\n"  # 64-bit in HIP: left
        "  unsigned long long w = __activemask();\n  v += __shfl_sync(w, v, 0);\n"  # left
        "  auto a = __activemask();\n  v += __shfl_sync(a, v, 0);\n"  # left
        "  unsigned m = __activemask();\n  v += __shfl_sync(m, v, 0);\n"  # 32 bits: the lanes of the call
        "  v += __shfl_sync((unsigned)__activemask(), v, 0);"
    )
    res = tr72.translate(kernel(body))
    assert b"__shfl_sync(__activemask(), v, 0);\n  unsigned long long w" in res.data
    assert b"__shfl_sync(w, v, 0)" in res.data and b"__shfl_sync(a, v, 0)" in res.data
    assert b"__shfl_sync(((void)m, __activemask()), v, 0)" in res.data  # m stays used (-Wunused-variable)
    assert b"__shfl_sync(__activemask(), v, 0);\n}" in res.data
    assert [f.rule for f in res.findings if f.rule == "sync-mask-widened"] == ["sync-mask-widened"] * 2
    # the lint still reports the 32-bit copy of the mask
    assert any(f.rule == "ballot-32" for f in _lint(res.data, tr72))


def _lint(data: bytes, tr: Translator) -> list[RawFinding]:
    return lint_bytes(data, tr.translate(data).comment_spans)


@pytest.mark.parametrize(
    ("mask", "why"),
    [
        ("0x0000ffff", "names only some lanes"),
        ("0xffff0000u", "names only some lanes"),
        ("(1u << 16) - 1", "names only some lanes"),
        ("LOW", "names only some lanes"),
        ("kOdd", "names only some lanes"),
        ("param", "function parameter"),
        ("m_ballot", "kept in 32 bits"),
        ("grown", "assigned again"),
        ("mask_from_elsewhere", "defined neither in this file nor"),
        ("param & 0xff", "computed at run time"),
        ("param ? 0xffffffff : 0xffff", "computed at run time"),
    ],
)
def test_partial_and_runtime_masks_block_and_say_why(tr64: Translator, mask: str, why: str) -> None:
    before = "#define LOW 0x0000ffff\n__constant__ unsigned kOdd = 0x55555555;\n"
    body = (
        "  unsigned m_ballot = __ballot_sync(0xffffffff, v > 0);\n  unsigned grown = 1;\n  grown |= 2;\n"
        f"  v += __shfl_sync({mask}, v, 0);"
    )
    res = tr64.translate(kernel(body, before))
    assert f"__shfl_sync({mask}, v, 0)".encode() in res.data  # never a silent change
    blocked = [f for f in res.findings if f.rule == "lane-mask-32"]
    assert len(blocked) == 1 and blocked[0].blocking and blocked[0].kind == "hazard", rules(res)
    assert why in blocked[0].reason and "64-bit" in blocked[0].reason and blocked[0].suggestion


@pytest.mark.parametrize("name", sorted(n.decode() for n in MASKED))
def test_every_masked_builtin(db: MappingDatabase, tr72: Translator, name: str) -> None:
    """Every CUDA builtin whose first argument is the lane mask gets the rule on 7.2 (all declared there)."""
    args = {"__match_all_sync": "v, &p", "__syncwarp": ""}.get(name, "v")
    call = f"{name}(0xffffffff{', ' if args else ''}{args})"
    res = tr72.translate(kernel(f"  int p; auto r = {call};"))
    assert f"{name}({FULL.decode()}".encode() in res.data, res.data
    assert not any(f.blocking for f in res.findings if f.rule != "ballot-32"), rules(res)


def test_hip_52_keeps_the_downgrade_and_blocks_only_unknown_masks(db: MappingDatabase) -> None:
    tr = Translator(db, (5, 2))
    body = (
        "  v += __shfl_sync(0xffffffff, v, 0);\n  v += __shfl_sync(0x0000ffff, v, 0);\n  v += __shfl_sync(param, v, 0);"
    )
    res = tr.translate(kernel(body))
    assert res.data.count(b"__shfl(v, 0)") == 3  # the mask-less form of HIP < 6.2 (data/downgrades.tsv)
    assert [(f.rule, f.blocking) for f in res.findings if f.name == "__shfl_sync"] == [
        ("sync-mask-dropped", False),
        ("lane-mask-32", True),
        ("lane-mask-32", True),
    ]


def test_syncwarp_below_7_is_a_wavefront_barrier(tr64: Translator, tr72: Translator) -> None:
    src = kernel("  __syncwarp();\n  __syncwarp(0xffffffff);")
    assert tr72.translate(src).data.count(b"__syncwarp(") == 2  # HIP 7.2 declares it
    out = tr64.translate(src)
    assert b"__syncwarp" not in out.data and out.data.count(b"__builtin_amdgcn_wave_barrier()") == 2
    assert [f.rule for f in out.findings] == ["sync-mask-dropped"] * 2


def test_warp_size_lint_keeps_firing(tr72: Translator) -> None:
    body = (
        "  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffff, v, o);\n"
        "  int lane = threadIdx.x & 31;\n  d[lane] = v;"
    )
    src = kernel(body)
    res = tr72.translate(src)
    assert FULL in res.data
    found = {f.rule for f in _lint(src, tr72)}
    assert {"warp-reduce-16", "lane-math"} <= found


def test_classify_edges() -> None:
    # a mask in a comma expression is its last operand (what the translation writes for __activemask in 32 bits)
    assert classify(b"", 0, b"((void)m, __activemask())").cls == "active"
    assert (
        classify(
            b"", 0, b"(FULL | 0xffffffff00000000ULL)", {b"FULL": ("#define FULL 0xffffffff", (0xFFFFFFFF, 32, False))}
        ).cls
        == "full64"
    )
    assert classify(b"", 0, b"0").cls == "partial"  # HIP asserts a non-zero mask
    assert classify(b"#define A B\n#define B A\n", 22, b"A").cls == "runtime"  # a cycle ends
    # a shift count past the width leaves no bits (and is not computed: 2**64-1 here would exhaust memory)
    assert classify(b"", 0, b"1ull << (0ull - 1)").cls == "partial"
    assert classify(b"", 0, b"0xffffffffu << 32").cls == "partial"
    # nesting: evaluated up to 64 levels, deeper is not a constant (and never a RecursionError)
    assert classify(b"", 0, b"0 | " + b"(" * 63 + b"0xffffffff" + b")" * 63).cls == "full32"
    assert classify(b"", 0, b"0 | " + b"(" * 500 + b"0xffffffff" + b")" * 500).cls == "runtime"


def test_blocked_file_reports_every_call(db: MappingDatabase) -> None:
    res = Translator(db, (7, 2)).translate((DATA / "blocked.cu").read_bytes())
    blocked = [f for f in res.findings if f.rule == "lane-mask-32"]
    lines = (DATA / "blocked.cu").read_bytes().count(b"_sync(") - 1  # one __ballot_sync is the mask's source
    assert len(blocked) == lines and all(f.blocking for f in blocked)


# -- the macro HIP 6.2-6.x need ------------------------------------------------------------------------------
DEFINE = b"#define HIP_ENABLE_WARP_SYNC_BUILTINS\n"


def test_define_for_64_only_and_before_the_runtime(tmp_path: Path) -> None:
    sources = [DATA / "kernels.cu", DATA / "warp.cuh"]
    outs = {}
    for version in ((5, 2), (6, 4), (7, 2)):
        out = tmp_path / f"out{version[0]}{version[1]}"
        res = hipify_tree(sources, out, HipifyOptions(hip_version=version, jobs=1))
        outs[version] = (out / "kernels.hip").read_bytes(), (out / "warp_hip.cuh").read_bytes(), res
    k64, h64, res64 = outs[(6, 4)]
    assert k64.count(DEFINE) == 1 and h64.count(DEFINE) == 1
    # before the first include: the macro must come before the TU's first HIP header
    assert k64.index(DEFINE) < k64.index(b"#include <hip/hip_runtime.h>")
    assert b"#ifndef HIP_ENABLE_WARP_SYNC_BUILTINS" in k64  # guarded: a -D or another header may define it
    notes = [f for f in res64.findings if f.rule == "warp-sync-define"]
    assert {f.file.name for f in notes} == {"kernels.cu", "warp.cuh"} and not any(f.blocking for f in notes)
    assert res64.to_json()["target"]["sync_define"] == "HIP_ENABLE_WARP_SYNC_BUILTINS"
    for version in ((5, 2), (7, 2)):
        assert DEFINE not in outs[version][0] and DEFINE not in outs[version][1]
        assert not [f for f in outs[version][2].findings if f.rule == "warp-sync-define"]


def test_define_follows_project_headers_and_is_added_once(tmp_path: Path, write: Write) -> None:
    """A .cu file that includes the runtime first and then a project header using the builtins needs the macro
    itself: the header's own definition would come too late."""
    write(
        tmp_path / "src",
        {
            "a.cu": '#include <cuda_runtime.h>\n#include "b.cuh"\n__global__ void k(float* d) { d[0] = f(d[0]); }\n',
            "b.cuh": '#pragma once\n#include "c.cuh"\n',
            "c.cuh": "#pragma once\n__device__ inline float f(float v) { return __shfl_sync(0xffffffff, v, 0); }\n",
            "own.cu": "#define HIP_ENABLE_WARP_SYNC_BUILTINS\n#include <cuda_runtime.h>\n"
            "__global__ void k2(float* d) { d[0] = __shfl_sync(0xffffffff, d[0], 0); }\n",
            "plain.cu": "#include <cuda_runtime.h>\n__global__ void k3(float* d) { d[0] = 1.f; }\n",
        },
    )
    out = tmp_path / "out"
    hipify_tree([tmp_path / "src"], out, HipifyOptions(hip_version=(6, 4), jobs=1))
    a = (out / "a.hip").read_bytes()
    assert a.startswith(b"#ifndef HIP_ENABLE_WARP_SYNC_BUILTINS") and a.count(DEFINE) == 1
    assert DEFINE in (out / "b_hip.cuh").read_bytes()  # it includes c.cuh, which uses the builtins
    assert b'#include "b_hip.cuh"' in a and b'#include "c_hip.cuh"' in (out / "b_hip.cuh").read_bytes()
    assert (out / "own.hip").read_bytes().count(b"HIP_ENABLE_WARP_SYNC_BUILTINS") == 1  # its own define
    assert DEFINE not in (out / "plain.hip").read_bytes()
    # idempotent: the translated tree translated again adds nothing
    again = tmp_path / "again"
    hipify_tree([out], again, HipifyOptions(hip_version=(6, 4), jobs=1, naming="keep"))
    for p in out.rglob("*"):
        if p.is_file() and p.suffix != ".json":
            assert (again / p.relative_to(out)).read_bytes() == p.read_bytes(), p.name


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_mask_defined_in_a_crlf_or_lf_header(tmp_path: Path, write: Write, eol: str) -> None:
    """A project header's #define of a full mask is found whatever its line endings (a CRLF header's lines end in
    \\r before the \\n)."""
    src = tmp_path / "src"
    header = f"#pragma once{eol}#define FULL_MASK 0xffffffff{eol}#define HALF 0x0000ffff{eol}"
    write(
        src,
        {
            "common.cuh": header,
            "k.cu": '#include "common.cuh"\n__global__ void k(float* d) {\n'
            "  d[0] = __shfl_sync(FULL_MASK, d[0], 0) + __shfl_sync(HALF, d[0], 0);\n}\n",
        },
    )
    res = hipify_tree([src], tmp_path / "out", HipifyOptions(hip_version=(7, 2), jobs=1))
    out = (tmp_path / "out" / "k.hip").read_bytes()
    assert b"__shfl_sync((FULL_MASK | 0xffffffff00000000ULL), d[0], 0)" in out
    reasons = [f.reason for f in res.findings if f.rule == "lane-mask-32"]
    assert len(reasons) == 1 and "HALF" in reasons[0] and "in a project header" in reasons[0], reasons


def test_mask_named_in_a_project_header(tmp_path: Path, write: Write) -> None:
    """A mask macro in a project header counts for the files that use it (the translation unit), also when only
    the header changes between runs."""
    src = tmp_path / "src"
    write(
        src,
        {
            "common.cuh": "#pragma once\n#define FULL_MASK 0xffffffff\n#define HALF 0x0000ffff\n",
            "k.cu": '#include "common.cuh"\n__global__ void k(float* d) {\n'
            "  d[0] = __shfl_sync(FULL_MASK, d[0], 0) + __shfl_sync(HALF, d[0], 0) + __shfl_sync(NOWHERE, d[0], 0);\n}\n",
        },
    )
    opts = HipifyOptions(hip_version=(7, 2), jobs=1)
    res = hipify_tree([src], tmp_path / "out", opts)
    out = (tmp_path / "out" / "k.hip").read_bytes()
    assert b"__shfl_sync((FULL_MASK | 0xffffffff00000000ULL), d[0], 0)" in out
    reasons = {f.reason.split(":")[0] for f in res.findings if f.rule == "lane-mask-32"}
    assert any("HALF" in r and "in a project header" in r for r in reasons), reasons
    assert any("NOWHERE is defined neither" in r for r in reasons), reasons
    # the header changes, k.cu does not: its translation follows the header
    (src / "common.cuh").write_text("#pragma once\n#define FULL_MASK 0x0000ffff\n#define HALF 0x0000ffff\n")
    again = hipify_tree([src], tmp_path / "out", opts)
    assert b"__shfl_sync(FULL_MASK, d[0], 0)" in (tmp_path / "out" / "k.hip").read_bytes()
    assert len([f for f in again.findings if f.rule == "lane-mask-32"]) == 3
