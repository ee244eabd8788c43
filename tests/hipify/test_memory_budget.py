"""The tree pass keeps translated bytes only up to RETAIN_BYTES; beyond that a file is translated again when
written. With a zero budget (everything evicted) the results must be identical, renames and include rewrites
included, and incremental runs must behave the same."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import tools.hipify.tree as tree
from tools.hipify import HipifyOptions, hipify_tree

FILES = {
    "util.h": b"#pragma once\n#include <cuda_runtime.h>\ninline cudaError_t ok() { return cudaSuccess; }\n",
    "plain.h": b"#pragma once\nint plain();\n",
    "k.cu": b'#include "util.h"\n#include "plain.h"\n__global__ void k(float* x) { x[threadIdx.x] = 0; }\n'
    b"void run(cudaStream_t s) { float* p; cudaMalloc(&p, 4); k<<<1, 1, 0, s>>>(p); }\n",
    "sub/cuda_thing.cu": b'#include "../util.h"\nvoid f() { cudaDeviceSynchronize(); }\n',
    "latin1.cu": b"// caf\xe9\nvoid g() { cudaFree(0); }\n",
}


def make_tree(root: Path) -> Path:
    for name, data in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def snapshot(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def test_eviction_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = make_tree(tmp_path / "src")
    opts = HipifyOptions(hip_version=(5, 2))
    kept = hipify_tree([src], tmp_path / "kept", opts)
    monkeypatch.setattr(tree, "RETAIN_BYTES", 0)
    evicted = hipify_tree([src], tmp_path / "evicted", opts)
    assert snapshot(tmp_path / "kept") == snapshot(tmp_path / "evicted")
    assert "util_hip.h" in snapshot(tmp_path / "evicted")  # the rename happened and was propagated
    assert b'#include "util_hip.h"' in (tmp_path / "evicted" / "k.hip").read_bytes()
    assert [(f.file, f.line, f.name) for f in kept.findings] == [(f.file, f.line, f.name) for f in evicted.findings]


def test_eviction_keeps_incremental_behaviour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tree, "RETAIN_BYTES", 0)
    src = make_tree(tmp_path / "src")
    out = tmp_path / "out"
    opts = HipifyOptions(hip_version=(5, 2))
    hipify_tree([src], out, opts)
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    again = hipify_tree([src], out, opts)
    assert not again.written
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    (src / "latin1.cu").write_bytes(FILES["latin1.cu"] + b"void h() { cudaDeviceReset(); }\n")
    os.utime(src / "latin1.cu", ns=(1, 1))  # an old mtime: the content hash must still see the change
    third = hipify_tree([src], out, opts)
    assert [p.name for p in third.written] == ["latin1.hip"]
    assert b"hipDeviceReset" in (out / "latin1.hip").read_bytes()
