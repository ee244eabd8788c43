"""Targets older than HIP 6.2 get the mask-less warp intrinsics instead of a blocked port."""

from __future__ import annotations

from pathlib import Path

from tools.hipify import HipifyOptions, hipify_tree

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
