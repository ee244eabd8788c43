"""hipify under fuzzing (issue 8): mutated real CUDA sources through the whole tree pass, random bytes
through atheris. No exception, no hang past a bound, every byte outside identifiers (and include paths)
unchanged but for the target rules' own rewrites (issue 14: added runtime includes and warp-sync macro, (void)
before discarded hipError_t calls, widened lane masks; see ``normalized``), and a second run changes nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _support import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools.hipify import HipifyOptions, hipify_tree

pytestmark = pytest.mark.fault

CORPUS = sorted(p.read_bytes() for p in (ROOT / "csrc").glob("*") if p.suffix in (".cu", ".h"))
IDENT = re.compile(rb"[A-Za-z0-9_\x80-\xff]+")
INCLUDE = re.compile(rb"#[ \t]*include[^\n]*")
NEWEST = (7, 0)  # a target with every warp intrinsic, so no downgrade rewrite applies


# what the target rules add (docs/hipify.md, "Targets"), taken out of both sides before comparing
ADDED_LINES = re.compile(
    rb"^#include [<\"][^>\"\n]*[>\"]  // \[hipify\][^\n]*\n"  # the runtime, a C header it brought, compat
    rb"|^#ifndef HIP_ENABLE_WARP_SYNC_BUILTINS  // \[hipify\][^\n]*\n#define HIP_ENABLE_WARP_SYNC_BUILTINS\r?\n#endif\r?\n",
    re.M,
)
VOID = re.compile(rb"\(void\)(?=[A-Za-z_:])")
WIDENED = re.compile(rb"\((\w+) \| 0xffffffff00000000ULL\)|\(\(void\)(\w+), __activemask\(\)\)")


def normalized(data: bytes) -> bytes:
    return VOID.sub(b"", WIDENED.sub(lambda m: m.group(1) or m.group(2), ADDED_LINES.sub(b"", data)))


def masked(data: bytes) -> bytes:
    return IDENT.sub(b"I", INCLUDE.sub(b"#include", normalized(data)))


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(CORPUS)))
    for _ in range(draw(st.integers(1, 8))):
        pos = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["insert", "delete", "flip", "dup"]))
        if op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 64))]
        elif op == "flip" and pos < len(data):
            data[pos] ^= 1 << draw(st.integers(0, 7))
        else:
            data[pos:pos] = data[max(0, pos - 40) : pos]
    return bytes(data)


@settings(
    max_examples=60, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(mutated())
def test_mutated_sources_through_the_tree_pass(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    src = root / "src"
    src.mkdir()
    (src / "k.cu").write_bytes(data)
    out = root / "out"
    result = hipify_tree([src], out, HipifyOptions(hip_version=NEWEST))
    produced = (
        result.outputs[(src / "k.cu").resolve()]
        if (src / "k.cu").resolve() in result.outputs
        else next(iter(result.outputs.values()))
    )
    translated = produced.read_bytes()
    assert masked(translated) == masked(data)
    again = hipify_tree([src], out, HipifyOptions(hip_version=NEWEST))
    assert again.outputs and produced.read_bytes() == translated


HARNESS = textwrap.dedent(
    """
    import re, sys
    import atheris
    with atheris.instrument_imports():
        from tools.hipify.mapping import load_database
        from tools.hipify.translate import Translator
    TR = Translator(load_database(), None)
    IDENT = re.compile(rb"[A-Za-z0-9_\\x80-\\xff]+")
    INCLUDE = re.compile(rb"#[ \\t]*include[^\\n]*")
    VOID = re.compile(rb"\\(void\\)(?=[A-Za-z_:])")
    WIDENED = re.compile(rb"\\((\\w+) \\| 0xffffffff00000000ULL\\)|\\(\\(void\\)(\\w+), __activemask\\(\\)\\)")
    def masked(b):  # (the translator alone adds no lines: that is the tree pass)
        b = VOID.sub(b"", WIDENED.sub(lambda m: m.group(1) or m.group(2), b))
        return IDENT.sub(b"I", INCLUDE.sub(b"#include", b))
    def one(data):
        out = TR.translate(data).data
        if masked(out) != masked(data):
            raise AssertionError("a byte outside identifiers changed")
        if TR.translate(out).data != out:
            raise AssertionError("not idempotent")
    atheris.Setup(sys.argv, one)
    atheris.Fuzz()
    """
)


def test_atheris_random_bytes(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    harness = tmp_path / "fuzz_hipify.py"
    harness.write_text(HARNESS)
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    for i, data in enumerate(CORPUS):
        (seeds / f"seed{i}").write_bytes(data)
    proc = subprocess.run(
        [sys.executable, str(harness), "-runs=10000", "-max_total_time=30", "-timeout=5", str(seeds)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Done" in proc.stderr or "DONE" in proc.stderr, proc.stderr[-2000:]
