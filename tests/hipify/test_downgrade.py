"""Targets older than HIP 6.2 get the mask-less warp intrinsics instead of a blocked port."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tools.hipify import HipifyOptions, hipify_tree
from tools.hipify.mapping import load_database
from tools.hipify.translate import Translator

KERNEL = b"""__device__ unsigned long long warp_sum(unsigned long long v) {
  for (int o = warpSize / 2; o > 0; o /= 2) {
    v += __shfl_down_sync(__activemask(), v, o);
  }
  unsigned long long m = __activemask();
  return v + __shfl_xor_sync(m, (unsigned long long)cudaSuccess, 1);
}
"""


def run(tmp_path: Path, version: tuple[int, int]) -> tuple[bytes, list[object]]:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "k.cu").write_bytes(KERNEL)
    out = tmp_path / f"out{version[0]}{version[1]}"
    result = hipify_tree([src], out, HipifyOptions(hip_version=version))
    return (out / "k.hip").read_bytes(), list(result.findings)


def test_hip_52_drops_masks_and_reports_each_call(tmp_path: Path) -> None:
    text, findings = run(tmp_path, (5, 2))
    assert b"v += __shfl_down(v, o);" in text
    assert b"unsigned long long m = __ballot(1);" in text
    # the kept arguments are still translated
    assert b"__shfl_xor((unsigned long long)hipSuccess, 1)" in text
    hazards = [(f.line, f.name) for f in findings if getattr(f, "rule", "") == "sync-mask-dropped"]  # type: ignore[attr-defined]
    assert hazards == [(3, "__shfl_down_sync"), (5, "__activemask"), (6, "__shfl_xor_sync")]
    assert not any(getattr(f, "blocking", False) for f in findings)


def test_hip_62_keeps_the_sync_forms(tmp_path: Path) -> None:
    text, findings = run(tmp_path, (6, 2))
    assert b"__shfl_down_sync(__activemask(), v, o)" in text
    assert not any(getattr(f, "rule", "") == "sync-mask-dropped" for f in findings)


IDENT = re.compile(rb"[A-Za-z0-9_\x80-\xff]+")


@lru_cache(maxsize=1)
def _translator_52() -> Translator:
    """One translator for all examples (building one per example made this test take seconds)."""
    return Translator(load_database(), (5, 2))


ARGS = st.lists(st.sampled_from([b"v", b"x + 1", b"(a, b)", b"f(c)", b" 16 ", b"cudaSuccess"]), min_size=1, max_size=3)


@settings(max_examples=200, deadline=None)
@given(
    ARGS,
    st.sampled_from([b"__shfl_down_sync", b"__shfl_xor_sync", b"__ballot_sync", b"__shfl_sync"]),
    st.sampled_from([b"__activemask()", b"0xffffffffu", b"mask"]),
    st.binary(max_size=20),
)
def test_property_downgrade_only_drops_the_mask(args: list[bytes], name: bytes, mask: bytes, tail: bytes) -> None:
    """For HIP < 6.2 the one byte-level change besides identifiers: `name(mask, rest)` -> `name'(rest)`
    (blanks before the first kept argument go with the mask)."""
    tr = _translator_52()
    prefix = name + b"(" + mask + b", "
    src = prefix + b", ".join(args) + b");" + tail.replace(b"(", b"").replace(b")", b"")
    out = tr.translate(src).data
    expected_rest = b", ".join(args).lstrip(b" \t") + src[len(prefix) + len(b", ".join(args)) :]
    assert IDENT.sub(b"I", out) == IDENT.sub(b"I", b"f(" + expected_rest)
