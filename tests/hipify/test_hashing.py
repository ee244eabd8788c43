"""Digests (tools/hipify/hashing.py): the same as hashlib's, and fingerprints that follow the content."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from tools.hipify import hashing
from tools.hipify.mapping import COLUMNS, load_database
from tools.hipify.translate import Translator


@pytest.mark.parametrize("size", [0, 1, 63, 64, 1000, (1 << 20) + 1, 3 << 20])
def test_sha256_hex_is_hashlibs(size: int) -> None:
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    assert hashing.sha256_hex(data) == hashlib.sha256(data).hexdigest()
    assert hashing.sha256_hex(data[:7], data[7:]) == hashlib.sha256(data).hexdigest()


def test_code_fingerprint_follows_the_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = Path(hashing.__file__).parent
    copy = tmp_path / "hipify"
    shutil.copytree(here, copy, ignore=shutil.ignore_patterns("__pycache__", "cuda2hip.tsv"))
    compute = hashing.code_fingerprint.__wrapped__  # (the cached function computes once per process)
    monkeypatch.setattr(hashing, "_HERE", str(here))
    mine = compute()
    assert mine == hashing.code_fingerprint() and len(mine) == 16
    monkeypatch.setattr(hashing, "_HERE", str(copy))
    assert compute() == mine  # the code and the rule data, not the mapping tables, nor where they are
    (copy / "translate.py").write_bytes((copy / "translate.py").read_bytes() + b"\n")
    assert compute() != mine
    (copy / "translate.py").write_bytes((here / "translate.py").read_bytes())
    (copy / "data" / "targets.tsv").write_bytes((copy / "data" / "targets.tsv").read_bytes() + b"#\n")
    assert compute() != mine


def _tsv(rows: list[tuple[str, str]]) -> str:
    lines = ["#!source\ttest", "\t".join(COLUMNS)]
    for cuda, hip in rows:
        lines.append("\t".join([cuda, hip, "function", "runtime", "1", "", "", "", "", "", "", "", ""]))
    return "\n".join(lines) + "\n"


def test_a_changed_layer_changes_the_database(tmp_path: Path) -> None:
    layer = tmp_path / "base.tsv"
    layer.write_text(_tsv([("cudaThingA", "hipThingA")]), encoding="utf-8")
    before = load_database(base=layer)
    assert before.raw_hip_name("cudaThingA") == "hipThingA"
    assert Translator(before, None).translate(b"x = cudaThingA();\n").data == b"x = hipThingA();\n"
    # Same size, same mtime: only the content differs.
    stat = layer.stat()
    layer.write_text(_tsv([("cudaThingA", "hipThingB")]), encoding="utf-8")
    os.utime(layer, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    after = load_database(base=layer)
    assert after.raw_hip_name("cudaThingA") == "hipThingB"
    assert after.fingerprint != before.fingerprint
    assert after.fingerprint == hashing.sha256_hex(layer.read_bytes())[:16]
    assert Translator(after, None).translate(b"x = cudaThingA();\n").data == b"x = hipThingB();\n"


@pytest.mark.parametrize("size", [0, 10, (1 << 20) - 1, 1 << 20, (3 << 20) + 7])
def test_file_sha256_hex_is_hashlibs(tmp_path: Path, size: int) -> None:
    data = (bytes(range(251)) * (size // 251 + 1))[:size]
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    with open(path, "rb") as fh:
        assert hashing.file_sha256_hex(fh) == hashlib.sha256(data).hexdigest()
