"""The SIMD-in-a-word functions of the compat header (tools/hipify/data/hipify_compat.h) against a reference of the semantics the CUDA
Math API documents ("SIMD Intrinsics"), on the host: every byte-lane function exhaustively (all 65,536 pairs of
lane values, in each of the four lanes, the other lanes random), every 16-bit-lane function on the lane limits and
random words, and with hypothesis. The reference is numpy, written from the documentation, lane by lane."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tools.hipify import simd

HEADER = simd.SOURCE
_SIGNATURE = re.compile(r"HIPIFY_COMPAT_FN unsigned int (__v\w+)\(([^)]*)\)")

Lanes = np.ndarray  # int64 lane values


def arities() -> dict[str, int]:
    found = {m.group(1): m.group(2).count(",") + 1 for m in _SIGNATURE.finditer(HEADER.read_text())}
    assert set(found) == {n.decode() for n in simd.names() if simd.family(n).kind == "simd"}
    return found


# -- the reference: what each function does to one lane (s: signed lane values, u: unsigned), from the docs -------
def _sat(v: Lanes, lo: int, hi: int) -> Lanes:
    return np.clip(v, lo, hi)


def _avg_away(total: Lanes) -> Lanes:  # "ties rounded away from zero"
    return np.sign(total) * ((np.abs(total) + 1) // 2)


LaneOp = Callable[[Lanes, Lanes, Lanes, Lanes, int, int, int], Lanes]
REFERENCE: dict[str, LaneOp] = {
    "abs": lambda sa, sb, ua, ub, lo, hi, um: np.abs(sa),
    "absss": lambda sa, sb, ua, ub, lo, hi, um: _sat(np.abs(sa), lo, hi),
    "absdiffs": lambda sa, sb, ua, ub, lo, hi, um: np.abs(sa - sb),
    "absdiffu": lambda sa, sb, ua, ub, lo, hi, um: np.abs(ua - ub),
    "add": lambda sa, sb, ua, ub, lo, hi, um: ua + ub,
    "addss": lambda sa, sb, ua, ub, lo, hi, um: _sat(sa + sb, lo, hi),
    "addus": lambda sa, sb, ua, ub, lo, hi, um: _sat(ua + ub, 0, um),
    "avgs": lambda sa, sb, ua, ub, lo, hi, um: _avg_away(sa + sb),
    "avgu": lambda sa, sb, ua, ub, lo, hi, um: (ua + ub + 1) // 2,
    "haddu": lambda sa, sb, ua, ub, lo, hi, um: (ua + ub) // 2,
    "maxs": lambda sa, sb, ua, ub, lo, hi, um: np.maximum(sa, sb),
    "maxu": lambda sa, sb, ua, ub, lo, hi, um: np.maximum(ua, ub),
    "mins": lambda sa, sb, ua, ub, lo, hi, um: np.minimum(sa, sb),
    "minu": lambda sa, sb, ua, ub, lo, hi, um: np.minimum(ua, ub),
    "neg": lambda sa, sb, ua, ub, lo, hi, um: -sa,
    "negss": lambda sa, sb, ua, ub, lo, hi, um: _sat(-sa, lo, hi),
    "sub": lambda sa, sb, ua, ub, lo, hi, um: ua - ub,
    "subss": lambda sa, sb, ua, ub, lo, hi, um: _sat(sa - sb, lo, hi),
    "subus": lambda sa, sb, ua, ub, lo, hi, um: _sat(ua - ub, 0, um),
}
_COMPARE = {
    "eq": np.equal,
    "ne": np.not_equal,
    "ge": np.greater_equal,
    "gt": np.greater,
    "le": np.less_equal,
    "lt": np.less,
}


def _comparison(stem: str) -> LaneOp:
    """__vcmp<op>[s|u]: all ones where it holds; __vset<op>[s|u]: 1 where it holds."""
    m = re.fullmatch(r"(cmp|set)(eq|ne|ge|gt|le|lt)([su]?)", stem)
    assert m is not None, stem
    kind, op, sign = m.groups()
    compare = _COMPARE[op]

    def lane(sa: Lanes, sb: Lanes, ua: Lanes, ub: Lanes, lo: int, hi: int, um: int) -> Lanes:
        holds = compare(ua, ub) if sign == "u" else compare(sa, sb)  # eq/ne: either view
        return np.where(holds, um if kind == "cmp" else 1, 0)

    return lane


def reference(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    m = re.fullmatch(r"__v(\w+?)([24])", name)
    assert m is not None
    stem, count = m.group(1), int(m.group(2))
    bits = 32 // count
    um, lo, hi = (1 << bits) - 1, -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    result = np.zeros(a.shape, dtype=np.int64)
    for i in range(count):
        ua, ub = (a64 >> (bits * i)) & um, (b64 >> (bits * i)) & um
        sa, sb = np.where(ua > hi, ua - (1 << bits), ua), np.where(ub > hi, ub - (1 << bits), ub)
        if stem in ("sads", "sadu"):  # the sum of the lanes' absolute differences, one number
            result += np.abs(sa - sb) if stem == "sads" else np.abs(ua - ub)
            continue
        op = REFERENCE.get(stem) or _comparison(stem)
        result |= (op(sa, sb, ua, ub, lo, hi, um) & um) << (bits * i)
    return (result & 0xFFFFFFFF).astype(np.uint32)


# -- the header, compiled for the host --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compat(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, np.ndarray, np.ndarray], np.ndarray]:
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++-15")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    work = tmp_path_factory.mktemp("simd")
    cases = []
    for name, arity in sorted(arities().items()):
        call = f"{name}(a[i], b[i])" if arity == 2 else f"{name}(a[i])"
        cases.append(f'  if (!strcmp(name, "{name}")) {{ for (long i = 0; i < n; ++i) out[i] = {call}; return 0; }}')
    (work / "harness.cpp").write_text(
        f'#include <string.h>\n#include "{HEADER}"\n'
        'extern "C" int hs_apply(const char* name, const unsigned* a, const unsigned* b, unsigned* out, long n) {\n'
        + "\n".join(cases)
        + "\n  return -1;\n}\n"
    )
    lib = work / "libharness.so"
    subprocess.run(
        [
            cxx,
            "-std=c++17",
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-shared",
            "-fPIC",
            "-o",
            str(lib),
            str(work / "harness.cpp"),
        ],
        check=True,
        capture_output=True,
    )
    handle = ctypes.CDLL(str(lib))
    handle.hs_apply.restype = ctypes.c_int
    pointer = np.ctypeslib.ndpointer(dtype=np.uint32, flags="C_CONTIGUOUS")
    handle.hs_apply.argtypes = [ctypes.c_char_p, pointer, pointer, pointer, ctypes.c_long]

    def run(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.ascontiguousarray(a, dtype=np.uint32), np.ascontiguousarray(b, dtype=np.uint32)
        out = np.zeros(a.shape, dtype=np.uint32)
        assert handle.hs_apply(name.encode(), a, b, out, len(a)) == 0, name
        return out

    return run


def _check(
    compat: Callable[[str, np.ndarray, np.ndarray], np.ndarray], name: str, a: np.ndarray, b: np.ndarray
) -> None:
    got, want = compat(name, a, b), reference(name, a, b)
    bad = np.nonzero(got != want)[0]
    if len(bad):
        i = bad[0]
        pytest.fail(f"{name}(0x{a[i]:08x}, 0x{b[i]:08x}) = 0x{got[i]:08x}, the documented result is 0x{want[i]:08x}")


BYTE_LANES = sorted(n for n in arities() if n.endswith("4"))
HALF_LANES = sorted(n for n in arities() if n.endswith("2"))


def test_every_cuda_simd_intrinsic_is_there() -> None:
    """The 82 of the CUDA Math API (HIPIFY 7.2 lists 80 of them: __vcmpleu2 and __vsetgtu2 are missing there)."""
    names = set(arities())
    stems = {n[3:-1] for n in names}
    assert len(names) == 82 and all(f"__v{s}2" in names and f"__v{s}4" in names for s in stems)
    assert {"__vcmpleu2", "__vsetgtu2", "__vsub4", "__vsubss4", "__vcmpne4", "__vcmpeq4", "__vabsdiffu4"} <= names


@pytest.mark.parametrize("name", BYTE_LANES)
def test_byte_lanes_exhaustively(compat: Callable[[str, np.ndarray, np.ndarray], np.ndarray], name: str) -> None:
    rng = np.random.default_rng(4)
    x, y = (v.ravel().astype(np.uint32) for v in np.meshgrid(np.arange(256), np.arange(256)))
    for lane in range(4):  # every pair of lane values in this lane, random bytes in the others
        keep = np.uint32(~(0xFF << (8 * lane)) & 0xFFFFFFFF)
        a = (rng.integers(0, 2**32, x.size, dtype=np.uint32) & keep) | (x << np.uint32(8 * lane))
        b = (rng.integers(0, 2**32, y.size, dtype=np.uint32) & keep) | (y << np.uint32(8 * lane))
        _check(compat, name, a, b)


_LIMITS16 = [0, 1, 2, 0x7E, 0x7F, 0x80, 0xFF, 0x100, 0x7FFE, 0x7FFF, 0x8000, 0x8001, 0xFFFE, 0xFFFF]


@pytest.mark.parametrize("name", HALF_LANES)
def test_half_lanes_at_the_limits_and_at_random(
    compat: Callable[[str, np.ndarray, np.ndarray], np.ndarray], name: str
) -> None:
    words = np.array([hi << 16 | lo for hi in _LIMITS16 for lo in _LIMITS16], dtype=np.uint32)
    a, b = (v.ravel() for v in np.meshgrid(words, words))  # every pair of limit values, in both lanes
    _check(compat, name, a, b)
    rng = np.random.default_rng(2)
    _check(
        compat, name, rng.integers(0, 2**32, 200_000, dtype=np.uint32), rng.integers(0, 2**32, 200_000, dtype=np.uint32)
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)), min_size=1, max_size=32))
def test_half_lanes_with_hypothesis(
    compat: Callable[[str, np.ndarray, np.ndarray], np.ndarray], pairs: list[tuple[int, int]]
) -> None:
    a = np.array([p[0] for p in pairs], dtype=np.uint32)
    b = np.array([p[1] for p in pairs], dtype=np.uint32)
    for name in HALF_LANES:
        _check(compat, name, a, b)


def test_the_documented_examples(compat: Callable[[str, np.ndarray, np.ndarray], np.ndarray]) -> None:
    """The examples the CUDA Math API gives (and the reference agrees)."""
    examples = [
        ("__vabs2", 0x80008000, 0, 0x80008000),
        ("__vabsss2", 0x80008000, 0, 0x7FFF7FFF),
        ("__vneg2", 0x80008000, 0, 0x80008000),
        ("__vnegss2", 0x80008000, 0, 0x7FFF7FFF),
        ("__vcmpeq2", 0x12345678, 0x1234ABCD, 0xFFFF0000),
        ("__vcmpne2", 0x12345678, 0x1234ABCD, 0x0000FFFF),
        ("__vcmpges2", 0x80007FFF, 0x7FFF8000, 0x0000FFFF),
        ("__vcmpgeu2", 0x80007FFF, 0x7FFF8000, 0xFFFF0000),
        ("__vcmpleu2", 0x80007FFF, 0x7FFF8000, 0x0000FFFF),
        ("__vseteq2", 0x12345678, 0x1234ABCD, 0x00010000),
        ("__vsetgtu2", 0x80007FFF, 0x7FFF8000, 0x00010000),
        ("__vsetlts2", 0x80007FFF, 0x7FFF8000, 0x00010000),
    ]
    for name, a, b, want in examples:
        args = np.array([a], dtype=np.uint32), np.array([b], dtype=np.uint32)
        assert int(compat(name, *args)[0]) == want == int(reference(name, *args)[0]), name


def test_the_reference_can_tell_a_wrong_implementation() -> None:
    """A saturating add that wraps, or an average rounded the wrong way, is caught (the tests can fail)."""
    a = np.array([0x7F7F7F7F, 0x00FF0003], dtype=np.uint32)
    b = np.array([0x01010101, 0x00FF0000], dtype=np.uint32)
    assert not np.array_equal(reference("__vaddss4", a, b), reference("__vadd4", a, b))
    assert (
        reference("__vavgs2", np.array([0xFFFD0003], dtype=np.uint32), np.array([0], dtype=np.uint32))[0] == 0xFFFE0002
    )


# -- what the translation does with them ----------------------------------------------------------------------------
def _tree(
    tmp_path: Path, files: dict[str, str], defines: tuple[tuple[str, str | None], ...] = ()
) -> tuple[object, Path]:
    from tools.hipify import HipifyOptions, hipify_tree  # noqa: PLC0415

    for rel, text in files.items():
        (tmp_path / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / rel).write_text(text)
    out = tmp_path / "out"
    return hipify_tree([tmp_path / "src"], out, HipifyOptions(hip_version=(6, 4), jobs=1, defines=defines)), out


USES = "__global__ void k(unsigned* p) { p[0] = __vsub4(p[1], p[2]) & __vcmpne4(p[3], 0u); }\n"


def test_the_translation_provides_only_what_is_used_where_it_is_used(tmp_path: Path) -> None:
    res, out = _tree(
        tmp_path,
        {
            "a/k.cu": '#include "../q.cuh"\n' + USES,
            "q.cuh": "__device__ unsigned q(unsigned x) { return __vabsdiffu4(x, 1u); }\n",
            "plain.cu": "__global__ void z() {}\n",
        },
    )
    header = (out / simd.OUTPUT_NAME).read_bytes()
    assert header.startswith(b"// Generated by `python -m tools hipify`")
    assert set(re.findall(rb"@begin (\w+)", header)) == {b"__vsub4", b"__vcmpne4", b"__vabsdiffu4"}
    assert b'#include "../hipify_compat.h"' in (out / "a" / "k.hip").read_bytes()
    assert b'#include "hipify_compat.h"' in (out / "q_hip.cuh").read_bytes()
    assert b"hipify_compat" not in (out / "plain.hip").read_bytes()
    notes = [f for f in res.findings if f.rule == "simd-intrinsic"]
    assert {f.name for f in notes} == {"__vsub4", "__vcmpne4", "__vabsdiffu4"} and not any(f.blocking for f in notes)
    assert res.generated == [out / simd.OUTPUT_NAME] and res.blocking == 0
    # a second run changes nothing; a tree that stops using them loses the header
    again, _out = _tree(tmp_path, {})
    assert (out / simd.OUTPUT_NAME) in again.unchanged
    (tmp_path / "src" / "a" / "k.cu").write_text("__global__ void k() {}\n")
    (tmp_path / "src" / "q.cuh").write_text("#pragma once\n")
    last, _out = _tree(tmp_path, {})
    assert not (out / simd.OUTPUT_NAME).exists() and (out / simd.OUTPUT_NAME) in last.removed


def test_what_the_project_defines_itself_stays_its_own(tmp_path: Path) -> None:
    """A hand port's compat header (ggml's vendors/hip.h defines __vsub4 & co): no finding, not provided again."""
    own = "static __device__ __forceinline__ int __vsub4(const int a, const int b) { return a - b; }\n"
    res, out = _tree(tmp_path, {"vendor.h": own, "k.cu": '#include "vendor.h"\n' + USES})
    assert set(re.findall(rb"@begin (\w+)", (out / simd.OUTPUT_NAME).read_bytes())) == {b"__vcmpne4"}
    assert {f.name for f in res.findings if f.rule == "simd-intrinsic"} == {"__vcmpne4"}


def test_a_definition_the_build_does_not_include_is_not_the_projects(tmp_path: Path) -> None:
    """ggml's vendors/hip.h defines __vsubss4 & co for its hand port, included only `#if defined(GGML_USE_HIP)`: with
    -U of that switch (the CUDA build's), its definitions are not the translation's, so the header provides them."""
    own = "static __device__ __forceinline__ int __vsub4(const int a, const int b) { return a - b; }\n"
    own += '__device__ void fence() { asm volatile("membar.gl;"); }\n'  # blocking where a unit includes it
    common = '#if defined(VENDOR_HIP)\n#include "vendor.h"\n#endif\n' + USES
    files = {"vendor.h": own, "common.cuh": common, "k.cu": '#include "common.cuh"\n'}
    res, out = _tree(tmp_path / "undefined", files, defines=(("VENDOR_HIP", None),))
    assert set(re.findall(rb"@begin (\w+)", (out / simd.OUTPUT_NAME).read_bytes())) == {b"__vsub4", b"__vcmpne4"}
    # included only on a dead line, vendor.h is outside the CUDA build: its PTX is no blocking finding
    assert res.blocking == 0 and any(Path(f.file).name == "vendor.h" and not f.blocking for f in res.findings)
    # not told: the include may be compiled, so the definition stays the project's (as without the branch)
    res, out = _tree(tmp_path / "unknown", files)
    assert set(re.findall(rb"@begin (\w+)", (out / simd.OUTPUT_NAME).read_bytes())) == {b"__vcmpne4"}
    assert [Path(f.file).name for f in res.findings if f.blocking] == ["vendor.h"]


def test_without_the_header_they_block_with_the_fix_in_the_text(tmp_path: Path) -> None:
    res, out = _tree(tmp_path, {simd.OUTPUT_NAME: "// the project's own file of that name\n", "k.cu": USES})
    found = [f for f in res.findings if f.rule == "simd-intrinsic"]
    assert found and all(f.blocking and f.kind == "unsupported" for f in found)
    assert "per-lane integer arithmetic" in found[0].suggestion
    assert (out / simd.OUTPUT_NAME).read_bytes() == b"// the project's own file of that name\n"
